/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Fault injection: every unwind path of a whole session, one failure at a
 * time. The binary is linked with GNU ld --wrap (see FAULT_WRAP in the
 * Makefile), so every call the objects of librdcp.a make to one of the
 * wrapped functions lands in __wrap_X below, which calls __real_X unless it
 * is armed and this is the Nth call of its kind: then it fails that call
 * alone, as the system would. No product source knows about it.
 *
 * The kinds, and what a failed call returns:
 *   alloc   malloc, calloc, realloc, strdup, vasprintf, fdopendir,
 *           EVP_MD_CTX_new: NULL/-1 with ENOMEM; posix_memalign: ENOMEM;
 *           pthread_create: EAGAIN
 *   open    open, openat, openat2 (through syscall(2)), dup, eventfd:
 *           -1 with EMFILE
 *   io      pread, pwrite, fsync, ftruncate, fstat, fstatat, mkdir(at),
 *           symlinkat, renameat, readlinkat, fchmod, futimens, utimensat,
 *           flock, lseek, fstatvfs, posix_fadvise, getrandom, fallocate,
 *           sync_file_range: -1 with EIO
 *           (close, unlinkat and the workq's eventfd read/write are left
 *           alone: cleanup, and a write the product documents as one that
 *           cannot fail)
 *   verbs   the RDMA calls. This host has no RDMA device, so they are
 *           injected at the seam the product reaches them through: the
 *           struct cm_ops that cm/verbs.c implements with ibv_* calls
 *           (post_send, post_recv, post_write -> ibv_post_send/recv;
 *           ring_create, stage_create -> ibv_reg_mr), over the in-memory
 *           pair of memconn.h: -ENOMEM as ibv_post_* and ibv_reg_mr give.
 *           And each completion polled: its status becomes -EIO, as
 *           cm/verbs.c reports a failed work completion.
 *   poll    the completion calls themselves, poll, arm (ibv_req_notify_cq)
 *           and wait (the completion channel): -EIO. Their number depends
 *           on timing and every one is the same call site, so N goes up
 *           geometrically here (1..8, then x1.5).
 *
 * The _FORTIFY_SOURCE variants (__open_2, __openat_2, __vasprintf_chk,
 * __readlinkat_chk) are wrapped too, the Debian package build runs these
 * tests with -D_FORTIFY_SOURCE=2, and so are the *64 names the calls take
 * with -D_FILE_OFFSET_BITS=64 (open64, pread64, fstat64, ...; on x86-64
 * the plain names are the ones used today).
 *
 * For each scenario and kind, N = 1, 2, ... runs one whole session: a
 * recursive copy of a small tree (files of 0 to 3 chunks, an empty
 * directory, a symlink, a subdirectory, a top-level file), session_client()
 * in one thread and session_serve() in another over a memconn pair, the
 * Nth call of that kind failing, until a session runs with no call left to
 * fail (then its N is past the last call, and the loop is done). Both
 * sides and their workers race, so which call is the Nth varies a little
 * from run to run; a recording session then lists every call site of the
 * kind, and each one the loop happened to miss gets a session failing its
 * first call. Scenarios: push (with fsync), pull (SHA-256, -p), the same
 * pull with --files-from (the names sent in NAMES, the receiver's walk fed
 * them) and push --resume over what an earlier attempt left. For each session:
 *   - both calls return, within HANG_S (else: the case is named, abort)
 *   - both verdicts are OK or a failure class
 *   - a session where nothing was injected succeeds, places and reports
 *     everything
 *   - a client that says OK, and every file reported OK, is really there
 *   - nothing under its final name in the destination is wrong: a file
 *     has its source's bytes (or, with --resume, the old bytes it had),
 *     a directory is one, a symlink points where its source does
 *   - no temporary is left (except with --resume, which keeps them)
 *   - every descriptor open before is open after, on the same file, and
 *     no other is (/proc/self/fd: a count alone misses an fd closed by
 *     mistake and then reused)
 *   - nothing leaked (ASan builds: LeakSanitizer's recoverable check after
 *     every session pins the first leak to its kind and N)
 * Any failure names the scenario, kind, N, the verdicts and the call that
 * was failed (function and file:line under ASan and TSan, else the
 * addr2line command that names them).
 *
 * RDCP_TEST_DEBUG=1 shows the product's log and one line per session;
 * RDCP_TEST_FAULT=push/alloc runs that loop alone, =push/alloc:50 only
 * its N=50 (the same call again when no other thread races for it, as in
 * the set-up of a session). Not in run_tests.sh's valgrind list: ASan
 * covers it, and under valgrind it takes a minute and a half.
 */
#include "tap.h"

#include "memconn.h"
#include "testfs.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 4096u
#define WINDOW 4
#define TIMEOUT_MS 3000 /* peer silence; only a lost peer waits this long */
#define HANG_S 30	/* a session still running then is a hang: abort */
#define MAX_REPORTS 8	/* failed N printed in full per loop */

static bool verbose;

/*
 * Line-buffered TAP output: LeakSanitizer ends the process with _exit()
 * when it finds a leak, which would swallow a fully buffered summary.
 */
__attribute__((constructor)) static void setup(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	verbose = getenv("RDCP_TEST_DEBUG") != NULL;
	log_set_level(verbose ? LOG_DEBUG : LOG_QUIET);
}

/* In ASan builds: symbolize a pc, and check for leaks without exiting. */
void __sanitizer_symbolize_pc(void *pc, const char *fmt, char *out,
			      size_t outsz) __attribute__((weak));
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
extern const char __executable_start[];

/* ---- the injector ---- */

enum fault_kind {
	FK_NONE,
	FK_ALLOC,
	FK_OPEN,
	FK_IO,
	FK_VERBS,
	FK_POLL,
};

static const char *const kind_names[] = { "none", "alloc", "open",
					  "io",	  "verbs", "poll" };

static atomic_int fi_kind;	/* armed kind; FK_NONE: pass everything */
static uint64_t fi_nth;		/* fail call number fi_nth of that kind */
static void *fi_site;		/* if set, count only calls made from here */
static bool fi_recording;	/* fail nothing, note every call site */
static atomic_ullong fi_calls;	/* calls of the armed kind so far */
static atomic_int fi_hits;	/* failures injected (0 or 1) */
static const char *fi_hit_name; /* the call failed, and from where */
static void *fi_hit_ra;
/* Test and memconn code of this thread: never counted, never failed. */
static _Thread_local int fi_bypass;

/* The call sites a recording session saw. */
#define MAX_SITES 256
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static void *rec_ra[MAX_SITES];
static const char *rec_name[MAX_SITES];
static unsigned int rec_n;

static void record(const char *name, void *ra)
{
	pthread_mutex_lock(&rec_lock);
	for (unsigned int i = 0; i < rec_n; i++)
		if (rec_ra[i] == ra)
			goto out;
	if (rec_n < MAX_SITES) {
		rec_ra[rec_n] = ra;
		rec_name[rec_n++] = name;
	}
out:
	pthread_mutex_unlock(&rec_lock);
}

static bool fi_fail(enum fault_kind k, const char *name, void *ra)
{
	if (fi_bypass ||
	    atomic_load_explicit(&fi_kind, memory_order_relaxed) != (int)k)
		return false;
	if (fi_recording) {
		record(name, ra);
		return false;
	}
	if (fi_site && ra != fi_site)
		return false;
	if (atomic_fetch_add(&fi_calls, 1) + 1 != fi_nth)
		return false;
	fi_hit_name = name;
	fi_hit_ra = ra;
	atomic_store(&fi_hits, 1);
	return true;
}

#define FAIL_NOW(k, name) fi_fail(k, name, __builtin_return_address(0))

/* Where the failed call came from, for the diagnostics. */
static void describe_site(const char *name, void *ra, char *out, size_t n)
{
	char where[512] = "";

	if (!name) {
		snprintf(out, n, "no call failed");
		return;
	}
	if (__sanitizer_symbolize_pc)
		__sanitizer_symbolize_pc((char *)ra - 1, "%f %S", where,
					 sizeof(where));
	if (!where[0] || !strcmp(where, "<null>"))
		snprintf(where, sizeof(where), "`addr2line -fie %s 0x%lx`",
			 program_invocation_name,
			 (unsigned long)((uintptr_t)ra - 1 -
					 (uintptr_t)__executable_start));
	snprintf(out, n, "%s in %s", name, where);
}

/* ---- allocation ---- */

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__wrap_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__wrap_strdup(const char *s);
int __real_vasprintf(char **out, const char *fmt, va_list ap);
int __wrap_vasprintf(char **out, const char *fmt, va_list ap);
int __real___vasprintf_chk(char **out, int flag, const char *fmt, va_list ap);
int __wrap___vasprintf_chk(char **out, int flag, const char *fmt, va_list ap);
DIR *__real_fdopendir(int fd);
DIR *__wrap_fdopendir(int fd);
EVP_MD_CTX *__real_EVP_MD_CTX_new(void);
EVP_MD_CTX *__wrap_EVP_MD_CTX_new(void);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a,
			  void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a,
			  void *(*fn)(void *), void *arg);

void *__wrap_malloc(size_t n)
{
	if (FAIL_NOW(FK_ALLOC, "malloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	if (FAIL_NOW(FK_ALLOC, "calloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	if (FAIL_NOW(FK_ALLOC, "realloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, n);
}

int __real_posix_memalign(void **p, size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	if (FAIL_NOW(FK_ALLOC, "posix_memalign"))
		return ENOMEM; /* the error itself, not -1 */
	return __real_posix_memalign(p, align, n);
}

char *__wrap_strdup(const char *s)
{
	if (FAIL_NOW(FK_ALLOC, "strdup")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_strdup(s);
}

int __wrap_vasprintf(char **out, const char *fmt, va_list ap)
{
	if (FAIL_NOW(FK_ALLOC, "vasprintf")) {
		errno = ENOMEM;
		return -1;
	}
	return __real_vasprintf(out, fmt, ap);
}

int __wrap___vasprintf_chk(char **out, int flag, const char *fmt, va_list ap)
{
	if (FAIL_NOW(FK_ALLOC, "vasprintf")) {
		errno = ENOMEM;
		return -1;
	}
	return __real___vasprintf_chk(out, flag, fmt, ap);
}

DIR *__wrap_fdopendir(int fd)
{
	if (FAIL_NOW(FK_ALLOC, "fdopendir")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_fdopendir(fd);
}

EVP_MD_CTX *__wrap_EVP_MD_CTX_new(void)
{
	if (FAIL_NOW(FK_ALLOC, "EVP_MD_CTX_new"))
		return NULL;
	return __real_EVP_MD_CTX_new();
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a,
			  void *(*fn)(void *), void *arg)
{
	if (FAIL_NOW(FK_ALLOC, "pthread_create"))
		return EAGAIN;
	return __real_pthread_create(t, a, fn, arg);
}

/* ---- descriptors ---- */

int __real_dup(int fd);
int __wrap_dup(int fd);
int __real_eventfd(unsigned int v, int flags);
int __wrap_eventfd(unsigned int v, int flags);
long __real_syscall(long nr, ...);
long __wrap_syscall(long nr, ...);

static bool takes_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* open(2) and openat(2): the mode is there only when flags need one. */
#define OPEN_WRAP(name, params, args)                                          \
	int __real_##name(params, ...);                                        \
	int __wrap_##name(params, ...);                                        \
	int __wrap_##name(params, ...)                                         \
	{                                                                      \
		mode_t mode = 0;                                               \
                                                                               \
		if (takes_mode(flags)) {                                       \
			va_list ap;                                            \
                                                                               \
			va_start(ap, flags);                                   \
			mode = va_arg(ap, mode_t);                             \
			va_end(ap);                                            \
		}                                                              \
		if (FAIL_NOW(FK_OPEN, #name)) {                                \
			errno = EMFILE;                                        \
			return -1;                                             \
		}                                                              \
		return __real_##name(args, mode);                              \
	}

/* Their _FORTIFY_SOURCE forms, which take no mode. */
#define OPEN2_WRAP(name, params, args)                                         \
	int __real_##name(params);                                             \
	int __wrap_##name(params);                                             \
	int __wrap_##name(params)                                              \
	{                                                                      \
		if (FAIL_NOW(FK_OPEN, #name)) {                                \
			errno = EMFILE;                                        \
			return -1;                                             \
		}                                                              \
		return __real_##name(args);                                    \
	}

#define COMMA ,
OPEN_WRAP(open, const char *p COMMA int flags, p COMMA flags)
OPEN_WRAP(open64, const char *p COMMA int flags, p COMMA flags)
OPEN_WRAP(openat, int d COMMA const char *p COMMA int flags,
	  d COMMA p COMMA flags)
OPEN_WRAP(openat64, int d COMMA const char *p COMMA int flags,
	  d COMMA p COMMA flags)
OPEN2_WRAP(__open_2, const char *p COMMA int flags, p COMMA flags)
OPEN2_WRAP(__open64_2, const char *p COMMA int flags, p COMMA flags)
OPEN2_WRAP(__openat_2, int d COMMA const char *p COMMA int flags,
	   d COMMA p COMMA flags)
OPEN2_WRAP(__openat64_2, int d COMMA const char *p COMMA int flags,
	   d COMMA p COMMA flags)

int __wrap_dup(int fd)
{
	if (FAIL_NOW(FK_OPEN, "dup")) {
		errno = EMFILE;
		return -1;
	}
	return __real_dup(fd);
}

int __wrap_eventfd(unsigned int v, int flags)
{
	if (FAIL_NOW(FK_OPEN, "eventfd")) {
		errno = EMFILE;
		return -1;
	}
	return __real_eventfd(v, flags);
}

/*
 * util/path.c reaches openat2 through syscall(2), with four arguments;
 * anything else (nothing today) is passed on with six, as syscall(2)
 * itself reads them.
 */
long __wrap_syscall(long nr, ...)
{
	long a[6] = { 0 };
	int n = nr == SYS_openat2 ? 4 : 6;
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < n; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_openat2) {
		if (FAIL_NOW(FK_OPEN, "openat2")) {
			errno = EMFILE;
			return -1;
		}
		return __real_syscall(nr, a[0], a[1], a[2], a[3]);
	}
	return __real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- file system calls ---- */

#define IO_WRAP(ret, name, params, args)                                       \
	ret __real_##name params;                                              \
	ret __wrap_##name params;                                              \
	ret __wrap_##name params                                               \
	{                                                                      \
		if (FAIL_NOW(FK_IO, #name)) {                                  \
			errno = EIO;                                           \
			return (ret)-1;                                        \
		}                                                              \
		return __real_##name args;                                     \
	}

IO_WRAP(ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
IO_WRAP(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o),
	(fd, b, n, o))
IO_WRAP(int, fsync, (int fd), (fd))
IO_WRAP(int, ftruncate, (int fd, off_t n), (fd, n))
IO_WRAP(int, fstat, (int fd, struct stat *st), (fd, st))
IO_WRAP(int, fstatat, (int d, const char *p, struct stat *st, int fl),
	(d, p, st, fl))
IO_WRAP(int, mkdir, (const char *p, mode_t m), (p, m))
IO_WRAP(int, mkdirat, (int d, const char *p, mode_t m), (d, p, m))
IO_WRAP(int, symlinkat, (const char *to, int d, const char *p), (to, d, p))
IO_WRAP(int, renameat, (int a, const char *p, int b, const char *q),
	(a, p, b, q))
IO_WRAP(ssize_t, readlinkat, (int d, const char *p, char *b, size_t n),
	(d, p, b, n))
IO_WRAP(ssize_t, __readlinkat_chk,
	(int d, const char *p, char *b, size_t n, size_t bn), (d, p, b, n, bn))
IO_WRAP(int, fchmod, (int fd, mode_t m), (fd, m))
IO_WRAP(int, futimens, (int fd, const struct timespec t[2]), (fd, t))
IO_WRAP(int, utimensat,
	(int d, const char *p, const struct timespec t[2], int fl),
	(d, p, t, fl))
IO_WRAP(int, flock, (int fd, int op), (fd, op))
IO_WRAP(off_t, lseek, (int fd, off_t o, int w), (fd, o, w))
IO_WRAP(int, fstatvfs, (int fd, struct statvfs *v), (fd, v))
IO_WRAP(ssize_t, getrandom, (void *b, size_t n, unsigned int fl), (b, n, fl))
IO_WRAP(int, fallocate, (int fd, int m, off_t o, off_t n), (fd, m, o, n))
IO_WRAP(int, sync_file_range, (int fd, off64_t o, off64_t n, unsigned int fl),
	(fd, o, n, fl))
/* What the calls above become with -D_FILE_OFFSET_BITS=64. */
IO_WRAP(ssize_t, pread64, (int fd, void *b, size_t n, off64_t o), (fd, b, n, o))
IO_WRAP(ssize_t, pwrite64, (int fd, const void *b, size_t n, off64_t o),
	(fd, b, n, o))
IO_WRAP(int, ftruncate64, (int fd, off64_t n), (fd, n))
IO_WRAP(int, fstat64, (int fd, struct stat64 *st), (fd, st))
IO_WRAP(int, fstatat64, (int d, const char *p, struct stat64 *st, int fl),
	(d, p, st, fl))
IO_WRAP(off64_t, lseek64, (int fd, off64_t o, int w), (fd, o, w))
IO_WRAP(int, fstatvfs64, (int fd, struct statvfs64 *v), (fd, v))
IO_WRAP(int, fallocate64, (int fd, int m, off64_t o, off64_t n), (fd, m, o, n))

int __real_posix_fadvise(int fd, off_t o, off_t n, int advice);
int __wrap_posix_fadvise(int fd, off_t o, off_t n, int advice);
int __real_posix_fadvise64(int fd, off64_t o, off64_t n, int advice);
int __wrap_posix_fadvise64(int fd, off64_t o, off64_t n, int advice);

int __wrap_posix_fadvise(int fd, off_t o, off_t n, int advice)
{
	if (FAIL_NOW(FK_IO, "posix_fadvise"))
		return EIO; /* the error itself, not -1 */
	return __real_posix_fadvise(fd, o, n, advice);
}

int __wrap_posix_fadvise64(int fd, off64_t o, off64_t n, int advice)
{
	if (FAIL_NOW(FK_IO, "posix_fadvise64"))
		return EIO;
	return __real_posix_fadvise64(fd, o, n, advice);
}

/* ---- the transport's calls: memconn's ops behind failing ones ---- */

static const struct cm_ops *mc_ops; /* memconn's own */

static int fo_post_send(struct cm_conn *c, unsigned int txbuf, uint32_t len,
			uint64_t wr_id)
{
	int rc;

	if (FAIL_NOW(FK_VERBS, "post_send"))
		return -ENOMEM;
	fi_bypass++;
	rc = mc_ops->post_send(c, txbuf, len, wr_id);
	fi_bypass--;
	return rc;
}

static int fo_post_recv(struct cm_conn *c, unsigned int rxbuf)
{
	int rc;

	if (FAIL_NOW(FK_VERBS, "post_recv"))
		return -ENOMEM;
	fi_bypass++;
	rc = mc_ops->post_recv(c, rxbuf);
	fi_bypass--;
	return rc;
}

static int fo_post_write(struct cm_conn *c, unsigned int stage, uint32_t len,
			 unsigned int slot, uint32_t imm, bool signaled,
			 uint64_t wr_id)
{
	int rc;

	if (FAIL_NOW(FK_VERBS, "post_write"))
		return -ENOMEM;
	fi_bypass++;
	rc = mc_ops->post_write(c, stage, len, slot, imm, signaled, wr_id);
	fi_bypass--;
	return rc;
}

static int fo_poll(struct cm_conn *c, struct cm_event *ev, int max)
{
	int n;

	if (FAIL_NOW(FK_POLL, "poll"))
		return -EIO;
	fi_bypass++;
	n = mc_ops->poll(c, ev, max);
	fi_bypass--;
	/* A failed work completion, as cm/verbs.c reports one. */
	for (int i = 0; i < n; i++) {
		if (ev[i].status || ev[i].type == CM_EV_CLOSED ||
		    !fi_fail(FK_VERBS, "completion",
			     __builtin_return_address(0)))
			continue;
		ev[i].status = -EIO;
		if (ev[i].type == CM_EV_DATA)
			ev[i].type = CM_EV_RECV; /* the receive CQ's */
	}
	return n;
}

static int fo_arm(struct cm_conn *c)
{
	int rc;

	if (FAIL_NOW(FK_POLL, "arm"))
		return -EIO;
	fi_bypass++;
	rc = mc_ops->arm(c);
	fi_bypass--;
	return rc;
}

static int fo_wait(struct cm_conn *c, int extra_fd, int timeout_ms)
{
	int rc;

	if (FAIL_NOW(FK_POLL, "wait"))
		return -EIO;
	fi_bypass++;
	rc = mc_ops->wait(c, extra_fd, timeout_ms);
	fi_bypass--;
	return rc;
}

static int fo_ring_create(struct cm_conn *c, struct cm_ring_desc *desc)
{
	int rc;

	if (FAIL_NOW(FK_VERBS, "ring_create"))
		return -ENOMEM;
	fi_bypass++;
	rc = mc_ops->ring_create(c, desc);
	fi_bypass--;
	return rc;
}

static int fo_stage_create(struct cm_conn *c, const struct cm_ring_desc *peer)
{
	int rc;

	if (FAIL_NOW(FK_VERBS, "stage_create"))
		return -ENOMEM;
	fi_bypass++;
	rc = mc_ops->stage_create(c, peer);
	fi_bypass--;
	return rc;
}

static void fo_destroy(struct cm_conn *c)
{
	fi_bypass++;
	mc_ops->destroy(c);
	fi_bypass--;
}

static const struct cm_ops fault_ops = {
	.post_send = fo_post_send,
	.post_recv = fo_post_recv,
	.post_write = fo_post_write,
	.poll = fo_poll,
	.arm = fo_arm,
	.wait = fo_wait,
	.ring_create = fo_ring_create,
	.stage_create = fo_stage_create,
	.destroy = fo_destroy,
};

/* ---- the tree copied ---- */

struct entry {
	const char *rel;
	char kind; /* 'd', 'f', 'l' */
	size_t size;
	uint64_t seed;
	const char *link;
};

static const struct entry tree[] = {
	{ "t", 'd', 0, 0, NULL },
	{ "t/a", 'f', 3 * CHUNK + 5, 1, NULL },
	{ "t/b", 'f', 0, 2, NULL },
	{ "t/empty", 'd', 0, 0, NULL },
	{ "t/link", 'l', 0, 0, "a" },
	{ "t/sub", 'd', 0, 0, NULL },
	{ "t/sub/c", 'f', CHUNK, 3, NULL },
	{ "t/sub/d", 'f', 2 * CHUNK + 1, 4, NULL },
	{ "top", 'f', 100, 5, NULL },
};

#define NTREE (sizeof(tree) / sizeof(tree[0]))
#define E_A 1 /* indices the --resume seed uses */
#define E_C 6
#define E_D 7

static int make_tree(const char *base)
{
	char p[PATH_MAX];

	for (size_t i = 0; i < NTREE; i++) {
		snprintf(p, sizeof(p), "%s/%s", base, tree[i].rel);
		if (tree[i].kind == 'd' && mkdir(p, 0755))
			return -1;
		if (tree[i].kind == 'f' &&
		    tf_make_file(p, tree[i].size, tree[i].seed))
			return -1;
		if (tree[i].kind == 'l' && symlink(tree[i].link, p))
			return -1;
	}
	return 0;
}

/* ---- one session ---- */

enum scenario {
	SC_PUSH,
	SC_PULL,
	SC_RESUME,
	SC_DELETE, /* a push with --delete onto a DEST holding more */
	SC_LIST,   /* SC_PULL with --files-from: t (with -r) and top */
};

static const char *const scenario_names[] = { "push", "pull", "resume",
					      "delete", "list" };

/* Whether the tree lands here (a pull), not on the receiver. */
static bool pulled(enum scenario sc)
{
	return sc == SC_PULL || sc == SC_LIST;
}

/*
 * SC_DELETE: what DEST holds beside the tree, which --delete removes only
 * once the whole tree is in place: never any of it when a file of the
 * tree failed.
 */
static const char *const extra[] = {
	"t/x", "t/sub/y", "t/old/deep/z", "t/old/deep", "t/old", "t/ln",
};
#define NEXTRA (sizeof(extra) / sizeof(extra[0]))

struct ctx {
	enum scenario sc;
	char work[64];	     /* everything of this loop lives beneath */
	char src[PATH_MAX];  /* the tree: local (push), the root's (pull) */
	char root[PATH_MAX]; /* the receiver's root */
	char dst[PATH_MAX];  /* where the tree lands */
	char old[PATH_MAX];  /* --resume: what was there before */
	char dest_arg[PATH_MAX];
	char src_args[2][PATH_MAX];
	const char *srcs[2];
	FILE *list; /* SC_LIST: the names, read again by each session */
	struct xfer_opts co, so;
	/* per session */
	bool reported_ok[NTREE]; /* done, status 0, on the client */
};

struct side {
	struct ctx *x;
	bool server;
	struct cm_conn *c;
	int rootfd;
	enum xfer_fail v;
	struct xfer_stats st;
	struct memconn_stats ms;
};

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done_count;

static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct ctx *x = arg;
	const char *base = pulled(x->sc) ? x->dst : x->src;
	size_t bl = strlen(base);

	fi_bypass++;
	if (r->done && !r->status && !strncmp(r->path, base, bl) &&
	    r->path[bl] == '/')
		for (size_t i = 0; i < NTREE; i++)
			if (!strcmp(r->path + bl + 1, tree[i].rel))
				x->reported_ok[i] = true;
	fi_bypass--;
}

static void *side_main(void *p)
{
	struct side *s = p;

	if (s->server)
		s->v = session_serve(&s->x->so, s->rootfd, s->c);
	else
		s->v = session_client(&s->x->co, s->c, &s->st);
	/* As a process would: hang up once the session is over. */
	fi_bypass++;
	memconn_get_stats(s->c, &s->ms);
	cm_conn_destroy(s->c);
	pthread_mutex_lock(&done_lock);
	done_count++;
	pthread_cond_broadcast(&done_cond);
	pthread_mutex_unlock(&done_lock);
	return NULL;
}

static void ctx_init(struct ctx *x, enum scenario sc)
{
	struct xfer_opts *co = &x->co, *so = &x->so;

	memset(x, 0, sizeof(*x));
	x->sc = sc;
	strcpy(x->work, "/tmp/rdcp-test-fault.XXXXXX");
	CHECK(mkdtemp(x->work) != NULL);
	snprintf(x->src, sizeof(x->src), "%s/src", x->work);
	snprintf(x->old, sizeof(x->old), "%s/old", x->work);
	CHECK_EQ(mkdir(x->src, 0755), 0);
	CHECK_EQ(make_tree(x->src), 0);

	xfer_opts_init(co);
	co->link.chunk_size = CHUNK;
	co->link.window = WINDOW;
	co->link.workers = 2;
	co->link.timeout_ms = TIMEOUT_MS;
	co->copy.recursive = true;
	co->copy.on_file = on_file;
	co->copy.on_file_arg = x;
	if (pulled(sc)) {
		/* The receiver's root holds the tree; it lands here. */
		snprintf(x->root, sizeof(x->root), "%s", x->src);
		snprintf(x->dst, sizeof(x->dst), "%s/dst/out", x->work);
		snprintf(x->dest_arg, sizeof(x->dest_arg), "%s/", x->dst);
		snprintf(x->src_args[0], PATH_MAX, "t");
		snprintf(x->src_args[1], PATH_MAX, "top");
		co->copy.pull = true;
		co->copy.csum = XFER_CSUM_SHA256;
		co->copy.preserve = true;
		co->link.poll = XFER_POLL_EVENT;
	} else {
		snprintf(x->root, sizeof(x->root), "%s/root", x->work);
		snprintf(x->dst, sizeof(x->dst), "%s/out", x->root);
		snprintf(x->dest_arg, sizeof(x->dest_arg), "out/");
		snprintf(x->src_args[0], PATH_MAX, "%s/t", x->src);
		snprintf(x->src_args[1], PATH_MAX, "%s/top", x->src);
		co->copy.fsync = sc == SC_PUSH;
		co->copy.resume = sc == SC_RESUME;
		co->copy.delete_extra = sc == SC_DELETE;
		co->link.poll =
			sc == SC_PUSH ? XFER_POLL_ADAPTIVE : XFER_POLL_EVENT;
	}
	x->srcs[0] = x->src_args[0];
	x->srcs[1] = x->src_args[1];
	co->copy.srcs = x->srcs;
	co->copy.nsrcs = 2;
	if (sc == SC_LIST) {
		static const char names[] = "t\ntop\n";

		/* Beneath the root itself: the same names land. */
		x->src_args[0][0] = '\0';
		co->copy.nsrcs = 1;
		x->list = fmemopen((void *)names, sizeof(names) - 1, "r");
		CHECK(x->list != NULL);
		co->copy.files_from = x->list;
	}
	co->copy.dest = x->dest_arg;
	*so = *co;
	so->copy.srcs = NULL;
	so->copy.nsrcs = 0;
	so->copy.dest = NULL;
	so->copy.on_file = NULL;
	so->serve.root = x->root;
	if (sc == SC_RESUME) {
		/*
		 * What an earlier attempt left: two chunks of a in its
		 * temporary, an old c of the same size but other bytes, d
		 * whole and right.
		 */
		char p[PATH_MAX];
		int fd;

		CHECK_EQ(mkdir(x->old, 0755), 0);
		snprintf(p, sizeof(p), "%s/t", x->old);
		CHECK_EQ(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/t/sub", x->old);
		CHECK_EQ(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/t/.a.rdcp-part", x->old);
		CHECK_EQ(tf_make_file(p, tree[E_A].size, tree[E_A].seed), 0);
		fd = open(p, O_WRONLY | O_CLOEXEC);
		CHECK(fd >= 0 && ftruncate(fd, 2 * CHUNK) == 0);
		if (fd >= 0)
			close(fd);
		snprintf(p, sizeof(p), "%s/t/sub/c", x->old);
		CHECK_EQ(tf_make_file(p, tree[E_C].size, 99), 0);
		snprintf(p, sizeof(p), "%s/t/sub/d", x->old);
		CHECK_EQ(tf_make_file(p, tree[E_D].size, tree[E_D].seed), 0);
	}
}

static int copy_file(const char *from, const char *to)
{
	static char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;
	int rc = 0;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			rc = -1;
	if (n < 0)
		rc = -1;
	close(in);
	return close(out) || rc ? -1 : 0;
}

/* A fresh destination: empty, or with what --resume is to find. */
static int fresh_dest(struct ctx *x)
{
	static const char *const seeded[] = { "t/.a.rdcp-part", "t/sub/c",
					      "t/sub/d" };
	char p[PATH_MAX], q[PATH_MAX];
	struct stat st;

	if (stat(x->dst, &st) == 0 && tf_rm_tree(x->dst))
		return -1;
	if (pulled(x->sc)) {
		snprintf(p, sizeof(p), "%s/dst", x->work);
		return stat(p, &st) == 0 || mkdir(p, 0755) == 0 ? 0 : -1;
	}
	if (stat(x->root, &st) && mkdir(x->root, 0755))
		return -1;
	if (x->sc == SC_DELETE) {
		snprintf(p, sizeof(p), "%s/t/old/deep", x->dst);
		if (path_mkdirs_local(p, 0755))
			return -1;
		snprintf(p, sizeof(p), "%s/t/sub", x->dst);
		if (path_mkdirs_local(p, 0755))
			return -1;
		for (size_t i = 0; i < NEXTRA; i++) {
			int rc = 0;

			snprintf(p, sizeof(p), "%s/%s", x->dst, extra[i]);
			if (!strcmp(extra[i], "t/ln"))
				rc = symlink(x->work, p); /* never followed */
			else if (strncmp(extra[i], "t/old", 5) ||
				 !strcmp(extra[i], "t/old/deep/z"))
				rc = tf_make_file(p, 10, i);
			if (rc)
				return -1;
		}
		return 0;
	}
	if (x->sc != SC_RESUME)
		return 0;
	snprintf(p, sizeof(p), "%s/t/sub", x->dst);
	if (mkdir(x->dst, 0755) || path_mkdirs_local(p, 0755))
		return -1;
	for (size_t i = 0; i < sizeof(seeded) / sizeof(seeded[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", x->old, seeded[i]);
		snprintf(q, sizeof(q), "%s/%s", x->dst, seeded[i]);
		if (copy_file(p, q))
			return -1;
	}
	return 0;
}

/* Counts the receiver's temporaries (".NAME.rdcp-part") under dir. */
static int count_temps(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			n += count_temps(sub);
			continue;
		}
		if (de->d_name[0] == '.' && len > 10 &&
		    !strcmp(de->d_name + len - 10, ".rdcp-part"))
			n++;
	}
	closedir(d);
	return n;
}

enum placed {
	P_ABSENT,
	P_RIGHT,
	P_OLD,
	P_WRONG
};

/* What entry i is in the destination under its final name. */
static enum placed placed(const struct ctx *x, size_t i)
{
	const struct entry *e = &tree[i];
	char d[PATH_MAX], s[PATH_MAX], l[PATH_MAX];
	struct stat st;
	ssize_t n;

	snprintf(d, sizeof(d), "%s/%s", x->dst, e->rel);
	if (lstat(d, &st))
		return errno == ENOENT ? P_ABSENT : P_WRONG;
	switch (e->kind) {
	case 'd':
		return S_ISDIR(st.st_mode) ? P_RIGHT : P_WRONG;
	case 'l':
		n = readlink(d, l, sizeof(l) - 1);
		if (!S_ISLNK(st.st_mode) || n < 0)
			return P_WRONG;
		l[n] = '\0';
		return strcmp(l, e->link) ? P_WRONG : P_RIGHT;
	default:
		if (!S_ISREG(st.st_mode))
			return P_WRONG;
		snprintf(s, sizeof(s), "%s/%s", x->src, e->rel);
		if (tf_same_file(s, d) == 1)
			return P_RIGHT;
		snprintf(s, sizeof(s), "%s/%s", x->old, e->rel);
		if (x->sc == SC_RESUME && tf_same_file(s, d) == 1)
			return P_OLD; /* untouched by a failed session */
		return P_WRONG;
	}
}

/*
 * The open descriptors and what each is, from /proc/self/fd: a count
 * alone would miss a descriptor closed by mistake and then reused.
 */
struct fdsnap {
	int n;
	int fd[128];
	char what[128][96];
};

static void fd_snap(struct fdsnap *s)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	s->n = 0;
	if (!d)
		return;
	while ((de = readdir(d)) && s->n < 128) {
		char p[64];
		int fd = atoi(de->d_name);
		ssize_t len;

		if (de->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		len = readlink(p, s->what[s->n], sizeof(s->what[0]) - 1);
		s->what[s->n][len > 0 ? len : 0] = '\0';
		s->fd[s->n++] = fd;
	}
	closedir(d);
}

static const char *fd_what(const struct fdsnap *s, int fd)
{
	for (int i = 0; i < s->n; i++)
		if (s->fd[i] == fd)
			return s->what[i];
	return NULL;
}

/* Describes the differences into out; true if there are none. */
static bool fd_same(const struct fdsnap *before, const struct fdsnap *after,
		    char *out, size_t outsz)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < before->n && n < outsz; i++) {
		const char *now = fd_what(after, before->fd[i]);

		if (!now || strcmp(now, before->what[i]))
			n += (size_t)snprintf(
				out + n, outsz - n, " fd %d (%s) %s%s",
				before->fd[i], before->what[i],
				now ? "is now " : "was closed", now ? now : "");
	}
	for (int i = 0; i < after->n && n < outsz; i++)
		if (!fd_what(before, after->fd[i]))
			n += (size_t)snprintf(out + n, outsz - n,
					      " fd %d (%s) leaked",
					      after->fd[i], after->what[i]);
	return out[0] == '\0';
}

/* Puts stdin/stdout/stderr back if the product closed one of them. */
static void fd_restore(const struct fdsnap *before)
{
	for (int fd = 0; fd <= 2; fd++) {
		const char *was = fd_what(before, fd);
		int nfd;

		if (!was || fcntl(fd, F_GETFD) >= 0)
			continue;
		nfd = open(was[0] == '/' ? was : "/dev/null",
			   fd ? O_WRONLY | O_APPEND : O_RDONLY);
		if (nfd >= 0 && nfd != fd) {
			dup2(nfd, fd);
			close(nfd);
		}
	}
}

struct result {
	enum xfer_fail vc, vs;
	bool hit;
	const char *hit_name;
	void *hit_ra;
	uint64_t calls;
	double seconds;
	uint64_t violations;
};

/*
 * Runs the session with call nth of kind failing (of those made from site,
 * if set); nth 0 fails nothing.
 */
static void run_one(struct ctx *x, enum fault_kind kind, uint64_t nth,
		    void *site, struct result *r)
{
	const struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = WINDOW,
		.chunk_size = CHUNK,
	};
	struct side cl = { .x = x, .rootfd = -1 }, sv = { .x = x };
	struct cm_conn *a = NULL, *b = NULL;
	pthread_t tc, ts;
	struct timespec deadline;
	double t0;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	memset(x->reported_ok, 0, sizeof(x->reported_ok));
	if (x->list)
		rewind(x->list);
	sv.server = true;
	sv.rootfd = open(x->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(sv.rootfd >= 0);
	CHECK_EQ(memconn_pair(&g, NULL, &a, &b), 0);
	if (!a || !b || sv.rootfd < 0)
		abort();
	mc_ops = a->ops;
	a->ops = b->ops = &fault_ops;
	cl.c = a;
	sv.c = b;

	fi_nth = nth;
	fi_site = site;
	atomic_store(&fi_calls, 0);
	atomic_store(&fi_hits, 0);
	fi_hit_name = NULL;
	fi_hit_ra = NULL;
	done_count = 0;
	atomic_store(&fi_kind, (int)kind);
	t0 = clock_now_s();
	CHECK_EQ(pthread_create(&ts, NULL, side_main, &sv), 0);
	CHECK_EQ(pthread_create(&tc, NULL, side_main, &cl), 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += HANG_S;
	pthread_mutex_lock(&done_lock);
	while (done_count < 2 && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&done_cond, &done_lock, &deadline);
	pthread_mutex_unlock(&done_lock);
	if (rc == ETIMEDOUT) {
		char where[600];

		describe_site(fi_hit_name, fi_hit_ra, where, sizeof(where));
		printf("not ok - %s/%s N=%llu%s: HANG, the session still runs "
		       "after %d s (%s); aborting\n",
		       scenario_names[x->sc], kind_names[kind],
		       (unsigned long long)nth, site ? " (site-directed)" : "",
		       HANG_S, where);
		fflush(stdout);
		abort();
	}
	pthread_join(tc, NULL);
	pthread_join(ts, NULL);
	atomic_store(&fi_kind, FK_NONE);
	r->seconds = clock_now_s() - t0;
	close(sv.rootfd);
	r->vc = cl.v;
	r->vs = sv.v;
	r->hit = atomic_load(&fi_hits) != 0;
	r->hit_name = fi_hit_name;
	r->hit_ra = fi_hit_ra;
	r->calls = atomic_load(&fi_calls);
	/* The side that hung up last saw every operation. */
	r->violations = memconn_violations(&cl.ms) > memconn_violations(&sv.ms)
				? memconn_violations(&cl.ms)
				: memconn_violations(&sv.ms);
}

/* ---- the loops ---- */

struct tally {
	uint64_t sessions, hits, failed;
	uint64_t vc[XFER_FAIL_CANCELED + 1], vs[XFER_FAIL_CANCELED + 1];
	void *sites[MAX_SITES];
	unsigned int nsites;
	double slowest;
	char slowest_label[32];
};

static void note_site(struct tally *t, void *ra)
{
	for (unsigned int i = 0; i < t->nsites; i++)
		if (t->sites[i] == ra)
			return;
	if (t->nsites < sizeof(t->sites) / sizeof(t->sites[0]))
		t->sites[t->nsites++] = ra;
}

static bool valid(enum xfer_fail v)
{
	/* nobody cancels here; anything else is a verdict */
	return v >= XFER_OK && v < XFER_FAIL_CANCELED;
}

static bool leak_seen;

/* Appends to a failure description, cut at its end. */
static void why_add(char *why, size_t sz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void why_add(char *why, size_t sz, const char *fmt, ...)
{
	size_t len = strlen(why);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why + len, sz - len, fmt, ap);
	va_end(ap);
}

/* Every check of one session; prints what failed. False on failure. */
static bool check_one(struct ctx *x, enum fault_kind kind, const char *label,
		      const struct result *r, const struct fdsnap *fds_before,
		      bool loud)
{
	char why[2048] = "", site[600], fdiff[600];
	struct fdsnap fds;
	int temps;

#define WHY(...) why_add(why, sizeof(why), __VA_ARGS__)

	if (!valid(r->vc) || !valid(r->vs))
		WHY(" [verdict out of range]");
	if (!r->hit && (r->vc != XFER_OK || r->vs != XFER_OK))
		WHY(" [failed with nothing injected]");
	if (r->vc == XFER_OK && r->vs == XFER_OK && r->violations)
		WHY(" [%llu memconn violations]",
		    (unsigned long long)r->violations);
	for (size_t i = 0; i < NTREE; i++) {
		enum placed p = placed(x, i);
		bool must = r->vc == XFER_OK || x->reported_ok[i];

		/* Also proves the reports are matched to the entries. */
		if (!r->hit && !x->reported_ok[i])
			WHY(" [%s not reported copied]", tree[i].rel);
		if (p == P_WRONG)
			WHY(" [%s placed wrong]", tree[i].rel);
		else if (must && p != P_RIGHT)
			WHY(" [%s %s, but %s]", tree[i].rel,
			    p == P_ABSENT ? "missing" : "the old one",
			    x->reported_ok[i] ? "reported copied"
					      : "the client said OK");
	}
	if (x->sc == SC_DELETE) {
		bool whole = true;
		size_t left = 0;
		char p[PATH_MAX];
		struct stat st;

		for (size_t i = 0; i < NTREE; i++)
			whole = whole && placed(x, i) == P_RIGHT;
		for (size_t i = 0; i < NEXTRA; i++) {
			snprintf(p, sizeof(p), "%s/%s", x->dst, extra[i]);
			left += lstat(p, &st) == 0;
		}
		if (!whole && left != NEXTRA)
			WHY(" [%zu of %zu extra entries deleted, but the tree "
			    "is not whole]",
			    NEXTRA - left, NEXTRA);
		if (r->vc == XFER_OK && r->vs == XFER_OK && left)
			WHY(" [%zu extra entries left by a good session]",
			    left);
	}
	temps = count_temps(x->dst);
	if (x->sc != SC_RESUME && temps)
		WHY(" [%d temporaries left]", temps);
	fd_snap(&fds);
	if (!fd_same(fds_before, &fds, fdiff, sizeof(fdiff))) {
		WHY(" [%d fds before, %d after:%s]", fds_before->n, fds.n,
		    fdiff);
		fd_restore(fds_before);
	}
	/*
	 * LeakSanitizer reports a leak again at every later check: after
	 * the first, later ones are left to its report at exit.
	 */
	if (!leak_seen && __lsan_do_recoverable_leak_check &&
	    __lsan_do_recoverable_leak_check()) {
		leak_seen = true;
		WHY(" [leaks: LeakSanitizer's report is on stderr; later "
		    "leaks are reported at exit only]");
	}
#undef WHY
	describe_site(r->hit_name, r->hit_ra, site, sizeof(site));
	if (why[0] && loud)
		printf("#   %s/%s %s (%s): client %s, server %s:%s\n",
		       scenario_names[x->sc], kind_names[kind], label, site,
		       xfer_fail_name(r->vc), xfer_fail_name(r->vs), why);
	else if (verbose)
		printf("#   %s/%s %s (%s): client %s, server %s, %.3f s\n",
		       scenario_names[x->sc], kind_names[kind], label, site,
		       xfer_fail_name(r->vc), xfer_fail_name(r->vs),
		       r->seconds);
	return !why[0];
}

static void print_verdicts(const char *who, const uint64_t *v)
{
	char buf[512];
	size_t n = 0;

	for (int i = 0; i <= XFER_FAIL_CANCELED; i++)
		if (v[i] && n < sizeof(buf))
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      " %s %llu",
					      xfer_fail_name((enum xfer_fail)i),
					      (unsigned long long)v[i]);
	buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
	printf("#     %s verdicts:%s\n", who, buf);
}

static uint64_t next_n(enum fault_kind kind, uint64_t n)
{
	if (kind == FK_POLL && n >= 8)
		return n + n / 2;
	return n + 1;
}

/* RDCP_TEST_FAULT=SCENARIO/KIND[:N]: that loop alone, or its N alone. */
static bool selected(enum scenario sc, enum fault_kind kind, uint64_t *from,
		     bool *once)
{
	const char *want = getenv("RDCP_TEST_FAULT");
	char name[32];
	size_t len;

	*from = 1;
	*once = false;
	if (!want || !*want)
		return true;
	len = (size_t)snprintf(name, sizeof(name), "%s/%s", scenario_names[sc],
			       kind_names[kind]);
	if (strncmp(want, name, len) || (want[len] && want[len] != ':'))
		return false;
	if (want[len] == ':') {
		*from = strtoull(want + len + 1, NULL, 10);
		*once = true;
	}
	return true;
}

/*
 * One session and every check on it, counted into t. nth 0: a recording
 * session (nothing fails, every call site of kind is noted). Returns
 * whether a fault was injected.
 */
static bool session(struct ctx *x, struct tally *t, enum fault_kind kind,
		    uint64_t nth, void *site)
{
	struct fdsnap fds;
	struct result r;
	char label[32];

	if (fresh_dest(x)) {
		printf("#   cannot prepare %s\n", x->dst);
		CHECK(0);
		return false;
	}
	fd_snap(&fds);
	fi_recording = nth == 0;
	run_one(x, kind, nth, site, &r);
	fi_recording = false;
	t->sessions++;
	t->vc[(unsigned int)r.vc <= XFER_FAIL_CANCELED ? r.vc
						       : XFER_FAIL_INTERNAL]++;
	t->vs[(unsigned int)r.vs <= XFER_FAIL_CANCELED ? r.vs
						       : XFER_FAIL_INTERNAL]++;
	if (site)
		snprintf(label, sizeof(label), "site-directed");
	else if (nth)
		snprintf(label, sizeof(label), "N=%llu",
			 (unsigned long long)nth);
	else
		snprintf(label, sizeof(label), "recording");
	if (r.seconds > t->slowest) {
		t->slowest = r.seconds;
		snprintf(t->slowest_label, sizeof(t->slowest_label), "%s",
			 label);
	}
	if (!check_one(x, kind, label, &r, &fds, t->failed < MAX_REPORTS)) {
		t->failed++;
		tap_failed_checks++; /* the line above says why */
	}
	if (r.hit) {
		t->hits++;
		note_site(t, r.hit_ra);
	}
	return r.hit;
}

static void loop(enum scenario sc, enum fault_kind kind)
{
	const char *sn = scenario_names[sc], *kn = kind_names[kind];
	struct ctx *x;
	struct tally t;
	uint64_t n, from, looped, directed = 0;
	unsigned int loop_sites;
	char missed[1024] = "";
	size_t ml = 0;
	bool once;

	if (!selected(sc, kind, &from, &once)) {
		printf("#   %s/%s: not selected (RDCP_TEST_FAULT)\n", sn, kn);
		return;
	}
	x = malloc(sizeof(*x));
	if (!x)
		abort();
	memset(&t, 0, sizeof(t));
	ctx_init(x, sc);
	/* N = 1, 2, ...: until N is past the last call, all were failed. */
	for (n = from; session(x, &t, kind, n, NULL) && !once;)
		n = next_n(kind, n);
	looped = t.sessions;
	loop_sites = t.nsites;
	printf("#   %s/%s: N = %llu..%llu looped (%llu sessions), %llu "
	       "faults injected at %u call sites%s\n",
	       sn, kn, (unsigned long long)from, (unsigned long long)n,
	       (unsigned long long)looped, (unsigned long long)t.hits,
	       loop_sites, kind == FK_POLL ? " (N geometric past 8)" : "");
	/*
	 * The threads of both sides race, so which call is the Nth varies
	 * from run to run: a call site the loop happened to miss (seen in a
	 * recording session) gets a session of its own, failing its first
	 * call.
	 */
	if (!once) {
		rec_n = 0;
		session(x, &t, kind, 0, NULL);
		for (unsigned int i = 0; i < rec_n; i++) {
			bool seen = false;
			char site[600];

			for (unsigned int k = 0; k < t.nsites; k++)
				seen = seen || t.sites[k] == rec_ra[i];
			if (seen)
				continue;
			directed++;
			session(x, &t, kind, 1, rec_ra[i]);
			describe_site(rec_name[i], rec_ra[i], site,
				      sizeof(site));
			if (ml < sizeof(missed))
				ml += (size_t)snprintf(
					missed + ml, sizeof(missed) - ml,
					"%s%s", ml ? "; " : "", site);
		}
		printf("#     %u call sites in a clean session; %llu the "
		       "loop missed, failed once each%s%s\n",
		       rec_n, (unsigned long long)directed,
		       directed ? ": " : "", missed);
	}
	printf("#     slowest session %.2f s (%s)\n", t.slowest,
	       t.slowest_label);
	print_verdicts("client", t.vc);
	print_verdicts("server", t.vs);
	if (t.failed)
		printf("#   %s/%s: %llu of %llu sessions failed a check\n", sn,
		       kn, (unsigned long long)t.failed,
		       (unsigned long long)t.sessions);
	/* A kind that never fired means the wrapping is broken. */
	if (!t.hits)
		printf("#   %s/%s: nothing was injected: is the binary linked "
		       "with --wrap (Makefile, FAULT_WRAP)?\n",
		       sn, kn);
	CHECK(t.hits > 0);
	CHECK_EQ(tf_rm_tree(x->work), 0);
	if (x->list)
		fclose(x->list);
	free(x);
}

/* ---- tests ---- */

static void test_delete_alloc(void)
{
	loop(SC_DELETE, FK_ALLOC);
}

static void test_delete_open(void)
{
	loop(SC_DELETE, FK_OPEN);
}

static void test_delete_io(void)
{
	loop(SC_DELETE, FK_IO);
}

static void test_push_alloc(void)
{
	loop(SC_PUSH, FK_ALLOC);
}

static void test_push_open(void)
{
	loop(SC_PUSH, FK_OPEN);
}

static void test_push_io(void)
{
	loop(SC_PUSH, FK_IO);
}

static void test_push_verbs(void)
{
	loop(SC_PUSH, FK_VERBS);
}

static void test_push_poll(void)
{
	loop(SC_PUSH, FK_POLL);
}

static void test_pull_alloc(void)
{
	loop(SC_PULL, FK_ALLOC);
}

static void test_pull_open(void)
{
	loop(SC_PULL, FK_OPEN);
}

static void test_pull_io(void)
{
	loop(SC_PULL, FK_IO);
}

static void test_pull_verbs(void)
{
	loop(SC_PULL, FK_VERBS);
}

static void test_pull_poll(void)
{
	loop(SC_PULL, FK_POLL);
}

static void test_list_alloc(void)
{
	loop(SC_LIST, FK_ALLOC);
}

static void test_list_open(void)
{
	loop(SC_LIST, FK_OPEN);
}

static void test_list_io(void)
{
	loop(SC_LIST, FK_IO);
}

static void test_list_verbs(void)
{
	loop(SC_LIST, FK_VERBS);
}

static void test_list_poll(void)
{
	loop(SC_LIST, FK_POLL);
}

static void test_resume_alloc(void)
{
	loop(SC_RESUME, FK_ALLOC);
}

static void test_resume_open(void)
{
	loop(SC_RESUME, FK_OPEN);
}

static void test_resume_io(void)
{
	loop(SC_RESUME, FK_IO);
}

static void test_resume_verbs(void)
{
	loop(SC_RESUME, FK_VERBS);
}

static void test_resume_poll(void)
{
	loop(SC_RESUME, FK_POLL);
}

int main(int argc, char **argv)
{
	static const struct tap_test t[] = {
		TAP_TEST(test_push_alloc),   TAP_TEST(test_push_open),
		TAP_TEST(test_push_io),	     TAP_TEST(test_push_verbs),
		TAP_TEST(test_push_poll),    TAP_TEST(test_pull_alloc),
		TAP_TEST(test_pull_open),    TAP_TEST(test_pull_io),
		TAP_TEST(test_pull_verbs),   TAP_TEST(test_pull_poll),
		TAP_TEST(test_list_alloc),   TAP_TEST(test_list_open),
		TAP_TEST(test_list_io),	     TAP_TEST(test_list_verbs),
		TAP_TEST(test_list_poll),
		TAP_TEST(test_resume_alloc), TAP_TEST(test_resume_open),
		TAP_TEST(test_resume_io),    TAP_TEST(test_resume_verbs),
		TAP_TEST(test_resume_poll),  TAP_TEST(test_delete_alloc),
		TAP_TEST(test_delete_open),  TAP_TEST(test_delete_io),
	};

	/* Test code never fails a call, in this thread at all. */
	fi_bypass = 1;
	return tap_main(t, sizeof(t) / sizeof(t[0]), argc, argv);
}
