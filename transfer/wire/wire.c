/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Encoding and decoding of the control messages of wire.h (their bodies
 * declared in wire_hello.h, wire_entry.h and wire_list.h; the ring slots'
 * contents are in wire_slot.c; the variable-length fields inside messages,
 * owners, xattrs, paths, filters and names, in wire_fields.c). The cursors
 * of util/be_codec.h do all byte work; every message body is one function
 * per direction so the layout reads top to bottom, the same order as
 * doc/PROTOCOL.md's tables.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "transfer/wire/wire.h"
#include "transfer/wire/wire_int.h"
#include "util/be_codec.h"
#include "util/checksum.h"
#include "util/key.h"

_Static_assert(S_IFCHR == 0020000 && S_IFBLK == 0060000 && S_IFIFO == 0010000 &&
		       S_IFSOCK == 0140000 && S_IFMT == 0170000,
	       "a SPECIAL's type bits travel as Linux has them");

_Static_assert(WIRE_CLIENT_MAX == KEY_NAME_MAX, "a client's name fits");

_Static_assert(WIRE_CTRL_HDR == 16, "control header is 16 bytes");
_Static_assert(WIRE_CTRL_SIZE >= WIRE_CTRL_HDR + 64 + WIRE_PATHS_MAX + 4 +
				   WIRE_FILTERS_MAX + 4 + 1 + WIRE_CLIENT_MAX +
				   WIRE_TAG_LEN,
	       "a control buffer holds the longest HELLO and a tag");
_Static_assert(WIRE_NAMES_BYTES > 4096 && WIRE_NAMES_BYTES < UINT16_MAX,
	       "a NAMES holds the longest name");
_Static_assert(WIRE_CTRL_SIZE >= WIRE_CTRL_HDR + 14 +
					 WIRE_SUM_LEN * WIRE_SUMS_MAX +
					 WIRE_TAG_LEN,
	       "a control buffer holds the longest SUMS and a tag");

/* ---- control messages ---- */

static void enc_body(struct be_put *w, const struct wire_msg *m)
{
	switch (m->type) {
	case WIRE_HELLO:
		be_put_u16(w, m->u.hello.role);
		be_put_u8(w, m->u.hello.csum);
		be_put_u8(w, m->u.hello.level);
		be_put_u32(w, m->u.hello.flags);
		be_put_u32(w, m->u.hello.features);
		be_put_u32(w, m->u.hello.chunk_size);
		be_put_u64(w, m->u.hello.bwlimit);
		be_put_bytes(w, m->u.hello.nonce, WIRE_NONCE_LEN);
		be_put_u16(w, m->u.hello.npaths);
		if (m->u.hello.paths_len > WIRE_PATHS_MAX)
			w->err = true;
		else
			be_put_u16(w, m->u.hello.paths_len);
		be_put_bytes(w, m->u.hello.paths, m->u.hello.paths_len);
		be_put_u16(w, m->u.hello.nfilters);
		if (m->u.hello.filters_len > WIRE_FILTERS_MAX)
			w->err = true;
		else
			be_put_u16(w, m->u.hello.filters_len);
		be_put_bytes(w, m->u.hello.filters, m->u.hello.filters_len);
		be_put_u8(w, m->u.hello.streams);
		be_put_u8(w, m->u.hello.sync);
		if (m->u.hello.client[0]) {
			size_t n = strnlen(m->u.hello.client,
					   sizeof(m->u.hello.client));

			if (n > WIRE_CLIENT_MAX)
				w->err = true;
			else
				be_put_u8(w, (uint8_t)n);
			be_put_bytes(w, m->u.hello.client, n);
		}
		break;
	case WIRE_WELCOME:
		be_put_u32(w, (uint32_t)m->u.welcome.status);
		be_put_u32(w, m->u.welcome.features);
		be_put_bytes(w, m->u.welcome.nonce, WIRE_NONCE_LEN);
		be_put_bytes(w, m->u.welcome.mac, WIRE_MAC_LEN);
		be_put_str(w, m->u.welcome.msg, WIRE_MSG_MAX);
		be_put_u8(w, m->u.welcome.streams);
		be_put_bytes(w, m->u.welcome.token, WIRE_LANE_TOKEN_LEN);
		be_put_u8(w, m->u.welcome.rails);
		for (unsigned int i = 1; i < m->u.welcome.rails; i++) {
			be_put_u8(w, m->u.welcome.rail[i].family);
			be_put_bytes(w, m->u.welcome.rail[i].addr, 16);
		}
		break;
	case WIRE_RING:
		be_put_u64(w, m->u.ring.addr);
		be_put_u32(w, m->u.ring.rkey);
		be_put_u16(w, m->u.ring.slots);
		be_put_u32(w, m->u.ring.chunk_size);
		be_put_u64(w, m->u.ring.hdr_addr);
		be_put_u8(w, m->u.ring.target);
		be_put_u8(w, m->u.ring.rails);
		for (unsigned int i = 1; i < m->u.ring.rails; i++)
			be_put_u32(w, m->u.ring.rkeys[i]);
		break;
	case WIRE_FILE:
		be_put_u32(w, m->u.file.file_id);
		be_put_u8(w, m->u.file.kind);
		be_put_u32(w, m->u.file.flags);
		be_put_u64(w, m->u.file.size);
		be_put_u32(w, m->u.file.mode);
		be_put_u64(w, (uint64_t)m->u.file.mtime_sec);
		be_put_u32(w, m->u.file.mtime_nsec);
		be_put_u64(w, (uint64_t)m->u.file.atime_sec);
		be_put_u32(w, m->u.file.atime_nsec);
		be_put_str(w, m->u.file.path, sizeof(m->u.file.path) - 1);
		be_put_str(w, m->u.file.link, sizeof(m->u.file.link) - 1);
		if (m->u.file.flags & WIRE_FILE_RANGE) {
			be_put_u64(w, m->u.file.range_off);
			be_put_u64(w, m->u.file.range_len);
			be_put_u32(w, m->u.file.range_idx);
			be_put_u32(w, m->u.file.range_count);
			be_put_bytes(w, m->u.file.token, WIRE_TOKEN_LEN);
		}
		if (m->u.file.flags & WIRE_FILE_OWNER)
			wire_owner_put(w, &m->u.file.owner);
		break;
	case WIRE_HAVE:
		be_put_u32(w, m->u.have.file_id);
		be_put_u16(w, m->u.have.flags);
		be_put_u32(w, (uint32_t)m->u.have.status);
		break;
	case WIRE_SUMS:
		be_put_u32(w, m->u.sums.file_id);
		be_put_u64(w, m->u.sums.first);
		be_put_u16(w, m->u.sums.count);
		be_put_bytes(w, m->u.sums.sums,
			     (size_t)m->u.sums.count * WIRE_SUM_LEN);
		break;
	case WIRE_MATCH:
		be_put_u32(w, m->u.match.file_id);
		be_put_u64(w, m->u.match.first);
		be_put_u16(w, m->u.match.count);
		be_put_bytes(w, m->u.match.bits, (m->u.match.count + 7u) / 8);
		break;
	case WIRE_FILE_END:
		be_put_u32(w, m->u.end.file_id);
		be_put_u32(w, m->u.end.flags);
		be_put_u64(w, m->u.end.nchunks);
		be_put_u64(w, m->u.end.seq_end);
		be_put_u8(w, m->u.end.csum);
		be_put_u8(w, m->u.end.digest_len);
		be_put_bytes(w, m->u.end.digest, m->u.end.digest_len);
		be_put_u32(w, (uint32_t)m->u.end.status);
		be_put_str(w, m->u.end.msg, WIRE_MSG_MAX);
		break;
	case WIRE_FILE_RESULT:
		be_put_u32(w, m->u.result.file_id);
		be_put_u32(w, (uint32_t)m->u.result.status);
		be_put_u32(w, m->u.result.flags);
		be_put_u64(w, m->u.result.sent);
		be_put_u8(w, m->u.result.digest_len);
		be_put_bytes(w, m->u.result.digest, m->u.result.digest_len);
		be_put_str(w, m->u.result.msg, WIRE_MSG_MAX);
		break;
	case WIRE_KEPT:
		be_put_u32(w, m->u.kept.first_id);
		be_put_u32(w, m->u.kept.count);
		break;
	case WIRE_PACK_DONE:
		be_put_u32(w, m->u.pack_done.first_id);
		be_put_u32(w, m->u.pack_done.count);
		break;
	case WIRE_DONE:
		be_put_u32(w, m->u.done.flags);
		be_put_u64(w, m->u.done.max_delete);
		be_put_u64(w, m->u.done.seq_end);
		break;
	case WIRE_DELETED:
		be_put_u8(w, m->u.deleted.kind);
		be_put_u8(w, m->u.deleted.flags);
		be_put_u32(w, (uint32_t)m->u.deleted.status);
		be_put_str(w, m->u.deleted.path, sizeof(m->u.deleted.path) - 1);
		be_put_str(w, m->u.deleted.msg, WIRE_MSG_MAX);
		break;
	case WIRE_DELETE_END:
		be_put_u32(w, (uint32_t)m->u.delete_end.status);
		be_put_u64(w, m->u.delete_end.count);
		be_put_str(w, m->u.delete_end.msg, WIRE_MSG_MAX);
		break;
	case WIRE_NAMES:
		be_put_u16(w, m->u.names.flags);
		be_put_u16(w, m->u.names.count);
		if (m->u.names.len > WIRE_NAMES_BYTES)
			w->err = true;
		else
			be_put_u16(w, m->u.names.len);
		be_put_bytes(w, m->u.names.names, m->u.names.len);
		break;
	case WIRE_NAMES_ACK:
		be_put_u64(w, m->u.names_ack.done);
		be_put_u64(w, m->u.names_ack.seq_end);
		break;
	case WIRE_BYE:
		be_put_u64(w, m->u.bye.files_ok);
		be_put_u64(w, m->u.bye.files_failed);
		be_put_u64(w, m->u.bye.bytes);
		break;
	case WIRE_AUTH:
		be_put_bytes(w, m->u.auth.mac, WIRE_MAC_LEN);
		break;
	case WIRE_ERROR:
		be_put_u32(w, (uint32_t)m->u.error.status);
		be_put_u32(w, m->u.error.klass);
		be_put_str(w, m->u.error.msg, WIRE_MSG_MAX);
		break;
	case WIRE_NOTICE:
		be_put_str(w, m->u.notice.msg, WIRE_MSG_MAX);
		break;
	case WIRE_LANES:
		be_put_u8(w, m->u.lanes.up);
		break;
	case WIRE_XATTRS:
		be_put_u32(w, m->u.xattrs.file_id);
		be_put_u16(w, m->u.xattrs.count);
		if (m->u.xattrs.len > WIRE_XATTRS_BYTES)
			w->err = true;
		else
			be_put_u16(w, m->u.xattrs.len);
		be_put_bytes(w, m->u.xattrs.data, m->u.xattrs.len);
		break;
	case WIRE_FREED:
		be_put_u16(w, m->u.freed.count);
		for (unsigned int i = 0; i < m->u.freed.count; i++)
			be_put_u16(w, m->u.freed.slot[i]);
		break;
	default: /* CREDIT: header only */
		break;
	}
}

unsigned int wire_freed_count(const uint8_t *buf)
{
	return (unsigned int)buf[WIRE_CTRL_HDR] << 8 | buf[WIRE_CTRL_HDR + 1];
}

void wire_set_acks(uint8_t *buf, uint32_t ctrl_ack, uint32_t slot_ack)
{
	struct be_put w = { .p = buf + 8, .cap = 8 };

	be_put_u32(&w, ctrl_ack);
	be_put_u32(&w, slot_ack);
}

int wire_encode(const struct wire_msg *m, uint8_t *buf, size_t cap)
{
	struct be_put w = { .p = buf, .cap = cap };

	if (m->type == 0 || m->type >= WIRE_TYPE_MAX ||
	    m->type == WIRE_BATCH || /* built by wire_batch_add() */
	    (m->type == WIRE_FILE_END &&
	     m->u.end.digest_len > WIRE_DIGEST_MAX) ||
	    (m->type == WIRE_FILE_RESULT &&
	     m->u.result.digest_len > WIRE_DIGEST_MAX) ||
	    (m->type == WIRE_SUMS &&
	     (!m->u.sums.count || m->u.sums.count > WIRE_SUMS_MAX)) ||
	    (m->type == WIRE_MATCH &&
	     (!m->u.match.count || m->u.match.count > WIRE_SUMS_MAX)) ||
	    (m->type == WIRE_FREED &&
	     (!m->u.freed.count || m->u.freed.count > WIRE_FREED_MAX)))
		return -EINVAL;
	be_put_u8(&w, m->type);
	be_put_u8(&w, 0);
	be_put_u16(&w, 0);
	be_put_u32(&w, 0); /* total length, patched below */
	be_put_u32(&w, m->ctrl_ack);
	be_put_u32(&w, m->slot_ack);
	enc_body(&w, m);
	if (w.err || w.off > UINT32_MAX)
		return -EMSGSIZE;
	{
		uint32_t n = htobe32((uint32_t)w.off);

		memcpy(buf + 4, &n, 4);
	}
	return (int)w.off;
}

static void dec_digest(struct be_get *r, uint8_t *len, uint8_t *digest)
{
	*len = be_get_u8(r);
	if (*len > WIRE_DIGEST_MAX) {
		r->err = true;
		return;
	}
	be_get_bytes(r, digest, *len);
}

/*
 * The header of the message at p (at least WIRE_CTRL_HDR bytes): whether
 * it may be inside a BATCH (an allowed type, no flags, zero acks), and
 * its total length.
 */
static bool batch_inner(const uint8_t *p, uint32_t *total)
{
	struct be_get h = be_get_init(p, WIRE_CTRL_HDR);
	uint8_t type = be_get_u8(&h);
	bool zero = be_get_zeros(&h, 3);

	*total = be_get_u32(&h);
	return wire_batch_may(type) && zero && be_get_zeros(&h, 8) &&
	       *total >= WIRE_CTRL_HDR;
}

/*
 * A BATCH: count (at least 2) inner messages (batch_inner) filling the
 * body exactly.
 */
static void dec_batch(struct be_get *r, struct wire_batch *b)
{
	uint16_t n = 0;

	b->count = be_get_u16(r);
	b->off = (uint32_t)r->off;
	while (!r->err && r->off < r->len) {
		uint32_t total;

		if (r->len - r->off < WIRE_CTRL_HDR ||
		    !batch_inner(r->p + r->off, &total) ||
		    total > r->len - r->off) {
			r->err = true;
			break;
		}
		r->off += total;
		n++;
	}
	b->len = (uint32_t)(r->off - b->off);
	if (b->count < 2 || n != b->count)
		r->err = true;
}

static void dec_body(struct be_get *r, struct wire_msg *m)
{
	switch (m->type) {
	case WIRE_HELLO:
		m->u.hello.role = be_get_u16(r);
		m->u.hello.csum = be_get_u8(r);
		m->u.hello.level = be_get_u8(r);
		m->u.hello.flags = be_get_u32(r);
		m->u.hello.features = be_get_u32(r);
		m->u.hello.chunk_size = be_get_u32(r);
		m->u.hello.bwlimit = be_get_u64(r);
		be_get_bytes(r, m->u.hello.nonce, WIRE_NONCE_LEN);
		wire_dec_paths(r, &m->u.hello);
		wire_dec_filters(r, &m->u.hello);
		m->u.hello.streams = be_get_u8(r); /* 0 as 1: one lane */
		m->u.hello.sync = be_get_u8(r);
		if (m->u.hello.streams > WIRE_STREAMS_MAX ||
		    m->u.hello.sync > WIRE_SYNC_MAX)
			r->err = true;
		/* A client's name, when it has one: 1..64 bytes, a valid one. */
		if (!r->err && r->off < r->len) {
			uint8_t n = be_get_u8(r);

			if (!n || n > WIRE_CLIENT_MAX)
				r->err = true;
			else
				be_get_bytes(r, m->u.hello.client, n);
			if (!r->err && !key_name_valid(m->u.hello.client))
				r->err = true;
		}
		break;
	case WIRE_WELCOME:
		m->u.welcome.status = (int32_t)be_get_u32(r);
		m->u.welcome.features = be_get_u32(r);
		be_get_bytes(r, m->u.welcome.nonce, WIRE_NONCE_LEN);
		be_get_bytes(r, m->u.welcome.mac, WIRE_MAC_LEN);
		be_get_str(r, m->u.welcome.msg, WIRE_MSG_MAX);
		m->u.welcome.streams = be_get_u8(r); /* 0 as 1 */
		be_get_bytes(r, m->u.welcome.token, WIRE_LANE_TOKEN_LEN);
		m->u.welcome.rails = be_get_u8(r); /* 0 as 1 */
		if (m->u.welcome.streams > WIRE_STREAMS_MAX ||
		    m->u.welcome.rails > WIRE_STREAMS_MAX ||
		    (m->u.welcome.rails > 1 &&
		     m->u.welcome.rails > m->u.welcome.streams))
			r->err = true;
		for (unsigned int i = 1; !r->err && i < m->u.welcome.rails;
		     i++) {
			struct wire_rail *a = &m->u.welcome.rail[i];

			a->family = be_get_u8(r);
			be_get_bytes(r, a->addr, 16);
			if (a->family != 4 && a->family != 6)
				r->err = true;
		}
		break;
	case WIRE_RING:
		m->u.ring.addr = be_get_u64(r);
		m->u.ring.rkey = be_get_u32(r);
		m->u.ring.slots = be_get_u16(r);
		m->u.ring.chunk_size = be_get_u32(r);
		m->u.ring.hdr_addr = be_get_u64(r);
		m->u.ring.target = be_get_u8(r);
		m->u.ring.rails = be_get_u8(r); /* 0 as 1 */
		if (m->u.ring.rails > WIRE_STREAMS_MAX ||
		    m->u.ring.target > WIRE_TARGET_NAMED)
			r->err = true;
		for (unsigned int i = 1; !r->err && i < m->u.ring.rails; i++)
			m->u.ring.rkeys[i] = be_get_u32(r);
		break;
	case WIRE_FILE:
		m->u.file.file_id = be_get_u32(r);
		m->u.file.kind = be_get_u8(r);
		m->u.file.flags = be_get_u32(r);
		m->u.file.size = be_get_u64(r);
		m->u.file.mode = be_get_u32(r);
		m->u.file.mtime_sec = (int64_t)be_get_u64(r);
		m->u.file.mtime_nsec = be_get_u32(r);
		m->u.file.atime_sec = (int64_t)be_get_u64(r);
		m->u.file.atime_nsec = be_get_u32(r);
		be_get_str(r, m->u.file.path, sizeof(m->u.file.path) - 1);
		be_get_str(r, m->u.file.link, sizeof(m->u.file.link) - 1);
		if (m->u.file.flags & WIRE_FILE_RANGE) {
			m->u.file.range_off = be_get_u64(r);
			m->u.file.range_len = be_get_u64(r);
			m->u.file.range_idx = be_get_u32(r);
			m->u.file.range_count = be_get_u32(r);
			be_get_bytes(r, m->u.file.token, WIRE_TOKEN_LEN);
			/* a range lies inside the file; which one it is */
			if (m->u.file.kind != WIRE_KIND_FILE ||
			    !m->u.file.range_len ||
			    m->u.file.range_off > m->u.file.size ||
			    m->u.file.range_len >
				    m->u.file.size - m->u.file.range_off ||
			    m->u.file.range_idx >= m->u.file.range_count ||
			    m->u.file.range_count > WIRE_RANGES_MAX)
				r->err = true;
		}
		if (m->u.file.flags & WIRE_FILE_OWNER)
			wire_owner_get(r, &m->u.file.owner);
		if (m->u.file.flags & ~(WIRE_FILE_SPARSE | WIRE_FILE_RANGE |
					WIRE_FILE_OWNER | WIRE_FILE_XATTRS |
					WIRE_FILE_LINKED) ||
		    m->u.file.kind > WIRE_KIND_MAX ||
		    m->u.file.kind == WIRE_KIND_OTHER ||
		    m->u.file.mtime_nsec >= 1000000000u ||
		    m->u.file.atime_nsec >= 1000000000u ||
		    (m->u.file.kind != WIRE_KIND_FILE &&
		     m->u.file.kind != WIRE_KIND_SPECIAL && m->u.file.size) ||
		    (m->u.file.kind == WIRE_KIND_SYMLINK ||
		     m->u.file.kind == WIRE_KIND_HARDLINK) !=
			    (m->u.file.link[0] != '\0') ||
		    ((m->u.file.flags & WIRE_FILE_LINKED) &&
		     (m->u.file.kind != WIRE_KIND_FILE ||
		      (m->u.file.flags & WIRE_FILE_RANGE))) ||
		    (m->u.file.kind == WIRE_KIND_SPECIAL &&
		     !wire_special_ok(m->u.file.mode, m->u.file.size)))
			r->err = true;
		break;
	case WIRE_HAVE:
		m->u.have.file_id = be_get_u32(r);
		m->u.have.flags = be_get_u16(r);
		m->u.have.status = (int32_t)be_get_u32(r);
		if (m->u.have.flags & ~(WIRE_HAVE_SKIP | WIRE_HAVE_SUMS) ||
		    m->u.have.flags == (WIRE_HAVE_SKIP | WIRE_HAVE_SUMS) ||
		    m->u.have.status > 0 ||
		    (m->u.have.status && !(m->u.have.flags & WIRE_HAVE_SKIP)))
			r->err = true;
		break;
	case WIRE_SUMS:
		m->u.sums.file_id = be_get_u32(r);
		m->u.sums.first = be_get_u64(r);
		m->u.sums.count = be_get_u16(r);
		if (!m->u.sums.count || m->u.sums.count > WIRE_SUMS_MAX ||
		    m->u.sums.first > UINT64_MAX - WIRE_SUMS_MAX) {
			r->err = true;
			break;
		}
		be_get_bytes(r, m->u.sums.sums,
			     (size_t)m->u.sums.count * WIRE_SUM_LEN);
		break;
	case WIRE_MATCH:
		m->u.match.file_id = be_get_u32(r);
		m->u.match.first = be_get_u64(r);
		m->u.match.count = be_get_u16(r);
		if (!m->u.match.count || m->u.match.count > WIRE_SUMS_MAX ||
		    m->u.match.first > UINT64_MAX - WIRE_SUMS_MAX) {
			r->err = true;
			break;
		}
		be_get_bytes(r, m->u.match.bits, (m->u.match.count + 7u) / 8);
		/* Bits past count are zero: one encoding per answer. */
		if (m->u.match.count % 8 &&
		    m->u.match.bits[m->u.match.count / 8] >>
			    (m->u.match.count % 8))
			r->err = true;
		break;
	case WIRE_FILE_END:
		m->u.end.file_id = be_get_u32(r);
		m->u.end.flags = be_get_u32(r);
		m->u.end.nchunks = be_get_u64(r);
		m->u.end.seq_end = be_get_u64(r);
		m->u.end.csum = be_get_u8(r);
		dec_digest(r, &m->u.end.digest_len, m->u.end.digest);
		m->u.end.status = (int32_t)be_get_u32(r);
		be_get_str(r, m->u.end.msg, WIRE_MSG_MAX);
		break;
	case WIRE_FILE_RESULT:
		m->u.result.file_id = be_get_u32(r);
		m->u.result.status = (int32_t)be_get_u32(r);
		m->u.result.flags = be_get_u32(r);
		m->u.result.sent = be_get_u64(r);
		dec_digest(r, &m->u.result.digest_len, m->u.result.digest);
		be_get_str(r, m->u.result.msg, WIRE_MSG_MAX);
		break;
	case WIRE_KEPT:
		m->u.kept.first_id = be_get_u32(r);
		m->u.kept.count = be_get_u32(r);
		if (!m->u.kept.count || m->u.kept.count > WIRE_KEPT_MAX)
			r->err = true;
		break;
	case WIRE_PACK_DONE:
		m->u.pack_done.first_id = be_get_u32(r);
		m->u.pack_done.count = be_get_u32(r);
		if (!m->u.pack_done.count ||
		    m->u.pack_done.count > WIRE_PACK_MAX_FILES)
			r->err = true;
		break;
	case WIRE_DONE:
		m->u.done.flags = be_get_u32(r);
		m->u.done.max_delete = be_get_u64(r);
		m->u.done.seq_end = be_get_u64(r);
		if (m->u.done.flags & ~WIRE_DONE_WHOLE)
			r->err = true;
		break;
	case WIRE_DELETED:
		m->u.deleted.kind = be_get_u8(r);
		m->u.deleted.flags = be_get_u8(r);
		m->u.deleted.status = (int32_t)be_get_u32(r);
		be_get_str(r, m->u.deleted.path, sizeof(m->u.deleted.path) - 1);
		be_get_str(r, m->u.deleted.msg, WIRE_MSG_MAX);
		if (m->u.deleted.kind > WIRE_KIND_OTHER ||
		    (m->u.deleted.flags & ~WIRE_DELETED_DRY) ||
		    m->u.deleted.status > 0 ||
		    (!m->u.deleted.path[0] && !m->u.deleted.status))
			r->err = true;
		break;
	case WIRE_DELETE_END:
		m->u.delete_end.status = (int32_t)be_get_u32(r);
		m->u.delete_end.count = be_get_u64(r);
		be_get_str(r, m->u.delete_end.msg, WIRE_MSG_MAX);
		if (m->u.delete_end.status > 0)
			r->err = true;
		break;
	case WIRE_NAMES:
		wire_dec_names(r, &m->u.names);
		break;
	case WIRE_NAMES_ACK:
		m->u.names_ack.done = be_get_u64(r);
		m->u.names_ack.seq_end = be_get_u64(r);
		break;
	case WIRE_BYE:
		m->u.bye.files_ok = be_get_u64(r);
		m->u.bye.files_failed = be_get_u64(r);
		m->u.bye.bytes = be_get_u64(r);
		break;
	case WIRE_AUTH:
		be_get_bytes(r, m->u.auth.mac, WIRE_MAC_LEN);
		break;
	case WIRE_ERROR:
		m->u.error.status = (int32_t)be_get_u32(r);
		m->u.error.klass = be_get_u32(r);
		be_get_str(r, m->u.error.msg, WIRE_MSG_MAX);
		break;
	case WIRE_NOTICE:
		be_get_str(r, m->u.notice.msg, WIRE_MSG_MAX);
		break;
	case WIRE_LANES:
		m->u.lanes.up = be_get_u8(r);
		if (!m->u.lanes.up || m->u.lanes.up > WIRE_STREAMS_MAX)
			r->err = true;
		break;
	case WIRE_XATTRS:
		wire_dec_xattrs(r, &m->u.xattrs);
		break;
	case WIRE_BATCH:
		dec_batch(r, &m->u.batch);
		break;
	case WIRE_FREED:
		m->u.freed.count = be_get_u16(r);
		if (!m->u.freed.count || m->u.freed.count > WIRE_FREED_MAX) {
			r->err = true;
			break;
		}
		for (unsigned int i = 0; i < m->u.freed.count; i++)
			m->u.freed.slot[i] = be_get_u16(r);
		break;
	default:
		break;
	}
}

int wire_decode(const uint8_t *buf, size_t len, struct wire_msg *m)
{
	struct be_get r = { .p = buf, .len = len };
	uint32_t total;
	uint8_t flags;

	memset(m, 0, sizeof(*m));
	m->type = be_get_u8(&r);
	flags = be_get_u8(&r);
	(void)be_get_u16(&r);
	total = be_get_u32(&r);
	m->ctrl_ack = be_get_u32(&r);
	m->slot_ack = be_get_u32(&r);
	if (r.err || total != len || m->type == 0 ||
	    m->type >= WIRE_TYPE_MAX || (flags & ~WIRE_CTRL_TAGGED))
		return -EPROTO;
	if (flags & WIRE_CTRL_TAGGED) {
		if (len < WIRE_CTRL_HDR + WIRE_TAG_LEN)
			return -EPROTO;
		r.len = len - WIRE_TAG_LEN; /* the body ends at the tag */
		m->tagged = true;
	}
	dec_body(&r, m);
	if (r.err || r.off != r.len)
		return -EPROTO;
	return 0;
}

int wire_tag_append(uint8_t *buf, size_t len, size_t cap)
{
	struct be_put w = { .p = buf + 4, .cap = 4 };

	if (len < WIRE_CTRL_HDR || cap < WIRE_TAG_LEN ||
	    len > cap - WIRE_TAG_LEN)
		return -EMSGSIZE;
	buf[1] |= WIRE_CTRL_TAGGED;
	be_put_u32(&w, (uint32_t)(len + WIRE_TAG_LEN));
	return (int)(len + WIRE_TAG_LEN);
}

bool wire_tag_split(const uint8_t *buf, size_t len, size_t *covered)
{
	if (len < WIRE_CTRL_HDR + WIRE_TAG_LEN || !(buf[1] & WIRE_CTRL_TAGGED))
		return false;
	*covered = len - WIRE_TAG_LEN;
	return true;
}

const char *wire_kind_name(unsigned int kind)
{
	return kind == WIRE_KIND_DIR	    ? "dir"
	       : kind == WIRE_KIND_SYMLINK  ? "symlink"
	       : kind == WIRE_KIND_OTHER    ? "other"
	       : kind == WIRE_KIND_HARDLINK ? "hardlink"
	       : kind == WIRE_KIND_SPECIAL  ? "special"
					    : "file";
}

bool wire_special_ok(uint32_t mode, uint64_t size)
{
	switch (mode & S_IFMT) {
	case S_IFCHR:
	case S_IFBLK:
		return !(mode & ~(uint32_t)(S_IFMT | 07777));
	case S_IFIFO:
	case S_IFSOCK:
		return !(mode & ~(uint32_t)(S_IFMT | 07777)) && !size;
	default:
		return false;
	}
}

const char *wire_type_name(unsigned int type)
{
	static const char *const names[WIRE_TYPE_MAX] = {
		[WIRE_HELLO] = "HELLO",
		[WIRE_WELCOME] = "WELCOME",
		[WIRE_RING] = "RING",
		[WIRE_FILE] = "FILE",
		[WIRE_FILE_END] = "FILE_END",
		[WIRE_FILE_RESULT] = "FILE_RESULT",
		[WIRE_DONE] = "DONE",
		[WIRE_BYE] = "BYE",
		[WIRE_ERROR] = "ERROR",
		[WIRE_CREDIT] = "CREDIT",
		[WIRE_AUTH] = "AUTH",
		[WIRE_HAVE] = "HAVE",
		[WIRE_PACK_DONE] = "PACK_DONE",
		[WIRE_SUMS] = "SUMS",
		[WIRE_MATCH] = "MATCH",
		[WIRE_DELETED] = "DELETED",
		[WIRE_DELETE_END] = "DELETE_END",
		[WIRE_NAMES] = "NAMES",
		[WIRE_NAMES_ACK] = "NAMES_ACK",
		[WIRE_KEPT] = "KEPT",
		[WIRE_NOTICE] = "NOTICE",
		[WIRE_XATTRS] = "XATTRS",
		[WIRE_LANES] = "LANES",
		[WIRE_BATCH] = "BATCH",
		[WIRE_FREED] = "FREED",
	};

	return type < WIRE_TYPE_MAX && names[type] ? names[type] : "?";
}

bool wire_batch_may(unsigned int type)
{
	switch (type) {
	case WIRE_FILE:
	case WIRE_XATTRS:
	case WIRE_FILE_END:
	case WIRE_HAVE:
	case WIRE_FILE_RESULT:
	case WIRE_KEPT:
		return true;
	default:
		return false;
	}
}

size_t wire_batch_start(uint8_t *buf)
{
	struct be_put w = be_put_init(buf, WIRE_CTRL_HDR + 2);

	be_put_u8(&w, WIRE_BATCH);
	be_put_zeros(&w, 3);
	be_put_u32(&w, WIRE_CTRL_HDR + 2); /* total length */
	be_put_zeros(&w, 8 + 2);	   /* acks (the engine's), count */
	return w.off;
}

bool wire_batch_add(uint8_t *buf, size_t *len, size_t cap, const uint8_t *msg,
		    size_t mlen)
{
	struct be_get r = be_get_init(buf + WIRE_CTRL_HDR, 2);
	uint16_t count = be_get_u16(&r);
	struct be_put w;

	if (mlen < WIRE_CTRL_HDR || mlen > cap || *len > cap - mlen ||
	    count == UINT16_MAX)
		return false;
	memcpy(buf + *len, msg, mlen);
	memset(buf + *len + 8, 0, 8); /* acks: the BATCH's own */
	*len += mlen;
	w = be_put_init(buf + 4, 4);
	be_put_u32(&w, (uint32_t)*len);
	w = be_put_init(buf + WIRE_CTRL_HDR, 2);
	be_put_u16(&w, (uint16_t)(count + 1));
	return true;
}

int wire_batch_next(const uint8_t *buf, const struct wire_batch *b,
		    uint32_t *pos, struct wire_msg *m)
{
	const uint8_t *p = buf + b->off + *pos;
	uint32_t total;

	if (*pos >= b->len)
		return 1;
	if (b->len - *pos < WIRE_CTRL_HDR || !batch_inner(p, &total) ||
	    total > b->len - *pos || wire_decode(p, total, m))
		return -EPROTO;
	*pos += total;
	return 0;
}
