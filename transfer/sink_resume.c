/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's side of --resume and of the questions a source asks first
 * (--no-clobber, --update): what is already here. The engine thread finds
 * what an earlier attempt left (its temporary, else the old file); a
 * worker hashes it chunk by chunk; HAVE tells the source the CRC32 of
 * each, and only the chunks that differ cross the link. At finalize, the
 * chunks that were not resent are copied from the old file, each checked
 * again, and all-zero chunks the source skipped get their digests.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/place.h"
#include "transfer/sink_int.h"
#include "util/checksum.h"
#include "util/io.h"
#include "util/log.h"

/*
 * --resume: what an earlier attempt left, the temporary first, else the
 * old file. Returns true when there is something to scan.
 */
bool sink_resume_find(struct sink *k, struct snk_file *f)
{
	if (!sink_resuming(k) || f->err)
		return false;
	f->cand = place_open_regular(f->dirfd, f->n.tmp);
	if (f->cand >= 0)
		return true; /* the temporary itself: keep what it holds */
	f->cand = place_open_regular(f->dirfd, f->n.name);
	if (f->cand >= 0) {
		f->cand_final = true;
		return true;
	}
	f->cand = -1;
	return false;
}

/* The CRCs of chunks [0, have_n), in as many HAVEs as it takes. */
int sink_send_have(struct sink *k, struct snk_file *f)
{
	struct wire_msg m = { .type = WIRE_HAVE };
	uint64_t i = 0;
	int rc;

	m.u.have.file_id = f->id;
	do {
		uint64_t n = f->have_n - i;

		if (n > WIRE_HAVE_MAX)
			n = WIRE_HAVE_MAX;
		m.u.have.first = i;
		m.u.have.count = (uint16_t)n;
		memcpy(m.u.have.crcs, f->crcs + i, n * sizeof(uint32_t));
		i += n;
		m.u.have.flags = i == f->have_n ? WIRE_HAVE_LAST : 0;
		rc = engine_send(k->e, &m);
	} while (!rc && i < f->have_n);
	return rc;
}

/* Worker, --resume: hash what is there, chunk by chunk. */
static void scan(struct workq_item *item)
{
	struct snk_work *w = (struct snk_work *)item;
	struct snk_file *f = w->f;
	struct sink *k = w->k;
	struct stat st;
	uint8_t *buf = malloc(k->chunk);
	int rc = 0;

	if (!buf || fstat(f->cand, &st) < 0) {
		file_fail(f, buf ? -errno : -ENOMEM, "cannot read '%s': %s",
			  f->n.shown, strerror(buf ? errno : ENOMEM));
		free(buf);
		return;
	}
	for (uint64_t i = 0; !rc && i < f->nslots; i++) {
		uint64_t off = i * k->chunk, len = f->size - off;

		if (len > k->chunk)
			len = k->chunk;
		if (off + len > (uint64_t)st.st_size)
			break;
		rc = io_pread_full(f->cand, buf, len, off);
		if (rc)
			break;
		f->crcs[i] = ck_crc32(0, buf, len);
		if (f->shas)
			rc = ck_sha256(buf, len, f->shas + i * CK_SHA256_LEN);
		f->have_n = i + 1;
	}
	free(buf);
	if (rc && rc != -ENODATA)
		file_fail(f, rc, "cannot read '%s': %s", f->n.shown,
			  strerror(-rc));
	f->cand_size = (uint64_t)st.st_size;
	/* Either way the temporary now gets the announced size. */
	if (!f->err && ftruncate(f->fd, (off_t)f->size) < 0)
		file_fail(f, -errno, "cannot size '%s': %s", f->n.shown,
			  strerror(errno));
}

/* The engine thread: the scan is done; tell the source what is here. */
static void scanned(struct workq_item *item)
{
	struct snk_work *w = (struct snk_work *)item;
	struct snk_file *f = w->f;
	struct sink *k = w->k;

	f->scanning = false;
	if (!f->cand_final && f->cand >= 0) {
		/* The temporary was read; f->fd is all it needs now. */
		close(f->cand);
		f->cand = -1;
	}
	if (f->have_n)
		log_info("resuming '%s': %llu of %llu chunks already here, "
			 "checking them against the source",
			 f->n.shown, (unsigned long long)f->have_n,
			 (unsigned long long)f->nslots);
	if (f->err)
		sink_skip_file(k, f);
	else
		sink_send_have(k, f);
}

void sink_resume_scan(struct sink *k, struct snk_file *f)
{
	f->scanning = true;
	sink_start_work(k, f, scan, scanned);
}

/* --resume: the digests of the all-zero chunks beyond what was here. */
int sink_resume_zeros(struct snk_work *fin)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	uint8_t *zero = NULL;
	uint32_t crc = 0;
	uint8_t sha[CK_SHA256_LEN];
	int rc = 0;

	for (uint64_t i = f->have_n; !rc && i < f->nslots; i++) {
		uint64_t len = f->size - i * k->chunk;

		if (f->got[i])
			continue;
		if (len > k->chunk)
			len = k->chunk;
		if (!zero) {
			zero = calloc(1, k->chunk);
			if (!zero)
				return -ENOMEM;
		}
		if (len == k->chunk && crc) {
			f->crcs[i] = crc; /* the full-chunk one, once */
			if (f->shas)
				memcpy(f->shas + i * CK_SHA256_LEN, sha,
				       CK_SHA256_LEN);
			continue;
		}
		f->crcs[i] = ck_crc32(0, zero, len);
		if (f->shas)
			rc = ck_sha256(zero, len, f->shas + i * CK_SHA256_LEN);
		if (!rc && len == k->chunk) {
			crc = f->crcs[i];
			if (f->shas)
				memcpy(sha, f->shas + i * CK_SHA256_LEN,
				       CK_SHA256_LEN);
		}
	}
	free(zero);
	return rc;
}

/*
 * --resume from the old file: the chunks the source did not resend come
 * from it, each checked again against the CRC it was matched with.
 */
int sink_resume_copy(struct snk_work *fin)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	uint8_t *buf = malloc(k->chunk);
	int rc = 0;

	if (!buf) {
		file_fail(f, -ENOMEM, "cannot reuse '%s': out of memory",
			  f->n.shown);
		return -ENOMEM;
	}
	for (uint64_t i = 0; !rc && i < f->have_n; i++) {
		uint64_t off = i * k->chunk, len = f->size - off;

		if (f->got[i])
			continue;
		if (len > k->chunk)
			len = k->chunk;
		rc = io_pread_full(f->cand, buf, len, off);
		if (!rc && ck_crc32(0, buf, len) != f->crcs[i])
			rc = -ESTALE;
		if (!rc)
			rc = io_pwrite_full(f->fd, buf, len, off);
	}
	free(buf);
	if (rc)
		file_fail(f, rc, "cannot reuse '%s': %s", f->n.shown,
			  rc == -ESTALE ? "it changed while being resumed"
					: strerror(-rc));
	return rc;
}
