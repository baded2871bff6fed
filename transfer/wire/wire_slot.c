/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What travels in ring slots (wire_slot.h): the 64-byte slot header of a
 * chunk, the associated data an encrypted chunk is sealed with, and the
 * records of a packed slot. The control messages are in wire.c.
 */
#include <errno.h>
#include <string.h>

#include "transfer/wire/wire.h"
#include "util/be_codec.h"
#include "util/checksum.h"

_Static_assert(WIRE_SLOT_HDR == 64, "slot header is 64 bytes");

/* ---- slot header ---- */

void wire_slot_encode(uint8_t *p, const struct wire_slot_hdr *h)
{
	struct be_put w = { .p = p, .cap = WIRE_SLOT_HDR };
	static const uint8_t zero[8];

	be_put_u64(&w, h->seq);
	be_put_u32(&w, h->file_id);
	be_put_u32(&w, h->len);
	be_put_u64(&w, h->offset);
	be_put_u32(&w, h->crc);
	be_put_u16(&w, h->flags);
	be_put_u16(&w, 0);
	be_put_u32(&w, h->raw_len);
	be_put_bytes(&w, zero, 8);
	be_put_bytes(&w, h->tag, 16);
	be_put_u32(&w, ck_crc32(0, p, 60));
}

int wire_slot_decode(const uint8_t *p, struct wire_slot_hdr *h)
{
	struct be_get r = { .p = p, .len = WIRE_SLOT_HDR };
	uint8_t rsvd[8];
	uint32_t crc;

	h->seq = be_get_u64(&r);
	h->file_id = be_get_u32(&r);
	h->len = be_get_u32(&r);
	h->offset = be_get_u64(&r);
	h->crc = be_get_u32(&r);
	h->flags = be_get_u16(&r);
	(void)be_get_u16(&r);
	h->raw_len = be_get_u32(&r);
	be_get_bytes(&r, rsvd, 8);
	be_get_bytes(&r, h->tag, 16);
	crc = be_get_u32(&r);
	if (r.err)
		return -EPROTO;
	if (crc != ck_crc32(0, p, 60))
		return -EBADMSG;
	return 0;
}

void wire_chunk_aad(uint8_t aad[WIRE_AAD_LEN], uint32_t file_id,
		    uint64_t offset, uint32_t raw_len, uint16_t flags)
{
	struct be_put w = { .p = aad, .cap = WIRE_AAD_LEN };
	static const uint8_t zero[6];

	be_put_u32(&w, file_id);
	be_put_u64(&w, offset);
	be_put_u32(&w, raw_len);
	be_put_u16(&w, flags);
	be_put_bytes(&w, zero, sizeof(zero));
}

/* ---- packed slots ---- */

size_t wire_pack_owner_len(const struct wire_pack_rec *r)
{
	return r->flags & WIRE_PACK_OWNER ? wire_owner_len(&r->owner) : 0;
}

size_t wire_pack_put(uint8_t *p, const struct wire_pack_rec *r)
{
	struct be_put w = { .p = p,
			    .cap = WIRE_PACK_REC_HDR + wire_pack_owner_len(r) +
				   WIRE_DIGEST_MAX + r->path_len };

	be_put_u32(&w, r->file_id);
	be_put_u8(&w, r->flags);
	be_put_u8(&w, r->digest_len);
	be_put_u16(&w, r->path_len);
	be_put_u32(&w, r->mode);
	be_put_u64(&w, (uint64_t)r->mtime_sec);
	be_put_u32(&w, r->mtime_nsec);
	be_put_u64(&w, (uint64_t)r->atime_sec);
	be_put_u32(&w, r->atime_nsec);
	be_put_u32(&w, r->size);
	be_put_u32(&w, (uint32_t)r->status);
	if (r->flags & WIRE_PACK_OWNER)
		wire_owner_put(&w, &r->owner);
	be_put_bytes(&w, r->digest, r->digest_len);
	be_put_bytes(&w, r->path, r->path_len);
	return w.off;
}

int wire_pack_digest(uint8_t csum, const uint8_t *data, uint32_t len,
		     uint8_t out[WIRE_DIGEST_MAX])
{
	uint8_t inner[CK_SHA256_LEN];
	uint32_t crc;
	int rc;

	switch (csum) {
	case WIRE_CSUM_CRC32:
		crc = htobe32(ck_crc32(0, data, len));
		memcpy(out, &crc, 4);
		return 4;
	case WIRE_CSUM_SHA256:
		/* SHA-256 over the chunks' SHA-256s: none, or this one. */
		rc = len ? ck_sha256(data, len, inner) : 0;
		if (!rc)
			rc = len ? ck_sha256(inner, sizeof(inner), out)
				 : ck_sha256("", 0, out);
		return rc ? rc : CK_SHA256_LEN;
	default:
		return 0;
	}
}

int wire_pack_next(const uint8_t *p, size_t len, size_t *pos,
		   struct wire_pack_rec *r)
{
	struct be_get g = { .p = p, .len = len, .off = *pos };
	bool abort;

	memset(r, 0, sizeof(*r));
	if (*pos > len)
		return -EPROTO;
	r->file_id = be_get_u32(&g);
	r->flags = be_get_u8(&g);
	r->digest_len = be_get_u8(&g);
	r->path_len = be_get_u16(&g);
	r->mode = be_get_u32(&g);
	r->mtime_sec = (int64_t)be_get_u64(&g);
	r->mtime_nsec = be_get_u32(&g);
	r->atime_sec = (int64_t)be_get_u64(&g);
	r->atime_nsec = be_get_u32(&g);
	r->size = be_get_u32(&g);
	r->status = (int32_t)be_get_u32(&g);
	abort = r->flags & WIRE_PACK_ABORT;
	if (r->flags & WIRE_PACK_OWNER)
		wire_owner_get(&g, &r->owner);
	if (g.err || r->flags & ~(WIRE_PACK_ABORT | WIRE_PACK_OWNER) ||
	    r->digest_len > WIRE_DIGEST_MAX || !r->path_len ||
	    r->path_len > 4095 || r->mtime_nsec >= 1000000000u ||
	    r->atime_nsec >= 1000000000u ||
	    (abort ? r->status >= 0 : r->status != 0) ||
	    (abort && r->size > WIRE_MSG_MAX))
		return -EPROTO;
	be_get_bytes(&g, r->digest, r->digest_len);
	if (g.err || len - g.off < (size_t)r->path_len + r->size)
		return -EPROTO;
	r->path = (const char *)p + g.off;
	r->data = p + g.off + r->path_len;
	if (memchr(r->path, '\0', r->path_len) ||
	    (abort && memchr(r->data, '\0', r->size)))
		return -EPROTO;
	*pos = g.off + r->path_len + r->size;
	return 0;
}
