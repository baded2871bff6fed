/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Fuzz target for the wire format (transfer/wire.h). Every input goes to
 * wire_decode() and its first 64 bytes to wire_slot_decode(). What decodes
 * must re-encode: the encoding is canonical (the input again, with the
 * reserved header bytes zeroed), decodes to the same message, and
 * wire_encode() into a buffer one byte short fails with -EMSGSIZE without
 * writing past it. Any broken promise calls abort().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/wire.h"
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
	int n, n2;

	if (wire_decode(data, size, &m))
		return;
	(void)wire_type_name(m.type);

	n = wire_encode(&m, enc, sizeof(enc));
	if (n < 0)
		fail("msg: a decoded message does not encode");
	if ((size_t)n != size)
		fail("msg: re-encoded length differs from the input's");
	/* bytes 1..3 of the header are reserved: sent as 0, never read */
	if (enc[0] != data[0] || memcmp(enc + 4, data + 4, size - 4))
		fail("msg: encoding differs from the decoded input");
	if (wire_decode(enc, (size_t)n, &m2))
		fail("msg: re-encoded message does not decode");
	n2 = wire_encode(&m2, enc2, sizeof(enc2));
	if (n2 != n || memcmp(enc, enc2, (size_t)n))
		fail("msg: decode(encode(m)) is not m");

	/* exactly one byte short: -EMSGSIZE, and ASan sees any overrun */
	shortbuf = malloc((size_t)n - 1);
	if (!shortbuf)
		return;
	if (wire_encode(&m, shortbuf, (size_t)n - 1) != -EMSGSIZE)
		fail("msg: encode into a short buffer did not fail");
	free(shortbuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_msg(data, size);
	if (size >= WIRE_SLOT_HDR)
		check_slot(data);
	return 0;
}
