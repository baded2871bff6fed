/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's chunks: the engine thread checks each arriving immediate and
 * slot header (cheap, and every field is untrusted) and hands the slot to
 * a worker, which opens sealed chunks, inflates compressed ones, checks
 * the chunk CRC32, computes the chunk SHA-256 when asked, and pwrites the
 * payload: straight from the ring slot (or the job's scratch buffer) with
 * O_DIRECT when its file goes direct (direct.h), the unaligned tail of a
 * last chunk through the page cache. Several workers write one file at
 * once at their own offsets; its space was reserved up front (fallocate),
 * so on ext4 and XFS direct writes into it share the inode lock instead
 * of queueing on it as buffered writes do. Back in the engine thread the
 * chunk's slot is drained and its digests are folded into its file's in
 * offset order; slots go back to the source in order, or with any slot
 * as soon as each is drained (credit.h).
 * Packed slots go to sink_pack.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/session/payload.h"
#include "transfer/fs/place.h"
#include "transfer/session/report.h"
#include "transfer/sink/sink_int.h"
#include "util/checksum.h"
#include "util/io.h"
#include "util/log.h"

static void chunk_done(struct workq_item *item);

static void write_chunk(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	const uint8_t *raw;
	uint32_t crc = 0;

	j->status = sink_open_payload(k, j, &raw);
	if (j->status)
		return;
	if (k->p->csum != XFER_CSUM_NONE || session_compares(k->p)) {
		crc = ck_crc32(0, raw, j->h.raw_len);
		if (!(j->h.flags & WIRE_SLOT_ENCRYPTED) && crc != j->h.crc) {
			j->status = -EBADMSG;
			return;
		}
	}
	j->crc = crc;
	/* Compared (--resume) the file is read back whole at the end instead. */
	if (k->p->csum == XFER_CSUM_SHA256 && !session_compares(k->p)) {
		j->status = ck_sha256(raw, j->h.raw_len, j->sha);
		if (j->status)
			return;
	}
	/*
	 * Straight from the ring slot (or scratch) when the file goes direct;
	 * with an io_uring the pool writes it while this worker goes on.
	 */
	if (workq_io_async(k->e->wq))
		j->status = direct_pwrite_async(&j->f->dio, j->f->fd, raw,
						j->h.raw_len, j->h.offset,
						&j->item);
	else
		j->status = direct_pwrite(&j->f->dio, j->f->fd, raw,
					  j->h.raw_len, j->h.offset);
}

/*
 * The sink's writes in flight (util/workq.h): --io-depth, at most the
 * slots (a write holds its slot), all of them by default: by Little's
 * law a session at R chunks a second needs R x (CPU + device time) in
 * flight, 51 at 400 Gb/s with 1 MiB chunks and 1 ms per write
 * (doc/PERFORMANCE.md, "A model of line rate"), and the window, at
 * least 64 slots, covers that where it covers the link. Quiet when the
 * kernel refuses io_uring (a container's seccomp, io_uring_disabled):
 * the workers write, as before. Started with the session's first file
 * that goes direct, so that a session that has none (tmpfs, small
 * files) pins no pages for it.
 */
static void start_io(struct sink *k)
{
	unsigned int depth = k->e->o->link.io_depth, n = k->e->c->geom.slots;
	int rc;

	if (depth == XFER_IO_DEPTH_OFF || workq_io_async(k->e->wq))
		return;
	if (!depth || depth > n)
		depth = n;
	rc = workq_io_start(k->e->wq, depth, cm_slot(k->e->c, 0),
			    (size_t)n * k->chunk_size);
	if (rc)
		log_debug("no io_uring for the writes (%s): the %u workers "
			  "write",
			  strerror(-rc), k->e->workers);
	else
		log_debug("writes through an io_uring, %u in flight", depth);
}

void sink_size_file(struct sink *k, struct snk_file *f, bool sparse)
{
	uint64_t avail = 0;
	bool forced;
	int rc = 0;

	if (!sparse && !(k->p->flags & WIRE_HELLO_SPARSE))
		rc = place_allocate(f->fd, f->size);
	if (rc == -ENOSPC) {
		(void)place_check_space(f->fd, f->size, &avail);
		sink_no_space(f, f->size, avail);
	} else if (rc) {
		file_fail(f, rc, "cannot allocate space for '%s': %s",
			  f->n.shown, strerror(-rc));
	} else if (ftruncate(f->fd, (off_t)f->size) < 0) {
		file_fail(f, -errno, "cannot size '%s': %s", f->n.shown,
			  strerror(errno));
	}
	if (f->err || !direct_wanted(k->p->flags, f->size, &forced))
		return;
	rc = direct_open(f->fd, true, &f->dio);
	if (!rc) {
		log_debug("writing '%s' with O_DIRECT (alignment %u)",
			  f->n.shown, f->dio.align);
		start_io(k);
	}
	/* Auto falls back quietly; --direct says so, once a session. */
	if (rc && forced && !k->direct_told) {
		k->direct_told = true;
		log_warn("cannot write '%s' with O_DIRECT (%s): writing through "
			 "the page cache",
			 f->n.shown, direct_why(rc));
	}
}

/*
 * Whether the slot at the cursor may be taken now: 0 yes, 1 it waits for
 * its file's announcement (parked), or the engine's error.
 */
static int check_parked(struct sink *k, const struct wire_slot_hdr *h)
{
	bool packed = h->flags & WIRE_SLOT_PACKED;

	if (k->done)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote chunk %llu after saying it was "
				   "done",
				   k->e->c->peer, (unsigned long long)h->seq);
	/* A pack announces its own files, the first of them next. */
	if (h->file_id < WIRE_FILES_MAX &&
	    (packed ? h->file_id > k->nfiles : h->file_id >= k->nfiles))
		return 1;
	return 0;
}

/* Takes the slot at the cursor, seq: 0, 1 parked, or the engine's error. */
static int take_slot(struct sink *k, unsigned int slot, uint64_t seq)
{
	struct engine *e = k->e;
	struct wire_slot_hdr h;
	struct snk_file *f;
	struct snk_job *j;
	struct snk_fold *r;
	uint64_t idx, want;
	int rc;

	/* Header and payload are in place: the header's write came last. */
	rc = wire_slot_decode(cm_slot_hdr(e->c, slot), &h);
	if (rc == 0 && h.seq == seq) {
		rc = check_parked(k, &h);
		if (rc)
			return rc;
	}
	credit_rx_take(&k->rx);
	if (rc == 0 && h.seq == seq && (h.flags & WIRE_SLOT_PACKED))
		return sink_pack_arrived(k, &h, slot);
	f = rc ? NULL : sink_live_find(k, h.file_id);
	if (rc == 0 &&
	    (h.seq != seq || !f || h.len > k->chunk_size ||
	     !sink_flags_ok(k, h.flags) ||
	     (!(h.flags & WIRE_SLOT_COMPRESSED) && h.raw_len != h.len)))
		rc = -EPROTO;
	if (rc)
		return engine_fail(e, XFER_FAIL_PROTOCOL, rc,
				   "%s wrote a bad slot header (seq %llu)",
				   e->c->peer, (unsigned long long)seq);
	idx = h.offset / k->chunk_size;
	want = idx < f->nslots ? f->size - h.offset : 0;
	if (want > k->chunk_size)
		want = k->chunk_size;
	if (f->kind != WIRE_KIND_FILE || f->ended || h.offset % k->chunk_size ||
	    idx >= f->nslots || h.raw_len != want || idx < f->next_idx ||
	    f->finalizing || (f->cmp && idx >= f->match_next))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a chunk outside '%s' (offset %llu, "
				   "%u bytes)",
				   e->c->peer, f->n.shown,
				   (unsigned long long)h.offset, h.raw_len);
	f->next_idx = idx + 1;
	f->received++;
	f->sent += h.len; /* what crossed the link, compressed or not */
	sink_progress(k, f->n.shown, h.raw_len);
	if (f->err || f->fd < 0) {
		/* Drain without writing; the result is already known. */
		if (credit_rx_drain(&k->rx, slot))
			return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
					   "slot accounting");
		return 0;
	}
	j = &k->jobs[slot];
	/* The slot's last use may have been a pack. */
	j->item.fn = write_chunk;
	j->item.after = chunk_done;
	j->h = h;
	j->f = f;
	j->index = idx;
	j->status = 0;
	j->fold = (unsigned int)(seq % k->nfolds);
	r = &k->folds[j->fold];
	r->offset = h.offset;
	r->raw_len = h.raw_len;
	r->done = false;
	r->next = -1;
	if (f->tail >= 0)
		k->folds[f->tail].next = (int)j->fold;
	else
		f->head = (int)j->fold;
	f->tail = (int)j->fold;
	f->inflight++;
	workq_push(e->wq, &j->item);
	return 0;
}

int sink_take_data(struct sink *k)
{
	uint64_t seq;
	int slot, rc;

	while (!k->e->fail && (slot = credit_rx_next(&k->rx, &seq)) >= 0) {
		rc = take_slot(k, (unsigned int)slot, seq);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return 0;
}

bool sink_parked(const struct sink *k)
{
	uint64_t seq;

	return credit_rx_next(&k->rx, &seq) >= 0;
}

int sink_on_data(struct engine *e, const struct cm_event *ev)
{
	struct sink *k = e->role_data;
	uint64_t seq;

	if (credit_rx_arrive(&k->rx, ev->imm, &seq) < 0)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote out of turn (immediate 0x%08x: "
				   "%s): credit protocol violated",
				   e->c->peer, ev->imm,
				   credit_rx_refusal(&k->rx, ev->imm));
	if (ev->len != WIRE_SLOT_HDR)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote a bad slot header (seq %llu)",
				   e->c->peer, (unsigned long long)seq);
	return sink_take_data(k);
}

/* A chunk's digests into its file's, in offset order. */
static void fold(struct sink *k, struct snk_file *f, const struct snk_fold *r)
{
	if (f->err || f->cmp)
		return; /* failed, or --resume: read back at the end */
	sink_range_fold_holes(k, f, r->offset);
	f->crc_at = r->offset + r->raw_len;
	f->crc = ck_crc32_combine(f->crc, r->crc, r->raw_len);
	if (f->tree && ck_sha256_update(f->tree, r->sha, CK_SHA256_LEN))
		file_fail(f, -EIO, "SHA-256 failed");
}

/*
 * The engine thread: a worker wrote (or refused) a chunk. Its slot is
 * drained now (released at once with any slot, else once every earlier
 * slot is: credit.h); its digests wait in its fold record until every
 * earlier chunk of the file is folded in.
 */
static void chunk_done(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	struct snk_file *f = j->f;
	struct snk_fold *r = &k->folds[j->fold];

	if (!j->status)
		j->status = j->item.io.res; /* the pool's write, if any */
	if (j->status == -EBADMSG)
		file_fail(f, -EBADMSG,
			  "'%s': chunk at offset %llu failed its %s check "
			  "(corrupted in transit); not placed",
			  f->n.shown, (unsigned long long)j->h.offset,
			  j->h.flags & WIRE_SLOT_ENCRYPTED ? "AES-GCM"
							   : "CRC32");
	else if (j->status)
		file_fail(f, j->status, "cannot write '%s': %s", f->n.shown,
			  strerror(-j->status));
	r->crc = j->crc;
	memcpy(r->sha, j->sha, CK_SHA256_LEN);
	r->done = true;
	if (credit_rx_drain(&k->rx, j->slot)) {
		engine_fail(k->e, XFER_FAIL_INTERNAL, -EPROTO,
			    "slot accounting");
		return;
	}
	while (f->head >= 0 && k->folds[f->head].done) {
		struct snk_fold *h = &k->folds[f->head];

		fold(k, f, h);
		f->head = h->next;
		h->done = false;
		f->inflight--;
	}
	if (f->head < 0)
		f->tail = -1;
	sink_maybe_finalize(k, f);
}

int sink_jobs_init(struct sink *k, unsigned int n)
{
	int rc;

	k->jobs = calloc(n, sizeof(*k->jobs));
	k->nfolds = k->rx.any ? k->rx.span : n;
	k->folds = calloc(k->nfolds, sizeof(*k->folds));
	if (!k->jobs || !k->folds)
		return -ENOMEM;
	for (unsigned int i = 0; i < n; i++) {
		struct snk_job *j = &k->jobs[i];

		j->item.fn = write_chunk;
		j->item.after = chunk_done;
		j->k = k;
		j->slot = i;
		rc = payload_init(&j->pl, k->chunk_size,
				  k->p->flags & WIRE_HELLO_COMPRESS,
				  k->p->data_key);
		if (rc)
			return rc;
	}
	return 0;
}
