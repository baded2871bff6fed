/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's side of --resume and of the questions a source asks first
 * (--no-clobber, --update): what is already here. --sync checksum takes
 * the same road against the file under its final name only.
 *
 * Each name is answered at most once a session. With --resume the sink
 * opens what an earlier attempt left (its temporary, else the old file),
 * sizes the temporary, and answers the FILE with HAVE asking for the
 * source's chunk digests, whether or not anything is here. The source
 * sends them in order (SUMS); a worker compares each with the digest of
 * this side's chunk and MATCH answers one bit a chunk. The sink never
 * sends anything of its own content: a peer learns only whether the chunk
 * it described is the one here, once per chunk, and only for a chunk that
 * is whole on both sides (a full chunk, or the last one of two files of
 * the same size), so that a short claim cannot test a prefix.
 * Matched chunks of the old file are copied into the temporary as they
 * are compared, unless the old file may stay as it is (same size, mode
 * and, with -p, mtime, and every chunk matches so far); at finalize the
 * whole file is read back for its digest.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/checksum.h"
#include "util/hset.h"
#include "util/io.h"
#include "util/key.h"
#include "util/log.h"

/* ---- each name once ---- */

int sink_ask_once(struct sink *k, const struct snk_file *f)
{
	return hset_add(&k->asked,
			hset_key(ck_fnv1a64(f->n.rel, strlen(f->n.rel))));
}

/* ---- FILE ---- */

/*
 * What an earlier attempt left, the temporary first, else the old file
 * (a regular file only, opened without blocking) into f->cand.
 */
static void find_candidate(const struct sink *k, struct snk_file *f)
{
	/* --sync checksum alone compares with the file, not a leftover */
	f->cand = sink_resuming(k) ? place_open_regular(f->dirfd, f->n.tmp)
				   : -1;
	if (f->cand >= 0)
		return; /* the temporary itself: keep what it holds */
	f->cand = place_open_regular(f->dirfd, f->n.name);
	if (f->cand >= 0)
		f->cand_final = true;
	else
		f->cand = -1;
}

/*
 * Whether the old file, if every chunk matches, can stay as it is: its
 * metadata is already what placing it would set, so nothing of it
 * changes. Otherwise a new file takes its name (another link to the old
 * inode keeps it as it was).
 */
static bool can_keep(const struct sink *k, const struct snk_file *f,
		     const struct stat *st)
{
	/* --sync checksum: kept, with -p its mode and times set at the end */
	if (k->p->sync == WIRE_SYNC_CHECKSUM)
		return (uint64_t)st->st_size == f->size;
	return (uint64_t)st->st_size == f->size &&
	       (st->st_mode & 07777) == (sink_final_mode(k, f->mode) & 07777) &&
	       sink_owner_matches(k, &f->owner, st) &&
	       (!sink_preserving(k) ||
		(st->st_mtim.tv_sec == f->times[1].tv_sec &&
		 st->st_mtim.tv_nsec == f->times[1].tv_nsec));
}

int sink_resume_open(struct sink *k, struct snk_file *f, bool sparse)
{
	struct wire_msg m = { .type = WIRE_HAVE };
	struct stat st;
	uint64_t held = 0;

	find_candidate(k, f);
	if (sink_open_tmp(k, f, !f->cand_final))
		return sink_skip_file(k, f);
	if (f->cand >= 0 && fstat(f->cand, &st) < 0) {
		close(f->cand);
		f->cand = -1;
	}
	if (f->cand >= 0) {
		f->found = true;
		f->cand_size = (uint64_t)st.st_size;
		if (f->cand_final)
			f->keeping = can_keep(k, f, &st);
		else
			held = (uint64_t)st.st_blocks * 512;
	}
	if (f->cand >= 0 && !f->cand_final) {
		/* The temporary itself: f->fd is all it needs now. */
		close(f->cand);
		f->cand = -1;
	}
	/*
	 * The space still needed: all of it but what the temporary holds
	 * (nothing when the old file is copied, which may not be needed
	 * when it is kept). A sparse claim cannot be checked up front: a
	 * full disk then shows at a write, failing the file the same way.
	 */
	if (!sparse && !f->keeping)
		sink_check_space(f, held < f->size ? f->size - held : 0);
	if (!f->err && ftruncate(f->fd, (off_t)f->size) < 0)
		file_fail(f, -errno, "cannot size '%s': %s", f->n.shown,
			  strerror(errno));
	if (f->err)
		return sink_skip_file(k, f);
	if (f->found && sink_resuming(k))
		log_info("resuming '%s': comparing what is here with the "
			 "source",
			 f->n.shown);
	f->cmp = true;
	m.u.have.file_id = f->id;
	m.u.have.flags = WIRE_HAVE_SUMS;
	return engine_send(k->e, &m);
}

/* ---- SUMS, the compare, MATCH ---- */

/*
 * Whether the chunk at off (len bytes) is whole in what was here: a full
 * chunk inside it, or the last chunk when both files have the same size.
 */
static bool whole_here(const struct sink *k, const struct snk_file *f,
		       uint64_t off, uint64_t len)
{
	if (!f->found)
		return false;
	if (len == k->chunk_size)
		return off + len <= f->cand_size;
	return f->cand_size == f->size;
}

/* Worker: this side's chunk at off of f into buf (len bytes, whole). */
static int read_here(const struct snk_file *f, uint64_t off, uint8_t *buf,
		     uint64_t len)
{
	int rc = io_pread_full(f->cand_final ? f->cand : f->fd, buf, len, off);

	return rc == -ENODATA ? -ESTALE : rc; /* it shrank meanwhile */
}

/* Worker: the old file's chunks [0, n) into the temporary. */
static int copy_prefix(const struct sink *k, const struct snk_file *f,
		       uint64_t n)
{
	uint8_t *buf = malloc(k->chunk_size);
	int rc = buf ? 0 : -ENOMEM;

	for (uint64_t i = 0; !rc && i < n; i++) {
		uint64_t off = i * k->chunk_size, len = f->size - off;

		if (len > k->chunk_size)
			len = k->chunk_size;
		rc = read_here(f, off, buf, len);
		if (!rc)
			rc = io_pwrite_full(f->fd, buf, len, off);
	}
	free(buf);
	return rc;
}

/* Worker: compares this side's chunks [match_next, cmp_to) of f. */
static void compare(struct workq_item *item)
{
	struct snk_work *w = (struct snk_work *)item;
	struct snk_file *f = w->f;
	const struct sink *k = w->k;
	uint64_t a = f->match_next;
	uint8_t *buf = malloc(k->chunk_size);
	uint8_t sha[CK_SHA256_LEN], sum[WIRE_SUM_LEN];
	int rc = buf ? 0 : -ENOMEM;

	memset(f->bits, 0, (f->sums_cap + 7) / 8);
	for (uint64_t i = a; !rc && i < f->cmp_to; i++) {
		uint64_t off = i * k->chunk_size, len = f->size - off;
		bool match = false;

		if (len > k->chunk_size)
			len = k->chunk_size;
		if (whole_here(k, f, off, len)) {
			rc = read_here(f, off, buf, len);
			if (!rc)
				rc = ck_sha256(buf, len, sha);
			if (!rc)
				rc = payload_resume_sum(k->resume_key, f->id, i,
							sha, sum);
			if (rc)
				break;
			match = key_equal(sum, f->sums[i % f->sums_cap],
					  WIRE_SUM_LEN);
		}
		if (match)
			f->bits[(i - a) / 8] |= (uint8_t)(1u << ((i - a) % 8));
		if (!f->cand_final)
			continue; /* the temporary: matched chunks are there */
		if (!match && f->keeping) {
			f->keeping = false; /* a new file: copy what matched */
			rc = copy_prefix(k, f, i);
		} else if (match && !f->keeping) {
			rc = io_pwrite_full(f->fd, buf, len, off);
		}
	}
	free(buf);
	if (rc) {
		/* Nothing more matches: the source sends the rest. */
		for (uint64_t i = a; i < f->cmp_to; i++)
			f->bits[(i - a) / 8] &=
				(uint8_t) ~(1u << ((i - a) % 8));
		w->err = rc;
		snprintf(w->errmsg, sizeof(w->errmsg),
			 "cannot reuse what is in '%s': %s", f->n.shown,
			 rc == -ESTALE ? "it changed while being resumed"
				       : strerror(-rc));
	}
}

static void start_compare(struct sink *k, struct snk_file *f);

/* The engine thread: a compare is done; answer it with MATCH. */
static void compared(struct workq_item *item)
{
	struct snk_work *w = (struct snk_work *)item;
	struct snk_file *f = w->f;
	struct sink *k = w->k;
	struct wire_msg m = { .type = WIRE_MATCH };
	uint64_t a = f->match_next;

	if (w->err)
		file_fail(f, w->err, "%s", w->errmsg);
	w->err = 0;
	m.u.match.file_id = f->id;
	while (a < f->cmp_to) {
		uint64_t n = f->cmp_to - a, o = a - f->match_next;

		if (n > WIRE_SUMS_MAX)
			n = WIRE_SUMS_MAX;
		memset(m.u.match.bits, 0, sizeof(m.u.match.bits));
		for (uint64_t i = 0; i < n; i++)
			if (f->bits[(o + i) / 8] & (1u << ((o + i) % 8)))
				m.u.match.bits[i / 8] |=
					(uint8_t)(1u << (i % 8));
		m.u.match.first = a;
		m.u.match.count = (uint16_t)n;
		if (engine_send(k->e, &m))
			return;
		a += n;
	}
	f->match_next = f->cmp_to;
	f->comparing = false;
	if (f->sums_next > f->match_next)
		start_compare(k, f);
	else
		sink_maybe_finalize(k, f);
}

static void start_compare(struct sink *k, struct snk_file *f)
{
	f->comparing = true;
	f->cmp_to = f->sums_next;
	sink_start_work(k, f, compare, compared);
}

int sink_on_sums(struct sink *k, const struct wire_sums *m)
{
	struct snk_file *f = sink_live_find(k, m->file_id);
	uint32_t cap;

	/*
	 * Each chunk's digest once, in order, only for a file the sink
	 * asked about, and never more ahead of the answers than the
	 * source's staging buffers (the ring's slots) can hold.
	 */
	cap = f && f->nslots < k->e->c->geom.slots ? (uint32_t)f->nslots
						   : k->e->c->geom.slots;
	if (!f || !f->cmp || f->ended || f->finalizing ||
	    m->first != f->sums_next || m->count > f->nslots - m->first ||
	    f->sums_next + m->count - f->match_next > cap)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent chunk digests out of turn",
				   k->e->c->peer);
	if (!f->sums) {
		f->sums_cap = cap;
		f->sums = malloc((size_t)cap * WIRE_SUM_LEN);
		f->bits = malloc((cap + 7) / 8);
		if (!f->sums || !f->bits)
			return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
	}
	for (uint16_t i = 0; i < m->count; i++)
		memcpy(f->sums[(m->first + i) % f->sums_cap], m->sums[i],
		       WIRE_SUM_LEN);
	f->sums_next += m->count;
	if (!f->comparing)
		start_compare(k, f);
	return 0;
}

/* ---- finalize ---- */
