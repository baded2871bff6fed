/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * O_DIRECT and preallocation on the data path (transfer/fs/direct.h), over
 * the in-memory transport: whole push sessions, a receiver in a thread.
 * What the page cache holds afterwards (mincore) shows which way each
 * byte went: with --direct a file's aligned part bypasses it on both
 * sides and only the page of an unaligned tail is cached (written, or
 * read, through the buffered descriptor), with --no-direct all of it is.
 * Every size around a page and a chunk arrives exact, the final size
 * too; compressed and sealed chunks go direct from their own buffers. A
 * file system without O_DIRECT falls back: tmpfs (its page cache is the
 * file), and one that refuses the flag (open(2) wrapped to fail it with
 * EINVAL, as such a file system does), where the pages are dropped behind
 * the copy instead; auto says nothing, --direct one line per side. The
 * space of a dense file is reserved up front (fallocate wrapped to count
 * and to fail): ENOSPC fails that file as the space check does, the next
 * one still arrives; a sparse file keeps its holes.
 *
 * The page-cache checks need a disk file system with O_DIRECT for the test
 * files (the first of /tmp, /var/tmp and the current directory that has
 * one); without, they are skipped and said so, the rest still runs.
 */
#include "tap.h"

#include "memconn.h"
#include "sesspair.h"
#include "testfs.h"
#include "transfer/fs/direct.h"
#include "transfer/session/engine.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define CHUNK (64u << 10)
#define PAGE 4096u
#define WATCHDOG_S 120

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* ---- the wrapped calls (Makefile: -Wl,--wrap=open,... ,--wrap=fallocate) ---- */

static atomic_int refuse_direct; /* open(2) with O_DIRECT fails: EINVAL */
static atomic_int falloc_errno;	 /* the next falloc_fails calls fail so */
static atomic_int falloc_fails;
static atomic_int falloc_calls;

int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);
int __real_fallocate(int fd, int mode, off_t off, off_t len);
int __wrap_fallocate(int fd, int mode, off_t off, off_t len);

int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if ((flags & O_DIRECT) && atomic_load(&refuse_direct)) {
		errno = EINVAL;
		return -1;
	}
	return __real_open(path, flags, mode);
}

/*
 * With _FORTIFY_SOURCE (the package builds), glibc turns an open() whose
 * flags are not a constant into __open_2(): wrapped the same way.
 */
int __real___open_2(const char *path, int flags);
int __wrap___open_2(const char *path, int flags);

int __wrap___open_2(const char *path, int flags)
{
	if ((flags & O_DIRECT) && atomic_load(&refuse_direct)) {
		errno = EINVAL;
		return -1;
	}
	return __real___open_2(path, flags);
}

int __wrap_fallocate(int fd, int mode, off_t off, off_t len)
{
	atomic_fetch_add(&falloc_calls, 1);
	if (atomic_load(&falloc_fails) > 0) {
		atomic_fetch_sub(&falloc_fails, 1);
		errno = atomic_load(&falloc_errno);
		return -1;
	}
	return __real_fallocate(fd, mode, off, len);
}

/* ---- where the files go ---- */

static bool in_memory(const char *dir)
{
	struct statfs fs;

	return statfs(dir, &fs) == 0 &&
	       (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

/* Whether dir is on a disk file system that takes O_DIRECT. */
static bool has_direct(const char *dir)
{
	char p[4200];
	int fd;

	if (in_memory(dir))
		return false;
	snprintf(p, sizeof(p), "%s/rdcp-direct-probe.%d", dir, (int)getpid());
	fd = __real_open(p, O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	close(fd);
	unlink(p);
	return true;
}

/* The first of /tmp, /var/tmp, "." with O_DIRECT on a disk, else NULL. */
static const char *disk_dir(void)
{
	static const char *const dirs[] = { "/tmp", "/var/tmp", "." };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (has_direct(dirs[i]))
			return dirs[i];
	return NULL;
}

/* ---- one push session over a memconn pair ---- */

static const uint8_t KEY[32] = "0123456789abcdef0123456789abcdef";

struct run {
	/* in */
	const char *base; /* where src and root are made */
	enum xfer_direct direct;
	int compress;
	bool encrypt;
	/* out */
	enum xfer_fail vc, vs;
	struct xfer_stats st;
	uint64_t sent, bytes; /* what the files' reports say crossed */
	char log[16384];      /* what both sides wrote to stderr */
	/* private */
	char src[4200], root[4200];
	const char *srcs[16];
	size_t nsrcs;
	int fds;
};

struct server_arg {
	const struct xfer_opts *o;
	int rootfd;
	struct cm_conn *c;
	enum xfer_fail v;
};

static void *server_main(void *p)
{
	struct server_arg *a = p;

	a->v = session_serve(a->o, a->rootfd, a->c);
	return NULL;
}

/* The client's file reports: payload bytes sent, file bytes. */
static void on_file(void *arg, const struct xfer_file_report *rep)
{
	struct run *r = arg;

	if (!rep->done || rep->status)
		return;
	r->sent += rep->sent;
	r->bytes += rep->bytes;
}

static void run_init(struct run *r, const char *base, enum xfer_direct d)
{
	memset(r, 0, sizeof(*r));
	r->base = base;
	r->direct = d;
	r->fds = tf_count_fds();
	snprintf(r->src, sizeof(r->src), "%s/rdcp-dsrc.XXXXXX", base);
	snprintf(r->root, sizeof(r->root), "%s/rdcp-droot.XXXXXX", base);
	CHECK(mkdtemp(r->src) != NULL);
	CHECK(mkdtemp(r->root) != NULL);
}

/* Source file name of size random bytes (seed), or NULL content. */
static const char *run_add(struct run *r, const char *name, size_t size,
			   uint64_t seed)
{
	char *p = malloc(strlen(r->src) + strlen(name) + 2);

	if (!p)
		abort();
	sprintf(p, "%s/%s", r->src, name);
	CHECK_EQ(tf_make_file(p, size, seed), 0);
	r->srcs[r->nsrcs++] = p;
	return p;
}

/* The copy of source i: root/dir/NAME. */
static void dest_of(const struct run *r, size_t i, char *out, size_t n)
{
	snprintf(out, n, "%s/dir/%s", r->root, strrchr(r->srcs[i], '/') + 1);
}

/* Every source into root/dir/, stderr of both sides into r->log. */
static void run_push(struct run *r)
{
	const struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = 8,
		.chunk_size = CHUNK,
	};
	struct xfer_opts co, so;
	struct sess_pair out;

	xfer_opts_init(&co);
	co.link.chunk_size = CHUNK;
	co.link.window = 8;
	co.link.workers = 2;
	co.link.timeout_ms = 5000;
	co.link.direct = r->direct;
	co.copy.compress = r->compress;
	co.link.key = r->encrypt ? KEY : NULL;
	co.copy.encrypt = r->encrypt;
	co.copy.dest = "dir/";
	co.copy.on_file = on_file;
	co.copy.on_file_arg = r;
	co.copy.srcs = r->srcs;
	co.copy.nsrcs = r->nsrcs;
	so = co;
	so.link.direct = XFER_DIRECT_AUTO; /* the client's choice travels */
	so.copy.srcs = NULL;
	so.copy.nsrcs = 0;
	so.copy.dest = NULL;
	so.serve.root = r->root;
	so.copy.on_file = NULL;
	CHECK_EQ(sess_pair_run(&g, &co, &so, r->root, WATCHDOG_S, &out), 0);
	r->vc = out.vc;
	r->vs = out.vs;
	r->st = out.st;
	memcpy(r->log, out.log, sizeof(r->log));
	if (r->log[0])
		printf("#   logged: %s", r->log);
}

static void run_finish(struct run *r)
{
	CHECK_EQ(tf_rm_tree(r->src), 0);
	CHECK_EQ(tf_rm_tree(r->root), 0);
	for (size_t i = 0; i < r->nsrcs; i++)
		free((char *)r->srcs[i]);
	CHECK_EQ(tf_count_fds(), r->fds);
}

/* Entries in root/dir: what was placed, and any temporary left. */
static int placed(const struct run *r)
{
	char d[4300];
	DIR *dir;
	struct dirent *de;
	int n = 0;

	snprintf(d, sizeof(d), "%s/dir", r->root);
	dir = opendir(d);
	while (dir && (de = readdir(dir)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (dir)
		closedir(dir);
	return n;
}

/* How many lines of the log contain s. */
static int log_lines(const struct run *r, const char *s)
{
	int n = 0;

	for (const char *p = r->log; (p = strstr(p, s)); p += strlen(s))
		n++;
	return n;
}

/* ---- the page cache ---- */

/* Pages of path's file in the page cache (-1: cannot tell). */
static long cached_pages(const char *path)
{
	int fd = __real_open(path, O_RDONLY | O_CLOEXEC);
	long n = 0;
	struct stat st;
	unsigned char *vec;
	size_t pages;
	void *p;

	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!st.st_size) {
		close(fd);
		return 0;
	}
	pages = ((size_t)st.st_size + PAGE - 1) / PAGE;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(pages);
	if (p == MAP_FAILED || !vec || mincore(p, (size_t)st.st_size, vec) < 0)
		n = -1;
	for (size_t i = 0; n >= 0 && i < pages; i++)
		n += vec[i] & 1;
	if (p != MAP_FAILED)
		munmap(p, (size_t)st.st_size);
	free(vec);
	close(fd);
	return n;
}

/* path's pages dropped from the page cache: a cold file. */
static void make_cold(const char *path)
{
	int fd = __real_open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	CHECK_EQ(cached_pages(path), 0);
}

/* The size of path, -1 if missing. */
static long long size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Source i arrived exact: its bytes and its size. */
static void check_same(const struct run *r, size_t i)
{
	char d[4300];

	dest_of(r, i, d, sizeof(d));
	if (tf_same_file(r->srcs[i], d) != 1) {
		printf("#   %s did not arrive as %s\n", r->srcs[i], d);
		CHECK(0);
	}
	CHECK_EQ(size_of(d), size_of(r->srcs[i]));
}

/* ---- tests ---- */

static const size_t SIZES[] = {
	0,     1,	  PAGE - 1,
	PAGE,  PAGE + 1,  CHUNK - 1,
	CHUNK, CHUNK + 1, 3 * CHUNK + PAGE + 513,
};
#define NSIZES (sizeof(SIZES) / sizeof(SIZES[0]))

/*
 * Sizes around a page and a chunk, --direct then --no-direct: exact every
 * time; with --direct, the page cache holds only each file's unaligned
 * tail page, on both sides, and with --no-direct all of it. Small files
 * (a quarter of a chunk at most) travel packed and stay buffered.
 */
static void test_direct_sizes(void)
{
	const char *base = disk_dir();
	enum xfer_direct modes[] = { XFER_DIRECT_ON, XFER_DIRECT_OFF };

	if (!base) {
		printf("# skipped: no disk file system with O_DIRECT here\n");
		return;
	}
	for (size_t m = 0; m < 2; m++) {
		struct run r;

		run_init(&r, base, modes[m]);
		for (size_t i = 0; i < NSIZES; i++) {
			char name[32];

			snprintf(name, sizeof(name), "f%zu", SIZES[i]);
			make_cold(run_add(&r, name, SIZES[i], 100 + i));
		}
		run_push(&r);
		CHECK_EQ(r.vc, XFER_OK);
		CHECK_EQ(r.vs, XFER_OK);
		CHECK_EQ(r.st.files_ok, NSIZES);
		for (size_t i = 0; i < NSIZES; i++) {
			long pages = (long)((SIZES[i] + PAGE - 1) / PAGE);
			long tail = SIZES[i] % PAGE ? 1 : 0;
			/* Small files travel packed, always buffered. */
			bool packed = SIZES[i] <= CHUNK / 4;
			long want = modes[m] == XFER_DIRECT_ON && !packed
					    ? tail
					    : pages;
			char d[4300];

			dest_of(&r, i, d, sizeof(d));
			/* Before anything reads them back. */
			if (cached_pages(d) != want ||
			    cached_pages(r.srcs[i]) != want)
				printf("#   %zu bytes, mode %d: %ld and %ld "
				       "pages cached, want %ld\n",
				       SIZES[i], (int)modes[m], cached_pages(d),
				       cached_pages(r.srcs[i]), want);
			CHECK_EQ(cached_pages(d), want);
			CHECK_EQ(cached_pages(r.srcs[i]), want);
			check_same(&r, i);
		}
		CHECK_EQ(log_lines(&r, "O_DIRECT"), 0);
		run_finish(&r);
	}
}

/*
 * Compressed chunks are inflated into a job's scratch buffer and sealed
 * ones opened in the ring slot: both go direct from there, exact.
 */
static void test_direct_compress_encrypt(void)
{
	const char *base = disk_dir();
	const size_t size = 5 * CHUNK + 100;
	struct run r;
	char d[4300];
	FILE *f;

	if (!base) {
		printf("# skipped: no disk file system with O_DIRECT here\n");
		return;
	}
	run_init(&r, base, XFER_DIRECT_ON);
	r.compress = 1;
	r.encrypt = true;
	run_add(&r, "text", 0, 1);
	f = fopen(r.srcs[0], "w");
	CHECK(f != NULL);
	for (size_t i = 0; f && i < size; i += 50)
		fprintf(f, "%049zu\n", i);
	if (f)
		fclose(f);
	make_cold(r.srcs[0]);
	make_cold(run_add(&r, "random", 3 * CHUNK + 9, 7));
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(r.vs, XFER_OK);
	/* It did shrink: the compressed path ran. */
	CHECK(r.sent < r.bytes);
	for (size_t i = 0; i < 2; i++) {
		dest_of(&r, i, d, sizeof(d));
		CHECK_EQ(cached_pages(d), size_of(d) % PAGE ? 1 : 0);
		check_same(&r, i);
	}
	run_finish(&r);
}

/*
 * tmpfs: its page cache is the file. --direct says so once per side and
 * copies through the page cache; auto (a 64 MiB sparse file, at the auto
 * threshold) falls back without a word.
 */
static void test_direct_tmpfs_fallback(void)
{
	struct run r;
	int fd;

	if (!in_memory("/dev/shm")) {
		printf("# skipped: /dev/shm is not a tmpfs\n");
		return;
	}
	run_init(&r, "/dev/shm", XFER_DIRECT_ON);
	run_add(&r, "a", 3 * CHUNK + 1, 1);
	run_add(&r, "b", 2 * CHUNK, 2);
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(r.vs, XFER_OK);
	check_same(&r, 0);
	check_same(&r, 1);
	/* One line a side, not one a file. */
	CHECK_EQ(log_lines(&r, "cannot write"), 1);
	CHECK_EQ(log_lines(&r, "cannot read"), 1);
	CHECK_EQ(log_lines(&r, "tmpfs"), 2);
	run_finish(&r);

	run_init(&r, "/dev/shm", XFER_DIRECT_AUTO);
	run_add(&r, "big", 0, 1);
	fd = __real_open(r.srcs[0], O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "tail", 4, (64 << 20) - 4), 4);
	close(fd);
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(r.vs, XFER_OK);
	check_same(&r, 0);
	/* auto: no word about direct I/O, only the receiver's session line */
	CHECK_EQ(log_lines(&r, "direct"), 0);
	CHECK_EQ(log_lines(&r, "rdcp: "), log_lines(&r, "rdcp: session "));
	run_finish(&r);
}

/*
 * A disk file system that refuses O_DIRECT (EINVAL from open): --direct
 * says so once per side; the copy goes through the page cache and drops
 * its pages behind it (the sink's once on the device).
 */
static void test_direct_refused_drops(void)
{
	const char *base = disk_dir();
	struct run r;
	char d[4300];

	if (!base) {
		printf("# skipped: no disk file system with O_DIRECT here\n");
		return;
	}
	atomic_store(&refuse_direct, 1);
	run_init(&r, base, XFER_DIRECT_ON);
	make_cold(run_add(&r, "a", 16 * CHUNK + 7, 3));
	make_cold(run_add(&r, "b", 4 * CHUNK, 4));
	run_push(&r);
	atomic_store(&refuse_direct, 0);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(r.vs, XFER_OK);
	CHECK_EQ(log_lines(&r, "does not take O_DIRECT"), 2);
	CHECK_EQ(log_lines(&r, "cannot write"), 1);
	for (size_t i = 0; i < 2; i++) {
		long pages = (long)((size_of(r.srcs[i]) + PAGE - 1) / PAGE);
		long src = cached_pages(r.srcs[i]);

		dest_of(&r, i, d, sizeof(d));
		CHECK_EQ(cached_pages(d), 0);
		/* Readahead may refill a little behind a worker. */
		CHECK(src >= 0 && src < pages / 2);
		check_same(&r, i);
	}
	run_finish(&r);
}

/*
 * The space of a dense file is reserved up front: ENOSPC there fails the
 * file as the space check does (nothing left of it) and the next file
 * still arrives; EDQUOT fails it too; a file system that cannot
 * preallocate (EOPNOTSUPP) just writes. A sparse file is never
 * preallocated: its holes stay holes.
 */
static void test_fallocate(void)
{
	const char *base = disk_dir();
	const int errs[] = { ENOSPC, EDQUOT, EOPNOTSUPP };
	struct run r;
	char d[4300];
	struct stat st;
	int fd;

	if (!base) {
		printf("# skipped: no disk file system here\n");
		return;
	}
	for (size_t e = 0; e < 3; e++) {
		run_init(&r, base, XFER_DIRECT_AUTO);
		run_add(&r, "a", 3 * CHUNK, 1);
		run_add(&r, "b", 2 * CHUNK + 1, 2);
		atomic_store(&falloc_calls, 0);
		atomic_store(&falloc_errno, errs[e]);
		atomic_store(&falloc_fails, 1);
		run_push(&r);
		atomic_store(&falloc_fails, 0);
		CHECK_EQ(atomic_load(&falloc_calls), 2);
		check_same(&r, 1);
		dest_of(&r, 0, d, sizeof(d));
		if (errs[e] == EOPNOTSUPP) {
			CHECK_EQ(r.vc, XFER_OK);
			check_same(&r, 0);
		} else {
			CHECK(r.vc != XFER_OK);
			CHECK_EQ(r.st.files_failed, 1);
			CHECK_EQ(r.st.files_ok, 1);
			CHECK_EQ(size_of(d), -1);
			/* the receiver's line, then the client's */
			CHECK_EQ(log_lines(&r,
					   errs[e] == ENOSPC
						   ? "not enough space for"
						   : "cannot allocate space"),
				 2);
		}
		/* b, and a only when placed: no temporary left */
		CHECK_EQ(placed(&r), errs[e] == EOPNOTSUPP ? 2 : 1);
		run_finish(&r);
	}

	/* A sparse source: one chunk of data after 15 of hole. */
	run_init(&r, base, XFER_DIRECT_AUTO);
	run_add(&r, "sparse", 0, 1);
	fd = __real_open(r.srcs[0], O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 15 * CHUNK), 0);
	CHECK_EQ(pwrite(fd, "data", 4, 15 * CHUNK), 4);
	close(fd);
	atomic_store(&falloc_calls, 0);
	run_push(&r);
	CHECK_EQ(r.vc, XFER_OK);
	CHECK_EQ(atomic_load(&falloc_calls), 0);
	check_same(&r, 0);
	dest_of(&r, 0, d, sizeof(d));
	CHECK(stat(d, &st) == 0 && st.st_blocks * 512 < 4 * CHUNK);
	run_finish(&r);
}

/*
 * A HELLO that both forces and forbids O_DIRECT is refused before
 * anything else: a protocol error on the receiver, which answers no
 * WELCOME.
 */
static void test_hello_both_refused(void)
{
	const struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = 8,
		.chunk_size = CHUNK,
	};
	char root[] = "/tmp/rdcp-droot.XXXXXX";
	struct server_arg sa = { 0 };
	struct cm_conn *a = NULL, *b = NULL;
	struct xfer_opts so;
	struct wire_msg m;
	struct engine e;
	pthread_t tid;
	int fds = tf_count_fds();

	CHECK(mkdtemp(root) != NULL);
	xfer_opts_init(&so);
	so.link.chunk_size = CHUNK;
	so.link.window = 8;
	so.link.timeout_ms = 5000;
	so.serve.root = root;
	sa.o = &so;
	sa.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(memconn_pair(&g, NULL, &a, &b), 0);
	if (!a || !b || sa.rootfd < 0)
		return;
	sa.c = b;
	alarm(WATCHDOG_S);
	CHECK_EQ(pthread_create(&tid, NULL, server_main, &sa), 0);
	CHECK_EQ(engine_init(&e, a, &so), 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.u.hello.role = WIRE_PUSH;
	m.u.hello.csum = XFER_CSUM_CRC32;
	m.u.hello.flags = WIRE_HELLO_DIRECT | WIRE_HELLO_NO_DIRECT;
	m.u.hello.chunk_size = CHUNK;
	CHECK_EQ(wire_hello_add_path(&m.u.hello, "x"), 0);
	CHECK_EQ(engine_send(&e, &m), 0);
	CHECK(engine_expect(&e, WIRE_WELCOME, &m, 5000) != 0);
	engine_release(&e);
	cm_conn_destroy(a);
	pthread_join(tid, NULL);
	alarm(0);
	CHECK_EQ(sa.v, XFER_FAIL_PROTOCOL);
	cm_conn_destroy(b);
	close(sa.rootfd);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/*
 * The source's cache decision samples pages over the whole file: a large
 * file whose first page alone is cached (file(1) looked at it) goes
 * direct; one cached whole goes buffered.
 */
static void test_direct_cached_sample(void)
{
	const char *base = disk_dir();
	char path[4200], buf[4096];
	const size_t size = 16u << 20;
	int fd;

	if (!base) {
		printf("# skip: no disk file system with O_DIRECT here\n");
		return;
	}
	snprintf(path, sizeof(path), "%s/rdcp-dcache.%d", base, (int)getpid());
	fd = __real_open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	memset(buf, 0x5a, sizeof(buf));
	for (size_t off = 0; off < size; off += sizeof(buf))
		CHECK_EQ(pwrite(fd, buf, sizeof(buf), (off_t)off),
			 (ssize_t)sizeof(buf));
	make_cold(path);
	CHECK(!direct_cached(fd));
	/* its first page read: the rest is still on the disk only */
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	CHECK(cached_pages(path) >= 1);
	CHECK(!direct_cached(fd));
	/* read whole: cached */
	for (size_t off = 0; off < size; off += sizeof(buf))
		CHECK_EQ(pread(fd, buf, sizeof(buf), (off_t)off),
			 (ssize_t)sizeof(buf));
	CHECK(direct_cached(fd));
	close(fd);
	unlink(path);
}

TAP_RUN(TAP_TEST(test_direct_cached_sample), TAP_TEST(test_direct_sizes),
	TAP_TEST(test_direct_compress_encrypt),
	TAP_TEST(test_direct_tmpfs_fallback),
	TAP_TEST(test_direct_refused_drops), TAP_TEST(test_fallocate),
	TAP_TEST(test_hello_both_refused))
