/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The receiver's modules file: parsed and looked up; see modconf.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io.h"
#include "util/modconf.h"
#include "util/units.h"

#define MODCONF_ERRS_MAX 50
#define MODCONF_FILE_MAX (1u << 20)

struct parser {
	const char *fname;
	unsigned int line;
	unsigned int errs;
	void (*on_err)(void *arg, const char *line);
	void *arg;
	struct modconf *c;
	struct modconf_module *m; /* the module being read, or NULL */
	unsigned int seen;	  /* its keys so far, bits of enum key */
	bool skip; /* after a [NAME] refused: its settings go unsaid */
	bool oom;
};

__attribute__((format(printf, 2, 3))) static void problem(struct parser *p,
							  const char *fmt, ...)
{
	char msg[512], line[700];
	va_list ap;

	if (p->errs++ >= MODCONF_ERRS_MAX || !p->on_err)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s:%u: %s", p->fname, p->line, msg);
	p->on_err(p->arg, line);
}

static char *trim(char *s)
{
	char *e;

	s += strspn(s, " \t");
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static bool name_ok(const char *s)
{
	return key_name_valid(s);
}

/* What a list may name: a client, "site-key" or "*". */
static bool list_name_ok(const char *s)
{
	return !strcmp(s, "*") || !strcmp(s, "site-key") || key_name_valid(s);
}

/* "a, b c": names split on commas and blanks into l. */
static void parse_names(struct parser *p, const char *key, char *val,
			struct modconf_names *l)
{
	char *save = NULL;

	for (char *t = strtok_r(val, ", \t", &save); t;
	     t = strtok_r(NULL, ", \t", &save)) {
		void *v;

		if (!list_name_ok(t)) {
			problem(p,
				"%s: '%.80s' is no client name (1 to %d of "
				"A-Z a-z 0-9 . _ -, or site-key, or *)",
				key, t, KEY_NAME_MAX);
			continue;
		}
		v = realloc(l->v, (l->n + 1) * sizeof(*l->v));
		if (!v) {
			p->oom = true;
			return;
		}
		l->v = v;
		snprintf(l->v[l->n++], sizeof(*l->v), "%s", t);
	}
}

int modconf_parse_cidr(const char *s, struct modconf_cidr *c)
{
	char buf[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long bits;
	char *end;

	if (alen >= INET6_ADDRSTRLEN)
		return -EINVAL;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, buf, c->addr) == 1)
		c->family = 4;
	else if (inet_pton(AF_INET6, buf, c->addr) == 1)
		c->family = 6;
	else
		return -EINVAL;
	c->prefix = c->family == 4 ? 32 : 128;
	if (slash) {
		if (!slash[1] || slash[1] == '-' || slash[1] == '+')
			return -EINVAL;
		errno = 0;
		bits = strtoul(slash + 1, &end, 10);
		if (errno || *end || bits > c->prefix)
			return -EINVAL;
		c->prefix = (uint8_t)bits;
	}
	/* Host bits set: 10.1.2.3/24 is a typo more often than a wish. */
	for (unsigned int i = c->prefix; i < (c->family == 4 ? 32u : 128u); i++)
		if (c->addr[i / 8] & (0x80 >> (i % 8)))
			return -EINVAL;
	return 0;
}

static void parse_hosts(struct parser *p, char *val, struct modconf_module *m)
{
	char *save = NULL;

	for (char *t = strtok_r(val, ", \t", &save); t;
	     t = strtok_r(NULL, ", \t", &save)) {
		struct modconf_cidr c;
		void *v;

		if (modconf_parse_cidr(t, &c)) {
			problem(p,
				"hosts: '%.80s' is no address block (such as "
				"10.1.2.0/24, 2001:db8::/32 or one address; "
				"no bits set past the prefix)",
				t);
			continue;
		}
		v = realloc(m->hosts, (m->nhosts + 1) * sizeof(*m->hosts));
		if (!v) {
			p->oom = true;
			return;
		}
		m->hosts = v;
		m->hosts[m->nhosts++] = c;
	}
}

enum key {
	K_PATH = 1 << 0,
	K_READ = 1 << 1,
	K_WRITE = 1 << 2,
	K_HOSTS = 1 << 3,
	K_MAX_SESSIONS = 1 << 4,
	K_REQUIRE_ENCRYPT = 1 << 5,
	K_QUOTA = 1 << 6,
	K_MAX_BYTES = 1 << 7,
};

static const struct {
	const char *name;
	enum key k;
} keys[] = {
	{ "path", K_PATH },
	{ "read", K_READ },
	{ "write", K_WRITE },
	{ "hosts", K_HOSTS },
	{ "max-sessions", K_MAX_SESSIONS },
	{ "require-encrypt", K_REQUIRE_ENCRYPT },
	{ "quota", K_QUOTA },
	{ "max-bytes", K_MAX_BYTES },
};

/* A module's end: what it must have. */
static void module_end(struct parser *p)
{
	unsigned int line = p->line;

	if (!p->m)
		return;
	if (!(p->seen & K_PATH)) {
		p->line = p->m->line;
		problem(p, "module %s has no path", p->m->name);
		p->line = line;
	}
	p->m = NULL;
}

static void section(struct parser *p, char *s)
{
	char *close = strchr(s, ']');
	char *name;
	void *v;

	module_end(p);
	p->skip = true;
	if (!close || *trim(close + 1)) {
		problem(p, "a module line is [NAME] and nothing after it");
		return;
	}
	*close = '\0';
	name = trim(s + 1);
	if (!name_ok(name)) {
		problem(p,
			"'[%.80s]': a module's name is 1 to %d of A-Z a-z 0-9 "
			". _ -",
			name, MODCONF_NAME_MAX);
		return;
	}
	for (size_t i = 0; i < p->c->n; i++)
		if (!strcmp(p->c->v[i].name, name)) {
			problem(p, "module %s again (first on line %u)", name,
				p->c->v[i].line);
			return;
		}
	v = realloc(p->c->v, (p->c->n + 1) * sizeof(*p->c->v));
	if (!v) {
		p->oom = true;
		return;
	}
	p->c->v = v;
	p->m = &p->c->v[p->c->n++];
	memset(p->m, 0, sizeof(*p->m));
	snprintf(p->m->name, sizeof(p->m->name), "%s", name);
	p->m->line = p->line;
	p->seen = 0;
	p->skip = false;
}

static bool yes_no(const char *v, bool *out)
{
	if (!*v || !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
		*out = true;
	else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0"))
		*out = false;
	else
		return false;
	return true;
}

/* A byte limit: a size (util/units.h) of at least 1 byte, no sign. */
static bool size_ok(const char *v, uint64_t *out)
{
	return v[0] >= '0' && v[0] <= '9' && !units_parse_size(v, out) && *out;
}

static void setting(struct parser *p, char *s)
{
	char *eq = strchr(s, '=');
	char *key = s, *val = (char *)"";
	enum key k = 0;

	if (eq) {
		*eq = '\0';
		val = trim(eq + 1);
	}
	key = trim(key);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i].name))
			k = keys[i].k;
	if (!k) {
		problem(p,
			"unknown setting '%.80s' (path, read, write, hosts, "
			"max-sessions, require-encrypt, quota, max-bytes)",
			key);
		return;
	}
	if (!p->m) {
		if (!p->skip)
			problem(p,
				"'%s' outside a module: start one with "
				"[NAME] first",
				key);
		return;
	}
	if (p->seen & k) {
		problem(p, "%s again in module %s", key, p->m->name);
		return;
	}
	p->seen |= k;
	if (k != K_REQUIRE_ENCRYPT && !eq) {
		problem(p, "%s needs a value: %s = ...", key, key);
		return;
	}
	switch (k) {
	case K_PATH:
		if (val[0] != '/') {
			problem(p, "path '%.200s' is not absolute", val);
			break;
		}
		p->m->path = strdup(val);
		p->oom |= !p->m->path;
		break;
	case K_READ:
		parse_names(p, key, val, &p->m->read);
		break;
	case K_WRITE:
		parse_names(p, key, val, &p->m->write);
		break;
	case K_HOSTS:
		if (!val[strspn(val, ", \t")])
			problem(p, "hosts names no address");
		else
			parse_hosts(p, val, p->m);
		break;
	case K_MAX_SESSIONS: {
		char *end;
		unsigned long n;

		errno = 0;
		n = strtoul(val, &end, 10);
		if (errno || *end || !*val || val[0] == '-' || !n || n > 65535)
			problem(p, "max-sessions '%.80s' is not 1..65535", val);
		else
			p->m->max_sessions = (unsigned int)n;
		break;
	}
	case K_QUOTA:
	case K_MAX_BYTES:
		if (!size_ok(val,
			     k == K_QUOTA ? &p->m->quota : &p->m->max_bytes))
			problem(p,
				"%s '%.80s' is not a size of at least 1 byte "
				"(such as 500G, 20T or 1048576)",
				key, val);
		break;
	case K_REQUIRE_ENCRYPT:
		if (!yes_no(val, &p->m->require_encrypt))
			problem(p, "require-encrypt '%.80s' is not yes or no",
				val);
		break;
	}
}

int modconf_parse(const char *text, size_t len, const char *fname,
		  struct modconf *out,
		  void (*on_err)(void *arg, const char *line), void *arg)
{
	struct parser p = { .fname = fname, .on_err = on_err, .arg = arg };
	char *buf = malloc(MODCONF_LINE_MAX + 1);
	size_t off = 0;

	*out = (struct modconf){ 0 };
	if (!buf)
		return -ENOMEM;
	p.c = out;
	while (off < len && !p.oom) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - text - off) : len - off;
		char *s;

		p.line++;
		if (n > MODCONF_LINE_MAX) {
			problem(&p, "line longer than %d bytes",
				MODCONF_LINE_MAX);
		} else if (memchr(text + off, '\0', n)) {
			problem(&p, "a NUL byte: not a text file");
		} else {
			memcpy(buf, text + off, n);
			buf[n] = '\0';
			s = trim(buf);
			if (!*s || *s == '#' || *s == ';')
				;
			else if (*s == '[')
				section(&p, s);
			else
				setting(&p, s);
		}
		off += n + (nl ? 1 : 0);
	}
	if (!p.oom)
		module_end(&p);
	free(buf);
	if (p.oom || p.errs) {
		modconf_release(out);
		return p.oom ? -ENOMEM : -EINVAL;
	}
	return 0;
}

int modconf_load(const char *path, struct modconf *out,
		 void (*on_err)(void *arg, const char *line), void *arg)
{
	char msg[600], *text = NULL;
	struct stat st;
	int fd, rc = 0;

	*out = (struct modconf){ 0 };
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
	} else if (fstat(fd, &st) < 0) {
		rc = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
	} else if (st.st_size > MODCONF_FILE_MAX) {
		rc = -EFBIG;
	} else {
		text = malloc((size_t)st.st_size + 1);
		rc = !text ? -ENOMEM
			   : io_read_full(fd, text, (size_t)st.st_size);
	}
	if (fd >= 0)
		close(fd);
	if (rc) {
		snprintf(msg, sizeof(msg), "%s: cannot read it: %s", path,
			 rc == -EINVAL ? "not a regular file" : strerror(-rc));
		if (on_err)
			on_err(arg, msg);
		free(text);
		return rc;
	}
	rc = modconf_parse(text, (size_t)st.st_size, path, out, on_err, arg);
	free(text);
	return rc;
}

void modconf_release(struct modconf *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].path);
		free(c->v[i].read.v);
		free(c->v[i].write.v);
		free(c->v[i].hosts);
	}
	free(c->v);
	*c = (struct modconf){ 0 };
}

const struct modconf_module *modconf_find(const struct modconf *c,
					  const char *name)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (!strcmp(c->v[i].name, name))
			return &c->v[i];
	return NULL;
}

bool modconf_names_has(const struct modconf_names *l, const char *client)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], "*") || !strcmp(l->v[i], client))
			return true;
	return false;
}

bool modconf_host_allowed(const struct modconf_module *m, const char *addr)
{
	struct modconf_cidr a;

	if (!m->nhosts)
		return true;
	if (modconf_parse_cidr(addr, &a))
		return false;
	/* ::ffff:10.0.0.1, a dual-stack listener's IPv4 peer */
	if (a.family == 6 &&
	    !memcmp(a.addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
		memmove(a.addr, a.addr + 12, 4);
		memset(a.addr + 4, 0, 12);
		a.family = 4;
	}
	for (size_t i = 0; i < m->nhosts; i++) {
		const struct modconf_cidr *c = &m->hosts[i];
		unsigned int bits = c->prefix, full = bits / 8;

		if (c->family != a.family || memcmp(c->addr, a.addr, full))
			continue;
		if (bits % 8 &&
		    (c->addr[full] ^ a.addr[full]) & (0xff00 >> (bits % 8)))
			continue;
		return true;
	}
	return false;
}
