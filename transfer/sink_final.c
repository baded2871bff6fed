/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's last step for a regular file, in a worker once FILE_END has
 * come and every chunk is written: combine the chunk digests into the
 * file's and compare it with the source's, take the chunks --resume did
 * not resend from the old file, set mode and times, fsync on request, and
 * only then rename the temporary to the final name. Nothing is ever
 * renamed that was not verified; a file that fails is discarded.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/place.h"
#include "transfer/sink_int.h"
#include "util/checksum.h"
#include "util/io.h"

/*
 * Whether chunk i is part of the file's digest. Without --resume only the
 * chunks that came are (the source leaves holes out too); with it every
 * chunk is: one that came, one already here (matched), or one the source
 * did not send because it is all zero and this side had nothing there.
 */
static bool counted(const struct sink *k, const struct snk_file *f, uint64_t i)
{
	return f->got[i] || sink_resuming(k);
}

/* Without --resume: what was folded in as the chunks came. */
static int folded_digest(struct snk_work *fin)
{
	struct snk_file *f = fin->f;
	uint32_t crc = htobe32(f->crc);

	if (fin->k->p->csum == XFER_CSUM_CRC32) {
		memcpy(fin->digest, &crc, 4);
		fin->dlen = 4;
	} else if (fin->k->p->csum == XFER_CSUM_SHA256) {
		if (ck_sha256_final(f->tree, fin->digest)) {
			file_fail(f, -EIO, "SHA-256 failed");
			return -EIO;
		}
		fin->dlen = CK_SHA256_LEN;
	}
	return 0;
}

static int verify_digest(struct snk_work *fin)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	uint32_t crc = 0;
	int rc = 0;

	if (sink_resuming(k)) {
		rc = sink_resume_zeros(fin);
		if (rc) {
			file_fail(f, rc, "cannot hash '%s': %s", f->n.shown,
				  strerror(-rc));
			return rc;
		}
	}
	if (!f->crcs) {
		rc = folded_digest(fin);
		if (rc)
			return rc;
	} else if (k->p->csum == XFER_CSUM_CRC32) {
		for (uint64_t i = 0; i < f->nslots; i++) {
			uint64_t len = f->size - i * k->chunk;

			if (!counted(k, f, i))
				continue;
			if (len > k->chunk)
				len = k->chunk;
			crc = ck_crc32_combine(crc, f->crcs[i], len);
		}
		crc = htobe32(crc);
		memcpy(fin->digest, &crc, 4);
		fin->dlen = 4;
	} else if (k->p->csum == XFER_CSUM_SHA256) {
		struct ck_sha256 *tree;

		rc = ck_sha256_create(&tree);
		for (uint64_t i = 0; !rc && i < f->nslots; i++)
			if (counted(k, f, i))
				rc = ck_sha256_update(
					tree, f->shas + i * CK_SHA256_LEN,
					CK_SHA256_LEN);
		if (!rc)
			rc = ck_sha256_final(tree, fin->digest);
		ck_sha256_destroy(tree);
		if (rc) {
			file_fail(f, rc, "SHA-256 failed");
			return rc;
		}
		fin->dlen = CK_SHA256_LEN;
	}
	if (fin->dlen != f->end.digest_len ||
	    memcmp(fin->digest, f->end.digest, fin->dlen)) {
		file_fail(f, -EBADMSG,
			  "'%s' failed verification: its digest does not "
			  "match the sender's (corrupted in transit?); not "
			  "placed",
			  f->n.shown);
		return -EBADMSG;
	}
	return 0;
}

/*
 * The final mode, unless the file was made with it already (have_mode),
 * and the times with -p. 0, or -errno and *what.
 */
int sink_apply_meta(const struct sink *k, int fd, uint32_t mode, bool have_mode,
		    const struct timespec times[2], const char **what)
{
	return place_meta(fd, !have_mode, sink_final_mode(k, mode),
			  sink_preserving(k) ? times : NULL, what);
}

static int set_meta(struct sink *k, struct snk_file *f, int fd)
{
	const char *what;
	int rc = sink_apply_meta(k, fd, f->mode, false, f->times, &what);

	if (rc)
		file_fail(f, rc, "cannot set %s of '%s': %s", what, f->n.shown,
			  strerror(-rc));
	return rc ? -1 : 0;
}

static void finalize(struct workq_item *item)
{
	struct snk_work *fin = (struct snk_work *)item;
	struct snk_file *f = fin->f;
	struct sink *k = fin->k;
	int rc;

	if (f->err || verify_digest(fin))
		goto out_discard;
	if (f->cand_final && !f->received && f->cand_size == f->size) {
		/* The old file was whole and right: keep it, drop the temp. */
		if (set_meta(k, f, f->cand))
			goto out_discard;
		close(f->fd);
		f->fd = -1;
		unlinkat(f->dirfd, f->n.tmp, 0);
		f->skipped = true;
		return;
	}
	if (f->cand_final && sink_resume_copy(fin))
		goto out_discard;
	if (set_meta(k, f, f->fd))
		goto out_discard;
	if (k->p->flags & WIRE_HELLO_FSYNC && fsync(f->fd) < 0) {
		file_fail(f, -errno, "cannot fsync '%s': %s", f->n.shown,
			  strerror(errno));
		goto out_discard;
	}
	rc = io_close(f->fd);
	f->fd = -1;
	if (rc) {
		file_fail(f, rc, "cannot write '%s': %s", f->n.shown,
			  strerror(-rc));
		unlinkat(f->dirfd, f->n.tmp, 0);
		return;
	}
	if (renameat(f->dirfd, f->n.tmp, f->dirfd, f->n.name) < 0) {
		file_fail(f, -errno, "cannot rename into '%s': %s", f->n.shown,
			  strerror(errno));
		unlinkat(f->dirfd, f->n.tmp, 0);
	}
	return;

out_discard:
	sink_discard(k, f);
}

/* The engine thread: a file was verified and placed, or failed. */
static void finalized(struct workq_item *item)
{
	struct snk_work *w = (struct snk_work *)item;

	sink_send_result(w->k, w->f, w->digest, w->f->err ? 0 : w->dlen);
}

void sink_finalize(struct sink *k, struct snk_file *f)
{
	f->finalizing = true;
	sink_start_work(k, f, finalize, finalized);
}
