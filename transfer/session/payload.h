/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: a chunk's payload transforms, both ways. The
 * source compresses a payload when that helps and seals it with
 * --encrypt; the sink opens it and inflates it. Each ring slot's job owns
 * one struct payload: the scratch buffer and the AES-256-GCM context its
 * worker uses, made once per session, never shared between threads.
 */
#ifndef RDCP_PAYLOAD_H
#define RDCP_PAYLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "transfer/wire/wire.h"
#include "util/aead.h"

struct payload {
	uint8_t *scratch;  /* chunk bytes, page aligned, with compression */
	uint8_t *plain;	   /* sink, --encrypt: a chunk decrypted (made lazily) */
	uint32_t chunk_size; /* payload bytes per slot */
	struct aead *aead; /* with a data key, else NULL */
};

/*
 * Makes what a job needs for chunks of up to chunk bytes: a scratch buffer
 * when compress, a GCM context when key is not NULL. 0 or -errno; pl is
 * then released with payload_release either way.
 */
int payload_init(struct payload *pl, uint32_t chunk, bool compress,
		 const uint8_t *key) __attribute__((warn_unused_result));
void payload_release(struct payload *pl);

/*
 * Source, in a worker: puts h->raw_len bytes of raw into data (room bytes
 * at most), compressed at zlib level when that makes them smaller (raw is
 * then pl->scratch), and seals them with the IV (h->file_id, index) and an
 * AAD over h's file_id, offset, raw_len and flags. Sets h->len, adds
 * WIRE_SLOT_COMPRESSED / WIRE_SLOT_ENCRYPTED to h->flags, fills h->tag.
 * Without compression raw must already be data. 0 or -errno.
 */
int payload_seal(struct payload *pl, int level, const uint8_t *raw,
		 uint8_t *data, uint32_t room, uint64_t index,
		 struct wire_slot_hdr *h) __attribute__((warn_unused_result));

/*
 * Sink, in a worker: opens the h->len bytes of a sealed payload in data
 * into pl->plain (-EBADMSG when the tag is wrong) and inflates a
 * compressed one into pl->scratch. *raw is then the payload as the source
 * read it: for a sealed one never data itself, so bytes written into the
 * ring slot after the tag was checked (by anyone holding its rkey) cannot
 * reach the file. An unsealed one is data (or scratch): without --encrypt
 * nothing is authenticated anyway. 0 or -errno.
 */
int payload_open(struct payload *pl, const struct wire_slot_hdr *h,
		 uint64_t index, uint8_t *data, const uint8_t **raw)
	__attribute__((warn_unused_result));

/*
 * --resume: the key of the chunk digests both sides compare, 32 bytes into
 * key. With --encrypt (data_key not NULL) HKDF-SHA256 of the data key
 * with the label "rdcp1 resume key", so that nobody on the path can test
 * a guess against them; else all zero. 0 or -errno.
 */
int payload_resume_key(const uint8_t *data_key, uint8_t key[32])
	__attribute__((warn_unused_result));

/*
 * --resume, in a worker: chunk index of file id, whose content has the
 * SHA-256 sha: the first WIRE_SUM_LEN bytes of HMAC-SHA256(key, "rdcp1
 * chunk" ‖ id (u32 BE) ‖ index (u64 BE) ‖ sha) into out. Equal digests
 * mean equal chunks, and say nothing else. 0 or -EIO.
 */
int payload_resume_sum(const uint8_t key[32], uint32_t id, uint64_t index,
		       const uint8_t sha[32], uint8_t out[WIRE_SUM_LEN])
	__attribute__((warn_unused_result));

#endif
