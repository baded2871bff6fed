/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A receiver's named client keys, one file each; see key_dir.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "util/key_dir.h"
#include "util/log.h"

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct key_client *)a)->name,
		      ((const struct key_client *)b)->name);
}

/* DIR/NAME.key: its client's key into c. 0 or -errno (logged). */
static int load_one(const char *dir, const char *file, struct key_client *c)
{
	size_t len = strlen(file) - 4; /* without ".key" */
	char path[4096], want[KEY_NAME_MAX + 1];
	int rc;

	if (len > KEY_NAME_MAX) {
		log_err("client key '%s/%s': the name is longer than %d bytes",
			dir, file, KEY_NAME_MAX);
		return -EINVAL;
	}
	memcpy(want, file, len);
	want[len] = '\0';
	if (!key_name_valid(want)) {
		log_err("client key '%s/%s': '%s' is no client name (1 to %d "
			"of A-Z a-z 0-9 . _ -, not \"site-key\")",
			dir, file, want, KEY_NAME_MAX);
		return -EINVAL;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >=
	    sizeof(path)) {
		log_err("client key '%s/%s': path too long", dir, file);
		return -ENAMETOOLONG;
	}
	rc = key_load(path, c->key, c->name);
	if (rc)
		return rc;
	if (strcmp(c->name, want)) {
		log_err("client key '%s' %s%s%s: make it with 'rdcp --keygen "
			"--name %s', or name the file after its client",
			path, c->name[0] ? "names client '" : "names no client",
			c->name, c->name[0] ? "'" : "", want);
		return -EINVAL;
	}
	return 0;
}

int key_dir_load(const char *dir, struct key_dir *out)
{
	struct key_dir d = { 0 };
	size_t cap = 0;
	struct dirent *de;
	DIR *dp;
	int rc = 0;

	*out = (struct key_dir){ 0 };
	dp = opendir(dir);
	if (!dp) {
		rc = -errno;
		log_err("cannot read the client keys in '%s': %s", dir,
			strerror(errno));
		return rc;
	}
	while (!rc && (errno = 0, de = readdir(dp))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len <= 4 ||
		    strcmp(de->d_name + len - 4, ".key"))
			continue;
		if (d.n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			struct key_client *v = realloc(d.v, ncap * sizeof(*v));

			if (!v) {
				rc = -ENOMEM;
				break;
			}
			d.v = v;
			cap = ncap;
		}
		rc = load_one(dir, de->d_name, &d.v[d.n]);
		if (!rc)
			d.n++;
	}
	if (!rc && errno) {
		rc = -errno;
		log_err("cannot read the client keys in '%s': %s", dir,
			strerror(errno));
	}
	closedir(dp);
	if (rc) {
		if (d.v)
			OPENSSL_cleanse(d.v, cap * sizeof(*d.v));
		free(d.v);
		return rc;
	}
	if (d.n)
		qsort(d.v, d.n, sizeof(*d.v), by_name);
	*out = d;
	return 0;
}

const uint8_t *key_dir_find(const struct key_dir *d, const char *name)
{
	struct key_client k;
	const struct key_client *c;

	if (!d || !d->n || strlen(name) > KEY_NAME_MAX)
		return NULL;
	snprintf(k.name, sizeof(k.name), "%s", name);
	c = bsearch(&k, d->v, d->n, sizeof(*d->v), by_name);
	return c ? c->key : NULL;
}

void key_dir_release(struct key_dir *d)
{
	if (d->v)
		OPENSSL_cleanse(d->v, d->n * sizeof(*d->v));
	free(d->v);
	*d = (struct key_dir){ 0 };
}
