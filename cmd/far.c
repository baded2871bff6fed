/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The command line of the far end of a copy between two remote hosts
 * (far.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/far.h"

/* Options that stay here: local files, the way to the hosts, the rules. */
static const char *const local_only[] = {
	"rsh",	    "rdcp-path",   "daemon",	   "ssh",	  "port-range",
	"manifest", "files-from",  "from0",	   "print-config", "no-config",
	"key-file", "no-auth",	   "keygen",	   "port",	  "bind",
	"root",	    "once",	   "max-sessions", "listen",	  "check",
	"server",   "boot-stdin",  "exclude",	   "include",	  "exclude-from",
	"include-from", "audit-log", "metrics", NULL,
};

static bool stays(const char *name)
{
	for (size_t i = 0; local_only[i]; i++)
		if (!strcmp(name, local_only[i]))
			return true;
	return false;
}

int far_argv(const struct config_seen *seen, size_t n,
	     const struct argp_option *opts, const struct filter *f,
	     const char *dest_host, const char *const *srcs, size_t nsrcs,
	     const char *dest, char ***out)
{
	size_t max = n + f->n + nsrcs + 4, k = 0;
	char **v = calloc(max + 1, sizeof(*v));
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct argp_option *o = config_opt_of(opts, seen[i].key);

		if (!o || stays(o->name))
			continue;
		if (seen[i].arg)
			rc = asprintf(&v[k], "--%s=%s", o->name, seen[i].arg) <
			     0;
		else
			rc = asprintf(&v[k], "--%s", o->name) < 0;
		k += !rc;
	}
	for (size_t i = 0; i < f->n && !rc; i++) {
		rc = asprintf(&v[k], "--%s=%s",
			      f->rules[i].include ? "include" : "exclude",
			      f->rules[i].text) < 0;
		k += !rc;
	}
	if (!rc)
		rc = !(v[k++] = strdup("--boot-stdin"));
	if (!rc)
		rc = !(v[k++] = strdup(dest_host));
	if (!rc)
		rc = !(v[k++] = strdup("--"));
	for (size_t i = 0; i < nsrcs && !rc; i++)
		rc = !(v[k++] = strdup(srcs[i]));
	if (!rc)
		rc = !(v[k++] = strdup(dest));
	if (rc) {
		far_release(v);
		return -ENOMEM;
	}
	*out = v;
	return 0;
}

void far_release(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}
