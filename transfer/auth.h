/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the authentication crypto both ends of a session
 * use. Each side proves it holds the pre-shared key with an HMAC over both
 * handshake nonces and the session's parameters; with --encrypt both derive
 * the same per-session data key from it. Which messages carry these is
 * the handshake's business.
 */
#ifndef RDCP_AUTH_H
#define RDCP_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "transfer/wire.h"
#include "util/aead.h"

/* Which side a MAC proves: each has its own label, so one is no other. */
enum auth_side {
	AUTH_SERVER,
	AUTH_CLIENT,
};

/*
 * The MAC that side sends for the session h opens with the receiver's nonce
 * nonce_s, under the pre-shared key (KEY_LEN bytes). Returns 0 with mac
 * filled, or -EIO.
 */
int auth_mac(const uint8_t *key, enum auth_side side,
	     const struct wire_hello *h, const uint8_t *nonce_s,
	     uint8_t mac[WIRE_MAC_LEN]) __attribute__((warn_unused_result));

/* Whether a received MAC is the one expected, in constant time. */
bool auth_mac_equal(const uint8_t want[WIRE_MAC_LEN],
		    const uint8_t got[WIRE_MAC_LEN]);

/*
 * The AES-256-GCM key of the session h opens with the receiver's nonce
 * nonce_s under the pre-shared key. Returns 0 with out filled (the caller
 * cleanses it after the session), or a negative errno.
 */
int auth_data_key(const uint8_t *key, const struct wire_hello *h,
		  const uint8_t *nonce_s, uint8_t out[AEAD_KEY_LEN])
	__attribute__((warn_unused_result));

#endif
