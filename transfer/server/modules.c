/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's access rules: which key a session proves (the site's one
 * key, or a named client's from --clients), and with --modules which
 * module its paths name and whether its client may use it from where it
 * is (read for a pull, write for a push, hosts=, require-encrypt,
 * max-sessions). The configuration is read at the start and again on
 * SIGHUP (server_reload); each session keeps the one it began under.
 * Refusals tell the client only what it may see: a module it can neither
 * read nor write answers as one that does not exist, and the log names
 * the rule.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "transfer/server/server_int.h"
#include "util/log.h"

/* Each problem of the modules file, logged. */
static void conf_err(void *arg, const char *line)
{
	(void)arg;
	log_err("%s", line);
}

/* Reads o's client keys and modules into a new *out. 0 or -errno (said). */
static int access_load(const struct xfer_opts *o, struct access_cfg **out)
{
	struct access_cfg *c = calloc(1, sizeof(*c));
	int rc = 0;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->refs = 1;
	if (o->serve.clients_dir)
		rc = key_dir_load(o->serve.clients_dir, &c->clients);
	if (!rc && o->serve.modules_file)
		rc = modconf_load(o->serve.modules_file, &c->mods, conf_err,
				  NULL);
	if (rc) {
		key_dir_release(&c->clients);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void access_free(struct access_cfg *c)
{
	key_dir_release(&c->clients);
	modconf_release(&c->mods);
	free(c);
}

/* Drops a reference to c; srv->lock held. Whether c is to be freed. */
static bool access_put_locked(struct access_cfg *c)
{
	return c && !--c->refs;
}

void server_cfg_put(struct server *srv, struct access_cfg *c)
{
	bool drop;

	pthread_mutex_lock(&srv->lock);
	drop = access_put_locked(c);
	pthread_mutex_unlock(&srv->lock);
	if (drop)
		access_free(c);
}

int server_access_init(struct server *srv)
{
	const struct xfer_opts *o = srv->o;
	int rc = access_load(o, &srv->cfg);

	if (rc)
		return rc;
	if (o->serve.clients_dir || o->serve.modules_file)
		log_note("serving %zu named client%s%s%s%s, %zu module%s%s%s",
			 srv->cfg->clients.n,
			 srv->cfg->clients.n == 1 ? "" : "s",
			 o->serve.clients_dir ? " from '" : "",
			 o->serve.clients_dir ? o->serve.clients_dir : "",
			 o->serve.clients_dir ? "'" : "", srv->cfg->mods.n,
			 srv->cfg->mods.n == 1 ? "" : "s",
			 o->serve.modules_file ? " from " : "",
			 o->serve.modules_file ? o->serve.modules_file : "");
	return 0;
}

int server_reload(struct server *srv)
{
	struct access_cfg *c, *old;
	bool drop;
	int rc = access_load(srv->o, &c);

	if (rc) {
		log_err("reload: the client keys or modules above are not "
			"usable: keeping the configuration in use");
		return rc;
	}
	pthread_mutex_lock(&srv->lock);
	old = srv->cfg;
	srv->cfg = c;
	drop = access_put_locked(old);
	pthread_mutex_unlock(&srv->lock);
	if (drop)
		access_free(old);
	log_note("reload: %zu named client%s, %zu module%s; running sessions "
		 "keep what they started with",
		 c->clients.n, c->clients.n == 1 ? "" : "s", c->mods.n,
		 c->mods.n == 1 ? "" : "s");
	return 0;
}

void server_access_release(struct server *srv)
{
	bool drop;

	pthread_mutex_lock(&srv->lock);
	drop = access_put_locked(srv->cfg);
	pthread_mutex_unlock(&srv->lock);
	if (drop)
		access_free(srv->cfg);
	srv->cfg = NULL;
	free(srv->counts);
	srv->counts = NULL;
	srv->ncounts = 0;
}

void server_session_begin(struct server *srv, struct server_session *s)
{
	*s = (struct server_session){ .module = "-", .modfd = -1 };
	s->client = srv->o->ssh.ssh_server ? "one-time-key"
		    : srv->key		   ? "site-key"
					   : "-";
	s->key = srv->key;
	pthread_mutex_lock(&srv->lock);
	s->cfg = srv->cfg;
	if (s->cfg)
		s->cfg->refs++;
	pthread_mutex_unlock(&srv->lock);
}

void server_session_key(struct server *srv, struct server_session *s,
			const struct wire_hello *h)
{
	const uint8_t *k = NULL;

	if (!srv->auth)
		return;
	if (h->client[0]) {
		snprintf(s->client_buf, sizeof(s->client_buf), "%s", h->client);
		s->client = s->client_buf;
		k = s->cfg && !srv->o->ssh.ssh_server
			    ? key_dir_find(&s->cfg->clients, h->client)
			    : NULL;
		if (!k)
			s->key_miss = "this receiver has no key of that name";
	} else {
		k = srv->key;
		if (!k)
			s->key_miss = "this receiver has no site key, only "
				      "named clients' (--clients)";
	}
	if (!k) {
		/* Fails the MAC as a wrong key does: nothing more is told. */
		if (getrandom(s->dummy, sizeof(s->dummy), 0) !=
		    (ssize_t)sizeof(s->dummy))
			memset(s->dummy, 0xa5, sizeof(s->dummy));
		k = s->dummy;
	}
	s->key = k;
}

/* The slot of module name in srv->counts, made if missing; lock held. */
static struct module_count *count_of(struct server *srv, const char *name)
{
	struct module_count *v;

	for (size_t i = 0; i < srv->ncounts; i++)
		if (!strcmp(srv->counts[i].name, name))
			return &srv->counts[i];
	v = realloc(srv->counts, (srv->ncounts + 1) * sizeof(*v));
	if (!v)
		return NULL;
	srv->counts = v;
	v = &srv->counts[srv->ncounts++];
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->sessions = 0;
	return v;
}

/*
 * A HELLO path's module: its first component (after any '/' or "./"),
 * into name; the rest, from the component after it, in *rest. false when
 * the first component is empty or too long to be a module's.
 */
static bool split_module(const char *p, char name[MODCONF_NAME_MAX + 1],
			 const char **rest)
{
	size_t n;

	for (;;) {
		if (*p == '/')
			p++;
		else if (p[0] == '.' && p[1] == '/')
			p += 2;
		else
			break;
	}
	n = strcspn(p, "/");
	if (!n || n > MODCONF_NAME_MAX)
		return false;
	memcpy(name, p, n);
	name[n] = '\0';
	p += n;
	while (*p == '/')
		p++;
	*rest = p;
	return true;
}

/* h's paths with each one's first component gone. 0 or -ENAMETOOLONG. */
static int strip_paths(struct wire_hello *h)
{
	char buf[WIRE_PATHS_MAX];
	uint16_t n = h->npaths, len = h->paths_len;
	size_t off = 0;
	int rc = 0;

	memcpy(buf, h->paths, len);
	h->npaths = 0;
	h->paths_len = 0;
	for (uint16_t i = 0; i < n && !rc && off < len; i++) {
		char name[MODCONF_NAME_MAX + 1];
		const char *rest = "", *p = buf + off;

		off += strlen(p) + 1;
		if (!split_module(p, name, &rest))
			rest = "";
		rc = wire_hello_add_path(h, rest);
	}
	return rc;
}

/* The peer's address without its port ("10.0.0.5:4000", "fe80::1:4000"). */
static void peer_addr(const char *peer, char *out, size_t n)
{
	const char *colon = strrchr(peer, ':');

	snprintf(out, n, "%.*s",
		 colon ? (int)(colon - peer) : (int)strlen(peer), peer);
	if (out[0] == '[') { /* [v6] */
		size_t l = strlen(out);

		memmove(out, out + 1, l);
		if (l > 1 && out[l - 2] == ']')
			out[l - 2] = '\0';
	}
}

int server_session_module(struct server *srv, struct server_session *s,
			  struct wire_hello *h, const char *peer,
			  enum xfer_fail *fail, char *why, size_t whysz)
{
	const struct modconf_module *m;
	char name[MODCONF_NAME_MAX + 1], other[MODCONF_NAME_MAX + 1];
	char addr[64], esc[200];
	const char *rest;
	bool push = h->role == WIRE_PUSH, readable, writable;
	int fd;

	if (!s->cfg || !s->cfg->mods.n || srv->o->ssh.ssh_server)
		return 0;
	*fail = XFER_FAIL_AUTH;
	if (!h->npaths || !split_module(wire_hello_path(h, 0), name, &rest)) {
		snprintf(why, whysz,
			 "name a module: HOST::MODULE/PATH (this receiver "
			 "serves modules, not one root)");
		*fail = XFER_FAIL_USAGE;
		return -EINVAL;
	}
	for (unsigned int i = 1; i < h->npaths; i++)
		if (!split_module(wire_hello_path(h, i), other, &rest) ||
		    strcmp(other, name)) {
			snprintf(why, whysz,
				 "all sources of one copy must be in the same "
				 "module");
			*fail = XFER_FAIL_USAGE;
			return -EINVAL;
		}
	m = modconf_find(&s->cfg->mods, name);
	readable = m && modconf_names_has(&m->read, s->client);
	writable = m && modconf_names_has(&m->write, s->client);
	log_escape(esc, sizeof(esc), name);
	/* Neither: the module does not exist for this client. */
	if (!readable && !writable) {
		log_warn("refused %s: module '%s': %s", peer, esc,
			 m ? "the client is on neither read= nor write="
			   : "no such module");
		snprintf(why, whysz, "unknown module '%s' (client %s)", esc,
			 s->client);
		return -ENOENT;
	}
	s->mod = m;
	snprintf(s->module_buf, sizeof(s->module_buf), "%s", m->name);
	s->module = s->module_buf;
	peer_addr(peer, addr, sizeof(addr));
	if (!modconf_host_allowed(m, addr)) {
		snprintf(why, whysz,
			 "module %s: client %s may not use it from %s "
			 "(hosts=)",
			 m->name, s->client, addr);
		return -EACCES;
	}
	if (push ? !writable : !readable) {
		snprintf(why, whysz, "module %s: client %s may not %s", m->name,
			 s->client, push ? "write" : "read");
		return -EACCES;
	}
	if (m->require_encrypt && !(h->flags & WIRE_HELLO_ENCRYPT)) {
		snprintf(why, whysz,
			 "module %s requires --encrypt (run the copy with "
			 "--encrypt)",
			 m->name);
		return -EACCES;
	}
	if (m->max_sessions) {
		struct module_count *c;
		bool full;

		pthread_mutex_lock(&srv->lock);
		c = count_of(srv, m->name);
		full = !c || c->sessions >= m->max_sessions;
		if (!full) {
			c->sessions++;
			s->counted = true;
		}
		pthread_mutex_unlock(&srv->lock);
		if (full) {
			snprintf(why, whysz,
				 "module %s is at its session limit (%u "
				 "sessions), try again later",
				 m->name, m->max_sessions);
			*fail = XFER_FAIL_CONNECT;
			return -EBUSY;
		}
	}
	fd = open(m->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		log_err("module %s: cannot use its path '%s': %s", m->name,
			m->path, strerror(err));
		snprintf(why, whysz, "module %s cannot be used now", m->name);
		*fail = XFER_FAIL_LOCAL_IO;
		return -err;
	}
	s->modfd = fd;
	if (strip_paths(h)) {
		snprintf(why, whysz, "paths too long");
		*fail = XFER_FAIL_USAGE;
		return -ENAMETOOLONG;
	}
	return 0;
}

void server_session_end(struct server *srv, struct server_session *s)
{
	struct access_cfg *c = s->cfg;
	bool drop;

	pthread_mutex_lock(&srv->lock);
	if (s->counted) {
		struct module_count *n = count_of(srv, s->mod->name);

		if (n && n->sessions)
			n->sessions--;
	}
	drop = access_put_locked(c);
	pthread_mutex_unlock(&srv->lock);
	if (drop)
		access_free(c);
	if (s->modfd >= 0)
		close(s->modfd);
	OPENSSL_cleanse(s->dummy, sizeof(s->dummy));
	s->cfg = NULL;
	s->mod = NULL;
	s->modfd = -1;
	s->counted = false;
}
