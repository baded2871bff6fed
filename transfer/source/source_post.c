/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The source's posting: items leave in plan order as credits allow; a
 * chunk is written with WRITE_WITH_IMM into slot seq % N (any slot: the
 * one free longest, credit.h) once its worker is done, unless the sink
 * already has it (HAVE); FILE_END carries the file's digest. Writes are
 * signalled selectively: every sig_every-th, and whenever posting stalls or no
 * staging buffer is left, so every buffer is reclaimed by a later completion.
 * --bwlimit paces it here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/source/source_int.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/log.h"

/* The source's own look at the file once every chunk is read. */
static void check_unchanged(struct src_file *f)
{
	struct stat now;

	if (f->err)
		return;
	if (fstat(f->fd, &now) < 0) {
		file_fail(f, -errno, "cannot stat '%s': %s", f->path,
			  strerror(errno));
	} else if (now.st_size != f->st.st_size ||
		   now.st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
		   now.st_mtim.tv_nsec != f->st.st_mtim.tv_nsec) {
		file_fail(f, -ESTALE,
			  "'%s' changed while it was being sent: not copied",
			  f->path);
	}
}

/*
 * A range's CRC32 covers all its bytes: the holes skipped before end (a
 * sparse source's, --sparse's zero chunks) count as the zeros they are,
 * so that the ranges' CRCs combine into the file's (doc/PROTOCOL.md, Ranges).
 */
static void fold_holes(struct src_file *f, uint64_t end)
{
	if (!f->w->range || end <= f->crc_at)
		return;
	f->crc = ck_crc32_combine(f->crc, ck_crc32_zeros(end - f->crc_at),
				  end - f->crc_at);
	f->crc_at = end;
}

static int send_end(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_FILE_END };
	enum xfer_csum csum = s->cfg->p.csum;
	int rc;

	check_unchanged(f);
	m.u.end.file_id = f->wire_id;
	m.u.end.nchunks = f->nchunks;
	/* No slot goes out while a message waits (src_post): this is final. */
	m.u.end.seq_end = s->tx.posted;
	m.u.end.csum = (uint8_t)csum;
	if (f->err) {
		m.u.end.flags = WIRE_END_ABORT;
		m.u.end.status = f->err;
		snprintf(m.u.end.msg, sizeof(m.u.end.msg), "%s", f->errmsg);
	} else if (csum == XFER_CSUM_CRC32) {
		uint32_t be;

		fold_holes(f, src_file_end(f));
		be = htobe32(f->crc);

		m.u.end.digest_len = 4;
		memcpy(m.u.end.digest, &be, 4);
	} else if (csum == XFER_CSUM_SHA256) {
		m.u.end.digest_len = CK_SHA256_LEN;
		rc = ck_sha256_final(f->tree, m.u.end.digest);
		if (rc)
			return engine_fail(s->e, XFER_FAIL_INTERNAL, rc,
					   "SHA-256 failed");
	}
	src_close_file(f);
	/* The sink's verdict must name this digest; the user is shown it. */
	f->dlen = m.u.end.digest_len;
	memcpy(f->digest, m.u.end.digest, f->dlen);
	f->end_sent = true;
	return engine_send(s->e, &m);
}

static bool should_signal(struct source *s)
{
	struct item *next = s->fifo_len > 1 ? src_fifo_at(s, 1) : NULL;

	return ++s->unsignaled >= s->sig_every || s->free_jobs == 0 ||
	       credit_tx_avail(&s->tx) == 1 || !next || !next->job ||
	       next->job->state != JOB_READY;
}

static void progress(struct source *s, struct src_file *f, uint32_t len)
{
	s->bytes_posted += len;
	report_progress(s->o, &s->next_progress_ms, s->bytes_posted,
			s->bytes_total, f->path);
}

/* Adds a chunk to the file's digest, whether posted or already there. */
static int account(struct src_file *f, const struct src_job *j)
{
	fold_holes(f, j->offset);
	f->crc_at = j->offset + j->len;
	f->crc = ck_crc32_combine(f->crc, j->crc, j->len);
	if (f->tree)
		return ck_sha256_update(f->tree, j->sha, CK_SHA256_LEN);
	return 0;
}

_Static_assert(WIRE_SLOT_HDR == CM_SLOT_HDR, "one slot header size");

/* Writes j's staging buffer and its header h into the next free slot. */
static int post_slot(struct source *s, struct src_job *j,
		     struct wire_slot_hdr *h)
{
	uint64_t seq = s->tx.posted;
	unsigned int slot;
	bool sig;
	int rc;

	h->seq = seq;
	h->len = j->wire_len;
	h->raw_len = j->len;
	h->flags = j->flags;
	if (j->flags & WIRE_SLOT_ENCRYPTED)
		memcpy(h->tag, j->tag, AEAD_TAG_LEN); /* the tag is the check */
	else
		h->crc = j->crc;
	wire_slot_encode(cm_stage_hdr(s->e->c, j->idx), h);
#ifdef RDCP_TEST_HOOKS
	if (seq == s->corrupt_seq)
		cm_stage(s->e->c, j->idx)[j->wire_len / 2] ^= 0x5a;
#endif
	sig = should_signal(s);
	slot = credit_tx_take(&s->tx);
	rc = s->e->c->ops->post_write(s->e->c, j->idx, j->wire_len, slot,
				      wire_imm(seq, slot), sig, j->idx);
	if (rc) /* cm/ said why, naming its transport */
		return engine_fail_logged(s->e, XFER_FAIL_PEER_LOST, rc);
	if (sig)
		s->unsignaled = 0;
	j->state = JOB_POSTED;
	ratelimit_take(&s->rl, j->wire_len, clock_now_ns());
	s->posted[(s->posted_head + s->posted_len++) % s->njobs] = j->idx;
	return 0;
}

static int post_chunk(struct source *s, struct src_job *j)
{
	struct wire_slot_hdr h = { .file_id = j->f->wire_id,
				   .offset = j->offset };

	if (post_slot(s, j, &h))
		return -1;
	j->f->nchunks++;
	j->f->sent += j->wire_len;
	progress(s, j->f, j->len);
	return account(j->f, j);
}

static int post_pack(struct source *s, struct src_job *j)
{
	struct wire_slot_hdr h = { .file_id = src_file_at(s, j->first)->wire_id,
				   .offset = j->nfiles };

	if (j->status)
		return engine_fail(s->e,
				   j->status == -ENOMEM ? XFER_FAIL_RESOURCE
							: XFER_FAIL_INTERNAL,
				   j->status, "cannot pack files: %s",
				   strerror(-j->status));
	if (post_slot(s, j, &h))
		return -1;
	for (unsigned int i = 0; i < j->nfiles; i++) {
		struct src_file *f = src_file_at(s, j->first + i);

		f->posted = true;
		f->sent = f->err ? 0 : (uint64_t)f->st.st_size;
		progress(s, f, (uint32_t)f->st.st_size);
	}
	return 0;
}

void src_free_job(struct source *s, struct src_job *j)
{
	j->state = JOB_FREE;
	s->free_jobs++;
}

/*
 * A read chunk that need not be posted: its file failed or is skipped, it
 * is all zero with --sparse, or the sink already holds it. Returns 1 when
 * it was dealt with, 0 when it must be posted.
 */
static int settle_chunk(struct source *s, struct src_job *j)
{
	struct src_file *f = j->f;

	if (j->status || f->err) {
		file_fail(f, j->status, "cannot read '%s': %s", f->path,
			  strerror(-j->status));
	} else if (f->skip) {
		/* the sink needs nothing of this file */
	} else if (j->zero) {
		progress(s, f, j->len); /* a hole now, like the source's */
	} else if (f->cmp && j->matched) {
		/*
		 * The sink holds this chunk already (zeros where it has
		 * nothing count too): not sent, in the digest all the same.
		 */
		f->matched++;
		progress(s, f, j->len);
		if (account(f, j))
			file_fail(f, -EIO, "SHA-256 failed");
	} else {
		return 0;
	}
	src_free_job(s, j);
	return 1;
}

/*
 * --resume: describes the read chunks of f at the head of the plan that
 * the sink has not been told of (SUMS), in order. A chunk's digest is
 * sent once; its staging buffer waits for the answer (MATCH), so the
 * sink never holds more of them than there are ring slots.
 */
static int send_sums(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_SUMS };
	struct wire_sums *w = &m.u.sums;

	w->file_id = f->wire_id;
	w->first = f->sums_next;
	for (unsigned int i = 0; i < s->fifo_len; i++) {
		struct item *it = src_fifo_at(s, i);

		if (it->kind != IT_CHUNK || it->f != f)
			break;
		if (it->job->summed)
			continue;
		if (it->job->state != JOB_READY || it->job->status ||
		    it->job->offset / s->chunk_size != f->sums_next ||
		    w->count == WIRE_SUMS_MAX)
			break;
		memcpy(w->sums[w->count++], it->job->sum, WIRE_SUM_LEN);
		it->job->summed = true;
		f->sums_next++;
	}
	return w->count ? engine_send(s->e, &m) : 0;
}

/* Posts planned items in order while credits and readiness allow. */
int src_post(struct source *s)
{
	int n = 0;

	while (s->fifo_len && !s->e->fail) {
		struct item *it = src_fifo_at(s, 0);

		switch (it->kind) {
		case IT_FILE:
			if (!it->f->deferred)
				break; /* announced when planned */
			it->f->deferred = false;
			s->held--;
			if (it->f->err ? src_send_failure(s, it->f)
				       : src_send_file(s, it->f))
				return -1;
			break;
		case IT_PACK:
			if (it->job->state != JOB_READY)
				return n;
			/* Nor may it overtake the FILEs before it. */
			if (!credit_tx_avail(&s->tx) || !engine_out_empty(s->e))
				return n;
			if (ratelimit_delay_ns(&s->rl, it->job->wire_len,
					       clock_now_ns()))
				return n;
			if (post_pack(s, it->job))
				return -1;
			s->held--;
			break;
		case IT_CHUNK:
			if (it->job->state != JOB_READY ||
			    (it->f->asking && !it->f->have_done))
				return n;
			/* --resume: the sink says first whether it has it. */
			if (it->f->cmp && !it->f->err && !it->job->status &&
			    !it->job->answered)
				return send_sums(s, it->f) ? -1 : n;
			if (settle_chunk(s, it->job))
				break;
			if (!credit_tx_avail(&s->tx) && !s->wait_since_ns)
				s->wait_since_ns = clock_now_ns();
			/* Data must not overtake a queued announcement. */
			if (!credit_tx_avail(&s->tx) || !engine_out_empty(s->e))
				return n;
			if (ratelimit_delay_ns(&s->rl, it->job->wire_len,
					       clock_now_ns()))
				return n;
			if (post_chunk(s, it->job))
				return -1;
			break;
		case IT_END:
			if (it->f->asking && !it->f->have_done)
				return n;
			if (it->f->skip) {
				src_close_file(it->f); /* the sink said no */
			} else if (send_end(s, it->f)) {
				return -1;
			}
			break;
		case IT_DONE: {
			struct wire_msg m = { .type = WIRE_DONE };

			src_fill_done(s, &m.u.done);
			m.u.done.seq_end = s->tx.posted;
			if (engine_send(s->e, &m))
				return -1;
			s->done_sent = true;
			break;
		}
		}
		src_fifo_pop(s);
		n++;
	}
	return n;
}
