/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A copy between two other hosts (rdcp h1:SRC h2:DEST) runs an rdcp on h1
 * that sends to the one started on h2; this is that rdcp's command line.
 */
#ifndef RDCP_FAR_H
#define RDCP_FAR_H

#include <argp.h>
#include <stddef.h>

#include "cmd/config.h"
#include "util/filter.h"

/*
 * The far rdcp's arguments, NULL-terminated, into *out: the options this
 * one was given (command line and rdcp.conf, in order, seen[0..n-1])
 * less those about local files or how to reach the hosts, the filter
 * rules as compiled here (a rules file is local), "--boot-stdin HOST",
 * the SRCs' paths and DEST's. 0 or -ENOMEM.
 */
int far_argv(const struct config_seen *seen, size_t n,
	     const struct argp_option *opts, const struct filter *f,
	     const char *dest_host, const char *const *srcs, size_t nsrcs,
	     const char *dest, char ***out);

void far_release(char **argv);

#endif
