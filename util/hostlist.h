/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Host lists as clusters write them (Slurm, pdsh): "dst[01-16]",
 * "node[1-3,7],login2", "rack[1-2]n[01-04]". Pure: no I/O.
 */
#ifndef RDCP_HOSTLIST_H
#define RDCP_HOSTLIST_H

#include <stddef.h>

/* At most this many names from one list (a typo must not eat memory). */
#define HOSTLIST_MAX 65536u

/*
 * Expands spec: names separated by commas outside brackets; in a name,
 * each "[...]" holds numbers and ranges "a-b" separated by commas, and
 * the name is repeated for each, left bracket outermost; a range keeps
 * the width of its first bound ("[01-16]": 01 .. 16). A name starting
 * with '[' is an IPv6 literal ("[fe80::1]:7500"), kept as it is, and so
 * is anything after a ':' in a name (a port). Returns the number of
 * names (>= 1) with a NULL-terminated array of strings in *out (free
 * with hostlist_free), or -EINVAL (empty name, unbalanced or empty
 * brackets, not a number, a range backwards), -E2BIG (more than
 * HOSTLIST_MAX names) or -ENOMEM. With -EINVAL, *why says what (static).
 */
int hostlist_expand(const char *spec, char ***out, const char **why)
	__attribute__((warn_unused_result));

void hostlist_free(char **names);

#endif
