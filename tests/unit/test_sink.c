/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's bounds and the names it opens, over the in-memory transport
 * (memconn.h): a receiver (session_serve) in a thread, and in this one an
 * honest client (session_client) or a hostile one written against the
 * engine. A source may have WIRE_INFLIGHT_MAX regular files in flight and
 * no more: the honest one keeps to that, a FILE beyond it ends the session
 * as a protocol error, and the receiver holds no descriptor afterwards. A
 * FIFO where the sink looks (--resume, at the final name or the
 * temporary's, or a pull's local DEST) never blocks it. Two long names
 * sharing a long prefix get two temporaries. Directories are kept only
 * while the walk lists them or something beneath them is in flight: a
 * flood of them costs no memory, an entry beneath one already finished is
 * a protocol error, and -p still gives each its mode and times last. A
 * slot header may not claim more than a slot holds.
 */
#include "tap.h"

#include "memconn.h"
#include "testfs.h"
#include "transfer/session/engine.h"
#include "transfer/session/session.h"
#include "transfer/sink/sink_int.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/aclid.h"
#include "util/checksum.h"
#include "util/clock.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
/* ASan's own allocator (sanitizer/allocator_interface.h, not always there) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define CHUNK 4096u
#define WATCHDOG_S 60 /* a hung session kills the binary: a failure */

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* ---- a receiver in a thread, over one end of a memconn pair ---- */

struct rx {
	struct xfer_opts o;
	int rootfd;
	struct cm_conn *a, *b; /* client's end, receiver's end */
	pthread_t tid;
	enum xfer_fail v;
};

static void *rx_main(void *p)
{
	struct rx *r = p;

	r->v = session_serve(&r->o, r->rootfd, r->b);
	return NULL;
}

static void client_opts(struct xfer_opts *o, uint16_t window)
{
	xfer_opts_init(o);
	o->link.chunk_size = CHUNK;
	o->link.window = window;
	o->link.workers = 2;
	o->link.timeout_ms = 5000;
}

/* The next receivers run with --allow-owners, --allow-devices. */
static bool rx_allow_owners, rx_allow_devices;

/* Starts a receiver rooted at root; the client's end is r->a. */
static int rx_start(struct rx *r, const char *root, uint16_t window)
{
	const struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = window,
		.chunk_size = CHUNK,
	};

	memset(r, 0, sizeof(*r));
	client_opts(&r->o, window);
	r->o.serve.root = root;
	r->o.serve.allow_owners = rx_allow_owners;
	r->o.serve.allow_devices = rx_allow_devices;
	r->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r->rootfd < 0 || memconn_pair(&g, NULL, &r->a, &r->b))
		return -1;
	alarm(WATCHDOG_S);
	return pthread_create(&r->tid, NULL, rx_main, r) ? -1 : 0;
}

static enum xfer_fail rx_stop(struct rx *r)
{
	cm_conn_destroy(r->a);
	pthread_join(r->tid, NULL);
	alarm(0);
	cm_conn_destroy(r->b);
	close(r->rootfd);
	return r->v;
}

/* An honest session with co against a receiver rooted at root. */
static enum xfer_fail honest(const char *root, struct xfer_opts *co,
			     enum xfer_fail *vs, struct xfer_stats *st)
{
	struct rx r;
	enum xfer_fail vc;

	memset(st, 0, sizeof(*st));
	CHECK_EQ(rx_start(&r, root, co->link.window), 0);
	vc = session_client(co, r.a, st);
	*vs = rx_stop(&r);
	return vc;
}

static void mkdtemp_or_fail(char *tmpl)
{
	CHECK(mkdtemp(tmpl) != NULL);
}

/*
 * A hostile client's start, written against the engine (*e, over r): a
 * receiver rooted at root with a window of 8, a push HELLO into "out/"
 * with DEST_DIR, flags and features, its WELCOME and the rings. 0, or
 * what failed (a failed check already).
 */
static int hostile_hello(struct rx *r, struct engine *e, const char *root,
			 uint32_t flags, uint32_t features)
{
	struct wire_msg m;
	int rc;

	CHECK_EQ(rx_start(r, root, 8), 0);
	CHECK_EQ(engine_init(e, r->a, &r->o), 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.u.hello.role = WIRE_PUSH;
	m.u.hello.csum = XFER_CSUM_CRC32;
	m.u.hello.flags = WIRE_HELLO_DEST_DIR | flags;
	m.u.hello.features = features;
	m.u.hello.chunk_size = CHUNK;
	CHECK_EQ(wire_hello_add_path(&m.u.hello, "out/"), 0);
	rc = engine_send(e, &m);
	if (!rc)
		rc = engine_expect(e, WIRE_WELCOME, &m, 5000);
	if (!rc)
		rc = session_rings(e, false);
	CHECK_EQ(rc, 0);
	return rc;
}

static void path_in(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* ---- files in flight ---- */

/*
 * A hostile client: announces nfiles regular files into "out/" and never
 * ends one. Returns what ended its session; the peer's words in why.
 */
static int flood(const char *root, uint32_t nfiles, uint32_t flags,
		 enum xfer_fail *vs, char *why, size_t whysz, uint32_t *haves)
{
	struct wire_msg m;
	struct engine e;
	struct rx r;
	int rc;

	rc = hostile_hello(&r, &e, root, flags, WIRE_FEAT_PACK);
	for (uint32_t i = 0; !rc && i < nfiles; i++) {
		memset(&m, 0, sizeof(m));
		m.type = WIRE_FILE;
		m.u.file.file_id = i;
		m.u.file.kind = WIRE_KIND_FILE;
		m.u.file.size = 1;
		m.u.file.mode = 0644;
		snprintf(m.u.file.path, sizeof(m.u.file.path), "f%u", i);
		rc = engine_send(&e, &m);
	}
	/* Asked first (-n): each is answered, wanted; until refused. */
	while (!rc && session_asks(&(struct session_params){ .flags = flags }))
		if (!(rc = engine_expect(&e, WIRE_HAVE, &m, 10000)))
			++*haves;
	/* Old receivers say nothing: they wait for FILE_END forever. */
	if (!rc)
		rc = engine_expect(&e, WIRE_BYE, &m, 10000);
	snprintf(why, whysz, "%s", e.why);
	engine_release(&e);
	*vs = rx_stop(&r);
	return rc;
}

/*
 * 5000 files announced and never ended, under a tight descriptor limit:
 * the receiver refuses the session as a protocol error (not one failure
 * per file once descriptors run out), holds nothing afterwards, and an
 * honest copy right after goes through.
 */
static void test_inflight_flood(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char why[600], p[4200];
	const char *srcs[1];
	struct rlimit old, tight;
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	int fds = tf_count_fds();

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(src);
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	tight = old;
	tight.rlim_cur = (rlim_t)fds + 200; /* as with `ulimit -n 256` */
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);

	CHECK(flood(root, 5000, 0, &vs, why, sizeof(why), NULL) != 0);
	CHECK_EQ(vs, XFER_FAIL_PROTOCOL);
	if (!strstr(why, "unfinished"))
		printf("#   the flooding client heard: %s\n", why);
	CHECK(strstr(why, "unfinished") != NULL);
	CHECK_EQ(tf_count_fds(), fds);

	path_in(p, sizeof(p), src, "after");
	CHECK_EQ(tf_make_file(p, 3 * CHUNK + 5, 1), 0);
	srcs[0] = p;
	client_opts(&co, 8);
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	co.copy.dest = "out/";
	vc = honest(root, &co, &vs, &st);
	CHECK_EQ(vc, XFER_OK);
	CHECK_EQ(vs, XFER_OK);
	path_in(why, sizeof(why), root, "out/after");
	CHECK_EQ(tf_same_file(p, why), 1);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/*
 * A session that asks first (-n) keeps the same bound: 128 files
 * announced and wanted are held, the next one is refused as a protocol
 * error naming it, and nothing is left behind. The sink's HAVEs come many
 * to a BATCH, each taken by its own engine_expect(): one role's end
 * leaves the rest of a BATCH to the next (engine.c run()), not stuck
 * until the ERROR (which overtakes what is still held: not every HAVE
 * is counted).
 */
static void test_inflight_flood_asked(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char why[600];
	enum xfer_fail vs;
	uint32_t haves = 0;
	int fds = tf_count_fds();

	mkdtemp_or_fail(root);
	CHECK(flood(root, WIRE_INFLIGHT_MAX + 50, WIRE_HELLO_NO_CLOBBER, &vs,
		    why, sizeof(why), &haves) != 0);
	CHECK_EQ(vs, XFER_FAIL_PROTOCOL);
	if (!strstr(why, "(128 at most)"))
		printf("#   the flooding client heard: %s\n", why);
	CHECK(strstr(why, "(128 at most)") != NULL);
	if (haves < WIRE_INFLIGHT_MAX / 2)
		printf("#   %u HAVEs taken before the refusal\n", haves);
	CHECK(haves >= WIRE_INFLIGHT_MAX / 2);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/*
 * An honest source keeps to the bound on its own: with a window that
 * plans hundreds of files ahead and --resume (every file announced, then
 * asked about, none packed), 3 x WIRE_INFLIGHT_MAX files all arrive.
 */
static void test_inflight_honest(void)
{
	const unsigned int n = 3 * WIRE_INFLIGHT_MAX;
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char p[4200], q[4200], name[32];
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	const char *srcs[1] = { src };
	int fds = tf_count_fds();
	unsigned int same = 0;

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(src);
	for (unsigned int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%04u", i);
		path_in(p, sizeof(p), src, name);
		CHECK_EQ(tf_make_file(p, 1 + i % 7, i), 0);
	}
	client_opts(&co, 512);
	co.copy.recursive = true;
	co.copy.resume = true;
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	co.copy.dest = "out";
	vc = honest(root, &co, &vs, &st);
	CHECK_EQ(vc, XFER_OK);
	CHECK_EQ(vs, XFER_OK);
	CHECK_EQ(st.files_ok, n + 1);
	for (unsigned int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%04u", i);
		path_in(p, sizeof(p), src, name);
		snprintf(q, sizeof(q), "%s/out/%s", root, name);
		same += tf_same_file(p, q) == 1;
	}
	CHECK_EQ(same, n);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/* ---- FIFOs where the sink looks ---- */

/* --resume push of "f" into out/, where out/<at> is a FIFO. */
static void resume_onto_fifo(const char *at, bool placed)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char p[4200], q[4200];
	const char *srcs[1];
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	struct stat sb;
	int fds = tf_count_fds();
	double t0;

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(src);
	path_in(p, sizeof(p), src, "f");
	CHECK_EQ(tf_make_file(p, 2 * CHUNK + 1, 3), 0);
	snprintf(q, sizeof(q), "%s/out", root);
	CHECK_EQ(mkdir(q, 0755), 0);
	snprintf(q, sizeof(q), "%s/out/%s", root, at);
	CHECK_EQ(mkfifo(q, 0644), 0);
	srcs[0] = p;
	client_opts(&co, 4);
	co.copy.resume = true;
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	co.copy.dest = "out/";
	t0 = clock_now_s();
	vc = honest(root, &co, &vs, &st);
	CHECK(clock_now_s() - t0 < 10);
	CHECK_EQ(vs, placed ? XFER_OK : XFER_FAIL_LOCAL_IO);
	snprintf(q, sizeof(q), "%s/out/f", root);
	if (placed) {
		/* No candidate: copied whole, over it, as without --resume */
		CHECK_EQ(vc, XFER_OK);
		CHECK_EQ(tf_same_file(p, q), 1);
	} else {
		/* Someone else's temporary: the file fails, the FIFO stays. */
		CHECK_EQ(vc, XFER_FAIL_REMOTE_IO);
		CHECK_EQ(st.files_failed, 1);
		CHECK(lstat(q, &sb) < 0);
		snprintf(q, sizeof(q), "%s/out/%s", root, at);
		CHECK(lstat(q, &sb) == 0 && S_ISFIFO(sb.st_mode));
	}
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void test_fifo_at_final_name(void)
{
	resume_onto_fifo("f", true);
}

static void test_fifo_at_temporary(void)
{
	resume_onto_fifo(".f.rdcp-part", false);
}

/* A --resume pull whose local DEST is a FIFO. */
static void test_fifo_pull_dest(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char here[] = "/tmp/rdcp-test-dest.XXXXXX";
	char p[4200], q[4200];
	const char *srcs[1] = { "f" };
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	int fds = tf_count_fds();
	double t0;

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(here);
	path_in(p, sizeof(p), root, "f");
	CHECK_EQ(tf_make_file(p, 2 * CHUNK + 1, 4), 0);
	path_in(q, sizeof(q), here, "fifo");
	CHECK_EQ(mkfifo(q, 0644), 0);
	client_opts(&co, 4);
	co.copy.pull = true;
	co.copy.resume = true;
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	co.copy.dest = q;
	t0 = clock_now_s();
	vc = honest(root, &co, &vs, &st);
	CHECK(clock_now_s() - t0 < 10);
	CHECK_EQ(vc, XFER_OK);
	CHECK_EQ(vs, XFER_OK);
	CHECK_EQ(tf_same_file(p, q), 1);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(here), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/* ---- long names ---- */

/* Two 244-byte names that share their first 200 bytes. */
static void long_names(char a[256], char b[256])
{
	memset(a, 'n', 244);
	a[244] = '\0';
	memcpy(b, a, 245);
	memcpy(a + 200, "-the-first", 10);
	memcpy(b + 200, "-the-other", 10);
}

static void test_long_names_push(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char a[256], b[256], p[2][4200], q[4200];
	const char *srcs[2] = { p[0], p[1] };
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	int fds = tf_count_fds();

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(src);
	long_names(a, b);
	path_in(p[0], sizeof(p[0]), src, a);
	path_in(p[1], sizeof(p[1]), src, b);
	CHECK_EQ(tf_make_file(p[0], 5 * CHUNK + 1, 5), 0);
	CHECK_EQ(tf_make_file(p[1], 5 * CHUNK + 2, 6), 0);
	for (int resume = 0; resume < 2; resume++) {
		client_opts(&co, 2);
		co.copy.resume = resume;
		co.copy.srcs = srcs;
		co.copy.nsrcs = 2;
		co.copy.dest = "out/";
		vc = honest(root, &co, &vs, &st);
		CHECK_EQ(vc, XFER_OK);
		CHECK_EQ(vs, XFER_OK);
		CHECK_EQ(st.files_ok, 2);
		snprintf(q, sizeof(q), "%s/out/%s", root, a);
		CHECK_EQ(tf_same_file(p[0], q), 1);
		snprintf(q, sizeof(q), "%s/out/%s", root, b);
		CHECK_EQ(tf_same_file(p[1], q), 1);
		snprintf(q, sizeof(q), "%s/out", root);
		CHECK_EQ(tf_rm_tree(q), 0);
	}
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void test_long_names_pull(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char here[] = "/tmp/rdcp-test-dest.XXXXXX";
	char a[256], b[256], p[2][4200], q[4200];
	const char *srcs[2] = { a, b };
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	int fds = tf_count_fds();

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(here);
	long_names(a, b);
	path_in(p[0], sizeof(p[0]), root, a);
	path_in(p[1], sizeof(p[1]), root, b);
	CHECK_EQ(tf_make_file(p[0], 5 * CHUNK + 1, 7), 0);
	CHECK_EQ(tf_make_file(p[1], 5 * CHUNK + 2, 8), 0);
	client_opts(&co, 2);
	co.copy.pull = true;
	co.copy.srcs = srcs;
	co.copy.nsrcs = 2;
	co.copy.dest = here;
	vc = honest(root, &co, &vs, &st);
	CHECK_EQ(vc, XFER_OK);
	CHECK_EQ(vs, XFER_OK);
	CHECK_EQ(st.files_ok, 2);
	path_in(q, sizeof(q), here, a);
	CHECK_EQ(tf_same_file(p[0], q), 1);
	path_in(q, sizeof(q), here, b);
	CHECK_EQ(tf_same_file(p[1], q), 1);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(here), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/* ---- directories ---- */

/* Bytes the heap holds now: every arena, and mmapped blocks. */
static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#endif
}

/* A hostile client's session: a -r -p push into "out/" (made here). */
struct hostile {
	struct rx r;
	struct engine e;
	uint32_t next_id;
};

static void hostile_start(struct hostile *h, const char *root)
{
	char out[4200];

	path_in(out, sizeof(out), root, "out");
	CHECK_EQ(mkdir(out, 0755), 0);
	h->next_id = 0;
	hostile_hello(&h->r, &h->e, root,
		      WIRE_HELLO_RECURSIVE | WIRE_HELLO_PRESERVE,
		      WIRE_FEAT_PACK);
}

/* Announces directory path (mode 0750, mtime secs) with the next id. */
static int hostile_dir(struct hostile *h, const char *path, int64_t secs)
{
	struct wire_msg m;

	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE;
	m.u.file.file_id = h->next_id++;
	m.u.file.kind = WIRE_KIND_DIR;
	m.u.file.mode = 0750;
	m.u.file.mtime_sec = m.u.file.atime_sec = secs;
	snprintf(m.u.file.path, sizeof(m.u.file.path), "%s", path);
	return engine_send(&h->e, &m);
}

/* Waits for n FILE_RESULTs. 0, or what ended the session. */
static int hostile_results(struct hostile *h, unsigned int n)
{
	struct wire_msg m;
	int rc = 0;

	for (unsigned int i = 0; !rc && i < n; i++)
		rc = engine_expect(&h->e, WIRE_FILE_RESULT, &m, 10000);
	return rc;
}

/* DONE, then BYE: 0, or what ended the session (why: the peer's words). */
static int hostile_end(struct hostile *h, enum xfer_fail *vs, char *why,
		       size_t whysz)
{
	struct wire_msg m = { .type = WIRE_DONE };
	int rc = engine_send(&h->e, &m);

	if (!rc)
		rc = engine_expect(&h->e, WIRE_BYE, &m, 10000);
	snprintf(why, whysz, "%s", h->e.why);
	engine_release(&h->e);
	*vs = rx_stop(&h->r);
	return rc;
}

/* Whether root/out/path is a directory of mode 0750 and mtime secs. */
static bool dir_finished(const char *root, const char *path, int64_t secs)
{
	char p[4200];
	struct stat st;

	snprintf(p, sizeof(p), "%s/out/%s", root, path);
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (st.st_mode & 07777) == 0750 && st.st_mtim.tv_sec == secs;
}

/*
 * Issue #16 item 2, directories: 100 x 1000 directories (d000/e0000 ...)
 * announced in walk order. The sink used to keep every one (its path, mode
 * and times) until the end of the session to finish them last; now only
 * the directories still being listed, or with something beneath them in
 * flight, are kept. Measured when every directory is answered, before
 * DONE: the heap may not have grown by more than 2 MiB (it grew ~9 MiB).
 * Every directory still gets its mode and mtime (-p).
 */
static void test_dir_flood_bounded(void)
{
	const unsigned int ntop = 100, nsub = 1000;
	/* tmpfs when there is one: a disk's mkdir and rmdir are slow */
	char root[] = "/dev/shm/rdcp-test-root.XXXXXX";
	char why[600], path[64];
	struct hostile h;
	enum xfer_fail vs;
	size_t before, after;
	unsigned int bad = 0;
	int rc = 0, fds = tf_count_fds();

	if (!mkdtemp(root)) {
		memcpy(root, "/tmp/rdcp-test-root.XXXXXX", 27);
		mkdtemp_or_fail(root);
	}
	hostile_start(&h, root);
	/* One batch first: the sink's own setup is not the bound's. */
	rc = hostile_dir(&h, "a", 1000);
	if (!rc)
		rc = hostile_results(&h, 1);
	before = heap_in_use();
	for (unsigned int i = 0; !rc && i < ntop; i++) {
		snprintf(path, sizeof(path), "d%03u", i);
		rc = hostile_dir(&h, path, 1000 + i);
		for (unsigned int j = 0; !rc && j < nsub; j++) {
			snprintf(path, sizeof(path), "d%03u/e%04u", i, j);
			rc = hostile_dir(&h, path, 2000 + j);
		}
		if (!rc)
			rc = hostile_results(&h, nsub + 1);
	}
	CHECK_EQ(rc, 0);
	after = heap_in_use();
	printf("# heap %zu KiB before, %zu KiB after %u directories\n",
	       before >> 10, after >> 10, ntop * (nsub + 1));
	CHECK(after < before + (2u << 20));
	CHECK_EQ(hostile_end(&h, &vs, why, sizeof(why)), 0);
	CHECK_EQ(vs, XFER_OK);
	for (unsigned int i = 0; i < ntop; i += 7) {
		snprintf(path, sizeof(path), "d%03u", i);
		bad += !dir_finished(root, path, 1000 + i);
		for (unsigned int j = 0; j < nsub; j += 97) {
			snprintf(path, sizeof(path), "d%03u/e%04u", i, j);
			bad += !dir_finished(root, path, 2000 + j);
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/*
 * The sink finishes a directory as the walk leaves it, so an entry beneath
 * a directory it has left (or never announced) is a protocol error: not
 * created, and the directory keeps the mode and times it was given.
 */
static void dir_out_of_order(const char *late)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char why[600], p[4200];
	struct hostile h;
	enum xfer_fail vs;
	int rc, fds = tf_count_fds();

	mkdtemp_or_fail(root);
	hostile_start(&h, root);
	rc = hostile_dir(&h, "a", 1000);
	if (!rc)
		rc = hostile_dir(&h, "a/in", 1001);
	if (!rc)
		rc = hostile_dir(&h, "b", 1002);
	if (!rc)
		rc = hostile_dir(&h, late, 1003);
	if (!rc)
		rc = hostile_results(&h, 4);
	if (!rc) { /* every entry taken: see how the session ends */
		rc = hostile_end(&h, &vs, why, sizeof(why));
	} else {
		snprintf(why, sizeof(why), "%s", h.e.why);
		engine_release(&h.e);
		vs = rx_stop(&h.r);
	}
	CHECK(rc != 0);
	CHECK_EQ(vs, XFER_FAIL_PROTOCOL);
	if (!strstr(why, "not sending now"))
		printf("#   the client heard: %s\n", why);
	CHECK(strstr(why, "not sending now") != NULL);
	snprintf(p, sizeof(p), "%s/out/%s", root, late);
	CHECK(access(p, F_OK) != 0);
	CHECK(dir_finished(root, "a", 1000));
	CHECK(dir_finished(root, "a/in", 1001));
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void test_dir_after_finished(void)
{
	dir_out_of_order("a/late");
	dir_out_of_order("a/in/late");
}

static void test_dir_never_announced(void)
{
	dir_out_of_order("c/late");
}

/*
 * An honest -r -p tree whose directories are left by the walk while files
 * beneath them are still in flight (a file of many chunks through a ring
 * of 4 slots, packed small files) and that have no write permission: each
 * gets its mode and mtime only when nothing beneath it is in flight, so
 * every one ends as the source's, pushed and pulled.
 */
static void dir_tree_meta(bool pull)
{
	static const char *const dirs[] = {
		"t", "t/a", "t/a/deep", "t/b", "t/c",
	};
	static const char *const files[] = {
		"t/a/big", "t/a/deep/s1", "t/a/deep/s2", "t/a/s3",
		"t/b/big", "t/b/s4",	  "t/c/s5",
	};
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char dst[] = "/tmp/rdcp-test-dest.XXXXXX";
	char p[4200], q[4200];
	const char *srcs[1];
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	int fds = tf_count_fds();

	mkdtemp_or_fail(src);
	mkdtemp_or_fail(dst);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		path_in(p, sizeof(p), src, dirs[i]);
		CHECK_EQ(mkdir(p, 0755), 0);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path_in(p, sizeof(p), src, files[i]);
		CHECK_EQ(tf_make_file(p, strstr(p, "big") ? 40 * CHUNK + 3 : 99,
				      i),
			 0);
	}
	/* Deepest first: setting a directory's times leaves its parent's. */
	for (size_t i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;) {
		struct timespec ts[2] = { { .tv_sec = 1000000 + (time_t)i },
					  { .tv_sec = 2000000 + (time_t)i } };

		path_in(p, sizeof(p), src, dirs[i]);
		CHECK_EQ(utimensat(AT_FDCWD, p, ts, 0), 0);
		CHECK_EQ(chmod(p, i ? 0555 : 0750), 0);
	}
	client_opts(&co, 4);
	co.copy.recursive = true;
	co.copy.preserve = true;
	co.copy.nsrcs = 1;
	co.copy.srcs = srcs;
	if (pull) {
		srcs[0] = "t";
		co.copy.pull = true;
		co.copy.dest = dst;
		vc = honest(src, &co, &vs, &st);
	} else {
		path_in(p, sizeof(p), src, "t");
		srcs[0] = p;
		co.copy.dest = "";
		vc = honest(dst, &co, &vs, &st);
	}
	CHECK_EQ(vc, XFER_OK);
	CHECK_EQ(vs, XFER_OK);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path_in(p, sizeof(p), src, files[i]);
		path_in(q, sizeof(q), dst, files[i]);
		CHECK_EQ(tf_same_file(p, q), 1);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct stat st_d;

		path_in(q, sizeof(q), dst, dirs[i]);
		CHECK_EQ(stat(q, &st_d), 0);
		CHECK_EQ(st_d.st_mode & 07777, i ? 0555u : 0750u);
		if (st_d.st_mtim.tv_sec != 2000000 + (time_t)i)
			printf("#   %s: mtime %lld\n", dirs[i],
			       (long long)st_d.st_mtim.tv_sec);
		CHECK_EQ(st_d.st_mtim.tv_sec, 2000000 + (time_t)i);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		path_in(p, sizeof(p), src, dirs[i]);
		CHECK_EQ(chmod(p, 0755), 0);
		path_in(q, sizeof(q), dst, dirs[i]);
		CHECK_EQ(chmod(q, 0755), 0);
	}
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_rm_tree(dst), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void test_dir_tree_meta_push(void)
{
	dir_tree_meta(false);
}

static void test_dir_tree_meta_pull(void)
{
	dir_tree_meta(true);
}

/* ---- slot headers ---- */

static int quiet_msg(struct engine *e, const struct wire_msg *m)
{
	return 0;
}

static int quiet_done(struct engine *e, uint64_t wr_id)
{
	return 0;
}

/* Runs e until its queued control messages are posted. */
static int post_queued(struct engine *e)
{
	static const struct engine_role flush_role = {
		.on_msg = quiet_msg,
		.on_write_done = quiet_done,
		.finished = engine_out_empty,
	};

	return engine_run(e, &flush_role, NULL);
}

/*
 * A hostile client announces out/f, one chunk of 'x's, and writes it
 * with a header claiming len bytes (raw_len the same) and flags: the
 * header lands in its own area and nothing of the write's own length
 * comes with it, so the header's length is the sink's to bound. Then
 * FILE_END with the digest of the chunk, its result, DONE and BYE.
 * Returns 0 or what ended the session; the receiver's verdict in *vs.
 */
static int slot_claim(const char *root, uint32_t len, uint16_t flags,
		      enum xfer_fail *vs, char *why, size_t whysz)
{
	struct wire_slot_hdr h = { .len = len, .raw_len = len, .flags = flags };
	struct wire_msg m;
	struct hostile x;
	uint32_t crc;
	int rc;

	hostile_start(&x, root);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE;
	m.u.file.file_id = x.next_id++;
	m.u.file.kind = WIRE_KIND_FILE;
	m.u.file.size = CHUNK;
	m.u.file.mode = 0644;
	snprintf(m.u.file.path, sizeof(m.u.file.path), "f");
	rc = engine_send(&x.e, &m);
	if (!rc) /* the FILE ahead of the write, as RC orders them */
		rc = post_queued(&x.e);
	memset(cm_stage(x.r.a, 0), 'x', CHUNK);
	crc = ck_crc32(0, cm_stage(x.r.a, 0), CHUNK);
	h.crc = crc;
	if (flags & WIRE_SLOT_PACKED) { /* the next id, one file */
		h.file_id = x.next_id;
		h.offset = 1;
	}
	wire_slot_encode(cm_stage_hdr(x.r.a, 0), &h);
	if (!rc)
		rc = x.r.a->ops->post_write(x.r.a, 0, CHUNK, 0, wire_imm(0, 0),
					    true, 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE_END;
	m.u.end.nchunks = 1;
	m.u.end.csum = XFER_CSUM_CRC32;
	m.u.end.digest_len = 4;
	crc = htobe32(crc);
	memcpy(m.u.end.digest, &crc, 4);
	if (!rc)
		rc = engine_send(&x.e, &m);
	if (!rc)
		rc = hostile_results(&x, 1);
	if (rc) {
		snprintf(why, whysz, "%s", x.e.why);
		engine_release(&x.e);
		*vs = rx_stop(&x.r);
		return rc;
	}
	return hostile_end(&x, vs, why, whysz);
}

/* Whether path holds exactly n bytes of 'x'. */
static bool all_x(const char *path, size_t n)
{
	char buf[CHUNK + 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof(buf));

	if (fd >= 0)
		close(fd);
	if (got != (ssize_t)n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (buf[i] != 'x')
			return false;
	return true;
}

/*
 * A slot header claiming more than a slot holds (a chunk or a pack) ends
 * the session as a protocol error, naming the header; one claiming the
 * whole slot is placed from it.
 */
static void test_slot_len_bounded(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char why[600], p[4200];
	enum xfer_fail vs;
	int fds = tf_count_fds();

	mkdtemp_or_fail(root);
	CHECK(slot_claim(root, CHUNK + 1, 0, &vs, why, sizeof(why)) != 0);
	CHECK_EQ(vs, XFER_FAIL_PROTOCOL);
	CHECK(strstr(why, "bad slot header") != NULL);
	CHECK_EQ(tf_rm_tree(root), 0);
	strcpy(root, "/tmp/rdcp-test-root.XXXXXX");
	mkdtemp_or_fail(root);
	CHECK(slot_claim(root, CHUNK + 1, WIRE_SLOT_PACKED, &vs, why,
			 sizeof(why)) != 0);
	CHECK_EQ(vs, XFER_FAIL_PROTOCOL);
	CHECK(strstr(why, "bad packed slot") != NULL);
	CHECK_EQ(tf_rm_tree(root), 0);
	strcpy(root, "/tmp/rdcp-test-root.XXXXXX");
	mkdtemp_or_fail(root);
	CHECK_EQ(slot_claim(root, CHUNK, 0, &vs, why, sizeof(why)), 0);
	CHECK_EQ(vs, XFER_OK);
	path_in(p, sizeof(p), root, "out/f");
	CHECK(all_x(p, CHUNK));
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/* ---- -o/-g ---- */

/*
 * A hostile client sends an owner that HELLO's flags (hello_flags) did
 * not ask for: refused as a protocol error before anything is placed.
 */
static void test_owner_unasked(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char p[4200];
	struct wire_msg m;
	struct engine e;
	struct rx r;
	int rc;

	mkdtemp_or_fail(root);
	rc = hostile_hello(&r, &e, root, WIRE_HELLO_PRESERVE, 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE;
	m.u.file.kind = WIRE_KIND_DIR;
	m.u.file.flags = WIRE_FILE_OWNER;
	m.u.file.mode = 04755;
	m.u.file.owner.uid = 12345;
	strcpy(m.u.file.path, "d");
	if (!rc)
		rc = engine_send(&e, &m);
	if (!rc)
		rc = engine_expect(&e, WIRE_BYE, &m, 10000);
	CHECK(rc != 0);
	CHECK(strstr(e.why, "owner that -o/-g did not ask for") != NULL);
	engine_release(&e);
	CHECK_EQ(rx_stop(&r), XFER_FAIL_PROTOCOL);
	path_in(p, sizeof(p), root, "out/d");
	CHECK(access(p, F_OK) != 0);
	CHECK_EQ(tf_rm_tree(root), 0);
}

/*
 * A hostile client's session: HELLO with hello_flags, then the n messages
 * of ms. Whether the receiver refused it as a protocol error, saying why.
 */
static bool refused_with(uint32_t hello_flags, struct wire_msg *ms,
			 unsigned int n, const char *why)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	struct wire_msg m;
	struct engine e;
	struct rx r;
	bool ok;
	int rc;

	mkdtemp_or_fail(root);
	rc = hostile_hello(&r, &e, root, hello_flags, 0);
	for (unsigned int i = 0; !rc && i < n; i++)
		rc = engine_send(&e, &ms[i]);
	if (!rc)
		rc = engine_expect(&e, WIRE_BYE, &m, 10000);
	ok = rc != 0 && strstr(e.why, why) != NULL;
	if (!ok)
		printf("#   heard: %s\n", e.why);
	engine_release(&e);
	ok &= rx_stop(&r) == XFER_FAIL_PROTOCOL;
	CHECK_EQ(tf_rm_tree(root), 0);
	return ok;
}

/*
 * -X/-A: extended attributes a session did not ask for, ones for a file
 * that is not the next, a FILE that says they came when none did, and
 * ones that came for a FILE that does not say so: each refused (exit 5).
 */
static void test_xattrs_hostile(void)
{
	struct wire_msg ms[3];

	memset(ms, 0, sizeof(ms));
	ms[0].type = WIRE_XATTRS;
	CHECK_EQ(wire_xattrs_add(&ms[0].u.xattrs, "user.a", "1", 1), 0);
	ms[1].type = WIRE_FILE;
	ms[1].u.file.kind = WIRE_KIND_DIR;
	ms[1].u.file.mode = 0755;
	strcpy(ms[1].u.file.path, "d");
	CHECK(refused_with(0, ms, 2, "that -X/-A did not ask for"));
	ms[0].u.xattrs.file_id = 1; /* the next is 0 */
	CHECK(refused_with(WIRE_HELLO_XATTRS, ms, 2, "not the next one"));
	ms[0].u.xattrs.file_id = 0;
	/* came, and the FILE does not say so */
	CHECK(refused_with(WIRE_HELLO_XATTRS, ms, 2, "which does not take them"));
	/* the FILE says so, and none came */
	ms[1].u.file.flags = WIRE_FILE_XATTRS;
	CHECK(refused_with(WIRE_HELLO_ACLS, ms + 1, 1, "that never came"));
}

/*
 * -X on a file system without extended attributes (/proc): one warning a
 * session, however many entries, and nothing fails.
 */
static void test_xattrs_unsupported(void)
{
	struct session_params p = { .flags = WIRE_HELLO_XATTRS };
	struct sink k = { .p = &p };
	static struct wire_xattrs x;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(wire_xattrs_add(&x, "user.a", "1", 1), 0);
	sink_xattrs_apply(&k, fd, &x, false);
	CHECK(k.notes_said & (1u << SINK_NOTE_XATTR));
	CHECK(strstr(k.notes[SINK_NOTE_XATTR], "does not support") != NULL);
	strcpy(k.notes[SINK_NOTE_XATTR], "said");
	sink_xattrs_apply(&k, fd, &x, false);
	CHECK(!strcmp(k.notes[SINK_NOTE_XATTR], "said")); /* not again */
	close(fd);
}

/* The ids of the named users then groups of fd's access ACL, "u,u,g". */
static void acl_ids(int fd, char *out, size_t n)
{
	uint8_t v[512];
	ssize_t len = fgetxattr(fd, "system.posix_acl_access", v, sizeof(v));
	int cnt = len < 0 ? -1 : aclid_count(v, (size_t)len);
	size_t at = 0;
	uint16_t tag;
	uint32_t id;

	out[0] = '\0';
	for (int i = 0; i < cnt && at < n; i++) {
		aclid_get(v, (size_t)i, &tag, &id);
		if (tag == ACLID_USER || tag == ACLID_GROUP)
			at += (size_t)snprintf(out + at, n - at, "%s%u",
					       at ? "," : "", id);
	}
}

/* A names record of WIRE_XATTR_ACL_NAMES at names + *len. */
static void acl_name(uint8_t *names, size_t *len, uint8_t tag, uint32_t id,
		     const char *name)
{
	names[*len] = tag;
	names[*len + 1] = (uint8_t)(id >> 24);
	names[*len + 2] = (uint8_t)(id >> 16);
	names[*len + 3] = (uint8_t)(id >> 8);
	names[*len + 4] = (uint8_t)id;
	names[*len + 5] = (uint8_t)strlen(name);
	memcpy(names + *len + 6, name, strlen(name));
	*len += 6 + strlen(name);
}

/*
 * -A without --numeric-ids: an ACL's named users and groups get the ids
 * their names have here (root: 0), in id order; a name unknown here and an
 * id sent without a name keep the number; --numeric-ids, a source that
 * sent no names and a malformed record keep every number.
 */
static void test_acl_names(void)
{
	static const uint8_t acl[] = {
		2,    0,    0,	  0,	1,    0,    6,	  0,
		0xff, 0xff, 0xff, 0xff,				/* USER_OBJ */
		2,    0,    5,	  0,	0x09, 0x03, 0,	  0,	/* USER 777 */
		2,    0,    4,	  0,	0x92, 0x10, 0,	  0,	/* USER 4242 */
		2,    0,    4,	  0,	0x93, 0x10, 0,	  0,	/* USER 4243 */
		4,    0,    4,	  0,	0xff, 0xff, 0xff, 0xff, /* GROUP_OBJ */
		8,    0,    7,	  0,	0x78, 0x03, 0,	  0,	/* GROUP 888 */
		0x10, 0,    7,	  0,	0xff, 0xff, 0xff, 0xff,
		0x20, 0,    4,	  0,	0xff, 0xff, 0xff, 0xff,
	};
	struct session_params p = { .flags = WIRE_HELLO_ACLS };
	struct sink k = { .p = &p };
	static struct wire_xattrs x, plain;
	char path[] = "/tmp/rdcp-test-acl.XXXXXX", ids[128];
	uint8_t names[256];
	size_t len = 0;
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	acl_name(names, &len, ACLID_USER, 777, "root");
	acl_name(names, &len, ACLID_USER, 4242, "no-such-user-rdcp-test");
	acl_name(names, &len, ACLID_GROUP, 888, "root");
	CHECK_EQ(wire_xattrs_add(&x, "system.posix_acl_access", acl,
				 sizeof(acl)),
		 0);
	CHECK_EQ(wire_xattrs_add(&x, WIRE_XATTR_ACL_NAMES, names, len), 0);
	CHECK_EQ(wire_xattrs_add(&plain, "system.posix_acl_access", acl,
				 sizeof(acl)),
		 0);
	sink_xattrs_apply(&k, fd, &x, false);
	acl_ids(fd, ids, sizeof(ids));
	CHECK(!strcmp(ids, "0,4242,4243,0"));
	if (strcmp(ids, "0,4242,4243,0"))
		printf("#   by name: %s\n", ids);
	CHECK_EQ(k.notes_said, 0);
	p.flags |= WIRE_HELLO_NUMERIC_IDS;
	sink_xattrs_apply(&k, fd, &x, false);
	acl_ids(fd, ids, sizeof(ids));
	CHECK(!strcmp(ids, "777,4242,4243,888"));
	p.flags &= ~WIRE_HELLO_NUMERIC_IDS;
	sink_xattrs_apply(&k, fd, &x, false);
	sink_xattrs_apply(&k, fd, &plain, false); /* no names sent */
	acl_ids(fd, ids, sizeof(ids));
	CHECK(!strcmp(ids, "777,4242,4243,888"));
	/* a record that runs past the names (a peer's): numbers, no read */
	memset(&x, 0, sizeof(x));
	len = 0;
	acl_name(names, &len, ACLID_USER, 777, "root");
	CHECK_EQ(wire_xattrs_add(&x, "system.posix_acl_access", acl,
				 sizeof(acl)),
		 0);
	CHECK_EQ(wire_xattrs_add(&x, WIRE_XATTR_ACL_NAMES, names, len - 1), 0);
	sink_xattrs_apply(&k, fd, &x, false);
	acl_ids(fd, ids, sizeof(ids));
	CHECK(!strcmp(ids, "777,4242,4243,888"));
	close(fd);
	unlink(path);
}

/*
 * The ids an owner gets on this side: a name known here wins over the
 * number, an unknown name falls back to the number, --numeric-ids never
 * looks at names, and what -o/-g did not ask for is not set.
 */
static void test_owner_map(void)
{
	struct session_params p = { .flags = WIRE_HELLO_OWNER };
	struct sink k = { .p = &p };
	struct wire_owner o = { .uid = 777, .gid = 888 };
	struct snk_owner ow;

	strcpy(o.user, "root");
	strcpy(o.group, "root");
	sink_owner_map(&k, &o, &ow);
	CHECK(ow.set_uid && !ow.set_gid);
	CHECK_EQ(ow.uid, 0);
	p.flags = WIRE_HELLO_OWNERS | WIRE_HELLO_NUMERIC_IDS;
	sink_owner_map(&k, &o, &ow);
	CHECK(ow.set_uid && ow.set_gid);
	CHECK_EQ(ow.uid, 777);
	CHECK_EQ(ow.gid, 888);
	p.flags = WIRE_HELLO_OWNERS;
	strcpy(o.user, "no-such-user-rdcp-test");
	sink_owner_map(&k, &o, &ow);
	CHECK_EQ(ow.uid, 777);
	CHECK_EQ(ow.gid, 0);
	o.user[0] = '\0'; /* no name: the number */
	o.uid = 12345;
	sink_owner_map(&k, &o, &ow);
	CHECK_EQ(ow.uid, 12345);
	p.flags = WIRE_HELLO_GROUP;
	sink_owner_map(&k, &o, &ow);
	CHECK(!ow.set_uid && ow.set_gid);
}

/* Lines of file path that hold what. */
static int count_lines(const char *path, const char *what)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

/*
 * The child of test_owner_not_root, as uid 12345 (gid 12346, no other
 * group): pushes two setuid files owned by root with -p -o -g to a
 * receiver with --allow-owners. 0 when all went as it should.
 */
static int owner_not_root_child(const char *root, const char *src,
				 const char *log)
{
	char p[4200], q[4200];
	const char *srcs[1] = { src };
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	struct stat sb;
	int bad = 0;

	if (!freopen(log, "w", stderr) || setgroups(0, NULL) ||
	    setresgid(12346, 12346, 12346) || setresuid(12345, 12345, 12345))
		return 1;
	client_opts(&co, 8);
	co.copy.recursive = co.copy.preserve = co.copy.owner = co.copy.group =
		true;
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	co.copy.dest = "out";
	rx_allow_owners = true;
	vc = honest(root, &co, &vs, &st);
	fflush(stderr);
	bad |= (vc != XFER_OK) << 1 | (vs != XFER_OK) << 2;
	for (int i = 0; i < 2; i++) {
		path_in(p, sizeof(p), root, i ? "out/b" : "out/a");
		bad |= (stat(p, &sb) || sb.st_uid != 12345 || sb.st_gid != 12346 ||
			(sb.st_mode & 07777) != 0755) << (3 + i);
	}
	/* once a kind and session: the sink's log, the client's NOTICE */
	snprintf(q, sizeof(q), "%s", log);
	bad |= (count_lines(q, "cannot set owners: not root") != 2) << 5;
	bad |= (count_lines(q, "memconn-b: cannot set owners") != 1) << 6;
	bad |= (count_lines(q, "cannot set some groups") != 2) << 7;
	return bad;
}

/*
 * -o/-g on a sink that may not set owners (not root): every file placed,
 * owned by its user, setuid bits cleared, each kind said once a session
 * on each side, no failure. Run in a child that gives up root.
 */
static void test_owner_not_root(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char log[] = "/tmp/rdcp-test-log.XXXXXX";
	char p[4200];
	int status = -1, fd;
	pid_t pid;

	if (geteuid() != 0) {
		printf("# not root: test_owner_not_root has nothing to test\n");
		return;
	}
	mkdtemp_or_fail(root);
	mkdtemp_or_fail(src);
	fd = mkstemp(log);
	CHECK(fd >= 0);
	close(fd);
	for (int i = 0; i < 2; i++) {
		path_in(p, sizeof(p), src, i ? "b" : "a");
		CHECK_EQ(tf_make_file(p, 100 + i, (unsigned int)i), 0);
		CHECK_EQ(chmod(p, 04755), 0);
	}
	CHECK_EQ(chown(root, 12345, 12346), 0);
	CHECK_EQ(chmod(src, 0755), 0);
	CHECK_EQ(chown(log, 12345, 12346), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(owner_not_root_child(root, src, log));
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("#   the child: status %d; its log:\n", status);
		fflush(stdout);
		if (system("sed 's/^/#   /' /tmp/rdcp-test-log.*"))
			printf("#   (no log)\n");
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(src), 0);
	unlink(log);
}

/* "uid gid mtime" of root/name itself (lstat), or "" when it is none. */
static void lstat_of(const char *root, const char *name, char *out, size_t n)
{
	char p[4200];
	struct stat st;

	path_in(p, sizeof(p), root, name);
	if (lstat(p, &st))
		out[0] = '\0';
	else
		snprintf(out, n, "%u %u %lld", (unsigned int)st.st_uid,
			 (unsigned int)st.st_gid, (long long)st.st_mtim.tv_sec);
}

/*
 * -a's re-run (--sync mtime) as root to a receiver with --allow-owners: a
 * symlink kept (its target the same) whose owner, group and times were
 * changed at DEST gets the source's again (lchown, utimensat on the link),
 * as a kept file does, and nothing is sent.
 */
static void test_owner_symlink_kept(void)
{
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char dst[] = "/tmp/rdcp-test-dest.XXXXXX";
	char p[4200], want[64], got[64];
	const struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	const char *srcs[1];
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;

	if (geteuid() != 0) {
		printf("# not root: test_owner_symlink_kept has nothing to "
		       "test\n");
		return;
	}
	mkdtemp_or_fail(src);
	mkdtemp_or_fail(dst);
	path_in(p, sizeof(p), src, "t");
	CHECK_EQ(mkdir(p, 0755), 0);
	path_in(p, sizeof(p), src, "t/f");
	CHECK_EQ(tf_make_file(p, 10, 1), 0);
	path_in(p, sizeof(p), src, "t/l");
	CHECK_EQ(symlink("f", p), 0);
	CHECK_EQ(lchown(p, 12345, 12346), 0);
	CHECK_EQ(utimensat(AT_FDCWD, p, old, AT_SYMLINK_NOFOLLOW), 0);
	lstat_of(src, "t/l", want, sizeof(want));
	path_in(p, sizeof(p), src, "t");
	srcs[0] = p;
	rx_allow_owners = true;
	for (int run = 0; run < 2; run++) {
		client_opts(&co, 4);
		co.copy.recursive = co.copy.preserve = co.copy.owner =
			co.copy.group = true;
		co.copy.sync = run ? XFER_SYNC_MTIME : XFER_SYNC_NONE;
		co.copy.nsrcs = 1;
		co.copy.srcs = srcs;
		co.copy.dest = "";
		vc = honest(dst, &co, &vs, &st);
		CHECK_EQ(vc, XFER_OK);
		CHECK_EQ(vs, XFER_OK);
		CHECK_EQ(st.files_failed, 0);
		lstat_of(dst, "t/l", got, sizeof(got));
		CHECK(!strcmp(got, want));
		if (!run) {
			path_in(got, sizeof(got), dst, "t/l");
			CHECK_EQ(lchown(got, 0, 0), 0);
			CHECK_EQ(utimensat(AT_FDCWD, got, NULL,
					   AT_SYMLINK_NOFOLLOW),
				 0);
		} else { /* the link and the file kept: nothing crossed */
			CHECK_EQ(st.files_skipped, 2);
		}
	}
	if (strcmp(got, want))
		printf("#   the link: %s, want %s\n", got, want);
	rx_allow_owners = false;
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_rm_tree(dst), 0);
}

/* ---- -H and -D ---- */

/* st's inode of root/name, or 0. */
static ino_t ino_of(const char *root, const char *name)
{
	char p[4200];
	struct stat st;

	path_in(p, sizeof(p), root, name);
	return lstat(p, &st) ? 0 : st.st_ino;
}

/*
 * An entry of a source tree beneath a root: a directory (size HL_DIR), a
 * file of size bytes made from seed, or another name of the file at link.
 */
#define HL_DIR SIZE_MAX
struct hl_entry {
	const char *name;
	const char *link;
	size_t size;
	uint64_t seed;
};

/* Makes the n entries of v beneath root, in order (a link after its file). */
static void hl_tree(const char *root, const struct hl_entry *v, size_t n)
{
	char p[4200], q[4200];

	for (size_t i = 0; i < n; i++) {
		path_in(p, sizeof(p), root, v[i].name);
		if (v[i].link) {
			path_in(q, sizeof(q), root, v[i].link);
			CHECK_EQ(link(q, p), 0);
		} else if (v[i].size == HL_DIR) {
			CHECK_EQ(mkdir(p, 0755), 0);
		} else {
			CHECK_EQ(tf_make_file(p, v[i].size, v[i].seed), 0);
		}
	}
}

/*
 * test_links_honest's source: a file of three names (many chunks), a small
 * one of two, one whose other name is outside the tree.
 */
static const struct hl_entry links_tree[] = {
	{ "t", NULL, HL_DIR, 0 },
	{ "t/d", NULL, HL_DIR, 0 },
	{ "t/a", NULL, 40 * CHUNK + 3, 1 },
	{ "t/d/a2", "t/a", 0, 0 },
	{ "t/z3", "t/a", 0, 0 },
	{ "t/s", NULL, 99, 2 },
	{ "t/s2", "t/s", 0, 0 },
	{ "t/x", NULL, 10, 3 },
	{ "x-outside", "t/x", 0, 0 },
};

/*
 * -H, an honest push: a file of three names (many chunks), a small one of
 * two (not packed: it goes alone, LINKED), one whose other name is outside
 * the tree (a file of its own). At DEST the names are links of one inode;
 * a re-run (--sync mtime) sends no byte and keeps them.
 */
static void test_links_honest(void)
{
	char src[] = "/tmp/rdcp-test-src.XXXXXX";
	char dst[] = "/tmp/rdcp-test-dest.XXXXXX";
	char p[4200], q[4200], out[4200];
	const char *srcs[1];
	struct xfer_opts co;
	struct xfer_stats st;
	enum xfer_fail vs, vc;
	ino_t a;
	int fds = tf_count_fds();

	mkdtemp_or_fail(src);
	mkdtemp_or_fail(dst);
	hl_tree(src, links_tree, sizeof(links_tree) / sizeof(links_tree[0]));
	path_in(p, sizeof(p), src, "t");
	srcs[0] = p;
	for (int run = 0; run < 2; run++) {
		client_opts(&co, 4);
		co.copy.recursive = co.copy.preserve = co.copy.hard_links =
			true;
		co.copy.sync = run ? XFER_SYNC_MTIME : XFER_SYNC_NONE;
		co.copy.nsrcs = 1;
		co.copy.srcs = srcs;
		co.copy.dest = "";
		vc = honest(dst, &co, &vs, &st);
		CHECK_EQ(vc, XFER_OK);
		CHECK_EQ(vs, XFER_OK);
		CHECK_EQ(st.files_failed, 0);
		a = ino_of(dst, "t/a");
		CHECK(a != 0);
		CHECK_EQ(ino_of(dst, "t/d/a2"), a);
		CHECK_EQ(ino_of(dst, "t/z3"), a);
		CHECK(ino_of(dst, "t/s") != 0);
		CHECK_EQ(ino_of(dst, "t/s2"), ino_of(dst, "t/s"));
		CHECK(ino_of(dst, "t/x") != 0);
		path_in(q, sizeof(q), dst, "t/z3");
		path_in(out, sizeof(out), src, "t/z3");
		CHECK_EQ(tf_same_file(out, q), 1);
		if (run) /* nothing crossed: every name kept */
			CHECK_EQ(st.files_skipped, st.files_ok - 2);
	}
	CHECK_EQ(tf_rm_tree(src), 0);
	CHECK_EQ(tf_rm_tree(dst), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void hl_file(struct wire_msg *m, uint32_t id, uint8_t kind,
		    const char *path, const char *link)
{
	memset(m, 0, sizeof(*m));
	m->type = WIRE_FILE;
	m->u.file.file_id = id;
	m->u.file.kind = kind;
	m->u.file.mode = 0644;
	snprintf(m->u.file.path, sizeof(m->u.file.path), "%s", path);
	snprintf(m->u.file.link, sizeof(m->u.file.link), "%s", link);
}

/*
 * -H, a hostile source: a link to a name outside DEST, to an absolute
 * one, through a symlink it made, to a name it never sent as a file with
 * links, as the first entry, or without -H; a LINKED file without -H.
 * Each ends the session (exit 5) before anything is linked.
 */
static void test_links_hostile(void)
{
	struct wire_msg ms[2];

	/* a file with links, its data never sent: nothing answers it */
	hl_file(&ms[0], 0, WIRE_KIND_FILE, "f", "");
	ms[0].u.file.flags = WIRE_FILE_LINKED;
	ms[0].u.file.size = 5;
	hl_file(&ms[1], 1, WIRE_KIND_HARDLINK, "l", "../x");
	CHECK(refused_with(WIRE_HELLO_HARD_LINKS, ms, 2,
			   "not a path beneath DEST"));
	hl_file(&ms[1], 1, WIRE_KIND_HARDLINK, "l", "/etc/passwd");
	CHECK(refused_with(WIRE_HELLO_HARD_LINKS, ms, 2,
			   "not a path beneath DEST"));
	hl_file(&ms[1], 1, WIRE_KIND_HARDLINK, "l", "never");
	CHECK(refused_with(WIRE_HELLO_HARD_LINKS, ms, 2,
			   "did not send before as a file with links"));
	hl_file(&ms[0], 0, WIRE_KIND_FILE, "f", "");
	ms[0].u.file.size = 5;
	hl_file(&ms[1], 1, WIRE_KIND_HARDLINK, "l", "f");
	CHECK(refused_with(0, ms, 2, "which -H did not ask for"));
	hl_file(&ms[0], 0, WIRE_KIND_HARDLINK, "l", "passwd");
	CHECK(refused_with(WIRE_HELLO_HARD_LINKS, ms, 1, "as its first entry"));
	hl_file(&ms[0], 0, WIRE_KIND_FILE, "f", "");
	ms[0].u.file.flags = WIRE_FILE_LINKED;
	CHECK(refused_with(0, ms, 1, "which -H did not ask for"));
	/* a device node or a FIFO the session did not ask for */
	hl_file(&ms[0], 0, WIRE_KIND_SPECIAL, "n", "");
	ms[0].u.file.mode = S_IFCHR | 0600;
	ms[0].u.file.size = WIRE_RDEV(1, 3);
	CHECK(refused_with(WIRE_HELLO_SPECIALS, ms, 1,
			   "which --devices did not ask for"));
	ms[0].u.file.mode = S_IFIFO | 0600;
	ms[0].u.file.size = 0;
	CHECK(refused_with(WIRE_HELLO_DEVICES, ms, 1,
			   "which --specials did not ask for"));
}

/* A hostile -H -D push into "out/" of root; its verdicts in res. */
struct hl_run {
	struct rx r;
	struct engine e;
};

static void hl_start(struct hl_run *h, const char *root, uint32_t flags)
{
	char out[4200];

	path_in(out, sizeof(out), root, "out");
	CHECK_EQ(mkdir(out, 0755), 0);
	hostile_hello(&h->r, &h->e, root, flags, 0);
}

/* Sends m and waits for the FILE_RESULT of its id (status in *status). */
static int hl_answered(struct hl_run *h, struct wire_msg *m, int32_t *status,
		       uint32_t *flags)
{
	uint32_t id = m->u.file.file_id;
	int rc = engine_send(&h->e, m);

	while (!rc) {
		rc = engine_expect(&h->e, WIRE_FILE_RESULT, m, 10000);
		if (!rc && m->u.result.file_id == id) {
			*status = m->u.result.status;
			if (flags)
				*flags = m->u.result.flags;
			return 0;
		}
	}
	return rc;
}

static enum xfer_fail hl_end(struct hl_run *h)
{
	struct wire_msg m = { .type = WIRE_DONE };
	int rc = engine_send(&h->e, &m);

	if (!rc)
		rc = engine_expect(&h->e, WIRE_BYE, &m, 10000);
	CHECK_EQ(rc, 0);
	engine_release(&h->e);
	return rx_stop(&h->r);
}

/*
 * The FILE_END of file id with no chunk: an empty file's (its CRC32 0)
 * when status is 0, else the source giving it up with status.
 */
static int hl_send_end(struct hl_run *h, uint32_t id, int32_t status)
{
	struct wire_msg m = { .type = WIRE_FILE_END };

	m.u.end.file_id = id;
	m.u.end.csum = WIRE_CSUM_CRC32;
	m.u.end.status = status;
	if (status)
		m.u.end.flags = WIRE_END_ABORT;
	else
		m.u.end.digest_len = 4;
	return engine_send(&h->e, &m);
}

/* Whether root/name is not there. */
static bool hl_absent(const char *root, const char *name)
{
	char p[4200];

	path_in(p, sizeof(p), root, name);
	return access(p, F_OK) != 0;
}

/*
 * -H: a file with links that is sent and placed, then replaced by a
 * symlink to /etc/passwd, then linked to: the link fails on its own (a
 * regular file only, never through a symlink), /etc/passwd gains no name;
 * a link to a file the source gave up on fails too, with a reason, and
 * the session ends well.
 */
static void test_links_target_unusable(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	struct wire_msg m;
	struct hl_run h;
	struct stat before, after;
	int32_t status = 1;
	int fds = tf_count_fds();

	CHECK_EQ(stat("/etc/passwd", &before), 0);
	mkdtemp_or_fail(root);
	hl_start(&h, root, WIRE_HELLO_HARD_LINKS);
	/* an empty file: no chunk, its CRC32 0 */
	hl_file(&m, 0, WIRE_KIND_FILE, "t", "");
	m.u.file.flags = WIRE_FILE_LINKED;
	CHECK_EQ(engine_send(&h.e, &m), 0);
	CHECK_EQ(hl_send_end(&h, 0, 0), 0);
	CHECK_EQ(engine_expect(&h.e, WIRE_FILE_RESULT, &m, 10000), 0);
	CHECK_EQ(m.u.result.status, 0);
	hl_file(&m, 1, WIRE_KIND_SYMLINK, "t", "/etc/passwd");
	CHECK_EQ(hl_answered(&h, &m, &status, NULL), 0);
	CHECK_EQ(status, 0);
	hl_file(&m, 2, WIRE_KIND_HARDLINK, "l", "t");
	CHECK_EQ(hl_answered(&h, &m, &status, NULL), 0);
	CHECK(status < 0);
	CHECK(strstr(m.u.result.msg, "not a regular file") != NULL);
	/* a file the source could not read: its link is not made */
	hl_file(&m, 3, WIRE_KIND_FILE, "u", "");
	m.u.file.flags = WIRE_FILE_LINKED;
	m.u.file.size = 5;
	CHECK_EQ(engine_send(&h.e, &m), 0);
	hl_file(&m, 4, WIRE_KIND_HARDLINK, "v", "u");
	CHECK_EQ(engine_send(&h.e, &m), 0);
	CHECK_EQ(hl_send_end(&h, 3, -EIO), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(engine_expect(&h.e, WIRE_FILE_RESULT, &m, 10000), 0);
		CHECK(m.u.result.status < 0);
		if (m.u.result.file_id == 4)
			CHECK(strstr(m.u.result.msg, "not linked") != NULL);
	}
	/* the links failed, each on its own: not the session */
	CHECK_EQ(hl_end(&h), XFER_FAIL_PARTIAL);
	CHECK_EQ(stat("/etc/passwd", &after), 0);
	CHECK_EQ(after.st_nlink, before.st_nlink);
	CHECK(hl_absent(root, "out/l"));
	CHECK(hl_absent(root, "out/v"));
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

/*
 * -H: a symlink the source made (to /etc), then a link through it to a
 * file there: refused (exit 5), nothing linked.
 */
static void test_links_through_symlink(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	struct wire_msg m;
	struct hl_run h;
	int32_t status = 1;

	mkdtemp_or_fail(root);
	hl_start(&h, root, WIRE_HELLO_HARD_LINKS);
	hl_file(&m, 0, WIRE_KIND_SYMLINK, "s", "/etc");
	CHECK_EQ(hl_answered(&h, &m, &status, NULL), 0);
	CHECK_EQ(status, 0);
	hl_file(&m, 1, WIRE_KIND_HARDLINK, "l", "s/passwd");
	CHECK(engine_send(&h.e, &m) == 0 &&
	      engine_expect(&h.e, WIRE_BYE, &m, 10000) != 0);
	CHECK(strstr(h.e.why, "did not send before as a file with links") !=
	      NULL);
	engine_release(&h.e);
	CHECK_EQ(rx_stop(&h.r), XFER_FAIL_PROTOCOL);
	CHECK(hl_absent(root, "out/l"));
	CHECK_EQ(tf_rm_tree(root), 0);
}

/*
 * -D to a receiver that may not make device nodes (a service without
 * --allow-devices, or not root): a device node is not made (reported
 * skipped, said once: why), a FIFO is.
 */
static int devices_service(const char *root, const char *why)
{
	struct wire_msg m;
	struct hl_run h;
	int32_t status = 1;
	uint32_t flags = 0;
	int bad = 0;

	hl_start(&h, root, WIRE_HELLO_DEVICES | WIRE_HELLO_SPECIALS);
	for (int i = 0; i < 2; i++) {
		hl_file(&m, (uint32_t)i, WIRE_KIND_SPECIAL, i ? "n2" : "n", "");
		m.u.file.mode = S_IFCHR | 0600;
		m.u.file.size = WIRE_RDEV(1, 3);
		bad |= hl_answered(&h, &m, &status, &flags) != 0;
		bad |= (status != 0 || !(flags & WIRE_RESULT_SKIPPED)) << 1;
		/* said once a session, after the first one's result */
		if (!i)
			bad |= (engine_expect(&h.e, WIRE_NOTICE, &m, 10000) ||
				!strstr(m.u.notice.msg, why))
			       << 4;
	}
	hl_file(&m, 2, WIRE_KIND_SPECIAL, "fifo", "");
	m.u.file.mode = S_IFIFO | 0640;
	bad |= (hl_answered(&h, &m, &status, &flags) || status ||
		(flags & WIRE_RESULT_SKIPPED))
	       << 2;
	bad |= (hl_end(&h) != XFER_OK) << 3;
	return bad;
}

static void devices_check(const char *root)
{
	char p[4200];
	struct stat st;

	path_in(p, sizeof(p), root, "out/n");
	CHECK(lstat(p, &st) != 0);
	path_in(p, sizeof(p), root, "out/fifo");
	CHECK(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode));
}

/* An empty regular file id at path, ended: its FILE_RESULT's status. */
static int32_t empty_file(struct hl_run *h, uint32_t id, const char *path)
{
	struct wire_msg m;

	hl_file(&m, id, WIRE_KIND_FILE, path, "");
	CHECK_EQ(engine_send(&h->e, &m), 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE_END;
	m.u.end.file_id = id;
	m.u.end.csum = WIRE_CSUM_CRC32;
	m.u.end.digest_len = 4; /* CRC32 of nothing: 0 */
	CHECK_EQ(engine_send(&h->e, &m), 0);
	for (;;) {
		CHECK_EQ(engine_expect(&h->e, WIRE_FILE_RESULT, &m, 10000), 0);
		if (m.u.result.file_id == id)
			return m.u.result.status;
	}
}

/*
 * The sink keeps a directory open for the files that follow in it (one
 * open per directory, not per file). Between two of them DEST's "d" is
 * renamed aside and a symlink to a directory outside DEST put in its
 * place: the second file still goes into the directory the checked open
 * reached (now "d.old", beneath DEST), nothing lands outside, and the
 * directory's fd is closed by the session's end. (Opening the parent per
 * file failed the second one at the symlink; a cache by path would
 * follow it.)
 */
static void test_parent_kept_not_path(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	char away[] = "/tmp/rdcp-test-away.XXXXXX";
	char p[4200], q[4200];
	struct wire_msg m;
	struct hl_run h;
	struct stat st;
	int32_t status = 1;
	int fds = tf_count_fds();

	mkdtemp_or_fail(root);
	mkdtemp_or_fail(away);
	hl_start(&h, root, 0);
	hl_file(&m, 0, WIRE_KIND_DIR, "d", "");
	m.u.file.mode = 0755;
	CHECK_EQ(hl_answered(&h, &m, &status, NULL), 0);
	CHECK_EQ(status, 0);
	CHECK_EQ(empty_file(&h, 1, "d/t1"), 0);
	path_in(p, sizeof(p), root, "out/d");
	path_in(q, sizeof(q), root, "out/d.old");
	CHECK_EQ(rename(p, q), 0);
	CHECK_EQ(symlink(away, p), 0);
	CHECK_EQ(empty_file(&h, 2, "d/t2"), 0);
	CHECK_EQ(hl_end(&h), XFER_OK);
	CHECK_EQ(tf_count_named(away, ""), 0);
	CHECK(stat(away, &st) == 0 && (st.st_mode & 07777) == 0700);
	CHECK(tf_exists_in(q, "t1"));
	CHECK(tf_exists_in(q, "t2"));
	CHECK_EQ(tf_rm_tree(root), 0);
	CHECK_EQ(tf_rm_tree(away), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void test_devices_refused(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";

	mkdtemp_or_fail(root);
	CHECK_EQ(devices_service(root, "without --allow-devices"), 0);
	devices_check(root);
	CHECK_EQ(tf_rm_tree(root), 0);
}

/*
 * ... and a receiver with --allow-devices that is not root (a child that
 * gives root up): no device node either, said once why.
 */
static void test_devices_not_root(void)
{
	char root[] = "/tmp/rdcp-test-root.XXXXXX";
	int status = -1;
	pid_t pid;

	if (geteuid() != 0) {
		printf("# not root: the receiver is not root anyway\n");
		return;
	}
	mkdtemp_or_fail(root);
	CHECK_EQ(chown(root, 12345, 12346), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(12346, 12346, 12346) ||
		    setresuid(12345, 12345, 12345))
			_exit(1);
		rx_allow_devices = true;
		_exit(devices_service(root, "only root may make them"));
	}
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	devices_check(root);
	CHECK_EQ(tf_rm_tree(root), 0);
}

TAP_RUN(TAP_TEST(test_inflight_flood), TAP_TEST(test_inflight_flood_asked),
	TAP_TEST(test_inflight_honest), TAP_TEST(test_fifo_at_final_name),
	TAP_TEST(test_fifo_at_temporary), TAP_TEST(test_fifo_pull_dest),
	TAP_TEST(test_long_names_push), TAP_TEST(test_long_names_pull),
	TAP_TEST(test_dir_flood_bounded), TAP_TEST(test_dir_after_finished),
	TAP_TEST(test_dir_never_announced), TAP_TEST(test_dir_tree_meta_push),
	TAP_TEST(test_dir_tree_meta_pull), TAP_TEST(test_slot_len_bounded),
	TAP_TEST(test_owner_unasked), TAP_TEST(test_owner_map),
	TAP_TEST(test_owner_not_root), TAP_TEST(test_owner_symlink_kept),
	TAP_TEST(test_xattrs_hostile), TAP_TEST(test_xattrs_unsupported),
	TAP_TEST(test_acl_names), TAP_TEST(test_links_honest),
	TAP_TEST(test_links_hostile), TAP_TEST(test_links_target_unusable),
	TAP_TEST(test_links_through_symlink),
	TAP_TEST(test_parent_kept_not_path), TAP_TEST(test_devices_refused),
	TAP_TEST(test_devices_not_root))
