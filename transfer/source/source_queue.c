/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The source's queue of planned items and its wire ids: the fifo of FILE,
 * CHUNK, FILE_END and DONE items that the planner (source_plan.c,
 * source_pack.c) fills and the poster (source_post.c) drains, the files
 * listed from the walk a block at a time, each file's wire id and the
 * blocks retired once every file in them is finished, FILE sent (ahead
 * of its data) and a file failed before any data. Calls no other source
 * file but source_file.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "transfer/source/source_int.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/idname.h"
#include "util/io.h"
#include "util/log.h"

/*
 * Room in by_wire for every file listed and not yet planned: each takes at
 * most one id, and src_announce cannot fail. The live ids move to the
 * front when that frees half of it, else it doubles: a copy of each id
 * at most once per id announced, and the array stays within twice the
 * ids of unfinished blocks.
 */
static int wire_room(struct source *s)
{
	size_t len = s->nwire - s->wire_base;
	size_t need = len + (s->nfiles - s->next_file), cap;
	uint32_t *v;

	if (s->wire_head + need <= s->wire_cap)
		return 0;
	if (need <= s->wire_cap && s->wire_head >= s->wire_cap / 2) {
		memmove(s->by_wire, s->by_wire + s->wire_head,
			len * sizeof(*s->by_wire));
		s->wire_head = 0;
		return 0;
	}
	cap = s->wire_cap ? 2 * s->wire_cap : WALK_BLOCK;
	while (cap < s->wire_head + need)
		cap *= 2;
	v = realloc(s->by_wire, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->by_wire = v;
	s->wire_cap = cap;
	return 0;
}

struct src_file *src_by_wire(const struct source *s, uint32_t id)
{
	uint32_t i;

	if (id < s->wire_base || id >= s->nwire)
		return NULL;
	i = s->by_wire[s->wire_head + (id - s->wire_base)];
	return s->fblk[i / WALK_BLOCK] ? src_file_at(s, i) : NULL;
}

/* Block b's files are all finished: they, their entries and ids go. */
static void release_block(struct source *s, size_t b)
{
	struct src_file *blk = s->fblk[b];

	for (size_t i = 0; i < WALK_BLOCK; i++) {
		src_close_file(&blk[i]);
		ck_sha256_destroy(blk[i].tree);
	}
	free(blk);
	s->fblk[b] = NULL;
	walk_release(&s->walk, b);
	while (s->wire_base < s->nwire &&
	       !s->fblk[s->by_wire[s->wire_head] / WALK_BLOCK]) {
		s->wire_base++;
		s->wire_head++;
	}
	if (s->wire_base == s->nwire)
		s->wire_head = 0;
}

void src_retire(struct source *s, struct src_file *f)
{
	size_t b = f->idx / WALK_BLOCK;

	/*
	 * Reported: no verdict may come. Out of the plan: no item, no
	 * worker and no planning holds it. Packed: its PACK_DONE came.
	 */
	if (f->finished || !f->result || f->items || s->cur == f ||
	    (f->packed && !f->pack_done))
		return;
	f->finished = true;
	if (++s->fdone[b] == WALK_BLOCK)
		release_block(s, b);
}

/*
 * Lists more of the walk and makes their files. The walk runs as the plan
 * needs it, so data flows while a big tree is still being listed.
 */
int src_more_files(struct source *s)
{
	int rc = walk_more(&s->walk, WALK_STEP);

	if (rc == -EIO && s->walk.list_err)
		return engine_fail(s->e, XFER_FAIL_LOCAL_IO, s->walk.list_err,
				   "cannot read the file list: %s",
				   strerror(-s->walk.list_err));
	if (rc)
		return engine_fail(s->e, XFER_FAIL_RESOURCE, rc,
				   "cannot list the sources: %s",
				   strerror(-rc));
	if (s->walk.n > WIRE_FILES_MAX)
		return engine_fail(s->e, XFER_FAIL_USAGE, -E2BIG,
				   "more than %u entries to copy: split the "
				   "copy into several sessions",
				   WIRE_FILES_MAX);
	if (s->walk.n > s->nfblk * WALK_BLOCK) {
		size_t nb = (s->walk.n + WALK_BLOCK - 1) / WALK_BLOCK;

		while (s->nfblk < nb &&
		       (s->fblk[s->nfblk] =
				calloc(WALK_BLOCK, sizeof(**s->fblk))))
			s->nfblk++;
		if (s->nfblk < nb)
			return engine_fail(s->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
	}
	for (; s->nfiles < s->walk.n; s->nfiles++) {
		struct src_file *f = src_file_at(s, s->nfiles);

		f->w = walk_at(&s->walk, s->nfiles);
		f->idx = s->nfiles;
		f->path = f->w->local;
		f->fd = f->dio.fd = -1;
	}
	if (wire_room(s))
		return engine_fail(s->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	if (s->walk.done)
		s->bytes_total = s->walk.bytes; /* known now: an ETA */
	return 0;
}

struct item *src_fifo_at(struct source *s, unsigned int i)
{
	return &s->fifo[(s->fifo_head + i) % s->fifo_cap];
}

void src_fifo_push(struct source *s, enum item_kind k, struct src_file *f,
		   struct src_job *j)
{
	struct item *it = src_fifo_at(s, s->fifo_len++);

	it->kind = k;
	it->f = f;
	it->job = j;
	if (f)
		f->items++;
}

void src_fifo_pop(struct source *s)
{
	struct src_file *f = src_fifo_at(s, 0)->f;

	s->fifo_head = (s->fifo_head + 1) % s->fifo_cap;
	s->fifo_len--;
	if (f) {
		f->items--;
		src_retire(s, f); /* its last item: it may be finished */
	}
}

bool src_owner(const struct source *s, const struct stat *st,
	       struct wire_owner *o)
{
	uint32_t fl = s->cfg->p.flags;

	if (!(fl & WIRE_HELLO_OWNERS))
		return false;
	o->uid = (uint32_t)st->st_uid;
	o->gid = (uint32_t)st->st_gid;
	o->user[0] = o->group[0] = '\0';
	if (fl & WIRE_HELLO_NUMERIC_IDS)
		return true;
	if (fl & WIRE_HELLO_OWNER)
		idname_of_uid(st->st_uid, o->user);
	if (fl & WIRE_HELLO_GROUP)
		idname_of_gid(st->st_gid, o->group);
	return true;
}

static void fill_file_msg(struct source *s, struct src_file *f,
			  struct wire_file *m)
{
	m->file_id = f->wire_id;
	m->kind = f->w->kind;
	m->mode = f->st.st_mode & 07777;
	m->mtime_sec = f->st.st_mtim.tv_sec;
	m->mtime_nsec = (uint32_t)f->st.st_mtim.tv_nsec;
	m->atime_sec = f->st.st_atim.tv_sec;
	m->atime_nsec = (uint32_t)f->st.st_atim.tv_nsec;
	snprintf(m->path, sizeof(m->path), "%s", f->w->wire);
	if (src_owner(s, &f->st, &m->owner))
		m->flags |= WIRE_FILE_OWNER;
	if (f->w->kind == WIRE_KIND_SYMLINK || f->w->kind == WIRE_KIND_HARDLINK)
		snprintf(m->link, sizeof(m->link), "%s", f->w->link);
	if (f->w->kind == WIRE_KIND_SPECIAL) {
		m->mode = f->st.st_mode & (S_IFMT | 07777);
		if (S_ISCHR(f->st.st_mode) || S_ISBLK(f->st.st_mode))
			m->size = WIRE_RDEV(major(f->st.st_rdev),
					    minor(f->st.st_rdev));
	}
	if (f->w->kind != WIRE_KIND_FILE)
		return;
	if (f->linked)
		m->flags |= WIRE_FILE_LINKED;
	m->size = (uint64_t)f->st.st_size;
	if (src_file_sparse(f))
		m->flags |= WIRE_FILE_SPARSE;
	if (f->w->range) {
		m->flags |= WIRE_FILE_RANGE;
		m->range_off = f->w->range->off;
		m->range_len = f->w->range->len;
		m->range_idx = f->w->range->idx;
		m->range_count = f->w->range->count;
		memcpy(m->token, f->w->range->token, WIRE_TOKEN_LEN);
	}
}

void src_announce(struct source *s, struct src_file *f)
{
	/* Room was made when f was listed (wire_room). */
	s->by_wire[s->wire_head + (s->nwire - s->wire_base)] = (uint32_t)f->idx;
	f->wire_id = s->nwire++;
	f->announced = true;
}

/* The user's "file src_started" event. */
void src_started(struct source *s, struct src_file *f)
{
	struct xfer_file_report r = {
		.path = f->path,
		.kind = wire_kind_name(f->w->kind),
		.bytes = f->w->kind == WIRE_KIND_FILE ? src_file_bytes(f) : 0,
	};

	report_file(s->o, &r, s->cfg->p.csum, NULL, 0);
}

int src_send_file(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_FILE };
	bool xattrs = false;

	/* -X/-A: its attributes first, in a message of their own */
	if (src_xattrs_asked(s)) {
		m.type = WIRE_XATTRS;
		src_xattrs(s, f, &m.u.xattrs);
		xattrs = m.u.xattrs.count > 0;
		if (xattrs && engine_send(s->e, &m))
			return -1;
		memset(&m, 0, sizeof(m));
		m.type = WIRE_FILE;
	}
	fill_file_msg(s, f, &m.u.file);
	if (xattrs)
		m.u.file.flags |= WIRE_FILE_XATTRS;
	return engine_send(s->e, &m);
}

/*
 * A file that failed before it could be announced. When this side is the
 * receiver serving a pull, the user is on the other side: the failure is
 * announced and aborted so the sink reports it there.
 */
int src_send_failure(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_FILE };

	m.u.file.file_id = f->wire_id;
	m.u.file.kind = WIRE_KIND_FILE; /* nothing follows but the abort */
	snprintf(m.u.file.path, sizeof(m.u.file.path), "%s", f->w->wire);
	if (engine_send(s->e, &m))
		return -1;
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE_END;
	m.u.end.file_id = f->wire_id;
	m.u.end.flags = WIRE_END_ABORT;
	m.u.end.seq_end = s->tx.posted; /* the slots written before it */
	m.u.end.csum = (uint8_t)s->cfg->p.csum;
	m.u.end.status = f->err;
	snprintf(m.u.end.msg, sizeof(m.u.end.msg), "%s", f->errmsg);
	f->end_sent = true;
	return engine_send(s->e, &m);
}

struct src_job *src_take_job(struct source *s)
{
	for (unsigned int i = 0; i < s->njobs; i++) {
		if (s->jobs[i].state == JOB_FREE) {
			s->free_jobs--;
			return &s->jobs[i];
		}
	}
	return NULL;
}
