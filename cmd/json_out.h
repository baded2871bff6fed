/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --json: newline-delimited JSON events on stdout, one object per line,
 * flushed as it happens, for scripts; to a regular file the file events
 * go in stdio's blocks, flushed by the next event of another kind (out
 * is stdout: which kind of file it is is looked at once). The event types and
 * their fields are listed in rdcp(1), JSON OUTPUT (doc/rdcp.1).
 */
#ifndef RDCP_JSON_OUT_H
#define RDCP_JSON_OUT_H

#include <stdio.h>

#include "transfer/xfer.h"

void json_file(FILE *out, const struct xfer_file_report *r);
void json_error(FILE *out, enum xfer_fail f, int exit_code,
		const char *message);
/*
 * --retry: an attempt that failed (attempt from 1), the rank it was
 * rdcp-mpi's (-1: a plain rdcp), the transport it ran over ("": it had no
 * session; NULL: not told, the field left out), and whether another
 * follows after wait_ms.
 */
void json_attempt(FILE *out, int rank, unsigned int attempt, enum xfer_fail f,
		  int exit_code, const char *message, const char *transport,
		  bool again, unsigned int wait_ms);
/* The last event; retries: the attempts after the first. */
void json_summary(FILE *out, const struct xfer_stats *st, enum xfer_fail f,
		  int exit_code, bool dry_run, unsigned int retries);
/* The same with extra, JSON members ("\"a\":1,\"b\":[]"), at its end. */
void json_summary_with(FILE *out, const struct xfer_stats *st,
		       enum xfer_fail f, int exit_code, bool dry_run,
		       unsigned int retries, const char *extra);
/* s as a JSON string, quoted and escaped. */
void json_str(FILE *out, const char *s);

#endif
