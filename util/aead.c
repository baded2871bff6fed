/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * AES-256-GCM and HKDF-SHA256 through OpenSSL 3 EVP; see aead.h.
 *
 * A struct aead keeps two cipher contexts, one encrypting and one
 * decrypting, each given the key once in aead_create. A seal or open then
 * re-initialises its context with only the IV (NULL cipher and key), which
 * keeps the expanded AES key and GHASH tables and costs no allocation.
 * Two contexts rather than one switched between directions, so that no
 * call re-keys and none relies on OpenSSL keeping a key across a change of
 * direction. The raw key is not kept: only OpenSSL's key schedules hold
 * it, and EVP_CIPHER_CTX_free cleanses them.
 *
 * OpenSSL failures are logged here and returned as -EIO (-ENOMEM when a
 * context cannot be allocated); a tag that does not verify is -EBADMSG and
 * is left to the caller to report.
 */
#include "util/aead.h"
#include "util/log.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

/* EVP_CipherUpdate takes int lengths: feed it at most this much at once. */
#define AEAD_STEP ((size_t)1 << 30)

_Static_assert(AEAD_IV_LEN == sizeof(uint32_t) + sizeof(uint64_t),
	       "IV is dir (4 bytes) then seq (8 bytes)");
_Static_assert(AEAD_STEP <= INT_MAX, "update step must fit an int");

struct aead {
	EVP_CIPHER_CTX *enc; /* AES-256-GCM, key set, encrypting */
	EVP_CIPHER_CTX *dec; /* AES-256-GCM, key set, decrypting */
};

/* Logs the failed call with OpenSSL's reason, clears its queue: -EIO. */
static int ssl_err(const char *alg, const char *what)
{
	unsigned long e = ERR_get_error();
	char msg[256];

	if (e) {
		ERR_error_string_n(e, msg, sizeof(msg));
		log_err("%s: %s failed: %s", alg, what, msg);
	} else {
		log_err("%s: %s failed", alg, what);
	}
	ERR_clear_error();
	return -EIO;
}

static int gcm_err(const char *what)
{
	return ssl_err("aes-256-gcm", what);
}

int aead_hkdf(const uint8_t *ikm, size_t ikmlen, const uint8_t *salt,
	      size_t saltlen, const char *info, uint8_t *out, size_t outlen)
{
	OSSL_PARAM params[5], *p = params;
	EVP_KDF_CTX *kctx;
	EVP_KDF *kdf;
	int rc = 0;

	if (!outlen || outlen > AEAD_HKDF_MAX_LEN) {
		log_err("hkdf-sha256: output length %zu out of range "
			"(1 to %d bytes)",
			outlen, AEAD_HKDF_MAX_LEN);
		return -EINVAL;
	}
	/* The parameters only point at the inputs; the KDF copies them. */
	*p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						(char *)"SHA256", 0);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
						 (void *)ikm, ikmlen);
	if (saltlen)
		*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
							 (void *)salt, saltlen);
	if (info && info[0])
		*p++ = OSSL_PARAM_construct_octet_string(
			OSSL_KDF_PARAM_INFO, (void *)info, strlen(info));
	*p = OSSL_PARAM_construct_end();

	kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	if (!kdf)
		return ssl_err("hkdf-sha256", "EVP_KDF_fetch");
	kctx = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf); /* kctx holds its own reference */
	if (!kctx) {
		ERR_clear_error();
		return -ENOMEM;
	}
	if (EVP_KDF_derive(kctx, out, outlen, params) <= 0)
		rc = ssl_err("hkdf-sha256", "EVP_KDF_derive");
	EVP_KDF_CTX_free(kctx);
	return rc;
}

/* A new context for AES-256-GCM holding key, encrypting or decrypting. */
static int gcm_ctx_new(const uint8_t key[AEAD_KEY_LEN], int enc,
		       EVP_CIPHER_CTX **out)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int ivlen;

	*out = NULL;
	if (!c) {
		ERR_clear_error();
		return -ENOMEM;
	}
	if (!EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, key, NULL, enc)) {
		EVP_CIPHER_CTX_free(c);
		return gcm_err("EVP_CipherInit_ex");
	}
	ivlen = EVP_CIPHER_CTX_get_iv_length(c);
	if (ivlen != AEAD_IV_LEN) {
		EVP_CIPHER_CTX_free(c);
		log_err("aes-256-gcm: IV length %d, expected %d", ivlen,
			AEAD_IV_LEN);
		return -EIO;
	}
	*out = c;
	return 0;
}

int aead_create(const uint8_t key[AEAD_KEY_LEN], struct aead **out)
{
	struct aead *a;
	int rc;

	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	rc = gcm_ctx_new(key, 1, &a->enc);
	if (!rc)
		rc = gcm_ctx_new(key, 0, &a->dec);
	if (rc) {
		aead_destroy(a);
		return rc;
	}
	*out = a;
	return 0;
}

void aead_destroy(struct aead *a)
{
	if (!a)
		return;
	/* Both cleanse the key schedule they hold. */
	EVP_CIPHER_CTX_free(a->enc);
	EVP_CIPHER_CTX_free(a->dec);
	free(a);
}

/*
 * Runs len bytes through c in steps an int can hold: in place when
 * out == in, associated data when out is NULL.
 */
static int gcm_update(EVP_CIPHER_CTX *c, uint8_t *out, const uint8_t *in,
		      size_t len)
{
	while (len) {
		int n = (int)(len < AEAD_STEP ? len : AEAD_STEP);
		int outl = 0;

		if (!EVP_CipherUpdate(c, out, &outl, in, n))
			return gcm_err("EVP_CipherUpdate");
		if (out && outl != n) {
			log_err("aes-256-gcm: %d of %d bytes processed", outl,
				n);
			return -EIO;
		}
		if (out)
			out += n;
		in += n;
		len -= n;
	}
	return 0;
}

/* Loads iv into c (key and direction kept) and feeds it aad. */
static int gcm_start(EVP_CIPHER_CTX *c, const uint8_t iv[AEAD_IV_LEN],
		     const void *aad, size_t aadlen)
{
	if (!EVP_CipherInit_ex(c, NULL, NULL, NULL, iv, -1))
		return gcm_err("EVP_CipherInit_ex");
	return gcm_update(c, NULL, aad, aadlen);
}

static void build_iv(uint32_t dir, uint64_t seq, uint8_t iv[AEAD_IV_LEN])
{
	uint32_t d = htobe32(dir);
	uint64_t s = htobe64(seq);

	memcpy(iv, &d, sizeof(d));
	memcpy(iv + sizeof(d), &s, sizeof(s));
}

int aead_seal_iv(struct aead *a, const uint8_t iv[AEAD_IV_LEN], const void *aad,
		 size_t aadlen, uint8_t *buf, size_t len,
		 uint8_t tag[AEAD_TAG_LEN])
{
	uint8_t last[16]; /* GCM's final step writes nothing; never NULL */
	int outl = 0, rc;

	rc = gcm_start(a->enc, iv, aad, aadlen);
	if (!rc)
		rc = gcm_update(a->enc, buf, buf, len);
	if (rc)
		return rc;
	if (!EVP_EncryptFinal_ex(a->enc, last, &outl))
		return gcm_err("EVP_EncryptFinal_ex");
	if (!EVP_CIPHER_CTX_ctrl(a->enc, EVP_CTRL_AEAD_GET_TAG, AEAD_TAG_LEN,
				 tag))
		return gcm_err("EVP_CTRL_AEAD_GET_TAG");
	return 0;
}

/* Decrypts in[0..len) into out (in == out: in place), checks tag. */
static int open_iv_to(struct aead *a, const uint8_t iv[AEAD_IV_LEN],
		      const void *aad, size_t aadlen, const uint8_t *in,
		      uint8_t *buf, size_t len, const uint8_t tag[AEAD_TAG_LEN])
{
	uint8_t last[16];
	int outl = 0, rc;

	rc = gcm_start(a->dec, iv, aad, aadlen);
	if (!rc)
		rc = gcm_update(a->dec, buf, in, len);
	if (rc)
		return rc;
	/* OpenSSL only reads the expected tag here. */
	if (!EVP_CIPHER_CTX_ctrl(a->dec, EVP_CTRL_AEAD_SET_TAG, AEAD_TAG_LEN,
				 (void *)tag))
		return gcm_err("EVP_CTRL_AEAD_SET_TAG");
	if (EVP_DecryptFinal_ex(a->dec, last, &outl) <= 0) {
		/* The only way final fails once the tag is set. */
		ERR_clear_error();
		if (len)
			memset(buf, 0, len);
		return -EBADMSG;
	}
	return 0;
}

int aead_open_iv(struct aead *a, const uint8_t iv[AEAD_IV_LEN], const void *aad,
		 size_t aadlen, uint8_t *buf, size_t len,
		 const uint8_t tag[AEAD_TAG_LEN])
{
	return open_iv_to(a, iv, aad, aadlen, buf, buf, len, tag);
}

int aead_seal(struct aead *a, uint32_t dir, uint64_t seq, const void *aad,
	      size_t aadlen, uint8_t *buf, size_t len,
	      uint8_t tag[AEAD_TAG_LEN])
{
	uint8_t iv[AEAD_IV_LEN];

	build_iv(dir, seq, iv);
	return aead_seal_iv(a, iv, aad, aadlen, buf, len, tag);
}

int aead_open(struct aead *a, uint32_t dir, uint64_t seq, const void *aad,
	      size_t aadlen, uint8_t *buf, size_t len,
	      const uint8_t tag[AEAD_TAG_LEN])
{
	uint8_t iv[AEAD_IV_LEN];

	build_iv(dir, seq, iv);
	return aead_open_iv(a, iv, aad, aadlen, buf, len, tag);
}

int aead_open_to(struct aead *a, uint32_t dir, uint64_t seq, const void *aad,
		 size_t aadlen, const uint8_t *in, uint8_t *out, size_t len,
		 const uint8_t tag[AEAD_TAG_LEN])
{
	uint8_t iv[AEAD_IV_LEN];

	build_iv(dir, seq, iv);
	return open_iv_to(a, iv, aad, aadlen, in, out, len, tag);
}
