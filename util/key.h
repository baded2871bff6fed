/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Pre-shared key files: 32 random bytes written as 64 hex digits and a
 * newline, mode 0600; a client's named key (rdcp --keygen --name) has a
 * second line "name NAME", which its copies on both sides share. A key file that group or others can read is refused,
 * as ssh refuses a private key. Also the HMAC-SHA256 and constant-time
 * comparison the authentication needs (OpenSSL).
 */
#ifndef RDCP_KEY_H
#define RDCP_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEY_LEN 32
#define KEY_MAC_LEN 32
#define KEY_NAME_MAX 64 /* bytes of a client's name, [A-Za-z0-9._-] */

/*
 * Whether name is a client's name: 1..KEY_NAME_MAX bytes of A-Z a-z 0-9
 * '.' '_' '-', not "." or "..", and not "site-key" (the name the
 * receiver gives the holders of its one key). Pure.
 */
bool key_name_valid(const char *name);

/*
 * Writes a new random key to path with mode 0600, and name (a client's,
 * key_name_valid, or NULL) on its second line; never overwrites
 * (-EEXIST). Returns 0 or -errno (logged).
 */
int key_generate(const char *path, const char *name)
	__attribute__((warn_unused_result));

/*
 * Reads the key at path and, when name is not NULL, the client's name its
 * second line gives into name (KEY_NAME_MAX + 1 bytes; "" for a key
 * without one). Returns 0, -ENOENT, -EACCES (readable by group or others:
 * the message names the chmod that fixes it) or -EINVAL (not a key file,
 * or a second line that is not "name NAME" with a valid name); every
 * error is logged.
 */
int key_load(const char *path, uint8_t key[KEY_LEN], char *name)
	__attribute__((warn_unused_result));

/*
 * The first existing default key file: $XDG_CONFIG_HOME/rdcp/key (or
 * ~/.config/rdcp/key), then /etc/rdcp/key. Returns 0 with out filled, or
 * -ENOENT with out set to the first candidate (for messages).
 */
int key_default_path(char *out, size_t outsz);

/* HMAC-SHA256 of the concatenated parts. 0 or -EIO. */
int key_hmac(const uint8_t key[KEY_LEN], const void *const *parts,
	     const size_t *lens, size_t nparts, uint8_t mac[KEY_MAC_LEN])
	__attribute__((warn_unused_result));

/* Constant-time equality of n bytes. */
bool key_equal(const void *a, const void *b, size_t n);

#endif
