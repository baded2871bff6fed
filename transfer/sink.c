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
 *
 * A packed slot (wire.h) carries many small files whole. The engine thread
 * reserves their ids as it arrives; one worker checks every record, then
 * places the files one after the other (temporary, data, mode and times,
 * rename), and the engine thread reports them: a FILE_RESULT for each one
 * that failed, then one PACK_DONE for the slot.
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

#include "transfer/role.h"
#include "util/aead.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"
#include "util/zchunk.h"

/* Where an announced path lands, and how it is shown. */
struct snk_names {
	char name[PATH_NAME_MAX + 1]; /* last component */
	char tmp[PATH_NAME_MAX + 1];  /* its temporary, beside it */
	char rel[PATH_PEER_MAX + PATH_NAME_MAX + 2]; /* beneath t->dirfd */
	char shown[4400];
};

struct snk_file {
	uint32_t id;
	uint8_t kind;
	int fd;
	int dirfd;	 /* the parent: owned unless it is the target's */
	int cand;	 /* resume: what an earlier attempt left (or -1) */
	bool cand_final; /* ... and that is the file under its final name */
	struct snk_names n;
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

/* What became of one file of a pack, for the engine thread to report. */
struct snk_packed {
	char *shown; /* NULL: the pack failed before it was read */
	uint64_t size;
	int status;
	bool remote; /* the source's own failure (an aborting record) */
	char *msg;   /* with status; NULL if it could not be kept */
	uint8_t dlen;
	uint8_t digest[WIRE_DIGEST_MAX];
};

struct snk_job {
	struct workq_item item;
	struct sink *k;
	unsigned int slot;
	struct wire_slot_hdr h;
	struct snk_file *f;	   /* NULL for a pack */
	struct snk_packed *packed; /* a pack: one per file */
	uint32_t npacked;
	double t0; /* when the pack came */
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
static void unpack(struct workq_item *item);
static int on_pack(struct sink *k, const struct wire_slot_hdr *h,
		   unsigned int slot, const struct cm_event *ev);

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
		unlinkat(f->dirfd, f->n.tmp, 0);
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

/* Fills in the digest and algorithm; the client's user sees r. */
static void user_report(struct sink *k, struct xfer_file_report *r,
			const uint8_t *digest, unsigned int dlen)
{
	const struct xfer_opts *o = k->e->o;
	char hex[2 * WIRE_DIGEST_MAX + 1] = "";

	if (k->p->server || !o->on_file)
		return;
	if (dlen)
		checksum_hex(digest, dlen, hex);
	r->digest = hex;
	r->algorithm = k->p->csum == XFER_CSUM_SHA256  ? "sha256"
		       : k->p->csum == XFER_CSUM_CRC32 ? "crc32"
						       : "none";
	o->on_file(o->on_file_arg, r);
}

static void client_report(struct sink *k, struct snk_file *f, bool done,
			  const uint8_t *digest, unsigned int dlen)
{
	struct xfer_file_report r = {
		.done = done,
		.path = f->n.shown,
		.kind = wire_kind_name(f->kind),
		.bytes = f->size,
		.sent = f->sent,
		.seconds = clock_now_s() - f->t0,
		.status = f->err,
		.klass = engine_klass_of(f->err, f->err_remote),
		.message = f->err ? f->errmsg : NULL,
		.skipped = f->skipped,
	};

	user_report(k, &r, digest, dlen);
}

/* ---- FILE: names ---- */

/*
 * Whether an announced path may land beneath the target: 0, -EPERM for a
 * path that is not beneath, -EPROTO for one outside the first's tree when
 * DEST is not a directory. File id 0 names that tree (announced first, in
 * the engine thread; a worker placing packed files, never id 0, only
 * reads it).
 */
static int check_path(struct sink *k, uint32_t id, const char *path)
{
	size_t len = strlen(path), first;
	const char *slash;

	if (path_check_relative(path, len, false) || path[len - 1] == '/')
		return -EPERM;
	if (k->t->is_dir)
		return 0;
	slash = strchr(path, '/');
	first = slash ? (size_t)(slash - path) : len;
	if (id == 0 && !slash)
		snprintf(k->top, sizeof(k->top), "%s", path);
	if (!k->top[0] || strlen(k->top) != first ||
	    strncmp(path, k->top, first))
		return -EPROTO;
	return 0;
}

/*
 * Where an announced path goes beneath the target: the path itself inside
 * a directory DEST, else DEST's name in place of its first component.
 * Checks it first (check_path).
 */
static int map_names(struct sink *k, uint32_t id, const char *path,
		     struct snk_names *n)
{
	const struct sink_target *t = k->t;
	const char *slash;
	int rc = check_path(k, id, path);

	if (rc)
		return rc;
	if (t->is_dir) {
		snprintf(n->rel, sizeof(n->rel), "%s", path);
	} else {
		slash = strchr(path, '/');
		snprintf(n->rel, sizeof(n->rel), "%s%s", t->name,
			 slash ? slash : "");
	}
	slash = strrchr(n->rel, '/');
	snprintf(n->name, sizeof(n->name), "%s", slash ? slash + 1 : n->rel);
	snprintf(n->tmp, sizeof(n->tmp), ".%.200s.rdcp-part", n->name);
	snprintf(n->shown, sizeof(n->shown), "%s%s%s", t->shown,
		 t->is_dir && t->shown[0] ? "/" : "",
		 t->is_dir ? n->rel : n->rel + strlen(t->name));
	return 0;
}

/*
 * The directory n goes into: the target's own dirfd (not to be closed)
 * or a new O_PATH fd beneath it, or -errno.
 */
static int open_parent(const struct sink *k, struct snk_names *n)
{
	char *slash = strrchr(n->rel, '/');
	int fd;

	if (!slash)
		return k->t->dirfd;
	*slash = '\0';
	fd = path_open_beneath(k->t->dirfd, n->rel, O_PATH | O_DIRECTORY, 0);
	*slash = '/';
	return fd;
}

static int map_path(struct sink *k, struct snk_file *f, const char *path)
{
	int rc = map_names(k, f->id, path, &f->n);

	if (rc)
		return rc;
	f->dirfd = open_parent(k, &f->n);
	if (f->dirfd < 0) {
		rc = f->dirfd;
		f->dirfd = -1;
		file_fail(f, rc, "cannot open the directory of '%s': %s",
			  f->n.shown, strerror(-rc));
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
	d->rel = strdup(f->n.rel);
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

	if (mkdirat(f->dirfd, f->n.name, 0700) == 0)
		return remember_dir(k, f, true);
	if (errno != EEXIST) {
		file_fail(f, -errno, "cannot create directory '%s': %s",
			  f->n.shown, strerror(errno));
		return 0;
	}
	if (fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		file_fail(f, -EEXIST,
			  "cannot create directory '%s': something else "
			  "has that name",
			  f->n.shown);
		return 0;
	}
	return remember_dir(k, f, false);
}

/* Whether an existing name stays as it is (--no-clobber, --update). */
static bool keep_existing(struct sink *k, struct snk_file *f)
{
	struct stat st;

	if (!(k->p->flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE)) ||
	    fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
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

	unlinkat(f->dirfd, f->n.tmp, 0);
	if (symlinkat(to, f->dirfd, f->n.tmp) < 0) {
		file_fail(f, -errno, "cannot create symlink '%s': %s",
			  f->n.shown, strerror(errno));
		return;
	}
	if ((k->p->flags & WIRE_HELLO_PRESERVE) &&
	    utimensat(f->dirfd, f->n.tmp, ts, AT_SYMLINK_NOFOLLOW) < 0)
		file_fail(f, -errno, "cannot set times of '%s': %s", f->n.shown,
			  strerror(errno));
	if (!f->err && renameat(f->dirfd, f->n.tmp, f->dirfd, f->n.name) < 0)
		file_fail(f, -errno, "cannot rename into '%s': %s", f->n.shown,
			  strerror(errno));
	if (f->err)
		unlinkat(f->dirfd, f->n.tmp, 0);
}

/* ---- FILE: regular files ---- */

/*
 * Opens the temporary without truncating, locks it (a second session
 * writing the same file fails instead of mixing its chunks in), then
 * truncates unless it is to be resumed.
 */
/*
 * Opens the temporary tmp in dirfd, locked. A new one is made with mode
 * (less the umask) and is empty; one that was there is truncated unless
 * keep, and *fresh says which. The fd, or -errno and *what failed.
 */
static int tmp_open(int dirfd, const char *tmp, bool keep, mode_t mode,
		    bool *fresh, const char **what)
{
	int fd, rc;

	*what = "create";
	fd = openat(dirfd, tmp,
		    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	*fresh = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = openat(dirfd, tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*what = "lock";
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		goto fail;
	*what = "truncate";
	if (!keep && !*fresh && ftruncate(fd, 0) < 0)
		goto fail;
	return fd;
fail:
	rc = -errno;
	close(fd);
	return rc;
}

/* A tmp_open failure as one line for the user; whether tmp is ours. */
static bool tmp_failed(int rc, const char *what, const char *shown, char *msg,
		       size_t len)
{
	if (!strcmp(what, "lock") && rc == -EWOULDBLOCK) {
		snprintf(msg, len,
			 "cannot write '%s': another session is writing it",
			 shown);
		return false; /* not ours to remove */
	}
	snprintf(msg, len, "cannot %s '%s': %s", what, shown, strerror(-rc));
	return strcmp(what, "create") != 0;
}

static int open_tmp(struct sink *k, struct snk_file *f, bool keep)
{
	char msg[WIRE_MSG_MAX + 1];
	const char *what;
	bool fresh;
	int rc;

	f->fd = tmp_open(f->dirfd, f->n.tmp, keep, 0600, &fresh, &what);
	if (f->fd >= 0)
		return 0;
	rc = f->fd;
	f->fd = -1;
	if (tmp_failed(rc, what, f->n.shown, msg, sizeof(msg)) && !resuming(k))
		unlinkat(f->dirfd, f->n.tmp, 0);
	file_fail(f, rc == -EWOULDBLOCK ? -EBUSY : rc, "%s", msg);
	return -1;
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
			f->n.shown, units_format_size(f->size, sz, sizeof(sz)),
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
	fd = openat(f->dirfd, f->n.tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		f->cand = fd; /* the temporary itself: keep what it holds */
		return true;
	}
	if (fd >= 0)
		close(fd);
	fd = openat(f->dirfd, f->n.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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
			file_fail(f, -errno, "cannot size '%s': %s", f->n.shown,
				  strerror(errno));
	}
	if (!ask)
		return 0;
	if (f->err)
		return skip_file(k, f);
	return send_have(k, f); /* nothing here: send it all */
}

/* Room in files[] for n more ids. 0 or -ENOMEM. */
static int reserve_ids(struct sink *k, uint32_t n)
{
	uint32_t cap = k->cap ? k->cap : 64;
	struct snk_file **v;

	while (cap - k->nfiles < n)
		cap *= 2;
	if (cap == k->cap)
		return 0;
	v = realloc(k->files, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	k->files = v;
	k->cap = cap;
	return 0;
}

static int on_file(struct sink *k, const struct wire_file *wf)
{
	struct snk_file *f;
	int rc;

	if (wf->file_id != k->nfiles || k->nfiles >= WIRE_FILES_MAX)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced file %u out of order",
				   k->e->c->peer, wf->file_id);
	if (reserve_ids(k, 1))
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
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
			  f->n.shown, strerror(buf ? errno : ENOMEM));
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
		file_fail(f, rc, "cannot read '%s': %s", f->n.shown,
			  strerror(-rc));
	f->cand_size = (uint64_t)st.st_size;
	/* Either way the temporary now gets the announced size. */
	if (!f->err && ftruncate(f->fd, (off_t)f->size) < 0)
		file_fail(f, -errno, "cannot size '%s': %s", f->n.shown,
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
			 f->n.shown, (unsigned long long)f->have_n,
			 (unsigned long long)f->nslots);
	return f->err ? skip_file(k, f) : send_have(k, f);
}

/* ---- chunks ---- */

/*
 * Worker: opens a sealed payload in place and inflates a compressed one
 * into the job's scratch; *raw is then the payload as the source read it.
 */
static int open_payload(struct sink *k, struct snk_job *j, const uint8_t **raw)
{
	uint8_t *data = cm_slot(k->e->c, j->slot) + WIRE_SLOT_HDR;
	uint8_t aad[WIRE_AAD_LEN];
	int rc;

	*raw = data;
	if (j->h.flags & WIRE_SLOT_ENCRYPTED) {
		wire_chunk_aad(aad, j->h.file_id, j->h.offset, j->h.raw_len,
			       j->h.flags);
		rc = aead_open(j->aead, j->h.file_id, j->index, aad,
			       sizeof(aad), data, j->h.len, j->h.tag);
		if (rc)
			return rc;
	}
	if (j->h.flags & WIRE_SLOT_COMPRESSED) {
		rc = zchunk_decompress(data, j->h.len, j->scratch,
				       j->h.raw_len);
		if (rc)
			return rc;
		*raw = j->scratch;
	}
	return 0;
}

static void write_chunk(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	const uint8_t *raw;
	uint32_t crc = 0;

	j->status = open_payload(k, j, &raw);
	if (j->status)
		return;
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

static void progress(struct sink *k, const char *shown, uint32_t len)
{
	const struct xfer_opts *o = k->e->o;
	uint64_t now;

	k->bytes_in += len;
	if (k->p->server || !o->on_progress)
		return;
	now = clock_now_ms();
	if (now >= k->next_progress_ms) {
		k->next_progress_ms = now + 250;
		o->on_progress(o->on_file_arg, k->bytes_in, 0, shown);
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
	if (rc == 0 && h.seq == seq && (h.flags & WIRE_SLOT_PACKED))
		return on_pack(k, &h, (unsigned int)slot, ev);
	if (rc == 0 &&
	    (h.seq != seq || h.file_id >= k->nfiles || !k->files[h.file_id] ||
	     ev->len < WIRE_SLOT_HDR || h.len != ev->len - WIRE_SLOT_HDR ||
	     !flags_ok(k, h.flags) ||
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
				   e->c->peer, f->n.shown,
				   (unsigned long long)h.offset, h.raw_len);
	f->got[idx] = 1;
	f->received++;
	f->sent += h.len; /* what crossed the link, compressed or not */
	progress(k, f->n.shown, h.raw_len);
	if (f->err || f->fd < 0) {
		/* Drain without writing; the result is already known. */
		if (credit_rx_drain(&k->rx, (unsigned int)slot))
			return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
					   "slot accounting");
		return 0;
	}
	j = &k->jobs[slot];
	j->item.fn = write_chunk; /* the slot's last use may have been a pack */
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
			file_fail(f, rc, "cannot hash '%s': %s", f->n.shown,
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
			  f->n.shown);
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
			  f->n.shown);
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
		file_fail(f, rc, "cannot reuse '%s': %s", f->n.shown,
			  rc == -ESTALE ? "it changed while being resumed"
					: strerror(-rc));
	return rc;
}

/*
 * The final mode, unless the file was made with it already (have_mode),
 * and the times with -p. 0, or -errno and *what.
 */
static int apply_meta(const struct sink *k, int fd, uint32_t mode,
		      bool have_mode, const struct timespec times[2],
		      const char **what)
{
	*what = "mode";
	if (!have_mode && fchmod(fd, final_mode(k, mode)) < 0)
		return -errno;
	*what = "times";
	if ((k->p->flags & WIRE_HELLO_PRESERVE) && futimens(fd, times) < 0)
		return -errno;
	return 0;
}

static int set_meta(struct sink *k, struct snk_file *f, int fd)
{
	const char *what;
	int rc = apply_meta(k, fd, f->mode, false, f->times, &what);

	if (rc)
		file_fail(f, rc, "cannot set %s of '%s': %s", what, f->n.shown,
			  strerror(-rc));
	return rc ? -1 : 0;
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
		unlinkat(f->dirfd, f->n.tmp, 0);
		f->skipped = true;
		return;
	}
	if (f->cand_final && copy_matched(fin))
		goto out_discard;
	if (set_meta(k, f, f->fd))
		goto out_discard;
	if (k->p->flags & WIRE_HELLO_FSYNC && fsync(f->fd) < 0) {
		file_fail(f, -errno, "cannot fsync '%s': %s", f->n.shown,
			  strerror(errno));
		goto out_discard;
	}
	rc = io_close(f->fd);
	f->fd = -1;
	if (rc) {
		file_fail(f, rc, "cannot write '%s': %s", f->n.shown,
			  strerror(-rc));
		unlinkat(f->dirfd, f->n.tmp, 0);
		return;
	}
	if (renameat(f->dirfd, f->n.tmp, f->dirfd, f->n.name) < 0) {
		file_fail(f, -errno, "cannot rename into '%s': %s", f->n.shown,
			  strerror(errno));
		unlinkat(f->dirfd, f->n.tmp, 0);
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
			  f->n.shown, (unsigned long long)f->end.nchunks,
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

/*
 * Counts a file's outcome and logs it: every failure on the client, the
 * receiver's own ones and each placed file on the receiver. msg NULL: the
 * failure was logged already.
 */
static void tally(struct sink *k, const char *shown, uint64_t size, int err,
		  bool remote, const char *msg, bool skipped)
{
	if (err) {
		if (msg && !k->p->server)
			log_err("%s", msg);
		else if (msg && !remote)
			log_warn("%s", msg);
		if (!k->st->files_failed++)
			k->st->first_fail = engine_klass_of(err, remote);
		return;
	}
	if (k->p->server)
		log_info("%s '%s' (%llu bytes)", skipped ? "kept" : "received",
			 shown, (unsigned long long)size);
	k->st->files_ok++;
	k->st->files_skipped += skipped;
	k->st->bytes += size;
}

/* A FILE_RESULT for a packed file that failed here. */
static int send_failed(struct sink *k, uint32_t id, int status, const char *msg)
{
	struct wire_msg m = { .type = WIRE_FILE_RESULT };

	m.u.result.file_id = id;
	m.u.result.status = status;
	snprintf(m.u.result.msg, sizeof(m.u.result.msg), "%s", msg);
	return engine_send(k->e, &m);
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
	} else {
		m.u.result.digest_len = (uint8_t)dlen;
		if (dlen)
			memcpy(m.u.result.digest, digest, dlen);
	}
	tally(k, f->n.shown, f->size, f->err, f->err_remote, f->errmsg,
	      f->skipped);
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

/* ---- packed slots ---- */

/* The engine thread: a packed slot came; reserve its ids, unpack it. */
static int on_pack(struct sink *k, const struct wire_slot_hdr *h,
		   unsigned int slot, const struct cm_event *ev)
{
	struct snk_job *j = &k->jobs[slot];
	uint64_t count = h->offset;

	if (h->file_id != k->nfiles || h->file_id == 0 || !count ||
	    count > WIRE_PACK_MAX_FILES || count > WIRE_FILES_MAX - k->nfiles ||
	    ev->len < WIRE_SLOT_HDR || h->len != ev->len - WIRE_SLOT_HDR ||
	    h->raw_len > k->chunk ||
	    !flags_ok(k, h->flags & ~WIRE_SLOT_PACKED) ||
	    (!(h->flags & WIRE_SLOT_COMPRESSED) && h->raw_len != h->len) ||
	    (k->p->flags & WIRE_HELLO_ASK))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote a bad packed slot (seq %llu)",
				   k->e->c->peer, (unsigned long long)h->seq);
	j->packed = calloc(count, sizeof(*j->packed));
	if (!j->packed || reserve_ids(k, (uint32_t)count))
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	for (uint64_t i = 0; i < count; i++)
		k->files[k->nfiles++] = NULL;
	k->active++;
	j->npacked = (uint32_t)count;
	j->h = *h;
	j->f = NULL;
	j->index = 0; /* the IV's: (first id, 0) */
	j->status = 0;
	j->t0 = clock_now_s();
	j->item.fn = unpack;
	progress(k, k->t->shown, h->raw_len);
	workq_push(k->e->wq, &j->item);
	return 0;
}

/*
 * One worker's state across a pack: the O_PATH fd of the last parent,
 * reused while the files share it, and whether linking in unnamed files
 * stopped working (the names exist, or the file system cannot).
 */
struct parent_cache {
	int fd;
	bool named;
	char rel[PATH_PEER_MAX + PATH_NAME_MAX + 2];
};

static int cached_parent(const struct sink *k, struct parent_cache *pc,
			 struct snk_names *n)
{
	const char *slash = strrchr(n->rel, '/');
	size_t len = slash ? (size_t)(slash - n->rel) : 0;

	if (!slash)
		return k->t->dirfd;
	if (pc->fd >= 0 && strlen(pc->rel) == len &&
	    !memcmp(pc->rel, n->rel, len))
		return pc->fd;
	if (pc->fd >= 0)
		close(pc->fd);
	pc->fd = open_parent(k, n);
	if (pc->fd < 0) {
		int rc = pc->fd;

		pc->fd = -1;
		return rc;
	}
	memcpy(pc->rel, n->rel, len);
	pc->rel[len] = '\0';
	return pc->fd;
}

static void packed_fail(struct snk_packed *res, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void packed_fail(struct snk_packed *res, int err, const char *fmt, ...)
{
	va_list ap;

	res->status = err;
	va_start(ap, fmt);
	if (vasprintf(&res->msg, fmt, ap) < 0)
		res->msg = NULL;
	va_end(ap);
}

/* Worker: a packed file's data, mode, times (and fsync) into fd. */
static int fill(const struct sink *k, int fd, const struct wire_pack_rec *r,
		bool have_mode, const struct timespec times[2],
		const char **what)
{
	int rc;

	*what = "write";
	rc = io_pwrite_full(fd, r->data, r->size, 0);
	if (!rc)
		rc = apply_meta(k, fd, r->mode, have_mode, times, what);
	if (rc) {
		if (!strcmp(*what, "mode") || !strcmp(*what, "times"))
			*what = !strcmp(*what, "mode") ? "set mode of"
						       : "set times of";
		return rc;
	}
	if ((k->p->flags & WIRE_HELLO_FSYNC) && fsync(fd) < 0) {
		*what = "fsync";
		return -errno;
	}
	return 0;
}

/*
 * Worker: the quick way to place a packed file under a name not taken
 * yet. An unnamed file (O_TMPFILE) is filled, then linked in under its
 * final name: nobody sees it before it is whole, and no other session can
 * write into it, so there is no temporary to name, lock and rename.
 * Returns 1 when it is in place, 0 when this way does not apply (the name
 * exists, or the file system has no O_TMPFILE: use a named temporary),
 * or -errno with *what.
 */
static int place_unnamed(const struct sink *k, int dirfd,
			 const struct wire_pack_rec *r,
			 const struct snk_names *n, mode_t mode,
			 const struct timespec times[2], const char **what)
{
	char proc[40];
	int fd, rc;

	fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
	if (fd < 0)
		return 0; /* the named way says what is wrong, if anything */
	/*
	 * Made with its mode, unless the umask took bits from it, or -p asks
	 * for it exactly (a default ACL on the directory would override the
	 * mode given at creation).
	 */
	rc = fill(k, fd, r,
		  !(mode & k->t->umask) && !(k->p->flags & WIRE_HELLO_PRESERVE),
		  times, what);
	if (!rc) {
		/*
		 * By the fd itself where that is allowed (it needs
		 * CAP_DAC_READ_SEARCH: a receiver running as root), else
		 * through /proc, which costs a path walk.
		 */
		rc = linkat(fd, "", dirfd, n->name, AT_EMPTY_PATH);
		if (rc < 0 && errno == ENOENT) {
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			rc = linkat(AT_FDCWD, proc, dirfd, n->name,
				    AT_SYMLINK_FOLLOW);
		}
		if (rc == 0)
			rc = 1;
		else if (errno == EEXIST || errno == ENOENT || errno == EPERM)
			rc = 0; /* taken, or no /proc: the named way */
		else
			rc = -errno;
		if (rc < 0)
			*what = "link into";
	}
	if (io_close(fd) && rc == 1) {
		unlinkat(dirfd, n->name, 0); /* never a doubtful file */
		*what = "write";
		rc = -EIO;
	}
	return rc;
}

/* Worker: verifies one record's file and gives it its final name. */
static void place_packed(struct sink *k, const struct wire_pack_rec *r,
			 struct snk_names *n, struct parent_cache *pc,
			 struct snk_packed *res)
{
	struct timespec times[2] = {
		{ .tv_sec = r->atime_sec, .tv_nsec = r->atime_nsec },
		{ .tv_sec = r->mtime_sec, .tv_nsec = r->mtime_nsec },
	};
	mode_t mode = final_mode(k, r->mode);
	char msg[WIRE_MSG_MAX + 1];
	const char *what;
	int dirfd, fd, rc;
	bool fresh;

	res->shown = strdup(n->shown);
	if (r->flags & WIRE_PACK_ABORT) {
		res->remote = true;
		res->status = r->status;
		res->msg = strndup((const char *)r->data, r->size);
		return;
	}
	res->size = r->size;
	rc = wire_pack_digest((uint8_t)k->p->csum, r->data, r->size,
			      res->digest);
	if (rc < 0)
		return packed_fail(res, rc, "cannot hash '%s': %s", n->shown,
				   strerror(-rc));
	res->dlen = (uint8_t)rc;
	if (res->dlen != r->digest_len ||
	    memcmp(res->digest, r->digest, res->dlen))
		return packed_fail(res, -EBADMSG,
				   "'%s' failed verification: its digest does "
				   "not match the sender's (corrupted in "
				   "transit?); not placed",
				   n->shown);
	dirfd = cached_parent(k, pc, n);
	if (dirfd < 0)
		return packed_fail(res, dirfd,
				   "cannot open the directory of '%s': %s",
				   n->shown, strerror(-dirfd));
	if (!pc->named) {
		rc = place_unnamed(k, dirfd, r, n, mode, times, &what);
		if (rc == 1)
			return;
		if (rc < 0)
			return packed_fail(res, rc, "cannot %s '%s': %s", what,
					   n->shown, strerror(-rc));
		pc->named = true; /* for the rest of this pack */
	}
	/*
	 * 0600 while it has a name and is not whole: a temporary that a
	 * killed session leaves must stay writable for the next one.
	 */
	fd = tmp_open(dirfd, n->tmp, false, 0600, &fresh, &what);
	if (fd < 0) {
		if (tmp_failed(fd, what, n->shown, msg, sizeof(msg)))
			unlinkat(dirfd, n->tmp, 0);
		return packed_fail(res, fd == -EWOULDBLOCK ? -EBUSY : fd, "%s",
				   msg);
	}
	rc = fill(k, fd, r, false, times, &what);
	if (rc) {
		close(fd);
	} else {
		what = "write";
		rc = io_close(fd);
	}
	if (!rc && renameat(dirfd, n->tmp, dirfd, n->name) < 0) {
		what = "rename into";
		rc = -errno;
	}
	if (rc) {
		unlinkat(dirfd, n->tmp, 0);
		packed_fail(res, rc, "cannot %s '%s': %s", what, n->shown,
			    strerror(-rc));
	}
}

/*
 * Worker: a pack's records are all checked (the slot CRC over their
 * headers, digests and paths unless the slot is sealed; ids in order,
 * names beneath DEST, lengths) before any file is placed, so a damaged or
 * malformed slot places nothing. Each file's data is checked against its
 * own digest as it is placed. Returns 0, -EBADMSG or -EPROTO.
 */
static int check_pack(struct sink *k, struct snk_job *j, const uint8_t *raw)
{
	struct wire_pack_rec r;
	char path[PATH_PEER_MAX + 1];
	size_t pos = 0, start;
	uint32_t crc = 0;
	int rc = 0;

	for (uint32_t i = 0; !rc && i < j->npacked; i++) {
		start = pos;
		if (wire_pack_next(raw, j->h.raw_len, &pos, &r) ||
		    r.file_id != j->h.file_id + i) {
			rc = -EPROTO;
			break;
		}
		crc = ck_crc32(crc, raw + start, pos - start - r.size);
		memcpy(path, r.path, r.path_len);
		path[r.path_len] = '\0';
		if (check_path(k, r.file_id, path))
			rc = -EPROTO;
	}
	if (!rc && pos != j->h.raw_len)
		rc = -EPROTO;
	/* A damaged slot says it first: its records cannot be trusted. */
	if (!(j->h.flags & WIRE_SLOT_ENCRYPTED) && crc != j->h.crc &&
	    (rc || pos == j->h.raw_len))
		rc = -EBADMSG;
	return rc;
}

static void unpack(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	struct parent_cache *pc = NULL;
	struct wire_pack_rec r;
	struct snk_names *n = NULL;
	const uint8_t *raw;
	char path[PATH_PEER_MAX + 1];
	size_t pos = 0;

	j->status = open_payload(k, j, &raw);
	if (!j->status)
		j->status = check_pack(k, j, raw);
	if (!j->status) {
		pc = malloc(sizeof(*pc));
		n = malloc(sizeof(*n));
		j->status = pc && n ? 0 : -ENOMEM;
	}
	if (pc) {
		pc->fd = -1;
		pc->named = false;
	}
	for (uint32_t i = 0; !j->status && i < j->npacked; i++) {
		/* Checked above; a slot changed since is a peer's doing. */
		if (wire_pack_next(raw, j->h.raw_len, &pos, &r)) {
			j->status = -EPROTO;
			break;
		}
		memcpy(path, r.path, r.path_len);
		path[r.path_len] = '\0';
		if (map_names(k, r.file_id, path, n)) {
			j->status = -EPROTO;
			break;
		}
		place_packed(k, &r, n, pc, &j->packed[i]);
	}
	if (pc && pc->fd >= 0)
		close(pc->fd);
	free(pc);
	free(n);
}

/* The engine thread: report a pack's files, release its slot. */
static void pack_done(struct sink *k, struct snk_job *j)
{
	struct wire_msg m = { .type = WIRE_PACK_DONE };
	uint32_t first = j->h.file_id;
	char why[WIRE_MSG_MAX + 1] = "";
	char shown[64];

	if (j->status == -EPROTO) {
		engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
			    "%s wrote a malformed packed slot (seq %llu)",
			    k->e->c->peer, (unsigned long long)j->h.seq);
		goto out;
	}
	if (j->status == -EBADMSG)
		snprintf(why, sizeof(why),
			 "%u small files packed in chunk %llu failed its %s "
			 "check (corrupted in transit); none placed",
			 j->npacked, (unsigned long long)j->h.seq,
			 j->h.flags & WIRE_SLOT_ENCRYPTED ? "AES-GCM"
							  : "CRC32");
	else if (j->status)
		snprintf(why, sizeof(why), "cannot unpack %u small files: %s",
			 j->npacked, strerror(-j->status));
	if (j->status)
		log_err("%s", why);
	for (uint32_t i = 0; i < j->npacked; i++) {
		struct snk_packed *res = &j->packed[i];
		int status = j->status ? j->status : res->status;
		const char *msg = j->status  ? why
				  : res->msg ? res->msg
					     : strerror(-status);
		struct xfer_file_report r = {
			.path = res->shown,
			.kind = "file",
			.bytes = res->size,
		};

		if (!r.path) {
			snprintf(shown, sizeof(shown), "(packed file %u)",
				 first + i);
			r.path = shown;
		}
		user_report(k, &r, NULL, 0);
		r.done = true;
		r.seconds = clock_now_s() - j->t0;
		r.sent = status ? 0 : res->size;
		r.status = status;
		r.klass = engine_klass_of(status, res->remote);
		r.message = status ? msg : NULL;
		user_report(k, &r, res->digest, status ? 0 : res->dlen);
		tally(k, r.path, res->size, status, res->remote,
		      j->status ? NULL : msg, false);
		k->st->files_packed += !status;
		if (status && !res->remote &&
		    send_failed(k, first + i, status, msg))
			goto out;
	}
	m.u.pack_done.first_id = first;
	m.u.pack_done.count = j->npacked;
	if (engine_send(k->e, &m))
		goto out;
	k->active--;
out:
	for (uint32_t i = 0; i < j->npacked; i++) {
		free(j->packed[i].shown);
		free(j->packed[i].msg);
	}
	free(j->packed);
	j->packed = NULL;
	j->npacked = 0;
	if (credit_rx_drain(&k->rx, j->slot))
		engine_fail(k->e, XFER_FAIL_INTERNAL, -EPROTO,
			    "slot accounting");
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
			  f->n.shown, (unsigned long long)j->h.offset,
			  j->h.flags & WIRE_SLOT_ENCRYPTED ? "AES-GCM"
							   : "CRC32");
	else if (j->status)
		file_fail(f, j->status, "cannot write '%s': %s", f->n.shown,
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
	} else if (it->fn == unpack) {
		pack_done(k, (struct snk_job *)it);
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
		for (uint32_t n = 0; n < k.jobs[i].npacked; n++) {
			free(k.jobs[i].packed[n].shown);
			free(k.jobs[i].packed[n].msg);
		}
		free(k.jobs[i].packed);
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
