/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for transfer/wire/wire.c, the codec of everything that crosses the
 * wire: a round trip of every control message and of the slot header,
 * golden bytes for one HELLO and one slot header (written out by hand from
 * the documented layout, so that any layout change fails here), and the
 * decoder's refusals: every truncation, trailing bytes, a wrong length
 * field, unknown types, strings past the end, over their limit or with a
 * NUL inside, digests longer than 32 bytes, and any single flipped bit in
 * a slot header. Packed-slot records the same way: round trips alone and
 * back to back, golden bytes, every truncation, each field out of range,
 * and the digest a record carries. Control message tags (protocol 3): the
 * flag and length, the body unchanged, refusals, and a golden control key
 * and tag computed independently (Python's hmac) from doc/PROTOCOL.md's
 * definition.
 */
#include "tap.h"

#include "transfer/session/auth.h"
#include "transfer/wire/wire.h"
#include "util/key.h"
#include "util/checksum.h"

#include <endian.h>
#include <errno.h>
#include <stdint.h>

static uint8_t buf[WIRE_CTRL_SIZE + 64];

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void hex_to(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned int v;

		sscanf(hex + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

static void show_diff(const uint8_t *got, const uint8_t *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			printf("#   byte %zu: got %02x want %02x\n", i, got[i],
			       want[i]);
			return;
		}
}

/* One sample of every message type, with distinct non-zero fields. */
#define SAMPLES_MAX (WIRE_TYPE_MAX + 4)
static size_t samples(struct wire_msg *m, size_t max)
{
	size_t n = 0;

	memset(m, 0, max * sizeof(*m));

	m[n].type = WIRE_HELLO;
	m[n].ctrl_ack = 0xfffffff0u;
	m[n].slot_ack = 7;
	m[n].u.hello.role = WIRE_PUSH;
	m[n].u.hello.csum = WIRE_CSUM_SHA256;
	m[n].u.hello.flags = WIRE_HELLO_FSYNC | WIRE_HELLO_DEST_DIR;
	m[n].u.hello.features = 0x01020304u;
	m[n].u.hello.chunk_size = 1u << 20;
	m[n].u.hello.bwlimit = 500000000ull;
	for (unsigned int i = 0; i < WIRE_NONCE_LEN; i++)
		m[n].u.hello.nonce[i] = (uint8_t)(0xc0 + i);
	CHECK_EQ(wire_hello_add_path(&m[n].u.hello, "some/dir/"), 0);
	CHECK_EQ(wire_hello_add_path(&m[n].u.hello, "second"), 0);
	CHECK_EQ(wire_hello_add_filter(&m[n].u.hello, true, "*.c"), 0);
	CHECK_EQ(wire_hello_add_filter(&m[n].u.hello, false, "/build/"), 0);
	m[n].u.hello.streams = 3;
	m[n].u.hello.sync = WIRE_SYNC_CHECKSUM;
	n++;

	m[n].type = WIRE_WELCOME;
	m[n].ctrl_ack = 1;
	m[n].u.welcome.status = -EACCES;
	m[n].u.welcome.features = 5;
	for (unsigned int i = 0; i < WIRE_NONCE_LEN; i++)
		m[n].u.welcome.nonce[i] = (uint8_t)i;
	memset(m[n].u.welcome.msg, 'w', WIRE_MSG_MAX); /* the longest */
	m[n].u.welcome.streams = 16;
	memset(m[n].u.welcome.token, 0xa5, WIRE_LANE_TOKEN_LEN);
	m[n].u.welcome.rails = 3;
	m[n].u.welcome.rail[1].family = 4;
	memcpy(m[n].u.welcome.rail[1].addr, "\x0a\x4d\x01\x01", 4);
	m[n].u.welcome.rail[2].family = 6;
	memset(m[n].u.welcome.rail[2].addr, 0xfe, 16);
	n++;

	m[n].type = WIRE_RING;
	m[n].u.ring.addr = 0x00007f0012345000ull;
	m[n].u.ring.rkey = 0xabcdef01u;
	m[n].u.ring.slots = 64;
	m[n].u.ring.chunk_size = 1u << 20;
	m[n].u.ring.hdr_addr = 0x7f0000000000ull;
	m[n].u.ring.target = WIRE_TARGET_NAMED;
	m[n].u.ring.rails = 3;
	m[n].u.ring.rkeys[1] = 0x11223344u;
	m[n].u.ring.rkeys[2] = 0x55667788u;
	n++;

	m[n].type = WIRE_FILE;
	m[n].ctrl_ack = 3;
	m[n].u.file.file_id = 9;
	m[n].u.file.flags = 0;
	m[n].u.file.size = 0x123456789abull;
	m[n].u.file.mode = 0644;
	m[n].u.file.mtime_sec = -5; /* before 1970: signed on the wire */
	m[n].u.file.mtime_nsec = 999999999u;
	memset(m[n].u.file.path, 'p', sizeof(m[n].u.file.path) - 1);
	n++;

	m[n].type = WIRE_FILE;
	m[n].u.file.file_id = 10;
	m[n].u.file.kind = WIRE_KIND_SYMLINK;
	m[n].u.file.mode = 0777;
	m[n].u.file.atime_sec = 1700000000;
	m[n].u.file.atime_nsec = 5;
	strcpy(m[n].u.file.path, "tree/link");
	strcpy(m[n].u.file.link, "../elsewhere/target");
	n++;

	m[n].type = WIRE_HAVE;
	m[n].u.have.file_id = 10;
	m[n].u.have.flags = WIRE_HAVE_SUMS;
	n++;


	m[n].type = WIRE_HAVE;
	m[n].u.have.file_id = 11;
	m[n].u.have.flags = WIRE_HAVE_SKIP;
	m[n].u.have.status = -EBUSY;
	n++;

	m[n].type = WIRE_SUMS;
	m[n].u.sums.file_id = 10;
	m[n].u.sums.first = 1024;
	m[n].u.sums.count = WIRE_SUMS_MAX; /* the longest */
	for (unsigned int i = 0; i < WIRE_SUMS_MAX; i++)
		memset(m[n].u.sums.sums[i], (int)i, WIRE_SUM_LEN);
	n++;

	m[n].type = WIRE_MATCH;
	m[n].u.match.file_id = 10;
	m[n].u.match.first = 1024;
	m[n].u.match.count = 13;
	m[n].u.match.bits[0] = 0xa5;
	m[n].u.match.bits[1] = 0x11;
	n++;

	m[n].type = WIRE_FILE_END;
	m[n].u.end.file_id = 9;
	m[n].u.end.flags = WIRE_END_ABORT;
	m[n].u.end.nchunks = 1ull << 40;
	m[n].u.end.seq_end = (1ull << 40) + 3;
	m[n].u.end.csum = WIRE_CSUM_SHA256;
	m[n].u.end.digest_len = WIRE_DIGEST_MAX;
	for (unsigned int i = 0; i < WIRE_DIGEST_MAX; i++)
		m[n].u.end.digest[i] = (uint8_t)(0xff - i);
	n++;

	m[n].type = WIRE_FILE_RESULT;
	m[n].slot_ack = 0xffffffffu;
	m[n].u.result.file_id = 9;
	m[n].u.result.status = -EBADMSG;
	m[n].u.result.digest_len = 4;
	memcpy(m[n].u.result.digest, "\x01\x02\x03\x04", 4);
	strcpy(m[n].u.result.msg, "failed verification");
	n++;

	m[n].type = WIRE_DONE;
	m[n].ctrl_ack = 77;
	m[n].slot_ack = 88;
	m[n].u.done.flags = WIRE_DONE_WHOLE;
	m[n].u.done.max_delete = 1ull << 40;
	n++;

	m[n].type = WIRE_DELETED;
	m[n].u.deleted.kind = WIRE_KIND_OTHER;
	m[n].u.deleted.flags = WIRE_DELETED_DRY;
	m[n].u.deleted.status = -EBUSY;
	memset(m[n].u.deleted.path, 'd', sizeof(m[n].u.deleted.path) - 1);
	memset(m[n].u.deleted.msg, 'e', WIRE_MSG_MAX); /* the longest */
	n++;

	m[n].type = WIRE_DELETE_END;
	m[n].u.delete_end.status = -E2BIG;
	m[n].u.delete_end.count = 1ull << 33;
	strcpy(m[n].u.delete_end.msg, "more than --max-delete");
	n++;

	m[n].type = WIRE_BYE;
	m[n].u.bye.files_ok = 3;
	m[n].u.bye.files_failed = 1;
	m[n].u.bye.bytes = 1ull << 50;
	n++;

	m[n].type = WIRE_ERROR;
	m[n].u.error.status = -EIO;
	m[n].u.error.klass = 6;
	strcpy(m[n].u.error.msg, "disk on fire");
	n++;

	m[n].type = WIRE_CREDIT;
	m[n].ctrl_ack = 12;
	m[n].slot_ack = 34;
	n++;

	m[n].type = WIRE_PACK_DONE;
	m[n].ctrl_ack = 5;
	m[n].slot_ack = 6;
	m[n].u.pack_done.first_id = 0xfffffc00u;
	m[n].u.pack_done.count = WIRE_PACK_MAX_FILES; /* the most */
	n++;

	m[n].type = WIRE_KEPT;
	m[n].u.kept.first_id = 0x01020304u;
	m[n].u.kept.count = WIRE_KEPT_MAX; /* the most */
	n++;

	/* the longest: two names filling every byte a NAMES has */
	m[n].type = WIRE_NAMES;
	m[n].u.names.flags = WIRE_NAMES_END;
	{
		static char a[WIRE_NAME_MAX + 1], b[WIRE_NAME_MAX + 1];
		size_t lb = WIRE_NAMES_BYTES - (WIRE_NAME_MAX + 1) - 1;

		memset(a, 'a', WIRE_NAME_MAX);
		memset(b, 'b', lb);
		CHECK_EQ(wire_names_add(&m[n].u.names, a, WIRE_NAME_MAX), 0);
		CHECK_EQ(wire_names_add(&m[n].u.names, b, lb), 0);
		CHECK_EQ(m[n].u.names.len, WIRE_NAMES_BYTES);
		CHECK_EQ(wire_names_add(&m[n].u.names, "c", 1), -ENOSPC);
	}
	n++;

	m[n].type = WIRE_NAMES_ACK;
	m[n].u.names_ack.done = 1ull << 40;
	n++;

	/* -o/-g: a range then the owner, the longest names */
	m[n].type = WIRE_FILE;
	m[n].u.file.file_id = 11;
	m[n].u.file.flags = WIRE_FILE_RANGE | WIRE_FILE_OWNER;
	m[n].u.file.size = 1u << 20;
	m[n].u.file.mode = 04755;
	strcpy(m[n].u.file.path, "ranged");
	m[n].u.file.range_off = 1u << 19;
	m[n].u.file.range_len = 1u << 19;
	m[n].u.file.range_idx = 1;
	m[n].u.file.range_count = 2;
	m[n].u.file.owner.uid = 0xfffffffeu;
	m[n].u.file.owner.gid = 12346;
	memset(m[n].u.file.owner.user, 'u', WIRE_OWNER_NAME_MAX);
	memset(m[n].u.file.owner.group, 'g', WIRE_OWNER_NAME_MAX);
	n++;

	m[n].type = WIRE_NOTICE;
	memset(m[n].u.notice.msg, 'n', WIRE_MSG_MAX); /* the longest */
	n++;

	/* the longest: one attribute filling every byte */
	m[n].type = WIRE_XATTRS;
	m[n].u.xattrs.file_id = 77;
	{
		static uint8_t v[WIRE_XATTRS_BYTES];
		size_t vl = WIRE_XATTRS_BYTES - 3 - 6;

		memset(v, 0xab, sizeof(v));
		CHECK_EQ(wire_xattrs_add(&m[n].u.xattrs, "user.a", v, vl), 0);
		CHECK_EQ(m[n].u.xattrs.len, WIRE_XATTRS_BYTES);
		CHECK_EQ(wire_xattrs_add(&m[n].u.xattrs, "user.b", v, 0),
			 -ENOSPC);
	}
	n++;

	m[n].type = WIRE_LANES;
	m[n].u.lanes.up = 3;
	n++;

	m[n].type = WIRE_FREED;
	m[n].u.freed.count = 3;
	m[n].u.freed.slot[0] = 7;
	m[n].u.freed.slot[1] = 0;
	m[n].u.freed.slot[2] = 4095;
	n++;
	CHECK(n <= max);
	return n;
}

static void test_roundtrip_every_type(void)
{
	static struct wire_msg m[SAMPLES_MAX], d;
	size_t n = samples(m, SAMPLES_MAX);
	bool seen[WIRE_TYPE_MAX] = { false };

	for (size_t i = 0; i < n; i++) {
		int len = wire_encode(&m[i], buf, WIRE_CTRL_SIZE);

		CHECK(len >= (int)WIRE_CTRL_HDR);
		CHECK(len <= (int)WIRE_CTRL_SIZE);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
		if (memcmp(&m[i], &d, sizeof(d))) {
			printf("#   %s does not survive a round trip\n",
			       wire_type_name(m[i].type));
			CHECK(0);
		}
		seen[m[i].type] = true;
	}
	/* every type but the reserved AUTH and BATCH (test_batch_*) */
	for (unsigned int t = 1; t < WIRE_TYPE_MAX; t++)
		if (t != WIRE_AUTH && t != WIRE_BATCH)
			CHECK(seen[t]);
}

static void test_encode_limits(void)
{
	static struct wire_msg m[SAMPLES_MAX];
	size_t n = samples(m, SAMPLES_MAX);

	for (size_t i = 0; i < n; i++) {
		int len = wire_encode(&m[i], buf, WIRE_CTRL_SIZE);

		CHECK(len > 0);
		/* one byte short of room: refused, never cut */
		CHECK_EQ(wire_encode(&m[i], buf, (size_t)len - 1), -EMSGSIZE);
	}
	m[0].type = 0;
	CHECK_EQ(wire_encode(&m[0], buf, sizeof(buf)), -EINVAL);
	m[0].type = WIRE_TYPE_MAX;
	CHECK_EQ(wire_encode(&m[0], buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(m[7].type, WIRE_SUMS);
	m[7].u.sums.count = WIRE_SUMS_MAX + 1;
	CHECK_EQ(wire_encode(&m[7], buf, sizeof(buf)), -EINVAL);
	m[7].u.sums.count = 0;
	CHECK_EQ(wire_encode(&m[7], buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(m[8].type, WIRE_MATCH);
	m[8].u.match.count = WIRE_SUMS_MAX + 1;
	CHECK_EQ(wire_encode(&m[8], buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(m[9].type, WIRE_FILE_END);
	m[9].u.end.digest_len = WIRE_DIGEST_MAX + 1;
	CHECK_EQ(wire_encode(&m[9], buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(m[10].type, WIRE_FILE_RESULT);
	m[10].u.result.digest_len = WIRE_DIGEST_MAX + 1;
	CHECK_EQ(wire_encode(&m[10], buf, sizeof(buf)), -EINVAL);
}

/* Every proper prefix is refused, with or without a matching length. */
static void test_decode_truncated(void)
{
	static struct wire_msg m[SAMPLES_MAX], d;
	static uint8_t cut[WIRE_CTRL_SIZE];
	size_t n = samples(m, SAMPLES_MAX);

	for (size_t i = 0; i < n; i++) {
		int len = wire_encode(&m[i], buf, WIRE_CTRL_SIZE);

		for (int l = 0; l < len; l++) {
			CHECK_EQ(wire_decode(buf, (size_t)l, &d), -EPROTO);
			if (l >= 8) {
				/* lie about the length: the body must notice */
				memcpy(cut, buf, (size_t)l);
				put_be32(cut + 4, (uint32_t)l);
				if (wire_decode(cut, (size_t)l, &d) !=
				    -EPROTO) {
					printf("#   %s cut to %d accepted\n",
					       wire_type_name(m[i].type), l);
					CHECK(0);
				}
			}
		}
	}
}

static void test_decode_trailing_and_length(void)
{
	static struct wire_msg m[SAMPLES_MAX], d;
	size_t n = samples(m, SAMPLES_MAX);

	for (size_t i = 0; i < n; i++) {
		int len = wire_encode(&m[i], buf, WIRE_CTRL_SIZE);

		buf[len] = 0;
		/* one byte more than the message, length field unchanged */
		CHECK_EQ(wire_decode(buf, (size_t)len + 1, &d), -EPROTO);
		/* ... and with the length field claiming it too */
		put_be32(buf + 4, (uint32_t)len + 1);
		CHECK_EQ(wire_decode(buf, (size_t)len + 1, &d), -EPROTO);
		/* a length field that is off either way */
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
		put_be32(buf + 4, (uint32_t)len - 1);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
		put_be32(buf + 4, (uint32_t)len);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	}
}

/* LANES: 1..16 lanes, nothing else. */
static void test_lanes_range(void)
{
	struct wire_msg m = { .type = WIRE_LANES }, d;

	for (unsigned int up = 0; up <= 256; up++) {
		int len;

		m.u.lanes.up = (uint8_t)up;
		len = wire_encode(&m, buf, sizeof(buf));
		CHECK_EQ(len, WIRE_CTRL_HDR + 1);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d),
			 up >= 1 && up <= WIRE_STREAMS_MAX ? 0 : -EPROTO);
		if (up == 5)
			CHECK_EQ(d.u.lanes.up, 5);
	}
}

static void test_decode_unknown_type(void)
{
	struct wire_msg m = { .type = WIRE_CREDIT }, d;
	int len = wire_encode(&m, buf, sizeof(buf));
	const unsigned int bad[] = { 0, WIRE_AUTH, WIRE_TYPE_MAX,
				     WIRE_TYPE_MAX + 1, 0xff };

	CHECK_EQ(len, WIRE_CTRL_HDR);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		buf[0] = (uint8_t)bad[i];
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	}
	buf[0] = WIRE_CREDIT;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK(strcmp(wire_type_name(WIRE_HELLO), "HELLO") == 0);
	CHECK(strcmp(wire_type_name(0), "?") == 0);
	CHECK(strcmp(wire_type_name(WIRE_TYPE_MAX), "?") == 0);
}

/* An ERROR whose message is n bytes of 'x' (n may be over the limit). */
static int error_with_msg(size_t n, uint8_t *p)
{
	size_t len = WIRE_CTRL_HDR + 4 + 4 + 2 + n;

	memset(p, 0, len);
	p[0] = WIRE_ERROR;
	put_be32(p + 4, (uint32_t)len);
	p[WIRE_CTRL_HDR + 8] = (uint8_t)(n >> 8);
	p[WIRE_CTRL_HDR + 9] = (uint8_t)n;
	memset(p + WIRE_CTRL_HDR + 10, 'x', n);
	return (int)len;
}

static void test_decode_strings(void)
{
	struct wire_msg m, d;
	int len;

	/* the limit itself is fine, one more is not */
	len = error_with_msg(WIRE_MSG_MAX, buf);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(strlen(d.u.error.msg), WIRE_MSG_MAX);
	len = error_with_msg(WIRE_MSG_MAX + 1, buf);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	/* a string length that runs past the end */
	len = error_with_msg(10, buf);
	buf[WIRE_CTRL_HDR + 9] = 11;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[WIRE_CTRL_HDR + 9] = 9; /* short: a byte left over */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[WIRE_CTRL_HDR + 9] = 10;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	/* a NUL inside a string: a path "a\0b" */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE;
	strcpy(m.u.file.path, "aXb");
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 0);
	/* the path, then the (empty) link target: u16 0 */
	CHECK_EQ(buf[len - 4], 'X');
	buf[len - 4] = '\0';
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[len - 4] = 'Y';
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK(strcmp(d.u.file.path, "aYb") == 0);
	/* an empty string is a string */
	m.u.file.path[0] = '\0';
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(d.u.file.path[0], '\0');
}

static void test_decode_digest_len(void)
{
	struct wire_msg m = { .type = WIRE_FILE_END }, d;
	int len, at;

	m.u.end.digest_len = WIRE_DIGEST_MAX;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 0);
	/* after the digest: status u32 and an empty msg (u16 0) */
	at = len - 6 - WIRE_DIGEST_MAX - 1;
	/* digest_len is the byte before the digest, at the end */
	CHECK_EQ(buf[at], WIRE_DIGEST_MAX);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	/* 33 with 33 bytes present: still refused */
	buf[at] = WIRE_DIGEST_MAX + 1;
	buf[len] = 0;
	put_be32(buf + 4, (uint32_t)len + 1);
	CHECK_EQ(wire_decode(buf, (size_t)len + 1, &d), -EPROTO);
	buf[at] = 0xff;
	CHECK_EQ(wire_decode(buf, (size_t)len + 1, &d), -EPROTO);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE_RESULT;
	m.u.result.digest_len = 0;
	len = wire_encode(&m, buf, sizeof(buf));
	/* result: file_id, status, flags, sent, then digest_len */
	CHECK_EQ(buf[WIRE_CTRL_HDR + 20], 0);
	buf[WIRE_CTRL_HDR + 20] = WIRE_DIGEST_MAX + 1;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
}

/*
 * HELLO as documented: header type u8, 0 u8, 0 u16, total u32, ctrl_ack
 * u32, slot_ack u32; body role u16, csum u8, level u8, flags u32,
 * features u32, chunk_size u32, bwlimit u64, nonce[32], npaths u16,
 * paths_len u16 and the paths, each NUL-terminated, nfilters u16,
 * filters_len u16 and the filters (none here). Big-endian.
 */
static void test_golden_hello(void)
{
	static const char want_hex[] =
		"01000000"
		"00000056"
		"01020304"
		"0a0b0c0d" /* header */
		"0001"
		"02"
		"00"
		"00000003"
		"00000000"			   /* role..features */
		"00100000"			   /* chunk_size */
		"0000000000000000"		   /* bwlimit */
		"000102030405060708090a0b0c0d0e0f" /* nonce */
		"101112131415161718191a1b1c1d1e1f"
		"0001"
		"0004"
		"642f7800" /* "d/x" */
		"0000"
		"0000"	/* no filters */
		"01"	/* one lane */
		"03";	/* --sync mtime */
	uint8_t want[86];
	struct wire_msg m, d;
	int len;

	hex_to(want_hex, want, sizeof(want));
	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.ctrl_ack = 0x01020304u;
	m.slot_ack = 0x0a0b0c0du;
	m.u.hello.role = WIRE_PUSH;
	m.u.hello.csum = WIRE_CSUM_SHA256;
	m.u.hello.flags = WIRE_HELLO_FSYNC | WIRE_HELLO_DEST_DIR;
	m.u.hello.chunk_size = 1u << 20;
	for (unsigned int i = 0; i < WIRE_NONCE_LEN; i++)
		m.u.hello.nonce[i] = (uint8_t)i;
	CHECK_EQ(wire_hello_add_path(&m.u.hello, "d/x"), 0);
	m.u.hello.streams = 1;
	m.u.hello.sync = WIRE_SYNC_MTIME;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, sizeof(want));
	if (len == (int)sizeof(want) && memcmp(buf, want, sizeof(want))) {
		show_diff(buf, want, sizeof(want));
		CHECK(0);
	}
	CHECK_EQ(wire_decode(want, sizeof(want), &d), 0);
	CHECK(memcmp(&d, &m, sizeof(m)) == 0);
	/* a --sync level past checksum, or none at all, is malformed */
	want[sizeof(want) - 1] = WIRE_SYNC_MAX + 1;
	CHECK_EQ(wire_decode(want, sizeof(want), &d), -EPROTO);
	CHECK_EQ(wire_decode(want, sizeof(want) - 1, &d), -EPROTO);
}

/*
 * HELLO filters: '+' or '-' then a pattern, NUL-terminated, as many as
 * nfilters says, within WIRE_FILTERS_MAX; anything else is malformed.
 */
static void test_hello_filters(void)
{
	struct wire_msg m, d;
	size_t at; /* offset of nfilters in the encoding */
	int len;

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.u.hello.role = WIRE_PULL;
	CHECK_EQ(wire_hello_add_path(&m.u.hello, "src"), 0);
	CHECK_EQ(wire_hello_add_filter(&m.u.hello, false, ""), -EINVAL);
	CHECK_EQ(wire_hello_add_filter(&m.u.hello, true, "keep.o"), 0);
	CHECK_EQ(wire_hello_add_filter(&m.u.hello, false, "*.o"), 0);
	CHECK_EQ(m.u.hello.nfilters, 2);
	m.u.hello.streams = 1;
	CHECK(!strcmp(wire_hello_filter(&m.u.hello, 0), "+keep.o"));
	CHECK(!strcmp(wire_hello_filter(&m.u.hello, 1), "-*.o"));
	CHECK(!strcmp(wire_hello_filter(&m.u.hello, 2), ""));
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK(memcmp(&d.u.hello, &m.u.hello, sizeof(m.u.hello)) == 0);
	at = WIRE_CTRL_HDR + 56 + 4 + 4; /* "src\0" */
	CHECK_EQ(buf[at + 1], 2);
	CHECK_EQ(buf[at + 3], 13);
	CHECK_EQ(buf[at + 4], '+');

	buf[at + 4] = 'x'; /* neither '+' nor '-' */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 4] = '+';
	buf[at + 1] = 3; /* more rules than strings */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 1] = 2;
	buf[at + 5] = '\0'; /* "+" alone: an empty pattern */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 5] = 'k';
	buf[len - 3] = 'o'; /* the last one not terminated (then streams) */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[len - 3] = '\0';
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	/* a length past the bound */
	buf[at + 2] = (uint8_t)((WIRE_FILTERS_MAX + 1) >> 8);
	buf[at + 3] = (uint8_t)(WIRE_FILTERS_MAX + 1);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	/* the HELLO of protocol 2 (no filter fields) is short now */
	CHECK_EQ(wire_decode(buf, at, &d), -EPROTO);

	/* filling them up: refused past WIRE_FILTERS_MAX, never cut */
	memset(&m, 0, sizeof(m));
	{
		char pat[100];
		unsigned int n = 0;

		memset(pat, 'p', sizeof(pat) - 1);
		pat[sizeof(pat) - 1] = '\0';
		while (!wire_hello_add_filter(&m.u.hello, false, pat))
			n++;
		CHECK_EQ(n, WIRE_FILTERS_MAX / 101);
		CHECK(m.u.hello.filters_len <= WIRE_FILTERS_MAX);
	}
}

/*
 * The handshake MACs cover the filters: a man in the middle who drops or
 * changes a pull's --exclude (to get more of the receiver's tree sent)
 * breaks both MACs. Without filters the MAC is the one of before.
 */
static void test_hello_mac_filters(void)
{
	uint8_t key[KEY_LEN];
	uint8_t a[WIRE_MAC_LEN], b[WIRE_MAC_LEN], c[WIRE_MAC_LEN];
	struct wire_hello h, h2;
	struct wire_welcome w, w2;

	memset(key, 7, sizeof(key));
	memset(&w, 0, sizeof(w));
	memset(w.nonce, 9, sizeof(w.nonce));
	memset(&h, 0, sizeof(h));
	h.role = WIRE_PULL;
	CHECK_EQ(wire_hello_add_path(&h, "src"), 0);
	CHECK_EQ(auth_mac(key, AUTH_CLIENT, &h, &w, a), 0);
	{
		/*
		 * protocol 3's MAC: label, nonces, params (no filters: two
		 * zero bytes), paths, filters, then the lanes: HELLO's
		 * streams, WELCOME's features u32, streams, token, rails.
		 */
		const char *label = "rdcp1 client";
		uint8_t params[24] = { 0, WIRE_PULL };
		uint8_t lanes[15] = { 0 };
		const void *parts[] = { label,	 h.nonce,   w.nonce, params,
					h.paths, h.filters, lanes };
		size_t lens[] = { strlen(label) + 1, WIRE_NONCE_LEN,
				  WIRE_NONCE_LEN,    sizeof(params),
				  h.paths_len,	     0,
				  sizeof(lanes) };

		params[13] = 1; /* npaths */
		CHECK_EQ(key_hmac(key, parts, lens, 7, c), 0);
		CHECK(memcmp(a, c, WIRE_MAC_LEN) == 0);
	}
	h2 = h;
	CHECK_EQ(wire_hello_add_filter(&h2, false, "*.key"), 0);
	CHECK_EQ(auth_mac(key, AUTH_CLIENT, &h2, &w, b), 0);
	CHECK(memcmp(a, b, WIRE_MAC_LEN) != 0);
	h2 = h;
	CHECK_EQ(wire_hello_add_filter(&h2, true, "*.key"), 0);
	CHECK_EQ(auth_mac(key, AUTH_CLIENT, &h2, &w, c), 0);
	CHECK(memcmp(b, c, WIRE_MAC_LEN) != 0); /* '+' vs '-' */
	/*
	 * WELCOME's lanes and rails are covered: a man in the middle who
	 * points a rail elsewhere (its lanes would join his host) breaks it.
	 */
	w.streams = 4;
	w.rails = 2;
	w.rail[1].family = 4;
	memcpy(w.rail[1].addr, "\x0a\x4d\x03\x01", 4);
	CHECK_EQ(auth_mac(key, AUTH_SERVER, &h, &w, a), 0);
	w2 = w;
	w2.rail[1].addr[3] = 66;
	CHECK_EQ(auth_mac(key, AUTH_SERVER, &h, &w2, b), 0);
	CHECK(memcmp(a, b, WIRE_MAC_LEN) != 0);
	w2 = w;
	w2.token[0] ^= 1;
	CHECK_EQ(auth_mac(key, AUTH_SERVER, &h, &w2, b), 0);
	CHECK(memcmp(a, b, WIRE_MAC_LEN) != 0);
	w2 = w;
	w2.streams = 2;
	CHECK_EQ(auth_mac(key, AUTH_SERVER, &h, &w2, b), 0);
	CHECK(memcmp(a, b, WIRE_MAC_LEN) != 0);
	/* a --sync level set on the way breaks it (nothing kept stale) */
	h2 = h;
	h2.sync = WIRE_SYNC_EXISTS;
	CHECK_EQ(auth_mac(key, AUTH_SERVER, &h2, &w, b), 0);
	CHECK(memcmp(a, b, WIRE_MAC_LEN) != 0);
	/* what lies past rails is not on the wire, nor in the MAC */
	w2 = w;
	w2.rail[3].family = 6;
	CHECK_EQ(auth_mac(key, AUTH_SERVER, &h, &w2, b), 0);
	CHECK(memcmp(a, b, WIRE_MAC_LEN) == 0);
}

/*
 * Slot header as documented: seq u64, file_id u32, len u32, offset u64,
 * crc u32, flags u16, reserved u16, raw_len u32, reserved[8], tag[16], and
 * the CRC32 (IEEE, as zlib) of those 60 bytes. Big-endian.
 */
static const char golden_slot_hex[] = "0102030405060708"
				      "11121314"
				      "00001000"
				      "2122232425262728"
				      "deadbeef"
				      "0000"
				      "0000"
				      "00001000"
				      "0000000000000000"
				      "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
				      "291220bf";

static bool slot_eq(const struct wire_slot_hdr *a,
		    const struct wire_slot_hdr *b)
{
	return a->seq == b->seq && a->file_id == b->file_id &&
	       a->len == b->len && a->offset == b->offset && a->crc == b->crc &&
	       a->flags == b->flags && a->raw_len == b->raw_len &&
	       !memcmp(a->tag, b->tag, 16);
}

static void golden_slot(struct wire_slot_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->seq = 0x0102030405060708ull;
	h->file_id = 0x11121314u;
	h->len = 0x1000;
	h->offset = 0x2122232425262728ull;
	h->crc = 0xdeadbeefu;
	h->raw_len = 0x1000;
	for (unsigned int i = 0; i < 16; i++)
		h->tag[i] = (uint8_t)(0xa0 + i);
}

/*
 * Rails (doc/PROTOCOL.md: Rails): RING as documented, today's body
 * (addr u64, rkey u32, slots u16, chunk_size u32, hdr_addr u64) then
 * rails u8 and an rkey u32 for each of rails 1..rails-1; WELCOME's rails
 * past its token are refused over 16, over its streams, or with an
 * address family other than 4 and 6.
 */
static void test_rails(void)
{
	static const char want_hex[] =
		"03000000"
		"00000034"
		"00000000"
		"00000000" /* header */
		"00007f0012345000"
		"abcdef01"
		"0040"
		"00100000"
		"00007f0000000000"
		"01" /* today's RING: target named */
		"03"
		"11223344"
		"55667788"; /* rails 1, 2 */
	uint8_t want[52];
	struct wire_msg m, d;
	int len;

	hex_to(want_hex, want, sizeof(want));
	memset(&m, 0, sizeof(m));
	m.type = WIRE_RING;
	m.u.ring.addr = 0x00007f0012345000ull;
	m.u.ring.rkey = 0xabcdef01u;
	m.u.ring.slots = 64;
	m.u.ring.chunk_size = 1u << 20;
	m.u.ring.hdr_addr = 0x7f0000000000ull;
	m.u.ring.target = WIRE_TARGET_NAMED;
	m.u.ring.rails = 3;
	m.u.ring.rkeys[1] = 0x11223344u;
	m.u.ring.rkeys[2] = 0x55667788u;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, sizeof(want));
	if (len == (int)sizeof(want) && memcmp(buf, want, sizeof(want))) {
		show_diff(buf, want, sizeof(want));
		CHECK(0);
	}
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK(memcmp(&d, &m, sizeof(m)) == 0);
	buf[43] = 17; /* rails over 16 */
	CHECK(wire_decode(buf, (size_t)len, &d) < 0);
	buf[43] = 3;
	buf[42] = 2; /* no such target */
	CHECK(wire_decode(buf, (size_t)len, &d) < 0);

	/* WELCOME: rails over streams, then a bad family, refused. */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_WELCOME;
	m.u.welcome.streams = 2;
	m.u.welcome.rails = 2;
	m.u.welcome.rail[1].family = 4;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(d.u.welcome.rails, 2);
	CHECK_EQ(d.u.welcome.rail[1].family, 4);
	m.u.welcome.streams = 1;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(wire_decode(buf, (size_t)len, &d) < 0);
	m.u.welcome.streams = 2;
	m.u.welcome.rail[1].family = 5;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(wire_decode(buf, (size_t)len, &d) < 0);
}

static void test_golden_slot_header(void)
{
	uint8_t want[WIRE_SLOT_HDR], got[WIRE_SLOT_HDR];
	struct wire_slot_hdr h, d;

	hex_to(golden_slot_hex, want, sizeof(want));
	golden_slot(&h);
	memset(got, 0xee, sizeof(got));
	wire_slot_encode(got, &h);
	if (memcmp(got, want, sizeof(want))) {
		show_diff(got, want, sizeof(want));
		CHECK(0);
	}
	CHECK_EQ(wire_slot_decode(want, &d), 0);
	CHECK(slot_eq(&d, &h));
}

static void test_slot_roundtrip(void)
{
	uint8_t p[WIRE_SLOT_HDR];
	struct wire_slot_hdr h, d;

	for (uint64_t k = 0; k < 200; k++) {
		memset(&h, 0, sizeof(h));
		h.seq = k * 0x9E3779B97F4A7C15ull;
		h.file_id = (uint32_t)(k * 7);
		h.len = (uint32_t)(k * 4093);
		h.raw_len = h.len;
		h.offset = k << 33;
		h.crc = (uint32_t)~k;
		h.flags = (uint16_t)(k & 7);
		h.tag[k % 16] = (uint8_t)k;
		wire_slot_encode(p, &h);
		CHECK_EQ(wire_slot_decode(p, &d), 0);
		CHECK(slot_eq(&d, &h));
	}
}

/* Any single flipped bit, the reserved ones and the CRC's included. */
static void test_slot_bitflip(void)
{
	uint8_t p[WIRE_SLOT_HDR];
	struct wire_slot_hdr h, d;
	int bad = 0;

	golden_slot(&h);
	for (unsigned int bit = 0; bit < 8 * WIRE_SLOT_HDR; bit++) {
		wire_slot_encode(p, &h);
		p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		if (wire_slot_decode(p, &d) != -EBADMSG)
			bad++;
	}
	CHECK_EQ(bad, 0);
}

static void test_imm(void)
{
	const uint64_t seqs[] = { 0,	   1,	       0xfffe,	  0xffff,
				  0x10000, 0x12345678, UINT64_MAX };
	const unsigned int slots[] = { 0, 1, 63, 0xffff };

	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		for (size_t j = 0; j < sizeof(slots) / sizeof(slots[0]); j++) {
			uint32_t imm = wire_imm(seqs[i], slots[j]);

			CHECK_EQ(wire_imm_slot(imm), slots[j]);
			CHECK_EQ(wire_imm_seq16(imm), seqs[i] & 0xffff);
		}
	}
	CHECK_EQ(wire_imm(0x12345, 7), 0x23450007u);
}

/* The AAD of a sealed chunk, as doc/PROTOCOL.md documents it. */
static void test_chunk_aad(void)
{
	static const uint8_t want[WIRE_AAD_LEN] = {
		0x01, 0x02, 0x03, 0x04,				/* file_id */
		0x00, 0x00, 0x00, 0x05, 0x00, 0x10, 0x00, 0x00, /* offset */
		0x00, 0x10, 0x00, 0x00,				/* raw_len */
		0x00, 0x06,					/* flags */
		0,    0,    0,	  0,	0,    0,
	};
	uint8_t aad[WIRE_AAD_LEN];

	wire_chunk_aad(aad, 0x01020304u, 0x500100000ull, 1u << 20,
		       WIRE_SLOT_COMPRESSED | WIRE_SLOT_ENCRYPTED);
	CHECK(memcmp(aad, want, sizeof(want)) == 0);
}

/* KEPT counts 1 .. WIRE_KEPT_MAX entries; 0 or more is refused. */
static void test_decode_kept(void)
{
	struct wire_msg m = { .type = WIRE_KEPT }, d;
	const uint32_t counts[] = { 0, 1, WIRE_KEPT_MAX, WIRE_KEPT_MAX + 1,
				    UINT32_MAX };
	int len;

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		bool ok = counts[i] && counts[i] <= WIRE_KEPT_MAX;

		m.u.kept.first_id = 9;
		m.u.kept.count = counts[i];
		len = wire_encode(&m, buf, sizeof(buf));
		CHECK_EQ(len, WIRE_CTRL_HDR + 8);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), ok ? 0 : -EPROTO);
		if (ok)
			CHECK_EQ(d.u.kept.count, counts[i]);
	}
}

/* PACK_DONE counts 1 .. WIRE_PACK_MAX_FILES files; 0 or more is refused. */
static void test_decode_pack_done(void)
{
	struct wire_msg m = { .type = WIRE_PACK_DONE }, d;
	const uint32_t counts[] = { 0, 1, WIRE_PACK_MAX_FILES,
				    WIRE_PACK_MAX_FILES + 1, UINT32_MAX };
	int len;

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		bool ok = counts[i] && counts[i] <= WIRE_PACK_MAX_FILES;

		m.u.pack_done.first_id = 7;
		m.u.pack_done.count = counts[i];
		len = wire_encode(&m, buf, sizeof(buf));
		CHECK_EQ(len, WIRE_CTRL_HDR + 8);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), ok ? 0 : -EPROTO);
		if (ok) {
			CHECK_EQ(d.u.pack_done.first_id, 7);
			CHECK_EQ(d.u.pack_done.count, counts[i]);
		}
	}
}

/*
 * --delete's messages: DONE's flags (WHOLE only) and max_delete, DELETED's
 * kind (up to OTHER), flags (DRY only), status (never positive) and path
 * (empty only with a status), DELETE_END's status; the exact layout of
 * each.
 */
static void test_decode_delete(void)
{
	static const uint8_t done[] = { 0, 0, 0, 1, 0, 0, 0, 0, 0,    0,
					0, 5, 0, 0, 0, 0, 0, 0, 0x12, 0x34 };
	static const uint8_t del[] = { 3,   1,	 0xff, 0xff, 0xff, 0xf0,
				       0,   3,	 'a',  '/',  'b',  0,
				       2,   'n', 'o' };
	static const uint8_t end[] = { 0xff, 0xff, 0xff, 0xf9, 0, 0, 0, 0,
				       0,    0,	   0,	 2,    0, 0 };
	struct wire_msg m = { .type = WIRE_DONE }, d;
	int len;

	m.u.done.flags = WIRE_DONE_WHOLE;
	m.u.done.max_delete = 5;
	m.u.done.seq_end = 0x1234;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, WIRE_CTRL_HDR + sizeof(done));
	CHECK_EQ(memcmp(buf + WIRE_CTRL_HDR, done, sizeof(done)), 0);
	buf[WIRE_CTRL_HDR + 3] = 2; /* an unknown flag */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_DELETED;
	m.u.deleted.kind = WIRE_KIND_OTHER;
	m.u.deleted.flags = WIRE_DELETED_DRY;
	m.u.deleted.status = -16;
	strcpy(m.u.deleted.path, "a/b");
	strcpy(m.u.deleted.msg, "no");
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, WIRE_CTRL_HDR + sizeof(del));
	CHECK_EQ(memcmp(buf + WIRE_CTRL_HDR, del, sizeof(del)), 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	buf[WIRE_CTRL_HDR] = WIRE_KIND_OTHER + 1;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[WIRE_CTRL_HDR] = WIRE_KIND_FILE;
	buf[WIRE_CTRL_HDR + 1] = 2; /* an unknown flag */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[WIRE_CTRL_HDR + 1] = 0;
	buf[WIRE_CTRL_HDR + 2] = 0; /* status 0x00fffff0: positive */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	m.u.deleted.path[0] = '\0'; /* DEST itself: only with a status */
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	m.u.deleted.status = 0;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_DELETE_END;
	m.u.delete_end.status = -E2BIG;
	m.u.delete_end.count = 2;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, WIRE_CTRL_HDR + sizeof(end));
	CHECK_EQ(memcmp(buf + WIRE_CTRL_HDR, end, sizeof(end)), 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(d.u.delete_end.status, -E2BIG);
	buf[WIRE_CTRL_HDR] = 0; /* status positive */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
}

/*
 * NAMES (a pull's --files-from): the exact layout; names of 1..4095
 * bytes, each NUL-terminated, as many as counted, none only with END, no
 * unknown flag. NAMES_ACK: one u64.
 */
static void test_decode_names(void)
{
	/* flags, count, length, then the names */
	static const uint8_t names[] = { 0,   1,   0,	2, 0,	6,
					 'a', '/', 'b', 0, 'c', 0 };
	static const uint8_t ack[] = { 0, 0, 0, 1, 0, 0, 0, 2,
				       0, 0, 0, 0, 0, 0, 0, 9 };
	struct wire_msg m = { .type = WIRE_NAMES }, d;
	size_t at = WIRE_CTRL_HDR;
	int len;

	CHECK_EQ(wire_names_add(&m.u.names, "a/b", 3), 0);
	CHECK_EQ(wire_names_add(&m.u.names, "c", 1), 0);
	CHECK_EQ(wire_names_add(&m.u.names, "", 0), -ENOSPC);
	m.u.names.flags = WIRE_NAMES_END;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, WIRE_CTRL_HDR + sizeof(names));
	CHECK_EQ(memcmp(buf + at, names, sizeof(names)), 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(d.u.names.count, 2);
	CHECK(!strcmp(d.u.names.names + 4, "c"));
	buf[at + 1] = 2; /* an unknown flag */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 1] = 1;
	buf[at + 3] = 3; /* more names counted than there are */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 3] = 2;
	buf[at + 10] = 0; /* "a/b", "", "": an empty name */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 10] = 'c';
	buf[at + 11] = 'd'; /* the last one not NUL-terminated */
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	buf[at + 11] = 0;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);

	/* none: only to end the list */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_NAMES;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	m.u.names.flags = WIRE_NAMES_END;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);

	/* a name longer than WIRE_NAME_MAX */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_NAMES;
	memset(m.u.names.names, 'x', WIRE_NAME_MAX + 1);
	m.u.names.count = 1;
	m.u.names.len = WIRE_NAME_MAX + 2;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	m.u.names.len = WIRE_NAMES_BYTES + 1; /* more than a NAMES holds */
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EMSGSIZE);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_NAMES_ACK;
	m.u.names_ack.done = (1ull << 32) + 2;
	m.u.names_ack.seq_end = 9;
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, WIRE_CTRL_HDR + sizeof(ack));
	CHECK_EQ(memcmp(buf + at, ack, sizeof(ack)), 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(d.u.names_ack.done, (1ull << 32) + 2);
	CHECK_EQ(d.u.names_ack.seq_end, 9);
}

/* ---- packed slots ---- */

static uint8_t pbuf[4 * (WIRE_PACK_REC_HDR + WIRE_DIGEST_MAX + 4096 + 1024)];
static char long_path[4097];

/*
 * Record sample i, with distinct non-zero fields: 0 a file with a CRC32
 * digest, 1 one with a SHA-256 digest and the longest path, 2 an ABORT
 * whose data is the message, 3 an empty file without a digest.
 */
static void pack_sample(struct wire_pack_rec *r, unsigned int i)
{
	static const uint8_t data[] = "file content\0with a NUL, fine here";
	static const char msg[] = "cannot read 'f': Input/output error";

	memset(long_path, 'L', 4095);
	long_path[4095] = '\0';
	memset(r, 0, sizeof(*r));
	r->file_id = 100 + i;
	r->mode = 0100644;
	r->mtime_sec = -5; /* before 1970: signed on the wire */
	r->mtime_nsec = 999999999u;
	r->atime_sec = INT64_MAX;
	r->atime_nsec = 1;
	switch (i) {
	case 0:
		r->digest_len = 4;
		memcpy(r->digest, "\xde\xad\xbe\xef", 4);
		r->path = "dir/a.txt";
		r->data = data;
		r->size = sizeof(data) - 1;
		break;
	case 1:
		r->digest_len = WIRE_DIGEST_MAX;
		for (unsigned int k = 0; k < WIRE_DIGEST_MAX; k++)
			r->digest[k] = (uint8_t)(0xa0 + k);
		r->path = long_path;
		r->data = (const uint8_t *)"x";
		r->size = 1;
		r->mtime_sec = INT64_MIN;
		break;
	case 2:
		r->flags = WIRE_PACK_ABORT;
		r->status = -EIO;
		r->path = "dir/b";
		r->data = (const uint8_t *)msg;
		r->size = sizeof(msg) - 1;
		break;
	default:
		r->path = "empty";
		r->data = (const uint8_t *)"";
		r->mode = 0100600;
		break;
	}
	r->path_len = (uint16_t)strlen(r->path);
}

#define PACK_SAMPLES 4u

/* Header, digest and path with wire_pack_put, then the data: the length. */
static size_t pack_enc(uint8_t *p, const struct wire_pack_rec *r)
{
	size_t off = wire_pack_put(p, r);

	CHECK_EQ(off, wire_pack_rec_len(r->path_len, r->digest_len, 0) +
			      wire_pack_owner_len(r));
	memcpy(p + off, r->data, r->size);
	return off + r->size;
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
	       !memcmp(&a->owner, &b->owner, sizeof(a->owner)) &&
	       !memcmp(a->digest, b->digest, a->digest_len) &&
	       !memcmp(a->path, b->path, a->path_len) &&
	       !memcmp(a->data, b->data, a->size);
}

/* -EPROTO, with *pos left where it was. */
static bool pack_refused(const uint8_t *p, size_t len, size_t pos)
{
	struct wire_pack_rec d;
	size_t at = pos;

	return wire_pack_next(p, len, &at, &d) == -EPROTO && at == pos;
}

static void test_pack_roundtrip(void)
{
	struct wire_pack_rec r[PACK_SAMPLES], d;
	size_t off[PACK_SAMPLES + 1] = { 0 }, pos = 0, n;

	for (unsigned int i = 0; i < PACK_SAMPLES; i++) {
		pack_sample(&r[i], i);
		/* alone, exactly its length */
		n = pack_enc(pbuf, &r[i]);
		pos = 0;
		CHECK_EQ(wire_pack_next(pbuf, n, &pos, &d), 0);
		CHECK_EQ(pos, n);
		CHECK(pack_eq(&r[i], &d));
		/* the pointers go into the buffer, never copied */
		CHECK(d.path ==
		      (const char *)pbuf + WIRE_PACK_REC_HDR + r[i].digest_len);
		CHECK(d.data == (const uint8_t *)d.path + r[i].path_len);
	}
	/* back to back: pos moves from one record to the next */
	for (unsigned int i = 0; i < PACK_SAMPLES; i++)
		off[i + 1] = off[i] + pack_enc(pbuf + off[i], &r[i]);
	pos = 0;
	for (unsigned int i = 0; i < PACK_SAMPLES; i++) {
		CHECK_EQ(pos, off[i]);
		CHECK_EQ(wire_pack_next(pbuf, off[PACK_SAMPLES], &pos, &d), 0);
		CHECK_EQ(pos, off[i + 1]);
		if (!pack_eq(&r[i], &d)) {
			printf("#   record %u does not survive a round trip\n",
			       i);
			CHECK(0);
		}
		CHECK(d.data == pbuf + off[i + 1] - r[i].size);
	}
	/* nothing more at the end */
	CHECK(pack_refused(pbuf, off[PACK_SAMPLES], off[PACK_SAMPLES]));
}

/* Every proper prefix is refused, at the start or after another record. */
static void test_pack_truncated(void)
{
	struct wire_pack_rec r, first;
	size_t lead, n;
	int bad = 0;

	pack_sample(&first, 3);
	lead = pack_enc(pbuf, &first);
	for (unsigned int i = 0; i < PACK_SAMPLES; i++) {
		pack_sample(&r, i);
		n = pack_enc(pbuf + lead, &r);
		for (size_t l = 0; l < n; l++) {
			if (!pack_refused(pbuf + lead, l, 0) ||
			    !pack_refused(pbuf, lead + l, lead))
				bad++;
		}
		CHECK(!pack_refused(pbuf, lead + n, lead));
	}
	CHECK_EQ(bad, 0);
}

/*
 * Encodes r (any field values; wire_pack_put checks nothing) and whether
 * wire_pack_next takes it, with a 64-byte tail after it so that no
 * refusal is for want of bytes.
 */
static int pack_try(const struct wire_pack_rec *r)
{
	struct wire_pack_rec d;
	size_t n = pack_enc(pbuf, r), pos = 0;
	int rc;

	memset(pbuf + n, 'T', 64);
	rc = wire_pack_next(pbuf, n + 64, &pos, &d);
	if (rc)
		CHECK_EQ(pos, 0);
	else
		CHECK_EQ(pos, n);
	return rc;
}

static void test_pack_refusals(void)
{
	static char path[4097], msg[WIRE_MSG_MAX + 2];
	struct wire_pack_rec base, r;
	size_t n;

	pack_sample(&base, 0);
	CHECK_EQ(pack_try(&base), 0);

	/* flags: only ABORT and OWNER (test_golden_owner) are known */
	for (unsigned int bit = 2; bit < 8; bit++) {
		r = base;
		r.flags = (uint8_t)(1u << bit);
		CHECK_EQ(pack_try(&r), -EPROTO);
	}
	/* time stamps: nanoseconds below one second */
	r = base;
	r.mtime_nsec = 1000000000u;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.mtime_nsec = UINT32_MAX;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r = base;
	r.atime_nsec = 1000000000u;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.atime_nsec = 999999999u;
	CHECK_EQ(pack_try(&r), 0);

	/* path: 1 .. 4095 bytes, no NUL */
	memset(path, 'p', 4096);
	r = base;
	r.path = path;
	r.path_len = 0;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.path_len = 1;
	CHECK_EQ(pack_try(&r), 0);
	r.path_len = 4095;
	CHECK_EQ(pack_try(&r), 0);
	r.path_len = 4096;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.path_len = 10;
	path[5] = '\0';
	CHECK_EQ(pack_try(&r), -EPROTO);
	path[5] = 'p';
	path[9] = '\0'; /* last byte */
	CHECK_EQ(pack_try(&r), -EPROTO);
	path[9] = 'p';
	path[0] = '\0';
	CHECK_EQ(pack_try(&r), -EPROTO);
	path[0] = 'p';
	CHECK_EQ(pack_try(&r), 0);

	/* status: 0 without ABORT, negative with it */
	r = base;
	r.status = -EIO;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.status = EIO; /* positive: not an errno either */
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.status = INT32_MIN;
	CHECK_EQ(pack_try(&r), -EPROTO);
	pack_sample(&base, 2); /* ABORT */
	CHECK_EQ(pack_try(&base), 0);
	r = base;
	r.status = 0;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.status = EIO;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.status = INT32_MIN;
	CHECK_EQ(pack_try(&r), 0);

	/* ABORT message: up to WIRE_MSG_MAX bytes, no NUL */
	memset(msg, 'm', sizeof(msg));
	r = base;
	r.data = (const uint8_t *)msg;
	r.size = WIRE_MSG_MAX;
	CHECK_EQ(pack_try(&r), 0);
	r.size = WIRE_MSG_MAX + 1;
	CHECK_EQ(pack_try(&r), -EPROTO);
	r.size = 20;
	msg[7] = '\0';
	CHECK_EQ(pack_try(&r), -EPROTO);
	msg[7] = 'm';
	msg[19] = '\0';
	CHECK_EQ(pack_try(&r), -EPROTO);
	msg[19] = 'm';
	r.size = 0; /* an empty message is a message */
	CHECK_EQ(pack_try(&r), 0);
	/* file data may be longer and hold NULs (sample 0 has one) */
	pack_sample(&base, 0);
	CHECK(memchr(base.data, '\0', base.size) != NULL);
	r = base;
	r.data = (const uint8_t *)msg;
	r.size = WIRE_MSG_MAX + 1;
	CHECK_EQ(pack_try(&r), 0);

	/*
	 * digest_len over 32: wire_pack_put cannot write it (the digest
	 * is 32 bytes), so patch byte 5 of a record with a 32-byte digest;
	 * a 64-byte tail, as in pack_try(), holds the 33rd byte.
	 */
	pack_sample(&r, 1);
	n = pack_enc(pbuf, &r);
	memset(pbuf + n, 'T', 64);
	CHECK_EQ(pbuf[5], WIRE_DIGEST_MAX);
	CHECK(!pack_refused(pbuf, n + 64, 0));
	pbuf[5] = WIRE_DIGEST_MAX + 1;
	CHECK(pack_refused(pbuf, n + 64, 0));
	pbuf[5] = 0xff;
	CHECK(pack_refused(pbuf, n + 64, 0));
	pbuf[5] = WIRE_DIGEST_MAX;

	/* *pos past the end, however far */
	CHECK(pack_refused(pbuf, n, n + 1));
	CHECK(pack_refused(pbuf, n, SIZE_MAX));
	CHECK(pack_refused(pbuf, 0, 1));
	CHECK(!pack_refused(pbuf, n, 0));
}

/*
 * Two records as documented (wire_slot.h, "packed slots"), big-endian: u32
 * file_id, u8 flags, u8 digest_len, u16 path_len, u32 mode, i64
 * mtime_sec, u32 mtime_nsec, i64 atime_sec, u32 atime_nsec, u32 size,
 * i32 status, then digest, path and data; the second one an ABORT.
 */
static void test_pack_golden(void)
{
	static const char want_hex[] = "01020304"	  /* file_id */
				       "00"		  /* flags */
				       "04"		  /* digest_len */
				       "0003"		  /* path_len */
				       "000081a4"	  /* mode 0100644 */
				       "fffffffffffffffe" /* mtime_sec -2 */
				       "3b9ac9ff" /* mtime_nsec 999999999 */
				       "0000000011223344" /* atime_sec */
				       "00000005"	  /* atime_nsec */
				       "00000002"	  /* size */
				       "00000000"	  /* status */
				       "deadbeef"	  /* digest */
				       "612f62"		  /* "a/b" */
				       "6869"		  /* "hi" */
				       "01020305"
				       "01" /* ABORT */
				       "00"
				       "0001"
				       "00008180" /* mode 0100600 */
				       "0000000000000000"
				       "00000000"
				       "0000000000000000"
				       "00000000"
				       "00000003"
				       "fffffffb" /* -EIO */
				       "78"	  /* "x" */
				       "656f66";  /* "eof" */
	uint8_t want[101], got[sizeof(want)];
	struct wire_pack_rec r[2], d;
	size_t n, pos = 0;

	hex_to(want_hex, want, sizeof(want));
	memset(r, 0, sizeof(r));
	r[0].file_id = 0x01020304u;
	r[0].digest_len = 4;
	memcpy(r[0].digest, "\xde\xad\xbe\xef", 4);
	r[0].path_len = 3;
	r[0].path = "a/b";
	r[0].mode = 0100644;
	r[0].mtime_sec = -2;
	r[0].mtime_nsec = 999999999u;
	r[0].atime_sec = 0x11223344;
	r[0].atime_nsec = 5;
	r[0].size = 2;
	r[0].data = (const uint8_t *)"hi";
	r[1].file_id = 0x01020305u;
	r[1].flags = WIRE_PACK_ABORT;
	r[1].path_len = 1;
	r[1].path = "x";
	r[1].mode = 0100600;
	r[1].size = 3;
	r[1].status = -EIO;
	r[1].data = (const uint8_t *)"eof";
	CHECK_EQ(-EIO, -5); /* Linux */

	memset(got, 0xee, sizeof(got));
	n = pack_enc(got, &r[0]);
	CHECK_EQ(n, 53);
	n += pack_enc(got + n, &r[1]);
	CHECK_EQ(n, sizeof(want));
	if (memcmp(got, want, sizeof(want))) {
		show_diff(got, want, sizeof(want));
		CHECK(0);
	}
	for (unsigned int i = 0; i < 2; i++) {
		CHECK_EQ(wire_pack_next(want, sizeof(want), &pos, &d), 0);
		CHECK(pack_eq(&d, &r[i]));
	}
	CHECK_EQ(pos, sizeof(want));
}

/*
 * -o/-g: a FILE's owner after its link (golden bytes), a packed record's
 * after its header; and what a hostile peer may put there refused: a
 * name with a NUL in it, a name's length past the end, the flag with
 * nothing after it, an unknown record flag.
 */
static void test_golden_owner(void)
{
	static const char want_hex[] =
		"04000000" "00000050" "00000000" "00000000" /* FILE, 80 bytes */
		"00000007" "00" "00000004" /* id 7, kind FILE, flags OWNER */
		"0000000000000000" "00000000" /* size, mode */
		"0000000000000000" "00000000" /* mtime */
		"0000000000000000" "00000000" /* atime */
		"0001" "66" "0000"	     /* path "f", link "" */
		"00003039" "0000303a"	     /* uid 12345, gid 12346 */
		"04" "726f6f74"		     /* "root" */
		"00";			     /* no group name */
	uint8_t want[80];
	struct wire_msg m = { .type = WIRE_FILE }, d;
	int len;

	hex_to(want_hex, want, sizeof(want));
	m.u.file.file_id = 7;
	m.u.file.flags = WIRE_FILE_OWNER;
	strcpy(m.u.file.path, "f");
	m.u.file.owner.uid = 12345;
	m.u.file.owner.gid = 12346;
	strcpy(m.u.file.owner.user, "root");
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, (int)sizeof(want));
	if (len == (int)sizeof(want) && memcmp(buf, want, sizeof(want))) {
		show_diff(buf, want, sizeof(want));
		CHECK(0);
	}
	CHECK_EQ(wire_decode(want, sizeof(want), &d), 0);
	CHECK_EQ(d.u.file.owner.uid, 12345);
	CHECK(!strcmp(d.u.file.owner.user, "root"));
	CHECK(!d.u.file.owner.group[0]);
	/* a NUL inside the user name */
	memcpy(buf, want, sizeof(want));
	buf[76] = 0;
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	/* a name longer than what is left */
	memcpy(buf, want, sizeof(want));
	buf[74] = 5;
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	buf[74] = 255;
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	/* the flag with no owner after it */
	memcpy(buf, want, sizeof(want));
	put_be32(buf + 4, 66);
	CHECK_EQ(wire_decode(buf, 66, &d), -EPROTO);
	/* an owner without the flag: trailing bytes */
	memcpy(buf, want, sizeof(want));
	buf[24] = 0;
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);

	/* a packed record with its owner after the 44-byte header */
	static const char rec_hex[] =
		"00000001" "02" "00" "0001" "000081a4" /* id, OWNER, path 1 */
		"0000000000000000" "00000000" "0000000000000000" "00000000"
		"00000001" "00000000"	/* size 1, status */
		"00000000" "00000001"	/* uid 0, gid 1 */
		"00" "03" "626966"	/* no user name, group "bif" */
		"78" "5a";		/* path "x", data "Z" */
	uint8_t rec[59], got[59];
	struct wire_pack_rec r = { 0 }, rd;
	size_t pos = 0;

	hex_to(rec_hex, rec, sizeof(rec));
	r.file_id = 1;
	r.flags = WIRE_PACK_OWNER;
	r.path = "x";
	r.path_len = 1;
	r.mode = 0100644;
	r.size = 1;
	r.data = (const uint8_t *)"Z";
	r.owner.gid = 1;
	strcpy(r.owner.group, "bif");
	CHECK_EQ(wire_pack_owner_len(&r), 13);
	CHECK_EQ(pack_enc(got, &r), sizeof(rec));
	if (memcmp(got, rec, sizeof(rec))) {
		show_diff(got, rec, sizeof(rec));
		CHECK(0);
	}
	CHECK_EQ(wire_pack_next(rec, sizeof(rec), &pos, &rd), 0);
	CHECK(pack_eq(&rd, &r));
	CHECK_EQ(pos, sizeof(rec));
	rec[55] = 0; /* a NUL in the group name */
	CHECK(pack_refused(rec, sizeof(rec), 0));
	rec[55] = 'i';
	rec[53] = 200; /* a name past the record */
	CHECK(pack_refused(rec, sizeof(rec), 0));
	rec[53] = 3;
	rec[4] = 4; /* an unknown flag */
	CHECK(pack_refused(rec, sizeof(rec), 0));
}

/*
 * -X/-A: XATTRS's golden bytes, and what a hostile peer may put in one
 * refused: an empty name, a NUL in a name, an entry past the end, a count
 * that is not the entries', a length over the bound, no entry at all.
 */
static void test_golden_xattrs(void)
{
	static const char want_hex[] =
		"16000000" "0000002c" "00000000" "00000000" /* XATTRS, 44 */
		"00000005" "0002" "0014"	/* id 5, 2 entries, 20 bytes */
		"06" "0002" "757365722e61" "6869" /* user.a = "hi" */
		"06" "0000" "757365722e62";	  /* user.b = "" */
	uint8_t want[44];
	struct wire_msg m = { .type = WIRE_XATTRS }, d;
	size_t pos = 0, nlen, vlen;
	const uint8_t *value;
	const char *name;
	int len;

	hex_to(want_hex, want, sizeof(want));
	m.u.xattrs.file_id = 5;
	CHECK_EQ(wire_xattrs_add(&m.u.xattrs, "user.a", "hi", 2), 0);
	CHECK_EQ(wire_xattrs_add(&m.u.xattrs, "user.b", "", 0), 0);
	CHECK_EQ(wire_xattrs_add(&m.u.xattrs, "", "", 0), -EINVAL);
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(len, (int)sizeof(want));
	if (len == (int)sizeof(want) && memcmp(buf, want, sizeof(want))) {
		show_diff(buf, want, sizeof(want));
		CHECK(0);
	}
	CHECK_EQ(wire_decode(want, sizeof(want), &d), 0);
	CHECK(wire_xattrs_next(&d.u.xattrs, &pos, &name, &nlen, &value,
			       &vlen));
	CHECK(nlen == 6 && !memcmp(name, "user.a", 6) && vlen == 2 &&
	      !memcmp(value, "hi", 2));
	CHECK(wire_xattrs_next(&d.u.xattrs, &pos, &name, &nlen, &value,
			       &vlen));
	CHECK(nlen == 6 && vlen == 0);
	CHECK(!wire_xattrs_next(&d.u.xattrs, &pos, &name, &nlen, &value,
				&vlen));
	memcpy(buf, want, sizeof(want));
	buf[24] = 0; /* name length 0 */
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	memcpy(buf, want, sizeof(want));
	buf[29] = 0; /* a NUL in "user.a" */
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	memcpy(buf, want, sizeof(want));
	buf[26] = 9; /* a value past the end */
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	memcpy(buf, want, sizeof(want));
	buf[21] = 3; /* three entries said, two there */
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	memcpy(buf, want, sizeof(want));
	buf[21] = 0; /* none */
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
	memcpy(buf, want, sizeof(want));
	buf[22] = 0xff; /* more bytes than a message holds */
	buf[23] = 0xff;
	CHECK_EQ(wire_decode(buf, sizeof(want), &d), -EPROTO);
}

static void test_pack_digest(void)
{
	static const uint8_t data[] = "the quick brown fox";
	uint8_t out[WIRE_DIGEST_MAX], inner[CK_SHA256_LEN], want[CK_SHA256_LEN];
	uint32_t crc;

	/* CRC32: big-endian, as FILE_END carries it */
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(wire_pack_digest(WIRE_CSUM_CRC32, data, sizeof(data) - 1, out),
		 4);
	crc = htobe32(ck_crc32(0, data, sizeof(data) - 1));
	CHECK(memcmp(out, &crc, 4) == 0);
	CHECK_EQ(out[4], 0xee); /* no more than its length written */
	CHECK_EQ(wire_pack_digest(WIRE_CSUM_CRC32, data, 0, out), 4);
	CHECK(memcmp(out, "\0\0\0\0", 4) == 0);

	/* SHA-256 over the one chunk's SHA-256 */
	CHECK_EQ(
		wire_pack_digest(WIRE_CSUM_SHA256, data, sizeof(data) - 1, out),
		CK_SHA256_LEN);
	CHECK_EQ(ck_sha256(data, sizeof(data) - 1, inner), 0);
	CHECK_EQ(ck_sha256(inner, sizeof(inner), want), 0);
	CHECK(memcmp(out, want, CK_SHA256_LEN) == 0);
	/* ... and over no chunks at all when empty: SHA-256("") */
	CHECK_EQ(wire_pack_digest(WIRE_CSUM_SHA256, data, 0, out),
		 CK_SHA256_LEN);
	CHECK_EQ(ck_sha256("", 0, want), 0);
	CHECK(memcmp(out, want, CK_SHA256_LEN) == 0);
	hex_to("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85"
	       "5",
	       want, sizeof(want));
	CHECK(memcmp(out, want, CK_SHA256_LEN) == 0);

	/* none: no digest, nothing written */
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(wire_pack_digest(WIRE_CSUM_NONE, data, sizeof(data) - 1, out),
		 0);
	CHECK_EQ(out[0], 0xee);
}

/* The engine sets the acks of a queued message as it posts it. */
static void test_set_acks(void)
{
	struct wire_msg m = { .type = WIRE_FILE_RESULT }, d;
	uint8_t out[512];
	int len;

	m.u.result.file_id = 7;
	m.ctrl_ack = 1;
	m.slot_ack = 2;
	len = wire_encode(&m, out, sizeof(out));
	CHECK(len > (int)WIRE_CTRL_HDR);
	wire_set_acks(out, 0x01020304u, 0xa0b0c0d0u);
	/* Big-endian at bytes 8..15 of the header, nothing else moved. */
	CHECK_EQ(out[8], 0x01);
	CHECK_EQ(out[11], 0x04);
	CHECK_EQ(out[12], 0xa0);
	CHECK_EQ(out[15], 0xd0);
	CHECK_EQ(wire_decode(out, (size_t)len, &d), 0);
	CHECK_EQ(d.type, WIRE_FILE_RESULT);
	CHECK_EQ(d.ctrl_ack, 0x01020304u);
	CHECK_EQ(d.slot_ack, 0xa0b0c0d0u);
	CHECK_EQ(d.u.result.file_id, 7);
}

/* A tag appended to every message type: flag, length, body unchanged. */
static void test_tag_roundtrip(void)
{
	static struct wire_msg m[SAMPLES_MAX], d;
	size_t n = samples(m, SAMPLES_MAX), covered = 0;

	for (size_t i = 0; i < n; i++) {
		int len = wire_encode(&m[i], buf, WIRE_CTRL_SIZE - WIRE_TAG_LEN);
		int tl;

		CHECK(len > 0);
		CHECK(!wire_tag_split(buf, (size_t)len, &covered));
		tl = wire_tag_append(buf, (size_t)len, WIRE_CTRL_SIZE);
		CHECK_EQ(tl, len + (int)WIRE_TAG_LEN);
		memset(buf + len, 0xa5, WIRE_TAG_LEN);
		CHECK_EQ(buf[1], WIRE_CTRL_TAGGED);
		CHECK(wire_tag_split(buf, (size_t)tl, &covered));
		CHECK_EQ(covered, (size_t)len);
		CHECK_EQ(wire_decode(buf, (size_t)tl, &d), 0);
		CHECK(d.tagged);
		CHECK_EQ(d.type, m[i].type);
		/* The same bytes without the flag: the tag is trailing junk. */
		buf[1] = 0;
		CHECK_EQ(wire_decode(buf, (size_t)tl, &d), -EPROTO);
		/* Unknown header flags are refused. */
		buf[1] = WIRE_CTRL_TAGGED | 2;
		CHECK_EQ(wire_decode(buf, (size_t)tl, &d), -EPROTO);
		/* No room for the tag. */
		buf[1] = 0;
		CHECK_EQ(wire_tag_append(buf, (size_t)len,
					 (size_t)len + WIRE_TAG_LEN - 1),
			 -EMSGSIZE);
	}
	/* A flagged message too short to hold a tag. */
	memset(buf, 0, 20);
	buf[0] = WIRE_CREDIT;
	buf[1] = WIRE_CTRL_TAGGED;
	put_be32(buf + 4, 20);
	CHECK_EQ(wire_decode(buf, 20, &d), -EPROTO);
	CHECK(!wire_tag_split(buf, 20, &covered));
}

/*
 * Golden control key and tag: PSK 00..1f, nonces 40..5f and 60..7f, a
 * tagged CREDIT (ctrl_ack 5, slot_ack 7) sent to the client as its
 * message 3. Computed with Python's hmac from doc/PROTOCOL.md's definition.
 */
static void test_tag_golden(void)
{
	struct wire_hello h = { 0 };
	uint8_t psk[32], ns[32], ck[32], want_ck[32], tag[16], want_tag[16];
	struct wire_msg m = { .type = WIRE_CREDIT, .ctrl_ack = 5, .slot_ack = 7 };
	int len;

	for (int i = 0; i < 32; i++) {
		psk[i] = (uint8_t)i;
		h.nonce[i] = (uint8_t)(0x40 + i);
		ns[i] = (uint8_t)(0x60 + i);
	}
	hex_to("01f9c456a856d58e370cb7e494d53db14dd7289321a4cdc8414a5c295f43dac6",
	       want_ck, 32);
	hex_to("d44689a07caebe153e7949f391fd1478", want_tag, 16);
	CHECK_EQ(auth_ctrl_key(psk, &h, ns, ck), 0);
	CHECK(!memcmp(ck, want_ck, 32));
	len = wire_encode(&m, buf, WIRE_CTRL_SIZE);
	CHECK_EQ(len, (int)WIRE_CTRL_HDR);
	CHECK_EQ(wire_tag_append(buf, (size_t)len, WIRE_CTRL_SIZE), 32);
	CHECK_EQ(auth_ctrl_tag(ck, AUTH_DIR_TO_CLIENT, 3, buf, 16, tag), 0);
	if (memcmp(tag, want_tag, 16))
		show_diff(tag, want_tag, 16);
	CHECK(!memcmp(tag, want_tag, 16));
	CHECK(auth_tag_equal(tag, want_tag));
	/* Another seq, direction or byte: another tag. */
	CHECK_EQ(auth_ctrl_tag(ck, AUTH_DIR_TO_CLIENT, 4, buf, 16, tag), 0);
	CHECK(!auth_tag_equal(tag, want_tag));
	CHECK_EQ(auth_ctrl_tag(ck, AUTH_DIR_TO_SERVER, 3, buf, 16, tag), 0);
	CHECK(!auth_tag_equal(tag, want_tag));
	buf[11] ^= 1;
	CHECK_EQ(auth_ctrl_tag(ck, AUTH_DIR_TO_CLIENT, 3, buf, 16, tag), 0);
	CHECK(!auth_tag_equal(tag, want_tag));
}

/*
 * -H and -D: FILE kinds 4 (hard link: a link, no size) and 5 (special:
 * mode with a device's, FIFO's or socket's type bits, a device's number
 * in size), flag LINKED on a whole regular file only; kind 3 (DELETED's)
 * and anything else refused.
 */
static void file_kind_is(uint8_t kind, uint32_t flags, uint64_t size,
			 uint32_t mode, const char *link, int want)
{
	struct wire_msg m = { .type = WIRE_FILE }, d;
	int len;

	m.u.file.file_id = 1;
	m.u.file.kind = kind;
	m.u.file.flags = flags;
	m.u.file.size = size;
	m.u.file.mode = mode;
	strcpy(m.u.file.path, "a");
	strcpy(m.u.file.link, link);
	if (flags & WIRE_FILE_RANGE) {
		m.u.file.range_len = 1;
		m.u.file.range_count = 1;
	}
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), want);
	if (!want) {
		CHECK_EQ(d.u.file.kind, kind);
		CHECK_EQ(d.u.file.size, size);
		CHECK_EQ(d.u.file.mode, mode);
		CHECK(!strcmp(d.u.file.link, link));
	}
}

static void test_decode_file_kinds(void)
{
	file_kind_is(WIRE_KIND_HARDLINK, 0, 0, 0644, "d/first", 0);
	file_kind_is(WIRE_KIND_HARDLINK, 0, 0, 0644, "", -EPROTO);
	file_kind_is(WIRE_KIND_HARDLINK, 0, 5, 0644, "x", -EPROTO);
	file_kind_is(WIRE_KIND_FILE, WIRE_FILE_LINKED, 5, 0644, "", 0);
	file_kind_is(WIRE_KIND_DIR, WIRE_FILE_LINKED, 0, 0755, "", -EPROTO);
	file_kind_is(WIRE_KIND_FILE, WIRE_FILE_LINKED | WIRE_FILE_RANGE, 5,
		     0644, "", -EPROTO);
	file_kind_is(WIRE_KIND_SPECIAL, 0, WIRE_RDEV(8, 1), 0060660, "", 0);
	file_kind_is(WIRE_KIND_SPECIAL, 0, WIRE_RDEV(1, 3), 0020666, "", 0);
	file_kind_is(WIRE_KIND_SPECIAL, 0, 0, 0010644, "", 0);
	file_kind_is(WIRE_KIND_SPECIAL, 0, 0, 0140755, "", 0);
	file_kind_is(WIRE_KIND_SPECIAL, 0, 1, 0010644, "", -EPROTO);
	file_kind_is(WIRE_KIND_SPECIAL, 0, 0, 0100644, "", -EPROTO);
	file_kind_is(WIRE_KIND_SPECIAL, 0, 0, 0644, "", -EPROTO);
	file_kind_is(WIRE_KIND_SPECIAL, 0, 0, 0010644, "x", -EPROTO);
	file_kind_is(WIRE_KIND_OTHER, 0, 0, 0644, "", -EPROTO);
	file_kind_is(WIRE_KIND_MAX + 1, 0, 0, 0644, "", -EPROTO);
	CHECK(!strcmp(wire_kind_name(WIRE_KIND_HARDLINK), "hardlink"));
	CHECK(!strcmp(wire_kind_name(WIRE_KIND_SPECIAL), "special"));
}

/* A KEPT and a HAVE, encoded alone, in a BATCH at buf; its length. */
static size_t two_in_batch(void)
{
	struct wire_msg a = { .type = WIRE_KEPT }, b = { .type = WIRE_HAVE };
	uint8_t one[64];
	size_t len = wire_batch_start(buf);
	int n;

	a.u.kept.first_id = 7;
	a.u.kept.count = 3;
	b.u.have.file_id = 10;
	n = wire_encode(&a, one, sizeof(one));
	CHECK(n > 0);
	CHECK(wire_batch_add(buf, &len, WIRE_CTRL_SIZE - WIRE_TAG_LEN, one,
			     (size_t)n));
	n = wire_encode(&b, one, sizeof(one));
	CHECK(n > 0);
	CHECK(wire_batch_add(buf, &len, WIRE_CTRL_SIZE - WIRE_TAG_LEN, one,
			     (size_t)n));
	return len;
}

/*
 * BATCH: messages that may travel together come out one by one, as they
 * went in; wire_encode() never builds one itself.
 */
static void test_batch_roundtrip(void)
{
	struct wire_msg d, in;
	struct wire_msg m = { .type = WIRE_BATCH };
	size_t len = two_in_batch();
	uint32_t pos = 0;

	CHECK_EQ(len, WIRE_CTRL_HDR + 2 + (WIRE_CTRL_HDR + 8) +
			      (WIRE_CTRL_HDR + 10));
	CHECK_EQ(wire_decode(buf, len, &d), 0);
	CHECK_EQ(d.type, WIRE_BATCH);
	CHECK_EQ(d.u.batch.count, 2);
	CHECK_EQ(wire_batch_next(buf, &d.u.batch, &pos, &in), 0);
	CHECK_EQ(in.type, WIRE_KEPT);
	CHECK_EQ(in.u.kept.first_id, 7);
	CHECK_EQ(in.u.kept.count, 3);
	CHECK_EQ(wire_batch_next(buf, &d.u.batch, &pos, &in), 0);
	CHECK_EQ(in.type, WIRE_HAVE);
	CHECK_EQ(in.u.have.file_id, 10);
	CHECK_EQ(wire_batch_next(buf, &d.u.batch, &pos, &in), 1);
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	/* full: nothing added, nothing changed */
	len = two_in_batch();
	CHECK(!wire_batch_add(buf, &len, len + 10, buf + WIRE_CTRL_HDR + 2,
			      WIRE_CTRL_HDR + 8 + 3));
	CHECK_EQ(wire_decode(buf, len, &d), 0);
	CHECK(wire_batch_may(WIRE_FILE) && wire_batch_may(WIRE_KEPT));
	CHECK(!wire_batch_may(WIRE_BATCH) && !wire_batch_may(WIRE_ERROR) &&
	      !wire_batch_may(WIRE_HELLO) && !wire_batch_may(WIRE_DONE) &&
	      !wire_batch_may(WIRE_CREDIT));
}

/*
 * A BATCH is refused whole for anything out of its rules: fewer than two
 * messages, a count that is not theirs, one inside that may not be
 * there (another BATCH, an ERROR), carries acks, flags or a tag, or runs
 * past the end; bytes after the last.
 */
static void test_batch_malformed(void)
{
	const size_t first = WIRE_CTRL_HDR + 2; /* the KEPT's header */
	struct wire_msg d;
	size_t len;

	/* count 1, and 3, for two messages */
	len = two_in_batch();
	buf[WIRE_CTRL_HDR + 1] = 1;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	buf[WIRE_CTRL_HDR + 1] = 3;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	/* one of them a BATCH, an ERROR, a DONE */
	len = two_in_batch();
	buf[first] = WIRE_BATCH;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	buf[first] = WIRE_ERROR;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	buf[first] = WIRE_DONE;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	/* acks, the tagged flag inside */
	len = two_in_batch();
	buf[first + 11] = 1;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	len = two_in_batch();
	buf[first + 15] = 1;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	len = two_in_batch();
	buf[first + 1] = WIRE_CTRL_TAGGED;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	/* an inner length past the end, or short of its header */
	len = two_in_batch();
	buf[first + 7] = 0xff;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	buf[first + 7] = WIRE_CTRL_HDR - 1;
	CHECK_EQ(wire_decode(buf, len, &d), -EPROTO);
	/* a stray byte after the last: the BATCH's length covers it */
	len = two_in_batch();
	buf[len] = 0;
	buf[7] = (uint8_t)(len + 1);
	CHECK_EQ(wire_decode(buf, len + 1, &d), -EPROTO);
	/* and intact, it decodes */
	len = two_in_batch();
	CHECK_EQ(wire_decode(buf, len, &d), 0);
}

/*
 * FREED (any slot): count u16 (1..WIRE_FREED_MAX), then that many slot
 * indices u16; bytes golden, and every count or length out of line
 * refused. What the slots name is the source's to check (credit.h).
 */
static void test_decode_freed(void)
{
	static const uint8_t golden[] = {
		25, 0, 0, 0, 0, 0, 0,	 24,
		0,  0, 0, 5, 0, 0, 0,	 9, /* header */
		0,  3, 0, 7, 0, 0, 0x0f, 0xff,
	};
	struct wire_msg m = { .type = WIRE_FREED }, d;
	int len;

	m.ctrl_ack = 5;
	m.slot_ack = 9;
	m.u.freed.count = 3;
	m.u.freed.slot[0] = 7;
	m.u.freed.slot[2] = 4095;
	len = wire_encode(&m, buf, WIRE_CTRL_SIZE);
	CHECK_EQ(len, (int)sizeof(golden));
	CHECK(!memcmp(buf, golden, sizeof(golden)));
	CHECK_EQ(wire_freed_count(buf), 3);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(d.u.freed.slot[2], 4095);
	/* one slot short, one too many */
	buf[7] = 22;
	CHECK_EQ(wire_decode(buf, 22, &d), -EPROTO);
	buf[7] = 26;
	buf[24] = buf[25] = 0;
	CHECK_EQ(wire_decode(buf, 26, &d), -EPROTO);
	/* count 0, and one past the most */
	buf[7] = 18;
	buf[16] = buf[17] = 0;
	CHECK_EQ(wire_decode(buf, 18, &d), -EPROTO);
	m.u.freed.count = 0;
	CHECK_EQ(wire_encode(&m, buf, WIRE_CTRL_SIZE), -EINVAL);
	m.u.freed.count = WIRE_FREED_MAX + 1;
	CHECK_EQ(wire_encode(&m, buf, WIRE_CTRL_SIZE), -EINVAL);
	/* the most fits a control buffer with its tag */
	m.u.freed.count = WIRE_FREED_MAX;
	len = wire_encode(&m, buf, WIRE_CTRL_SIZE - WIRE_TAG_LEN);
	CHECK_EQ(len, (int)(WIRE_CTRL_HDR + 2 + 2 * WIRE_FREED_MAX));
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	buf[WIRE_CTRL_HDR] = (WIRE_FREED_MAX + 1) >> 8;
	buf[WIRE_CTRL_HDR + 1] = (WIRE_FREED_MAX + 1) & 0xff;
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	/* the span the immediate's 16 bits of seq allow */
	CHECK_EQ(wire_seq_span(8), 512);
	CHECK_EQ(wire_seq_span(4096), WIRE_SEQ_SPAN_MAX);
	CHECK(WIRE_SEQ_SPAN_MAX <= 1u << 15);
}

TAP_RUN(TAP_TEST(test_roundtrip_every_type), TAP_TEST(test_batch_roundtrip),
	TAP_TEST(test_batch_malformed), TAP_TEST(test_encode_limits),
	TAP_TEST(test_decode_file_kinds), TAP_TEST(test_decode_truncated),
	TAP_TEST(test_decode_trailing_and_length), TAP_TEST(test_lanes_range),
	TAP_TEST(test_decode_unknown_type), TAP_TEST(test_decode_strings),
	TAP_TEST(test_decode_digest_len), TAP_TEST(test_golden_hello),
	TAP_TEST(test_hello_filters), TAP_TEST(test_hello_mac_filters),
	TAP_TEST(test_golden_slot_header), TAP_TEST(test_slot_roundtrip),
	TAP_TEST(test_slot_bitflip), TAP_TEST(test_imm),
	TAP_TEST(test_chunk_aad), TAP_TEST(test_decode_kept),
	TAP_TEST(test_decode_pack_done), TAP_TEST(test_decode_delete),
	TAP_TEST(test_decode_names), TAP_TEST(test_pack_roundtrip),
	TAP_TEST(test_pack_truncated), TAP_TEST(test_pack_refusals),
	TAP_TEST(test_pack_golden), TAP_TEST(test_pack_digest),
	TAP_TEST(test_set_acks), TAP_TEST(test_tag_roundtrip),
	TAP_TEST(test_tag_golden), TAP_TEST(test_rails),
	TAP_TEST(test_golden_owner), TAP_TEST(test_golden_xattrs),
	TAP_TEST(test_decode_freed))
