/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Human units for sizes and rates. Parsing: a plain number is bytes;
 * K, M, G, T (also KiB, MiB, GiB, TiB, case-insensitive k) are powers of
 * 1024; KB, MB, GB, TB are powers of 1000 (SI). Printing uses 1024-based
 * units with an "i" (MiB) for sizes, SI for rates (MB/s), as ib_write_bw.
 */
#ifndef RDCP_UNITS_H
#define RDCP_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0, -EINVAL (not a size) or -ERANGE (overflows 64 bits). */
int units_parse_size(const char *s, uint64_t *out)
	__attribute__((warn_unused_result));

/* "0 B", "1023 B", "1.00 KiB", "4.00 MiB"; returns buf. */
char *units_format_size(uint64_t bytes, char *buf, size_t bufsz);

/* bytes_per_s in SI: "29.3 MB/s", "12.1 GB/s"; returns buf. */
char *units_format_rate(double bytes_per_s, char *buf, size_t bufsz);

#endif
