/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Authenticated encryption of chunk payloads: AES-256-GCM in place with a
 * 16-byte tag, and HKDF-SHA256 (RFC 5869) to derive session keys from the
 * pre-shared key, both through OpenSSL 3 EVP. Knows nothing of chunks or
 * the wire format: the caller supplies the associated data (its chunk
 * header fields) and a direction and sequence number that together must
 * never repeat under one key.
 */
#ifndef RDCP_AEAD_H
#define RDCP_AEAD_H

#include <stddef.h>
#include <stdint.h>

#define AEAD_KEY_LEN 32
#define AEAD_TAG_LEN 16
#define AEAD_IV_LEN 12
/* RFC 5869: at most 255 hash lengths of output. */
#define AEAD_HKDF_MAX_LEN (255 * 32)

/*
 * HKDF-SHA256: out = HKDF(ikm, salt, info), outlen bytes (1 to
 * AEAD_HKDF_MAX_LEN). salt may be NULL with saltlen 0 (RFC 5869 then uses
 * a hash length of zeros); info is a NUL-terminated label, NULL for none.
 * Returns 0, -EINVAL (outlen out of range) or -EIO (OpenSSL failure);
 * every error is logged.
 */
int aead_hkdf(const uint8_t *ikm, size_t ikmlen, const uint8_t *salt,
	      size_t saltlen, const char *info, uint8_t *out, size_t outlen)
	__attribute__((warn_unused_result));

/*
 * One AES-256-GCM key with its OpenSSL cipher contexts, set up once so that
 * each seal/open only loads a new IV. A struct aead is not thread-safe: use
 * one per thread. Several may be created from the same key; they then seal
 * and open each other's messages.
 */
struct aead;

/*
 * Creates *out for key (copied; the caller may wipe its own copy). Returns
 * 0, -ENOMEM or -EIO (OpenSSL failure, logged); *out is NULL on error.
 */
int aead_create(const uint8_t key[AEAD_KEY_LEN], struct aead **out)
	__attribute__((warn_unused_result));

/* Frees a and wipes its key material. NULL is fine. */
void aead_destroy(struct aead *a);

/*
 * Encrypts buf[0..len) in place and writes the tag. The IV is dir as 4
 * bytes big-endian followed by seq as 8 bytes big-endian, so the two
 * directions under one key never share an IV; the caller must never reuse
 * a (dir, seq) pair under one key. aad/aadlen is authenticated but not
 * encrypted (aad may be NULL when aadlen is 0); len may be 0 (buf may then
 * be NULL). Returns 0 or -EIO (OpenSSL failure, logged).
 */
int aead_seal(struct aead *a, uint32_t dir, uint64_t seq, const void *aad,
	      size_t aadlen, uint8_t *buf, size_t len,
	      uint8_t tag[AEAD_TAG_LEN]) __attribute__((warn_unused_result));

/*
 * Decrypts buf[0..len) in place and checks tag over the ciphertext and aad,
 * with the IV built as for aead_seal. Returns 0; -EBADMSG when the tag does
 * not verify (not logged: the caller knows which message it was; buf is
 * then zeroed so unauthenticated plaintext is never used); -EIO on an
 * OpenSSL failure (logged).
 */
int aead_open(struct aead *a, uint32_t dir, uint64_t seq, const void *aad,
	      size_t aadlen, uint8_t *buf, size_t len,
	      const uint8_t tag[AEAD_TAG_LEN])
	__attribute__((warn_unused_result));

/*
 * aead_open from in[0..len) into out (distinct buffers of len bytes): the
 * plaintext and its check are made in memory nobody else can write, when
 * in can be (a ring slot the peer writes to). Same contract otherwise.
 */
int aead_open_to(struct aead *a, uint32_t dir, uint64_t seq, const void *aad,
		 size_t aadlen, const uint8_t *in, uint8_t *out, size_t len,
		 const uint8_t tag[AEAD_TAG_LEN]) __attribute__((warn_unused_result));

/*
 * For tests: aead_seal and aead_open with a raw 12-byte IV, to check
 * published AES-GCM vectors. Same contracts as above.
 */
int aead_seal_iv(struct aead *a, const uint8_t iv[AEAD_IV_LEN], const void *aad,
		 size_t aadlen, uint8_t *buf, size_t len,
		 uint8_t tag[AEAD_TAG_LEN]) __attribute__((warn_unused_result));
int aead_open_iv(struct aead *a, const uint8_t iv[AEAD_IV_LEN], const void *aad,
		 size_t aadlen, uint8_t *buf, size_t len,
		 const uint8_t tag[AEAD_TAG_LEN])
	__attribute__((warn_unused_result));

#endif
