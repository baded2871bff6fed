/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Checksums over plain bytes: CRC32 (zlib's, or ISA-L's faster one for the
 * same polynomial; zlib's crc32_combine folds per-chunk
 * CRCs fold into a per-file CRC) and SHA-256 through the OpenSSL EVP
 * interface, one-shot or incremental. OpenSSL failures are logged here and
 * reported as -EIO; callers only see errno values.
 */
#include "util/checksum.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <zlib.h>
#ifdef RDCP_HAVE_ISAL
#include <isa-l/crc.h>
#endif

/* zlib takes uInt lengths; feed it in pieces no larger than this. */
#define CK_CRC_STEP ((size_t)1 << 30)

struct ck_sha256 {
	EVP_MD_CTX *md;
};

bool ck_crc32_is_isal(void)
{
#ifdef RDCP_HAVE_ISAL
	return true;
#else
	return false;
#endif
}

/*
 * The same CRC-32 as zlib's crc32() (gzip polynomial, reflected): with
 * Intel ISA-L's crc32_gzip_refl (PCLMULQDQ, ~3.5x zlib 1.2.13 here) when
 * built with it, else zlib's table-driven one.
 */
uint32_t ck_crc32(uint32_t crc, const void *buf, size_t len)
{
#ifdef RDCP_HAVE_ISAL
	return crc32_gzip_refl(crc, buf, len);
#else
	const unsigned char *p = buf;
	uLong c = crc;

	while (len) {
		size_t n = len < CK_CRC_STEP ? len : CK_CRC_STEP;

		c = crc32(c, p, (uInt)n);
		p += n;
		len -= n;
	}
	return (uint32_t)c;
#endif
}

uint32_t ck_crc32_zeros(uint64_t len)
{
	static const uint8_t zero[4096];
	uint32_t crc = ck_crc32(0, zero, len % sizeof(zero));
	uint32_t blk = ck_crc32(0, zero, sizeof(zero)); /* of blen zeros */
	uint64_t blen = sizeof(zero);

	/* the rest by doubling: a block of blen zeros for each bit of n */
	for (uint64_t n = len / sizeof(zero); n; n >>= 1) {
		if (n & 1)
			crc = ck_crc32_combine(crc, blk, blen);
		if (n > 1) {
			blk = ck_crc32_combine(blk, blk, blen);
			blen *= 2;
		}
	}
	return crc;
}

uint32_t ck_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	const uint64_t step = sizeof(z_off_t) >= 8 ? (uint64_t)INT64_MAX
						   : (uint64_t)INT32_MAX;
	uLong a = crc_a;

	/*
	 * crc32_combine(a, b, n) is shift(a, n) ^ b, so with a z_off_t too
	 * narrow for len_b, shift a by zeros first and combine the rest.
	 */
	while (len_b > step) {
		a = crc32_combine(a, 0, (z_off_t)step);
		len_b -= step;
	}
	return (uint32_t)crc32_combine(a, crc_b, (z_off_t)len_b);
}

static int ssl_err(const char *what)
{
	unsigned long e = ERR_get_error();
	char msg[256];

	if (e) {
		ERR_error_string_n(e, msg, sizeof(msg));
		log_err("sha256: %s failed: %s", what, msg);
	} else {
		log_err("sha256: %s failed", what);
	}
	ERR_clear_error();
	return -EIO;
}

uint64_t ck_fnv1a64(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

int ck_sha256(const void *buf, size_t len, uint8_t out[CK_SHA256_LEN])
{
	unsigned int n = 0;

	if (!EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL))
		return ssl_err("EVP_Digest");
	if (n != CK_SHA256_LEN) {
		log_err("sha256: digest length %u", n);
		return -EIO;
	}
	return 0;
}

int ck_sha256_create(struct ck_sha256 **out)
{
	struct ck_sha256 *ctx;

	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->md = EVP_MD_CTX_new();
	if (!ctx->md) {
		free(ctx);
		return -ENOMEM;
	}
	if (!EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL)) {
		int ret = ssl_err("EVP_DigestInit_ex");

		ck_sha256_destroy(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

int ck_sha256_update(struct ck_sha256 *ctx, const void *buf, size_t len)
{
	if (!len)
		return 0;
	if (!EVP_DigestUpdate(ctx->md, buf, len))
		return ssl_err("EVP_DigestUpdate");
	return 0;
}

int ck_sha256_final(struct ck_sha256 *ctx, uint8_t out[CK_SHA256_LEN])
{
	unsigned int n = 0;

	if (!EVP_DigestFinal_ex(ctx->md, out, &n))
		return ssl_err("EVP_DigestFinal_ex");
	if (!EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL))
		return ssl_err("EVP_DigestInit_ex");
	if (n != CK_SHA256_LEN) {
		log_err("sha256: digest length %u", n);
		return -EIO;
	}
	return 0;
}

void ck_sha256_destroy(struct ck_sha256 *ctx)
{
	if (!ctx)
		return;
	EVP_MD_CTX_free(ctx->md);
	free(ctx);
}

char *checksum_hex(const uint8_t *digest, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[digest[i] >> 4];
		out[2 * i + 1] = hex[digest[i] & 0xf];
	}
	out[2 * n] = '\0';
	return out;
}
