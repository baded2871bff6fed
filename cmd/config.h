/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The client defaults files: /etc/rdcp/rdcp.conf, then the user's
 * $XDG_CONFIG_HOME/rdcp/rdcp.conf (~/.config/rdcp/rdcp.conf), each line a
 * long option name and its value ("port 7600", "port = 7600",
 * "--port=7600"; "recursive" alone for a flag), '#' starting a comment
 * line. The entries go before the command line's own arguments into the
 * argv that argp parses, the system's first: so the user's file overrides
 * the system's and the command line both, and options that add up
 * (--exclude, -v) take the files' values first. Parsing is args.c's; this
 * reads, checks and places the lines.
 */
#ifndef RDCP_CONFIG_H
#define RDCP_CONFIG_H

#include <argp.h>
#include <stdbool.h>
#include <stddef.h>

#define CONFIG_SYSTEM "/etc/rdcp/rdcp.conf"
#define CONFIG_LINE_MAX 4096 /* bytes of one line */

struct config_entry {
	const struct argp_option *opt; /* the option it sets */
	char *value;		       /* NULL: a flag */
	const char *file;	       /* one of config.files */
	unsigned int line;
};

struct config {
	char *files[2];	 /* the system's, the user's (NULL: no HOME) */
	bool found[2];	 /* whether each was there to read */
	struct config_entry *v;
	size_t n;
	char **argv; /* argv[0], the entries as "--name[=value]", the rest */
	int argc;
};

/*
 * Reads both files into c (zeroed by the caller): system (CONFIG_SYSTEM;
 * tests name their own) and the user's. A missing file is no error. Options that are not defaults (the actions, --files-from and
 * the like, named in refused) are refused. 0, or -errno after one line
 * on stderr ("rdcp: FILE:LINE: what is wrong").
 */
int config_load(struct config *c, const char *system,
		const struct argp_option *opts, const char *const *refused)
	__attribute__((warn_unused_result));

/*
 * Builds c->argv: argv[0], c's entries, then argv[1..argc). The strings
 * of argv are shared, not copied. 0 or -ENOMEM.
 */
int config_argv(struct config *c, int argc, char **argv)
	__attribute__((warn_unused_result));

/* The entry behind c->argv[i], or NULL for an argument of the command line. */
const struct config_entry *config_origin(const struct config *c, int i);

void config_release(struct config *c);

#endif
