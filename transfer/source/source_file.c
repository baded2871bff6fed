/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A file on the source's side: opened for O_DIRECT where it goes direct,
 * a chunk read by a worker (pread, CRC32 and SHA-256, zero chunks seen,
 * then compressed and sealed into its staging buffer), closed, and its
 * outcome told to the user. The bottom of the source: it calls no other
 * source file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/fs/direct.h"
#include "transfer/session/payload.h"
#include "transfer/session/report.h"
#include "transfer/source/source_int.h"
#include "util/aead.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"
#include "util/path.h"

static bool all_zero(const uint8_t *p, size_t len)
{
	static const uint8_t zero[256];

	while (len >= sizeof(zero)) {
		if (memcmp(p, zero, sizeof(zero)))
			return false;
		p += sizeof(zero);
		len -= sizeof(zero);
	}
	return !memcmp(p, zero, len);
}

/*
 * Worker: compresses and seals j's payload into the staging buffer (data).
 * The IV is (id, index): (file id, chunk index) for a chunk, (first id, 0)
 * for a pack, whose first file has no chunks. The AAD carries the
 * header's file_id and offset fields.
 */
int src_seal(struct source *s, struct src_job *j, const uint8_t *raw,
	     uint8_t *data, uint32_t id, uint64_t offset, uint64_t index)
{
	struct wire_slot_hdr h = {
		.file_id = id,
		.offset = offset,
		.raw_len = j->len,
		.flags = j->flags,
	};
	int rc = payload_seal(&j->pl, s->cfg->p.level, raw, data, s->chunk_size,
			      index, &h);

	j->wire_len = h.len;
	j->flags = h.flags;
	memcpy(j->tag, h.tag, sizeof(j->tag));
	return rc;
}

/*
 * The source's reads in flight (util/workq.h), the mirror of the sink's
 * writes: --io-depth, at most the staging buffers (a read fills one), all
 * of them by default, so that the read depth is the window's, not the
 * workers'. Quiet when the kernel refuses io_uring: the workers read, as
 * before. Started with the session's first file that goes direct.
 */
static void start_io(struct source *s)
{
	unsigned int depth = s->o->link.io_depth, n = s->njobs;
	int rc;

	if (depth == XFER_IO_DEPTH_OFF || workq_io_async(s->e->wq))
		return;
	if (!depth || depth > n)
		depth = n;
	rc = workq_io_start(s->e->wq, depth, cm_stage(s->e->c, 0),
			    (size_t)n * s->chunk_size);
	if (rc)
		log_debug("no io_uring for the reads (%s): the %u workers read",
			  strerror(-rc), s->e->workers);
	else
		log_debug("reads through an io_uring, %u in flight", depth);
}

void src_open_direct(struct source *s, struct src_file *f)
{
	bool forced;
	int rc;

	if (!direct_wanted(s->cfg->p.flags, (uint64_t)f->st.st_size,
			   &forced) ||
	    (!forced && direct_cached(f->fd)))
		return;
	rc = direct_open(f->fd, false, &f->dio);
	if (!rc) {
		log_debug("reading '%s' with O_DIRECT (alignment %u)", f->path,
			  f->dio.align);
		start_io(s);
	}
	/* Auto falls back quietly; --direct says so, once a session. */
	if (rc && forced && !s->direct_told) {
		s->direct_told = true;
		log_warn("cannot read '%s' with O_DIRECT (%s): reading through "
			 "the page cache",
			 f->path, direct_why(rc));
	}
}

void src_close_file(struct src_file *f)
{
	direct_close(&f->dio);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/*
 * Worker: read (or find it read: workq_push_read), checksum, maybe
 * compress, maybe seal.
 */
void src_read_chunk(struct workq_item *item)
{
	struct src_job *j = (struct src_job *)item;
	struct source *s = j->s;
	const struct session_params *p = &s->cfg->p;
	uint8_t *data = cm_stage(s->e->c, j->idx); /* page aligned */
	uint8_t *raw = j->pl.scratch ? j->pl.scratch : data;

	j->flags = 0;
	j->wire_len = j->len;
	j->zero = false;
	/*
	 * Straight into the staging buffer (or scratch) when it goes direct;
	 * with an io_uring the pool read it before this (src_push_chunk).
	 */
	if (item->io.read)
		j->status = item->io.res;
	else
		j->status = direct_pread(&j->f->dio, j->f->fd, raw, j->len,
					 j->offset);
	if (j->status)
		return;
	/* Compared (--resume) every chunk is described to the sink instead. */
	if ((p->flags & WIRE_HELLO_SPARSE) && !s->compare)
		j->zero = all_zero(raw, j->len);
	if (j->zero)
		return; /* --sparse: a hole, out of the digest like holes */
	if (p->csum != XFER_CSUM_NONE || s->compare)
		j->crc = ck_crc32(0, raw, j->len);
	if (p->csum == XFER_CSUM_SHA256 || s->compare) {
		j->status = ck_sha256(raw, j->len, j->sha);
		if (j->status)
			return;
	}
	if (s->compare) {
		j->status = payload_resume_sum(s->resume_key, j->f->wire_id,
					       j->offset / s->chunk_size,
					       j->sha, j->sum);
		if (j->status)
			return;
	}
	j->status = src_seal(s, j, raw, data, j->f->wire_id, j->offset,
			     j->offset / s->chunk_size);
}

void src_push_chunk(struct source *s, struct src_job *j)
{
	uint8_t *raw =
		j->pl.scratch ? j->pl.scratch : cm_stage(s->e->c, j->idx);

	j->state = JOB_READING;
	if (workq_io_async(s->e->wq) &&
	    direct_pread_async(&j->f->dio, raw, j->len, j->offset, &j->item))
		workq_push_read(s->e->wq, &j->item);
	else
		workq_push(s->e->wq, &j->item);
}

void src_report(struct source *s, struct src_file *f, int status,
		const char *msg, const uint8_t *digest, unsigned int dlen)
{
	bool regular = f->w->kind == WIRE_KIND_FILE;
	struct xfer_file_report r = {
		.done = true,
		.path = f->path,
		.name = f->w->wire,
		.kind = wire_kind_name(f->w->kind),
		.bytes = !regular  ? 0
			 : f->final ? (uint64_t)f->st.st_size
				    : src_file_bytes(f),
		.sent = f->sent,
		.seconds = clock_now_s() - f->t0,
		.status = status,
		.klass = engine_klass_of(status, !f->err),
		.message = msg,
		.skipped = f->skipped && !status,
		.reason = report_skip_reason(s->cfg->p.flags, s->cfg->p.sync),
		.dry = !status && (f->dry & WIRE_RESULT_DRY),
		.exists = !status && (f->dry & WIRE_RESULT_EXISTS),
		.range_count = f->w->range ? f->w->range->count : 0,
		.range_idx = f->w->range ? f->w->range->idx : 0,
		.range_len = f->w->range ? f->w->range->len : 0,
		.final = f->final,
	};

	f->result = true;
	s->results++;
	if (status) {
		if (!s->st->files_failed++)
			s->st->first_fail = r.klass;
	} else {
		/* a split file is one file, counted by its final range */
		s->st->files_ok += !f->w->range || f->final;
		s->st->files_packed += f->packed;
		s->st->bytes += regular ? src_file_bytes(f) : 0;
		if (r.skipped && (!f->w->range || f->final))
			s->st->files_skipped++;
	}
	report_file(s->o, &r, s->cfg->p.csum, digest, dlen);
}

void src_check_unchanged(struct src_file *f, int fd, struct stat *now)
{
	if (fstat(fd, now) < 0)
		file_fail(f, -errno, "cannot stat '%s': %s", f->path,
			  strerror(errno));
	else if (!S_ISREG(now->st_mode))
		file_fail(f, -EINVAL, "cannot send '%s': not a regular file",
			  f->path);
	else if (now->st_size != f->st.st_size ||
		 now->st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
		 now->st_mtim.tv_nsec != f->st.st_mtim.tv_nsec)
		file_fail(f, -ESTALE,
			  "'%s' changed while it was being sent: not copied",
			  f->path);
}

void src_open_late(struct source *s, struct src_file *f)
{
	struct stat now;

	f->lazy = false;
	f->fd = walk_open(&s->walk, f->w);
	if (f->fd < 0) {
		file_fail(f, f->fd, "cannot open '%s': %s", f->path,
			  strerror(-f->fd));
		f->fd = -1;
		return;
	}
	src_check_unchanged(f, f->fd, &now);
	if (f->err) {
		close(f->fd);
		f->fd = -1;
		return;
	}
	f->st = now;
	posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	src_open_direct(s, f);
}
