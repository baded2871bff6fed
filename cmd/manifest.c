/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* --manifest FILE (manifest.h): names spooled during the copy, digests
 * after it, the file written beside FILE and renamed onto it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/manifest.h"
#include "util/checksum.h"
#include "util/log.h"

#define MANIFEST_BUF (1u << 20)

int manifest_open(struct manifest *m, const char *path, bool sha256)
{
	*m = (struct manifest){ .path = path, .sha256 = sha256 };
	m->spool = tmpfile();
	if (!m->spool) {
		int rc = -errno;

		log_err("cannot make a spool file for '%s': %s", path,
			strerror(-rc));
		return rc;
	}
	return 0;
}

void manifest_note(struct manifest *m, const struct xfer_file_report *r)
{
	const char *name = r->name ? r->name : r->path;

	/* -H: another name of a file copied is listed too, its bytes */
	if (!r->done || r->status || r->skipped || r->deleted || !r->kind ||
	    (strcmp(r->kind, "file") && strcmp(r->kind, "hardlink")) ||
	    m->err)
		return;
	if (fwrite(r->path, strlen(r->path) + 1, 1, m->spool) != 1 ||
	    fwrite(name, strlen(name) + 1, 1, m->spool) != 1)
		m->err = -(errno ? errno : EIO);
	m->n++;
}

/* The whole-file digest of path as lowercase hex into hex. 0 or -errno. */
static int digest_file(const struct manifest *m, const char *path, uint8_t *buf,
		       struct ck_sha256 *ctx, char *hex)
{
	uint8_t d[CK_SHA256_LEN];
	uint32_t crc = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, MANIFEST_BUF)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (!m->sha256)
			crc = ck_crc32(crc, buf, (size_t)n);
		else if ((rc = ck_sha256_update(ctx, buf, (size_t)n)))
			break;
	}
	close(fd);
	if (!rc && m->sha256)
		rc = ck_sha256_final(ctx, d);
	if (rc)
		return rc;
	if (m->sha256)
		checksum_hex(d, sizeof(d), hex);
	else
		snprintf(hex, 9, "%08x", (unsigned int)crc);
	return 0;
}

/*
 * name as sha256sum writes it: a line with a '\\' or a newline in its name
 * starts with '\\', and those two are escaped.
 */
static void put_name(FILE *out, const char *name)
{
	for (; *name; name++) {
		if (*name == '\\')
			fputs("\\\\", out);
		else if (*name == '\n')
			fputs("\\n", out);
		else
			fputc(*name, out);
	}
}

static void put_line(FILE *out, bool sha256, const char *name, const char *hex)
{
	if (strpbrk(name, "\\\n"))
		fputc('\\', out);
	if (sha256) {
		fprintf(out, "%s  ", hex);
		put_name(out, name);
	} else {
		fputs("CRC32 (", out);
		put_name(out, name);
		fprintf(out, ") = %s", hex);
	}
	fputc('\n', out);
}

/* Reads one NUL-terminated string of the spool. */
static bool spool_get(FILE *spool, char **s, size_t *cap)
{
	return getdelim(s, cap, '\0', spool) > 0;
}

int manifest_finish(struct manifest *m)
{
	char tmp[4096], hex[2 * CK_SHA256_LEN + 1];
	char *local = NULL, *name = NULL;
	size_t lcap = 0, ncap = 0;
	struct ck_sha256 *ctx = NULL;
	uint8_t *buf = malloc(MANIFEST_BUF);
	FILE *out = NULL;
	int fd = -1, rc = m->err, first = 0;

	if (rc) {
		log_err("cannot spool the names for '%s': %s", m->path,
			strerror(-rc));
		goto out;
	}
	rc = !buf ? -ENOMEM : m->sha256 ? ck_sha256_create(&ctx) : 0;
	if (rc)
		goto out;
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", m->path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd >= 0) { /* mkostemp makes it 0600: as any new file instead */
		mode_t um = umask(0);

		umask(um);
		if (fchmod(fd, 0666 & ~um))
			log_warn("manifest '%s': cannot set its mode: %s",
				 m->path, strerror(errno));
	}
	if (fd < 0 || !(out = fdopen(fd, "w"))) {
		rc = -errno;
		log_err("cannot write the manifest '%s': %s", m->path,
			strerror(-rc));
		goto out;
	}
	fd = -1;
	rewind(m->spool);
	while (spool_get(m->spool, &local, &lcap) &&
	       spool_get(m->spool, &name, &ncap)) {
		int e = digest_file(m, local, buf, ctx, hex);

		if (e) {
			log_err("manifest '%s': cannot read '%s': %s", m->path,
				local, strerror(-e));
			first = first ? first : e;
			continue;
		}
		put_line(out, m->sha256, name, hex);
	}
	if (fflush(out) || ferror(out) || fsync(fileno(out))) {
		rc = -(errno ? errno : EIO);
		log_err("cannot write the manifest '%s': %s", m->path,
			strerror(-rc));
	} else if (rename(tmp, m->path)) {
		rc = -errno;
		log_err("cannot rename '%s' to '%s': %s", tmp, m->path,
			strerror(-rc));
	}
	if (rc)
		unlink(tmp);
	else
		rc = first;
out:
	if (out)
		fclose(out);
	if (fd >= 0)
		close(fd);
	ck_sha256_destroy(ctx);
	free(buf);
	free(local);
	free(name);
	return rc;
}

void manifest_release(struct manifest *m)
{
	if (m->spool)
		fclose(m->spool);
	m->spool = NULL;
}
