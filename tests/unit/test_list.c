/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --files-from on a pull (HELLO flag LIST, NAMES and NAMES_ACK): whole
 * sessions over a memconn pair (memconn.h).
 *
 * Honest ends: session_client() with a list read from memory against
 * session_serve() over a root: names beneath the SRC directory, the
 * directories they imply, a listed directory (a tree with -r), filters,
 * --dry-run, a list many times the window (so that the client waits for
 * the receiver's NAMES_ACK again and again), a name outside refused per
 * name on either side (a ".." by the client, a symlink on the way by the
 * receiver), the rest copied.
 *
 * A malicious client against the real receiver: names flooded past the
 * window (refused, exit 5, nothing more held), NAMES in a session without
 * a list or after its end, a ".." the receiver must refuse itself.
 *
 * A malicious receiver against the real client: entries the list did not
 * name (.bashrc in a FILE, .profile in a packed slot), a tree beneath a
 * listed file without -r, a symlink at a listed name, a NAMES_ACK for
 * names never sent: each ends the session with exit 5, nothing of it on
 * disk.
 */
#include "tap.h"

#include "memconn.h"
#include "pullpeer.h"
#include "testfs.h"
#include "transfer/session/auth.h"
#include "transfer/session/engine.h"
#include "transfer/session/role.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/filter.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK 4096u
#define WINDOW 8u
#define WATCHDOG_S 120

static const uint8_t KEY[32] = "0123456789abcdef0123456789abcdef";

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* ---- files ---- */

static void mkfile(const char *dir, const char *rel, size_t size)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	CHECK_EQ(tf_make_file(p, size, size + strlen(rel)), 0);
}

static void mkdir_in(const char *dir, const char *rel)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	CHECK_EQ(mkdir(p, 0755), 0);
}

static bool is_dir_in(const char *dir, const char *rel)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static struct cm_geom geom(void)
{
	struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = WINDOW,
		.chunk_size = CHUNK,
	};

	return g;
}

static void xopts(struct xfer_opts *o)
{
	xfer_opts_init(o);
	o->link.chunk_size = CHUNK;
	o->link.window = WINDOW;
	o->link.workers = 2;
	o->link.timeout_ms = 5000;
}

/* ---- a session: root (the receiver's) and home (the client's) ---- */

struct lsess {
	/* in: rdcp [options] --files-from=LIST HOST::base home/dest/ */
	const char *base;
	const char *list; /* the list's bytes, list_len of them */
	size_t list_len;
	bool from0, recursive, dry_run, keyed;
	const char *exclude; /* one --exclude, or NULL */
	/* the receiver: the real one, or one of the evil ones below */
	void *(*server)(void *);
	/* out */
	enum xfer_fail vc, vs;
	struct xfer_stats st;
	/* private */
	char root[64], home[64], dest[128];
	struct cm_conn *b;
	struct xfer_opts so;
	int rootfd, fds_before;
	/* an evil receiver: what it does */
	const char *evil_list;	/* its own list, walked beneath base */
	uint32_t evil_or_flags; /* added to the client's (RECURSIVE) */
	struct wire_file raw;	/* or this FILE (path set) */
	uint64_t bogus_ack;	/* or a NAMES_ACK of this (not 0) */
};

static void ls_init(struct lsess *s)
{
	memset(s, 0, sizeof(*s));
	s->fds_before = tf_count_fds();
	strcpy(s->root, "/tmp/rdcp-list-root.XXXXXX");
	strcpy(s->home, "/tmp/rdcp-list-home.XXXXXX");
	CHECK(mkdtemp(s->root) != NULL);
	CHECK(mkdtemp(s->home) != NULL);
	s->base = "base";
	mkdir_in(s->root, "base");
	snprintf(s->dest, sizeof(s->dest), "%s/out", s->home);
}

static void ls_finish(struct lsess *s)
{
	CHECK_EQ(tf_rm_tree(s->root), 0);
	CHECK_EQ(tf_rm_tree(s->home), 0);
	CHECK_EQ(tf_count_fds(), s->fds_before);
}

static void *real_server(void *arg)
{
	struct lsess *s = arg;

	s->vs = session_serve(&s->so, s->rootfd, s->b);
	return NULL;
}

/* memconn's lanes fault for ls_run (0: off): arrivals in any order. */
static struct memconn_faults ls_faults;

static void ls_run(struct lsess *s)
{
	struct cm_geom g = geom();
	struct xfer_opts co;
	struct filter f = { 0 };
	const char *srcs[1] = { s->base };
	char dest[200];
	FILE *list;

	xopts(&co);
	co.copy.pull = true;
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	snprintf(dest, sizeof(dest), "%s/", s->dest); /* as args.c makes it */
	co.copy.dest = dest;
	co.copy.recursive = s->recursive;
	co.copy.dry_run = s->dry_run;
	co.copy.from0 = s->from0;
	co.link.key = s->keyed ? KEY : NULL;
	if (s->exclude) {
		CHECK_EQ(filter_add(&f, false, s->exclude), 0);
		co.copy.filter = &f;
	}
	list = fmemopen((void *)s->list, s->list_len, "r");
	CHECK(list != NULL);
	co.copy.files_from = list;
	xopts(&s->so);
	s->so.link.key = co.link.key;
	s->rootfd = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(s->rootfd >= 0);
	if (list && s->rootfd >= 0)
		s->vc = pp_run_client(&co, &g, &ls_faults, &s->b,
				      s->server ? s->server : real_server, s,
				      WATCHDOG_S, &s->st);
	else
		s->vc = s->vs = XFER_FAIL_INTERNAL;
	if (s->rootfd >= 0)
		close(s->rootfd);
	if (list)
		fclose(list);
	filter_release(&f);
}

static void ls_list(struct lsess *s, const char *text)
{
	s->list = text;
	s->list_len = strlen(text);
}

/* The pull was refused as a protocol violation naming name. */
static void refused(const struct lsess *s, const char *name)
{
	CHECK(pp_refused(s->vc, &s->st, name));
}

/* ---- honest ends ---- */

/*
 * Names beneath the SRC directory as they are listed ("./", a leading
 * '/', an empty line), the directories they imply, a directory without
 * -r (made empty), a ".." refused by the client and a name crossing a
 * symlink out of the root refused by the receiver: those two fail (exit
 * 9), the rest is copied.
 */
static void test_list_names(void)
{
	struct lsess s;
	char p[600];

	for (int keyed = 0; keyed < 2; keyed++) {
		ls_init(&s);
		s.keyed = keyed;
		mkfile(s.root, "base/a.txt", 3 * CHUNK + 5);
		mkdir_in(s.root, "base/sub");
		mkdir_in(s.root, "base/sub/deep");
		mkfile(s.root, "base/sub/deep/b.txt", 100);
		mkfile(s.root, "base/sub/other.txt", 100);
		mkdir_in(s.root, "base/dir");
		mkfile(s.root, "base/dir/x", 10);
		mkdir_in(s.root, "outside");
		mkfile(s.root, "outside/secret", 10);
		snprintf(p, sizeof(p), "%s/base/link", s.root);
		CHECK_EQ(symlink("../outside", p), 0);
		ls_list(&s, "a.txt\n./sub/deep/b.txt\n\n/dir\n"
			    "../outside/secret\nlink/secret\n");
		ls_run(&s);
		CHECK_EQ(s.vc, XFER_FAIL_PARTIAL);
		CHECK_EQ(s.st.files_failed, 2);
		CHECK(tf_same_in(s.root, "base/a.txt", s.dest, "a.txt"));
		CHECK(tf_same_in(s.root, "base/sub/deep/b.txt", s.dest,
				 "sub/deep/b.txt"));
		CHECK(!tf_exists_in(s.dest, "sub/other.txt"));
		CHECK(is_dir_in(s.dest, "dir"));
		CHECK(!tf_exists_in(s.dest, "dir/x")); /* no -r */
		CHECK_EQ(tf_count_named(s.home, "secret"), 0);
		CHECK_EQ(tf_count_named(s.home, "link"), 0);
		CHECK_EQ(tf_count_named(s.home, "rdcp-part"), 0);
		ls_finish(&s);
	}
}

/* -r: a listed directory comes as a tree; filters apply on the receiver. */
static void test_list_recursive_filtered(void)
{
	struct lsess s;

	ls_init(&s);
	mkdir_in(s.root, "base/tree");
	mkdir_in(s.root, "base/tree/in");
	mkfile(s.root, "base/tree/in/c.txt", 2 * CHUNK);
	mkfile(s.root, "base/tree/in/c.o", 10);
	mkfile(s.root, "base/x.o", 10);
	mkfile(s.root, "base/y.txt", 10);
	/* NUL-separated, as find -print0 writes */
	s.list = "tree\0x.o\0y.txt\0";
	s.list_len = 15;
	s.from0 = true;
	s.recursive = true;
	s.exclude = "*.o";
	ls_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK(tf_same_in(s.root, "base/tree/in/c.txt", s.dest,
			 "tree/in/c.txt"));
	CHECK(tf_same_in(s.root, "base/y.txt", s.dest, "y.txt"));
	CHECK(!tf_exists_in(s.dest, "tree/in/c.o"));
	CHECK(!tf_exists_in(s.dest, "x.o"));
	ls_finish(&s);
}

/* --dry-run: every name answered, nothing made here, DEST included. */
static void test_list_dry_run(void)
{
	struct lsess s;

	ls_init(&s);
	mkdir_in(s.root, "base/sub");
	mkfile(s.root, "base/sub/a", 10);
	mkfile(s.root, "base/b", 10);
	ls_list(&s, "sub/a\nb\n");
	s.dry_run = true;
	ls_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.st.files_ok, 3);
	CHECK(!tf_exists_in(s.home, "out"));
	ls_finish(&s);
}

/*
 * A list many times the window (WIRE_NAMES_WINDOW) of long names, most of
 * them small files that travel packed, with tags: the client sends as the
 * receiver says it is through with names, every file arrives.
 */
static void test_list_many(void)
{
	enum {
		DIRS = 10,
		PER = 1000
	};
	const char *pad = "a_name_long_enough_that_the_list_is_many_windows_"
			  "long_on_the_wire_";
	struct lsess s;
	size_t cap = (size_t)DIRS * PER * 160, len = 0;
	char *text = malloc(cap), rel[300];
	uint64_t cost = 0;

	ls_init(&s);
	s.keyed = true;
	for (int d = 0; d < DIRS && text; d++) {
		snprintf(rel, sizeof(rel), "base/d%02d", d);
		mkdir_in(s.root, rel);
		for (int i = 0; i < PER; i++) {
			snprintf(rel, sizeof(rel), "d%02d/%s%04d", d, pad, i);
			len += (size_t)snprintf(text + len, cap - len, "%s\n",
						rel);
			cost += wire_name_cost(strlen(rel));
			snprintf(rel, sizeof(rel), "base/d%02d/%s%04d", d, pad,
				 i);
			/* one in 50 takes several chunks: not packed */
			mkfile(s.root, rel, i % 50 ? (size_t)i : 2 * CHUNK + 1);
		}
	}
	CHECK(cost > 3 * (uint64_t)WIRE_NAMES_WINDOW);
	s.list = text;
	s.list_len = len;
	ls_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.st.files_ok, DIRS * PER + DIRS);
	CHECK(s.st.files_packed > 0);
	snprintf(rel, sizeof(rel), "d%02d/%s%04d", DIRS - 1, pad, PER - 1);
	CHECK(tf_exists_in(s.dest, rel));
	snprintf(rel, sizeof(rel), "d03/%s0100", pad);
	CHECK(tf_exists_in(s.dest, rel));
	ls_finish(&s);
	free(text);
}

/*
 * A name listed twice, the second time while the first is still in
 * flight (in another pack, placed by another worker): sent once, as
 * rsync does. Both copies used to travel, and two workers placing packs
 * with the same name raced on its temporary: "cannot rename into" (exit
 * 9) now and then, and twice the files counted always.
 */
static void test_list_duplicates(void)
{
	enum {
		N = 120,
		RUN = 10
	};
	struct lsess s;
	char *text = malloc(N * 2 * 16), rel[64];
	size_t len = 0;

	ls_init(&s);
	for (int i = 0; i < N && text; i++) {
		snprintf(rel, sizeof(rel), "base/f%03d", i);
		mkfile(s.root, rel, 600 + (size_t)i * 7);
	}
	/* runs of RUN names, each run twice: f000..f009 f000..f009 ... */
	for (int r = 0; r < N / RUN && text; r++)
		for (int twice = 0; twice < 2; twice++)
			for (int i = r * RUN; i < (r + 1) * RUN; i++)
				len += (size_t)sprintf(text + len, "f%03d\n", i);
	/* and the first name once more at the end */
	if (text)
		len += (size_t)sprintf(text + len, "f000\n");
	s.list = text;
	s.list_len = len;
	ls_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.st.files_failed, 0);
	CHECK(s.st.files_packed > 0);
	/* each once; the last f000 came after the first was done: again */
	CHECK(s.st.files_ok == N || s.st.files_ok == N + 1);
	if (s.st.files_ok != N && s.st.files_ok != N + 1)
		printf("#   %llu files copied for %d names\n",
		       (unsigned long long)s.st.files_ok, N);
	for (int i = 0; i < N; i++) {
		snprintf(rel, sizeof(rel), "f%03d", i);
		CHECK(tf_exists_in(s.dest, rel));
	}
	CHECK_EQ(tf_count_named(s.home, "rdcp-part"), 0);
	ls_finish(&s);
	free(text);
}

/* ---- a malicious client against the real receiver ---- */

/* The client's handshake by hand: HELLO (a pull of base), AUTH, RING. */
static int evil_client_hello(struct engine *e, uint32_t flags, const char *base)
{
	struct wire_msg *m = calloc(1, sizeof(*m));
	struct wire_msg *w = calloc(1, sizeof(*w));
	struct wire_hello *h = m ? &m->u.hello : NULL;
	uint8_t ck[AUTH_CTRL_KEY_LEN];
	int rc = m && w ? 0 : -ENOMEM;

	if (!rc) {
		m->type = WIRE_HELLO;
		h->role = WIRE_PULL;
		h->csum = WIRE_CSUM_CRC32;
		h->flags = flags;
		h->features = WIRE_FEAT_AUTH;
		h->chunk_size = CHUNK;
		if (getrandom(h->nonce, WIRE_NONCE_LEN, 0) != WIRE_NONCE_LEN)
			rc = -EIO;
	}
	if (!rc)
		rc = wire_hello_add_path(h, base);
	if (!rc)
		rc = engine_send(e, m);
	if (!rc)
		rc = engine_expect(e, WIRE_WELCOME, w, 5000);
	if (!rc) {
		struct wire_hello hello = *h;

		memset(m, 0, sizeof(*m));
		m->type = WIRE_AUTH;
		rc = auth_mac(KEY, AUTH_CLIENT, &hello, &w->u.welcome,
			      m->u.auth.mac);
		if (!rc)
			rc = auth_ctrl_key(KEY, &hello, w->u.welcome.nonce, ck);
	}
	if (!rc) {
		engine_mac_key(e, ck, false);
		engine_mac_rx_start(e);
		rc = engine_send_last_plain(e, m);
	}
	if (!rc)
		rc = session_rings(e, true);
	free(m);
	free(w);
	return rc;
}

/* Sends n names of len bytes from number first, 8 a message; END last. */
static int send_names(struct engine *e, unsigned int first, unsigned int n,
		      size_t len, bool end)
{
	struct wire_msg *m = calloc(1, sizeof(*m));
	char name[WIRE_NAME_MAX + 1];
	int rc = m ? 0 : -ENOMEM;

	for (unsigned int i = 0; !rc && i < n; i++) {
		if (!m->u.names.count) {
			memset(m, 0, sizeof(*m));
			m->type = WIRE_NAMES;
		}
		snprintf(name, sizeof(name), "%08u", first + i);
		memset(name + 8, 'n', len - 8);
		name[len] = '\0';
		rc = wire_names_add(&m->u.names, name, len);
		if (!rc && (m->u.names.count == 8 || i + 1 == n)) {
			if (end && i + 1 == n)
				m->u.names.flags = WIRE_NAMES_END;
			rc = engine_send(e, m);
			m->u.names.count = 0;
		}
	}
	free(m);
	return rc;
}

/* The evil client's role: takes whatever comes, answers nothing. */
struct mute {
	int ms;	      /* run this long, then stop (0: until a failure) */
	uint64_t t0;  /* when it began */
	bool stopped; /* ran its time without a failure */
};

static int mute_msg(struct engine *e, const struct wire_msg *m)
{
	return 0;
}

static int mute_data(struct engine *e, const struct cm_event *ev)
{
	return 0; /* slots never released: the receiver's plan stalls */
}

static int mute_write_done(struct engine *e, uint64_t wr_id)
{
	return 0;
}

static bool mute_finished(const struct engine *e)
{
	struct mute *x = e->role_data;
	struct timespec now;
	uint64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	if (!x->t0)
		x->t0 = ms;
	if (x->ms && ms - x->t0 >= (uint64_t)x->ms)
		x->stopped = true;
	return x->stopped;
}

static const struct engine_role mute_role = {
	.on_msg = mute_msg,
	.on_data = mute_data,
	.on_write_done = mute_write_done,
	.finished = mute_finished,
};

struct evil_client {
	uint32_t flags;
	int (*act)(struct engine *e, struct evil_client *c);
	/* out */
	enum xfer_fail vs; /* the receiver's verdict */
	bool sat;	   /* the receiver took the first part silently */
	char why[600];	   /* what the receiver told it */
};

/* The real receiver against c over memconn; a big file in base first. */
static void run_evil_client(struct evil_client *c)
{
	struct cm_geom g = geom();
	struct xfer_opts o;
	struct lsess s;
	struct cm_conn *a = NULL;
	struct engine e;
	pthread_t tid;

	ls_init(&s);
	mkfile(s.root, "base/big", 64 * CHUNK);
	xopts(&s.so);
	s.so.link.key = KEY;
	o = s.so;
	s.rootfd = open(s.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(memconn_pair(&g, NULL, &a, &s.b), 0);
	alarm(WATCHDOG_S);
	CHECK_EQ(pthread_create(&tid, NULL, real_server, &s), 0);
	CHECK_EQ(engine_init(&e, a, &o), 0);
	if (!evil_client_hello(&e, c->flags, "base"))
		c->act(&e, c);
	snprintf(c->why, sizeof(c->why), "%s", e.why);
	engine_release(&e);
	cm_conn_destroy(a);
	pthread_join(tid, NULL);
	alarm(0);
	cm_conn_destroy(s.b);
	close(s.rootfd);
	c->vs = s.vs;
	ls_finish(&s);
}

/* Runs the mute role for ms (0: until the session fails). */
static int mute_run(struct engine *e, int ms)
{
	struct mute x = { .ms = ms };
	int rc = engine_run(e, &mute_role, &x);

	return rc ? rc : x.stopped ? 0 : -EIO;
}

/*
 * One window's worth of names, then as much again, never waiting for a
 * NAMES_ACK. The first name is a big file whose chunks this client never
 * takes, so the receiver's plan stalls there and it is through with no
 * name after it: what it holds only grows, up to the window.
 */
static int flood(struct engine *e, struct evil_client *c)
{
	/* 1024 bytes of cost a name */
	size_t len = 1024 - WIRE_NAME_OVERHEAD - 1;
	unsigned int per_window = WIRE_NAMES_WINDOW / 1024;
	struct wire_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return -1;
	m->type = WIRE_NAMES;
	if (wire_names_add(&m->u.names, "big", 3) || engine_send(e, m) ||
	    send_names(e, 0, per_window - 1, len, false)) {
		free(m);
		return -1;
	}
	free(m);
	c->sat = !mute_run(e, 800);
	if (send_names(e, per_window, per_window, len, false))
		return -1;
	return mute_run(e, 0);
}

static void test_list_flood(void)
{
	struct evil_client c = { .flags = WIRE_HELLO_LIST, .act = flood };

	run_evil_client(&c);
	CHECK(c.sat); /* a window full is taken */
	CHECK_EQ(c.vs, XFER_FAIL_PROTOCOL);
	if (!strstr(c.why, "more file names than it was given room for")) {
		printf("#   client heard: %s\n", c.why);
		CHECK(0);
	}
}

static int names_then_more(struct engine *e, struct evil_client *c)
{
	if (send_names(e, 0, 2, 20, true) || send_names(e, 2, 1, 20, false))
		return -1;
	return mute_run(e, 0);
}

/* NAMES in a session without a list, or after the list's end. */
static void test_list_names_unasked(void)
{
	struct evil_client c = { .flags = 0, .act = names_then_more };

	run_evil_client(&c);
	CHECK_EQ(c.vs, XFER_FAIL_PROTOCOL);
	CHECK(strstr(c.why, "unexpected NAMES") != NULL);

	memset(&c, 0, sizeof(c));
	c.flags = WIRE_HELLO_LIST;
	c.act = names_then_more;
	run_evil_client(&c);
	CHECK_EQ(c.vs, XFER_FAIL_PROTOCOL);
	CHECK(strstr(c.why, "after the end of its list") != NULL);
}

/*
 * A client that sends what an honest one refuses itself: the receiver
 * refuses "../outside/secret" as a name beneath base (a failed entry, not
 * a read), and sends the rest.
 */
static void test_list_dotdot_server_side(void)
{
	struct cm_geom g = geom();
	struct sink_target t = { .dirfd = -1 };
	struct wire_msg *m = calloc(1, sizeof(*m));
	struct xfer_stats st = { 0 };
	struct xfer_opts o;
	struct lsess s;
	struct cm_conn *a = NULL;
	struct engine e;
	pthread_t tid;

	ls_init(&s);
	mkfile(s.root, "base/a.txt", 100);
	mkdir_in(s.root, "outside");
	mkfile(s.root, "outside/secret", 100);
	xopts(&s.so);
	s.so.link.key = KEY;
	o = s.so;
	s.rootfd = open(s.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(memconn_pair(&g, NULL, &a, &s.b), 0);
	alarm(WATCHDOG_S);
	CHECK_EQ(pthread_create(&tid, NULL, real_server, &s), 0);
	CHECK_EQ(engine_init(&e, a, &o), 0);
	CHECK(m != NULL);
	if (m && !evil_client_hello(&e, WIRE_HELLO_LIST, "base")) {
		m->type = WIRE_NAMES;
		CHECK_EQ(wire_names_add(&m->u.names, "../outside/secret", 17),
			 0);
		CHECK_EQ(wire_names_add(&m->u.names, "a.txt", 5), 0);
		m->u.names.flags = WIRE_NAMES_END;
		CHECK_EQ(engine_send(&e, m), 0);
		/* a sink that takes anything (no list, nothing asked) */
		CHECK_EQ(mkdir(s.dest, 0755), 0);
		t.dirfd = open(s.dest, O_PATH | O_DIRECTORY | O_CLOEXEC);
		t.is_dir = true;
		t.umask = 022;
		t.p.csum = XFER_CSUM_CRC32;
		t.p.pack = true;
		sink_run(&e, &t, &st);
	}
	CHECK(!e.fail);
	CHECK_EQ(st.files_failed, 1);
	CHECK_EQ(st.files_ok, 1);
	engine_release(&e);
	cm_conn_destroy(a);
	pthread_join(tid, NULL);
	alarm(0);
	cm_conn_destroy(s.b);
	close(s.rootfd);
	if (t.dirfd >= 0)
		close(t.dirfd);
	CHECK_EQ(s.vs, XFER_FAIL_PARTIAL);
	CHECK(tf_same_in(s.root, "base/a.txt", s.dest, "a.txt"));
	CHECK_EQ(tf_count_named(s.home, "secret"), 0);
	free(m);
	ls_finish(&s);
}

/* ---- a malicious receiver against the real client ---- */

/* The receiver's handshake by hand (pullpeer.h), then the client's list. */
static int evil_server_hello(struct engine *e, struct wire_hello *h,
			     uint8_t key[AEAD_KEY_LEN])
{
	struct wire_msg *m = calloc(1, sizeof(*m));
	int rc = m ? pp_welcome(e, KEY, h, key) : -ENOMEM;

	if (!rc)
		rc = session_rings(e, false);
	/* The client's whole list: one NAMES with END, for small lists. */
	if (m)
		memset(m, 0, sizeof(*m));
	while (!rc && !(m->u.names.flags & WIRE_NAMES_END)) {
		rc = engine_expect(e, WIRE_NAMES, m, 5000);
		if (!rc && m->type != WIRE_NAMES)
			rc = -EPROTO;
	}
	free(m);
	return rc;
}

/*
 * Walks a list of its own choosing beneath base (as a push walks one), a
 * raw FILE, or answers for names never sent.
 */
static void *evil_server(void *arg)
{
	struct lsess *s = arg;
	struct wire_hello *h = calloc(1, sizeof(*h));
	struct wire_msg *m = calloc(1, sizeof(*m));
	const char *srcs[1] = { s->base };
	struct xfer_stats st = { 0 };
	uint8_t key[AEAD_KEY_LEN];
	struct engine e;

	if (!h || !m || engine_init(&e, s->b, &s->so)) {
		free(h);
		free(m);
		return NULL;
	}
	if (evil_server_hello(&e, h, key)) {
		/* the client said why */
	} else if (s->bogus_ack) {
		m->type = WIRE_NAMES_ACK;
		m->u.names_ack.done = s->bogus_ack;
		/* the client hangs up on it: an error here */
		if (!engine_send(&e, m) &&
		    !engine_expect(&e, WIRE_CREDIT, m, 5000))
			CHECK(0);
	} else if (s->raw.path[0]) {
		m->type = WIRE_FILE;
		m->u.file = s->raw;
		if (!engine_send(&e, m) &&
		    !engine_expect(&e, WIRE_FILE_RESULT, m, 5000))
			CHECK(0);
	} else {
		FILE *list = fmemopen((void *)s->evil_list,
				      strlen(s->evil_list), "r");
		struct source_cfg cfg = {
			.srcs = srcs,
			.nsrcs = 1,
			.rootfd = s->rootfd,
			.list = list,
			.list_sep = '\n',
			.p = {
				.flags = (h->flags | s->evil_or_flags) &
					 ~WIRE_HELLO_LIST,
				.csum = (enum xfer_csum)h->csum,
				.server = true,
				.pack = true,
			},
		};

		if (list) {
			src_run(&e, &cfg, &st);
			fclose(list);
		}
	}
	engine_tell_peer(&e);
	engine_release(&e);
	free(h);
	free(m);
	return NULL;
}

/* The client asked for want.txt; .bashrc came too, in a FILE or packed. */
static void test_list_evil_other_name(void)
{
	struct lsess s;

	for (int packed = 0; packed < 2; packed++) {
		size_t size = packed ? 100 : 3 * CHUNK;

		ls_init(&s);
		s.keyed = true;
		s.server = evil_server;
		mkfile(s.root, "base/want.txt", size);
		mkfile(s.root, "base/.bashrc", size);
		ls_list(&s, "want.txt\n");
		s.evil_list = "want.txt\n.bashrc\n";
		ls_run(&s);
		refused(&s, ".bashrc");
		CHECK(!tf_exists_in(s.dest, ".bashrc"));
		CHECK_EQ(tf_count_named(s.home, "bashrc"), 0);
		ls_finish(&s);
	}
}

/* A tree beneath a listed name without -r; a name before it was sent. */
static void test_list_evil_tree(void)
{
	struct lsess s;

	ls_init(&s);
	s.keyed = true;
	s.server = evil_server;
	mkdir_in(s.root, "base/d");
	mkdir_in(s.root, "base/d/.ssh");
	mkfile(s.root, "base/d/.ssh/authorized_keys", 300);
	ls_list(&s, "d\n");
	s.evil_list = "d\n";
	s.evil_or_flags = WIRE_HELLO_RECURSIVE;
	ls_run(&s);
	refused(&s, "d/.ssh");
	CHECK_EQ(tf_count_named(s.home, "ssh"), 0);
	ls_finish(&s);

	/* the implied directory of a name the list does not have */
	ls_init(&s);
	s.keyed = true;
	s.server = evil_server;
	mkdir_in(s.root, "base/e");
	mkfile(s.root, "base/e/f", 10);
	mkfile(s.root, "base/a", 10);
	ls_list(&s, "a\n");
	s.evil_list = "a\ne/f\n";
	ls_run(&s);
	refused(&s, "'e'");
	CHECK(!tf_exists_in(s.dest, "e"));
	ls_finish(&s);
}

/* A symlink where the list named a file. */
static void test_list_evil_symlink(void)
{
	struct lsess s;

	ls_init(&s);
	s.keyed = true;
	s.server = evil_server;
	ls_list(&s, "want.txt\n");
	snprintf(s.raw.path, sizeof(s.raw.path), "want.txt");
	snprintf(s.raw.link, sizeof(s.raw.link), "/etc/passwd");
	s.raw.kind = WIRE_KIND_SYMLINK;
	s.raw.mode = 0777;
	ls_run(&s);
	refused(&s, "symlink");
	CHECK(!tf_exists_in(s.dest, "want.txt"));
	ls_finish(&s);
}

/* A NAMES_ACK for more names than were sent. */
static void test_list_evil_ack(void)
{
	struct lsess s;

	ls_init(&s);
	s.keyed = true;
	s.server = evil_server;
	ls_list(&s, "a\nb\n");
	s.bogus_ack = 3;
	ls_run(&s);
	refused(&s, "file names it was never sent");
	ls_finish(&s);
}

/*
 * The same with writes and control messages arriving in a shuffled order,
 * as over several queue pairs: a NAMES_ACK may overtake the packed slots
 * it speaks of, and must wait for them (its seq_end), or the names of
 * those packs would be dropped before the packs are checked.
 */
static void test_list_many_lanes(void)
{
	ls_faults.lanes = 3;
	ls_faults.seed = 7;
	test_list_many();
	memset(&ls_faults, 0, sizeof(ls_faults));
}

TAP_RUN(TAP_TEST(test_list_names), TAP_TEST(test_list_recursive_filtered),
	TAP_TEST(test_list_duplicates),
	TAP_TEST(test_list_dry_run), TAP_TEST(test_list_many),
	TAP_TEST(test_list_flood), TAP_TEST(test_list_names_unasked),
	TAP_TEST(test_list_dotdot_server_side),
	TAP_TEST(test_list_evil_other_name), TAP_TEST(test_list_evil_tree),
	TAP_TEST(test_list_evil_symlink), TAP_TEST(test_list_evil_ack),
	TAP_TEST(test_list_many_lanes))
