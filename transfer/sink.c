/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The data sink: takes chunks out of the ring, verifies them, writes them
 * to a temporary file beside the target, and gives the target its final
 * name only after the whole file has been verified.
 *
 * The engine thread checks each arriving immediate and slot header (cheap,
 * and every field is untrusted) and hands the slot to a worker, which
 * opens sealed chunks, inflates compressed ones, checks the chunk CRC32,
 * computes the chunk SHA-256 when asked, and pwrites the payload. When the
 * worker is done the slot is drained; slots are released to the source in
 * order (credit.h). When FILE_END has come and every chunk of the file is
 * written, a worker combines the chunk digests, compares them with the
 * source's, fsyncs on request and renames. Nothing is ever renamed that
 * was not verified.
 *
 * Directories and symlinks are made as they are announced; directories get
 * their final mode and times at the end, deepest first, so they stay
 * writable while they fill.
 *
 * Asked first (--resume, --no-clobber, --update), the sink answers a FILE
 * with HAVE: skip it, or the CRC32 of each chunk of what is already there
 * (the temporary an interrupted attempt left, else the old file), which a
 * worker reads. Chunks the source does not send are the ones that matched;
 * the final digest covers them too, read from this side's disk.
 *
 * Temporaries of failed files are removed, except with --resume, which
 * keeps them for the next attempt unless their content failed to verify.
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

#include "transfer/session.h"
#include "util/aead.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"
#include "util/zchunk.h"

#define SINK_MAX_FILES (1u << 24) /* per session */

struct snk_file {
	uint32_t id;
	uint8_t kind;
	int fd;
	int dirfd;	 /* the parent: owned unless it is the target's */
	int cand;	 /* resume: what an earlier attempt left (or -1) */
	bool cand_final; /* ... and that is the file under its final name */
	char name[PATH_NAME_MAX + 1];
	char tmp[PATH_NAME_MAX + 1];
	char rel[PATH_PEER_MAX + PATH_NAME_MAX + 2]; /* beneath t->dirfd */
	char shown[4400];
	uint64_t size, nslots, received, sent;
	uint32_t mode;
	struct timespec times[2]; /* atime, mtime */
	uint8_t *got;		  /* per chunk index */
	uint32_t *crcs;		  /* per chunk index */
	uint8_t *shas;		  /* per chunk index, CK_SHA256_LEN each */
	uint64_t have_n; /* chunks [0, have_n) of cand were read and hashed */
	uint64_t cand_size;
	unsigned int inflight;
	bool scanning, ended, finalizing, skipped;
	struct wire_file_end end;
	int err;
	bool err_remote; /* the source's failure, not ours */
	char errmsg[WIRE_MSG_MAX + 1];
	double t0;
};

struct snk_job {
	struct workq_item item;
	struct sink *k;
	unsigned int slot;
	struct wire_slot_hdr h;
	struct snk_file *f;
	uint64_t index;
	uint8_t *scratch; /* inflated payload, with compression */
	struct aead *aead;
	int status;
};

/* A finalize, or a resume scan: work on one file in a worker. */
struct snk_fin {
	struct workq_item item;
	struct sink *k;
	struct snk_file *f;
	uint8_t digest[WIRE_DIGEST_MAX];
	uint8_t dlen;
};

struct snk_dir {
	char *rel;
	uint32_t mode;
	bool created;
	struct timespec times[2];
};

struct sink {
	struct engine *e;
	const struct sink_target *t;
	const struct session_params *p;
	struct xfer_stats *st;
	uint32_t chunk;
	struct credit_rx rx;
	struct snk_job *jobs; /* one per slot */
	struct snk_file **files;
	uint32_t nfiles; /* announced so far (= next id) */
	uint32_t cap;
	unsigned int active;	     /* announced, result not yet sent */
	char top[PATH_NAME_MAX + 1]; /* first component, DEST not a dir */
	struct snk_dir *dirs;
	size_t ndirs, dirs_cap;
	uint64_t bytes_in, next_progress_ms;
	bool done, bye_sent;
};

static void scan(struct workq_item *item);
static void finalize(struct workq_item *item);

static void file_fail(struct snk_file *f, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void file_fail(struct snk_file *f, int err, const char *fmt, ...)
{
	va_list ap;

	if (f->err)
		return;
	f->err = err;
	va_start(ap, fmt);
	vsnprintf(f->errmsg, sizeof(f->errmsg), fmt, ap);
	va_end(ap);
}

static bool resuming(const struct sink *k)
{
	return k->p->flags & WIRE_HELLO_RESUME;
}

/* Closes the temporary; removes it unless --resume may reuse it. */
static void discard(struct sink *k, struct snk_file *f)
{
	if (f->fd < 0)
		return;
	close(f->fd);
	f->fd = -1;
	if (!resuming(k) || f->err == -EBADMSG || f->kind != WIRE_KIND_FILE)
		unlinkat(f->dirfd, f->tmp, 0);
}

static void file_free(struct sink *k, struct snk_file *f)
{
	if (!f)
		return;
	discard(k, f);
	if (f->cand >= 0)
		close(f->cand);
	if (f->dirfd >= 0 && f->dirfd != k->t->dirfd)
		close(f->dirfd);
	free(f->got);
	free(f->crcs);
	free(f->shas);
	free(f);
}

static mode_t final_mode(const struct sink *k, uint32_t mode)
{
	if (k->p->flags & WIRE_HELLO_PRESERVE)
		return mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
	return mode & 0777 & ~k->t->umask;
}

static void client_report(struct sink *k, struct snk_file *f, bool done,
			  const uint8_t *digest, unsigned int dlen)
{
	const struct xfer_opts *o = k->e->o;
	char hex[2 * WIRE_DIGEST_MAX + 1] = "";
	struct xfer_file_report r = {
		.done = done,
		.path = f->shown,
		.kind = wire_kind_name(f->kind),
		.bytes = f->size,
		.sent = f->sent,
		.seconds = clock_now_s() - f->t0,
		.status = f->err,
		.klass = engine_klass_of(f->err, f->err_remote),
		.message = f->err ? f->errmsg : NULL,
		.skipped = f->skipped,
		.digest = hex,
		.algorithm = k->p->csum == XFER_CSUM_SHA256  ? "sha256"
			     : k->p->csum == XFER_CSUM_CRC32 ? "crc32"
							     : "none",
	};

	if (k->p->server || !o->on_file)
		return;
	if (dlen)
		ck_hex(digest, dlen, hex);
	o->on_file(o->on_file_arg, &r);
}

/* ---- FILE: names ---- */

/*
 * Where an announced path goes beneath the target: the path itself inside
 * a directory DEST, else DEST's name in place of its first component.
 */
static int map_path(struct sink *k, struct snk_file *f, const char *path)
{
	const struct sink_target *t = k->t;
	const char *slash;
	size_t first;
	int rc;

	rc = path_check_relative(path, strlen(path), false);
	if (rc || path[strlen(path) - 1] == '/')
		return -EPERM;
	if (t->is_dir) {
		snprintf(f->rel, sizeof(f->rel), "%s", path);
	} else {
		slash = strchr(path, '/');
		first = slash ? (size_t)(slash - path) : strlen(path);
		if (k->nfiles == 1 && !slash)
			snprintf(k->top, sizeof(k->top), "%s", path);
		if (!k->top[0] || strlen(k->top) != first ||
		    strncmp(path, k->top, first))
			return -EPROTO;
		snprintf(f->rel, sizeof(f->rel), "%s%s", t->name,
			 slash ? slash : "");
	}
	slash = strrchr(f->rel, '/');
	snprintf(f->name, sizeof(f->name), "%s", slash ? slash + 1 : f->rel);
	snprintf(f->tmp, sizeof(f->tmp), ".%.200s.rdcp-part", f->name);
	snprintf(f->shown, sizeof(f->shown), "%s%s%s", t->shown,
		 t->is_dir && t->shown[0] ? "/" : "",
		 t->is_dir ? f->rel : f->rel + strlen(t->name));
	if (!slash) {
		f->dirfd = t->dirfd;
		return 0;
	}
	f->rel[slash - f->rel] = '\0';
	f->dirfd = path_open_beneath(t->dirfd, f->rel, O_PATH | O_DIRECTORY, 0);
	f->rel[slash - f->rel] = '/';
	if (f->dirfd < 0) {
		rc = f->dirfd;
		f->dirfd = -1;
		file_fail(f, rc, "cannot open the directory of '%s': %s",
			  f->shown, strerror(-rc));
	}
	return 0;
}

/* ---- FILE: directories and symlinks ---- */

static int remember_dir(struct sink *k, struct snk_file *f, bool created)
{
	struct snk_dir *d;

	if (k->ndirs == k->dirs_cap) {
		size_t cap = k->dirs_cap ? 2 * k->dirs_cap : 32;
		struct snk_dir *n = realloc(k->dirs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		k->dirs = n;
		k->dirs_cap = cap;
	}
	d = &k->dirs[k->ndirs];
	d->rel = strdup(f->rel);
	if (!d->rel)
		return -ENOMEM;
	d->mode = f->mode;
	d->created = created;
	d->times[0] = f->times[0];
	d->times[1] = f->times[1];
	k->ndirs++;
	return 0;
}

static int make_dir(struct sink *k, struct snk_file *f)
{
	struct stat st;

	if (mkdirat(f->dirfd, f->name, 0700) == 0)
		return remember_dir(k, f, true);
	if (errno != EEXIST) {
		file_fail(f, -errno, "cannot create directory '%s': %s",
			  f->shown, strerror(errno));
		return 0;
	}
	if (fstatat(f->dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		file_fail(f, -EEXIST,
			  "cannot create directory '%s': something else "
			  "has that name",
			  f->shown);
		return 0;
	}
	return remember_dir(k, f, false);
}

/* Whether an existing name stays as it is (--no-clobber, --update). */
static bool keep_existing(struct sink *k, struct snk_file *f)
{
	struct stat st;

	if (!(k->p->flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE)) ||
	    fstatat(f->dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	if (k->p->flags & WIRE_HELLO_NO_CLOBBER)
		return true;
	return st.st_mtim.tv_sec > f->times[1].tv_sec ||
	       (st.st_mtim.tv_sec == f->times[1].tv_sec &&
		st.st_mtim.tv_nsec >= f->times[1].tv_nsec);
}

static void make_symlink(struct sink *k, struct snk_file *f, const char *to)
{
	struct timespec ts[2] = { f->times[0], f->times[1] };

	unlinkat(f->dirfd, f->tmp, 0);
	if (symlinkat(to, f->dirfd, f->tmp) < 0) {
		file_fail(f, -errno, "cannot create symlink '%s': %s", f->shown,
			  strerror(errno));
		return;
	}
	if ((k->p->flags & WIRE_HELLO_PRESERVE) &&
	    utimensat(f->dirfd, f->tmp, ts, AT_SYMLINK_NOFOLLOW) < 0)
		file_fail(f, -errno, "cannot set times of '%s': %s", f->shown,
			  strerror(errno));
	if (!f->err && renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0)
		file_fail(f, -errno, "cannot rename into '%s': %s", f->shown,
			  strerror(errno));
	if (f->err)
		unlinkat(f->dirfd, f->tmp, 0);
}

/* ---- FILE: regular files ---- */

/*
 * Opens the temporary without truncating, locks it (a second session
 * writing the same file fails instead of mixing its chunks in), then
 * truncates unless it is to be resumed.
 */
static int open_tmp(struct sink *k, struct snk_file *f, bool keep)
{
	f->fd = openat(f->dirfd, f->tmp,
		       O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		file_fail(f, -errno, "cannot create '%s': %s", f->shown,
			  strerror(errno));
		return -1;
	}
	if (flock(f->fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK) {
			file_fail(f, -errno, "cannot lock '%s': %s", f->shown,
				  strerror(errno));
			discard(k, f);
			return -1;
		}
		file_fail(f, -EBUSY,
			  "cannot write '%s': another session is writing it",
			  f->shown);
		close(f->fd);
		f->fd = -1; /* not ours to remove */
		return -1;
	}
	if (!keep && ftruncate(f->fd, 0) < 0) {
		file_fail(f, -errno, "cannot truncate '%s': %s", f->shown,
			  strerror(errno));
		return -1;
	}
	return 0;
}

static void check_space(struct snk_file *f, bool sparse)
{
	struct statvfs vfs;
	char sz[32], av[32];

	/*
	 * Fail fast when the file cannot fit. A sparse source's size says
	 * little of the space its data needs: then a full disk shows up at
	 * the write instead, failing the same way.
	 */
	if (!sparse && fstatvfs(f->fd, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < f->size)
		file_fail(
			f, -ENOSPC,
			"not enough space for '%s': %s needed, %s free",
			f->shown, units_format_size(f->size, sz, sizeof(sz)),
			units_format_size((uint64_t)vfs.f_bavail * vfs.f_frsize,
					  av, sizeof(av)));
}

/*
 * --resume: what an earlier attempt left, the temporary first, else the
 * old file. Returns true when there is something to scan.
 */
static bool find_candidate(struct sink *k, struct snk_file *f)
{
	struct stat st;
	int fd;

	if (!resuming(k) || f->err)
		return false;
	fd = openat(f->dirfd, f->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		f->cand = fd; /* the temporary itself: keep what it holds */
		return true;
	}
	if (fd >= 0)
		close(fd);
	fd = openat(f->dirfd, f->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		f->cand = fd;
		f->cand_final = true;
		return true;
	}
	if (fd >= 0)
		close(fd);
	return false;
}

static int send_result(struct sink *k, struct snk_file *f,
		       const uint8_t *digest, unsigned int dlen);

/*
 * The source is told to send nothing of f, then f's result follows: kept
 * as it was (skipped), or failed before any data (f->err). Frees f.
 */
static int skip_file(struct sink *k, struct snk_file *f)
{
	struct wire_msg m = { .type = WIRE_HAVE };

	m.u.have.file_id = f->id;
	m.u.have.flags = WIRE_HAVE_SKIP | WIRE_HAVE_LAST;
	m.u.have.status = f->err;
	if (engine_send(k->e, &m))
		return -1;
	return send_result(k, f, NULL, 0);
}

/* The CRCs of chunks [0, have_n), in as many HAVEs as it takes. */
static int send_have(struct sink *k, struct snk_file *f)
{
	struct wire_msg m = { .type = WIRE_HAVE };
	uint64_t i = 0;
	int rc;

	m.u.have.file_id = f->id;
	do {
		uint64_t n = f->have_n - i;

		if (n > WIRE_HAVE_MAX)
			n = WIRE_HAVE_MAX;
		m.u.have.first = i;
		m.u.have.count = (uint16_t)n;
		memcpy(m.u.have.crcs, f->crcs + i, n * sizeof(uint32_t));
		i += n;
		m.u.have.flags = i == f->have_n ? WIRE_HAVE_LAST : 0;
		rc = engine_send(k->e, &m);
	} while (!rc && i < f->have_n);
	return rc;
}

static int start_work(struct sink *k, struct snk_file *f,
		      void (*fn)(struct workq_item *))
{
	struct snk_fin *w = calloc(1, sizeof(*w));

	if (!w)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	w->item.fn = fn;
	w->k = k;
	w->f = f;
	workq_push(k->e->wq, &w->item);
	return 0;
}

static int open_file(struct sink *k, struct snk_file *f,
		     const struct wire_file *wf)
{
	bool ask = k->p->flags & WIRE_HELLO_ASK;

	if (!f->err && ask && keep_existing(k, f)) {
		f->skipped = true;
		return skip_file(k, f);
	}
	if (f->err)
		return ask ? skip_file(k, f) : 0;
	if (find_candidate(k, f)) {
		if (open_tmp(k, f, !f->cand_final))
			return skip_file(k, f);
		f->scanning = true;
		return start_work(k, f, scan);
	}
	if (open_tmp(k, f, false) == 0) {
		check_space(f, wf->flags & WIRE_FILE_SPARSE);
		/* Holes the source skipped stay holes. */
		if (!f->err && ftruncate(f->fd, (off_t)f->size) < 0)
			file_fail(f, -errno, "cannot size '%s': %s", f->shown,
				  strerror(errno));
	}
	if (!ask)
		return 0;
	if (f->err)
		return skip_file(k, f);
	return send_have(k, f); /* nothing here: send it all */
}

static int on_file(struct sink *k, const struct wire_file *wf)
{
	struct snk_file *f;
	int rc;

	if (wf->file_id != k->nfiles || k->nfiles >= SINK_MAX_FILES)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced file %u out of order",
				   k->e->c->peer, wf->file_id);
	if (k->nfiles == k->cap) {
		uint32_t cap = k->cap ? 2 * k->cap : 64;
		struct snk_file **n = realloc(k->files, cap * sizeof(*n));

		if (!n)
			return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
		k->files = n;
		k->cap = cap;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	k->files[k->nfiles++] = f;
	k->active++;
	f->id = wf->file_id;
	f->kind = wf->kind;
	f->fd = f->dirfd = f->cand = -1;
	f->size = wf->size;
	f->mode = wf->mode;
	f->times[0].tv_sec = wf->atime_sec;
	f->times[0].tv_nsec = wf->atime_nsec;
	f->times[1].tv_sec = wf->mtime_sec;
	f->times[1].tv_nsec = wf->mtime_nsec;
	f->t0 = clock_now_s();
	f->nslots = (f->size + k->chunk - 1) / k->chunk;
	f->got = calloc(f->nslots ? f->nslots : 1, 1);
	f->crcs = calloc(f->nslots ? f->nslots : 1, sizeof(*f->crcs));
	if (k->p->csum == XFER_CSUM_SHA256)
		f->shas = calloc(f->nslots ? f->nslots : 1, CK_SHA256_LEN);
	if (!f->got || !f->crcs || (k->p->csum == XFER_CSUM_SHA256 && !f->shas))
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory for '%s'", wf->path);
	rc = map_path(k, f, wf->path);
	if (rc)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPERM,
				   "%s sent a file name that is not a path "
				   "beneath DEST: refused",
				   k->e->c->peer);
	client_report(k, f, false, NULL, 0);
	switch (f->kind) {
	case WIRE_KIND_DIR:
		if (!f->err && make_dir(k, f))
			return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
		return send_result(k, f, NULL, 0);
	case WIRE_KIND_SYMLINK:
		if (!f->err && keep_existing(k, f))
			f->skipped = true;
		else if (!f->err)
			make_symlink(k, f, wf->link);
		return send_result(k, f, NULL, 0);
	default:
		return open_file(k, f, wf);
	}
}

/* Worker, --resume: hash what is there, chunk by chunk. */
static void scan(struct workq_item *item)
{
	struct snk_fin *w = (struct snk_fin *)item;
	struct snk_file *f = w->f;
	struct sink *k = w->k;
	struct stat st;
	uint8_t *buf = malloc(k->chunk);
	int rc = 0;

	if (!buf || fstat(f->cand, &st) < 0) {
		file_fail(f, buf ? -errno : -ENOMEM, "cannot read '%s': %s",
			  f->shown, strerror(buf ? errno : ENOMEM));
		free(buf);
		return;
	}
	for (uint64_t i = 0; !rc && i < f->nslots; i++) {
		uint64_t off = i * k->chunk, len = f->size - off;

		if (len > k->chunk)
			len = k->chunk;
		if (off + len > (uint64_t)st.st_size)
			break;
		rc = io_pread_full(f->cand, buf, len, off);
		if (rc)
			break;
		f->crcs[i] = ck_crc32(0, buf, len);
		if (f->shas)
			rc = ck_sha256(buf, len, f->shas + i * CK_SHA256_LEN);
		f->have_n = i + 1;
	}
	free(buf);
	if (rc && rc != -ENODATA)
		file_fail(f, rc, "cannot read '%s': %s", f->shown,
			  strerror(-rc));
	f->cand_size = (uint64_t)st.st_size;
	/* Either way the temporary now gets the announced size. */
	if (!f->err && ftruncate(f->fd, (off_t)f->size) < 0)
		file_fail(f, -errno, "cannot size '%s': %s", f->shown,
			  strerror(errno));
}

static int scanned(struct sink *k, struct snk_fin *w)
{
	struct snk_file *f = w->f;

	free(w);
	f->scanning = false;
	if (f->have_n)
		log_info("resuming '%s': %llu of %llu chunks already here, "
			 "checking them against the source",
			 f->shown, (unsigned long long)f->have_n,
			 (unsigned long long)f->nslots);
	return f->err ? skip_file(k, f) : send_have(k, f);
}

/* ---- chunks ---- */

static void write_chunk(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	uint8_t *data = cm_slot(k->e->c, j->slot) + WIRE_SLOT_HDR;
	const uint8_t *raw = data;
	uint8_t aad[WIRE_AAD_LEN];
	uint32_t crc = 0;

	if (j->h.flags & WIRE_SLOT_ENCRYPTED) {
		wire_chunk_aad(aad, j->h.file_id, j->h.offset, j->h.raw_len,
			       j->h.flags);
		j->status = aead_open(j->aead, j->h.file_id, j->index, aad,
				      sizeof(aad), data, j->h.len, j->h.tag);
		if (j->status)
			return;
	}
	if (j->h.flags & WIRE_SLOT_COMPRESSED) {
		j->status = zchunk_decompress(data, j->h.len, j->scratch,
					      j->h.raw_len);
		if (j->status)
			return;
		raw = j->scratch;
	}
	if (k->p->csum != XFER_CSUM_NONE || resuming(k)) {
		crc = ck_crc32(0, raw, j->h.raw_len);
		if (!(j->h.flags & WIRE_SLOT_ENCRYPTED) && crc != j->h.crc) {
			j->status = -EBADMSG;
			return;
		}
	}
	j->f->crcs[j->index] = crc;
	if (k->p->csum == XFER_CSUM_SHA256) {
		j->status = ck_sha256(raw, j->h.raw_len,
				      j->f->shas + j->index * CK_SHA256_LEN);
		if (j->status)
			return;
	}
	j->status = io_pwrite_full(j->f->fd, raw, j->h.raw_len, j->h.offset);
}

static bool flags_ok(const struct sink *k, uint16_t flags)
{
	uint16_t allowed = WIRE_SLOT_ENCRYPTED;

	if (k->p->flags & WIRE_HELLO_COMPRESS)
		allowed |= WIRE_SLOT_COMPRESSED;
	if (flags & ~allowed)
		return false;
	/* Sealed chunks only when agreed, and then nothing in the clear. */
	return !(flags & WIRE_SLOT_ENCRYPTED) == !k->p->data_key;
}

static void progress(struct sink *k, struct snk_file *f, uint32_t len)
{
	const struct xfer_opts *o = k->e->o;
	uint64_t now;

	k->bytes_in += len;
	if (k->p->server || !o->on_progress)
		return;
	now = clock_now_ms();
	if (now >= k->next_progress_ms) {
		k->next_progress_ms = now + 250;
		o->on_progress(o->on_file_arg, k->bytes_in, 0, f->shown);
	}
}

static int snk_on_data(struct engine *e, const struct cm_event *ev)
{
	struct sink *k = e->role_data;
	struct wire_slot_hdr h;
	struct snk_file *f;
	struct snk_job *j;
	uint64_t seq, idx, want;
	int slot, rc;

	slot = credit_rx_arrive(&k->rx, ev->imm, &seq);
	if (slot < 0)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote out of turn (immediate 0x%08x): "
				   "credit protocol violated",
				   e->c->peer, ev->imm);
	rc = wire_slot_decode(cm_slot(e->c, (unsigned int)slot), &h);
	if (rc == 0 &&
	    (h.seq != seq || h.file_id >= k->nfiles || !k->files[h.file_id] ||
	     h.len + WIRE_SLOT_HDR != ev->len || !flags_ok(k, h.flags) ||
	     (!(h.flags & WIRE_SLOT_COMPRESSED) && h.raw_len != h.len)))
		rc = -EPROTO;
	if (rc)
		return engine_fail(e, XFER_FAIL_PROTOCOL, rc,
				   "%s wrote a bad slot header (seq %llu)",
				   e->c->peer, (unsigned long long)seq);
	f = k->files[h.file_id];
	idx = h.offset / k->chunk;
	want = idx < f->nslots ? f->size - h.offset : 0;
	if (want > k->chunk)
		want = k->chunk;
	if (f->kind != WIRE_KIND_FILE || f->ended || h.offset % k->chunk ||
	    idx >= f->nslots || h.raw_len != want || f->got[idx] ||
	    f->finalizing || f->scanning)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a chunk outside '%s' (offset %llu, "
				   "%u bytes)",
				   e->c->peer, f->shown,
				   (unsigned long long)h.offset, h.raw_len);
	f->got[idx] = 1;
	f->received++;
	f->sent += h.len; /* what crossed the link, compressed or not */
	progress(k, f, h.raw_len);
	if (f->err || f->fd < 0) {
		/* Drain without writing; the result is already known. */
		if (credit_rx_drain(&k->rx, (unsigned int)slot))
			return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
					   "slot accounting");
		return 0;
	}
	j = &k->jobs[slot];
	j->h = h;
	j->f = f;
	j->index = idx;
	j->status = 0;
	f->inflight++;
	workq_push(e->wq, &j->item);
	return 0;
}

/* ---- FILE_END and placement ---- */

/*
 * Whether chunk i is part of the file's digest. Without --resume only the
 * chunks that came are (the source leaves holes out too); with it every
 * chunk is: one that came, one already here (matched), or one the source
 * did not send because it is all zero and this side had nothing there.
 */
static bool counted(const struct sink *k, const struct snk_file *f, uint64_t i)
{
	return f->got[i] || resuming(k);
}

/* --resume: the digests of the all-zero chunks beyond what was here. */
static int zero_chunks(struct snk_fin *fin)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	uint8_t *zero = NULL;
	uint32_t crc = 0;
	uint8_t sha[CK_SHA256_LEN];
	int rc = 0;

	for (uint64_t i = f->have_n; !rc && i < f->nslots; i++) {
		uint64_t len = f->size - i * k->chunk;

		if (f->got[i])
			continue;
		if (len > k->chunk)
			len = k->chunk;
		if (!zero) {
			zero = calloc(1, k->chunk);
			if (!zero)
				return -ENOMEM;
		}
		if (len == k->chunk && crc) {
			f->crcs[i] = crc; /* the full-chunk one, once */
			if (f->shas)
				memcpy(f->shas + i * CK_SHA256_LEN, sha,
				       CK_SHA256_LEN);
			continue;
		}
		f->crcs[i] = ck_crc32(0, zero, len);
		if (f->shas)
			rc = ck_sha256(zero, len, f->shas + i * CK_SHA256_LEN);
		if (!rc && len == k->chunk) {
			crc = f->crcs[i];
			if (f->shas)
				memcpy(sha, f->shas + i * CK_SHA256_LEN,
				       CK_SHA256_LEN);
		}
	}
	free(zero);
	return rc;
}

static int verify_digest(struct snk_fin *fin)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	uint32_t crc = 0;
	int rc = 0;

	if (resuming(k)) {
		rc = zero_chunks(fin);
		if (rc) {
			file_fail(f, rc, "cannot hash '%s': %s", f->shown,
				  strerror(-rc));
			return rc;
		}
	}
	if (k->p->csum == XFER_CSUM_CRC32) {
		for (uint64_t i = 0; i < f->nslots; i++) {
			uint64_t len = f->size - i * k->chunk;

			if (!counted(k, f, i))
				continue;
			if (len > k->chunk)
				len = k->chunk;
			crc = ck_crc32_combine(crc, f->crcs[i], len);
		}
		crc = htobe32(crc);
		memcpy(fin->digest, &crc, 4);
		fin->dlen = 4;
	} else if (k->p->csum == XFER_CSUM_SHA256) {
		struct ck_sha256 *tree;

		rc = ck_sha256_create(&tree);
		for (uint64_t i = 0; !rc && i < f->nslots; i++)
			if (counted(k, f, i))
				rc = ck_sha256_update(
					tree, f->shas + i * CK_SHA256_LEN,
					CK_SHA256_LEN);
		if (!rc)
			rc = ck_sha256_final(tree, fin->digest);
		ck_sha256_destroy(tree);
		if (rc) {
			file_fail(f, rc, "SHA-256 failed");
			return rc;
		}
		fin->dlen = CK_SHA256_LEN;
	}
	if (fin->dlen != f->end.digest_len ||
	    memcmp(fin->digest, f->end.digest, fin->dlen)) {
		file_fail(f, -EBADMSG,
			  "'%s' failed verification: its digest does not "
			  "match the sender's (corrupted in transit?); not "
			  "placed",
			  f->shown);
		return -EBADMSG;
	}
	return 0;
}

/*
 * --resume from the old file: the chunks the source did not resend come
 * from it, each checked again against the CRC it was matched with.
 */
static int copy_matched(struct snk_fin *fin)
{
	struct snk_file *f = fin->f;
	const struct sink *k = fin->k;
	uint8_t *buf = malloc(k->chunk);
	int rc = 0;

	if (!buf) {
		file_fail(f, -ENOMEM, "cannot reuse '%s': out of memory",
			  f->shown);
		return -ENOMEM;
	}
	for (uint64_t i = 0; !rc && i < f->have_n; i++) {
		uint64_t off = i * k->chunk, len = f->size - off;

		if (f->got[i])
			continue;
		if (len > k->chunk)
			len = k->chunk;
		rc = io_pread_full(f->cand, buf, len, off);
		if (!rc && ck_crc32(0, buf, len) != f->crcs[i])
			rc = -ESTALE;
		if (!rc)
			rc = io_pwrite_full(f->fd, buf, len, off);
	}
	free(buf);
	if (rc)
		file_fail(f, rc, "cannot reuse '%s': %s", f->shown,
			  rc == -ESTALE ? "it changed while being resumed"
					: strerror(-rc));
	return rc;
}

static int set_meta(struct sink *k, struct snk_file *f, int fd)
{
	if (fchmod(fd, final_mode(k, f->mode)) < 0) {
		file_fail(f, -errno, "cannot set mode of '%s': %s", f->shown,
			  strerror(errno));
		return -1;
	}
	if ((k->p->flags & WIRE_HELLO_PRESERVE) && futimens(fd, f->times) < 0) {
		file_fail(f, -errno, "cannot set times of '%s': %s", f->shown,
			  strerror(errno));
		return -1;
	}
	return 0;
}

static void finalize(struct workq_item *item)
{
	struct snk_fin *fin = (struct snk_fin *)item;
	struct snk_file *f = fin->f;
	struct sink *k = fin->k;
	int rc;

	if (f->err || verify_digest(fin))
		goto out_discard;
	if (f->cand_final && !f->received && f->cand_size == f->size) {
		/* The old file was whole and right: keep it, drop the temp. */
		if (set_meta(k, f, f->cand))
			goto out_discard;
		close(f->fd);
		f->fd = -1;
		unlinkat(f->dirfd, f->tmp, 0);
		f->skipped = true;
		return;
	}
	if (f->cand_final && copy_matched(fin))
		goto out_discard;
	if (set_meta(k, f, f->fd))
		goto out_discard;
	if (k->p->flags & WIRE_HELLO_FSYNC && fsync(f->fd) < 0) {
		file_fail(f, -errno, "cannot fsync '%s': %s", f->shown,
			  strerror(errno));
		goto out_discard;
	}
	rc = io_close(f->fd);
	f->fd = -1;
	if (rc) {
		file_fail(f, rc, "cannot write '%s': %s", f->shown,
			  strerror(-rc));
		unlinkat(f->dirfd, f->tmp, 0);
		return;
	}
	if (renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0) {
		file_fail(f, -errno, "cannot rename into '%s': %s", f->shown,
			  strerror(errno));
		unlinkat(f->dirfd, f->tmp, 0);
	}
	return;

out_discard:
	discard(k, f);
}

static int maybe_finalize(struct sink *k, struct snk_file *f)
{
	if (!f->ended || f->inflight || f->finalizing)
		return 0;
	if (!f->err && f->received != f->end.nchunks)
		file_fail(f, -EPROTO, "'%s': %llu chunks announced, %llu came",
			  f->shown, (unsigned long long)f->end.nchunks,
			  (unsigned long long)f->received);
	f->finalizing = true;
	return start_work(k, f, finalize);
}

static int on_end(struct sink *k, const struct wire_file_end *end)
{
	struct snk_file *f;

	if (end->file_id >= k->nfiles || !(f = k->files[end->file_id]) ||
	    f->ended || f->kind != WIRE_KIND_FILE || f->scanning ||
	    end->csum != (uint8_t)k->p->csum)
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
	return maybe_finalize(k, f);
}

static int send_result(struct sink *k, struct snk_file *f,
		       const uint8_t *digest, unsigned int dlen)
{
	struct wire_msg m = { .type = WIRE_FILE_RESULT };
	int rc;

	m.u.result.file_id = f->id;
	m.u.result.status = f->err;
	m.u.result.sent = f->sent;
	m.u.result.flags = f->skipped ? WIRE_RESULT_SKIPPED : 0;
	if (f->err) {
		snprintf(m.u.result.msg, sizeof(m.u.result.msg), "%s",
			 f->errmsg);
		if (!k->p->server)
			log_err("%s", f->errmsg);
		else if (!f->err_remote)
			log_warn("%s", f->errmsg);
		if (!k->st->files_failed++)
			k->st->first_fail =
				engine_klass_of(f->err, f->err_remote);
	} else {
		m.u.result.digest_len = (uint8_t)dlen;
		if (dlen)
			memcpy(m.u.result.digest, digest, dlen);
		if (k->p->server)
			log_info("%s '%s' (%llu bytes)",
				 f->skipped ? "kept" : "received", f->shown,
				 (unsigned long long)f->size);
		k->st->files_ok++;
		k->st->files_skipped += f->skipped;
		k->st->bytes += f->size;
	}
	client_report(k, f, true, digest, dlen);
	rc = engine_send(k->e, &m);
	k->files[f->id] = NULL;
	k->active--;
	file_free(k, f);
	return rc;
}

/* Directories get their mode and times last, the deepest first. */
static void finish_dirs(struct sink *k)
{
	while (k->ndirs) {
		struct snk_dir *d = &k->dirs[--k->ndirs];
		bool preserve = k->p->flags & WIRE_HELLO_PRESERVE;
		int fd;

		if (preserve || d->created) {
			fd = path_open_beneath(k->t->dirfd, d->rel,
					       O_RDONLY | O_DIRECTORY, 0);
			if (fd < 0 || fchmod(fd, final_mode(k, d->mode)) < 0 ||
			    (preserve && futimens(fd, d->times) < 0))
				log_warn("cannot set mode/times of directory "
					 "'%s': %s",
					 d->rel,
					 strerror(fd < 0 ? -fd : errno));
			if (fd >= 0)
				close(fd);
		}
		free(d->rel);
	}
}

/* ---- engine role ---- */

static int snk_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct sink *k = e->role_data;

	switch (m->type) {
	case WIRE_CREDIT:
		return 0;
	case WIRE_FILE:
		if (!k->done)
			return on_file(k, &m->u.file);
		break;
	case WIRE_FILE_END:
		if (!k->done)
			return on_end(k, &m->u.end);
		break;
	case WIRE_DONE:
		if (!k->done) {
			k->done = true;
			return 0;
		}
		break;
	default:
		break;
	}
	return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
			   "%s sent an unexpected %s", e->c->peer,
			   wire_type_name(m->type));
}

static void chunk_done(struct sink *k, struct snk_job *j)
{
	struct snk_file *f = j->f;

	if (j->status == -EBADMSG)
		file_fail(f, -EBADMSG,
			  "'%s': chunk at offset %llu failed its %s check "
			  "(corrupted in transit); not placed",
			  f->shown, (unsigned long long)j->h.offset,
			  j->h.flags & WIRE_SLOT_ENCRYPTED ? "AES-GCM"
							   : "CRC32");
	else if (j->status)
		file_fail(f, j->status, "cannot write '%s': %s", f->shown,
			  strerror(-j->status));
	f->inflight--;
	if (credit_rx_drain(&k->rx, j->slot)) {
		engine_fail(k->e, XFER_FAIL_INTERNAL, -EPROTO,
			    "slot accounting");
		return;
	}
	maybe_finalize(k, f);
}

static void snk_on_work(struct engine *e, struct workq_item *it)
{
	struct sink *k = e->role_data;
	struct snk_fin *w = (struct snk_fin *)it;

	if (it->fn == scan) {
		scanned(k, w);
	} else if (it->fn == finalize) {
		send_result(k, w->f, w->digest, w->f->err ? 0 : w->dlen);
		free(w);
	} else {
		chunk_done(k, (struct snk_job *)it);
	}
}

static int snk_pump(struct engine *e)
{
	struct sink *k = e->role_data;
	struct wire_msg m = { .type = WIRE_CREDIT };

	if (k->done && !k->active && !k->bye_sent) {
		finish_dirs(k);
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
	    engine_out_empty(e) && credit_ctrl_can_send(&e->cc, false))
		return engine_send(e, &m) ? 0 : 1;
	return 0;
}

static bool snk_finished(const struct engine *e)
{
	const struct sink *k = e->role_data;

	return k->bye_sent && engine_out_empty(e) && e->tx_inflight == 0;
}

static uint32_t snk_slot_ack(const struct engine *e)
{
	struct sink *k = e->role_data;

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
	.on_data = snk_on_data,
	.on_write_done = snk_on_write_done,
	.on_work = snk_on_work,
	.pump = snk_pump,
	.finished = snk_finished,
	.slot_ack = snk_slot_ack,
};

static int jobs_init(struct sink *k, unsigned int n)
{
	int rc;

	k->jobs = calloc(n, sizeof(*k->jobs));
	if (!k->jobs)
		return -ENOMEM;
	for (unsigned int i = 0; i < n; i++) {
		struct snk_job *j = &k->jobs[i];

		j->item.fn = write_chunk;
		j->k = k;
		j->slot = i;
		if (k->p->flags & WIRE_HELLO_COMPRESS) {
			j->scratch = malloc(k->chunk);
			if (!j->scratch)
				return -ENOMEM;
		}
		if (k->p->data_key) {
			rc = aead_create(k->p->data_key, &j->aead);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int sink_run(struct engine *e, const struct sink_target *t,
	     struct xfer_stats *st)
{
	struct sink k = { 0 };
	int rc;

	k.e = e;
	k.t = t;
	k.p = &t->p;
	k.st = st;
	k.chunk = e->c->geom.slot_size - WIRE_SLOT_HDR;
	rc = credit_rx_init(&k.rx, e->c->geom.slots);
	if (!rc)
		rc = jobs_init(&k, e->c->geom.slots);
	if (rc) {
		rc = engine_fail(e, XFER_FAIL_RESOURCE, rc,
				 "cannot set up the sink: %s", strerror(-rc));
		goto out;
	}
	rc = engine_run(e, &sink_role, &k);
out:
	/* Let the workers finish before their files and jobs go away. */
	workq_wait_idle(e->wq);
	for (struct workq_item *it = workq_take_done(e->wq), *next; it;
	     it = next) {
		next = it->next;
		if (it->fn == finalize || it->fn == scan)
			free(it); /* its file is freed below */
	}
	workq_destroy(e->wq);
	e->wq = NULL;
	for (uint32_t i = 0; i < k.nfiles; i++)
		file_free(&k, k.files[i]); /* removes unfinished temporaries */
	free(k.files);
	for (unsigned int i = 0; k.jobs && i < e->c->geom.slots; i++) {
		free(k.jobs[i].scratch);
		aead_destroy(k.jobs[i].aead);
	}
	free(k.jobs);
	while (k.ndirs)
		free(k.dirs[--k.ndirs].rel);
	free(k.dirs);
	credit_rx_release(&k.rx);
	return rc;
}
