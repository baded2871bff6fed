/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The authentication crypto of a session, the same on both ends: the
 * HMAC-SHA256 each side proves the pre-shared key with, its constant-time
 * check, and the HKDF of the per-session data key for --encrypt. Which
 * messages carry them, and in what order, is the handshake's business.
 */
#include <endian.h>
#include <string.h>

#include "transfer/session/auth.h"
#include <openssl/crypto.h>

#include "cm/cm.h"
#include "util/key.h"

_Static_assert(AUTH_CTRL_KEY_LEN == KEY_LEN, "HMAC keys are KEY_LEN bytes");
_Static_assert(WIRE_TAG_LEN <= KEY_MAC_LEN, "a tag is a truncated HMAC");

/*
 * The MAC each side proves it holds the key with: HMAC-SHA256 over a label
 * naming the side, both fresh nonces, and the session's parameters as the
 * client sent them, so neither a recorded exchange nor an altered HELLO
 * (another DEST, another role, other filters) passes. The filters' count
 * sits in what were two zero bytes and their bytes follow the paths, so a
 * HELLO without filters has the MAC it had before they existed.
 */
/*
 * The lanes both sides agreed on, as WELCOME states them: HELLO's streams,
 * WELCOME's features, streams, token, rails and each rail's address (so
 * a rewritten one, which would send lanes elsewhere, fails the MAC), then
 * HELLO's sync level when it is not 0 (a man in the middle who sets one
 * would have stale files kept): a HELLO without --sync has the MAC it had
 * before the level existed. Then the client's name, a u8 length and its
 * bytes, only when it has one (as sync: a session of the site's key has
 * the MAC it had before names existed); the receiver proves it with the
 * key of that name, so a name changed in flight, or claimed with another
 * client's key, fails both MACs. Returns the length used of out.
 */
#define LANE_PARAMS_MAX                                                        \
	(9 + WIRE_LANE_TOKEN_LEN + WIRE_STREAMS_MAX * 17 + 1 + WIRE_CLIENT_MAX)

static size_t lane_params(const struct wire_hello *h,
			  const struct wire_welcome *w,
			  uint8_t out[LANE_PARAMS_MAX])
{
	uint32_t features = htobe32(w->features);
	size_t n = 0;

	out[n++] = h->streams;
	memcpy(out + n, &features, 4);
	n += 4;
	out[n++] = w->streams;
	memcpy(out + n, w->token, WIRE_LANE_TOKEN_LEN);
	n += WIRE_LANE_TOKEN_LEN;
	out[n++] = w->rails;
	for (unsigned int r = 1; r < w->rails && r < WIRE_STREAMS_MAX; r++) {
		out[n++] = w->rail[r].family;
		memcpy(out + n, w->rail[r].addr, 16);
		n += 16;
	}
	if (h->sync)
		out[n++] = h->sync;
	if (h->client[0]) {
		size_t len = strnlen(h->client, WIRE_CLIENT_MAX);

		out[n++] = (uint8_t)len;
		memcpy(out + n, h->client, len);
		n += len;
	}
	return n;
}

int auth_mac(const uint8_t *key, enum auth_side side,
	     const struct wire_hello *h, const struct wire_welcome *w,
	     uint8_t mac[WIRE_MAC_LEN])
{
	const char *label =
		side == AUTH_SERVER ? "rdcp1 server" : "rdcp1 client";
	uint8_t params[24];
	uint8_t lanes[LANE_PARAMS_MAX];
	uint16_t role = htobe16(h->role), npaths = htobe16(h->npaths);
	uint16_t nfilters = htobe16(h->nfilters);
	uint32_t chunk = htobe32(h->chunk_size), flags = htobe32(h->flags);
	uint64_t bw = htobe64(h->bwlimit);
	const void *parts[] = { label,	h->nonce,   w->nonce, params,
				h->paths, h->filters, lanes };
	size_t lens[] = { strlen(label) + 1, WIRE_NONCE_LEN,
			  WIRE_NONCE_LEN,    sizeof(params),
			  h->paths_len,	     h->filters_len,
			  lane_params(h, w, lanes) };

	memcpy(params, &role, 2);
	params[2] = h->csum;
	params[3] = h->level;
	memcpy(params + 4, &flags, 4);
	memcpy(params + 8, &chunk, 4);
	memcpy(params + 12, &npaths, 2);
	memcpy(params + 14, &nfilters, 2);
	memcpy(params + 16, &bw, 8);
	return key_hmac(key, parts, lens, 7, mac);
}

/* Constant time, so a forger learns nothing from how long a miss took. */
bool auth_mac_equal(const uint8_t want[WIRE_MAC_LEN],
		    const uint8_t got[WIRE_MAC_LEN])
{
	return key_equal(want, got, WIRE_MAC_LEN);
}

/*
 * The AES-256-GCM key of a session with --encrypt: HKDF-SHA256 of the
 * pre-shared key, salted with both nonces, so every session has its own.
 */
int auth_data_key(const uint8_t *key, const struct wire_hello *h,
		  const uint8_t *nonce_s, uint8_t out[AEAD_KEY_LEN])
{
	uint8_t salt[2 * WIRE_NONCE_LEN];

	memcpy(salt, h->nonce, WIRE_NONCE_LEN);
	memcpy(salt + WIRE_NONCE_LEN, nonce_s, WIRE_NONCE_LEN);
	return aead_hkdf(key, KEY_LEN, salt, sizeof(salt), "rdcp1 data key",
			 out, AEAD_KEY_LEN);
}

int auth_ctrl_key(const uint8_t *key, const struct wire_hello *h,
		  const uint8_t *nonce_s, uint8_t out[AUTH_CTRL_KEY_LEN])
{
	uint8_t salt[2 * WIRE_NONCE_LEN];

	memcpy(salt, h->nonce, WIRE_NONCE_LEN);
	memcpy(salt + WIRE_NONCE_LEN, nonce_s, WIRE_NONCE_LEN);
	return aead_hkdf(key, KEY_LEN, salt, sizeof(salt),
			 "rdcp3 control key", out, AUTH_CTRL_KEY_LEN);
}

int auth_ctrl_tag(const uint8_t ck[AUTH_CTRL_KEY_LEN], enum auth_dir dir,
		  uint64_t seq, const uint8_t *msg, size_t len,
		  uint8_t tag[WIRE_TAG_LEN])
{
	uint32_t d = htobe32((uint32_t)dir);
	uint64_t s = htobe64(seq);
	const void *parts[] = { &d, &s, msg };
	size_t lens[] = { sizeof(d), sizeof(s), len };
	uint8_t mac[KEY_MAC_LEN];
	int rc = key_hmac(ck, parts, lens, 3, mac);

	if (!rc)
		memcpy(tag, mac, WIRE_TAG_LEN);
	return rc;
}

bool auth_tag_equal(const uint8_t want[WIRE_TAG_LEN],
		    const uint8_t got[WIRE_TAG_LEN])
{
	return key_equal(want, got, WIRE_TAG_LEN);
}

int auth_lane_proof(const uint8_t *key, const struct wire_hello *h,
		    const uint8_t *nonce_s, const uint8_t *token,
		    unsigned int lane, unsigned int n, bool fallback,
		    uint8_t *proof)
{
	uint8_t salt[2 * WIRE_NONCE_LEN], kl[KEY_LEN], mac[KEY_MAC_LEN];
	uint8_t ln[5] = { (uint8_t)(lane >> 8), (uint8_t)lane,
			  (uint8_t)(n >> 8), (uint8_t)n, 1 };
	const void *parts[] = { token, ln };
	size_t lens[] = { CM_TOKEN_LEN, fallback ? 5 : 4 };
	int rc;

	memset(proof, 0, CM_PROOF_LEN);
	if (!key)
		return 0;
	memcpy(salt, h->nonce, WIRE_NONCE_LEN);
	memcpy(salt + WIRE_NONCE_LEN, nonce_s, WIRE_NONCE_LEN);
	rc = aead_hkdf(key, KEY_LEN, salt, sizeof(salt), "rdcp3 lane key", kl,
		       sizeof(kl));
	if (!rc)
		rc = key_hmac(kl, parts, lens, 2, mac);
	if (!rc)
		memcpy(proof, mac, CM_PROOF_LEN);
	OPENSSL_cleanse(kl, sizeof(kl));
	OPENSSL_cleanse(mac, sizeof(mac));
	return rc;
}

bool auth_proof_equal(const uint8_t *want, const uint8_t *got)
{
	return key_equal(want, got, CM_PROOF_LEN);
}
