/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The data source: reads files into staging buffers and writes them into
 * the sink's ring.
 *
 * The engine thread plans the session as an ordered list of items
 * (source_plan.c), FILE, CHUNK..., FILE_END for each entry of the walk and
 * DONE at the end, and posts them in order (source_post.c). Because SENDs
 * and WRITEs on one RC queue pair arrive in order, the sink always sees a
 * file announced before its first chunk and ended after its last. Each
 * CHUNK owns one staging buffer (a job): a worker preads it (with
 * O_DIRECT straight into the buffer when the file goes direct), computes its
 * CRC32 (and SHA-256), compresses and seals it on request (source_file.c),
 * then the engine thread posts it with WRITE_WITH_IMM as soon as it holds a credit.
 *
 * With --resume, --no-clobber or --update the sink answers each FILE with
 * HAVE: skip the file, send it, or (--resume) describe its chunks first.
 * The file's chunks are read meanwhile; with --resume each one's digest
 * goes to the sink (SUMS) and it is posted only if the sink's answer
 * (MATCH) says the sink does not have it.
 *
 * Otherwise runs of small files are packed (source_pack.c): one PACK item,
 * one staging buffer, read by one worker job, carries up to a slot's worth
 * of files, and one PACK_DONE answers for all of them. The sink must learn
 * of file ids in order, so while a pack is planned but not posted, FILE
 * messages planned after it wait in the fifo (deferred).
 *
 * This file: the sink's answers (FILE_RESULT, PACK_DONE, HAVE, MATCH), the
 * engine role and the session's setup and teardown; the top of the source,
 * which no other source file calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/source/source_int.h"
#include "util/aead.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"
#include "util/path.h"

/* ---- engine role ---- */

/* Says how many failures beneath s->failed_dir were not printed. */
static void beneath_flush(struct source *s)
{
	if (s->failed_beneath)
		log_err("%s: %llu %s beneath it failed too", s->failed_dir,
			(unsigned long long)s->failed_beneath,
			s->failed_beneath == 1 ? "entry" : "entries");
	s->failed_beneath = 0;
}

/*
 * Whether f's failure is to go unprinted: it lies beneath the directory
 * that failed last (counted, said once by beneath_flush). A failed
 * directory becomes that one.
 */
static bool beneath_failed(struct source *s, const struct src_file *f)
{
	size_t n = s->failed_dir ? strlen(s->failed_dir) : 0;

	if (n && !strncmp(f->path, s->failed_dir, n) && f->path[n] == '/') {
		s->failed_beneath++;
		return true;
	}
	beneath_flush(s);
	if (f->w && f->w->kind == WIRE_KIND_DIR) {
		free(s->failed_dir);
		s->failed_dir = strdup(f->path);
	}
	return false;
}

/* The sink's verdict on f, unless our own failure (read error, file
 * changed) came first: that one wins. */
static void conclude(struct source *s, struct src_file *f, int status,
		     const char *msg, const uint8_t *digest, unsigned int dlen)
{
	if (f->err) {
		status = f->err;
		msg = f->errmsg;
	}
	if (status && !(f->err && s->cfg->p.server) &&
	    (s->cfg->p.server || !beneath_failed(s, f)))
		log_err("%s%s%s", f->err ? "" : f->path, f->err ? "" : ": ",
			msg);
	else if (!status && s->cfg->p.server)
		log_info("sent '%s'", f->path);
	src_report(s, f, status, msg, digest, status ? 0 : dlen);
}

/*
 * Whether res is a verdict the sink may give on f at this point of the
 * protocol (doc/PROTOCOL.md, "Entries" and "Skip rules"): NULL, or why not. A
 * directory or symlink is answered at once; a regular file after its
 * FILE_END, or after a HAVE that skipped it, with that HAVE's status; a
 * packed file only when it failed, before its pack's PACK_DONE. SKIPPED
 * only where -n/-u asked, or --resume found the whole file there (then
 * nothing was resent). A success names the digest that was sent.
 */
static const char *result_misplaced(const struct source *s,
				    const struct src_file *f,
				    const struct wire_file_result *res)
{
	bool skipped = res->flags & WIRE_RESULT_SKIPPED;
	bool asked_skip =
		(s->cfg->p.flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE)) ||
		s->cfg->p.sync != WIRE_SYNC_NONE;
	bool dry_run = s->cfg->p.flags & WIRE_HELLO_DRY_RUN;
	uint32_t dry = res->flags & (WIRE_RESULT_DRY | WIRE_RESULT_EXISTS);

	if (f->result)
		return "twice";
	/*
	 * --dry-run: every verdict is a failure, a skip where -n/-u asked,
	 * or DRY (maybe with EXISTS); nothing is sent, so none has a digest.
	 * Without it, neither flag ever.
	 */
	if (dry_run || dry) {
		if (!dry_run || (dry && !(dry & WIRE_RESULT_DRY)) ||
		    (dry && (skipped || res->status)) ||
		    (res->flags & ~(WIRE_RESULT_SKIPPED | dry)) ||
		    res->status > 0 || res->digest_len)
			return "with a malformed verdict";
		if (!res->status && !dry &&
		    (!skipped || !asked_skip || f->w->kind == WIRE_KIND_DIR))
			return "as skipped, which was not asked for";
		if (f->w->kind == WIRE_KIND_FILE && !f->err &&
		    (!f->skip || res->status != f->skip_status))
			return "unlike its HAVE";
		return NULL;
	}
	if (f->deferred || (f->packed && !f->posted))
		return "before it was announced";
	/*
	 * FINAL: a range's, with the whole file's CRC32 (4 bytes, whether
	 * this range was sent or skipped as verified by --resume), or none
	 * when -n/-u kept the file and nothing was sent.
	 */
	if (res->status > 0 ||
	    (res->flags & ~(WIRE_RESULT_SKIPPED | WIRE_RESULT_FINAL)) ||
	    (skipped && res->status) ||
	    (res->flags & WIRE_RESULT_FINAL &&
	     (!f->w->range || res->status ||
	      (res->digest_len != 4 && (!skipped || res->digest_len)))))
		return "with a malformed verdict";
	if (f->packed)
		return skipped || !res->status ? "outside its pack's PACK_DONE"
					       : NULL;
	if (f->w->kind != WIRE_KIND_FILE && !f->err) {
		/*
		 * A symlink or hard link kept where -n, -u or --sync asked;
		 * a special file also where the receiver may not make it.
		 */
		if (skipped && f->w->kind != WIRE_KIND_SPECIAL &&
		    ((f->w->kind != WIRE_KIND_SYMLINK &&
		      f->w->kind != WIRE_KIND_HARDLINK) ||
		     !asked_skip))
			return "as skipped, which was not asked for";
		return res->status || !res->digest_len ? NULL : "with a digest";
	}
	if (f->skip)
		return res->status != f->skip_status ||
				       skipped != !f->skip_status
			       ? "unlike its HAVE"
			       : NULL;
	if (!f->end_sent)
		return "before it was sent";
	if (res->status)
		return NULL;
	if (skipped && !(s->compare && !f->nchunks))
		return "as skipped, which was not asked for";
	/* The final range's digest is the whole file's (doc/PROTOCOL.md, Ranges). */
	if (res->flags & WIRE_RESULT_FINAL)
		return NULL;
	if (res->digest_len != f->dlen ||
	    memcmp(res->digest, f->digest, f->dlen))
		return "with a digest that is not the one sent";
	return NULL;
}

static int on_result(struct source *s, const struct wire_file_result *res)
{
	struct src_file *f = src_by_wire(s, res->file_id);
	const char *why;

	if (!f)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s answered for file %u, which %s",
				   s->e->c->peer, res->file_id,
				   res->file_id < s->nwire
					   ? "was answered already"
					   : "was never announced");
	why = result_misplaced(s, f, res);
	if (why)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s answered for '%s' %s: refused",
				   s->e->c->peer, f->path, why);
	if (f->in_flight) {
		f->in_flight = false;
		s->inflight--;
	}
	f->skipped = res->flags & WIRE_RESULT_SKIPPED;
	f->dry = res->flags & (WIRE_RESULT_DRY | WIRE_RESULT_EXISTS);
	f->final = res->flags & WIRE_RESULT_FINAL;
	/*
	 * Reported: what was sent and the digest computed here; the final
	 * range of a split file: the whole file's, which the sink combined
	 * from every range's (each checked against its source's).
	 */
	if (f->final)
		conclude(s, f, res->status, res->msg, res->digest,
			 res->digest_len);
	else
		conclude(s, f, res->status, res->msg, f->digest, f->dlen);
	src_retire(s, f); /* f may be gone */
	return 0;
}

/*
 * Every file of a pack without a FILE_RESULT is in place. The pack's files
 * have consecutive ids, none finished before its PACK_DONE.
 */
static int on_pack_done(struct source *s, const struct wire_pack_done *d)
{
	struct src_file *f = src_by_wire(s, d->first_id);

	/* One PACK_DONE per posted pack, for exactly its files. */
	if (!f || !f->packed || !f->posted || !f->pack_len ||
	    f->pack_len != d->count || f->pack_done)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s answered for a pack of %u files from "
				   "file %u, which was not sent or was "
				   "answered already: refused",
				   s->e->c->peer, d->count, d->first_id);
	for (uint32_t id = d->first_id; id < d->first_id + d->count; id++) {
		f = src_by_wire(s, id);
		if (!f || !f->packed || f->pack_done)
			return engine_fail(s->e, XFER_FAIL_INTERNAL, -EPROTO,
					   "pack of file %u lost track of %u",
					   d->first_id, id);
		f->pack_done = true;
		if (!f->result)
			conclude(s, f, 0, NULL, f->digest, f->dlen);
		src_retire(s, f); /* f may be gone */
	}
	return 0;
}

/* The sink's one answer to a FILE: skip it, send it, or compare first. */
static int on_have(struct source *s, const struct wire_have *h)
{
	struct src_file *f = src_by_wire(s, h->file_id);

	if (!f || !f->asking || f->have_done || f->deferred ||
	    ((h->flags & WIRE_HAVE_SUMS) && !s->compare))
		return -EPROTO;
	/*
	 * Kept as it is (status 0) only where -n, -u or --sync asked for
	 * that; with --dry-run every file is skipped; with --resume a range
	 * the sink verified already.
	 */
	if ((h->flags & WIRE_HAVE_SKIP) &&
	    (h->status > 0 ||
	     (!h->status && !(f->w->range && s->resume) &&
	      s->cfg->p.sync == WIRE_SYNC_NONE &&
	      !(s->cfg->p.flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE |
				   WIRE_HELLO_DRY_RUN)))))
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s would keep '%s' as it is, which "
				   "neither -n, -u nor --sync asked for: "
				   "refused",
				   s->e->c->peer, f->path);
	if ((s->cfg->p.flags & WIRE_HELLO_DRY_RUN) &&
	    !(h->flags & WIRE_HAVE_SKIP))
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s asked for the data of '%s' in a dry "
				   "run: refused",
				   s->e->c->peer, f->path);
	f->have_done = true;
	if (h->flags & WIRE_HAVE_SKIP) {
		f->skip = true;
		f->skip_status = h->status;
	}
	f->cmp = h->flags & WIRE_HAVE_SUMS;
	if (f->lazy && !f->skip)
		src_open_late(s, f);
	src_ask_answered(s, f);
	/* Its chunks planned so far: read now, or dropped unread. */
	for (unsigned int i = 0; i < s->fifo_len; i++) {
		struct item *it = src_fifo_at(s, i);

		if (it->kind != IT_CHUNK || it->f != f ||
		    it->job->state != JOB_WAITING)
			continue;
		if (f->skip || f->err) {
			it->job->state = JOB_READY; /* settle_chunk frees it */
		} else {
			src_push_chunk(s, it->job);
		}
	}
	return 0;
}

/*
 * Entries the sink kept as they are, a run of ids in one message: for a
 * regular file what HAVE (SKIP, status 0) then FILE_RESULT (SKIPPED)
 * would say, for a symlink that FILE_RESULT, each checked as those are.
 */
static int on_kept(struct source *s, const struct wire_kept *k)
{
	struct wire_have h = { .flags = WIRE_HAVE_SKIP };
	struct wire_file_result r = { .flags = WIRE_RESULT_SKIPPED };

	if (s->cfg->p.flags & WIRE_HELLO_DRY_RUN)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s kept files in a dry run: refused",
				   s->e->c->peer);
	for (uint32_t i = 0; i < k->count; i++) {
		uint32_t id = k->first_id + i;
		struct src_file *f = id >= k->first_id ? src_by_wire(s, id)
						       : NULL;
		int rc;

		if (!f || f->w->range || f->w->kind == WIRE_KIND_DIR)
			return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
					   "%s kept file %u, which it may not "
					   "keep: refused",
					   s->e->c->peer, id);
		if (f->w->kind == WIRE_KIND_FILE) {
			h.file_id = id;
			rc = on_have(s, &h);
			if (rc)
				return rc;
		}
		r.file_id = id;
		rc = on_result(s, &r);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * --resume: which of the chunks described last the sink has. The answers
 * come in order, for chunks described and not yet answered; chunks still
 * waiting in the plan take theirs (a failed file's are gone already).
 */
static int on_match(struct source *s, const struct wire_match *m)
{
	struct src_file *f = src_by_wire(s, m->file_id);

	if (!f || !f->cmp || m->first != f->match_next ||
	    m->count > f->sums_next - f->match_next)
		return -EPROTO;
	for (unsigned int i = 0; i < s->fifo_len; i++) {
		struct item *it = src_fifo_at(s, i);
		uint64_t idx;

		if (it->kind != IT_CHUNK || it->f != f)
			continue;
		idx = it->job->offset / s->chunk_size;
		if (idx < m->first || idx - m->first >= m->count)
			continue;
		it->job->answered = true;
		it->job->matched = m->bits[(idx - m->first) / 8] >>
					   ((idx - m->first) % 8) &
				   1;
	}
	f->match_next += m->count;
	return 0;
}

/*
 * FREED: the sink released these slots (any slot). Each must be one in
 * use, named once (and the message's slot_ack count them all:
 * credit_tx_ack): anything else is a sink that would have chunks written
 * over ones it still holds.
 */
static int on_freed(struct source *s, const struct wire_freed *m)
{
	unsigned int bad;

	if (!s->tx.free)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent FREED, which was not agreed",
				   s->e->c->peer);
	if (!credit_tx_freed(&s->tx, m->slot, m->count, &bad))
		return 0;
	return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
			   "%s released ring slot %u, which holds no chunk",
			   s->e->c->peer, bad);
}

static int src_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct source *s = e->role_data;
	int rc = -EPROTO;

	if (m->type == WIRE_FREED && on_freed(s, &m->u.freed))
		return -1;
	if (credit_tx_ack(&s->tx, m->slot_ack))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   s->tx.free
					   ? "%s counted %u ring slots "
					     "released, not the ones it named"
					   : "%s released ring slots never "
					     "written (slot_ack %u)",
				   e->c->peer, m->slot_ack);
	if (s->wait_since_ns && credit_tx_avail(&s->tx)) {
		s->wait_ns += clock_now_ns() - s->wait_since_ns;
		s->wait_since_ns = 0;
	}
	switch (m->type) {
	case WIRE_CREDIT:
	case WIRE_FREED:
		return 0;
	case WIRE_FILE_RESULT:
		rc = on_result(s, &m->u.result);
		break;
	case WIRE_HAVE:
		rc = on_have(s, &m->u.have);
		break;
	case WIRE_MATCH:
		rc = on_match(s, &m->u.match);
		break;
	case WIRE_PACK_DONE:
		rc = on_pack_done(s, &m->u.pack_done);
		break;
	case WIRE_KEPT:
		rc = on_kept(s, &m->u.kept);
		break;
	case WIRE_NOTICE: /* what the receiver could not keep (-o/-g) */
		if (s->notices++ < WIRE_NOTICES_MAX)
			log_warn("%s: %s", e->c->peer, m->u.notice.msg);
		return 0;
	case WIRE_NAMES:
		rc = src_names_on_msg(s, &m->u.names);
		break;
	case WIRE_DELETED:
		return src_on_deleted(s, &m->u.deleted);
	case WIRE_DELETE_END:
		return src_on_delete_end(s, &m->u.delete_end);
	case WIRE_BYE:
		if (!src_bye_due(s))
			break;
		s->bye = true;
		return 0;
	default:
		break;
	}
	if (rc == -ENOMEM)
		return engine_fail(e, XFER_FAIL_RESOURCE, rc, "out of memory");
	if (rc)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent an unexpected %s", e->c->peer,
				   wire_type_name(m->type));
	return 0;
}

static int src_on_write_done(struct engine *e, uint64_t wr_id)
{
	struct source *s = e->role_data;

	/* A signalled write completes every earlier unsignalled one too. */
	while (s->posted_len) {
		unsigned int idx = s->posted[s->posted_head];

		s->posted_head = (s->posted_head + 1) % s->njobs;
		s->posted_len--;
		src_free_job(s, &s->jobs[idx]);
		if (idx == wr_id)
			return 0;
	}
	return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
			   "completion for a write never posted");
}

/* The engine thread: a worker has read (and sealed) the job's data. */
static void job_ready(struct workq_item *it)
{
	struct src_job *j = (struct src_job *)it;

	j->state = JOB_READY;
}

static int src_pump(struct engine *e)
{
	struct source *s = e->role_data;
	int a = src_plan(s), b;

	if (a < 0)
		return 0;
	b = src_post(s);
	return b < 0 ? 0 : a + b + src_names_pump(s);
}

static bool src_finished(const struct engine *e)
{
	const struct source *s = e->role_data;

	return s->bye;
}

static const struct engine_role source_role = {
	.on_msg = src_on_msg,
	.on_write_done = src_on_write_done,
	.pump = src_pump,
	.finished = src_finished,
};

static int jobs_init(struct source *s)
{
	const struct session_params *p = &s->cfg->p;
	int rc;

	for (unsigned int i = 0; i < s->njobs; i++) {
		struct src_job *j = &s->jobs[i];

		j->item.fn = src_read_chunk;
		j->item.after = job_ready;
		j->s = s;
		j->idx = i;
		rc = payload_init(&j->pl, s->chunk_size, p->level, p->data_key);
		if (rc)
			return rc;
	}
	return 0;
}

static void jobs_free(struct source *s)
{
	for (unsigned int i = 0; s->jobs && i < s->njobs; i++) {
		payload_release(&s->jobs[i].pl);
	}
	free(s->jobs);
}

int src_run(struct engine *e, const struct source_cfg *cfg,
	    struct xfer_stats *st)
{
	struct source s = { 0 };
	const struct xfer_opts *o = e->o;
	int rc = -ENOMEM;

	s.e = e;
	s.o = o;
	s.cfg = cfg;
	s.st = st;
	s.chunk_size = e->c->geom.chunk_size;
	s.njobs = s.free_jobs = e->c->geom.slots;
	s.sig_every = s.njobs / 4 ? s.njobs / 4 : 1;
	s.fifo_cap = 2 * s.njobs + 64;
	s.ask = session_asks(&cfg->p);
	s.inflight_max = session_inflight_max(&cfg->p);
	e->batch = s.ask;
	s.resume = cfg->p.flags & WIRE_HELLO_RESUME;
	s.compare = session_compares(&cfg->p);
	/*
	 * Packs being read or waiting for credits: enough to keep every
	 * worker busy, few enough that the staging buffers they use (and the
	 * ring slots behind them) stay warm in the cache.
	 */
	s.pack_ahead = 2 * e->workers + 4;
	/* Small files are packed unless each must wait for a HAVE. */
	if (cfg->p.pack && !s.ask)
		s.pack_max = s.chunk_size / 4 < PACK_FILE_MAX ? s.chunk_size / 4
							      : PACK_FILE_MAX;
	s.dlen = cfg->p.csum == XFER_CSUM_SHA256  ? CK_SHA256_LEN
		 : cfg->p.csum == XFER_CSUM_CRC32 ? 4
						  : 0;
	s.corrupt_seq = UINT64_MAX;
	s.walk.rootfd = cfg->rootfd;
	s.walk.recursive = cfg->p.flags & WIRE_HELLO_RECURSIVE;
	s.walk.devices = cfg->p.flags & WIRE_HELLO_DEVICES;
	s.walk.specials = cfg->p.flags & WIRE_HELLO_SPECIALS;
	s.walk.filter = cfg->filter;
	s.walk.list = cfg->list;
	s.walk.list_sep = cfg->list_sep;
	s.walk.list_tree = cfg->list_tree;
	s.walk.top_range = cfg->range;
	ratelimit_init(&s.rl, cfg->bwlimit,
		       cfg->bwlimit / 10 > s.chunk_size ? cfg->bwlimit / 10
							: s.chunk_size,
		       clock_now_ns());
#ifdef RDCP_TEST_HOOKS
	if (getenv("RDCP_TEST_CORRUPT_CHUNK"))
		s.corrupt_seq =
			strtoull(getenv("RDCP_TEST_CORRUPT_CHUNK"), NULL, 0);
#endif
	credit_tx_init(&s.tx, e->c->geom.slots);
	if (cfg->p.any_slot &&
	    credit_tx_init_any(&s.tx, e->c->geom.slots,
			       wire_seq_span(e->c->geom.slots))) {
		engine_fail(e, XFER_FAIL_RESOURCE, -ENOMEM, "out of memory");
		goto out;
	}
	if (payload_resume_key(cfg->p.data_key, s.resume_key)) {
		engine_fail(e, XFER_FAIL_INTERNAL, -EIO, "cannot derive a key");
		goto out;
	}
	if (src_names_init(&s)) {
		engine_fail(e, XFER_FAIL_RESOURCE, -ENOMEM, "out of memory");
		goto out;
	}
	walk_list_start(&s.walk, cfg->srcs, cfg->nsrcs);
	s.jobs = calloc(s.njobs, sizeof(*s.jobs));
	s.fifo = calloc(s.fifo_cap, sizeof(*s.fifo));
	s.posted = calloc(s.njobs, sizeof(*s.posted));
	s.fblk = calloc(WIRE_FILES_MAX / WALK_BLOCK, sizeof(*s.fblk));
	s.fdone = calloc(WIRE_FILES_MAX / WALK_BLOCK, sizeof(*s.fdone));
	if (!s.jobs || !s.fifo || !s.posted || !s.fblk || !s.fdone) {
		engine_fail(e, XFER_FAIL_RESOURCE, -ENOMEM, "out of memory");
		goto out;
	}
	rc = jobs_init(&s);
	if (rc) {
		engine_fail(e, XFER_FAIL_RESOURCE, rc,
			    "cannot set up the workers: %s", strerror(-rc));
		goto out;
	}
	rc = engine_run(e, &source_role, &s);
	st->window_wait_s = (double)s.wait_ns / 1e9;
out:
	/* Workers may still hold jobs: stop them before freeing. */
	workq_destroy(e->wq);
	e->wq = NULL;
	/* Blocks of finished files are gone already (NULL). */
	for (size_t b = 0; s.fblk && b < s.nfblk; b++) {
		for (size_t i = 0; s.fblk[b] && i < WALK_BLOCK; i++) {
			struct src_file *f = &s.fblk[b][i];

			if (b * WALK_BLOCK + i >= s.nfiles)
				break;
			src_close_file(f);
			ck_sha256_destroy(f->tree);
		}
		free(s.fblk[b]);
	}
	free(s.fblk);
	free(s.fdone);
	jobs_free(&s);
	free(s.fifo);
	free(s.posted);
	free(s.by_wire);
	beneath_flush(&s);
	free(s.failed_dir);
	walk_free(&s.walk);
	src_names_free(&s);
	src_links_free(&s);
	credit_tx_release(&s.tx);
	return e->fail ? e->err : 0;
}
