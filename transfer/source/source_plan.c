/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The source's plan: the walk (walk.h) listed as the plan needs it and
 * turned into an ordered fifo of items, FILE, CHUNK..., FILE_END for each
 * entry and DONE at the end. FILE goes out as soon as it is planned, so
 * the sink learns of files ahead of their data; each CHUNK takes a staging
 * buffer (a job) that a worker fills. The fifo and the files' wire ids are
 * source_queue.c's; small files go into packs (source_pack.c).
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
#include "util/io.h"
#include "util/log.h"

/*
 * Whether w may go as a regular FILE, one of the files in flight that the
 * sink bounds (wire.h): a regular file, or a failure, which goes as one.
 */
static bool may_fly(const struct walk_entry *w)
{
	return w->kind == WIRE_KIND_FILE || w->kind == WIRE_KIND_HARDLINK ||
	       w->err;
}

/*
 * Gives f its wire id and sends its FILE (or, failed, FILE and an aborting
 * FILE_END), or queues that behind a pack still to be posted. A failure on
 * the client's own side is only reported: the user is here.
 */
static int tell(struct source *s, struct src_file *f)
{
	if (f->err) {
		if (engine_user_is_peer(s->e))
			log_info("%s", f->errmsg); /* the client prints it */
		else
			log_err("%s", f->errmsg);
		if (!s->cfg->p.server) {
			src_report(s, f, f->err, f->errmsg, NULL, 0);
			src_retire(s, f); /* f may be gone */
			return 0;
		}
	}
	src_announce(s, f);
	/*
	 * A failure goes as a regular FILE (src_send_failure); a hard link
	 * waits on the sink for its file, in flight as well.
	 */
	if (f->err || may_fly(f->w)) {
		f->in_flight = true;
		s->inflight++;
	}
	f->asking = s->ask && f->w->kind == WIRE_KIND_FILE && !f->err;
	if (!f->err)
		src_started(s, f);
	if (s->held) {
		f->deferred = true;
		s->held++;
		src_fifo_push(s, IT_FILE, f, NULL);
		return 0;
	}
	return f->err ? src_send_failure(s, f) : src_send_file(s, f);
}

/*
 * A range (rdcp-mpi's split) goes only where the sink can combine it:
 * CRC32, chunk-aligned, inside the file as it is now. f failed if not.
 */
static void range_check(struct source *s, struct src_file *f)
{
	const struct xfer_range *r = f->w->range;

	if (s->cfg->p.csum != XFER_CSUM_CRC32)
		file_fail(f, -EINVAL,
			  "'%s': a byte range needs --checksum crc32 (range "
			  "CRCs combine into the file's; SHA-256 digests do "
			  "not)",
			  f->path);
	else if (r->off % s->chunk_size ||
		 (r->len % s->chunk_size &&
		  r->off + r->len != (uint64_t)f->st.st_size))
		file_fail(f, -EINVAL,
			  "'%s': range %u of %u is not aligned to the chunk "
			  "size (%u)",
			  f->path, r->idx + 1, r->count, s->chunk_size);
	else if (r->off + r->len > (uint64_t)f->st.st_size)
		file_fail(f, -ESTALE,
			  "'%s' changed while the copy ran: its range %u of "
			  "%u is no longer in it",
			  f->path, r->idx + 1, r->count);
}

/* Opens the next entry and announces it; failures are reported now. */
static int open_next(struct source *s)
{
	struct src_file *f = src_file_at(s, s->next_file++);
	int rc;

	f->t0 = clock_now_s();
	f->st = f->w->st;
	if (f->w->err) {
		file_fail(f, f->w->err, "%s",
			  f->w->errmsg ? f->w->errmsg : strerror(-f->w->err));
		return tell(s, f);
	}
	/* -H: another name of a file sent already goes as a link to it */
	rc = src_links_find(s, f);
	if (rc < 0)
		return engine_fail(s->e, XFER_FAIL_RESOURCE, rc,
				   "out of memory");
	if (f->w->kind != WIRE_KIND_FILE)
		return tell(s, f);
	/*
	 * Asked first, a file is opened once the sink wants it: not a range
	 * (checked against the file now), nor a sparse file (its holes are
	 * found through the fd as its chunks are planned).
	 */
	f->lazy = s->ask && !f->w->range && !src_file_sparse(f);
	if (f->lazy)
		goto announce;
	f->fd = walk_open(&s->walk, f->w);
	if (f->fd < 0)
		file_fail(f, f->fd, "cannot open '%s': %s", f->path,
			  strerror(-f->fd));
	else if (fstat(f->fd, &f->st) < 0)
		file_fail(f, -errno, "cannot stat '%s': %s", f->path,
			  strerror(errno));
	else if (!S_ISREG(f->st.st_mode))
		file_fail(f, -EINVAL, "cannot send '%s': not a regular file",
			  f->path);
	else if (f->w->range)
		range_check(s, f);
	if (f->err) {
		if (f->fd >= 0)
			close(f->fd);
		f->fd = -1;
		return tell(s, f);
	}
	posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	src_open_direct(s, f);
announce:
	if (src_links_add(s, f))
		return engine_fail(s->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	if (s->cfg->p.csum == XFER_CSUM_SHA256) {
		rc = ck_sha256_create(&f->tree);
		if (rc)
			return engine_fail(s->e, XFER_FAIL_RESOURCE, rc,
					   "cannot start SHA-256");
	}
	rc = tell(s, f);
	if (rc)
		return rc;
	/* Asked first: planned once the HAVE wants it (src_ask_answered). */
	if (f->lazy && f->asking && !f->deferred && !f->err) {
		f->awaiting = true;
		s->awaiting++;
		return 0;
	}
	if (f->w->range)
		f->next_off = f->crc_at = f->w->range->off;
	s->cur = f;
	if (!f->deferred)
		src_fifo_push(s, IT_FILE, f, NULL);
	return 0;
}

/*
 * Moves the planning cursor past chunks that lie wholly in a hole: they are
 * not sent, and the sink's file (sized up front) keeps them as holes. The
 * chunk grid stays aligned, so offsets remain multiples of the chunk size.
 * Not with --resume, where every chunk is compared with the sink's: holes
 * read as zeros, and a zero chunk matches only where the sink has zeros.
 * Nor for a file not announced sparse: the sink wants all its chunks.
 */
static bool skip_hole(struct source *s, struct src_file *f)
{
	off_t d;
	uint64_t aligned;

	if (s->compare || !src_file_sparse(f))
		return false;
	d = lseek(f->fd, (off_t)f->next_off, SEEK_DATA);
	if (d < 0 && errno == ENXIO) {
		f->next_off = (uint64_t)f->st.st_size;
		return true;
	}
	if (d < 0)
		return false; /* no SEEK_DATA here: read everything */
	aligned = (uint64_t)d - (uint64_t)d % s->chunk_size;
	if (aligned <= f->next_off)
		return false;
	f->next_off = aligned;
	return true;
}

void src_ask_answered(struct source *s, struct src_file *f)
{
	if (!f->awaiting)
		return;
	f->awaiting = false;
	s->awaiting--;
	if (f->skip)
		return; /* kept: nothing of it is planned */
	if (s->ready_tail)
		s->ready_tail->ready_next = f;
	else
		s->ready_head = f;
	s->ready_tail = f;
}

/*
 * How long one call may walk and open before it hands the thread back to
 * the engine: a list of names that all fail, or a tree whose entries are
 * all filtered out, adds no job, and walking it whole in one call would
 * leave the connection unread and unanswered (no keepalive) for as long
 * as it takes, until one side says the other is gone.
 */
#define SRC_PLAN_SLICE_MS 50

int src_plan(struct source *s)
{
	uint64_t t0 = clock_now_ms();
	bool idle;
	int n = 0;

	while (!s->e->fail && s->fifo_len + 1 < s->fifo_cap) {
		struct src_file *f = s->cur;
		struct src_job *j;

		if (!f && s->ready_head) { /* asked first, and wanted */
			f = s->cur = s->ready_head;
			s->ready_head = f->ready_next;
			if (!s->ready_head)
				s->ready_tail = NULL;
			f->ready_next = NULL;
			if (f->err)
				f->next_off = src_file_end(f); /* its abort */
			src_fifo_push(s, IT_FILE, f, NULL);
			n++;
			continue;
		}
		if (!f) {
			if (clock_now_ms() - t0 >= SRC_PLAN_SLICE_MS)
				return n + 1; /* more at once: not idle */
			if (s->next_file == s->nfiles && !s->walk.done) {
				if (src_more_files(s))
					return -1;
				/*
				 * No name yet: a pull's feed comes with a
				 * message; a non-blocking list (rdcp-mpi)
				 * with nothing the engine waits on, so it
				 * looks again soon.
				 */
				idle = s->next_file == s->nfiles &&
				       s->walk.starved;
				s->e->nap_ms = idle && s->walk.list ? 1 : 0;
				if (idle)
					break; /* until more names come */
				continue;
			}
			if (s->next_file == s->nfiles) {
				if (s->awaiting)
					break; /* their answers plan more */
				if (!s->done_planned) {
					src_fifo_push(s, IT_DONE, NULL, NULL);
					s->done_planned = true;
					n++;
				}
				break;
			}
			if (src_packable(s, src_file_at(s, s->next_file))) {
				int rc = s->njobs - s->free_jobs < s->pack_ahead
						 ? src_plan_pack(s)
						 : 0;

				if (rc < 0)
					return -1;
				if (!rc)
					break;
			} else if (s->inflight >= s->inflight_max &&
				   may_fly(src_file_at(s, s->next_file)->w)) {
				break; /* until a result comes (wire.h) */
			} else if (open_next(s)) {
				return -1;
			}
			n++;
			continue;
		}
		if (f->next_off >= src_file_end(f)) {
			src_fifo_push(s, IT_END, f, NULL);
			s->cur = NULL;
			n++;
			continue;
		}
		if (f->skip)
			f->next_off = src_file_end(f);
		if (f->skip || skip_hole(s, f))
			continue;
		j = src_take_job(s);
		if (!j)
			break;
		j->item.fn = src_read_chunk;
		j->f = f;
		j->offset = f->next_off;
		j->len =
			(uint32_t)(src_file_end(f) - f->next_off < s->chunk_size
					   ? src_file_end(f) - f->next_off
					   : s->chunk_size);
		j->status = 0;
		j->crc = 0;
		j->summed = j->answered = j->matched = false;
		f->next_off += j->len;
		src_fifo_push(s, IT_CHUNK, f, j);
		/*
		 * Asked first (-n, -u, --sync): read only what the sink
		 * wants, once its HAVE says so (on_have): a file kept as it
		 * is costs no read.
		 */
		if (f->asking && !f->have_done) {
			j->state = JOB_WAITING;
		} else {
			src_push_chunk(s, j);
		}
		n++;
	}
	return n;
}
