/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The I/O depth of both sides (util/workq.h's io_uring, issue #25 item 2),
 * the sink's writes first, over
 * the in-memory transport: whole push sessions with O_DIRECT into a disk
 * file system, a receiver in a thread. Every chunk write is made slow (a
 * wrap of direct_pwrite_async adds 30 ms to each, as a slow device would:
 * the io_uring holds the write behind a linked timeout), and the sink's
 * two workers still have more than two writes in flight: the depth is
 * the ring's, not the threads' (with --io-depth off, none through it).
 * A write that fails in the ring (a wrap gives it a read-only descriptor:
 * EBADF) fails its file with the same verdict and the same line as a
 * pwrite that fails so in a worker, and leaves neither the final name nor
 * the temporary. When io_uring cannot be had (io_uring_queue_init
 * wrapped to fail as seccomp or io_uring_disabled make it: ENOSYS,
 * EPERM) the workers write, and nothing is said above debug level.
 *
 * The source's reads, the mirror image (its sink writing with its workers,
 * --io-depth off there, so that the only ring is the source's): every
 * chunk read 30 ms slow (a wrap of direct_pread_async), more than two in
 * flight; a read that fails in the ring (a write-only descriptor: EBADF)
 * and a file that shrinks under the reads (cut inside a chunk: a short
 * read, then the end) fail the file with the same verdict and the same
 * line as the workers' pread does; a last chunk with an unaligned tail
 * is read as before, the copy exact.
 *
 * Needs a disk file system with O_DIRECT (the first of /tmp, /var/tmp and
 * the current directory that has one) and rdcp built with liburing and a
 * kernel that lets it have an io_uring; without, the checks that need
 * them are skipped and said so.
 */
#include "tap.h"

#include "memconn.h"
#include "sesspair.h"
#include "testfs.h"
#include "transfer/fs/direct.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/workq.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define CHUNK (64u << 10)
#define SLOTS 16u
#define WORKERS 2u
#define DELAY_NS 30000000u
#define WATCHDOG_S 120

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* ---- the wrapped calls (Makefile) ---- */

static atomic_uint slow;	/* add DELAY_NS to every chunk write */
static atomic_uint fail_at;	/* the Nth chunk write fails (EBADF), 0 none */
static atomic_uint writes;	/* chunk writes so far */
static atomic_uint peak;	/* most writes in flight, any workq */
static int rdonly_fd = -1;	/* a descriptor a write fails on */
static atomic_uint rslow;	/* add DELAY_NS to every ring read */
static atomic_uint rfail_at;	/* the read at this offset + 1 fails, 0 none */
static atomic_uint rshrink_at;	/* the read at this offset + 1 cuts the file */
static int wronly_fd = -1;	/* a descriptor a read fails on */
static const char *shrink_path; /* the file rshrink_at cuts */

int __real_direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
			 size_t len, uint64_t off);
int __wrap_direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
			 size_t len, uint64_t off);
int __real_direct_pwrite_async(const struct direct_fd *d, int fd,
			       const void *buf, size_t len, uint64_t off,
			       struct workq_item *item);
int __wrap_direct_pwrite_async(const struct direct_fd *d, int fd,
			       const void *buf, size_t len, uint64_t off,
			       struct workq_item *item);
int __real_direct_pread(const struct direct_fd *d, int fd, void *buf,
			size_t len, uint64_t off);
int __wrap_direct_pread(const struct direct_fd *d, int fd, void *buf,
			size_t len, uint64_t off);
bool __real_direct_pread_async(const struct direct_fd *d, void *buf, size_t len,
			       uint64_t off, struct workq_item *item);
bool __wrap_direct_pread_async(const struct direct_fd *d, void *buf, size_t len,
			       uint64_t off, struct workq_item *item);
void __real_workq_destroy(struct workq *q);
void __wrap_workq_destroy(struct workq *q);

/* The threads' write: the Nth fails as a descriptor refusing it would. */
int __wrap_direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
			 size_t len, uint64_t off)
{
	unsigned int n = atomic_fetch_add(&writes, 1) + 1;

	if (n == atomic_load(&fail_at)) {
		struct direct_fd bad = *d;

		if (bad.fd >= 0)
			bad.fd = rdonly_fd;
		return __real_direct_pwrite(&bad, rdonly_fd, buf, len, off);
	}
	return __real_direct_pwrite(d, fd, buf, len, off);
}

/* The ring's write: slowed, or given a descriptor that refuses it. */
int __wrap_direct_pwrite_async(const struct direct_fd *d, int fd,
			       const void *buf, size_t len, uint64_t off,
			       struct workq_item *item)
{
	unsigned int n = atomic_fetch_add(&writes, 1) + 1;
	int rc = __real_direct_pwrite_async(d, fd, buf, len, off, item);

	if (item->io.len && atomic_load(&slow))
		item->io.delay_ns = DELAY_NS;
	if (item->io.len && n == atomic_load(&fail_at))
		item->io.fd = rdonly_fd;
	return rc;
}

/* Before the read at off: the file cut 8 KiB into that chunk. */
static void maybe_shrink(uint64_t off)
{
	if (off + 1 == atomic_load(&rshrink_at)) {
		CHECK_EQ(truncate(shrink_path, (off_t)off + 8192), 0);
		atomic_store(&rshrink_at, 0);
	}
}

/* The workers' read: the chosen one on a descriptor that refuses it. */
int __wrap_direct_pread(const struct direct_fd *d, int fd, void *buf,
			size_t len, uint64_t off)
{
	maybe_shrink(off);
	if (off + 1 == atomic_load(&rfail_at)) {
		struct direct_fd bad = *d;

		if (bad.fd >= 0)
			bad.fd = wronly_fd;
		return __real_direct_pread(&bad, wronly_fd, buf, len, off);
	}
	return __real_direct_pread(d, fd, buf, len, off);
}

/* The ring's read: slowed, or given a descriptor that refuses it. */
bool __wrap_direct_pread_async(const struct direct_fd *d, void *buf, size_t len,
			       uint64_t off, struct workq_item *item)
{
	bool ring = __real_direct_pread_async(d, buf, len, off, item);

	if (!ring)
		return false;
	maybe_shrink(off);
	if (atomic_load(&rslow))
		item->io.delay_ns = DELAY_NS;
	if (off + 1 == atomic_load(&rfail_at))
		item->io.fd = wronly_fd;
	return true;
}

void __wrap_workq_destroy(struct workq *q)
{
	if (q) {
		unsigned int n = workq_io_peak(q);

		if (n > atomic_load(&peak))
			atomic_store(&peak, n);
	}
	__real_workq_destroy(q);
}

#ifdef RDCP_HAVE_LIBURING
static atomic_int refuse_uring; /* io_uring_queue_init fails so */

struct io_uring;
int __real_io_uring_queue_init(unsigned int entries, struct io_uring *ring,
			       unsigned int flags);
int __wrap_io_uring_queue_init(unsigned int entries, struct io_uring *ring,
			       unsigned int flags);

int __wrap_io_uring_queue_init(unsigned int entries, struct io_uring *ring,
			       unsigned int flags)
{
	int e = atomic_load(&refuse_uring);

	return e ? -e : __real_io_uring_queue_init(entries, ring, flags);
}
#endif

/* ---- where O_DIRECT works ---- */

static bool has_direct(const char *dir)
{
	char p[4200];
	struct statfs fs;
	int fd;

	if (statfs(dir, &fs) || fs.f_type == TMPFS_MAGIC ||
	    fs.f_type == RAMFS_MAGIC)
		return false;
	snprintf(p, sizeof(p), "%s/rdcp-iod-probe.%d", dir, (int)getpid());
	fd = open(p, O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	close(fd);
	unlink(p);
	return true;
}

static const char *disk_dir(void)
{
	static const char *const dirs[] = { "/tmp", "/var/tmp", "." };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (has_direct(dirs[i]))
			return dirs[i];
	return NULL;
}

/* Whether this build and kernel give a workq an io_uring. */
static bool have_uring(void)
{
	struct workq *q;
	bool ok;

	if (workq_create(1, &q))
		return false;
	ok = workq_io_start(q, 4, NULL, 0) == 0;
	workq_destroy(q);
	return ok;
}

/* ---- one push session of one file over a memconn pair ---- */

struct run {
	unsigned int io_depth, srv_io_depth; /* the client's, the server's */
	enum xfer_fail vc, vs;
	struct xfer_stats st;
	char log[16384]; /* both sides' stderr */
	char src[4200], root[4200], file[4300], dest[4300];
	int fds;
};

static void run_init(struct run *r, const char *base, unsigned int io_depth,
		     size_t size)
{
	memset(r, 0, sizeof(*r));
	r->io_depth = r->srv_io_depth = io_depth;
	r->fds = tf_count_fds();
	snprintf(r->src, sizeof(r->src), "%s/rdcp-isrc.XXXXXX", base);
	snprintf(r->root, sizeof(r->root), "%s/rdcp-iroot.XXXXXX", base);
	CHECK(mkdtemp(r->src) != NULL);
	CHECK(mkdtemp(r->root) != NULL);
	snprintf(r->file, sizeof(r->file), "%s/f", r->src);
	snprintf(r->dest, sizeof(r->dest), "%s/dir/f", r->root);
	CHECK_EQ(tf_make_file(r->file, size, 7), 0);
}

static void run_push(struct run *r)
{
	const struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = SLOTS,
		.chunk_size = CHUNK,
	};
	const char *srcs[1] = { r->file };
	struct xfer_opts co, so;
	struct sess_pair out;

	xfer_opts_init(&co);
	co.link.chunk_size = CHUNK;
	co.link.window = SLOTS;
	co.link.workers = WORKERS;
	co.link.timeout_ms = 10000;
	co.link.direct = XFER_DIRECT_ON;
	co.link.io_depth = r->io_depth;
	co.copy.dest = "dir/";
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	so = co;
	so.copy.srcs = NULL;
	so.copy.nsrcs = 0;
	so.copy.dest = NULL;
	so.serve.root = r->root;
	so.link.io_depth = r->srv_io_depth;
	atomic_store(&peak, 0);
	atomic_store(&writes, 0);
	CHECK_EQ(sess_pair_run(&g, &co, &so, r->root, WATCHDOG_S, &out), 0);
	r->vc = out.vc;
	r->vs = out.vs;
	r->st = out.st;
	memcpy(r->log, out.log, sizeof(r->log));
	if (r->log[0])
		printf("#   logged: %s", r->log);
}

/* Entries in root/dir: the file placed, or a temporary left. */
static int placed(const struct run *r)
{
	char d[4300];
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(d, sizeof(d), "%s/dir", r->root);
	dir = opendir(d);
	while (dir && (de = readdir(dir)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (dir)
		closedir(dir);
	return n;
}

/* Nothing said but the session's summary: no warning, no word of it. */
static bool quiet(const struct run *r)
{
	return !strstr(r->log, "warning") && !strstr(r->log, "error") &&
	       !strstr(r->log, "uring");
}

static void run_finish(struct run *r)
{
	CHECK_EQ(tf_rm_tree(r->src), 0);
	CHECK_EQ(tf_rm_tree(r->root), 0);
	CHECK_EQ(tf_count_fds(), r->fds);
}

/* The line of the failure in r's log, from what to its end. */
static void fail_line_of(const struct run *r, const char *what, char *out,
			 size_t n)
{
	const char *p = strstr(r->log, what);
	size_t len = p ? strcspn(p, "\n") : 0;

	snprintf(out, n, "%.*s", (int)len, p ? p : "");
}

static void fail_line(const struct run *r, char *out, size_t n)
{
	fail_line_of(r, "cannot write", out, n);
}

/* ---- tests ---- */

static const char *base;
static bool uring;

/* Where and whether: found once, whichever test runs first. */
static void setup(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	base = disk_dir();
	uring = have_uring();
	printf("# %s, io_uring %s\n", base ? base : "no O_DIRECT directory",
	       uring ? "available" : "not available");
}

/*
 * 32 chunks, each write 30 ms slow, two workers: more than two writes in
 * flight at once (at most the window's 16), the file exact; --io-depth
 * off: none through the ring, the workers write (the old path).
 */
static void test_depth_beyond_workers(void)
{
	struct run r;

	setup();

	if (!base || !uring) {
		printf("# skipped: %s\n", base ? "no io_uring here"
					       : "no disk file system here");
		return;
	}
	atomic_store(&slow, 1);
	run_init(&r, base, 0, 32 * CHUNK);
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(r.vs, XFER_OK);
	CHECK_EQ(tf_same_file(r.file, r.dest), 1);
	printf("#   io_uring: %u writes in flight at most, %u workers\n",
	       atomic_load(&peak), WORKERS);
	CHECK(atomic_load(&peak) > WORKERS);
	CHECK(atomic_load(&peak) <= SLOTS);
	CHECK(quiet(&r));
	run_finish(&r);

	run_init(&r, base, XFER_IO_DEPTH_OFF, 8 * CHUNK + 100);
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(tf_same_file(r.file, r.dest), 1);
	CHECK_EQ(atomic_load(&peak), 0);
	run_finish(&r);
	atomic_store(&slow, 0);
}

/*
 * The 5th chunk's write fails: through the ring and through a worker,
 * the same verdict and the same line, the file failed, nothing left under
 * its name or a temporary's.
 */
static void test_failed_write(void)
{
	char line[2][512];
	enum xfer_fail vc[2];
	struct run r;

	setup();

	if (!base || !uring) {
		printf("# skipped: %s\n", base ? "no io_uring here"
					       : "no disk file system here");
		return;
	}
	rdonly_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(rdonly_fd >= 0);
	for (int i = 0; i < 2; i++) {
		run_init(&r, base, i ? XFER_IO_DEPTH_OFF : 0, 12 * CHUNK);
		atomic_store(&fail_at, 5);
		run_push(&r);
		atomic_store(&fail_at, 0);
		vc[i] = r.vc;
		CHECK(r.vc != XFER_OK);
		CHECK_EQ(r.st.files_failed, 1);
		CHECK_EQ(r.st.files_ok, 0);
		CHECK_EQ(placed(&r), 0);
		fail_line(&r, line[i], sizeof(line[i]));
		CHECK(strstr(line[i], "Bad file descriptor") != NULL);
		if (i == 0)
			CHECK(atomic_load(&peak) > 0); /* it was the ring's */
		run_finish(&r);
	}
	CHECK_EQ(vc[0], vc[1]);
	CHECK(!strcmp(line[0], line[1]));
	printf("#   both: %s\n", line[0]);
	close(rdonly_fd);
	rdonly_fd = -1;
}

/*
 * io_uring refused (ENOSYS: not in this kernel or filtered; EPERM:
 * io_uring_disabled or a container's policy): the workers write, the copy
 * is exact, and nothing is said.
 */
static void test_no_uring_fallback(void)
{
#ifdef RDCP_HAVE_LIBURING
	static const int errs[] = { ENOSYS, EPERM };
	struct run r;

	setup();

	if (!base) {
		printf("# skipped: no disk file system here\n");
		return;
	}
	for (size_t i = 0; i < 2; i++) {
		atomic_store(&refuse_uring, errs[i]);
		CHECK(!have_uring());
		run_init(&r, base, 0, 6 * CHUNK + 1);
		run_push(&r);
		atomic_store(&refuse_uring, 0);
		CHECK_EQ(r.vc, XFER_OK);
		CHECK_EQ(r.vs, XFER_OK);
		CHECK_EQ(tf_same_file(r.file, r.dest), 1);
		CHECK_EQ(atomic_load(&peak), 0);
		CHECK(quiet(&r));
		run_finish(&r);
	}
#else
	printf("# skipped: built without liburing\n");
#endif
}

/* ---- the source's reads ---- */

/*
 * 32 chunks, each read 30 ms slow in the ring, two workers: more than two
 * reads in flight (at most the 16 staging buffers), the file exact; then
 * a last chunk with an unaligned tail (read by a worker, as before), and
 * --io-depth off: no ring, the workers read.
 */
static void test_reads_beyond_workers(void)
{
	struct run r;

	setup();

	if (!base || !uring) {
		printf("# skipped: %s\n",
		       base ? "no io_uring here" : "no disk file system here");
		return;
	}
	atomic_store(&rslow, 1);
	run_init(&r, base, 0, 32 * CHUNK);
	r.srv_io_depth = XFER_IO_DEPTH_OFF;
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(r.vs, XFER_OK);
	CHECK_EQ(tf_same_file(r.file, r.dest), 1);
	printf("#   io_uring: %u reads in flight at most, %u workers\n",
	       atomic_load(&peak), WORKERS);
	CHECK(atomic_load(&peak) > WORKERS);
	CHECK(atomic_load(&peak) <= SLOTS);
	CHECK(quiet(&r));
	run_finish(&r);

	run_init(&r, base, 0, 20 * CHUNK + 100);
	r.srv_io_depth = XFER_IO_DEPTH_OFF;
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(tf_same_file(r.file, r.dest), 1);
	CHECK(atomic_load(&peak) > 0);
	CHECK(quiet(&r));
	run_finish(&r);
	atomic_store(&rslow, 0);

	run_init(&r, base, XFER_IO_DEPTH_OFF, 8 * CHUNK + 100);
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(tf_same_file(r.file, r.dest), 1);
	CHECK_EQ(atomic_load(&peak), 0);
	run_finish(&r);
}

/*
 * One read fails (the chunk at 5 x CHUNK, EBADF), or the file is cut 8 KiB
 * into that chunk just before it is read (the read comes back short, then
 * at the end: ENODATA): through the ring and through a worker, the same
 * verdict and the same line, naming the file and the error, the file
 * failed and nothing left under its name or a temporary's.
 */
static void test_failed_read(void)
{
	static const char *const errs[] = { "Bad file descriptor",
					    "No data available" };
	char line[2][512], want[4400];
	enum xfer_fail vc[2];
	struct run r;

	setup();

	if (!base || !uring) {
		printf("# skipped: %s\n",
		       base ? "no io_uring here" : "no disk file system here");
		return;
	}
	snprintf(want, sizeof(want), "%s/rdcp-iwo.%d", base, (int)getpid());
	wronly_fd = open(want, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(wronly_fd >= 0);
	unlink(want);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 2; i++) {
			run_init(&r, base, i ? XFER_IO_DEPTH_OFF : 0,
				 12 * CHUNK);
			r.srv_io_depth = XFER_IO_DEPTH_OFF;
			shrink_path = r.file;
			atomic_store(k ? &rshrink_at : &rfail_at,
				     5 * CHUNK + 1);
			run_push(&r);
			atomic_store(&rfail_at, 0);
			atomic_store(&rshrink_at, 0);
			vc[i] = r.vc;
			CHECK(r.vc != XFER_OK);
			CHECK_EQ(r.st.files_failed, 1);
			CHECK_EQ(r.st.files_ok, 0);
			CHECK_EQ(placed(&r), 0);
			fail_line_of(&r, "cannot read", line[i],
				     sizeof(line[i]));
			snprintf(want, sizeof(want), "cannot read '%s': %s",
				 r.file, errs[k]);
			CHECK(!strcmp(line[i], want));
			if (i == 0)
				CHECK(atomic_load(&peak) > 0); /* the ring's */
			else
				CHECK_EQ(atomic_load(&peak), 0);
			run_finish(&r);
		}
		CHECK_EQ(vc[0], vc[1]);
		printf("#   both (%s): verdict %d\n", errs[k], (int)vc[0]);
	}
	close(wronly_fd);
	wronly_fd = -1;
}

TAP_RUN(TAP_TEST(test_depth_beyond_workers), TAP_TEST(test_failed_write),
	TAP_TEST(test_no_uring_fallback), TAP_TEST(test_reads_beyond_workers),
	TAP_TEST(test_failed_read))
