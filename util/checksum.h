/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Checksums: zlib CRC32 (per chunk, combined per file) and SHA-256 through
 * OpenSSL EVP. Knows nothing of chunks or files, only bytes.
 */
#ifndef RDCP_CHECKSUM_H
#define RDCP_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CK_SHA256_LEN 32

/* Whether ck_crc32 is ISA-L's (this build has it), else zlib's. */
bool ck_crc32_is_isal(void);

/* CRC32 of buf continuing from crc (start with 0). Any length. */
uint32_t ck_crc32(uint32_t crc, const void *buf, size_t len);

/* CRC32 of A||B given crc(A), crc(B) and the length of B in bytes. */
uint32_t ck_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* CRC32 of len zero bytes, in O(log len) combines. */
uint32_t ck_crc32_zeros(uint64_t len);

/*
 * 64-bit FNV-1a of len bytes: a fast, allocation-free hash for tables and
 * names, not a defence against chosen collisions.
 */
uint64_t ck_fnv1a64(const void *buf, size_t len);

/* One-shot SHA-256. Returns 0 or -ENOMEM/-EIO (OpenSSL failure, logged). */
int ck_sha256(const void *buf, size_t len, uint8_t out[CK_SHA256_LEN])
	__attribute__((warn_unused_result));

/* Incremental SHA-256; the context is heap-allocated (EVP_MD_CTX). */
struct ck_sha256;
int ck_sha256_create(struct ck_sha256 **out)
	__attribute__((warn_unused_result));
int ck_sha256_update(struct ck_sha256 *ctx, const void *buf, size_t len)
	__attribute__((warn_unused_result));
/* Writes the digest and resets ctx for reuse. */
int ck_sha256_final(struct ck_sha256 *ctx, uint8_t out[CK_SHA256_LEN])
	__attribute__((warn_unused_result));
void ck_sha256_destroy(struct ck_sha256 *ctx); /* NULL is fine */

/* Lowercase hex of n bytes into out (2n+1 bytes incl. NUL). Returns out. */
char *checksum_hex(const uint8_t *digest, size_t n, char *out);

#endif
