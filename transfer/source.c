/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The data source: reads files into staging buffers and writes them into
 * the sink's ring.
 *
 * The engine thread plans the session as an ordered list of items, FILE,
 * CHUNK..., FILE_END for each file and DONE at the end, and posts them in
 * that order; because SENDs and WRITEs on one RC queue pair arrive in
 * order, the sink always sees a file announced before its first chunk and
 * ended after its last. Each CHUNK owns one staging buffer (a job): a worker
 * preads it and computes its CRC32 (and SHA-256), then the engine thread
 * posts it with WRITE_WITH_IMM into slot seq % N as soon as it holds a
 * credit. Writes are signalled selectively: every sig_every-th, and
 * whenever posting stalls or no staging buffer is left, so every buffer is
 * reclaimed by a later completion.
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
#include "transfer/session.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/path.h"

enum item_kind {
	IT_FILE,
	IT_CHUNK,
	IT_END,
	IT_DONE
};
enum job_state {
	JOB_FREE,
	JOB_READING,
	JOB_READY,
	JOB_POSTED
};

struct src_file {
	const char *path; /* as given by the user */
	int fd;
	struct stat st;
	uint64_t nchunks;  /* chunks posted (holes are not) */
	uint64_t next_off; /* planning cursor */
	uint32_t crc;	   /* CRC32 of the file, combined in post order */
	struct ck_sha256 *tree;
	int err;
	char errmsg[300];
	bool skipped;	  /* never announced: failed before FILE */
	uint32_t wire_id; /* file id on the wire: announced files, in order */
	bool result;
	double t0;
};

struct src_job {
	struct workq_item item;
	struct source *s;
	unsigned int idx; /* staging buffer index */
	enum job_state state;
	struct src_file *f;
	uint64_t offset;
	uint32_t len;
	uint32_t crc;
	uint8_t sha[CK_SHA256_LEN];
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
	struct xfer_stats *st;
	uint32_t chunk;
	struct credit_tx tx;
	struct src_file *files;
	size_t nfiles, next_file;
	uint32_t *by_wire; /* wire id -> index in files */
	uint32_t nwire;
	struct src_file *cur; /* being planned */
	struct src_job *jobs;
	unsigned int njobs, free_jobs;
	struct item *fifo; /* planned, not yet posted */
	unsigned int fifo_cap, fifo_head, fifo_len;
	unsigned int *posted; /* job indices in post order, unreclaimed */
	unsigned int posted_head, posted_len;
	unsigned int sig_every, unsignaled;
	bool done_planned, done_sent, bye;
	uint64_t bytes_posted, bytes_total; /* for on_progress */
	uint64_t next_progress_ms;
	uint64_t results;
	uint64_t corrupt_seq; /* test hook: flip a byte of this chunk */
};

static void report(struct source *s, struct src_file *f, int status,
		   const char *msg, const uint8_t *digest, unsigned int dlen);

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

/* Opens the next source; a file that cannot be opened is reported now. */
static int open_next(struct source *s)
{
	struct src_file *f = &s->files[s->next_file++];

	f->t0 = clock_now_s();
	f->fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (f->fd < 0) {
		file_fail(f, -errno, "cannot open '%s': %s", f->path,
			  strerror(errno));
	} else if (fstat(f->fd, &f->st) < 0) {
		file_fail(f, -errno, "cannot stat '%s': %s", f->path,
			  strerror(errno));
	} else if (!S_ISREG(f->st.st_mode)) {
		file_fail(f, S_ISDIR(f->st.st_mode) ? -EISDIR : -EINVAL,
			  "cannot send '%s': %s", f->path,
			  S_ISDIR(f->st.st_mode) ? "it is a directory (use -r)"
						 : "not a regular file");
	}
	if (f->err) {
		log_err("%s", f->errmsg);
		f->skipped = true;
		report(s, f, f->err, f->errmsg, NULL, 0);
		return 0;
	}
	posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (s->o->csum == XFER_CSUM_SHA256) {
		int rc = ck_sha256_create(&f->tree);

		if (rc)
			return engine_fail(s->e, XFER_FAIL_RESOURCE, rc,
					   "cannot start SHA-256");
	}
	s->cur = f;
	fifo_push(s, IT_FILE, f, NULL);
	return 0;
}

static void read_chunk(struct workq_item *item)
{
	struct src_job *j = (struct src_job *)item;
	struct source *s = j->s;
	uint8_t *data = cm_stage(s->e->c, j->idx) + WIRE_SLOT_HDR;

	j->status = io_pread_full(j->f->fd, data, j->len, j->offset);
	if (j->status)
		return;
	if (s->o->csum != XFER_CSUM_NONE)
		j->crc = ck_crc32(0, data, j->len);
	if (s->o->csum == XFER_CSUM_SHA256)
		j->status = ck_sha256(data, j->len, j->sha);
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

/*
 * Moves the planning cursor past chunks that lie wholly in a hole: they are
 * not sent, and the sink's file (sized up front) keeps them as holes. The
 * chunk grid stays aligned, so offsets remain multiples of the chunk size.
 */
static bool skip_hole(struct source *s, struct src_file *f)
{
	off_t d = lseek(f->fd, (off_t)f->next_off, SEEK_DATA);
	uint64_t aligned;

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
			if (s->next_file == s->nfiles) {
				if (!s->done_planned) {
					fifo_push(s, IT_DONE, NULL, NULL);
					s->done_planned = true;
					n++;
				}
				break;
			}
			open_next(s);
			n++;
			continue;
		}
		if (f->next_off >= (uint64_t)f->st.st_size) {
			fifo_push(s, IT_END, f, NULL);
			s->cur = NULL;
			n++;
			continue;
		}
		if (skip_hole(s, f))
			continue;
		j = take_job(s);
		if (!j)
			break;
		j->state = JOB_READING;
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

static int send_file(struct source *s, struct src_file *f)
{
	struct wire_msg m = { .type = WIRE_FILE };

	f->wire_id = s->nwire++;
	s->by_wire[f->wire_id] = (uint32_t)(f - s->files);
	m.u.file.file_id = f->wire_id;
	m.u.file.size = (uint64_t)f->st.st_size;
	if ((uint64_t)f->st.st_blocks * 512 < (uint64_t)f->st.st_size)
		m.u.file.flags |= WIRE_FILE_SPARSE;
	m.u.file.mode = f->st.st_mode & 07777;
	m.u.file.mtime_sec = f->st.st_mtim.tv_sec;
	m.u.file.mtime_nsec = (uint32_t)f->st.st_mtim.tv_nsec;
	snprintf(m.u.file.path, sizeof(m.u.file.path), "%s",
		 path_basename(f->path));
	if (s->o->on_file) {
		struct xfer_file_report r = {
			.path = f->path,
			.bytes = (uint64_t)f->st.st_size,
			.algorithm = csum_name(s->o->csum),
		};

		s->o->on_file(s->o->on_file_arg, &r);
	}
	return engine_send(s->e, &m);
}

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
	int rc;

	check_unchanged(f);
	m.u.end.file_id = f->wire_id;
	m.u.end.nchunks = f->nchunks;
	m.u.end.csum = (uint8_t)s->o->csum;
	if (f->err) {
		m.u.end.flags = WIRE_END_ABORT;
	} else if (s->o->csum == XFER_CSUM_CRC32) {
		uint32_t be = htobe32(f->crc);

		m.u.end.digest_len = 4;
		memcpy(m.u.end.digest, &be, 4);
	} else if (s->o->csum == XFER_CSUM_SHA256) {
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
	       credit_tx_avail(&s->tx) == 1 || !next ||
	       next->kind != IT_CHUNK || next->job->state != JOB_READY;
}

static int post_chunk(struct source *s, struct src_job *j)
{
	struct wire_slot_hdr h = { 0 };
	struct src_file *f = j->f;
	uint8_t *buf = cm_stage(s->e->c, j->idx);
	uint64_t seq = s->tx.posted;
	unsigned int slot;
	bool sig;
	int rc;

	h.seq = seq;
	h.file_id = f->wire_id;
	h.len = j->len;
	h.raw_len = j->len;
	h.offset = j->offset;
	h.crc = j->crc;
	wire_slot_encode(buf, &h);
#ifdef RDCP_TEST_HOOKS
	if (seq == s->corrupt_seq)
		buf[WIRE_SLOT_HDR + j->len / 2] ^= 0x5a;
#endif
	sig = should_signal(s);
	slot = credit_tx_take(&s->tx);
	rc = s->e->c->ops->post_write(s->e->c, j->idx, WIRE_SLOT_HDR + j->len,
				      slot, wire_imm(seq, slot), sig, j->idx);
	if (rc)
		return engine_fail(s->e, XFER_FAIL_PEER_LOST, rc,
				   "cannot post RDMA write to %s",
				   s->e->c->peer);
	if (sig)
		s->unsignaled = 0;
	j->state = JOB_POSTED;
	f->nchunks++;
	s->bytes_posted += j->len;
	if (s->o->on_progress) {
		uint64_t now = clock_now_ms();

		if (now >= s->next_progress_ms) {
			s->next_progress_ms = now + 250;
			s->o->on_progress(s->o->on_file_arg, s->bytes_posted,
					  s->bytes_total, f->path);
		}
	}
	s->posted[(s->posted_head + s->posted_len++) % s->njobs] = j->idx;
	f->crc = ck_crc32_combine(f->crc, j->crc, j->len);
	if (f->tree)
		return ck_sha256_update(f->tree, j->sha, CK_SHA256_LEN);
	return 0;
}

static void free_job(struct source *s, struct src_job *j)
{
	j->state = JOB_FREE;
	s->free_jobs++;
}

/* Posts planned items in order while credits and readiness allow. */
static int post(struct source *s)
{
	int n = 0;

	while (s->fifo_len && !s->e->fail) {
		struct item *it = fifo_at(s, 0);

		switch (it->kind) {
		case IT_FILE:
			if (!it->f->skipped && send_file(s, it->f))
				return -1;
			break;
		case IT_CHUNK:
			if (it->job->state != JOB_READY)
				return n;
			if (it->job->status || it->f->err) {
				file_fail(it->f, it->job->status,
					  "cannot read '%s': %s", it->f->path,
					  strerror(-it->job->status));
				free_job(s, it->job);
				break;
			}
			/* Data must not overtake a queued announcement. */
			if (!credit_tx_avail(&s->tx) || !engine_out_empty(s->e))
				return n;
			if (post_chunk(s, it->job))
				return -1;
			break;
		case IT_END:
			if (!it->f->skipped && send_end(s, it->f))
				return -1;
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
	struct xfer_file_report r = {
		.done = true,
		.path = f->path,
		.bytes = (uint64_t)f->st.st_size,
		.seconds = clock_now_s() - f->t0,
		.status = status,
		.klass = engine_klass_of(status, !f->err),
		.message = msg,
		.digest = hex,
		.algorithm = csum_name(s->o->csum),
	};

	if (dlen)
		ck_hex(digest, dlen, hex);
	f->result = true;
	s->results++;
	if (status) {
		if (!s->st->files_failed++)
			s->st->first_fail = r.klass;
	} else {
		s->st->files_ok++;
		s->st->bytes += (uint64_t)f->st.st_size;
	}
	if (s->o->on_file)
		s->o->on_file(s->o->on_file_arg, &r);
}

static int src_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct source *s = e->role_data;
	struct src_file *f;

	if (credit_tx_ack(&s->tx, m->slot_ack))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s released ring slots never written",
				   e->c->peer);
	switch (m->type) {
	case WIRE_CREDIT:
		return 0;
	case WIRE_FILE_RESULT:
		if (m->u.result.file_id >= s->nwire)
			break;
		f = &s->files[s->by_wire[m->u.result.file_id]];
		if (f->result)
			break;
		{
			/* Our own failure (read error, file changed) wins. */
			int status = f->err ? f->err : m->u.result.status;
			const char *msg = f->err ? f->errmsg : m->u.result.msg;

			if (status)
				log_err("%s%s%s", f->err ? "" : f->path,
					f->err ? "" : ": ", msg);
			report(s, f, status, msg, m->u.result.digest,
			       status ? 0 : m->u.result.digest_len);
		}
		return 0;
	case WIRE_BYE:
		if (!s->done_sent || s->results != s->nfiles)
			break;
		s->bye = true;
		return 0;
	default:
		break;
	}
	return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
			   "%s sent an unexpected %s", e->c->peer,
			   wire_type_name(m->type));
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

int source_run(struct engine *e, struct xfer_stats *st)
{
	struct source s = { 0 };
	const struct xfer_opts *o = e->o;
	int rc = -ENOMEM;

	s.e = e;
	s.o = o;
	s.st = st;
	s.chunk = e->c->geom.slot_size - WIRE_SLOT_HDR;
	s.njobs = s.free_jobs = e->c->geom.slots;
	s.sig_every = s.njobs / 4 ? s.njobs / 4 : 1;
	s.nfiles = o->nsrcs;
	s.fifo_cap = 2 * s.njobs + 64;
	s.corrupt_seq = UINT64_MAX;
#ifdef RDCP_TEST_HOOKS
	if (getenv("RDCP_TEST_CORRUPT_CHUNK"))
		s.corrupt_seq =
			strtoull(getenv("RDCP_TEST_CORRUPT_CHUNK"), NULL, 0);
#endif
	credit_tx_init(&s.tx, e->c->geom.slots);
	s.files = calloc(s.nfiles ? s.nfiles : 1, sizeof(*s.files));
	s.jobs = calloc(s.njobs, sizeof(*s.jobs));
	s.fifo = calloc(s.fifo_cap, sizeof(*s.fifo));
	s.posted = calloc(s.njobs, sizeof(*s.posted));
	s.by_wire = calloc(s.nfiles ? s.nfiles : 1, sizeof(*s.by_wire));
	if (!s.files || !s.jobs || !s.fifo || !s.posted || !s.by_wire) {
		engine_fail(e, XFER_FAIL_RESOURCE, rc, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s.nfiles; i++) {
		struct stat sb;

		s.files[i].path = o->srcs[i];
		s.files[i].fd = -1;
		if (o->on_progress && stat(o->srcs[i], &sb) == 0 &&
		    S_ISREG(sb.st_mode))
			s.bytes_total += (uint64_t)sb.st_size;
	}
	for (unsigned int i = 0; i < s.njobs; i++) {
		s.jobs[i].item.fn = read_chunk;
		s.jobs[i].s = &s;
		s.jobs[i].idx = i;
	}
	rc = engine_run(e, &source_role, &s);
out:
	/* Workers may still hold jobs: stop them before freeing. */
	workq_destroy(e->wq);
	e->wq = NULL;
	for (size_t i = 0; s.files && i < s.nfiles; i++) {
		if (s.files[i].fd >= 0)
			close(s.files[i].fd);
		ck_sha256_destroy(s.files[i].tree);
	}
	free(s.files);
	free(s.jobs);
	free(s.fifo);
	free(s.posted);
	free(s.by_wire);
	return rc;
}
