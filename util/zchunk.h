/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Per-chunk zlib compression for --compress[=LEVEL]. Each call is one
 * complete zlib stream (RFC 1950: header, deflate data, Adler-32) with no
 * state shared between calls, so any thread may compress or decompress
 * any chunk. A chunk that does not shrink by at least 1/16 goes raw: the
 * caller sends the bytes as they are and flags the chunk so.
 */
#ifndef RDCP_ZCHUNK_H
#define RDCP_ZCHUNK_H

#include <stddef.h>

#define ZCHUNK_LEVEL_MIN 1
#define ZCHUNK_LEVEL_MAX 9
/* zlib's own default speed/ratio trade-off */
#define ZCHUNK_LEVEL_DEFAULT 6

/*
 * Compresses src (len bytes) into dst (cap bytes) at level 1..9. Returns
 * the compressed length when it saves at least len / 16 (rounded up) and
 * fits in cap; 0 when the chunk should go raw (incompressible, not worth
 * it, len 0, or cap too small); -EINVAL for a level outside 1..9;
 * -EOVERFLOW for len above 4 GiB - 1 (zlib counts in 32 bits); -ENOMEM;
 * -EIO if zlib reports misuse (a bug, not data). Never writes past
 * dst + cap; dst holds garbage when 0 is returned. A chunk above 64 KiB
 * whose first 64 KiB do not save 1/16 is given up early and goes raw (see
 * zchunk.c).
 */
long zchunk_compress(int level, const void *src, size_t len, void *dst,
		     size_t cap) __attribute__((warn_unused_result));

/*
 * Decompresses one zchunk_compress() stream (len bytes) into dst, which
 * must come out exactly raw_len bytes. Returns 0; -EBADMSG when the data
 * is corrupt (including a bad Adler-32), ends short of raw_len, would run
 * past it or has bytes after the end of the stream; -EOVERFLOW when len
 * or raw_len is above 4 GiB - 1; -ENOMEM; -EIO if zlib reports misuse.
 * dst is garbage after an error.
 */
int zchunk_decompress(const void *src, size_t len, void *dst, size_t raw_len)
	__attribute__((warn_unused_result));

#endif
