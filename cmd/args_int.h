/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to args.c and args_check.c: argp's input while the command line
 * is parsed (args.c, an option at a time), and the checks run at its end
 * (args_check.c).
 */
#ifndef RDCP_ARGS_INT_H
#define RDCP_ARGS_INT_H

#include <argp.h>
#include <stdbool.h>
#include <stddef.h>

#include "cmd/args.h"
#include "cmd/config.h"

/* One --include/--exclude(-from), kept in order until -0 is known. */
struct args_rule {
	bool include, from_file;
	const char *arg;
};

/* argp's input: the result, and the operands while they are sorted out. */
struct args_state {
	struct args *a;
	const char **srcs; /* operands; a copy's SRCs once DEST is split off */
	size_t nsrcs;
	struct args_rule *rules;
	size_t nrules;
	bool from0;
	bool print_config;
	const char *port_arg;	  /* -P on the command line (not rdcp.conf's) */
	struct config_seen *seen; /* every option, in order: --print-config */
	size_t nseen;
	const struct config_entry *from; /* the option being parsed's */
};

/*
 * argp_error(), naming the rdcp.conf line when the option came from one
 * (state->input is the struct args_state): message, usage line, exit
 * RDCP_EXIT_USAGE. Every usage error of the two files goes through here.
 */
void args_opt_error(const struct argp_state *state, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The end of the command line (ARGP_KEY_END): the checks that options go
 * together, a copy's operands sorted into a->o (cmd/operands.c), the
 * receiver's default clients and modules, the filter rules compiled. A
 * usage error exits through args_opt_error; out of memory exits too.
 */
void args_check(struct args_state *ps, struct argp_state *state);

#endif
