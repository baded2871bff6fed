/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for util/zchunk: text compresses and round-trips at every
 * level and size (1 B goes raw: zlib's 6 bytes of framing cannot save
 * anything); fixed-seed random bytes and a random 64 KiB prefix go raw;
 * corrupted (any single bit but the final block's padding), truncated,
 * over-long data and a wrong raw_len are -EBADMSG; a cap below the
 * compressed size gives 0 and nothing is written past it.
 */
#include "tap.h"

#include "util/zchunk.h"

#include <errno.h>
#include <stdint.h>

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)
/* Guard bytes after dst that must come back untouched. */
#define CANARY 64
#define CANARY_BYTE 0xa5

/* xorshift64: a fixed-seed PRNG so every run sees the same bytes. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* English-like text: words picked at random, compresses ~3:1. */
static void fill_text(unsigned char *buf, size_t len, uint64_t seed)
{
	static const char *const words[] = {
		"the",	 "remote", "direct", "memory",	   "access",   "file",
		"chunk", "ring",   "credit", "sender",	   "receiver", "queue",
		"pair",	 "of",	   "and",    "completion", "checksum", "bytes",
		"write", "to",	   "a",
	};
	const size_t nwords = sizeof(words) / sizeof(words[0]);
	size_t i = 0;

	while (i < len) {
		const char *w = words[rng_next(&seed) % nwords];

		while (*w && i < len)
			buf[i++] = (unsigned char)*w++;
		if (i < len)
			buf[i++] = rng_next(&seed) % 11 ? ' ' : '\n';
	}
}

static void fill_random(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(rng_next(&seed) >> 56);
}

/* dst of cap bytes followed by CANARY guard bytes */
static unsigned char *alloc_guarded(size_t cap)
{
	unsigned char *p = malloc(cap + CANARY);

	if (p)
		memset(p + cap, CANARY_BYTE, CANARY);
	return p;
}

static int guard_intact(const unsigned char *p, size_t cap)
{
	for (size_t i = 0; i < CANARY; i++)
		if (p[cap + i] != CANARY_BYTE)
			return 0;
	return 1;
}

/* Compresses buf at level, checks the contract, decompresses and compares. */
static long round_trip(int level, const unsigned char *buf, size_t len)
{
	unsigned char *z = alloc_guarded(len), *back = alloc_guarded(len);
	long n = -ENOMEM;

	if (!z || !back) {
		CHECK(!"out of memory");
		goto out;
	}
	n = zchunk_compress(level, buf, len, z, len);
	CHECK(n >= 0);
	CHECK(guard_intact(z, len));
	if (n > 0) {
		/* at least 1/16 saved */
		CHECK((size_t)n <= len - (len + 15) / 16);
		CHECK_EQ(zchunk_decompress(z, (size_t)n, back, len), 0);
		CHECK(!memcmp(back, buf, len));
		CHECK(guard_intact(back, len));
	}
out:
	free(z);
	free(back);
	return n;
}

static void test_text_round_trip(void)
{
	static const size_t sizes[] = { 4096, 65536, 65537, 100000, MIB };
	unsigned char *buf = malloc(MIB);

	if (!buf) {
		CHECK(!"out of memory");
		return;
	}
	fill_text(buf, MIB, 1);
	for (int level = ZCHUNK_LEVEL_MIN; level <= ZCHUNK_LEVEL_MAX; level++) {
		/* one byte cannot shrink: zlib adds 6 bytes of framing */
		CHECK_EQ(round_trip(level, buf, 1), 0);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			long n = round_trip(level, buf, sizes[i]);

			/* words from a short list: well under half */
			CHECK(n > 0 && (size_t)n < sizes[i] / 2);
		}
	}
	free(buf);
}

static void test_random_goes_raw(void)
{
	static const size_t sizes[] = { 1, 16, 4096, 65536, 65537, MIB };
	unsigned char *buf = malloc(MIB), *z = alloc_guarded(2 * MIB);

	if (!buf || !z) {
		CHECK(!"out of memory");
		goto out;
	}
	fill_random(buf, MIB, 2);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* even with room to spare */
		CHECK_EQ(zchunk_compress(1, buf, sizes[i], z, 2 * MIB), 0);
		CHECK_EQ(zchunk_compress(9, buf, sizes[i], z, 2 * MIB), 0);
	}
	CHECK(guard_intact(z, 2 * MIB));
out:
	free(buf);
	free(z);
}

/* The early give-up: a random first 64 KiB sends the chunk raw. */
static void test_probe(void)
{
	unsigned char *buf = malloc(MIB), *z = alloc_guarded(MIB);

	if (!buf || !z) {
		CHECK(!"out of memory");
		goto out;
	}
	/* random prefix, text after: raw, though the whole would shrink */
	fill_random(buf, 64 * KIB, 3);
	fill_text(buf + 64 * KIB, MIB - 64 * KIB, 4);
	CHECK_EQ(zchunk_compress(6, buf, MIB, z, MIB), 0);
	/* text prefix, random after: compressing stops when out of room */
	fill_text(buf, 64 * KIB, 5);
	fill_random(buf + 64 * KIB, MIB - 64 * KIB, 6);
	CHECK_EQ(zchunk_compress(6, buf, MIB, z, MIB), 0);
	CHECK(guard_intact(z, MIB));
	/* half text, half random: saves enough, and round-trips */
	fill_text(buf, MIB / 2, 7);
	CHECK(round_trip(6, buf, MIB) > 0);
	/* all zeros: the best case */
	memset(buf, 0, MIB);
	CHECK(round_trip(1, buf, MIB) > 0 && round_trip(1, buf, MIB) < 8192);
out:
	free(buf);
	free(z);
}

static void test_cap(void)
{
	const size_t len = 100000;
	unsigned char *buf = malloc(len), *z = alloc_guarded(len);
	unsigned char *small = NULL, *back = malloc(len);
	long n, m;

	if (!buf || !z || !back) {
		CHECK(!"out of memory");
		goto out;
	}
	fill_text(buf, len, 8);
	n = zchunk_compress(6, buf, len, z, len);
	CHECK(n > 0);
	if (n <= 0)
		goto out;
	/* exactly enough room: the same stream */
	small = alloc_guarded((size_t)n);
	if (!small) {
		CHECK(!"out of memory");
		goto out;
	}
	m = zchunk_compress(6, buf, len, small, (size_t)n);
	CHECK_EQ(m, n);
	CHECK(!memcmp(small, z, (size_t)n));
	CHECK(guard_intact(small, (size_t)n));
	/* a byte short, or far short: raw, nothing written past cap */
	memset(small + n - 1, CANARY_BYTE, CANARY + 1);
	CHECK_EQ(zchunk_compress(6, buf, len, small, (size_t)n - 1), 0);
	CHECK(guard_intact(small, (size_t)n - 1));
	memset(small + 10, CANARY_BYTE, CANARY);
	CHECK_EQ(zchunk_compress(6, buf, len, small, 10), 0);
	CHECK(guard_intact(small, 10));
	CHECK_EQ(zchunk_compress(6, buf, len, small, 0), 0);
	/* cap above len changes nothing: the bound is 15/16 of len */
	CHECK_EQ(zchunk_compress(6, buf, len, z, len), n);
	CHECK_EQ(zchunk_decompress(z, (size_t)n, back, len), 0);
	CHECK(!memcmp(back, buf, len));
out:
	free(buf);
	free(z);
	free(small);
	free(back);
}

static void test_args(void)
{
	unsigned char buf[64] = { 0 }, z[64];

	CHECK_EQ(zchunk_compress(0, buf, sizeof(buf), z, sizeof(z)), -EINVAL);
	CHECK_EQ(zchunk_compress(10, buf, sizeof(buf), z, sizeof(z)), -EINVAL);
	CHECK_EQ(zchunk_compress(-1, buf, sizeof(buf), z, sizeof(z)), -EINVAL);
	CHECK_EQ(zchunk_compress(1, buf, 0, z, sizeof(z)), 0);
	CHECK_EQ(zchunk_compress(1, buf, (size_t)UINT32_MAX + 1, z, sizeof(z)),
		 -EOVERFLOW);
	CHECK_EQ(zchunk_decompress(z, (size_t)UINT32_MAX + 1, buf, 1),
		 -EOVERFLOW);
	CHECK_EQ(zchunk_decompress(z, 1, buf, (size_t)UINT32_MAX + 1),
		 -EOVERFLOW);
	/* nothing is not a stream */
	CHECK_EQ(zchunk_decompress(NULL, 0, buf, sizeof(buf)), -EBADMSG);
	CHECK_EQ(zchunk_decompress(NULL, 0, NULL, 0), -EBADMSG);
}

/* A compressed 4 KiB of text to damage in the tests below. */
struct sample {
	unsigned char raw[4096];
	unsigned char z[4096 + 16];
	unsigned char out[4096 + 16];
	size_t zlen;
};

static int make_sample(struct sample *s)
{
	long n;

	fill_text(s->raw, sizeof(s->raw), 9);
	n = zchunk_compress(6, s->raw, sizeof(s->raw), s->z, sizeof(s->raw));
	if (n <= 0)
		return -1;
	s->zlen = (size_t)n;
	return 0;
}

static void test_corrupt(void)
{
	static struct sample s;
	int wrong = 0, ignored = 0;

	CHECK_EQ(make_sample(&s), 0);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw)), 0);
	/*
	 * Every byte, one bit at a time in turn: -EBADMSG, never 0 with
	 * wrong bytes. The one exception is harmless: the unused padding
	 * bits after the last deflate block, which inflate never reads, so
	 * the output is still right (at most 7 such bits).
	 */
	for (size_t i = 0; i < s.zlen; i++) {
		unsigned char bit = (unsigned char)(1u << (i % 8));
		int ret;

		s.z[i] ^= bit;
		ret = zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw));
		if (!ret && !memcmp(s.out, s.raw, sizeof(s.raw)))
			ignored++;
		else if (ret != -EBADMSG)
			wrong++;
		s.z[i] ^= bit;
	}
	CHECK_EQ(wrong, 0);
	CHECK(ignored <= 7);
	/* a whole byte overwritten in the middle */
	s.z[s.zlen / 2] = (unsigned char)~s.z[s.zlen / 2];
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw)),
		 -EBADMSG);
	/* not zlib at all */
	CHECK_EQ(zchunk_decompress(s.raw, 200, s.out, sizeof(s.raw)), -EBADMSG);
}

static void test_truncated(void)
{
	static struct sample s;

	CHECK_EQ(make_sample(&s), 0);
	for (size_t cut = 0; cut < s.zlen; cut++)
		CHECK_EQ(zchunk_decompress(s.z, cut, s.out, sizeof(s.raw)),
			 -EBADMSG);
}

static void test_trailing(void)
{
	static struct sample s;

	CHECK_EQ(make_sample(&s), 0);
	s.z[s.zlen] = 0;
	CHECK_EQ(zchunk_decompress(s.z, s.zlen + 1, s.out, sizeof(s.raw)),
		 -EBADMSG);
	/* a second complete stream after the first */
	memcpy(s.z + s.zlen, s.z, 8);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen + 8, s.out, sizeof(s.raw)),
		 -EBADMSG);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw)), 0);
}

static void test_wrong_raw_len(void)
{
	static struct sample s;

	CHECK_EQ(make_sample(&s), 0);
	/* short output room: would run past raw_len */
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw) - 1),
		 -EBADMSG);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, 1), -EBADMSG);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, 0), -EBADMSG);
	/* more room than the stream fills */
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw) + 1),
		 -EBADMSG);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.out)),
		 -EBADMSG);
	CHECK_EQ(zchunk_decompress(s.z, s.zlen, s.out, sizeof(s.raw)), 0);
	CHECK(!memcmp(s.out, s.raw, sizeof(s.raw)));
}

TAP_RUN(TAP_TEST(test_text_round_trip), TAP_TEST(test_random_goes_raw),
	TAP_TEST(test_probe), TAP_TEST(test_cap), TAP_TEST(test_args),
	TAP_TEST(test_corrupt), TAP_TEST(test_truncated),
	TAP_TEST(test_trailing), TAP_TEST(test_wrong_raw_len))
