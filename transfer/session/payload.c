/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A chunk's payload transforms, both ways; see payload.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <endian.h>

#include "transfer/session/payload.h"
#include "util/key.h"
#include "util/zchunk.h"

int payload_resume_key(const uint8_t *data_key, uint8_t key[32])
{
	memset(key, 0, 32);
	if (!data_key)
		return 0;
	return aead_hkdf(data_key, 32, NULL, 0, "rdcp1 resume key", key, 32);
}

int payload_resume_sum(const uint8_t key[32], uint32_t id, uint64_t index,
		       const uint8_t sha[32], uint8_t out[WIRE_SUM_LEN])
{
	static const char label[] = "rdcp1 chunk";
	uint32_t id_be = htobe32(id);
	uint64_t index_be = htobe64(index);
	const void *parts[] = { label, &id_be, &index_be, sha };
	const size_t lens[] = { sizeof(label) - 1, 4, 8, 32 };
	uint8_t mac[KEY_MAC_LEN];
	int rc = key_hmac(key, parts, lens, 4, mac);

	memcpy(out, mac, WIRE_SUM_LEN);
	return rc;
}

int payload_init(struct payload *pl, uint32_t chunk, bool compress,
		 const uint8_t *key)
{
	pl->scratch = NULL;
	pl->plain = NULL;
	pl->chunk_size = chunk;
	pl->aead = NULL;
	/* Page aligned: the sink writes, the source reads, it with O_DIRECT. */
	if (compress && posix_memalign((void **)&pl->scratch, 4096, chunk))
		return -ENOMEM;
	return key ? aead_create(key, &pl->aead) : 0;
}

void payload_release(struct payload *pl)
{
	free(pl->scratch);
	pl->scratch = NULL;
	free(pl->plain);
	pl->plain = NULL;
	aead_destroy(pl->aead);
	pl->aead = NULL;
}

int payload_seal(struct payload *pl, int level, const uint8_t *raw,
		 uint8_t *data, uint32_t room, uint64_t index,
		 struct wire_slot_hdr *h)
{
	uint8_t aad[WIRE_AAD_LEN];
	long n;

	h->len = h->raw_len;
	if (pl->scratch) {
		n = zchunk_compress(level, raw, h->raw_len, data, room);
		if (n < 0)
			return (int)n;
		if (n > 0) {
			h->len = (uint32_t)n;
			h->flags |= WIRE_SLOT_COMPRESSED;
		} else {
			memcpy(data, raw, h->raw_len);
		}
	}
	if (!pl->aead)
		return 0;
	h->flags |= WIRE_SLOT_ENCRYPTED;
	wire_chunk_aad(aad, h->file_id, h->offset, h->raw_len, h->flags);
	return aead_seal(pl->aead, h->file_id, index, aad, sizeof(aad), data,
			 h->len, h->tag);
}

int payload_open(struct payload *pl, const struct wire_slot_hdr *h,
		 uint64_t index, uint8_t *data, const uint8_t **raw)
{
	uint8_t aad[WIRE_AAD_LEN];
	int rc;

	*raw = data;
	if (h->flags & WIRE_SLOT_ENCRYPTED) {
		/* Page aligned: written to the file with O_DIRECT. */
		if (!pl->plain &&
		    posix_memalign((void **)&pl->plain, 4096, pl->chunk_size))
			return -ENOMEM;
		if (h->len > pl->chunk_size)
			return -EPROTO;
		wire_chunk_aad(aad, h->file_id, h->offset, h->raw_len,
			       h->flags);
		rc = aead_open_to(pl->aead, h->file_id, index, aad,
				  sizeof(aad), data, pl->plain, h->len, h->tag);
		if (rc)
			return rc;
		data = pl->plain;
		*raw = data;
	}
	if (h->flags & WIRE_SLOT_COMPRESSED) {
		rc = zchunk_decompress(data, h->len, pl->scratch, h->raw_len);
		if (rc)
			return rc;
		*raw = pl->scratch;
	}
	return 0;
}
