/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Fuzz target for the wire format (transfer/wire/wire.h). Every input goes to
 * wire_decode() and its first 64 bytes to wire_slot_decode(). What decodes
 * must re-encode: the encoding is canonical (the input again, with the
 * reserved header bytes zeroed), decodes to the same message, and
 * wire_encode() into a buffer one byte short fails with -EMSGSIZE without
 * writing past it. A tagged message (protocol 3) must re-encode the same
 * way once wire_tag_append() made room for its tag (whose bytes are the
 * caller's), and wire_tag_split() must agree on where the tag starts. Every input is also read as a packed slot's payload:
 * wire_pack_next() from offset 0 until it fails or reaches the end (at
 * most WIRE_PACK_MAX_FILES records); each record it takes honours the
 * ranges wire.h promises, and wire_pack_put() plus its data gives back
 * exactly the bytes it came from (canonical), which decode to the same
 * fields. Any broken promise calls abort().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/wire/wire.h"
#include "fuzz.h"

#define FUZZ_BUF 8192u

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_wire: %s\n", what);
	abort();
}

static void check_slot(const uint8_t *p)
{
	struct wire_slot_hdr h, h2;
	uint8_t enc[WIRE_SLOT_HDR], enc2[WIRE_SLOT_HDR];

	if (wire_slot_decode(p, &h))
		return;
	wire_slot_encode(enc, &h);
	if (wire_slot_decode(enc, &h2))
		fail("slot: re-encoded header does not decode");
	if (h.seq != h2.seq || h.file_id != h2.file_id || h.len != h2.len ||
	    h.offset != h2.offset || h.crc != h2.crc || h.flags != h2.flags ||
	    h.raw_len != h2.raw_len || memcmp(h.tag, h2.tag, sizeof(h.tag)))
		fail("slot: fields differ after a round trip");
	wire_slot_encode(enc2, &h2);
	if (memcmp(enc, enc2, sizeof(enc)))
		fail("slot: re-encoding is not stable");
	/* all but the reserved bytes 30..31, 36..43 and the CRC are kept */
	if (memcmp(enc, p, 30) || memcmp(enc + 32, p + 32, 4) ||
	    memcmp(enc + 44, p + 44, 16))
		fail("slot: encoding differs from the decoded input");
}

static void check_msg(const uint8_t *data, size_t size)
{
	static struct wire_msg m, m2;
	static uint8_t enc[FUZZ_BUF], enc2[FUZZ_BUF];
	uint8_t *shortbuf;
	size_t covered = size;
	int n, n2;

	if (wire_decode(data, size, &m))
		return;
	(void)wire_type_name(m.type);
	if (wire_tag_split(data, size, &covered) != m.tagged ||
	    (m.tagged && covered != size - WIRE_TAG_LEN))
		fail("msg: wire_tag_split disagrees with wire_decode");

	n = wire_encode(&m, enc, sizeof(enc) - WIRE_TAG_LEN);
	if (n < 0)
		fail("msg: a decoded message does not encode");
	if ((size_t)n != covered)
		fail("msg: re-encoded length differs from the input's");
	if (m.tagged) {
		if (wire_tag_append(enc, (size_t)n, size - 1) != -EMSGSIZE)
			fail("msg: a tag appended past the buffer");
		n = wire_tag_append(enc, (size_t)n, sizeof(enc));
		if ((size_t)n != size)
			fail("msg: tagged length differs from the input's");
		memcpy(enc + covered, data + covered, WIRE_TAG_LEN);
	}
	/* bytes 2..3 of the header are reserved: sent as 0, never read */
	if (enc[0] != data[0] || enc[1] != data[1] ||
	    memcmp(enc + 4, data + 4, size - 4))
		fail("msg: encoding differs from the decoded input");
	if (wire_decode(enc, (size_t)n, &m2))
		fail("msg: re-encoded message does not decode");
	n2 = wire_encode(&m2, enc2, sizeof(enc2));
	if (m2.tagged != m.tagged || (size_t)n2 != covered ||
	    enc2[0] != enc[0] || memcmp(enc + 8, enc2 + 8, covered - 8))
		fail("msg: decode(encode(m)) is not m");

	/* exactly one byte short: -EMSGSIZE, and ASan sees any overrun */
	shortbuf = malloc(covered - 1);
	if (!shortbuf)
		return;
	if (wire_encode(&m, shortbuf, covered - 1) != -EMSGSIZE)
		fail("msg: encode into a short buffer did not fail");
	free(shortbuf);
}

static bool pack_eq(const struct wire_pack_rec *a,
		    const struct wire_pack_rec *b)
{
	return a->file_id == b->file_id && a->flags == b->flags &&
	       a->digest_len == b->digest_len && a->path_len == b->path_len &&
	       a->mode == b->mode && a->mtime_sec == b->mtime_sec &&
	       a->mtime_nsec == b->mtime_nsec && a->atime_sec == b->atime_sec &&
	       a->atime_nsec == b->atime_nsec && a->size == b->size &&
	       a->status == b->status &&
	       !memcmp(a->digest, b->digest, sizeof(a->digest)) &&
	       !memcmp(a->path, b->path, a->path_len) &&
	       !memcmp(&a->owner, &b->owner, sizeof(a->owner)) &&
	       !memcmp(a->data, b->data, a->size);
}

/* What wire_slot.h says of a record wire_pack_next() took. */
static void check_rec_ranges(const struct wire_pack_rec *r)
{
	bool abort_rec = r->flags & WIRE_PACK_ABORT;

	if (r->flags & ~(WIRE_PACK_ABORT | WIRE_PACK_OWNER) ||
	    r->digest_len > WIRE_DIGEST_MAX ||
	    !r->path_len || r->path_len > 4095 ||
	    r->mtime_nsec >= 1000000000u || r->atime_nsec >= 1000000000u)
		fail("pack: a field out of range was taken");
	if (memchr(r->path, '\0', r->path_len))
		fail("pack: a path with a NUL was taken");
	if (abort_rec && (r->status >= 0 || r->size > WIRE_MSG_MAX ||
			  memchr(r->data, '\0', r->size)))
		fail("pack: a malformed ABORT was taken");
	if (!abort_rec && r->status != 0)
		fail("pack: a status without ABORT was taken");
}

static void check_pack(const uint8_t *data, size_t size)
{
	struct wire_pack_rec r, r2;
	size_t pos = 0, start, n, off, pos2;
	uint8_t *enc;

	for (unsigned int i = 0; i < WIRE_PACK_MAX_FILES && pos < size; i++) {
		start = pos;
		if (wire_pack_next(data, size, &pos, &r)) {
			if (pos != start)
				fail("pack: a refused record moved pos");
			return;
		}
		n = wire_pack_rec_len(r.path_len, r.digest_len, r.size) +
		    wire_pack_owner_len(&r);
		if (pos <= start || pos > size || pos - start != n)
			fail("pack: pos did not move by the record's length");
		if (r.path != (const char *)data + start + WIRE_PACK_REC_HDR +
				      wire_pack_owner_len(&r) + r.digest_len ||
		    r.data != (const uint8_t *)r.path + r.path_len)
			fail("pack: path or data not where the record has "
			     "them");
		check_rec_ranges(&r);

		/* exactly n bytes: ASan sees any write past them */
		enc = malloc(n);
		if (!enc)
			return;
		off = wire_pack_put(enc, &r);
		if (off != n - r.size)
			fail("pack: wire_pack_put wrote other than the header, "
			     "owner, digest and path");
		memcpy(enc + off, r.data, r.size);
		if (memcmp(enc, data + start, n))
			fail("pack: encoding differs from the decoded input");
		pos2 = 0;
		if (wire_pack_next(enc, n, &pos2, &r2) || pos2 != n)
			fail("pack: re-encoded record does not decode");
		if (!pack_eq(&r, &r2))
			fail("pack: fields differ after a round trip");
		free(enc);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_msg(data, size);
	check_pack(data, size);
	if (size >= WIRE_SLOT_HDR)
		check_slot(data);
	return 0;
}
