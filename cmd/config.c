/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The client defaults files (config.h): read, checked, made argv. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/config.h"

static const struct argp_option *find_opt(const struct argp_option *opts,
					  const char *name, size_t len)
{
	for (const struct argp_option *o = opts; o->name || o->key || o->doc;
	     o++)
		if (o->name && strlen(o->name) == len &&
		    !strncmp(o->name, name, len))
			return o;
	return NULL;
}

static bool refused_name(const char *const *refused, const char *name)
{
	for (; refused && *refused; refused++)
		if (!strcmp(*refused, name))
			return true;
	return false;
}

#define BAD(...)                                                               \
	do {                                                                   \
		fprintf(stderr, "rdcp: %s:%u: ", file, line);                  \
		fprintf(stderr, __VA_ARGS__);                                  \
		fputc('\n', stderr);                                           \
		return -EINVAL;                                                \
	} while (0)

/* One line, its ends trimmed: an entry added to c, or nothing. */
static int parse_line(struct config *c, const struct argp_option *opts,
		      const char *const *refused, const char *file,
		      unsigned int line, char *s)
{
	const struct argp_option *o;
	struct config_entry *v;
	char *name, *val;
	size_t len;

	while (isspace((unsigned char)*s))
		s++;
	len = strlen(s);
	while (len && isspace((unsigned char)s[len - 1]))
		s[--len] = '\0';
	if (!*s || *s == '#')
		return 0;
	if (!strncmp(s, "--", 2))
		s += 2;
	name = s;
	len = strcspn(s, " \t=");
	val = s + len;
	while (isspace((unsigned char)*val))
		val++;
	if (*val == '=')
		val++;
	while (isspace((unsigned char)*val))
		val++;
	o = find_opt(opts, name, len);
	name[len] = '\0';
	if (!o)
		BAD("unknown option '%s' (long option names, without --)",
		    name);
	if (refused_name(refused, o->name))
		BAD("'%s' is not a default: give it on the command line",
		    o->name);
	if (!o->arg && *val)
		BAD("'%s' takes no value", o->name);
	if (o->arg && !(o->flags & OPTION_ARG_OPTIONAL) && !*val)
		BAD("'%s' needs a value (%s)", o->name, o->arg);
	v = realloc(c->v, (c->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->v = v;
	v[c->n] = (struct config_entry){ .opt = o, .file = file, .line = line };
	if (*val && !(v[c->n].value = strdup(val)))
		return -ENOMEM;
	c->n++;
	return 0;
}

#undef BAD

/*
 * As ssh does for its config: a file that someone else could have written
 * (owned by neither this user nor root, or writable by anyone) is not
 * read, since its lines choose the command run as ssh (rsh), the key file
 * and where copies go. 0, or -EPERM after one line on stderr.
 */
static int check_owner(FILE *f, const char *file)
{
	struct stat st;

	if (fstat(fileno(f), &st)) {
		int rc = -errno;

		fprintf(stderr, "rdcp: cannot read '%s': %s\n", file,
			strerror(-rc));
		return rc;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		fprintf(stderr,
			"rdcp: '%s' belongs to uid %u, neither you nor root: "
			"not read\n",
			file, (unsigned int)st.st_uid);
		return -EPERM;
	}
	if (st.st_mode & S_IWOTH) {
		fprintf(stderr,
			"rdcp: '%s' is writable by anyone: not read (chmod "
			"o-w '%s')\n",
			file, file);
		return -EPERM;
	}
	return 0;
}

static int read_file(struct config *c, int which,
		     const struct argp_option *opts, const char *const *refused)
{
	const char *file = c->files[which];
	char buf[CONFIG_LINE_MAX + 2];
	unsigned int line = 0;
	FILE *f;
	int rc = 0;

	if (!file)
		return 0;
	f = fopen(file, "re");
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		rc = -errno;
		fprintf(stderr, "rdcp: cannot read '%s': %s\n", file,
			strerror(-rc));
		return rc;
	}
	c->found[which] = true;
	rc = check_owner(f, file);
	while (!rc && fgets(buf, sizeof(buf), f)) {
		line++;
		if (!strchr(buf, '\n') && !feof(f)) {
			fprintf(stderr, "rdcp: %s:%u: longer than %d bytes\n",
				file, line, CONFIG_LINE_MAX);
			rc = -E2BIG;
			break;
		}
		rc = parse_line(c, opts, refused, file, line, buf);
	}
	if (!rc && ferror(f)) {
		rc = -EIO;
		fprintf(stderr, "rdcp: cannot read '%s'\n", file);
	}
	fclose(f);
	return rc;
}

int config_load(struct config *c, const char *system,
		const struct argp_option *opts, const char *const *refused)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	int rc;

	c->files[0] = strdup(system);
	if (xdg && *xdg)
		rc = asprintf(&c->files[1], "%s/rdcp/rdcp.conf", xdg);
	else if (home && *home)
		rc = asprintf(&c->files[1], "%s/.config/rdcp/rdcp.conf", home);
	else
		rc = 0;
	if (rc < 0) {
		c->files[1] = NULL;
		return -ENOMEM;
	}
	if (!c->files[0])
		return -ENOMEM;
	rc = read_file(c, 0, opts, refused);
	return rc ? rc : read_file(c, 1, opts, refused);
}

int config_argv(struct config *c, int argc, char **argv)
{
	int i;

	c->argv = calloc((size_t)argc + c->n + 1, sizeof(*c->argv));
	if (!c->argv)
		return -ENOMEM;
	c->argv[0] = argv[0];
	for (i = 0; i < (int)c->n; i++) {
		const struct config_entry *e = &c->v[i];
		int rc = e->value ? asprintf(&c->argv[i + 1], "--%s=%s",
					     e->opt->name, e->value)
				  : asprintf(&c->argv[i + 1], "--%s",
					     e->opt->name);

		if (rc < 0) {
			c->argv[i + 1] = NULL;
			return -ENOMEM;
		}
	}
	for (int j = 1; j < argc; j++)
		c->argv[c->n + (size_t)j] = argv[j];
	c->argc = argc + (int)c->n;
	return 0;
}

const struct config_entry *config_origin(const struct config *c, int i)
{
	return i >= 1 && (size_t)i <= c->n ? &c->v[i - 1] : NULL;
}

bool config_wanted(int argc, char *const *argv)
{
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--"))
			break;
		if (!strcmp(s, "--no-config"))
			return false;
		if (s[0] == '-' && s[1] == '-' && strlen(s) >= 4 &&
		    !strncmp("--listen", s, strlen(s)))
			return false;
		if (!strcmp(s, "--server"))
			return false;
		for (size_t k = 1; s[0] == '-' && s[1] != '-' && s[k]; k++) {
			if (s[k] == 'l')
				return false;
			if (s[k] == 'P' || s[k] == 'e') /* a value follows */
				break;
		}
	}
	return true;
}

const struct argp_option *config_opt_of(const struct argp_option *opts,
					 int key)
{
	for (const struct argp_option *o = opts; o->name || o->key || o->doc;
	     o++)
		if (o->key == key && o->name)
			return o;
	return NULL;
}

void config_print(const struct config *c, const struct config_seen *seen,
		  size_t n, const struct argp_option *opts,
		  bool (*adds_up)(int key))
{
	printf("# the options in effect, in the order they apply; the "
	       "command line wins\n");
	for (int i = 0; i < 2; i++)
		if (c->files[i])
			printf("# %s: %s\n", c->files[i],
			       c->found[i] ? "read" : "not there");
	if (!c->files[0])
		printf("# no defaults files read (--no-config, or a "
		       "receiver)\n");
	for (size_t i = 0; i < n; i++) {
		const struct config_seen *s = &seen[i];
		const struct argp_option *o = config_opt_of(opts, s->key);
		bool later = false;
		char where[4200];

		if (!o || !strcmp(o->name, "print-config") ||
		    !strcmp(o->name, "no-config"))
			continue;
		for (size_t j = i + 1; !adds_up(s->key) && j < n; j++)
			later |= seen[j].key == s->key;
		if (s->from)
			snprintf(where, sizeof(where), "%s:%u", s->from->file,
				 s->from->line);
		else
			snprintf(where, sizeof(where), "command line");
		printf("%s%s%s%s\t# %s%s\n", later ? "# " : "", o->name,
		       s->arg ? " " : "", s->arg ? s->arg : "", where,
		       later ? ", overridden" : "");
	}
}

void config_release(struct config *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].value);
		if (c->argv)
			free(c->argv[i + 1]);
	}
	free(c->v);
	free(c->argv);
	free(c->files[0]);
	free(c->files[1]);
	*c = (struct config){ 0 };
}
