/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for util/aead: HKDF-SHA256 against RFC 5869, AES-256-GCM
 * against the McGrew-Viega GCM specification's 256-bit test cases, the
 * dir/seq IV layout, in-place round trips from 0 bytes to 16 MiB, every
 * kind of tampering rejected with -EBADMSG, and two struct aead from one
 * key reading each other's messages.
 */
#include "tap.h"

#include "util/aead.h"
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define MIB ((size_t)1 << 20)

/* Hex digits to bytes; returns the number of bytes written. */
static size_t unhex(const char *hex, uint8_t *out)
{
	size_t n = 0;

	for (; hex[0] && hex[1]; hex += 2) {
		unsigned int b;

		if (sscanf(hex, "%2x", &b) != 1)
			break;
		out[n++] = (uint8_t)b;
	}
	return n;
}

static void fill(uint8_t *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 9) + seed);
}

static const uint8_t test_key[AEAD_KEY_LEN] = {
	0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae,
	0xf0, 0x85, 0x7d, 0x77, 0x81, 0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61,
	0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3, 0x09, 0x14, 0xdf, 0xf4,
};

/* RFC 5869 A.1 (basic) and A.3 (no salt, no info), SHA-256. */
static void test_hkdf_rfc5869(void)
{
	uint8_t ikm[22], salt[13], okm[42], want[42];
	static const char info[] = "\xf0\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9";

	memset(ikm, 0x0b, sizeof(ikm));
	unhex("000102030405060708090a0b0c", salt);

	unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4"
	      "c5bf34007208d5b887185865",
	      want);
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), salt, sizeof(salt), info, okm,
			   sizeof(okm)),
		 0);
	CHECK(!memcmp(okm, want, sizeof(want)));

	unhex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c73"
	      "8d2d9d201395faa4b61a96c8",
	      want);
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, NULL, okm, sizeof(okm)),
		 0);
	CHECK(!memcmp(okm, want, sizeof(want)));
	/* "" is no info, the same as NULL */
	memset(okm, 0, sizeof(okm));
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "", okm, sizeof(okm)), 0);
	CHECK(!memcmp(okm, want, sizeof(want)));
}

/* A shorter output is a prefix; lengths RFC 5869 forbids are refused. */
static void test_hkdf_lengths(void)
{
	uint8_t ikm[AEAD_KEY_LEN], a[64], b[AEAD_HKDF_MAX_LEN + 1];
	enum log_level lvl = log_get_level();

	fill(ikm, sizeof(ikm), 1);
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "rdcp", a, sizeof(a)), 0);
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "rdcp", b, 1), 0);
	CHECK_EQ(b[0], a[0]);
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "rdcp", b,
			   AEAD_HKDF_MAX_LEN),
		 0);
	CHECK(!memcmp(a, b, sizeof(a)));
	/* a different label gives a different key */
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "rdcq", b, sizeof(a)), 0);
	CHECK(memcmp(a, b, sizeof(a)));

	log_set_level(LOG_QUIET);
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "rdcp", b, 0), -EINVAL);
	CHECK(strstr(log_last_error(), "out of range"));
	CHECK_EQ(aead_hkdf(ikm, sizeof(ikm), NULL, 0, "rdcp", b,
			   AEAD_HKDF_MAX_LEN + 1),
		 -EINVAL);
	log_set_level(lvl);
}

/*
 * McGrew and Viega, "The Galois/Counter Mode of Operation", test case 16:
 * 256-bit key, 96-bit IV, 20 bytes of AAD, 60 bytes of plaintext.
 */
static void test_gcm_vector_aad(void)
{
	uint8_t key[AEAD_KEY_LEN], iv[AEAD_IV_LEN], aad[20], pt[60], ct[60];
	uint8_t want_tag[AEAD_TAG_LEN], tag[AEAD_TAG_LEN], buf[60];
	struct aead *a = NULL;

	unhex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f94673083"
	      "08",
	      key);
	unhex("cafebabefacedbaddecaf888", iv);
	unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2", aad);
	unhex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a"
	      "721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
	      pt);
	unhex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1"
	      "aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
	      ct);
	unhex("76fc6ece0f4e1768cddf8853bb2d551b", want_tag);

	CHECK_EQ(aead_create(key, &a), 0);
	if (!a)
		return;
	memcpy(buf, pt, sizeof(buf));
	CHECK_EQ(aead_seal_iv(a, iv, aad, sizeof(aad), buf, sizeof(buf), tag),
		 0);
	CHECK(!memcmp(buf, ct, sizeof(ct)));
	CHECK(!memcmp(tag, want_tag, sizeof(tag)));
	CHECK_EQ(aead_open_iv(a, iv, aad, sizeof(aad), buf, sizeof(buf),
			      want_tag),
		 0);
	CHECK(!memcmp(buf, pt, sizeof(pt)));
	aead_destroy(a);
}

/*
 * Test case 14 (zero key, zero IV, one zero block): the IV of dir 0 and
 * seq 0 is all zeros, so aead_seal itself must give the published result.
 */
static void test_gcm_vector_dir_seq(void)
{
	uint8_t key[AEAD_KEY_LEN] = { 0 }, buf[16] = { 0 }, ct[16];
	uint8_t want_tag[AEAD_TAG_LEN], tag[AEAD_TAG_LEN];
	struct aead *a = NULL;

	unhex("cea7403d4d606b6e074ec5d3baf39d18", ct);
	unhex("d0d1c8a799996bf0265b98b5d48ab919", want_tag);
	CHECK_EQ(aead_create(key, &a), 0);
	if (!a)
		return;
	CHECK_EQ(aead_seal(a, 0, 0, NULL, 0, buf, sizeof(buf), tag), 0);
	CHECK(!memcmp(buf, ct, sizeof(ct)));
	CHECK(!memcmp(tag, want_tag, sizeof(tag)));
	aead_destroy(a);
}

/* The IV is dir (4 bytes big-endian) then seq (8 bytes big-endian). */
static void test_iv_layout(void)
{
	uint8_t iv[AEAD_IV_LEN], x[100], y[100];
	uint8_t tx[AEAD_TAG_LEN], ty[AEAD_TAG_LEN];
	struct aead *a = NULL;

	unhex("0102030405060708090a0b0c", iv);
	fill(x, sizeof(x), 7);
	memcpy(y, x, sizeof(y));
	CHECK_EQ(aead_create(test_key, &a), 0);
	if (!a)
		return;
	CHECK_EQ(aead_seal(a, 0x01020304u, 0x05060708090a0b0cull, "hdr", 3, x,
			   sizeof(x), tx),
		 0);
	CHECK_EQ(aead_seal_iv(a, iv, "hdr", 3, y, sizeof(y), ty), 0);
	CHECK(!memcmp(x, y, sizeof(x)));
	CHECK(!memcmp(tx, ty, sizeof(tx)));
	aead_destroy(a);
}

/* Seal then open len bytes in place; the ciphertext must differ. */
static void round_trip(struct aead *a, size_t len)
{
	uint8_t aad[24], tag[AEAD_TAG_LEN];
	uint8_t *buf = malloc(len ? len : 1), *orig = malloc(len ? len : 1);

	CHECK(buf && orig);
	if (!buf || !orig)
		goto out;
	fill(orig, len, (unsigned int)len);
	memcpy(buf, orig, len);
	fill(aad, sizeof(aad), 3);
	CHECK_EQ(aead_seal(a, 1, len, aad, sizeof(aad), buf, len, tag), 0);
	if (len >= 16)
		CHECK(memcmp(buf, orig, len));
	CHECK_EQ(aead_open(a, 1, len, aad, sizeof(aad), buf, len, tag), 0);
	CHECK(!memcmp(buf, orig, len));
out:
	free(buf);
	free(orig);
}

static void test_round_trip(void)
{
	static const size_t lens[] = {
		0, 1, 15, 16, 17, 4096, MIB + 3, 16 * MIB
	};
	uint8_t tag[AEAD_TAG_LEN], tag2[AEAD_TAG_LEN];
	struct aead *a = NULL;

	CHECK_EQ(aead_create(test_key, &a), 0);
	if (!a)
		return;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		round_trip(a, lens[i]);

	/* len 0 with no buffer and no AAD: the tag alone authenticates */
	CHECK_EQ(aead_seal(a, 0, 9, NULL, 0, NULL, 0, tag), 0);
	CHECK_EQ(aead_open(a, 0, 9, NULL, 0, NULL, 0, tag), 0);
	CHECK_EQ(aead_open(a, 0, 10, NULL, 0, NULL, 0, tag), -EBADMSG);
	/* the same input under another seq gives another tag */
	CHECK_EQ(aead_seal(a, 0, 10, NULL, 0, NULL, 0, tag2), 0);
	CHECK(memcmp(tag, tag2, sizeof(tag)));
	aead_destroy(a);
}

struct sealed {
	uint8_t aad[16];
	uint8_t data[4096];
	uint8_t tag[AEAD_TAG_LEN];
};

static int open_copy(struct aead *a, uint32_t dir, uint64_t seq,
		     const struct sealed *s, uint8_t *out)
{
	memcpy(out, s->data, sizeof(s->data));
	return aead_open(a, dir, seq, s->aad, sizeof(s->aad), out,
			 sizeof(s->data), s->tag);
}

static bool is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Each single change is caught, and the context still works afterwards. */
static void test_tamper(void)
{
	static const size_t pos[] = { 0, 1, 2047, 4095 };
	static struct sealed s, t;
	static uint8_t orig[sizeof(s.data)], out[sizeof(s.data)];
	struct aead *a = NULL;

	CHECK_EQ(aead_create(test_key, &a), 0);
	if (!a)
		return;
	fill(orig, sizeof(orig), 5);
	fill(s.aad, sizeof(s.aad), 6);
	memcpy(s.data, orig, sizeof(orig));
	CHECK_EQ(aead_seal(a, 2, 1000, s.aad, sizeof(s.aad), s.data,
			   sizeof(s.data), s.tag),
		 0);

	for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
		t = s;
		t.data[pos[i]] ^= 0x01;
		CHECK_EQ(open_copy(a, 2, 1000, &t, out), -EBADMSG);
		CHECK(is_zero(out, sizeof(out)));
	}
	for (size_t i = 0; i < AEAD_TAG_LEN; i += 5) {
		t = s;
		t.tag[i] ^= 0x80;
		CHECK_EQ(open_copy(a, 2, 1000, &t, out), -EBADMSG);
	}
	for (size_t i = 0; i < sizeof(s.aad); i += 5) {
		t = s;
		t.aad[i] ^= 0x01;
		CHECK_EQ(open_copy(a, 2, 1000, &t, out), -EBADMSG);
	}
	/* fewer AAD bytes, or the same ciphertext cut short */
	memcpy(out, s.data, sizeof(s.data));
	CHECK_EQ(aead_open(a, 2, 1000, s.aad, sizeof(s.aad) - 1, out,
			   sizeof(s.data), s.tag),
		 -EBADMSG);
	memcpy(out, s.data, sizeof(s.data));
	CHECK_EQ(aead_open(a, 2, 1000, s.aad, sizeof(s.aad), out,
			   sizeof(s.data) - 1, s.tag),
		 -EBADMSG);
	CHECK_EQ(open_copy(a, 2, 999, &s, out), -EBADMSG);
	CHECK_EQ(open_copy(a, 2, 1001, &s, out), -EBADMSG);
	CHECK_EQ(open_copy(a, 2, 1000 | (1ull << 63), &s, out), -EBADMSG);
	CHECK_EQ(open_copy(a, 3, 1000, &s, out), -EBADMSG);
	CHECK_EQ(open_copy(a, 2 | (1u << 31), 1000, &s, out), -EBADMSG);

	/* the untouched message still opens after all those failures */
	CHECK_EQ(open_copy(a, 2, 1000, &s, out), 0);
	CHECK(!memcmp(out, orig, sizeof(orig)));
	aead_destroy(a);
}

/* One key, two contexts (two threads): each opens what the other sealed. */
static void test_two_contexts(void)
{
	uint8_t other_key[AEAD_KEY_LEN], tag[AEAD_TAG_LEN];
	static uint8_t orig[65536], buf[65536];
	struct aead *a = NULL, *b = NULL, *c = NULL;

	memcpy(other_key, test_key, sizeof(other_key));
	other_key[31] ^= 1;
	CHECK_EQ(aead_create(test_key, &a), 0);
	CHECK_EQ(aead_create(test_key, &b), 0);
	CHECK_EQ(aead_create(other_key, &c), 0);
	if (!a || !b || !c)
		goto out;
	fill(orig, sizeof(orig), 9);
	for (uint64_t seq = 0; seq < 4; seq++) {
		struct aead *tx = seq & 1 ? b : a, *rx = seq & 1 ? a : b;

		memcpy(buf, orig, sizeof(buf));
		CHECK_EQ(aead_seal(tx, 0, seq, &seq, sizeof(seq), buf,
				   sizeof(buf), tag),
			 0);
		CHECK_EQ(aead_open(rx, 0, seq, &seq, sizeof(seq), buf,
				   sizeof(buf), tag),
			 0);
		CHECK(!memcmp(buf, orig, sizeof(orig)));
	}
	/* a context with another key rejects it */
	CHECK_EQ(aead_seal(a, 1, 7, NULL, 0, buf, sizeof(buf), tag), 0);
	CHECK_EQ(aead_open(c, 1, 7, NULL, 0, buf, sizeof(buf), tag), -EBADMSG);
out:
	aead_destroy(a);
	aead_destroy(b);
	aead_destroy(c);
}

struct worker {
	uint32_t dir;
	int failures;
};

/* One thread's own struct aead: seal and open many chunks with it. */
static void *worker_run(void *arg)
{
	struct worker *w = arg;
	static _Thread_local uint8_t orig[8192], buf[8192];
	uint8_t tag[AEAD_TAG_LEN];
	struct aead *a = NULL;

	if (aead_create(test_key, &a)) {
		w->failures++;
		return NULL;
	}
	fill(orig, sizeof(orig), w->dir);
	for (uint64_t seq = 0; seq < 200; seq++) {
		memcpy(buf, orig, sizeof(buf));
		if (aead_seal(a, w->dir, seq, &seq, sizeof(seq), buf,
			      sizeof(buf), tag) ||
		    aead_open(a, w->dir, seq, &seq, sizeof(seq), buf,
			      sizeof(buf), tag) ||
		    memcmp(buf, orig, sizeof(buf)))
			w->failures++;
	}
	aead_destroy(a);
	return NULL;
}

/* The documented use: one struct aead per thread, all from one key. */
static void test_threads(void)
{
	struct worker w[4] = { { 0 } };
	pthread_t t[4];
	bool started[4] = { false };

	for (int i = 0; i < 4; i++) {
		w[i].dir = (uint32_t)i;
		started[i] = !pthread_create(&t[i], NULL, worker_run, &w[i]);
		CHECK(started[i]);
	}
	for (int i = 0; i < 4; i++) {
		if (started[i])
			pthread_join(t[i], NULL);
		CHECK_EQ(w[i].failures, 0);
	}
}

static void test_destroy_null(void)
{
	aead_destroy(NULL);
	CHECK(1);
}

TAP_RUN(TAP_TEST(test_hkdf_rfc5869), TAP_TEST(test_hkdf_lengths),
	TAP_TEST(test_gcm_vector_aad), TAP_TEST(test_gcm_vector_dir_seq),
	TAP_TEST(test_iv_layout), TAP_TEST(test_round_trip),
	TAP_TEST(test_tamper), TAP_TEST(test_two_contexts),
	TAP_TEST(test_threads), TAP_TEST(test_destroy_null))
