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

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/checksum.h"
#include "util/io.h"

/* What was folded in as the chunks came (sink.c). */
static int folded_digest(struct snk_work *fin)
{
	struct snk_file *f = fin->f;
	uint32_t crc;

	sink_range_fold_holes(fin->k, f, UINT64_MAX);
	crc = htobe32(f->crc);
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

/*
 * The file's digest against the source's. Without --resume it was folded
 * in as the chunks came; with it, the file (fd) is read back whole, since
 * its chunks are partly this side's and partly the source's. An old file
 * kept as it is was matched chunk by chunk already: every chunk's digest
 * equals the source's, so it is the source's file.
 */
static int verify_digest(struct snk_work *fin, int fd, bool kept)
{
	struct snk_file *f = fin->f;
	int rc;

	if (kept) {
		fin->dlen = f->end.digest_len;
		memcpy(fin->digest, f->end.digest, fin->dlen);
		return 0;
	}
	if (f->cmp && fin->k->p->csum != XFER_CSUM_NONE)
		rc = sink_resume_digest(fin, fd);
	else
		rc = folded_digest(fin);
	if (rc)
		return rc;
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

static int set_meta(struct sink *k, struct snk_file *f, int fd)
{
	const char *what;
	int rc = sink_apply_meta(k, fd, f->mode, false, f->times, &f->owner,
				 f->xattrs, &what);

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

	bool kept = f->cand_final && f->keeping && !f->received;

	/* Every chunk is written: the rest (fsync, close) is the inode's. */
	direct_close(&f->dio);
	if (f->rg) { /* a byte range: sink_range.c may place the file */
		if (!f->err && (f->skipped || !verify_digest(fin, f->fd, false)) &&
		    !sink_range_done(fin))
			return;
		goto out_discard;
	}
	if (f->err || verify_digest(fin, f->fd, kept))
		goto out_discard;
	if (kept) {
		/*
		 * The old file is whole and right, and already has the mode
		 * (and with -p the mtime) it would get: it stays as it is,
		 * untouched, and the temporary goes.
		 */
		close(f->fd);
		f->fd = -1;
		unlinkat(f->dirfd, f->n.tmp, 0);
		f->skipped = true;
		/* --sync checksum -p/-o/-g: the same content, the source's meta */
		if (((k->p->sync == WIRE_SYNC_CHECKSUM &&
		      (sink_preserving(k) || sink_owners_asked(k))) ||
		     sink_xattrs_asked(k)) &&
		    set_meta(k, f, f->cand))
			f->skipped = false; /* failed: f->err says why */
		return;
	}
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
		return;
	}
	f->placed = true; /* what it took of the byte limits stays taken */
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

void sink_maybe_finalize(struct sink *k, struct snk_file *f)
{
	if (!f->ended || f->inflight || f->finalizing || f->comparing)
		return;
	if (!f->err && f->received != f->end.nchunks)
		file_fail(f, -EPROTO, "'%s': %llu chunks announced, %llu came",
			  f->n.shown, (unsigned long long)f->end.nchunks,
			  (unsigned long long)f->received);
	/* Only a sparse file's size may say more than its chunks fill. */
	if (!f->err && !f->holes_ok &&
	    f->received != f->nslots - f->first_idx)
		file_fail(f, -EPROTO,
			  "'%s': %llu bytes announced without holes, but only "
			  "%llu of its %llu chunks came; not placed",
			  f->n.shown, (unsigned long long)f->size,
			  (unsigned long long)f->received,
			  (unsigned long long)(f->nslots - f->first_idx));
	sink_finalize(k, f);
}

int sink_resume_digest(struct snk_work *fin, int fd)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	struct ck_sha256 *tree = NULL;
	uint8_t *buf = malloc(k->chunk_size);
	uint8_t sha[CK_SHA256_LEN];
	uint32_t crc = 0, be;
	int rc = buf ? 0 : -ENOMEM;

	if (!rc && k->p->csum == XFER_CSUM_SHA256)
		rc = ck_sha256_create(&tree);
	for (uint64_t i = 0; !rc && i < f->nslots; i++) {
		uint64_t off = i * k->chunk_size, len = f->size - off;

		if (len > k->chunk_size)
			len = k->chunk_size;
		rc = io_pread_full(fd, buf, len, off);
		if (!rc && k->p->csum == XFER_CSUM_CRC32)
			crc = ck_crc32_combine(crc, ck_crc32(0, buf, len), len);
		if (!rc && tree)
			rc = ck_sha256(buf, len, sha);
		if (!rc && tree)
			rc = ck_sha256_update(tree, sha, CK_SHA256_LEN);
	}
	if (!rc && tree)
		rc = ck_sha256_final(tree, fin->digest);
	ck_sha256_destroy(tree);
	free(buf);
	if (rc) {
		file_fail(f, rc, "cannot read back '%s': %s", f->n.shown,
			  strerror(-rc));
		return rc;
	}
	if (k->p->csum == XFER_CSUM_CRC32) {
		be = htobe32(crc);
		memcpy(fin->digest, &be, 4);
		fin->dlen = 4;
	} else if (k->p->csum == XFER_CSUM_SHA256) {
		fin->dlen = CK_SHA256_LEN;
	}
	return 0;
}
