/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A receiver's named client keys (--clients DIR): one key file per
 * client, DIR/NAME.key, made by rdcp --keygen --name NAME (key.h), whose
 * second line names the same client as the file. Read whole at the start
 * and on each reload; a directory with one bad file is refused whole, so
 * a reload keeps what it had.
 */
#ifndef RDCP_KEY_DIR_H
#define RDCP_KEY_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "util/key.h"

struct key_client {
	char name[KEY_NAME_MAX + 1];
	uint8_t key[KEY_LEN];
};

struct key_dir {
	struct key_client *v; /* sorted by name */
	size_t n;
};

/*
 * Reads every DIR/NAME.key into *out (other names, dot files and
 * subdirectories are left alone). Each is a key file key_load takes whose
 * name line says NAME. Returns 0 (*out owned by the caller:
 * key_dir_release), -ENOMEM, or the first file's error (logged, the file
 * named): a file key_load refuses, or -EINVAL for one whose name line is
 * missing or names another client, or whose NAME is no client's name.
 */
int key_dir_load(const char *dir, struct key_dir *out)
	__attribute__((warn_unused_result));

/* The key of client name, or NULL. */
const uint8_t *key_dir_find(const struct key_dir *d, const char *name);

/* Wipes the keys and frees them; *d is empty after (idempotent). */
void key_dir_release(struct key_dir *d);

#endif
