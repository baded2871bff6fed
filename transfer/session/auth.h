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

#include "transfer/wire/wire.h"
#include "util/aead.h"

/* Which side a MAC proves: each has its own label, so one is no other. */
enum auth_side {
	AUTH_SERVER,
	AUTH_CLIENT,
};

/*
 * The MAC that side sends for the session h opens and the receiver's
 * WELCOME w answers (its nonce, and the lanes and rails it agreed on),
 * under the pre-shared key (KEY_LEN bytes). Returns 0 with mac filled, or
 * -EIO.
 */
int auth_mac(const uint8_t *key, enum auth_side side,
	     const struct wire_hello *h, const struct wire_welcome *w,
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

/*
 * ---- the control channel (protocol 3) ----
 *
 * After the handshake each control message carries a tag (wire.h): the
 * first WIRE_TAG_LEN bytes of HMAC-SHA256(Kc, dir u32 || seq u64 || the
 * message up to its tag), all big-endian, where Kc is the session's
 * control key and seq counts the tagged messages sent in direction dir,
 * from 0. A message dropped, replayed, reordered, injected or changed in
 * flight fails the receiver's check.
 */
#define AUTH_CTRL_KEY_LEN 32

/* Who sent a control message: the two directions never share a seq. */
enum auth_dir {
	AUTH_DIR_TO_SERVER = 1, /* the client's messages */
	AUTH_DIR_TO_CLIENT = 2, /* the receiver's */
};

/*
 * The control key of the session h opens with nonce_s: HKDF-SHA256 of the
 * pre-shared key, salted with both nonces, with a label of its own (not
 * the data key's). Returns 0 with out filled (the caller cleanses it), or
 * a negative errno.
 */
int auth_ctrl_key(const uint8_t *key, const struct wire_hello *h,
		  const uint8_t *nonce_s, uint8_t out[AUTH_CTRL_KEY_LEN])
	__attribute__((warn_unused_result));

/*
 * The tag of the len-byte message msg, the seq-th tagged one in direction
 * dir, under the control key ck. Returns 0 with tag filled, or -EIO.
 */
int auth_ctrl_tag(const uint8_t ck[AUTH_CTRL_KEY_LEN], enum auth_dir dir,
		  uint64_t seq, const uint8_t *msg, size_t len,
		  uint8_t tag[WIRE_TAG_LEN]) __attribute__((warn_unused_result));

/* Whether a received tag is the one expected, in constant time. */
bool auth_tag_equal(const uint8_t want[WIRE_TAG_LEN],
		    const uint8_t got[WIRE_TAG_LEN]);

/*
 * ---- lanes (--streams) ----
 *
 * Lane k (1..n-1) of a session joins with the token of the receiver's
 * WELCOME and a proof: the first CM_PROOF_LEN (16) bytes of
 * HMAC-SHA256(Kl, token || k u16 || n u16), big-endian, where Kl is
 * HKDF-SHA256 of the pre-shared key salted with both nonces under the
 * label "rdcp3 lane key"; a fallback join (cm.h struct cm_join: the lane's
 * rail was dropped, it joins rail 0) appends a byte 1 to the HMAC's input,
 * so its proof differs from the first attempt's. Without a key (--no-auth)
 * the proof is zero and the token alone names the session. Returns 0 with
 * proof filled, or -errno.
 */
int auth_lane_proof(const uint8_t *key, const struct wire_hello *h,
		    const uint8_t *nonce_s, const uint8_t *token,
		    unsigned int lane, unsigned int n, bool fallback,
		    uint8_t *proof) __attribute__((warn_unused_result));

/* Whether two lane proofs are equal, in constant time. */
bool auth_proof_equal(const uint8_t *want, const uint8_t *got);

#endif
