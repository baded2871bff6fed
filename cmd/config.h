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
	char *files[2]; /* the system's, the user's (NULL: no HOME) */
	bool found[2];	/* whether each was there to read */
	struct config_entry *v;
	size_t n;
	char **argv; /* argv[0], the entries as "--name[=value]", the rest */
	int argc;
};

/*
 * Reads both files into c (zeroed by the caller): system (CONFIG_SYSTEM;
 * tests name their own) and the user's. A missing file is no error. Options
 * that are not defaults (the actions, --files-from and the like, named in
 * refused) are refused, and so is a file that belongs to neither this
 * user nor root or that anyone may write (-EPERM). 0, or -errno after one
 * line on stderr ("rdcp: FILE:LINE: what is wrong").
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

/* An option as argp parsed it, and where it came from (NULL: the command
 * line), kept for --print-config. */
struct config_seen {
	int key;
	const char *arg;
	const struct config_entry *from;
};

/*
 * Whether to read the defaults files: not with --no-config, nor for a
 * receiver (-l, --listen or a prefix of it, or -l in a cluster of short
 * options), whose settings are its own (rdcpd.conf). Looks at argv before
 * argp parses anything.
 */
bool config_wanted(int argc, char *const *argv);

/*
 * --print-config: the files consulted, then each option seen (n of them,
 * in the order they apply) as a config line with its origin; one that a
 * later one overrides (unless adds_up(key)) is commented out.
 */
void config_print(const struct config *c, const struct config_seen *seen,
		  size_t n, const struct argp_option *opts,
		  bool (*adds_up)(int key));

/* The option of opts with key that has a long name, or NULL. */
const struct argp_option *config_opt_of(const struct argp_option *opts,
					 int key);

/* The entry behind c->argv[i], or NULL for an argument of the command line. */
const struct config_entry *config_origin(const struct config *c, int i);

void config_release(struct config *c);

#endif
