/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The data sink: takes chunks out of the ring, verifies them, writes them
 * to a temporary file beside the target, and gives the target its final
 * name only after the whole file has been verified (sink_final.c).
 *
 * Each FILE is checked and mapped beneath DEST (sink_names.c), then a
 * regular file gets its temporary; its chunks (sink_chunk.c) are written
 * by workers, and when FILE_END has come and every chunk of the file is
 * written, the file is finalized. Directories (sink_dir.c) and symlinks
 * are made as they are announced. Placement itself is place.c's.
 *
 * Asked first (--resume, --no-clobber, --update, --sync), the sink answers
 * a FILE with HAVE (sink_resume.c, sink_sync.c). Temporaries of failed files
 * are removed, except with --resume, which keeps them for the next attempt
 * unless their content failed to verify. Packed slots of small files:
 * sink_pack.c.
 *
 * This file: FILE and FILE_END, the engine role, setup and teardown; the
 * top of the sink, which no other sink file calls. Below it, each file
 * calls only files further down: sink_chunk, sink_pack > sink_resume,
 * sink_dry > sink_final > sink_file > sink_range, sink_dir > sink_meta;
 * sink_dry > sink_link, sink_special > sink_file; sink_link > sink_names
 * > sink_want > sink_list. Hard links (-H) are sink_link's, device nodes,
 * FIFOs and sockets (-D) sink_special's.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "transfer/session/payload.h"
#include "transfer/fs/place.h"
#include "transfer/session/report.h"
#include "transfer/sink/sink_int.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

/* ---- files in flight ---- */

/* ---- FILE: symlinks ---- */

/*
 * Whether what is at f's name stays: -n, -u, or --sync's check passed
 * (link: a symlink's target). *compare: --sync checksum, a regular file
 * of the same size is here, to be compared chunk by chunk.
 */
static bool keep_existing(struct sink *k, struct snk_file *f, const char *link,
			  bool *compare)
{
	uint32_t flags = k->p->flags;
	enum sink_sync_verdict v;

	*compare = false;
	if ((flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE)) &&
	    place_keeps(f->dirfd, f->n.name, flags & WIRE_HELLO_NO_CLOBBER,
			&f->times[1]))
		return true;
	v = sink_sync_check(k, f, link, false);
	*compare = v == SINK_SYNC_COMPARE;
	return v == SINK_SYNC_KEEP;
}

static void make_symlink(struct sink *k, struct snk_file *f, const char *to)
{
	const char *what;
	int rc = place_symlink(f->dirfd, f->n.name, f->n.tmp, to,
			       sink_preserving(k) ? f->times : NULL, &what);

	if (rc)
		file_fail(f, rc, "cannot %s '%s': %s", what, f->n.shown,
			  strerror(-rc));
	else /* the link itself (lchown): a link has no setuid bit */
		(void)sink_owner_apply(k, f->dirfd, f->n.name, &f->owner);
}

/* ---- FILE: regular files ---- */

/* HAVE: nothing here, send it all. */
static int send_all(struct sink *k, struct snk_file *f)
{
	struct wire_msg m = { .type = WIRE_HAVE };

	m.u.have.file_id = f->id;
	return engine_send(k->e, &m);
}

/*
 * A byte range of a split file (sink_range.c): the shared temporary and
 * the state joined; with --resume a range verified before is skipped and
 * goes straight to the step that may place the file.
 */
static int open_range(struct sink *k, struct snk_file *f,
		      const struct wire_file *wf)
{
	struct wire_msg m = { .type = WIRE_HAVE };
	bool verified;

	if (sink_range_open(k, f, wf, &verified))
		return -1;
	if (!session_asks(k->p))
		return 0; /* a failed range's chunks are drained */
	if (f->err)
		return sink_skip_file(k, f);
	if (!verified)
		return send_all(k, f);
	m.u.have.file_id = f->id;
	m.u.have.flags = WIRE_HAVE_SKIP;
	if (engine_send(k->e, &m))
		return -1;
	f->skipped = true;
	sink_finalize(k, f);
	return 0;
}

static int open_file(struct sink *k, struct snk_file *f,
		     const struct wire_file *wf)
{
	bool ask = session_asks(k->p), compare = false;

	if (!f->err && ask && keep_existing(k, f, NULL, &compare)) {
		/* -n, -u, --sync: a split file's every range too */
		f->skipped = !f->err; /* unless -p's mode or times failed */
		f->kept_range = wf->flags & WIRE_FILE_RANGE;
		f->kept_final = f->kept_range && !wf->range_idx;
		if (f->skipped && !f->kept_range)
			return sink_send_kept(k, f); /* HAVE and result in one */
		return sink_skip_file(k, f);
	}
	if (wf->flags & WIRE_FILE_RANGE) {
		/* each range its bytes, kept: the split places the file */
		sink_charge(k, f, wf->range_len, false, true);
		return open_range(k, f, wf);
	}
	/* the receiver's byte limits, before anything is opened */
	sink_charge(k, f, f->size, true, false);
	if (f->err)
		return ask ? sink_skip_file(k, f) : 0;
	/* --sync checksum: only the chunks that differ come */
	if (sink_resuming(k) || compare)
		return sink_resume_open(k, f, wf->flags & WIRE_FILE_SPARSE);
	if (sink_open_tmp(k, f, false) == 0) {
		/*
		 * Fail fast when the file cannot fit. A sparse source's size
		 * says little of the space its data needs: then a full disk
		 * shows up at the write instead, failing the same way.
		 */
		if (!(wf->flags & WIRE_FILE_SPARSE))
			sink_check_space(f, f->size);
		/* Holes the source skipped stay holes. */
		if (!f->err)
			sink_size_file(k, f, wf->flags & WIRE_FILE_SPARSE);
	}
	if (!ask)
		return 0;
	if (f->err)
		return sink_skip_file(k, f);
	return send_all(k, f);
}

static int on_file(struct sink *k, const struct wire_file *wf)
{
	struct wire_xattrs *x;
	struct snk_file *f;
	bool compare;
	int rc;

	if (wf->file_id != k->nfiles || k->nfiles >= WIRE_FILES_MAX)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced file %u out of order",
				   k->e->c->peer, wf->file_id);
	if ((wf->flags & WIRE_FILE_OWNER) && !sink_owners_asked(k))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent an owner that -o/-g did not ask "
				   "for: refused",
				   k->e->c->peer);
	/* Ranges are rdcp-mpi's pushes: never on a pull (-n, -u, --dry-run
	 * would answer them before open_range looks). */
	if ((wf->flags & WIRE_FILE_RANGE) && !k->p->server)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a byte range of a file on a pull: "
				   "refused",
				   k->e->c->peer);
	if (wf->kind == WIRE_KIND_SPECIAL && sink_special_check(k, wf))
		return -1;
	/* The source keeps to the bound: only a broken one goes past it. */
	if ((wf->kind == WIRE_KIND_FILE || wf->kind == WIRE_KIND_HARDLINK) &&
	    k->nlive >= session_inflight_max(k->p))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced file %u with %u files still "
				   "unfinished (%u at most): refused",
				   k->e->c->peer, wf->file_id, k->nlive,
				   session_inflight_max(k->p));
	if (sink_xattrs_take(k, wf, &x))
		return -1;
	f = calloc(1, sizeof(*f));
	if (!f) {
		free(x);
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	}
	f->xattrs = x;
	/* Directories and symlinks too, while on_file makes them. */
	sink_live_add(k, f);
	k->nfiles++;
	k->active++;
	f->id = wf->file_id;
	f->kind = wf->kind;
	f->fd = f->dirfd = f->cand = f->dio.fd = -1;
	f->head = f->tail = -1;
	f->size = wf->kind == WIRE_KIND_SPECIAL ? 0 : wf->size;
	f->rdev = wf->kind == WIRE_KIND_SPECIAL ? wf->size : 0;
	if (wf->kind == WIRE_KIND_FILE)
		k->bytes_told += wf->size;
	f->holes_ok = (wf->flags & WIRE_FILE_SPARSE) ||
		      (k->p->flags & WIRE_HELLO_SPARSE) ||
		      session_compares(k->p);
	f->mode = wf->mode;
	f->times[0].tv_sec = wf->atime_sec;
	f->times[0].tv_nsec = wf->atime_nsec;
	f->times[1].tv_sec = wf->mtime_sec;
	f->times[1].tv_nsec = wf->mtime_nsec;
	if (wf->flags & WIRE_FILE_OWNER)
		sink_owner_map(k, &wf->owner, &f->owner);
	f->t0 = clock_now_s();
	f->nslots = (f->size + k->chunk_size - 1) / k->chunk_size;
	if (!session_compares(k->p) && k->p->csum == XFER_CSUM_SHA256 &&
	    f->kind == WIRE_KIND_FILE) {
		rc = ck_sha256_create(&f->tree);
		if (rc)
			return engine_fail(k->e, XFER_FAIL_RESOURCE, rc,
					   "cannot start SHA-256");
	}
	rc = sink_map_path(k, f, wf->path);
	if (!rc && sink_deleting(k))
		rc = sink_delete_note(
			k, sink_delete_key(wf->path, strlen(wf->path),
					   f->kind == WIRE_KIND_DIR));
	if (!rc && (wf->flags & WIRE_FILE_LINKED))
		rc = sink_link_noted(k, f);
	if (!rc && f->kind == WIRE_KIND_HARDLINK)
		rc = sink_link_check(k, f, wf->link);
	if (rc)
		return rc;
	/*
	 * Its directory stays unfinished until it is placed or dropped (a
	 * hard link: made, once its file is).
	 */
	if (f->kind == WIRE_KIND_FILE || f->kind == WIRE_KIND_HARDLINK)
		f->dir = sink_dir_hold(k);
	sink_file_report(k, f, false, NULL, 0);
	/* What is here is told at most once a name (-n, -u, --resume). */
	/* A split file's ranges share a name: its state answers for them. */
	rc = f->kind != WIRE_KIND_DIR && session_asks(k->p) &&
			     !(wf->flags & WIRE_FILE_RANGE)
		     ? sink_ask_once(k, f)
		     : 0;
	if (rc == -ENOMEM)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	if (rc)
		file_fail(f, -EEXIST,
			  "'%s' was sent twice in one session: not "
			  "compared again",
			  f->n.shown);
	if (k->p->flags & WIRE_HELLO_DRY_RUN)
		return sink_dry_answer(k, f, wf->path, wf->link);
	switch (f->kind) {
	case WIRE_KIND_DIR:
		if (sink_make_dir(k, f, wf->path))
			return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
		return sink_send_result(k, f, NULL, 0);
	case WIRE_KIND_SYMLINK:
		if (!f->err && keep_existing(k, f, wf->link, &compare))
			f->skipped = !f->err;
		else if (!f->err)
			make_symlink(k, f, wf->link);
		if (f->skipped)
			return sink_send_kept(k, f);
		return sink_send_result(k, f, NULL, 0);
	case WIRE_KIND_HARDLINK:
		return sink_link_start(k, f);
	case WIRE_KIND_SPECIAL:
		return sink_make_special(k, f);
	default:
		return open_file(k, f, wf);
	}
}

/* ---- FILE_END ---- */

static int on_end(struct sink *k, const struct wire_file_end *end)
{
	struct snk_file *f;

	if (!(f = sink_live_find(k, end->file_id)) || f->ended ||
	    f->kind != WIRE_KIND_FILE || end->csum != (uint8_t)k->p->csum ||
	    /* --resume: every chunk was compared first, unless aborted */
	    (f->cmp && !(end->flags & WIRE_END_ABORT) &&
	     (f->comparing || f->match_next != f->nslots)))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s ended a file it never announced",
				   k->e->c->peer);
	f->ended = true;
	f->end = *end;
	if (end->flags & WIRE_END_ABORT) {
		file_fail(f, end->status < 0 ? end->status : -ECANCELED, "%s",
			  end->msg[0] ? end->msg
				      : "the sender gave up on the file");
		f->err_remote = true;
	}
	sink_maybe_finalize(k, f);
	return 0;
}

/* ---- engine role ---- */

static int snk_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct sink *k = e->role_data;
	int rc;

	switch (m->type) {
	case WIRE_CREDIT:
		return 0;
	case WIRE_XATTRS:
		return sink_on_xattrs(k, &m->u.xattrs);
	case WIRE_FILE:
		if (k->done)
			break;
		/* A chunk of it may have come first: the cursor goes on. */
		rc = on_file(k, &m->u.file);
		return rc ? rc : sink_take_data(k);
	case WIRE_FILE_END:
		if (!k->done)
			return on_end(k, &m->u.end);
		break;
	case WIRE_SUMS:
		return sink_on_sums(k, &m->u.sums);
	case WIRE_NAMES_ACK:
		if (k->list)
			return sink_list_on_ack(k, &m->u.names_ack);
		break;
	case WIRE_DONE:
		if (!k->done) {
			sink_delete_done(k, &m->u.done);
			k->done = true;
			/* Whatever waits now was written after it: refused. */
			return sink_take_data(k);
		}
		break;
	default:
		break;
	}
	return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
			   "%s sent an unexpected %s", e->c->peer,
			   wire_type_name(m->type));
}

/*
 * engine_role.ready: a message the source sent after writing slots waits
 * until every slot before its seq_end is taken, and a FILE after a pack's
 * files until that pack is (wire.h). Waiting is bounded: what is awaited
 * was written before the message, so a cursor parked on a chunk of a file
 * not yet announced means that FILE will never come.
 */
static int snk_ready(struct engine *e, const struct wire_msg *m)
{
	struct sink *k = e->role_data;
	uint64_t seq_end, room;

	if (k->done) /* nothing but CREDIT may come: snk_on_msg refuses */
		return 0;
	switch (m->type) {
	case WIRE_FILE:
		/* on_file refuses what is wrong in itself */
		if (m->u.file.file_id <= k->nfiles ||
		    m->u.file.file_id >= WIRE_FILES_MAX)
			return 0;
		/* Packs not taken yet could announce at most so many. */
		room = (credit_rx_post_limit(&k->rx) - k->rx.received) *
		       (uint64_t)WIRE_PACK_MAX_FILES;
		if (sink_parked(k) || m->u.file.file_id - k->nfiles > room)
			return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
					   "%s announced file %u out of order",
					   e->c->peer, m->u.file.file_id);
		return 1;
	case WIRE_FILE_END:
		seq_end = m->u.end.seq_end;
		break;
	case WIRE_DONE:
		seq_end = m->u.done.seq_end;
		break;
	case WIRE_NAMES_ACK:
		seq_end = m->u.names_ack.seq_end;
		break;
	default:
		return 0;
	}
	if (!credit_rx_could_post(&k->rx, seq_end))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent %s after chunk %llu, beyond the "
				   "credits it was given",
				   e->c->peer, wire_type_name(m->type),
				   (unsigned long long)seq_end);
	if (seq_end <= k->rx.received)
		return 0;
	if (sink_parked(k))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent %s before announcing the file of "
				   "chunk %llu",
				   e->c->peer, wire_type_name(m->type),
				   (unsigned long long)k->rx.received);
	return 1;
}

/*
 * The ring slots held now (arrived, taken or not, not yet released) into
 * the receiver's gauge: one relaxed add when the count changed, once an
 * engine turn, none on a client's sink.
 */
static void show_held(struct sink *k, int64_t held)
{
	if (!k->e->ring_held || held == k->held_shown)
		return;
	atomic_fetch_add_explicit(k->e->ring_held, held - k->held_shown,
				  memory_order_relaxed);
	k->held_shown = held;
}

static int snk_pump_role(struct engine *e);

/* A pull's list goes out as the receiver takes it, then the role's own. */
static int snk_pump(struct engine *e)
{
	struct sink *k = e->role_data;
	int n = sink_list_send(k);

	show_held(k, (int64_t)credit_rx_busy(&k->rx) + k->rx.waiting);

	return n + snk_pump_role(e);
}

static int snk_pump_role(struct engine *e)
{
	struct sink *k = e->role_data;
	struct wire_msg m = { .type = WIRE_CREDIT };
	int rc;

	/*
	 * What was kept while the messages that came were taken goes in
	 * one KEPT: the source's window of files in flight waits for it.
	 */
	if (k->kept_count)
		return sink_kept_flush(k) ? 0 : 1;
	/* -H: links whose files were placed (or failed) */
	rc = sink_links_pump(k);
	if (rc)
		return rc > 0 ? rc : 0;
	/* what this side could not keep, told to the client of a push */
	rc = sink_notes_flush(k);
	if (rc)
		return rc > 0;
	if (k->done && !k->active && !k->bye_sent) {
		sink_finish_dirs(k);
		/* --delete: the whole copy is verified, so now, then BYE */
		if (sink_delete_pending(k))
			return sink_delete_step(k);
		m.type = WIRE_BYE;
		m.u.bye.files_ok = k->st->files_ok;
		m.u.bye.files_failed = k->st->files_failed;
		m.u.bye.bytes = k->st->bytes;
		k->bye_sent = true;
		e->closing = true;
		return engine_send(e, &m) ? 0 : 1;
	}
	/* Hand released slots back: batched, or at once when idle. */
	if (!k->bye_sent && credit_rx_should_report(&k->rx) &&
	    engine_out_empty(e) && credit_ctrl_can_send(&e->cc, false)) {
		if (k->rx.any) { /* by name, up to WIRE_FREED_MAX a message */
			m.type = WIRE_FREED;
			m.u.freed.count = (uint16_t)credit_rx_freed(
				&k->rx, m.u.freed.slot, WIRE_FREED_MAX);
		}
		return engine_send(e, &m) ? 0 : 1;
	}
	return 0;
}

/*
 * BYE posted and completed; or posted and the connection closed: the
 * source hangs up once it has the BYE, and over RDMA its acknowledgement
 * (the BYE's completion here) may never come (test_bye_unacked_*).
 */
static bool snk_finished(const struct engine *e)
{
	const struct sink *k = e->role_data;

	return k->bye_sent && engine_out_empty(e) &&
	       (e->tx_inflight == 0 || e->flushed);
}

static uint32_t snk_slot_ack(struct engine *e, const uint8_t *msg)
{
	struct sink *k = e->role_data;

	if (k->rx.any) { /* the slots FREEDs named, in posting order */
		if (msg[0] == WIRE_FREED)
			k->freed_posted += wire_freed_count(msg);
		return (uint32_t)k->freed_posted;
	}
	k->rx.reported = k->rx.released;
	return (uint32_t)k->rx.released;
}

static int snk_on_write_done(struct engine *e, uint64_t wr_id)
{
	return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
			   "write completion on the sink");
}

static const struct engine_role sink_role = {
	.on_msg = snk_on_msg,
	.on_data = sink_on_data,
	.on_write_done = snk_on_write_done,
	.pump = snk_pump,
	.finished = snk_finished,
	.slot_ack = snk_slot_ack,
	.ready = snk_ready,
};

int sink_run(struct engine *e, const struct sink_target *t,
	     struct xfer_stats *st)
{
	struct sink k = { 0 };
	int rc;

	k.e = e;
	k.t = t;
	k.p = &t->p;
	k.st = st;
	k.chunk_size = e->c->geom.chunk_size;
	e->batch = session_asks(k.p);
	rc = payload_resume_key(t->p.data_key, k.resume_key);
	if (!rc)
		rc = k.p->any_slot ? credit_rx_init_any(
					     &k.rx, e->c->geom.slots,
					     wire_seq_span(e->c->geom.slots))
				   : credit_rx_init(&k.rx, e->c->geom.slots);
	if (!rc)
		rc = sink_jobs_init(&k, e->c->geom.slots);
	if (!rc)
		rc = sink_want_init(&k);
	if (!rc)
		rc = sink_list_init(&k);
	if (rc) {
		rc = engine_fail(e, XFER_FAIL_RESOURCE, rc,
				 "cannot set up the sink: %s", strerror(-rc));
		goto out;
	}
	rc = engine_run(e, &sink_role, &k);
	show_held(&k, 0);
out:
	/* Let the workers finish before their files and jobs go away. */
	workq_wait_idle(e->wq);
	/* Their results are not wanted now; every item lives in k. */
	(void)workq_take_done(e->wq);
	workq_destroy(e->wq);
	e->wq = NULL;
	/* Nothing more is finished: the session did not end well. */
	sink_dirs_drop(&k);
	sink_parent_forget(&k);
	while (k.nlive) /* removes unfinished temporaries */
		sink_file_free(&k, k.live[--k.nlive]);
	for (unsigned int i = 0; k.jobs && i < e->c->geom.slots; i++) {
		sink_pack_free(&k.jobs[i]);
		payload_release(&k.jobs[i].pl);
	}
	free(k.jobs);
	free(k.folds);
	free(k.xpending);
	hset_release(&k.asked);
	sink_links_free(&k);
	sink_delete_release(&k);
	sink_want_free(&k);
	sink_list_free(&k);
	credit_rx_release(&k.rx);
	return rc;
}
