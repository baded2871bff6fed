/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: what the data roles (source.c, sink.c) tell their
 * user about files, the same way on both sides: a file's first failure as
 * one line, its report with the digest in hex, and progress at a steady
 * pace.
 */
#ifndef RDCP_REPORT_H
#define RDCP_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "transfer/xfer.h"

#define REPORT_PROGRESS_MS 250 /* at most one progress callback per */

/*
 * Records a file's failure in *err and msg (len bytes), unless one is
 * recorded already: the first failure is the cause, later ones follow
 * from it.
 */
void report_fail(int *err, char *msg, size_t len, int e, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* "crc32", "sha256" or "none". */
const char *report_csum_name(enum xfer_csum c);

/*
 * Hands r to the user's on_file callback, if any, with the digest (dlen
 * bytes, 0: none) in hex and csum's name filled in.
 */
/*
 * Why a file was kept, for xfer_file_report.reason: from HELLO's flags
 * and sync level (the first of -n, --sync, -u, --resume asked for).
 */
const char *report_skip_reason(uint32_t flags, uint8_t sync);

void report_file(const struct xfer_opts *o, struct xfer_file_report *r,
		 enum xfer_csum csum, const uint8_t *digest, unsigned int dlen);

/*
 * Calls the user's on_progress, if any, unless it was called less than
 * REPORT_PROGRESS_MS ago (*next_ms keeps the time it may next be).
 */
void report_progress(const struct xfer_opts *o, uint64_t *next_ms,
		     uint64_t done, uint64_t total, const char *path);

#endif
