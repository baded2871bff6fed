/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Key files and HMAC for peer authentication; see key.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "util/checksum.h"
#include "util/io.h"
#include "util/key.h"
#include "util/log.h"

bool key_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > KEY_NAME_MAX || !strcmp(name, ".") ||
	    !strcmp(name, "..") || !strcmp(name, "site-key"))
		return false;
	return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

int key_generate(const char *path, const char *name)
{
	uint8_t key[KEY_LEN];
	char hex[2 * KEY_LEN + 2 + KEY_NAME_MAX + 8];
	int fd, rc;

	if (name && !key_name_valid(name)) {
		log_err("'%s' is no client name (1 to %d of A-Z a-z 0-9 . _ -, "
			"not \"site-key\")",
			name, KEY_NAME_MAX);
		return -EINVAL;
	}

	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key)) {
		rc = -errno;
		log_err("cannot get random bytes: %s", strerror(errno));
		return rc;
	}
	checksum_hex(key, sizeof(key), hex);
	strcat(hex, "\n");
	if (name) {
		strcat(hex, "name ");
		strcat(hex, name);
		strcat(hex, "\n");
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		log_err("cannot create key file '%s': %s%s", path,
			strerror(errno),
			errno == EEXIST ? " (remove it first to replace it)"
					: "");
		return rc;
	}
	rc = io_write_full(fd, hex, strlen(hex));
	if (!rc)
		rc = fsync(fd) < 0 ? -errno : 0;
	if (!rc)
		rc = io_close(fd);
	else
		close(fd);
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(hex, sizeof(hex));
	if (rc) {
		unlink(path);
		log_err("cannot write key file '%s': %s", path, strerror(-rc));
	}
	return rc;
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * What follows a key file's 64 hex digits: nothing, a newline, or a
 * newline and "name NAME" (and a newline). 0 with name filled ("" for
 * none; name may be NULL), or -EINVAL (logged).
 */
static int key_tail(const char *path, const char *t, char *name)
{
	size_t n;

	if (name)
		name[0] = '\0';
	if (*t == '\r')
		t++;
	if (!*t || (*t == '\n' && !t[1]))
		return 0;
	if (*t == '\n' && !strncmp(t + 1, "name ", 5)) {
		t += 6;
		n = strcspn(t, "\r\n");
		if (n <= KEY_NAME_MAX && !t[n + strspn(t + n, "\r\n")]) {
			char nm[KEY_NAME_MAX + 1];

			memcpy(nm, t, n);
			nm[n] = '\0';
			if (key_name_valid(nm)) {
				if (name)
					memcpy(name, nm, n + 1);
				return 0;
			}
		}
		log_err("key file '%s': line 2 names no valid client (1 to %d "
			"of A-Z a-z 0-9 . _ -, not \"site-key\")",
			path, KEY_NAME_MAX);
		return -EINVAL;
	}
	log_err("key file '%s': after the key, only a line \"name NAME\" may "
		"follow",
		path);
	return -EINVAL;
}

int key_load(const char *path, uint8_t key[KEY_LEN], char *name)
{
	char buf[2 * KEY_LEN + KEY_NAME_MAX + 16];
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	/* O_NONBLOCK: a FIFO is refused below, not waited on. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		log_err("cannot read key file '%s': %s%s", path,
			strerror(errno),
			errno == ENOENT ? " (create one: rdcp --keygen FILE, "
					  "and copy it to the peer)"
					: "");
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		log_err("key file '%s' is not a regular file", path);
	} else if (st.st_mode & 077) {
		rc = -EACCES;
		log_err("key file '%s' is readable by others (mode %03o): "
			"run 'chmod 600 %s'",
			path, (unsigned int)(st.st_mode & 0777), path);
	}
	if (rc) {
		close(fd);
		return rc;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	if (n < 2 * KEY_LEN) {
		log_err("key file '%s' holds no key (expected %d hex digits; "
			"make one with rdcp --keygen)",
			path, 2 * KEY_LEN);
		return -EINVAL;
	}
	for (int i = 0; i < KEY_LEN; i++) {
		int hi = unhex(buf[2 * i]), lo = unhex(buf[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			log_err("key file '%s' is not %d hex digits", path,
				2 * KEY_LEN);
			rc = -EINVAL;
			break;
		}
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	if (!rc)
		rc = key_tail(path, buf + 2 * KEY_LEN, name);
	OPENSSL_cleanse(buf, sizeof(buf));
	return rc;
}

int key_default_path(char *out, size_t outsz)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	char first[4096] = "";

	if (xdg && xdg[0])
		snprintf(first, sizeof(first), "%s/rdcp/key", xdg);
	else if (home && home[0])
		snprintf(first, sizeof(first), "%s/.config/rdcp/key", home);
	if (first[0] && access(first, F_OK) == 0) {
		snprintf(out, outsz, "%s", first);
		return 0;
	}
	if (access("/etc/rdcp/key", F_OK) == 0) {
		snprintf(out, outsz, "/etc/rdcp/key");
		return 0;
	}
	snprintf(out, outsz, "%s", first[0] ? first : "/etc/rdcp/key");
	return -ENOENT;
}

int key_hmac(const uint8_t key[KEY_LEN], const void *const *parts,
	     const size_t *lens, size_t nparts, uint8_t mac[KEY_MAC_LEN])
{
	/* EVP_MAC (OpenSSL 3): HMAC_CTX is deprecated there. */
	EVP_MAC *m = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *c = m ? EVP_MAC_CTX_new(m) : NULL;
	OSSL_PARAM params[2] = {
		OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	size_t outl = 0;
	int ok;

	ok = c && EVP_MAC_init(c, key, KEY_LEN, params);
	for (size_t i = 0; ok && i < nparts; i++)
		ok = EVP_MAC_update(c, parts[i], lens[i]);
	ok = ok && EVP_MAC_final(c, mac, &outl, KEY_MAC_LEN) &&
	     outl == KEY_MAC_LEN;
	EVP_MAC_CTX_free(c);
	EVP_MAC_free(m);
	if (!ok) {
		log_err("HMAC-SHA256 failed in OpenSSL");
		return -EIO;
	}
	return 0;
}

bool key_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}
