/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * One zlib stream per chunk, straight between the caller's buffers: no
 * staging copy, no shared state. Compression gives zlib only as much
 * output room as a worthwhile result may take, so a chunk that will not
 * shrink enough stops as soon as it overflows that room instead of being
 * compressed in full and thrown away.
 *
 * Early give-up: for a chunk above ZC_PROBE bytes the first ZC_PROBE bytes
 * are compressed and flushed (Z_SYNC_FLUSH) in the same stream, at the
 * chosen level, and the chunk goes raw unless that prefix saved 1/16. On
 * incompressible data (already compressed or encrypted files) this costs
 * 1/16 of compressing a 1 MiB chunk instead of ~15/16. On compressible
 * data it costs nothing: the prefix's work is kept, and the flush adds an
 * empty stored block (about 5 bytes). A separate level-1 probe stream, the
 * other way to do it, would pay a second deflateInit (~270 KiB of state)
 * and redo the prefix on every compressible chunk. The price is a chunk
 * whose first 64 KiB are incompressible but whose rest is not: it goes
 * raw, which is always correct, only less compact.
 */
#define ZLIB_CONST
#include "util/zchunk.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <zlib.h>

/* Bytes compressed and flushed before deciding whether to go on. */
#define ZC_PROBE ((size_t)64 << 10)
/* zlib's defaults: a 32 KiB window, 128 KiB of hash state. */
#define ZC_WINDOW_BITS 15
#define ZC_MEM_LEVEL 8

/* Most bytes a compressed copy of len bytes may take: 1/16 saved. */
static size_t zc_worth(size_t len)
{
	return len - (len + 15) / 16;
}

/*
 * Compresses and flushes the first ZC_PROBE bytes of the input; leaves
 * the rest for Z_FINISH. Returns 1 when the prefix saved 1/16 and fit in
 * the output room, 0 when the chunk should go raw, or -EIO.
 */
static int zc_probe(z_stream *s)
{
	uInt rest = s->avail_in - (uInt)ZC_PROBE;
	int zret;

	s->avail_in = (uInt)ZC_PROBE;
	zret = deflate(s, Z_SYNC_FLUSH);
	if (zret == Z_BUF_ERROR)
		return 0;
	if (zret != Z_OK)
		return -EIO;
	/* input left or no room left: the flush did not complete */
	if (s->avail_in || !s->avail_out)
		return 0;
	s->avail_in = rest;
	return s->total_out <= zc_worth(ZC_PROBE);
}

/* Runs the stream set up by zchunk_compress(); same return contract. */
static long zc_deflate(z_stream *s, size_t len)
{
	int zret;

	if (len > ZC_PROBE) {
		int ret = zc_probe(s);

		if (ret <= 0)
			return ret;
	}
	zret = deflate(s, Z_FINISH);
	if (zret == Z_STREAM_END)
		return (long)s->total_out;
	/* out of output room before the end: not worth it */
	if (zret == Z_OK || zret == Z_BUF_ERROR)
		return 0;
	return -EIO;
}

long zchunk_compress(int level, const void *src, size_t len, void *dst,
		     size_t cap)
{
	z_stream s = { 0 };
	size_t limit;
	long ret;
	int zret;

	if (level < ZCHUNK_LEVEL_MIN || level > ZCHUNK_LEVEL_MAX)
		return -EINVAL;
	if (len > UINT_MAX || len > LONG_MAX)
		return -EOVERFLOW;
	limit = zc_worth(len);
	if (cap < limit)
		limit = cap;
	if (!limit)
		return 0;

	zret = deflateInit2(&s, level, Z_DEFLATED, ZC_WINDOW_BITS, ZC_MEM_LEVEL,
			    Z_DEFAULT_STRATEGY);
	if (zret != Z_OK)
		return zret == Z_MEM_ERROR ? -ENOMEM : -EIO;
	s.next_in = src;
	s.avail_in = (uInt)len;
	s.next_out = dst;
	s.avail_out = (uInt)limit;
	ret = zc_deflate(&s, len);
	/*
	 * Frees the state whatever happened; its Z_DATA_ERROR only says the
	 * stream was given up before the end, which is the point when 0.
	 */
	(void)deflateEnd(&s);
	return ret;
}

/* Maps the result of the one inflate(Z_FINISH) call. */
static int zc_inflated(const z_stream *s, int zret, size_t raw_len)
{
	switch (zret) {
	case Z_STREAM_END:
		/* ended: exactly raw_len bytes and nothing after it */
		return s->total_out == raw_len && !s->avail_in ? 0 : -EBADMSG;
	case Z_MEM_ERROR:
		return -ENOMEM;
	case Z_STREAM_ERROR:
		return -EIO;
	default:
		/*
		 * Z_DATA_ERROR: corrupt or bad Adler-32; Z_NEED_DICT: not
		 * ours; Z_BUF_ERROR / Z_OK: input ended early or the output
		 * would run past raw_len.
		 */
		return -EBADMSG;
	}
}

int zchunk_decompress(const void *src, size_t len, void *dst, size_t raw_len)
{
	unsigned char none;
	z_stream s = { 0 };
	int zret, ret;

	if (len > UINT_MAX || raw_len > UINT_MAX)
		return -EOVERFLOW;
	zret = inflateInit(&s);
	if (zret != Z_OK)
		return zret == Z_MEM_ERROR ? -ENOMEM : -EIO;
	s.next_in = src;
	s.avail_in = (uInt)len;
	/* zlib refuses a NULL next_out even with no room */
	s.next_out = raw_len ? dst : &none;
	s.avail_out = (uInt)raw_len;
	/* one step: all output fits, so inflate needs no window of its own */
	zret = inflate(&s, Z_FINISH);
	ret = zc_inflated(&s, zret, raw_len);
	(void)inflateEnd(&s);
	return ret;
}
