/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Encoding and decoding of the control messages declared in wire.h (the
 * ring slots' contents are in wire_slot.c). The cursors of wire_codec.h
 * do all byte work; every message body is one function per direction so
 * the layout reads top to bottom, the same order as the README's tables.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "transfer/wire.h"
#include "transfer/wire_codec.h"
#include "util/checksum.h"

_Static_assert(WIRE_CTRL_HDR == 16, "control header is 16 bytes");
_Static_assert(WIRE_CTRL_SIZE >= WIRE_CTRL_HDR + 64 + WIRE_PATHS_MAX + 4 +
				   WIRE_FILTERS_MAX + 4 + WIRE_TAG_LEN,
	       "a control buffer holds the longest HELLO and a tag");
_Static_assert(WIRE_NAMES_BYTES > 4096 && WIRE_NAMES_BYTES < UINT16_MAX,
	       "a NAMES holds the longest name");
_Static_assert(WIRE_CTRL_SIZE >= WIRE_CTRL_HDR + 14 +
					 WIRE_SUM_LEN * WIRE_SUMS_MAX +
					 WIRE_TAG_LEN,
	       "a control buffer holds the longest SUMS and a tag");

/* ---- control messages ---- */

static void enc_body(struct put *w, const struct wire_msg *m)
{
	switch (m->type) {
	case WIRE_HELLO:
		put_u16(w, m->u.hello.role);
		put_u8(w, m->u.hello.csum);
		put_u8(w, m->u.hello.level);
		put_u32(w, m->u.hello.flags);
		put_u32(w, m->u.hello.features);
		put_u32(w, m->u.hello.chunk_size);
		put_u64(w, m->u.hello.bwlimit);
		put_bytes(w, m->u.hello.nonce, WIRE_NONCE_LEN);
		put_u16(w, m->u.hello.npaths);
		if (m->u.hello.paths_len > WIRE_PATHS_MAX)
			w->err = true;
		else
			put_u16(w, m->u.hello.paths_len);
		put_bytes(w, m->u.hello.paths, m->u.hello.paths_len);
		put_u16(w, m->u.hello.nfilters);
		if (m->u.hello.filters_len > WIRE_FILTERS_MAX)
			w->err = true;
		else
			put_u16(w, m->u.hello.filters_len);
		put_bytes(w, m->u.hello.filters, m->u.hello.filters_len);
		put_u8(w, m->u.hello.streams);
		put_u8(w, m->u.hello.sync);
		break;
	case WIRE_WELCOME:
		put_u32(w, (uint32_t)m->u.welcome.status);
		put_u32(w, m->u.welcome.features);
		put_bytes(w, m->u.welcome.nonce, WIRE_NONCE_LEN);
		put_bytes(w, m->u.welcome.mac, WIRE_MAC_LEN);
		put_str(w, m->u.welcome.msg, WIRE_MSG_MAX);
		put_u8(w, m->u.welcome.streams);
		put_bytes(w, m->u.welcome.token, WIRE_LANE_TOKEN_LEN);
		put_u8(w, m->u.welcome.rails);
		for (unsigned int i = 1; i < m->u.welcome.rails; i++) {
			put_u8(w, m->u.welcome.rail[i].family);
			put_bytes(w, m->u.welcome.rail[i].addr, 16);
		}
		break;
	case WIRE_RING:
		put_u64(w, m->u.ring.addr);
		put_u32(w, m->u.ring.rkey);
		put_u16(w, m->u.ring.slots);
		put_u32(w, m->u.ring.slot_size);
		put_u64(w, m->u.ring.hdr_addr);
		put_u8(w, m->u.ring.rails);
		for (unsigned int i = 1; i < m->u.ring.rails; i++)
			put_u32(w, m->u.ring.rkeys[i]);
		break;
	case WIRE_FILE:
		put_u32(w, m->u.file.file_id);
		put_u8(w, m->u.file.kind);
		put_u32(w, m->u.file.flags);
		put_u64(w, m->u.file.size);
		put_u32(w, m->u.file.mode);
		put_u64(w, (uint64_t)m->u.file.mtime_sec);
		put_u32(w, m->u.file.mtime_nsec);
		put_u64(w, (uint64_t)m->u.file.atime_sec);
		put_u32(w, m->u.file.atime_nsec);
		put_str(w, m->u.file.path, sizeof(m->u.file.path) - 1);
		put_str(w, m->u.file.link, sizeof(m->u.file.link) - 1);
		if (!(m->u.file.flags & WIRE_FILE_RANGE))
			break;
		put_u64(w, m->u.file.range_off);
		put_u64(w, m->u.file.range_len);
		put_u32(w, m->u.file.range_idx);
		put_u32(w, m->u.file.range_count);
		put_bytes(w, m->u.file.token, WIRE_TOKEN_LEN);
		break;
	case WIRE_HAVE:
		put_u32(w, m->u.have.file_id);
		put_u16(w, m->u.have.flags);
		put_u32(w, (uint32_t)m->u.have.status);
		break;
	case WIRE_SUMS:
		put_u32(w, m->u.sums.file_id);
		put_u64(w, m->u.sums.first);
		put_u16(w, m->u.sums.count);
		put_bytes(w, m->u.sums.sums,
			  (size_t)m->u.sums.count * WIRE_SUM_LEN);
		break;
	case WIRE_MATCH:
		put_u32(w, m->u.match.file_id);
		put_u64(w, m->u.match.first);
		put_u16(w, m->u.match.count);
		put_bytes(w, m->u.match.bits, (m->u.match.count + 7u) / 8);
		break;
	case WIRE_FILE_END:
		put_u32(w, m->u.end.file_id);
		put_u32(w, m->u.end.flags);
		put_u64(w, m->u.end.nchunks);
		put_u64(w, m->u.end.seq_end);
		put_u8(w, m->u.end.csum);
		put_u8(w, m->u.end.digest_len);
		put_bytes(w, m->u.end.digest, m->u.end.digest_len);
		put_u32(w, (uint32_t)m->u.end.status);
		put_str(w, m->u.end.msg, WIRE_MSG_MAX);
		break;
	case WIRE_FILE_RESULT:
		put_u32(w, m->u.result.file_id);
		put_u32(w, (uint32_t)m->u.result.status);
		put_u32(w, m->u.result.flags);
		put_u64(w, m->u.result.sent);
		put_u8(w, m->u.result.digest_len);
		put_bytes(w, m->u.result.digest, m->u.result.digest_len);
		put_str(w, m->u.result.msg, WIRE_MSG_MAX);
		break;
	case WIRE_KEPT:
		put_u32(w, m->u.kept.first_id);
		put_u32(w, m->u.kept.count);
		break;
	case WIRE_PACK_DONE:
		put_u32(w, m->u.pack_done.first_id);
		put_u32(w, m->u.pack_done.count);
		break;
	case WIRE_DONE:
		put_u32(w, m->u.done.flags);
		put_u64(w, m->u.done.max_delete);
		put_u64(w, m->u.done.seq_end);
		break;
	case WIRE_DELETED:
		put_u8(w, m->u.deleted.kind);
		put_u8(w, m->u.deleted.flags);
		put_u32(w, (uint32_t)m->u.deleted.status);
		put_str(w, m->u.deleted.path, sizeof(m->u.deleted.path) - 1);
		put_str(w, m->u.deleted.msg, WIRE_MSG_MAX);
		break;
	case WIRE_DELETE_END:
		put_u32(w, (uint32_t)m->u.delete_end.status);
		put_u64(w, m->u.delete_end.count);
		put_str(w, m->u.delete_end.msg, WIRE_MSG_MAX);
		break;
	case WIRE_NAMES:
		put_u16(w, m->u.names.flags);
		put_u16(w, m->u.names.count);
		if (m->u.names.len > WIRE_NAMES_BYTES)
			w->err = true;
		else
			put_u16(w, m->u.names.len);
		put_bytes(w, m->u.names.names, m->u.names.len);
		break;
	case WIRE_NAMES_ACK:
		put_u64(w, m->u.names_ack.done);
		put_u64(w, m->u.names_ack.seq_end);
		break;
	case WIRE_BYE:
		put_u64(w, m->u.bye.files_ok);
		put_u64(w, m->u.bye.files_failed);
		put_u64(w, m->u.bye.bytes);
		break;
	case WIRE_AUTH:
		put_bytes(w, m->u.auth.mac, WIRE_MAC_LEN);
		break;
	case WIRE_ERROR:
		put_u32(w, (uint32_t)m->u.error.status);
		put_u32(w, m->u.error.klass);
		put_str(w, m->u.error.msg, WIRE_MSG_MAX);
		break;
	default: /* CREDIT: header only */
		break;
	}
}

void wire_set_acks(uint8_t *buf, uint32_t ctrl_ack, uint32_t slot_ack)
{
	struct put w = { .p = buf + 8, .cap = 8 };

	put_u32(&w, ctrl_ack);
	put_u32(&w, slot_ack);
}

int wire_encode(const struct wire_msg *m, uint8_t *buf, size_t cap)
{
	struct put w = { .p = buf, .cap = cap };

	if (m->type == 0 || m->type >= WIRE_TYPE_MAX ||
	    (m->type == WIRE_FILE_END &&
	     m->u.end.digest_len > WIRE_DIGEST_MAX) ||
	    (m->type == WIRE_FILE_RESULT &&
	     m->u.result.digest_len > WIRE_DIGEST_MAX) ||
	    (m->type == WIRE_SUMS &&
	     (!m->u.sums.count || m->u.sums.count > WIRE_SUMS_MAX)) ||
	    (m->type == WIRE_MATCH &&
	     (!m->u.match.count || m->u.match.count > WIRE_SUMS_MAX)))
		return -EINVAL;
	put_u8(&w, m->type);
	put_u8(&w, 0);
	put_u16(&w, 0);
	put_u32(&w, 0); /* total length, patched below */
	put_u32(&w, m->ctrl_ack);
	put_u32(&w, m->slot_ack);
	enc_body(&w, m);
	if (w.err || w.off > UINT32_MAX)
		return -EMSGSIZE;
	{
		uint32_t n = htobe32((uint32_t)w.off);

		memcpy(buf + 4, &n, 4);
	}
	return (int)w.off;
}

static void dec_digest(struct get *r, uint8_t *len, uint8_t *digest)
{
	*len = get_u8(r);
	if (*len > WIRE_DIGEST_MAX) {
		r->err = true;
		return;
	}
	get_bytes(r, digest, *len);
}

/* HELLO paths: npaths NUL-terminated strings filling paths_len bytes. */
static void dec_paths(struct get *r, struct wire_hello *h)
{
	const char *p = h->paths, *end;
	unsigned int n = 0;

	h->npaths = get_u16(r);
	h->paths_len = get_u16(r);
	if (h->paths_len > WIRE_PATHS_MAX) {
		r->err = true;
		return;
	}
	get_bytes(r, h->paths, h->paths_len);
	if (r->err)
		return;
	end = h->paths + h->paths_len;
	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));

		if (!nul) {
			r->err = true;
			return;
		}
		p = nul + 1;
		n++;
	}
	if (n != h->npaths)
		r->err = true;
}

/*
 * HELLO filter rules: nfilters NUL-terminated strings filling filters_len
 * bytes, each '+' or '-' and a pattern of at least one byte.
 */
static void dec_filters(struct get *r, struct wire_hello *h)
{
	const char *p = h->filters, *end;
	unsigned int n = 0;

	h->nfilters = get_u16(r);
	h->filters_len = get_u16(r);
	if (h->filters_len > WIRE_FILTERS_MAX) {
		r->err = true;
		return;
	}
	get_bytes(r, h->filters, h->filters_len);
	if (r->err)
		return;
	end = h->filters + h->filters_len;
	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));

		if (!nul || nul - p < 2 || (p[0] != '+' && p[0] != '-')) {
			r->err = true;
			return;
		}
		p = nul + 1;
		n++;
	}
	if (n != h->nfilters)
		r->err = true;
}

int wire_hello_add_filter(struct wire_hello *h, bool include,
			  const char *pattern)
{
	size_t n = strlen(pattern) + 2;

	if (!*pattern)
		return -EINVAL;
	if (n > WIRE_FILTERS_MAX - h->filters_len ||
	    h->nfilters == UINT16_MAX)
		return -ENAMETOOLONG;
	h->filters[h->filters_len] = include ? '+' : '-';
	memcpy(h->filters + h->filters_len + 1, pattern, n - 1);
	h->filters_len += (uint16_t)n;
	h->nfilters++;
	return 0;
}

const char *wire_hello_filter(const struct wire_hello *h, unsigned int i)
{
	const char *p = h->filters;

	if (i >= h->nfilters)
		return "";
	while (i--)
		p += strlen(p) + 1;
	return p;
}

int wire_hello_add_path(struct wire_hello *h, const char *path)
{
	size_t n = strlen(path) + 1;

	if (n > WIRE_PATHS_MAX - h->paths_len || h->npaths == UINT16_MAX)
		return -ENAMETOOLONG;
	memcpy(h->paths + h->paths_len, path, n);
	h->paths_len += (uint16_t)n;
	h->npaths++;
	return 0;
}

const char *wire_hello_path(const struct wire_hello *h, unsigned int i)
{
	const char *p = h->paths;

	if (i >= h->npaths)
		return "";
	while (i--)
		p += strlen(p) + 1;
	return p;
}

/*
 * NAMES: count names of 1..WIRE_NAME_MAX bytes, each NUL-terminated, filling
 * len bytes; none only with END.
 */
static void dec_names(struct get *r, struct wire_names *n)
{
	const char *p = n->names, *end;
	unsigned int count = 0;

	n->flags = get_u16(r);
	n->count = get_u16(r);
	n->len = get_u16(r);
	if (n->len > WIRE_NAMES_BYTES || (n->flags & ~WIRE_NAMES_END) ||
	    (!n->count && !(n->flags & WIRE_NAMES_END))) {
		r->err = true;
		return;
	}
	get_bytes(r, n->names, n->len);
	if (r->err)
		return;
	for (end = p + n->len; p < end; count++) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));

		if (!nul || nul == p || nul - p > WIRE_NAME_MAX) {
			r->err = true;
			return;
		}
		p = nul + 1;
	}
	if (count != n->count)
		r->err = true;
}

int wire_names_add(struct wire_names *n, const char *name, size_t len)
{
	if (!len || len > WIRE_NAME_MAX ||
	    len + 1 > WIRE_NAMES_BYTES - n->len || n->count == UINT16_MAX)
		return -ENOSPC;
	memcpy(n->names + n->len, name, len);
	n->names[n->len + len] = '\0';
	n->len += (uint16_t)(len + 1);
	n->count++;
	return 0;
}

static void dec_body(struct get *r, struct wire_msg *m)
{
	switch (m->type) {
	case WIRE_HELLO:
		m->u.hello.role = get_u16(r);
		m->u.hello.csum = get_u8(r);
		m->u.hello.level = get_u8(r);
		m->u.hello.flags = get_u32(r);
		m->u.hello.features = get_u32(r);
		m->u.hello.chunk_size = get_u32(r);
		m->u.hello.bwlimit = get_u64(r);
		get_bytes(r, m->u.hello.nonce, WIRE_NONCE_LEN);
		dec_paths(r, &m->u.hello);
		dec_filters(r, &m->u.hello);
		m->u.hello.streams = get_u8(r); /* 0 as 1: one lane */
		m->u.hello.sync = get_u8(r);
		if (m->u.hello.streams > WIRE_STREAMS_MAX ||
		    m->u.hello.sync > WIRE_SYNC_MAX)
			r->err = true;
		break;
	case WIRE_WELCOME:
		m->u.welcome.status = (int32_t)get_u32(r);
		m->u.welcome.features = get_u32(r);
		get_bytes(r, m->u.welcome.nonce, WIRE_NONCE_LEN);
		get_bytes(r, m->u.welcome.mac, WIRE_MAC_LEN);
		get_str(r, m->u.welcome.msg, WIRE_MSG_MAX);
		m->u.welcome.streams = get_u8(r); /* 0 as 1 */
		get_bytes(r, m->u.welcome.token, WIRE_LANE_TOKEN_LEN);
		m->u.welcome.rails = get_u8(r); /* 0 as 1 */
		if (m->u.welcome.streams > WIRE_STREAMS_MAX ||
		    m->u.welcome.rails > WIRE_STREAMS_MAX ||
		    (m->u.welcome.rails > 1 &&
		     m->u.welcome.rails > m->u.welcome.streams))
			r->err = true;
		for (unsigned int i = 1; !r->err && i < m->u.welcome.rails;
		     i++) {
			struct wire_rail *a = &m->u.welcome.rail[i];

			a->family = get_u8(r);
			get_bytes(r, a->addr, 16);
			if (a->family != 4 && a->family != 6)
				r->err = true;
		}
		break;
	case WIRE_RING:
		m->u.ring.addr = get_u64(r);
		m->u.ring.rkey = get_u32(r);
		m->u.ring.slots = get_u16(r);
		m->u.ring.slot_size = get_u32(r);
		m->u.ring.hdr_addr = get_u64(r);
		m->u.ring.rails = get_u8(r); /* 0 as 1 */
		if (m->u.ring.rails > WIRE_STREAMS_MAX)
			r->err = true;
		for (unsigned int i = 1; !r->err && i < m->u.ring.rails; i++)
			m->u.ring.rkeys[i] = get_u32(r);
		break;
	case WIRE_FILE:
		m->u.file.file_id = get_u32(r);
		m->u.file.kind = get_u8(r);
		m->u.file.flags = get_u32(r);
		m->u.file.size = get_u64(r);
		m->u.file.mode = get_u32(r);
		m->u.file.mtime_sec = (int64_t)get_u64(r);
		m->u.file.mtime_nsec = get_u32(r);
		m->u.file.atime_sec = (int64_t)get_u64(r);
		m->u.file.atime_nsec = get_u32(r);
		get_str(r, m->u.file.path, sizeof(m->u.file.path) - 1);
		get_str(r, m->u.file.link, sizeof(m->u.file.link) - 1);
		if (m->u.file.flags & WIRE_FILE_RANGE) {
			m->u.file.range_off = get_u64(r);
			m->u.file.range_len = get_u64(r);
			m->u.file.range_idx = get_u32(r);
			m->u.file.range_count = get_u32(r);
			get_bytes(r, m->u.file.token, WIRE_TOKEN_LEN);
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
		if (m->u.file.flags & ~(WIRE_FILE_SPARSE | WIRE_FILE_RANGE) ||
		    m->u.file.kind > WIRE_KIND_SYMLINK ||
		    m->u.file.mtime_nsec >= 1000000000u ||
		    m->u.file.atime_nsec >= 1000000000u ||
		    (m->u.file.kind != WIRE_KIND_FILE && m->u.file.size) ||
		    (m->u.file.kind == WIRE_KIND_SYMLINK) !=
			    (m->u.file.link[0] != '\0'))
			r->err = true;
		break;
	case WIRE_HAVE:
		m->u.have.file_id = get_u32(r);
		m->u.have.flags = get_u16(r);
		m->u.have.status = (int32_t)get_u32(r);
		if (m->u.have.flags & ~(WIRE_HAVE_SKIP | WIRE_HAVE_SUMS) ||
		    m->u.have.flags == (WIRE_HAVE_SKIP | WIRE_HAVE_SUMS) ||
		    m->u.have.status > 0 ||
		    (m->u.have.status && !(m->u.have.flags & WIRE_HAVE_SKIP)))
			r->err = true;
		break;
	case WIRE_SUMS:
		m->u.sums.file_id = get_u32(r);
		m->u.sums.first = get_u64(r);
		m->u.sums.count = get_u16(r);
		if (!m->u.sums.count || m->u.sums.count > WIRE_SUMS_MAX ||
		    m->u.sums.first > UINT64_MAX - WIRE_SUMS_MAX) {
			r->err = true;
			break;
		}
		get_bytes(r, m->u.sums.sums,
			  (size_t)m->u.sums.count * WIRE_SUM_LEN);
		break;
	case WIRE_MATCH:
		m->u.match.file_id = get_u32(r);
		m->u.match.first = get_u64(r);
		m->u.match.count = get_u16(r);
		if (!m->u.match.count || m->u.match.count > WIRE_SUMS_MAX ||
		    m->u.match.first > UINT64_MAX - WIRE_SUMS_MAX) {
			r->err = true;
			break;
		}
		get_bytes(r, m->u.match.bits, (m->u.match.count + 7u) / 8);
		/* Bits past count are zero: one encoding per answer. */
		if (m->u.match.count % 8 &&
		    m->u.match.bits[m->u.match.count / 8] >>
			    (m->u.match.count % 8))
			r->err = true;
		break;
	case WIRE_FILE_END:
		m->u.end.file_id = get_u32(r);
		m->u.end.flags = get_u32(r);
		m->u.end.nchunks = get_u64(r);
		m->u.end.seq_end = get_u64(r);
		m->u.end.csum = get_u8(r);
		dec_digest(r, &m->u.end.digest_len, m->u.end.digest);
		m->u.end.status = (int32_t)get_u32(r);
		get_str(r, m->u.end.msg, WIRE_MSG_MAX);
		break;
	case WIRE_FILE_RESULT:
		m->u.result.file_id = get_u32(r);
		m->u.result.status = (int32_t)get_u32(r);
		m->u.result.flags = get_u32(r);
		m->u.result.sent = get_u64(r);
		dec_digest(r, &m->u.result.digest_len, m->u.result.digest);
		get_str(r, m->u.result.msg, WIRE_MSG_MAX);
		break;
	case WIRE_KEPT:
		m->u.kept.first_id = get_u32(r);
		m->u.kept.count = get_u32(r);
		if (!m->u.kept.count || m->u.kept.count > WIRE_KEPT_MAX)
			r->err = true;
		break;
	case WIRE_PACK_DONE:
		m->u.pack_done.first_id = get_u32(r);
		m->u.pack_done.count = get_u32(r);
		if (!m->u.pack_done.count ||
		    m->u.pack_done.count > WIRE_PACK_MAX_FILES)
			r->err = true;
		break;
	case WIRE_DONE:
		m->u.done.flags = get_u32(r);
		m->u.done.max_delete = get_u64(r);
		m->u.done.seq_end = get_u64(r);
		if (m->u.done.flags & ~WIRE_DONE_WHOLE)
			r->err = true;
		break;
	case WIRE_DELETED:
		m->u.deleted.kind = get_u8(r);
		m->u.deleted.flags = get_u8(r);
		m->u.deleted.status = (int32_t)get_u32(r);
		get_str(r, m->u.deleted.path, sizeof(m->u.deleted.path) - 1);
		get_str(r, m->u.deleted.msg, WIRE_MSG_MAX);
		if (m->u.deleted.kind > WIRE_KIND_OTHER ||
		    (m->u.deleted.flags & ~WIRE_DELETED_DRY) ||
		    m->u.deleted.status > 0 ||
		    (!m->u.deleted.path[0] && !m->u.deleted.status))
			r->err = true;
		break;
	case WIRE_DELETE_END:
		m->u.delete_end.status = (int32_t)get_u32(r);
		m->u.delete_end.count = get_u64(r);
		get_str(r, m->u.delete_end.msg, WIRE_MSG_MAX);
		if (m->u.delete_end.status > 0)
			r->err = true;
		break;
	case WIRE_NAMES:
		dec_names(r, &m->u.names);
		break;
	case WIRE_NAMES_ACK:
		m->u.names_ack.done = get_u64(r);
		m->u.names_ack.seq_end = get_u64(r);
		break;
	case WIRE_BYE:
		m->u.bye.files_ok = get_u64(r);
		m->u.bye.files_failed = get_u64(r);
		m->u.bye.bytes = get_u64(r);
		break;
	case WIRE_AUTH:
		get_bytes(r, m->u.auth.mac, WIRE_MAC_LEN);
		break;
	case WIRE_ERROR:
		m->u.error.status = (int32_t)get_u32(r);
		m->u.error.klass = get_u32(r);
		get_str(r, m->u.error.msg, WIRE_MSG_MAX);
		break;
	default:
		break;
	}
}

int wire_decode(const uint8_t *buf, size_t len, struct wire_msg *m)
{
	struct get r = { .p = buf, .len = len };
	uint32_t total;
	uint8_t flags;

	memset(m, 0, sizeof(*m));
	m->type = get_u8(&r);
	flags = get_u8(&r);
	(void)get_u16(&r);
	total = get_u32(&r);
	m->ctrl_ack = get_u32(&r);
	m->slot_ack = get_u32(&r);
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
	struct put w = { .p = buf + 4, .cap = 4 };

	if (len < WIRE_CTRL_HDR || cap < WIRE_TAG_LEN ||
	    len > cap - WIRE_TAG_LEN)
		return -EMSGSIZE;
	buf[1] |= WIRE_CTRL_TAGGED;
	put_u32(&w, (uint32_t)(len + WIRE_TAG_LEN));
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
	return kind == WIRE_KIND_DIR	   ? "dir"
	       : kind == WIRE_KIND_SYMLINK ? "symlink"
	       : kind == WIRE_KIND_OTHER   ? "other"
					   : "file";
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
	};

	return type < WIRE_TYPE_MAX && names[type] ? names[type] : "?";
}
