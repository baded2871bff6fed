/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The shared file helpers of testfs.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testfs.h"

int tf_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own descriptor */
}

static int rm_one(const char *p, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(p);
}

int tf_rm_tree(const char *dir)
{
	struct stat st;

	if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS))
		return -1;
	return stat(dir, &st) < 0 && errno == ENOENT ? 0 : -1;
}

uint64_t tf_rng_next(uint64_t *s)
{
	/* xorshift64*: reproducible file contents */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* Writes size pseudo-random bytes (seeded) to path. */
int tf_make_file(const char *path, size_t size, uint64_t seed)
{
	uint8_t buf[8192];
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	while (size) {
		size_t n = size < sizeof(buf) ? size : sizeof(buf);

		for (size_t i = 0; i < n; i += 8) {
			uint64_t v = tf_rng_next(&s);

			memcpy(buf + i, &v, n - i < 8 ? n - i : 8);
		}
		if (write(fd, buf, n) != (ssize_t)n) {
			close(fd);
			return -1;
		}
		size -= n;
	}
	return close(fd);
}

/* 1: same bytes, 0: different, -1: one of them cannot be read. */
int tf_same_file(const char *a, const char *b)
{
	static uint8_t ba[65536], bb[65536];
	int fa = open(a, O_RDONLY | O_CLOEXEC);
	int fb = open(b, O_RDONLY | O_CLOEXEC);
	int same = -1;

	if (fa < 0 || fb < 0)
		goto out;
	for (;;) {
		ssize_t na = read(fa, ba, sizeof(ba));
		ssize_t nb = na > 0 ? read(fb, bb, (size_t)na) : read(fb, bb, 1);

		if (na < 0 || nb < 0)
			goto out;
		if (na != nb || memcmp(ba, bb, (size_t)na)) {
			same = 0;
			goto out;
		}
		if (!na) {
			same = 1;
			goto out;
		}
	}
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return same;
}

bool tf_exists_in(const char *dir, const char *rel)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

bool tf_same_in(const char *a, const char *ra, const char *b, const char *rb)
{
	char pa[600], pb[600];

	snprintf(pa, sizeof(pa), "%s/%s", a, ra);
	snprintf(pb, sizeof(pb), "%s/%s", b, rb);
	return tf_same_file(pa, pb) == 1;
}

int tf_count_named(const char *dir, const char *what)
{
	char cmd[700];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 -name '*%s*' | wc -l",
		 dir, what);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (fscanf(p, "%d", &n) != 1)
		n = -1;
	pclose(p);
	return n;
}

int tf_write_text(const char *path, const char *text, unsigned int mode)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f)
		return -1;
	rc = fputs(text, f) < 0 ? -1 : 0;
	if (fclose(f))
		rc = -1;
	if (!rc && chmod(path, (mode_t)mode))
		rc = -1;
	return rc;
}
