/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The data source: reads files into staging buffers and writes them into
 * the sink's ring.
 *
 * The engine thread plans the session as an ordered list of items, FILE,
 * CHUNK..., FILE_END for each entry of the walk (walk.h) and DONE at the
 * end. FILE goes out as soon as it is planned, so the sink learns of files
 * ahead of their data; chunks and FILE_END are posted in plan order, and
 * because SENDs and WRITEs on one RC queue pair arrive in order the sink
 * always sees a file announced before its first chunk and ended after its
 * last. Each CHUNK owns one staging buffer (a job): a worker preads it,
 * computes its CRC32 (and SHA-256), compresses and seals it on request,
 * then the engine thread posts it with WRITE_WITH_IMM into slot seq % N as
 * soon as it holds a credit. Writes are signalled selectively: every
 * sig_every-th, and whenever posting stalls or no staging buffer is left,
 * so every buffer is reclaimed by a later completion.
 *
 * With --resume, --no-clobber or --update the sink answers each FILE with
 * HAVE: skip the file, or the CRC32s of the chunks it already holds. The
 * file's chunks are read meanwhile; each is then posted only if the sink's
 * CRC of that chunk differs from ours.
 *
 * Otherwise runs of small files are packed (wire.h): one PACK item, one
 * staging buffer, read by one worker job, carries up to a slot's worth of
 * files with their announcements and digests, and one PACK_DONE answers
 * for all of them. The sink must learn of file ids in order, so while a
 * pack is planned but not posted, FILE messages planned after it wait in
 * the fifo (deferred) instead of going out at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/engine.h"
#include "transfer/role.h"
#include "transfer/walk.h"
#include "util/aead.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"
#include "util/path.h"
#include "util/ratelimit.h"
#include "util/zchunk.h"

enum item_kind {
	IT_FILE,
	IT_CHUNK,
	IT_END,
	IT_PACK,
	IT_DONE
};

#define PACK_FILE_MAX (64u << 10) /* bytes: larger files go alone */
#define PACK_ABORT_ROOM 200u	  /* bytes kept for a record's abort text */
enum job_state {
	JOB_FREE,
	JOB_READING,
	JOB_READY,
	JOB_POSTED
};

struct src_file {
	struct walk_entry *w;
	size_t idx;	  /* in the walk, = in files */
	const char *path; /* as the user (or the walk) named it */
	int fd;
	struct stat st;
	uint64_t nchunks;  /* chunks posted (holes and matches are not) */
	uint64_t matched;  /* chunks the sink already had */
	uint64_t next_off; /* planning cursor */
	uint32_t crc;	   /* CRC32 of the file, combined in post order */
	struct ck_sha256 *tree;
	int err;
	char errmsg[300];
	bool announced;	     /* has a wire id: a FILE_RESULT will come */
	bool deferred;	     /* its FILE waits in the fifo behind a pack */
	bool packed, posted; /* in a pack; that pack is in the ring */
	uint32_t wire_id; /* file id on the wire: announced files, in order */
	uint8_t digest[WIRE_DIGEST_MAX]; /* packed: the file's, sent along */
	uint8_t dlen;
	bool result, skipped;
	uint64_t sent; /* as the sink counted it */
	double t0;
	/* the sink's answer (HAVE) when it is asked first */
	bool asking, have_done, skip;
	int skip_status;
	uint32_t *have; /* CRC32 of the sink's chunk i, i < have_n */
	uint64_t have_n;
};

struct src_job {
	struct workq_item item;
	struct source *s;
	unsigned int idx; /* staging buffer index */
	enum job_state state;
	struct src_file *f; /* NULL for a pack */
	size_t first;	    /* a pack: files[first, first + nfiles) */
	unsigned int nfiles;
	uint64_t offset;
	uint32_t len;	   /* raw bytes */
	uint32_t wire_len; /* payload bytes after compression */
	uint16_t flags;	   /* enum wire_slot_flags */
	bool zero;	   /* all zero (checked with --sparse or --resume) */
	uint32_t crc;
	uint8_t sha[CK_SHA256_LEN];
	uint8_t tag[AEAD_TAG_LEN];
	uint8_t *scratch; /* raw data when compressing */
	struct aead *aead;
	int status;
};

struct item {
	enum item_kind kind;
	struct src_file *f;
	struct src_job *job;
};

struct source {
	struct engine *e;
	const struct xfer_opts *o;
	const struct source_cfg *cfg;
	struct xfer_stats *st;
	uint32_t chunk;
	struct credit_tx tx;
	struct walk walk;
	/*
	 * One block per WALK_BLOCK entries of the walk. Workers reach files
	 * through it, so it is sized once for a whole session and never
	 * moves.
	 */
	struct src_file **fblk;
	size_t nfblk;
	size_t nfiles, next_file; /* listed by the walk so far; planned */
	uint32_t *by_wire;	  /* wire id -> index in files */
	uint32_t nwire;
	struct src_file *cur; /* being planned */
	struct src_job *jobs;
	unsigned int njobs, free_jobs;
	struct item *fifo; /* planned, not yet posted */
	unsigned int fifo_cap, fifo_head, fifo_len;
	unsigned int *posted; /* job indices in post order, unreclaimed */
	unsigned int posted_head, posted_len;
	unsigned int held;	 /* packs and deferred FILEs in the fifo */
	unsigned int pack_ahead; /* staging buffers packs may hold at once */
	uint32_t pack_max;	 /* files up to this size are packed, 0: none */
	uint8_t dlen;		 /* digest bytes of csum */
	unsigned int sig_every, unsignaled;
	bool done_planned, done_sent, bye;
	bool ask, resume; /* HAVE before data; chunks may match */
	struct ratelimit rl;
	uint64_t bytes_posted, bytes_total; /* for on_progress */
	uint64_t next_progress_ms;
	uint64_t results;
	uint64_t corrupt_seq; /* test hook: flip a byte of this chunk */
};

static void report(struct source *s, struct src_file *f, int status,
		   const char *msg, const uint8_t *digest, unsigned int dlen);
static void free_job(struct source *s, struct src_job *j);

/* File i < nfiles: as the walk listed it. */
static struct src_file *sf(const struct source *s, size_t i)
{
	return &s->fblk[i / WALK_BLOCK][i % WALK_BLOCK];
}

#define WALK_STEP 512 /* entries listed at a time, in the engine thread */

/*
 * Lists more of the walk and makes their files. The walk runs as the plan
 * needs it, so data flows while a big tree is still being listed.
 */
static int more_files(struct source *s)
{
	int rc = walk_more(&s->walk, WALK_STEP);

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
		uint32_t *bw =
			realloc(s->by_wire, nb * WALK_BLOCK * sizeof(*bw));

		if (bw)
			s->by_wire = bw;
		while (bw && s->nfblk < nb &&
		       (s->fblk[s->nfblk] =
				calloc(WALK_BLOCK, sizeof(**s->fblk))))
			s->nfblk++;
		if (s->nfblk < nb)
			return engine_fail(s->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
	}
	for (; s->nfiles < s->walk.n; s->nfiles++) {
		struct src_file *f = sf(s, s->nfiles);

		f->w = walk_at(&s->walk, s->nfiles);
		f->idx = s->nfiles;
		f->path = f->w->local;
		f->fd = -1;
	}
	if (s->walk.done)
		s->bytes_total = s->walk.bytes; /* known now: an ETA */
	return 0;
}

static const char *csum_name(enum xfer_csum c)
{
	return c == XFER_CSUM_SHA256  ? "sha256"
	       : c == XFER_CSUM_CRC32 ? "crc32"
				      : "none";
}

/* ---- planning ---- */

static struct item *fifo_at(struct source *s, unsigned int i)
{
	return &s->fifo[(s->fifo_head + i) % s->fifo_cap];
}

static void fifo_push(struct source *s, enum item_kind k, struct src_file *f,
		      struct src_job *j)
{
	struct item *it = fifo_at(s, s->fifo_len++);

	it->kind = k;
	it->f = f;
	it->job = j;
}

static void fifo_pop(struct source *s)
{
	s->fifo_head = (s->fifo_head + 1) % s->fifo_cap;
	s->fifo_len--;
}

static void file_fail(struct src_file *f, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void file_fail(struct src_file *f, int err, const char *fmt, ...)
{
	va_list ap;

	if (f->err)
		return;
	f->err = err;
	va_start(ap, fmt);
	vsnprintf(f->errmsg, sizeof(f->errmsg), fmt, ap);
	va_end(ap);
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
	if (f->w->kind == WIRE_KIND_SYMLINK)
		snprintf(m->link, sizeof(m->link), "%s", f->w->link);
	if (f->w->kind != WIRE_KIND_FILE)
		return;
	m->size = (uint64_t)f->st.st_size;
	if ((uint64_t)f->st.st_blocks * 512 < (uint64_t)f->st.st_size)
		m->flags |= WIRE_FILE_SPARSE;
}

static void announce(struct source *s, struct src_file *f)
{
	f->wire_id = s->nwire++;
	s->by_wire[f->wire_id] = (uint32_t)f->idx;
	f->announced = true;
}

/* The user's "file started" event. */
static void started(struct source *s, struct src_file *f)
{
	struct xfer_file_report r = {
		.path = f->path,
		.kind = wire_kind_name(f->w->kind),
		.bytes = f->w->kind == WIRE_KIND_FILE ? (uint64_t)f->st.st_size
						      : 0,
		.algorithm = csum_name(s->cfg->p.csum),
	};

	if (s->o->on_file)
		s->o->on_file(s->o->on_file_arg, &r);
}

static int send_file(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_FILE };

	fill_file_msg(s, f, &m.u.file);
	return engine_send(s->e, &m);
}

/*
 * A file that failed before it could be announced. When this side is the
 * receiver serving a pull, the user is on the other side: the failure is
 * announced and aborted so the sink reports it there.
 */
static int send_failure(struct source *s, struct src_file *f)
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
	m.u.end.csum = (uint8_t)s->cfg->p.csum;
	m.u.end.status = f->err;
	snprintf(m.u.end.msg, sizeof(m.u.end.msg), "%s", f->errmsg);
	return engine_send(s->e, &m);
}

/*
 * Gives f its wire id and sends its FILE (or, failed, FILE and an aborting
 * FILE_END), or queues that behind a pack still to be posted. A failure on
 * the client's own side is only reported: the user is here.
 */
static int tell(struct source *s, struct src_file *f)
{
	if (f->err) {
		log_err("%s", f->errmsg);
		if (!s->cfg->p.server) {
			report(s, f, f->err, f->errmsg, NULL, 0);
			return 0;
		}
	}
	announce(s, f);
	f->asking = s->ask && f->w->kind == WIRE_KIND_FILE && !f->err;
	if (!f->err)
		started(s, f);
	if (s->held) {
		f->deferred = true;
		s->held++;
		fifo_push(s, IT_FILE, f, NULL);
		return 0;
	}
	return f->err ? send_failure(s, f) : send_file(s, f);
}

/* Opens the next entry and announces it; failures are reported now. */
static int open_next(struct source *s)
{
	struct src_file *f = sf(s, s->next_file++);
	int rc;

	f->t0 = clock_now_s();
	f->st = f->w->st;
	if (f->w->err) {
		file_fail(f, f->w->err, "%s",
			  f->w->errmsg ? f->w->errmsg : strerror(-f->w->err));
		return tell(s, f);
	}
	if (f->w->kind != WIRE_KIND_FILE)
		return tell(s, f);
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
	if (f->err) {
		if (f->fd >= 0)
			close(f->fd);
		f->fd = -1;
		return tell(s, f);
	}
	posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (s->cfg->p.csum == XFER_CSUM_SHA256) {
		rc = ck_sha256_create(&f->tree);
		if (rc)
			return engine_fail(s->e, XFER_FAIL_RESOURCE, rc,
					   "cannot start SHA-256");
	}
	rc = tell(s, f);
	if (rc)
		return rc;
	s->cur = f;
	if (!f->deferred)
		fifo_push(s, IT_FILE, f, NULL);
	return 0;
}

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
 * Worker: compresses j's raw payload into the staging buffer (data) when
 * that helps, else copies it there, then seals it with --encrypt. The IV
 * is (id, index): (file id, chunk index) for a chunk, (first id, 0) for a
 * pack, whose first file has no chunks. The AAD carries the header's
 * file_id and offset fields.
 */
static int seal(struct source *s, struct src_job *j, const uint8_t *raw,
		uint8_t *data, uint32_t id, uint64_t offset, uint64_t index)
{
	uint8_t aad[WIRE_AAD_LEN];
	long n;

	if (j->scratch) {
		n = zchunk_compress(s->cfg->p.level, raw, j->len, data,
				    s->chunk);
		if (n < 0)
			return (int)n;
		if (n > 0) {
			j->wire_len = (uint32_t)n;
			j->flags |= WIRE_SLOT_COMPRESSED;
		} else {
			memcpy(data, raw, j->len);
		}
	}
	if (!j->aead)
		return 0;
	j->flags |= WIRE_SLOT_ENCRYPTED;
	wire_chunk_aad(aad, id, offset, j->len, j->flags);
	return aead_seal(j->aead, id, index, aad, sizeof(aad), data,
			 j->wire_len, j->tag);
}

/* Worker: read, checksum, maybe compress, maybe seal. */
static void read_chunk(struct workq_item *item)
{
	struct src_job *j = (struct src_job *)item;
	struct source *s = j->s;
	const struct session_params *p = &s->cfg->p;
	uint8_t *data = cm_stage(s->e->c, j->idx) + WIRE_SLOT_HDR;
	uint8_t *raw = j->scratch ? j->scratch : data;

	j->flags = 0;
	j->wire_len = j->len;
	j->zero = false;
	j->status = io_pread_full(j->f->fd, raw, j->len, j->offset);
	if (j->status)
		return;
	if ((p->flags & WIRE_HELLO_SPARSE) || s->resume)
		j->zero = all_zero(raw, j->len);
	if (j->zero && !s->resume)
		return; /* --sparse: a hole, out of the digest like holes */
	if (p->csum != XFER_CSUM_NONE || s->resume)
		j->crc = ck_crc32(0, raw, j->len);
	if (p->csum == XFER_CSUM_SHA256) {
		j->status = ck_sha256(raw, j->len, j->sha);
		if (j->status)
			return;
	}
	j->status = seal(s, j, raw, data, j->f->wire_id, j->offset,
			 j->offset / s->chunk);
}

static struct src_job *take_job(struct source *s)
{
	for (unsigned int i = 0; i < s->njobs; i++) {
		if (s->jobs[i].state == JOB_FREE) {
			s->free_jobs--;
			return &s->jobs[i];
		}
	}
	return NULL;
}

/* ---- packs ---- */

/* Digest and data bytes kept for f's record, room for an abort too. */
static size_t pack_data_room(const struct source *s, const struct src_file *f)
{
	size_t data = s->dlen + (size_t)f->w->st.st_size;

	return data > PACK_ABORT_ROOM ? data : PACK_ABORT_ROOM;
}

static size_t pack_rec_len(const struct source *s, const struct src_file *f)
{
	return wire_pack_rec_len(strlen(f->w->wire), 0, pack_data_room(s, f));
}

/*
 * Whether f travels in a pack: a small regular file without holes, never
 * the session's first id (the sink names DEST after that one as it is
 * announced, in its engine thread).
 */
static bool packable(const struct source *s, const struct src_file *f)
{
	const struct walk_entry *w = f->w;

	return s->pack_max && !w->err && w->kind == WIRE_KIND_FILE &&
	       s->nwire > 0 && (uint64_t)w->st.st_size <= s->pack_max &&
	       (uint64_t)w->st.st_blocks * 512 >= (uint64_t)w->st.st_size &&
	       pack_rec_len(s, f) <= s->chunk;
}

/*
 * Worker: f's record at out + *pos, or an aborting one if it fails; *crc
 * goes on over the record's header, digest and path.
 */
static int pack_file(struct source *s, struct src_file *f, uint8_t *out,
		     size_t *pos, uint32_t *crc)
{
	size_t head;
	struct wire_pack_rec r = {
		.file_id = f->wire_id,
		.path = f->w->wire,
		.path_len = (uint16_t)strlen(f->w->wire),
		.mode = f->st.st_mode & 07777,
		.mtime_sec = f->st.st_mtim.tv_sec,
		.mtime_nsec = (uint32_t)f->st.st_mtim.tv_nsec,
		.atime_sec = f->st.st_atim.tv_sec,
		.atime_nsec = (uint32_t)f->st.st_atim.tv_nsec,
		.size = (uint32_t)f->st.st_size,
		.digest_len = s->dlen,
	};
	uint8_t *data = out + *pos + wire_pack_rec_len(r.path_len, s->dlen, 0);
	struct stat now;
	int fd, rc;

	fd = walk_open(&s->walk, f->w);
	rc = fd < 0 ? fd : io_pread_full(fd, data, r.size, 0);
	if (fd < 0)
		file_fail(f, fd, "cannot open '%s': %s", f->path,
			  strerror(-fd));
	else if (rc == -ENODATA)
		file_fail(f, -ESTALE,
			  "'%s' changed while it was being sent: not copied",
			  f->path);
	else if (rc)
		file_fail(f, rc, "cannot read '%s': %s", f->path,
			  strerror(-rc));
	else if (fstat(fd, &now) < 0)
		file_fail(f, -errno, "cannot stat '%s': %s", f->path,
			  strerror(errno));
	else if (!S_ISREG(now.st_mode))
		file_fail(f, -EINVAL, "cannot send '%s': not a regular file",
			  f->path);
	else if (now.st_size != f->st.st_size ||
		 now.st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
		 now.st_mtim.tv_nsec != f->st.st_mtim.tv_nsec)
		file_fail(f, -ESTALE,
			  "'%s' changed while it was being sent: not copied",
			  f->path);
	if (fd >= 0)
		close(fd);
	if (!f->err) {
		rc = wire_pack_digest((uint8_t)s->cfg->p.csum, data, r.size,
				      f->digest);
		if (rc < 0)
			return rc;
		f->dlen = (uint8_t)rc;
		memcpy(r.digest, f->digest, f->dlen);
	} else {
		/*
		 * The sink reports it failed, with our message, cut to the
		 * room planned for this record (the full one is ours).
		 */
		r.flags = WIRE_PACK_ABORT;
		r.status = f->err;
		r.digest_len = 0;
		r.size = (uint32_t)strnlen(f->errmsg, WIRE_MSG_MAX);
		if (r.size > pack_data_room(s, f))
			r.size = (uint32_t)pack_data_room(s, f);
		memcpy(out + *pos + wire_pack_rec_len(r.path_len, 0, 0),
		       f->errmsg, r.size);
	}
	head = wire_pack_put(out + *pos, &r);
	*crc = ck_crc32(*crc, out + *pos, head);
	*pos += head + r.size;
	return 0;
}

/* Worker: read every file of a pack into its records, then seal. */
static void read_pack(struct workq_item *item)
{
	struct src_job *j = (struct src_job *)item;
	struct source *s = j->s;
	uint8_t *data = cm_stage(s->e->c, j->idx) + WIRE_SLOT_HDR;
	uint8_t *raw = j->scratch ? j->scratch : data;
	size_t pos = 0;

	j->crc = 0; /* of the records' metadata: their digests cover data */
	for (unsigned int i = 0; !j->status && i < j->nfiles; i++)
		j->status =
			pack_file(s, sf(s, j->first + i), raw, &pos, &j->crc);
	if (j->status)
		return;
	j->len = j->wire_len = (uint32_t)pos;
	j->flags = WIRE_SLOT_PACKED;
	j->status =
		seal(s, j, raw, data, sf(s, j->first)->wire_id, j->nfiles, 0);
}

/*
 * Plans a pack of the small files from next_file on, as many as fit one
 * slot. Returns 1, 0 when no staging buffer is free, -1 on a failure.
 */
static int plan_pack(struct source *s)
{
	struct src_job *j = take_job(s);
	size_t room = s->chunk;

	if (!j)
		return 0;
	j->first = s->next_file;
	j->nfiles = 0;
	while (j->nfiles < WIRE_PACK_MAX_FILES) {
		struct src_file *f;

		if (s->next_file == s->nfiles && !s->walk.done &&
		    more_files(s)) {
			free_job(s, j);
			return -1;
		}
		if (s->next_file == s->nfiles)
			break;
		f = sf(s, s->next_file);
		if (!packable(s, f) || pack_rec_len(s, f) > room)
			break;
		room -= pack_rec_len(s, f);
		f->t0 = clock_now_s();
		f->st = f->w->st;
		f->packed = true;
		announce(s, f);
		started(s, f);
		s->next_file++;
		j->nfiles++;
	}
	j->state = JOB_READING;
	j->f = NULL;
	j->status = 0;
	j->item.fn = read_pack;
	fifo_push(s, IT_PACK, NULL, j);
	s->held++;
	workq_push(s->e->wq, &j->item);
	return 1;
}

/*
 * Moves the planning cursor past chunks that lie wholly in a hole: they are
 * not sent, and the sink's file (sized up front) keeps them as holes. The
 * chunk grid stays aligned, so offsets remain multiples of the chunk size.
 * Not with --resume, where every chunk is compared with the sink's: holes
 * read as zeros, and a zero chunk where the sink has nothing is not sent.
 */
static bool skip_hole(struct source *s, struct src_file *f)
{
	off_t d;
	uint64_t aligned;

	if (s->resume)
		return false;
	d = lseek(f->fd, (off_t)f->next_off, SEEK_DATA);
	if (d < 0 && errno == ENXIO) {
		f->next_off = (uint64_t)f->st.st_size;
		return true;
	}
	if (d < 0)
		return false; /* no SEEK_DATA here: read everything */
	aligned = (uint64_t)d - (uint64_t)d % s->chunk;
	if (aligned <= f->next_off)
		return false;
	f->next_off = aligned;
	return true;
}

static int plan(struct source *s)
{
	int n = 0;

	while (!s->e->fail && s->fifo_len + 1 < s->fifo_cap) {
		struct src_file *f = s->cur;
		struct src_job *j;

		if (!f) {
			if (s->next_file == s->nfiles && !s->walk.done) {
				if (more_files(s))
					return -1;
				continue;
			}
			if (s->next_file == s->nfiles) {
				if (!s->done_planned) {
					fifo_push(s, IT_DONE, NULL, NULL);
					s->done_planned = true;
					n++;
				}
				break;
			}
			if (packable(s, sf(s, s->next_file))) {
				int rc = s->njobs - s->free_jobs < s->pack_ahead
						 ? plan_pack(s)
						 : 0;

				if (rc < 0)
					return -1;
				if (!rc)
					break;
			} else if (open_next(s)) {
				return -1;
			}
			n++;
			continue;
		}
		if (f->next_off >= (uint64_t)f->st.st_size) {
			fifo_push(s, IT_END, f, NULL);
			s->cur = NULL;
			n++;
			continue;
		}
		if (f->skip)
			f->next_off = (uint64_t)f->st.st_size;
		if (f->skip || skip_hole(s, f))
			continue;
		j = take_job(s);
		if (!j)
			break;
		j->state = JOB_READING;
		j->item.fn = read_chunk;
		j->f = f;
		j->offset = f->next_off;
		j->len = (uint32_t)((uint64_t)f->st.st_size - f->next_off <
						    s->chunk
					    ? (uint64_t)f->st.st_size -
						      f->next_off
					    : s->chunk);
		j->status = 0;
		j->crc = 0;
		f->next_off += j->len;
		fifo_push(s, IT_CHUNK, f, j);
		workq_push(s->e->wq, &j->item);
		n++;
	}
	return n;
}

/* ---- posting ---- */

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

static int send_end(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_FILE_END };
	enum xfer_csum csum = s->cfg->p.csum;
	int rc;

	check_unchanged(f);
	m.u.end.file_id = f->wire_id;
	m.u.end.nchunks = f->nchunks;
	m.u.end.csum = (uint8_t)csum;
	if (f->err) {
		m.u.end.flags = WIRE_END_ABORT;
		m.u.end.status = f->err;
		snprintf(m.u.end.msg, sizeof(m.u.end.msg), "%s", f->errmsg);
	} else if (csum == XFER_CSUM_CRC32) {
		uint32_t be = htobe32(f->crc);

		m.u.end.digest_len = 4;
		memcpy(m.u.end.digest, &be, 4);
	} else if (csum == XFER_CSUM_SHA256) {
		m.u.end.digest_len = CK_SHA256_LEN;
		rc = ck_sha256_final(f->tree, m.u.end.digest);
		if (rc)
			return engine_fail(s->e, XFER_FAIL_INTERNAL, rc,
					   "SHA-256 failed");
	}
	io_close(f->fd);
	f->fd = -1;
	return engine_send(s->e, &m);
}

static bool should_signal(struct source *s)
{
	struct item *next = s->fifo_len > 1 ? fifo_at(s, 1) : NULL;

	return ++s->unsignaled >= s->sig_every || s->free_jobs == 0 ||
	       credit_tx_avail(&s->tx) == 1 || !next || !next->job ||
	       next->job->state != JOB_READY;
}

static void progress(struct source *s, struct src_file *f, uint32_t len)
{
	uint64_t now;

	s->bytes_posted += len;
	if (!s->o->on_progress)
		return;
	now = clock_now_ms();
	if (now >= s->next_progress_ms) {
		s->next_progress_ms = now + 250;
		s->o->on_progress(s->o->on_file_arg, s->bytes_posted,
				  s->bytes_total, f->path);
	}
}

/* Adds a chunk to the file's digest, whether posted or already there. */
static int account(struct src_file *f, const struct src_job *j)
{
	f->crc = ck_crc32_combine(f->crc, j->crc, j->len);
	if (f->tree)
		return ck_sha256_update(f->tree, j->sha, CK_SHA256_LEN);
	return 0;
}

/* Writes j's staging buffer into the next slot, header h first. */
static int post_slot(struct source *s, struct src_job *j,
		     struct wire_slot_hdr *h)
{
	uint8_t *buf = cm_stage(s->e->c, j->idx);
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
	wire_slot_encode(buf, h);
#ifdef RDCP_TEST_HOOKS
	if (seq == s->corrupt_seq)
		buf[WIRE_SLOT_HDR + j->wire_len / 2] ^= 0x5a;
#endif
	sig = should_signal(s);
	slot = credit_tx_take(&s->tx);
	rc = s->e->c->ops->post_write(s->e->c, j->idx,
				      WIRE_SLOT_HDR + j->wire_len, slot,
				      wire_imm(seq, slot), sig, j->idx);
	if (rc)
		return engine_fail(s->e, XFER_FAIL_PEER_LOST, rc,
				   "cannot post RDMA write to %s",
				   s->e->c->peer);
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
	progress(s, j->f, j->len);
	return account(j->f, j);
}

static int post_pack(struct source *s, struct src_job *j)
{
	struct wire_slot_hdr h = { .file_id = sf(s, j->first)->wire_id,
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
		struct src_file *f = sf(s, j->first + i);

		f->posted = true;
		f->sent = f->err ? 0 : (uint64_t)f->st.st_size;
		progress(s, f, (uint32_t)f->st.st_size);
	}
	return 0;
}

static void free_job(struct source *s, struct src_job *j)
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
	uint64_t idx = j->offset / s->chunk;

	if (j->status || f->err) {
		file_fail(f, j->status, "cannot read '%s': %s", f->path,
			  strerror(-j->status));
	} else if (f->skip) {
		/* the sink needs nothing of this file */
	} else if (j->zero && !s->resume) {
		progress(s, f, j->len); /* a hole now, like the source's */
	} else if (s->resume &&
		   (idx < f->have_n ? f->have[idx] == j->crc : j->zero)) {
		/*
		 * The sink holds this chunk already, or it is all zero and
		 * the sink has nothing there (a hole in its temporary): not
		 * sent, in the digest all the same.
		 */
		f->matched++;
		progress(s, f, j->len);
		if (account(f, j))
			file_fail(f, -EIO, "SHA-256 failed");
	} else {
		return 0;
	}
	free_job(s, j);
	return 1;
}

/* Posts planned items in order while credits and readiness allow. */
static int post(struct source *s)
{
	int n = 0;

	while (s->fifo_len && !s->e->fail) {
		struct item *it = fifo_at(s, 0);

		switch (it->kind) {
		case IT_FILE:
			if (!it->f->deferred)
				break; /* announced when planned */
			it->f->deferred = false;
			s->held--;
			if (it->f->err ? send_failure(s, it->f)
				       : send_file(s, it->f))
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
			if (settle_chunk(s, it->job))
				break;
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
				close(it->f->fd); /* the sink said no */
				it->f->fd = -1;
			} else if (send_end(s, it->f)) {
				return -1;
			}
			break;
		case IT_DONE: {
			struct wire_msg m = { .type = WIRE_DONE };

			if (engine_send(s->e, &m))
				return -1;
			s->done_sent = true;
			break;
		}
		}
		fifo_pop(s);
		n++;
	}
	return n;
}

/* ---- engine role ---- */

static void report(struct source *s, struct src_file *f, int status,
		   const char *msg, const uint8_t *digest, unsigned int dlen)
{
	char hex[2 * WIRE_DIGEST_MAX + 1] = "";
	bool regular = f->w->kind == WIRE_KIND_FILE;
	struct xfer_file_report r = {
		.done = true,
		.path = f->path,
		.kind = wire_kind_name(f->w->kind),
		.bytes = regular ? (uint64_t)f->st.st_size : 0,
		.sent = f->sent,
		.seconds = clock_now_s() - f->t0,
		.status = status,
		.klass = engine_klass_of(status, !f->err),
		.message = msg,
		.skipped = f->skipped && !status,
		.digest = hex,
		.algorithm = csum_name(s->cfg->p.csum),
	};

	if (dlen)
		checksum_hex(digest, dlen, hex);
	f->result = true;
	s->results++;
	if (status) {
		if (!s->st->files_failed++)
			s->st->first_fail = r.klass;
	} else {
		s->st->files_ok++;
		s->st->files_packed += f->packed;
		s->st->bytes += r.bytes;
		if (r.skipped)
			s->st->files_skipped++;
	}
	if (s->o->on_file)
		s->o->on_file(s->o->on_file_arg, &r);
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
	if (status && !(f->err && s->cfg->p.server))
		log_err("%s%s%s", f->err ? "" : f->path, f->err ? "" : ": ",
			msg);
	else if (!status && s->cfg->p.server)
		log_info("sent '%s'", f->path);
	report(s, f, status, msg, digest, status ? 0 : dlen);
}

static int on_result(struct source *s, const struct wire_file_result *res)
{
	struct src_file *f;

	if (res->file_id >= s->nwire)
		return -EPROTO;
	f = sf(s, s->by_wire[res->file_id]);
	if (f->result || (f->packed && !f->posted))
		return -EPROTO;
	f->skipped = res->flags & WIRE_RESULT_SKIPPED;
	f->sent = res->sent;
	conclude(s, f, res->status, res->msg, res->digest, res->digest_len);
	return 0;
}

/* Every file of a pack without a FILE_RESULT is in place. */
static int on_pack_done(struct source *s, const struct wire_pack_done *d)
{
	if (d->first_id >= s->nwire || d->count > s->nwire - d->first_id)
		return -EPROTO;
	for (uint32_t id = d->first_id; id < d->first_id + d->count; id++) {
		struct src_file *f = sf(s, s->by_wire[id]);

		if (!f->packed || !f->posted)
			return -EPROTO;
		if (!f->result)
			conclude(s, f, 0, NULL, f->digest, f->dlen);
	}
	return 0;
}

static int on_have(struct source *s, const struct wire_have *h)
{
	struct src_file *f;
	uint64_t nslots;

	if (h->file_id >= s->nwire)
		return -EPROTO;
	f = sf(s, s->by_wire[h->file_id]);
	if (!f->asking || f->have_done)
		return -EPROTO;
	if (h->flags & WIRE_HAVE_SKIP) {
		f->skip = true;
		f->skip_status = h->status;
		f->have_done = true;
		return 0;
	}
	nslots = ((uint64_t)f->st.st_size + s->chunk - 1) / s->chunk;
	if (h->first != f->have_n || h->count > nslots - f->have_n)
		return -EPROTO;
	if (h->count && !f->have) {
		f->have = calloc(nslots, sizeof(*f->have));
		if (!f->have)
			return -ENOMEM;
	}
	if (h->count)
		memcpy(f->have + f->have_n, h->crcs,
		       h->count * sizeof(*f->have));
	f->have_n += h->count;
	f->have_done = h->flags & WIRE_HAVE_LAST;
	return 0;
}

static int src_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct source *s = e->role_data;
	int rc = -EPROTO;

	if (credit_tx_ack(&s->tx, m->slot_ack))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s released ring slots never written",
				   e->c->peer);
	switch (m->type) {
	case WIRE_CREDIT:
		return 0;
	case WIRE_FILE_RESULT:
		rc = on_result(s, &m->u.result);
		break;
	case WIRE_HAVE:
		rc = on_have(s, &m->u.have);
		break;
	case WIRE_PACK_DONE:
		rc = on_pack_done(s, &m->u.pack_done);
		break;
	case WIRE_BYE:
		if (!s->done_sent || s->results != s->nfiles)
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
		free_job(s, &s->jobs[idx]);
		if (idx == wr_id)
			return 0;
	}
	return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
			   "completion for a write never posted");
}

static void src_on_work(struct engine *e, struct workq_item *it)
{
	struct src_job *j = (struct src_job *)it;

	j->state = JOB_READY;
}

static int src_pump(struct engine *e)
{
	struct source *s = e->role_data;
	int a = plan(s), b;

	if (a < 0)
		return 0;
	b = post(s);
	return b < 0 ? 0 : a + b;
}

static bool src_finished(const struct engine *e)
{
	const struct source *s = e->role_data;

	return s->bye;
}

static const struct engine_role source_role = {
	.on_msg = src_on_msg,
	.on_write_done = src_on_write_done,
	.on_work = src_on_work,
	.pump = src_pump,
	.finished = src_finished,
};

static int jobs_init(struct source *s)
{
	const struct session_params *p = &s->cfg->p;
	int rc;

	for (unsigned int i = 0; i < s->njobs; i++) {
		struct src_job *j = &s->jobs[i];

		j->item.fn = read_chunk;
		j->s = s;
		j->idx = i;
		if (p->level) {
			j->scratch = malloc(s->chunk);
			if (!j->scratch)
				return -ENOMEM;
		}
		if (p->data_key) {
			rc = aead_create(p->data_key, &j->aead);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void jobs_free(struct source *s)
{
	for (unsigned int i = 0; s->jobs && i < s->njobs; i++) {
		free(s->jobs[i].scratch);
		aead_destroy(s->jobs[i].aead);
	}
	free(s->jobs);
}

int source_run(struct engine *e, const struct source_cfg *cfg,
	       struct xfer_stats *st)
{
	struct source s = { 0 };
	const struct xfer_opts *o = e->o;
	int rc = -ENOMEM;

	s.e = e;
	s.o = o;
	s.cfg = cfg;
	s.st = st;
	s.chunk = e->c->geom.slot_size - WIRE_SLOT_HDR;
	s.njobs = s.free_jobs = e->c->geom.slots;
	s.sig_every = s.njobs / 4 ? s.njobs / 4 : 1;
	s.fifo_cap = 2 * s.njobs + 64;
	s.ask = cfg->p.flags & WIRE_HELLO_ASK;
	s.resume = cfg->p.flags & WIRE_HELLO_RESUME;
	/*
	 * Packs being read or waiting for credits: enough to keep every
	 * worker busy, few enough that the staging buffers they use (and the
	 * ring slots behind them) stay warm in the cache.
	 */
	s.pack_ahead = 2 * (o->workers ? o->workers : 1) + 4;
	/* Small files are packed unless each must wait for a HAVE. */
	if (cfg->p.pack && !s.ask)
		s.pack_max = s.chunk / 4 < PACK_FILE_MAX ? s.chunk / 4
							 : PACK_FILE_MAX;
	s.dlen = cfg->p.csum == XFER_CSUM_SHA256  ? CK_SHA256_LEN
		 : cfg->p.csum == XFER_CSUM_CRC32 ? 4
						  : 0;
	s.corrupt_seq = UINT64_MAX;
	s.walk.rootfd = cfg->rootfd;
	s.walk.recursive = cfg->p.flags & WIRE_HELLO_RECURSIVE;
	ratelimit_init(&s.rl, cfg->bwlimit,
		       cfg->bwlimit / 10 > s.chunk ? cfg->bwlimit / 10
						   : s.chunk,
		       clock_now_ns());
#ifdef RDCP_TEST_HOOKS
	if (getenv("RDCP_TEST_CORRUPT_CHUNK"))
		s.corrupt_seq =
			strtoull(getenv("RDCP_TEST_CORRUPT_CHUNK"), NULL, 0);
#endif
	credit_tx_init(&s.tx, e->c->geom.slots);
	walk_start(&s.walk, cfg->srcs, cfg->nsrcs);
	s.jobs = calloc(s.njobs, sizeof(*s.jobs));
	s.fifo = calloc(s.fifo_cap, sizeof(*s.fifo));
	s.posted = calloc(s.njobs, sizeof(*s.posted));
	s.fblk = calloc(WIRE_FILES_MAX / WALK_BLOCK, sizeof(*s.fblk));
	if (!s.jobs || !s.fifo || !s.posted || !s.fblk) {
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
out:
	/* Workers may still hold jobs: stop them before freeing. */
	workq_destroy(e->wq);
	e->wq = NULL;
	for (size_t i = 0; i < s.nfiles; i++) {
		struct src_file *f = sf(&s, i);

		if (f->fd >= 0)
			close(f->fd);
		ck_sha256_destroy(f->tree);
		free(f->have);
	}
	for (size_t i = 0; i < s.nfblk; i++)
		free(s.fblk[i]);
	free(s.fblk);
	jobs_free(&s);
	free(s.fifo);
	free(s.posted);
	free(s.by_wire);
	walk_free(&s.walk);
	return e->fail ? e->err : 0;
}
