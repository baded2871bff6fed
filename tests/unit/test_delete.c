/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --delete (issue #15, mirrors). First the removal walk alone
 * (transfer/fs/prune.c): it stays beneath the directory it starts in and
 * follows no symlink (a symlink to a directory outside is removed as a
 * link, what it points to is untouched), removes trees depth first, keeps
 * what the verdict keeps and the directories above it, stops at its limit,
 * puts entered directories' times back, does not enter a mount point and
 * stops at PRUNE_DEPTH_MAX levels.
 *
 * Then whole sessions over the in-memory transport (memconn.h), the real
 * receiver (session_serve) in a thread and the real client: a push and a
 * pull mirror remove what the source lacks in the directories sent and
 * nothing else; a session where a file fails, or whose source skipped an
 * entry, deletes nothing; excluded names stay; --max-delete stops every
 * deletion when more would go; --dry-run lists and changes nothing; names
 * kept by -n count as sent. The client hears of each deletion either way.
 */
#include "tap.h"

#include "memconn.h"
#include "testfs.h"
#include "transfer/fs/prune.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/filter.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK 4096u
#define WATCHDOG_S 120

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* ---- files ---- */

static void path_in(char *p, size_t n, const char *dir, const char *rel)
{
	snprintf(p, n, "%s/%s", dir, rel);
}

/* rel beneath dir: a file with text (its parents made). */
static void put(const char *dir, const char *rel, const char *text)
{
	char p[600], cmd[700];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s/%s')\"", dir, rel);
	CHECK_EQ(system(cmd), 0);
	path_in(p, sizeof(p), dir, rel);
	f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void mk(const char *dir, const char *rel)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", dir, rel);
	CHECK_EQ(system(cmd), 0);
}

static void lnk(const char *dir, const char *rel, const char *to)
{
	char p[600];

	path_in(p, sizeof(p), dir, rel);
	CHECK_EQ(symlink(to, p), 0);
}

static bool has(const char *dir, const char *rel)
{
	char p[600];
	struct stat st;

	path_in(p, sizeof(p), dir, rel);
	return lstat(p, &st) == 0;
}

/* Entries beneath dir, hidden ones included. */
static int count(const char *dir)
{
	char cmd[700];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 | wc -l", dir);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

/* Three directories of a test: sources, the receiver's root, outside. */
struct rig {
	char src[64], root[64], out[64];
	int fds_before;
};

static void rig_init(struct rig *r)
{
	r->fds_before = tf_count_fds();
	strcpy(r->src, "/tmp/rdcp-del-src.XXXXXX");
	strcpy(r->root, "/tmp/rdcp-del-root.XXXXXX");
	strcpy(r->out, "/tmp/rdcp-del-out.XXXXXX");
	CHECK(mkdtemp(r->src) != NULL);
	CHECK(mkdtemp(r->root) != NULL);
	CHECK(mkdtemp(r->out) != NULL);
	put(r->out, "victim", "must stay\n");
	mk(r->out, "dir/sub");
	put(r->out, "dir/sub/deep", "must stay too\n");
}

/* Outside is as it was; everything goes. */
static void rig_finish(struct rig *r)
{
	CHECK(has(r->out, "victim"));
	CHECK(has(r->out, "dir/sub/deep"));
	CHECK_EQ(count(r->out), 4);
	CHECK_EQ(tf_rm_tree(r->src), 0);
	CHECK_EQ(tf_rm_tree(r->root), 0);
	CHECK_EQ(tf_rm_tree(r->out), 0);
	CHECK_EQ(tf_count_fds(), r->fds_before);
}

/* ---- the removal walk ---- */

struct seen {
	char path[64][128];
	int status[64];
	uint8_t kind[64];
	int n;
};

static int seen_at(const struct seen *s, const char *path)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->path[i], path))
			return i;
	return -1;
}

/* "sent" is a directory sent; keep* and top entries stay; else goes. */
static enum prune_verdict verdict(void *arg, const char *path, bool is_dir,
				  bool inside)
{
	const char *last = strrchr(path, '/');

	(void)arg;
	if (strstr(last ? last + 1 : path, "keep") == (last ? last + 1 : path))
		return PRUNE_KEEP;
	if (inside)
		return PRUNE_REMOVE;
	if (!strcmp(path, "sent") || !strcmp(path, "sent/sub"))
		return PRUNE_ENTER;
	return strchr(path, '/') ? PRUNE_REMOVE : PRUNE_KEEP;
}

/* Walks dir from its top (prefix ""): every event into s. */
static void walk(const char *dir, bool remove, uint64_t limit, bool times,
		 struct seen *s)
{
	struct prune_cfg c = {
		.name = ".",
		.prefix = "",
		.remove = remove,
		.keep_times = times,
		.limit = limit,
		.decide = verdict,
	};
	struct prune_event ev;
	struct prune *p;
	int rc;

	memset(s, 0, sizeof(*s));
	c.dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(c.dirfd >= 0);
	CHECK_EQ(prune_create(&c, &p), 0);
	while ((rc = prune_next(p, &ev)) == 1 && s->n < 64) {
		snprintf(s->path[s->n], sizeof(s->path[0]), "%s", ev.path);
		s->status[s->n] = ev.status;
		s->kind[s->n++] = ev.kind;
	}
	CHECK_EQ(rc, 0);
	prune_destroy(p);
	close(c.dirfd);
}

/* A tree beneath root with symlinks to outside, at every level. */
static void mktree(const struct rig *r)
{
	char to[600];

	put(r->root, "top", "a top entry: never removed\n");
	lnk(r->root, "toplink", r->out);
	put(r->root, "sent/keep.me", "kept by the verdict\n");
	put(r->root, "sent/gone", "goes\n");
	lnk(r->root, "sent/ln", r->out); /* a directory outside */
	put(r->root, "sent/sub/gone2", "goes\n");
	put(r->root, "sent/tree/a/b/f", "goes, deep\n");
	snprintf(to, sizeof(to), "%s/victim", r->out);
	lnk(r->root, "sent/tree/a/lnfile", to);
	lnk(r->root, "sent/tree/lndir", r->out);
	path_in(to, sizeof(to), r->root, "sent/tree/fifo");
	CHECK_EQ(mkfifo(to, 0600), 0);
}

static void test_prune_beneath(void)
{
	static const char *const gone[] = {
		"sent/gone",	   "sent/ln",	      "sent/sub/gone2",
		"sent/tree/a/b/f", "sent/tree/a/b",   "sent/tree/a/lnfile",
		"sent/tree/a",	   "sent/tree/lndir", "sent/tree/fifo",
		"sent/tree",
	};
	const size_t ngone = sizeof(gone) / sizeof(gone[0]);
	struct seen s;
	struct rig r;

	rig_init(&r);
	mktree(&r);
	/* Listing first: the same entries, nothing removed. */
	walk(r.root, false, UINT64_MAX, false, &s);
	CHECK_EQ(s.n, (int)ngone);
	CHECK_EQ(count(r.root), 15);
	walk(r.root, true, UINT64_MAX, false, &s);
	CHECK_EQ(s.n, (int)ngone);
	for (size_t i = 0; i < ngone; i++) {
		int at = seen_at(&s, gone[i]);

		if (at < 0 || s.status[at] || has(r.root, gone[i]))
			printf("#   %s: event %d, status %d, still there %d\n",
			       gone[i], at, at < 0 ? 0 : s.status[at],
			       has(r.root, gone[i]));
		CHECK(at >= 0 && !s.status[at] && !has(r.root, gone[i]));
	}
	/* a tree depth first: what is in a directory before it */
	CHECK(seen_at(&s, "sent/tree/a/b/f") < seen_at(&s, "sent/tree/a/b"));
	CHECK(seen_at(&s, "sent/tree/a/b") < seen_at(&s, "sent/tree/a"));
	CHECK(seen_at(&s, "sent/tree/a") < seen_at(&s, "sent/tree"));
	CHECK_EQ(s.kind[seen_at(&s, "sent/ln")], WIRE_KIND_SYMLINK);
	CHECK_EQ(s.kind[seen_at(&s, "sent/tree")], WIRE_KIND_DIR);
	CHECK_EQ(s.kind[seen_at(&s, "sent/tree/fifo")], WIRE_KIND_OTHER);
	CHECK_EQ(s.kind[seen_at(&s, "sent/gone")], WIRE_KIND_FILE);
	CHECK(has(r.root, "top") && has(r.root, "toplink"));
	CHECK(has(r.root, "sent/keep.me") && has(r.root, "sent/sub"));
	rig_finish(&r);
}

/* A directory to remove whose tree holds an entry kept stays, with it. */
static void test_prune_keeps_inside(void)
{
	struct seen s;
	struct rig r;

	rig_init(&r);
	put(r.root, "sent/old/x", "goes\n");
	put(r.root, "sent/old/sub/keep.me", "stays\n");
	put(r.root, "sent/old/sub/y", "goes\n");
	walk(r.root, true, UINT64_MAX, false, &s);
	CHECK_EQ(s.n, 2);
	CHECK(seen_at(&s, "sent/old/x") >= 0 &&
	      seen_at(&s, "sent/old/sub/y") >= 0);
	CHECK(has(r.root, "sent/old/sub/keep.me"));
	CHECK(!has(r.root, "sent/old/x") && !has(r.root, "sent/old/sub/y"));
	rig_finish(&r);
}

/*
 * The limit: that many go, in the order of the names; each other one is
 * an -E2BIG event and stays, with its directory.
 */
static void test_prune_limit(void)
{
	struct seen s;
	struct rig r;
	int failed = 0;

	rig_init(&r);
	put(r.root, "sent/a", "1");
	put(r.root, "sent/b", "2");
	put(r.root, "sent/c/d", "3");
	walk(r.root, true, 2, false, &s);
	/* names sorted: a and b go, c/d is one too many, so c stays */
	CHECK_EQ(s.n, 3);
	for (int i = 0; i < s.n; i++)
		failed += s.status[i] == -E2BIG;
	CHECK_EQ(failed, 1);
	CHECK_EQ(s.status[seen_at(&s, "sent/c/d")], -E2BIG);
	CHECK(!has(r.root, "sent/a") && !has(r.root, "sent/b"));
	CHECK_EQ(count(r.root), 3); /* sent, c, c/d */
	rig_finish(&r);
}

/* Entered directories that lost entries get their times back. */
static void test_prune_keep_times(void)
{
	struct timespec t[2] = { { 1000000, 0 }, { 2000000, 0 } };
	char p[600];
	struct stat st;
	struct seen s;
	struct rig r;

	rig_init(&r);
	put(r.root, "sent/sub/x", "goes\n");
	path_in(p, sizeof(p), r.root, "sent/sub");
	CHECK_EQ(utimensat(AT_FDCWD, p, t, 0), 0);
	walk(r.root, true, UINT64_MAX, true, &s);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(stat(p, &st), 0);
	CHECK_EQ(st.st_mtim.tv_sec, 2000000);
	put(r.root, "sent/sub/y", "goes\n");
	CHECK_EQ(utimensat(AT_FDCWD, p, t, 0), 0);
	walk(r.root, true, UINT64_MAX, false, &s);
	CHECK_EQ(stat(p, &st), 0);
	CHECK(st.st_mtim.tv_sec != 2000000);
	rig_finish(&r);
}

/*
 * A tree deeper than PRUNE_DEPTH_MAX: the level past it is an error and
 * stays with everything above it; no descriptor is left open.
 */
static void test_prune_depth(void)
{
	char rel[1200] = "sent/deep";
	struct seen s;
	struct rig r;
	int loops = 0;

	rig_init(&r);
	for (int i = 0; i < PRUNE_DEPTH_MAX + 4; i++)
		strcat(rel, "/d");
	put(r.root, rel, "at the bottom\n");
	walk(r.root, true, UINT64_MAX, false, &s);
	for (int i = 0; i < s.n; i++)
		loops += s.status[i] == -ELOOP;
	CHECK_EQ(s.n, 1);
	CHECK_EQ(loops, 1);
	CHECK(has(r.root, rel));
	rig_finish(&r);
}

/* The start directory is a symlink: not followed, an error. */
static void test_prune_start_symlink(void)
{
	struct prune_cfg c = {
		.name = "start",
		.prefix = "start",
		.remove = true,
		.limit = UINT64_MAX,
		.decide = verdict,
	};
	struct prune_event ev;
	struct prune *p;
	struct rig r;

	rig_init(&r);
	lnk(r.root, "start", r.out);
	c.dirfd = open(r.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(prune_create(&c, &p), 0);
	CHECK_EQ(prune_next(p, &ev), 1);
	CHECK(ev.status == -ELOOP || ev.status == -ENOTDIR);
	CHECK_EQ(prune_next(p, &ev), 0);
	prune_destroy(p);
	close(c.dirfd);
	rig_finish(&r);
}

/*
 * A mount point in a tree to remove is not entered: an -EBUSY event, the
 * file system mounted there untouched. In a child with a mount namespace
 * of its own (root only: skipped otherwise).
 */
static void test_prune_mount_point(void)
{
	int before = tap_failed_checks, status = -1;
	char mnt[600];
	struct rig r;
	pid_t pid;

	rig_init(&r);
	put(r.root, "sent/tree/x", "goes\n");
	mk(r.root, "sent/tree/mnt");
	path_in(mnt, sizeof(mnt), r.root, "sent/tree/mnt");
	pid = fork();
	if (pid == 0) {
		struct seen s;

		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
			_exit(77);
		put(mnt, "inside", "on another file system\n");
		walk(r.root, true, UINT64_MAX, false, &s);
		_exit(tap_failed_checks != before || s.n != 2 ||
				      s.status[seen_at(&s, "sent/tree/mnt")] !=
					      -EBUSY ||
				      !has(mnt, "inside") ||
				      has(r.root, "sent/tree/x")
			      ? 1
			      : 0);
	}
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		printf("#   skipped: no mount namespace here (not root)\n");
	else
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(has(r.root, "sent/tree/mnt"));
	rig_finish(&r);
}

/* ---- sessions ---- */

struct sess {
	struct xfer_opts co;
	struct filter filter;
	struct memconn_faults faults;
	enum xfer_fail vc, vs;
	struct xfer_stats st;
	int reported, dry_reported; /* deletions the client heard of */
};

struct srv {
	struct xfer_opts o;
	int rootfd;
	struct cm_conn *c;
	enum xfer_fail v;
};

static void *srv_main(void *p)
{
	struct srv *s = p;

	s->v = session_serve(&s->o, s->rootfd, s->c);
	return NULL;
}

static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct sess *s = arg;

	if (r->deleted && !r->status) {
		s->reported++;
		s->dry_reported += r->dry;
	}
}

static void sess_init(struct sess *s)
{
	memset(s, 0, sizeof(*s));
	xfer_opts_init(&s->co);
	s->co.link.chunk_size = CHUNK;
	s->co.link.window = 4;
	s->co.link.workers = 2;
	s->co.link.timeout_ms = 5000;
	s->co.copy.recursive = true;
	s->co.copy.delete_extra = true;
	s->co.copy.on_file = on_file;
	s->co.copy.on_file_arg = s;
}

static void exclude(struct sess *s, const char *pattern)
{
	CHECK_EQ(filter_add(&s->filter, false, pattern), 0);
	s->co.copy.filter = &s->filter;
}

static void sess_run(struct sess *s, const char *root)
{
	struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = s->co.link.window,
		.chunk_size = s->co.link.chunk_size,
	};
	struct srv sv = { .o = s->co };
	struct cm_conn *a = NULL;
	pthread_t tid;

	sv.o.copy.srcs = NULL;
	sv.o.copy.nsrcs = 0;
	sv.o.copy.dest = NULL;
	sv.o.copy.filter = NULL;
	sv.o.copy.on_file = NULL;
	sv.o.serve.root = root;
	sv.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(memconn_pair(&g, &s->faults, &a, &sv.c), 0);
	alarm(WATCHDOG_S);
	CHECK_EQ(pthread_create(&tid, NULL, srv_main, &sv), 0);
	s->vc = session_client(&s->co, a, &s->st);
	cm_conn_destroy(a);
	pthread_join(tid, NULL);
	alarm(0);
	s->vs = sv.v;
	cm_conn_destroy(sv.c);
	close(sv.rootfd);
	filter_release(&s->filter);
	if (s->vc != XFER_OK && s->st.error[0])
		printf("#   client: %s\n", s->st.error);
}

/* The source: data/{a, sub/b, big}. */
static void mksrc(const struct rig *r)
{
	char p[600];

	put(r->src, "data/a", "new a\n");
	put(r->src, "data/sub/b", "b\n");
	path_in(p, sizeof(p), r->src, "data/big");
	CHECK_EQ(tf_make_file(p, 3 * CHUNK + 5, 7), 0);
}

/*
 * The same tree under d/data, an old a, and six entries more: x, sub/y,
 * old/deep/z (with old/deep and old) and ln, a symlink to outside;
 * d/other beside data.
 */
static void mkdest(const struct rig *r, const char *d)
{
	put(d, "data/a", "old a\n");
	put(d, "data/x", "extra\n");
	put(d, "data/sub/y", "extra\n");
	put(d, "data/old/deep/z", "extra\n");
	lnk(d, "data/ln", r->out);
	put(d, "other", "beside the tree sent: stays\n");
}

static const char *const EXTRA[] = { "data/x", "data/sub/y", "data/old",
				     "data/ln" };

/* Whether the six extra entries under d are gone (true) or all there. */
static void extras(const char *d, bool gone)
{
	for (size_t i = 0; i < sizeof(EXTRA) / sizeof(EXTRA[0]); i++) {
		if (has(d, EXTRA[i]) == gone)
			printf("#   %s/%s: %s\n", d, EXTRA[i],
			       gone ? "still there" : "deleted");
		CHECK(has(d, EXTRA[i]) != gone);
	}
	CHECK(has(d, "other"));
	CHECK(has(d, "data/sub"));
}

/* A push of SRC/data to out/ (the receiver's root/out/data). */
static void push(struct sess *s, const struct rig *r, const char **src)
{
	static char path[600];

	path_in(path, sizeof(path), r->src, "data");
	*src = path;
	s->co.copy.srcs = src;
	s->co.copy.nsrcs = 1;
	s->co.copy.dest = "out/";
}

/* A push mirror: the six go, data/a is the new one, the rest stays. */
static void test_push_mirror(void)
{
	const char *src;
	char out[600];
	struct sess s;
	struct rig r;
	char d[600];

	rig_init(&r);
	mksrc(&r);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	sess_init(&s);
	push(&s, &r, &src);
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.vs, XFER_OK);
	extras(out, true);
	CHECK_EQ(s.st.deleted, 6);
	CHECK_EQ(s.reported, 6);
	path_in(d, sizeof(d), r.src, "data/a");
	{
		char got[600];

		snprintf(got, sizeof(got), "%s/out/data/a", r.root);
		CHECK_EQ(tf_same_file(d, got), 1);
	}
	rig_finish(&r);
}

/*
 * A file fails (its second chunk corrupted in flight): nothing is deleted,
 * although the source's list was whole.
 */
static void test_push_failed_deletes_nothing(void)
{
	const char *src;
	char out[600];
	struct sess s;
	struct rig r;

	rig_init(&r);
	mksrc(&r);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	sess_init(&s);
	push(&s, &r, &src);
	s.faults.corrupt_write = 2;
	sess_run(&s, r.root);
	CHECK(s.vc != XFER_OK);
	CHECK(s.st.files_failed >= 1);
	extras(out, false);
	CHECK_EQ(s.st.deleted, 0);
	CHECK_EQ(s.reported, 0);
	rig_finish(&r);
}

/*
 * A FIFO the source skips: its list is not whole, nothing is deleted, on
 * a push or a pull, and the run fails.
 */
static void test_push_source_skip(void)
{
	const char *src;
	char out[600];
	struct sess s;
	struct rig r;
	char p[600];

	rig_init(&r);
	mksrc(&r);
	path_in(p, sizeof(p), r.src, "data/fifo");
	CHECK_EQ(mkfifo(p, 0600), 0);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	sess_init(&s);
	push(&s, &r, &src);
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_FAIL_PARTIAL);
	CHECK_EQ(s.st.files_failed, 1);
	extras(out, false);
	/* Pulled back with a FIFO on the server's side: nothing deleted. */
	{
		const char *pull_src[] = { "out/data" };
		char home[600], fifo[700];

		snprintf(home, sizeof(home), "%s/home", r.src);
		mkdest(&r, home);
		snprintf(fifo, sizeof(fifo), "%s/data/fifo", out);
		CHECK_EQ(mkfifo(fifo, 0600), 0);
		sess_init(&s);
		s.co.copy.pull = true;
		s.co.copy.srcs = pull_src;
		s.co.copy.nsrcs = 1;
		s.co.copy.dest = home;
		sess_run(&s, r.root);
		CHECK_EQ(s.vc, XFER_FAIL_PARTIAL);
		CHECK_EQ(s.st.files_failed, 1);
		extras(home, false);
		CHECK_EQ(unlink(fifo), 0);
	}
	/* Excluded, it is no skip: the mirror goes ahead. */
	sess_init(&s);
	push(&s, &r, &src);
	exclude(&s, "fifo");
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	extras(out, true);
	rig_finish(&r);
}

/* --exclude'd names stay, directories with their trees (push and pull). */
static void test_excluded_kept(void)
{
	const char *src, *pull_src[] = { "out/data" };
	char out[600], home[600];
	struct sess s;
	struct rig r;

	rig_init(&r);
	mksrc(&r);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	put(out, "data/x.keep", "excluded\n");
	put(out, "data/cache/f", "excluded dir\n");
	sess_init(&s);
	push(&s, &r, &src);
	exclude(&s, "*.keep");
	exclude(&s, "cache/");
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	extras(out, true);
	CHECK(has(out, "data/x.keep"));
	CHECK(has(out, "data/cache/f"));
	CHECK_EQ(s.st.deleted, 6);

	/* Pulled back into home/: the client's own rules protect. */
	snprintf(home, sizeof(home), "%s/home", r.src);
	mkdest(&r, home);
	sess_init(&s);
	s.co.copy.pull = true;
	s.co.copy.srcs = pull_src;
	s.co.copy.nsrcs = 1;
	s.co.copy.dest = home;
	put(home, "data/mine.keep", "excluded here\n");
	exclude(&s, "*.keep");
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK(has(home, "data/mine.keep"));
	CHECK(!has(home, "data/x") && !has(home, "data/old"));
	CHECK(!has(home, "data/ln") && has(home, "other"));
	CHECK(has(home, "data/cache/f")); /* sent */
	CHECK_EQ(s.st.deleted, 6);
	CHECK_EQ(s.reported, 6);
	rig_finish(&r);
}

/* --max-delete: more would go, so none does (exit 13); enough, all go. */
static void test_push_max_delete(void)
{
	const char *src;
	char out[600];
	struct sess s;
	struct rig r;

	rig_init(&r);
	mksrc(&r);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	sess_init(&s);
	push(&s, &r, &src);
	s.co.copy.max_delete = 5;
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_FAIL_MAX_DELETE);
	CHECK_EQ(s.vs, XFER_FAIL_MAX_DELETE);
	CHECK_EQ(s.st.files_failed, 0);
	CHECK(s.st.max_delete_hit);
	extras(out, false);
	CHECK_EQ(s.reported, 0);
	sess_init(&s);
	push(&s, &r, &src);
	s.co.copy.max_delete = 6;
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	extras(out, true);
	CHECK_EQ(s.st.deleted, 6);
	rig_finish(&r);
}

/* --dry-run --delete: each entry that would go is told, none goes. */
static void test_push_dry_run(void)
{
	const char *src;
	char out[600];
	struct sess s;
	struct rig r;
	int before;

	rig_init(&r);
	mksrc(&r);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	before = count(r.root);
	sess_init(&s);
	push(&s, &r, &src);
	s.co.copy.dry_run = true;
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	extras(out, false);
	CHECK_EQ(count(r.root), before);
	CHECK_EQ(s.st.deleted, 6);
	CHECK_EQ(s.dry_reported, 6);
	rig_finish(&r);
}

/* Names kept by -n are names sent: they stay, the extras go. */
static void test_push_no_clobber(void)
{
	const char *src;
	char out[600];
	struct sess s;
	struct rig r;
	char d[600];

	rig_init(&r);
	mksrc(&r);
	path_in(out, sizeof(out), r.root, "out");
	mkdest(&r, out);
	sess_init(&s);
	push(&s, &r, &src);
	s.co.copy.no_clobber = true;
	sess_run(&s, r.root);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK(s.st.files_skipped >= 1);
	extras(out, true);
	path_in(d, sizeof(d), r.root, "out/data/a");
	{
		FILE *f = fopen(d, "r");
		char line[32] = "";

		CHECK(f != NULL);
		if (f) {
			CHECK(fgets(line, sizeof(line), f) != NULL);
			fclose(f);
		}
		CHECK(!strcmp(line, "old a\n"));
	}
	rig_finish(&r);
}

TAP_RUN(TAP_TEST(test_prune_beneath), TAP_TEST(test_prune_keeps_inside),
	TAP_TEST(test_prune_limit), TAP_TEST(test_prune_keep_times),
	TAP_TEST(test_prune_depth), TAP_TEST(test_prune_start_symlink),
	TAP_TEST(test_prune_mount_point), TAP_TEST(test_push_mirror),
	TAP_TEST(test_push_failed_deletes_nothing),
	TAP_TEST(test_push_source_skip), TAP_TEST(test_excluded_kept),
	TAP_TEST(test_push_max_delete), TAP_TEST(test_push_dry_run),
	TAP_TEST(test_push_no_clobber))
