/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for transfer/payload: a chunk sealed by the source and opened
 * by the sink comes back as it was, compressed or not; a sealed one is
 * opened out of its ring slot, so bytes written into the slot after its
 * tag was checked (a late RDMA WRITE by anyone holding the ring's rkey)
 * never reach what the sink checksums and writes; a changed tag fails.
 */
#include "tap.h"

#include "transfer/session/payload.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 65536u

static uint8_t key[32] = { 1, 2, 3, 4, 5, 6, 7, 8 };

/* A chunk of compressible text, or of bytes that do not compress. */
static void fill(uint8_t *b, size_t len, bool text)
{
	uint64_t s = 88172645463325252ull;

	for (size_t i = 0; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		b[i] = text ? (uint8_t)("rdcp ring "[i % 10]) : (uint8_t)s;
	}
}

/* Seals raw into slot as the source does; the header it would send. */
static struct wire_slot_hdr seal(bool compress, const uint8_t *raw,
				 uint8_t *slot)
{
	struct payload src;
	struct wire_slot_hdr h = { .file_id = 7, .offset = 3 * CHUNK,
				   .raw_len = CHUNK };

	CHECK_EQ(payload_init(&src, CHUNK, compress, key), 0);
	if (!compress)
		memcpy(slot, raw, CHUNK);
	CHECK_EQ(payload_seal(&src, 1, raw, slot, CHUNK, 3, &h), 0);
	payload_release(&src);
	return h;
}

static void check_late_write(bool compress, bool text)
{
	uint8_t *raw = malloc(CHUNK), *slot = malloc(CHUNK);
	struct wire_slot_hdr h;
	struct payload snk;
	const uint8_t *got;

	fill(raw, CHUNK, text);
	h = seal(compress, raw, slot);
	CHECK(h.flags & WIRE_SLOT_ENCRYPTED);
	CHECK_EQ(payload_init(&snk, CHUNK, compress, key), 0);
	CHECK_EQ(payload_open(&snk, &h, 3, slot, &got), 0);
	CHECK(got < slot || got >= slot + CHUNK);
	CHECK(!memcmp(got, raw, CHUNK));
	/* the peer (or anyone with the rkey) writes the slot again now */
	memset(slot, 'X', CHUNK);
	CHECK(!memcmp(got, raw, CHUNK));
	payload_release(&snk);
	free(raw);
	free(slot);
}

static void test_sealed_out_of_slot(void)
{
	check_late_write(false, false);
}

static void test_sealed_compressed_out_of_slot(void)
{
	check_late_write(true, true);
}

static void test_bad_tag(void)
{
	uint8_t *raw = malloc(CHUNK), *slot = malloc(CHUNK);
	struct wire_slot_hdr h;
	struct payload snk;
	const uint8_t *got;

	fill(raw, CHUNK, false);
	h = seal(false, raw, slot);
	slot[100] ^= 1;
	CHECK_EQ(payload_init(&snk, CHUNK, false, key), 0);
	CHECK_EQ(payload_open(&snk, &h, 3, slot, &got), -EBADMSG);
	/* and at another index (a slot replayed elsewhere) */
	slot[100] ^= 1;
	CHECK_EQ(payload_open(&snk, &h, 4, slot, &got), -EBADMSG);
	CHECK_EQ(payload_open(&snk, &h, 3, slot, &got), 0);
	CHECK(!memcmp(got, raw, CHUNK));
	payload_release(&snk);
	free(raw);
	free(slot);
}

TAP_RUN(TAP_TEST(test_sealed_out_of_slot),
	TAP_TEST(test_sealed_compressed_out_of_slot), TAP_TEST(test_bad_tag))
