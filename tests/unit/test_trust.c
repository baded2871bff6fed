/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The client must not trust the server (issue #16, items 10 and 15): whole
 * sessions over a memconn pair (memconn.h) between the real client,
 * session_client(), and a receiver that holds the key but lies.
 *
 * Pulls: the evil server runs the handshake itself and then the real data
 * source over a tree of its choosing (so FILE, chunks, packed slots,
 * --resume and --encrypt are the real thing), or sends raw FILE messages
 * (a symlink as a top name, which no honest walk sends). The client asks
 * for one set of names; whatever else comes must end the session with a
 * protocol error, exit 5, and nothing of it on disk.
 *
 * Pushes: the evil receiver is a small sink role of its own that drains
 * the ring and answers with forged FILE_RESULT, HAVE and PACK_DONE
 * messages: a verdict before FILE_END, SKIPPED without -n/-u, a digest that
 * is not the client's, a pack answered twice, answers naming files the
 * client finished and freed long ago.
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
#include "util/checksum.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK 4096u
#define WATCHDOG_S 120

static const uint8_t KEY[32] = {
	0x5e, 0xc7, 0x12, 0x01, 0x99, 0x42, 0x13, 0x37, 0x0a, 0xbc, 0xde,
	0xf0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
	0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x02, 0x03, 0x04, 0x05
};

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

static void mkfile(const char *dir, const char *rel, size_t size, mode_t mode)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	CHECK_EQ(tf_make_file(p, size, size + strlen(rel)), 0);
	CHECK_EQ(chmod(p, mode), 0);
}

static void mkdir_in(const char *dir, const char *rel, mode_t mode)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	CHECK_EQ(mkdir(p, mode), 0);
	CHECK_EQ(chmod(p, mode), 0);
}

static mode_t mode_in(const char *dir, const char *rel)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static void xopts(struct xfer_opts *o, uint16_t window)
{
	xfer_opts_init(o);
	o->link.chunk_size = CHUNK;
	o->link.window = window;
	o->link.workers = 2;
	o->link.timeout_ms = 5000;
}

static struct cm_geom geom(uint16_t window)
{
	struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = window,
		.chunk_size = CHUNK,
	};

	return g;
}

/* ---- pulls from a server that sends what it likes ---- */

struct pull {
	/* the client's command: rdcp [-r] [-p] ... HOST:SRC... home/DEST */
	const char *srcs[8];
	size_t nsrcs;
	const char *dest; /* beneath home, NULL: home itself */
	bool recursive, preserve, resume, encrypt, no_clobber, delete_extra;
	/* the server: its walk of send[] beneath its root ... */
	const char *send[8];
	size_t nsend;
	uint32_t or_flags; /* added to the client's (RECURSIVE: a tree) */
	/* ... or these FILE messages (an empty file, a dir, a symlink) */
	struct wire_file raw[4];
	size_t nraw;
	/* out */
	enum xfer_fail vc;
	struct xfer_stats st;
	/* private */
	char home[64], sroot[64];
	struct cm_conn *b;
	struct xfer_opts so;
	int fds_before;
};

static void pull_init(struct pull *t)
{
	memset(t, 0, sizeof(*t));
	t->fds_before = tf_count_fds();
	strcpy(t->home, "/tmp/rdcp-trust-home.XXXXXX");
	strcpy(t->sroot, "/tmp/rdcp-trust-srv.XXXXXX");
	CHECK(mkdtemp(t->home) != NULL);
	CHECK(mkdtemp(t->sroot) != NULL);
}

static void pull_finish(struct pull *t)
{
	CHECK_EQ(tf_rm_tree(t->home), 0);
	CHECK_EQ(tf_rm_tree(t->sroot), 0);
	CHECK_EQ(tf_count_fds(), t->fds_before);
}

static void send_raw(struct engine *e, struct pull *t)
{
	struct wire_msg *m = calloc(1, sizeof(*m));
	size_t i;

	for (i = 0; m && i < t->nraw; i++) {
		memset(m, 0, sizeof(*m));
		m->type = WIRE_FILE;
		m->u.file = t->raw[i];
		m->u.file.file_id = (uint32_t)i;
		if (engine_send(e, m))
			break;
		if (t->raw[i].kind != WIRE_KIND_FILE)
			continue;
		memset(m, 0, sizeof(*m)); /* empty: its CRC32 digest is 0 */
		m->type = WIRE_FILE_END;
		m->u.end.file_id = (uint32_t)i;
		m->u.end.csum = WIRE_CSUM_CRC32;
		m->u.end.digest_len = 4;
		if (engine_send(e, m))
			break;
	}
	if (m && i == t->nraw) {
		memset(m, 0, sizeof(*m));
		m->type = WIRE_DONE;
		m->u.done.flags = WIRE_DONE_WHOLE; /* whatever it sent */
		if (!engine_send(e, m))
			for (i = 0; i < t->nraw; i++)
				if (engine_expect(e, WIRE_FILE_RESULT, m, 5000))
					break;
		if (i == t->nraw && !engine_expect(e, WIRE_BYE, m, 5000))
			e->closing = true;
	}
	free(m);
}

static void *evil_server(void *arg)
{
	struct pull *t = arg;
	struct wire_hello *h = calloc(1, sizeof(*h));
	struct xfer_stats st = { 0 };
	uint8_t key[AEAD_KEY_LEN];
	struct engine e;
	int rootfd = open(t->sroot, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (!h || rootfd < 0 || engine_init(&e, t->b, &t->so)) {
		free(h);
		if (rootfd >= 0)
			close(rootfd);
		return NULL;
	}
	if (pp_welcome(&e, t->encrypt ? KEY : NULL, h, key) ||
	    session_rings(&e, false)) {
		/* the client said why */
	} else if (t->nraw) {
		send_raw(&e, t);
	} else {
		struct source_cfg cfg = {
			.srcs = t->send,
			.nsrcs = t->nsend,
			.rootfd = rootfd,
			.p = {
				.flags = h->flags | t->or_flags,
				.csum = (enum xfer_csum)h->csum,
				.level = h->level,
				.data_key = t->encrypt ? key : NULL,
				.server = true,
				.pack = true,
			},
		};

		src_run(&e, &cfg, &st);
	}
	engine_tell_peer(&e);
	engine_release(&e);
	close(rootfd);
	free(h);
	return NULL;
}

static void pull_run(struct pull *t)
{
	struct cm_geom g = geom(8);
	struct xfer_opts co;
	char dest[256];

	xopts(&co, 8);
	co.copy.pull = true;
	co.copy.srcs = t->srcs;
	co.copy.nsrcs = t->nsrcs;
	co.copy.recursive = t->recursive;
	co.copy.preserve = t->preserve;
	co.copy.resume = t->resume;
	co.copy.no_clobber = t->no_clobber;
	co.copy.delete_extra = t->delete_extra;
	co.copy.encrypt = t->encrypt;
	co.link.key = t->encrypt ? KEY : NULL;
	snprintf(dest, sizeof(dest), "%s/%s", t->home, t->dest ? t->dest : "");
	co.copy.dest = dest;
	xopts(&t->so, 8);
	t->vc = pp_run_client(&co, &g, NULL, &t->b, evil_server, t, WATCHDOG_S,
			      &t->st);
}

/* The pull was refused as a protocol violation naming name. */
static void refused(const struct pull *t, const char *name)
{
	CHECK(pp_refused(t->vc, &t->st, name));
}

/* An honest server: it sends just what was asked for. */
static void test_pull_honest(void)
{
	struct pull t;

	pull_init(&t);
	mkdir_in(t.sroot, "sub", 0755);
	mkfile(t.sroot, "sub/want.txt", 5000, 0644);
	mkdir_in(t.sroot, "d", 0755);
	mkfile(t.sroot, "d/small", 10, 0644);
	mkdir_in(t.sroot, "d/deeper", 0755);
	mkfile(t.sroot, "d/deeper/big", 3 * CHUNK + 1, 0600);
	mkfile(t.sroot, "top.txt", 20, 0644);
	/* as typed; the server walks them normalized, as server_hello.c does */
	t.srcs[0] = "./sub/want.txt";
	t.srcs[1] = "d/";
	t.srcs[2] = "/top.txt";
	t.nsrcs = 3;
	t.send[0] = "sub/want.txt";
	t.send[1] = "d/";
	t.send[2] = "top.txt";
	t.nsend = 3;
	t.recursive = true;
	pull_run(&t);
	CHECK_EQ(t.vc, XFER_OK);
	CHECK(tf_same_in(t.sroot, "sub/want.txt", t.home, "want.txt"));
	CHECK(tf_same_in(t.sroot, "d/small", t.home, "d/small"));
	CHECK(tf_same_in(t.sroot, "d/deeper/big", t.home, "d/deeper/big"));
	CHECK(tf_same_in(t.sroot, "top.txt", t.home, "top.txt"));
	pull_finish(&t);

	/* DEST is the new name of the only SRC */
	pull_init(&t);
	mkdir_in(t.sroot, "a", 0755);
	mkfile(t.sroot, "a/want.txt", 100, 0644);
	t.srcs[0] = "a/want.txt";
	t.nsrcs = 1;
	t.send[0] = "a/want.txt";
	t.nsend = 1;
	t.dest = "renamed";
	pull_run(&t);
	CHECK_EQ(t.vc, XFER_OK);
	CHECK(tf_same_in(t.sroot, "a/want.txt", t.home, "renamed"));
	pull_finish(&t);
}

/* want.txt asked for; other.txt, or .bashrc as well, came. */
static void test_pull_other_name(void)
{
	struct pull t;

	pull_init(&t);
	mkfile(t.sroot, "other.txt", 3 * CHUNK, 0644);
	t.srcs[0] = "want.txt";
	t.nsrcs = 1;
	t.send[0] = "other.txt";
	t.nsend = 1;
	pull_run(&t);
	refused(&t, "other.txt");
	CHECK(!tf_exists_in(t.home, "other.txt"));
	CHECK_EQ(tf_count_named(t.home, ""), 0);
	pull_finish(&t);

	/* into a DEST directory, as the second name of the session */
	pull_init(&t);
	mkfile(t.sroot, "want.txt", 2 * CHUNK, 0644);
	mkfile(t.sroot, ".bashrc", 2 * CHUNK, 0644);
	t.srcs[0] = "want.txt";
	t.nsrcs = 1;
	t.send[0] = "want.txt";
	t.send[1] = ".bashrc";
	t.nsend = 2;
	pull_run(&t);
	refused(&t, ".bashrc");
	CHECK(!tf_exists_in(t.home, ".bashrc"));
	pull_finish(&t);
}

/* A packed slot carrying .profile (never id 0: after want.txt). */
static void test_pull_packed_name(void)
{
	struct pull t;

	for (int enc = 0; enc < 2; enc++) {
		pull_init(&t);
		mkfile(t.sroot, "want.txt", 100, 0644);
		mkfile(t.sroot, ".profile", 100, 0644);
		t.srcs[0] = "want.txt";
		t.nsrcs = 1;
		t.send[0] = "want.txt";
		t.send[1] = ".profile";
		t.nsend = 2;
		t.encrypt = enc;
		pull_run(&t);
		refused(&t, ".profile");
		CHECK(!tf_exists_in(t.home, ".profile"));
		CHECK_EQ(t.st.files_packed, 0);
		pull_finish(&t);
	}
}

/* A name asked for once, sent twice (the second time packed). */
static void test_pull_name_twice(void)
{
	struct pull t;

	pull_init(&t);
	mkfile(t.sroot, "want.txt", 100, 0644);
	t.srcs[0] = "want.txt";
	t.nsrcs = 1;
	t.send[0] = "want.txt";
	t.send[1] = "want.txt";
	t.nsend = 2;
	pull_run(&t);
	refused(&t, "want.txt");
	pull_finish(&t);
}

/* .ssh/authorized_keys: a tree nobody asked for, with -r and without. */
static void test_pull_ssh_tree(void)
{
	struct pull t;

	for (int r = 0; r < 2; r++) {
		pull_init(&t);
		mkdir_in(t.sroot, "want", 0755);
		mkfile(t.sroot, "want/a", 100, 0644);
		mkdir_in(t.sroot, ".ssh", 0700);
		mkfile(t.sroot, ".ssh/authorized_keys", 300, 0600);
		t.srcs[0] = "want";
		t.nsrcs = 1;
		t.send[0] = ".ssh";
		t.nsend = 1;
		t.recursive = r;
		t.or_flags = WIRE_HELLO_RECURSIVE;
		pull_run(&t);
		refused(&t, ".ssh");
		CHECK(!tf_exists_in(t.home, ".ssh"));
		CHECK_EQ(tf_count_named(t.home, ""), 0);
		pull_finish(&t);
	}
}

/* A file asked for without -r; the server sends a whole tree. */
static void test_pull_tree_without_r(void)
{
	struct pull t;

	pull_init(&t);
	mkdir_in(t.sroot, "want", 0755);
	mkfile(t.sroot, "want/x", 100, 0644);
	mkfile(t.sroot, "want/y", 3 * CHUNK, 0644);
	t.srcs[0] = "want";
	t.nsrcs = 1;
	t.send[0] = "want";
	t.nsend = 1;
	t.or_flags = WIRE_HELLO_RECURSIVE;
	pull_run(&t);
	refused(&t, "want");
	CHECK(!tf_exists_in(t.home, "want"));
	CHECK_EQ(tf_count_named(t.home, ""), 0);
	pull_finish(&t);

	/* beneath a name asked for as a file, with -r */
	pull_init(&t);
	t.srcs[0] = "want";
	t.nsrcs = 1;
	t.recursive = true;
	t.raw[0].kind = WIRE_KIND_FILE;
	strcpy(t.raw[0].path, "want");
	t.raw[1].kind = WIRE_KIND_FILE;
	strcpy(t.raw[1].path, "want/inner");
	t.nraw = 2;
	t.dest = "sub/";
	mkdir_in(t.home, "sub", 0755);
	mkdir_in(t.home, "sub/want", 0755);
	pull_run(&t);
	refused(&t, "want/inner");
	CHECK(!tf_exists_in(t.home, "sub/want/inner"));
	pull_finish(&t);
}

/* A symlink want -> /etc/shadow where want was asked for. */
static void test_pull_symlink_top(void)
{
	struct pull t;

	for (int r = 0; r < 2; r++) {
		pull_init(&t);
		t.srcs[0] = "want";
		t.nsrcs = 1;
		t.recursive = r;
		t.raw[0].kind = WIRE_KIND_SYMLINK;
		strcpy(t.raw[0].path, "want");
		strcpy(t.raw[0].link, "/etc/shadow");
		t.nraw = 1;
		pull_run(&t);
		refused(&t, "want");
		CHECK(!tf_exists_in(t.home, "want"));
		pull_finish(&t);
	}
}

/* -p -r: a directory .ssh, mode 0777, against the user's .ssh 0700. */
static void test_pull_ssh_mode(void)
{
	struct pull t;

	pull_init(&t);
	mkdir_in(t.home, ".ssh", 0700);
	mkdir_in(t.sroot, "want", 0755);
	mkdir_in(t.sroot, ".ssh", 0777);
	t.srcs[0] = "want";
	t.nsrcs = 1;
	t.send[0] = "want";
	t.send[1] = ".ssh";
	t.nsend = 2;
	t.recursive = true;
	t.preserve = true;
	pull_run(&t);
	refused(&t, ".ssh");
	CHECK_EQ(mode_in(t.home, ".ssh"), 0700);
	pull_finish(&t);

	/*
	 * Asked for by name, it is copied into; an existing directory keeps
	 * its mode and times all the same: only what this pull made gets
	 * the server's.
	 */
	pull_init(&t);
	mkdir_in(t.home, ".ssh", 0700);
	mkdir_in(t.sroot, "dot", 0755);
	mkdir_in(t.sroot, "dot/.ssh", 0777);
	mkdir_in(t.sroot, "dot/.ssh/new", 0751);
	mkfile(t.sroot, "dot/.ssh/config", 100, 0644);
	t.srcs[0] = "dot/.ssh";
	t.nsrcs = 1;
	t.send[0] = "dot/.ssh";
	t.nsend = 1;
	t.recursive = true;
	t.preserve = true;
	pull_run(&t);
	CHECK_EQ(t.vc, XFER_OK);
	CHECK(tf_same_in(t.sroot, "dot/.ssh/config", t.home, ".ssh/config"));
	CHECK_EQ(mode_in(t.home, ".ssh"), 0700);
	CHECK_EQ(mode_in(t.home, ".ssh/new"), 0751);
	pull_finish(&t);
}

/* --resume: an unrequested name is refused before it is looked at. */
static void test_pull_resume_other(void)
{
	struct pull t;
	char p[256];

	pull_init(&t);
	mkfile(t.sroot, "other.txt", 3 * CHUNK, 0644);
	mkfile(t.home, "other.txt", 3 * CHUNK, 0600);
	snprintf(p, sizeof(p), "%s/other.txt", t.home);
	t.srcs[0] = "want.txt";
	t.nsrcs = 1;
	t.send[0] = "other.txt";
	t.nsend = 1;
	t.resume = true;
	pull_run(&t);
	refused(&t, "other.txt");
	CHECK_EQ(mode_in(t.home, "other.txt"), 0600);
	CHECK_EQ(tf_count_named(t.home, ""), 1); /* no temporary */
	pull_finish(&t);

	/* -n answers only for names asked for */
	pull_init(&t);
	mkfile(t.sroot, "want.txt", 100, 0644);
	mkfile(t.sroot, ".bashrc", 100, 0644);
	t.srcs[0] = "want.txt";
	t.nsrcs = 1;
	t.send[0] = "want.txt";
	t.send[1] = ".bashrc";
	t.nsend = 2;
	t.no_clobber = true;
	pull_run(&t);
	refused(&t, ".bashrc");
	CHECK(!tf_exists_in(t.home, ".bashrc"));
	pull_finish(&t);
}

/*
 * --delete: what the server can make the client delete. Only entries
 * beneath a directory it sent as one, in DEST: home/data/extra; never
 * through a symlink (home/data/sub points to the server's root: removed
 * as a link, what it points to stays), never DEST's own entries
 * (home/other), never after an entry failed (the server names data/sub
 * a directory where a symlink is: mkdir fails) or the session broke (a
 * name not asked for), whatever its DONE says.
 */
static void test_pull_delete(void)
{
	struct pull t;

	for (int c = 0; c < 3; c++) {
		pull_init(&t);
		mkdir_in(t.sroot, "victim", 0755);
		mkfile(t.sroot, "victim/keep", 10, 0644);
		mkdir_in(t.home, "data", 0755);
		mkfile(t.home, "data/extra", 10, 0644);
		mkfile(t.home, "other", 10, 0644);
		{
			char at[512], to[512];

			snprintf(at, sizeof(at), "%s/data/sub", t.home);
			snprintf(to, sizeof(to), "%s/victim", t.sroot);
			CHECK_EQ(symlink(to, at), 0);
		}
		t.srcs[0] = "data";
		t.nsrcs = 1;
		t.recursive = t.delete_extra = true;
		t.raw[0].kind = WIRE_KIND_DIR;
		strcpy(t.raw[0].path, "data");
		t.raw[1].kind = c == 1 ? WIRE_KIND_DIR : WIRE_KIND_FILE;
		strcpy(t.raw[1].path, c == 1 ? "data/sub" : "data/a");
		strcpy(t.raw[2].path, "other"); /* not asked for */
		t.nraw = c == 2 ? 3 : 2;
		pull_run(&t);
		if (c == 0) {
			CHECK_EQ(t.vc, XFER_OK);
			CHECK_EQ(t.st.deleted, 2);
			CHECK(!tf_exists_in(t.home, "data/extra"));
			CHECK(!tf_exists_in(t.home, "data/sub"));
		} else {
			if (c == 2)
				refused(&t, "other");
			else
				CHECK(t.vc != XFER_OK);
			CHECK_EQ(t.st.deleted, 0);
			CHECK(tf_exists_in(t.home, "data/extra"));
			CHECK(tf_exists_in(t.home, "data/sub"));
		}
		CHECK(tf_exists_in(t.home, "other"));
		CHECK(tf_exists_in(t.sroot, "victim/keep"));
		pull_finish(&t);
	}
}

/* ---- pushes to a receiver that forges its answers ---- */

enum forge {
	FORGE_HONEST,	  /* echoes FILE_END's digest: the harness works */
	FORGE_EARLY,	  /* a verdict on FILE, before FILE_END */
	FORGE_SKIPPED,	  /* SKIPPED after FILE_END, without -n/-u */
	FORGE_DIGEST,	  /* success with a digest that is not the client's */
	FORGE_HAVE_SKIP,  /* --resume: HAVE SKIP status 0, then SKIPPED */
	FORGE_PACK_TWICE, /* PACK_DONE twice for one pack */
	FORGE_PACK_OK,	  /* a pack answered by FILE_RESULTs of success */
	FORGE_DRY,	  /* --dry-run answers: HAVE SKIP, then DRY */
	FORGE_DRY_DATA,	  /* --dry-run, but HAVE asks for the data */
	FORGE_DRY_END,	  /* a real copy: DRY after FILE_END */
	/* --delete: after DONE, DELETED "in/x" then DELETE_END 1, then BYE */
	FORGE_DEL_HONEST,
	FORGE_DEL_NO_END, /* BYE without DELETE_END */
	FORGE_DEL_EARLY,  /* a DELETED before DONE */
	FORGE_DEL_COUNT,  /* DELETE_END counting 2 for one DELETED */
	FORGE_DEL_PATH,	  /* a DELETED of "../x", not beneath DEST */
	FORGE_DEL_DRY,	  /* a DELETED with the dry-run flag in a real copy */
	/* a tree past two blocks of entries: on DONE, naming file 1 again */
	FORGE_STALE_RESULT, /* its FILE_RESULT */
	FORGE_STALE_PACK,   /* its pack's PACK_DONE */
	FORGE_STALE_HAVE,   /* a HAVE */
	FORGE_STALE_MATCH,  /* a MATCH */
	FORGE_HELD, /* no verdict on id 0 (its block stays); on DONE, 1500's */
};

struct forger {
	enum forge mode;
	struct credit_rx rx;
	uint8_t kind[64];
	bool done, bye_sent;
	unsigned int writes;		 /* data slots that arrived */
	uint32_t pack_first, pack_count; /* the first pack that came */
};

static int forge_send(struct engine *e, struct wire_msg *m)
{
	return engine_send(e, m);
}

static int forge_result(struct engine *e, uint32_t id, uint32_t flags,
			const uint8_t *digest, uint8_t dlen)
{
	struct wire_msg m = { .type = WIRE_FILE_RESULT };

	m.u.result.file_id = id;
	m.u.result.flags = flags;
	m.u.result.digest_len = dlen;
	if (dlen)
		memcpy(m.u.result.digest, digest, dlen);
	return forge_send(e, &m);
}

static int forge_deleted(struct engine *e, const char *path, uint8_t flags)
{
	struct wire_msg m = { .type = WIRE_DELETED };

	m.u.deleted.flags = flags;
	snprintf(m.u.deleted.path, sizeof(m.u.deleted.path), "%s", path);
	return forge_send(e, &m);
}

/* On DONE: a message naming a file answered (and freed) long ago. */
static int forge_stale(struct engine *e, const struct forger *fg)
{
	struct wire_msg m = { .type = WIRE_PACK_DONE };

	switch (fg->mode) {
	case FORGE_STALE_RESULT:
		return forge_result(e, 1, 0, NULL, 0);
	case FORGE_HELD:
		return forge_result(e, 1500, 0, NULL, 0);
	case FORGE_STALE_PACK:
		m.u.pack_done.first_id = fg->pack_first;
		m.u.pack_done.count = fg->pack_count;
		break;
	case FORGE_STALE_HAVE:
		m.type = WIRE_HAVE;
		m.u.have.file_id = 1;
		break;
	case FORGE_STALE_MATCH:
		m.type = WIRE_MATCH;
		m.u.match.file_id = 1;
		m.u.match.count = 1;
		break;
	default:
		return 0;
	}
	return forge_send(e, &m);
}

/* After DONE, before BYE: what the mode says of deletions. */
static int forge_deletions(struct engine *e, enum forge mode)
{
	struct wire_msg m = { .type = WIRE_DELETE_END };

	if (mode < FORGE_DEL_HONEST || mode == FORGE_DEL_NO_END)
		return 0;
	if (forge_deleted(e, mode == FORGE_DEL_PATH ? "../x" : "in/x",
			  mode == FORGE_DEL_DRY ? WIRE_DELETED_DRY : 0))
		return -1;
	m.u.delete_end.count = mode == FORGE_DEL_COUNT ? 2 : 1;
	return forge_send(e, &m);
}

static int forge_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct forger *fg = e->role_data;
	const struct wire_file_end *end = &m->u.end;
	uint8_t d[WIRE_DIGEST_MAX] = { 0 };
	struct wire_msg h = { .type = WIRE_HAVE };

	switch (m->type) {
	case WIRE_CREDIT:
		return 0;
	case WIRE_FILE:
		if (m->u.file.file_id < sizeof(fg->kind))
			fg->kind[m->u.file.file_id] = m->u.file.kind;
		if (fg->mode == FORGE_HELD && m->u.file.file_id == 0)
			return 0;
		if (m->u.file.kind != WIRE_KIND_FILE)
			return forge_result(
				e, m->u.file.file_id,
				fg->mode == FORGE_DRY ? WIRE_RESULT_DRY : 0,
				NULL, 0);
		h.u.have.file_id = m->u.file.file_id;
		if (fg->mode == FORGE_DRY_DATA ||
		    fg->mode == FORGE_STALE_HAVE ||
		    fg->mode == FORGE_STALE_MATCH)
			return forge_send(e, &h); /* send the data */
		if (fg->mode == FORGE_DRY) {
			h.u.have.flags = WIRE_HAVE_SKIP;
			return forge_send(e, &h) ||
			       forge_result(e, m->u.file.file_id,
					    WIRE_RESULT_DRY, NULL, 0);
		}
		if (fg->mode == FORGE_EARLY)
			return forge_result(e, m->u.file.file_id, 0, d, 4);
		if (fg->mode == FORGE_DEL_EARLY && forge_deleted(e, "in/x", 0))
			return -1;
		if (fg->mode != FORGE_HAVE_SKIP)
			return 0;
		h.u.have.flags = WIRE_HAVE_SKIP;
		return forge_send(e, &h) ||
		       forge_result(e, m->u.file.file_id, WIRE_RESULT_SKIPPED,
				    NULL, 0);
	case WIRE_FILE_END:
		if (fg->mode == FORGE_EARLY)
			return 0;
		memcpy(d, end->digest, end->digest_len);
		if (fg->mode == FORGE_DIGEST)
			d[0] ^= 0xff;
		return forge_result(
			e, end->file_id,
			fg->mode == FORGE_SKIPPED   ? WIRE_RESULT_SKIPPED
			: fg->mode == FORGE_DRY_END ? WIRE_RESULT_DRY
						    : 0,
			d, end->digest_len);
	case WIRE_DONE:
		fg->done = true;
		return forge_stale(e, fg);
	default:
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "forger: unexpected %s",
				   wire_type_name(m->type));
	}
}

static int forge_on_data(struct engine *e, const struct cm_event *ev)
{
	struct forger *fg = e->role_data;
	struct wire_msg m = { .type = WIRE_PACK_DONE };
	struct wire_slot_hdr h;
	uint64_t seq;
	int slot = credit_rx_arrive(&fg->rx, ev->imm, &seq);

	/* One queue pair here: each write is the next in order. */
	if (slot >= 0 && credit_rx_next(&fg->rx, &seq) == slot)
		credit_rx_take(&fg->rx);
	else
		slot = -EPROTO;
	fg->writes++;
	if (slot < 0 ||
	    wire_slot_decode(cm_slot_hdr(e->c, (unsigned int)slot), &h) ||
	    credit_rx_drain(&fg->rx, (unsigned int)slot))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "forger: bad write");
	if (!(h.flags & WIRE_SLOT_PACKED))
		return 0;
	if (!fg->pack_count) {
		fg->pack_first = h.file_id;
		fg->pack_count = (uint32_t)h.offset;
	}
	if (fg->mode == FORGE_PACK_OK) {
		for (uint64_t i = 0; i < h.offset; i++)
			if (forge_result(e, h.file_id + (uint32_t)i, 0, NULL,
					 0))
				return -1;
		return 0;
	}
	m.u.pack_done.first_id = h.file_id;
	m.u.pack_done.count = (uint32_t)h.offset;
	if (forge_send(e, &m))
		return -1;
	return fg->mode == FORGE_PACK_TWICE ? forge_send(e, &m) : 0;
}

static int forge_pump(struct engine *e)
{
	struct forger *fg = e->role_data;
	struct wire_msg m = { .type = WIRE_CREDIT };

	if (fg->done && !fg->bye_sent) {
		if (forge_deletions(e, fg->mode))
			return 0;
		m.type = WIRE_BYE;
		fg->bye_sent = true;
		e->closing = true;
		return forge_send(e, &m) ? 0 : 1;
	}
	if (!fg->bye_sent && credit_rx_should_report(&fg->rx) &&
	    engine_out_empty(e) && credit_ctrl_can_send(&e->cc, false))
		return forge_send(e, &m) ? 0 : 1;
	return 0;
}

static bool forge_finished(const struct engine *e)
{
	const struct forger *fg = e->role_data;

	return fg->bye_sent && engine_out_empty(e) && e->tx_inflight == 0;
}

static uint32_t forge_slot_ack(struct engine *e, const uint8_t *msg)
{
	struct forger *fg = e->role_data;

	fg->rx.reported = fg->rx.released;
	return (uint32_t)fg->rx.released;
}

static int forge_on_write_done(struct engine *e, uint64_t wr_id)
{
	return 0;
}

static const struct engine_role forge_role = {
	.on_msg = forge_on_msg,
	.on_data = forge_on_data,
	.on_write_done = forge_on_write_done,
	.pump = forge_pump,
	.finished = forge_finished,
	.slot_ack = forge_slot_ack,
};

struct push {
	enum forge mode;
	enum xfer_csum csum;
	bool resume, dry, del;
	size_t sizes[4];
	size_t nfiles;
	unsigned int tree; /* else: a directory of this many empty files */
	/* out */
	unsigned int writes; /* data slots the receiver got */
	enum xfer_fail vc;
	struct xfer_stats st;
	char digests[4][80]; /* as reported to the user */
	char crcs[4][16];    /* the files' own CRC32, in hex */
	/* private */
	char src[64];
	struct cm_conn *b;
	struct xfer_opts so;
};

static void *forging_receiver(void *arg)
{
	struct push *t = arg;
	struct wire_hello *h = calloc(1, sizeof(*h));
	struct forger fg = { .mode = t->mode };
	uint8_t key[AEAD_KEY_LEN];
	struct engine e;

	if (!h || engine_init(&e, t->b, &t->so)) {
		free(h);
		return NULL;
	}
	if (!credit_rx_init(&fg.rx, t->b->geom.slots) &&
	    !pp_welcome(&e, NULL, h, key) && !session_rings(&e, true))
		engine_run(&e, &forge_role, &fg);
	t->writes = fg.writes;
	engine_tell_peer(&e);
	engine_release(&e);
	credit_rx_release(&fg.rx);
	free(h);
	return NULL;
}

static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct push *t = arg;
	const char *base = strrchr(r->path, '/');
	int i = base ? base[1] - 'a' : -1;

	if (r->done && i >= 0 && i < 4 && r->digest)
		snprintf(t->digests[i], sizeof(t->digests[i]), "%s", r->digest);
}

/* path's CRC32 in hex, as --json shows a crc32 digest. */
static void crc_hex(const char *path, char *out, size_t n)
{
	uint8_t buf[4096];
	uint32_t crc = 0;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	while (fd >= 0 && (got = read(fd, buf, sizeof(buf))) > 0)
		crc = ck_crc32(crc, buf, (size_t)got);
	if (fd >= 0)
		close(fd);
	snprintf(out, n, "%08x", crc);
}

static void push_run(struct push *t)
{
	/* window 2: a big file's FILE_END cannot go before credits return */
	struct cm_geom g = geom(2);
	const char *srcs[4];
	char paths[4][128];
	struct xfer_opts co;
	int fds = tf_count_fds();

	strcpy(t->src, "/tmp/rdcp-trust-src.XXXXXX");
	CHECK(mkdtemp(t->src) != NULL);
	if (t->tree) {
		snprintf(paths[0], sizeof(paths[0]), "%s/t", t->src);
		CHECK_EQ(mkdir(paths[0], 0755), 0);
		for (unsigned int i = 0; i < t->tree; i++) {
			char p[160];

			snprintf(p, sizeof(p), "%s/f%05u", paths[0], i);
			CHECK_EQ(tf_make_file(p, 0, i), 0);
		}
		srcs[0] = paths[0];
	}
	for (size_t i = 0; i < t->nfiles; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/%c", t->src,
			 (int)('a' + i));
		CHECK_EQ(tf_make_file(paths[i], t->sizes[i], i + 1), 0);
		crc_hex(paths[i], t->crcs[i], sizeof(t->crcs[i]));
		srcs[i] = paths[i];
	}
	xopts(&co, 2);
	co.copy.csum = t->csum;
	co.copy.resume = t->resume;
	co.copy.dry_run = t->dry;
	co.copy.delete_extra = co.copy.recursive = t->del;
	co.copy.recursive |= t->tree > 0;
	co.copy.srcs = srcs;
	co.copy.nsrcs = t->tree ? 1 : t->nfiles;
	co.copy.dest = "in/";
	co.copy.on_file = on_file;
	co.copy.on_file_arg = t;
	xopts(&t->so, 2);
	t->vc = pp_run_client(&co, &g, NULL, &t->b, forging_receiver, t,
			      WATCHDOG_S, &t->st);
	CHECK_EQ(tf_rm_tree(t->src), 0);
	CHECK_EQ(tf_count_fds(), fds);
}

static void test_push_honest_forger(void)
{
	struct push t = { .mode = FORGE_HONEST, .csum = XFER_CSUM_CRC32 };
	t.sizes[0] = 16 * CHUNK + 3;
	t.sizes[1] = 100; /* packed */
	t.nfiles = 2;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_OK);
	CHECK_EQ(t.st.files_ok, 2);
	for (int i = 0; i < 2; i++) {
		if (strcmp(t.digests[i], t.crcs[i]))
			printf("#   digest %s, want %s\n", t.digests[i],
			       t.crcs[i]);
		CHECK(!strcmp(t.digests[i], t.crcs[i]));
	}
}

static void test_push_early_verdict(void)
{
	struct push t = { .mode = FORGE_EARLY, .csum = XFER_CSUM_CRC32 };

	t.sizes[0] = 64 * CHUNK;
	t.nfiles = 1;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
	CHECK_EQ(t.st.files_ok, 0);
}

static void test_push_skipped_unasked(void)
{
	struct push t = { .mode = FORGE_SKIPPED, .csum = XFER_CSUM_CRC32 };

	t.sizes[0] = 5 * CHUNK;
	t.nfiles = 1;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
	CHECK_EQ(t.st.files_skipped, 0);

	/* --resume asks first, but a kept file must still have been sent */
	memset(&t, 0, sizeof(t));
	t.mode = FORGE_HAVE_SKIP;
	t.csum = XFER_CSUM_CRC32;
	t.resume = true;
	t.sizes[0] = 5 * CHUNK;
	t.nfiles = 1;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
	CHECK_EQ(t.st.files_skipped, 0);
}

static void test_push_wrong_digest(void)
{
	enum xfer_csum c[] = { XFER_CSUM_CRC32, XFER_CSUM_SHA256 };

	for (size_t i = 0; i < 2; i++) {
		struct push t = { .mode = FORGE_DIGEST, .csum = c[i] };

		t.sizes[0] = 3 * CHUNK + 7;
		t.nfiles = 1;
		push_run(&t);
		CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
		CHECK_EQ(t.st.files_ok, 0);
		CHECK_EQ(t.digests[0][0], '\0');
	}
}

static void test_push_pack_forged(void)
{
	struct push t = { .mode = FORGE_PACK_TWICE, .csum = XFER_CSUM_CRC32 };

	t.sizes[0] = 2 * CHUNK; /* id 0: never packed */
	t.sizes[1] = 10;
	t.sizes[2] = 20;
	t.nfiles = 3;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);

	memset(&t, 0, sizeof(t));
	t.mode = FORGE_PACK_OK;
	t.csum = XFER_CSUM_CRC32;
	t.sizes[0] = 2 * CHUNK;
	t.sizes[1] = 10;
	t.sizes[2] = 20;
	t.nfiles = 3;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
}

/*
 * --dry-run: a receiver that answers as a dry run does gets no data and
 * the client reports each file as would-be-copied; one that asks for the
 * data in a dry run, or gives a dry run's verdict to a real copy, is
 * refused (exit 5).
 */
static void test_push_dry_run(void)
{
	struct push t = { .mode = FORGE_DRY, .csum = XFER_CSUM_CRC32 };

	t.dry = true;
	t.sizes[0] = 5 * CHUNK;
	t.sizes[1] = 100;
	t.nfiles = 2;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_OK);
	CHECK_EQ(t.st.files_ok, 2);
	CHECK_EQ(t.writes, 0);

	memset(&t, 0, sizeof(t));
	t.mode = FORGE_DRY_DATA;
	t.csum = XFER_CSUM_CRC32;
	t.dry = true;
	t.sizes[0] = 5 * CHUNK;
	t.nfiles = 1;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
	CHECK_EQ(t.writes, 0);

	memset(&t, 0, sizeof(t)); /* a real copy: DRY is no verdict */
	t.mode = FORGE_DRY_END;
	t.csum = XFER_CSUM_CRC32;
	t.sizes[0] = 5 * CHUNK;
	t.nfiles = 1;
	push_run(&t);
	CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
	CHECK_EQ(t.st.files_ok, 0);
}

/*
 * --delete on a push: the client takes the receiver's word on deletions
 * only after its DONE, each with a path beneath DEST, as many as
 * DELETE_END counts, and DELETE_END before BYE; else exit 5.
 */
static void test_push_delete_forged(void)
{
	for (enum forge f = FORGE_DEL_HONEST; f <= FORGE_DEL_DRY; f++) {
		struct push t = { .mode = f, .csum = XFER_CSUM_CRC32 };

		t.sizes[0] = 3 * CHUNK + 1; /* a FILE of its own */
		t.sizes[1] = 100;	    /* and a packed one */
		t.nfiles = 2;
		t.del = true;
		push_run(&t);
		if (f == FORGE_DEL_HONEST) {
			CHECK_EQ(t.vc, XFER_OK);
			CHECK_EQ(t.st.deleted, 1);
		} else {
			if (t.vc != XFER_FAIL_PROTOCOL)
				printf("#   forge %d: verdict %d\n", (int)f,
				       (int)t.vc);
			CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
		}
	}
}

/*
 * The client frees the state of files a block at a time once they are
 * answered; a receiver that names one of them again (a verdict, its
 * pack's PACK_DONE, a HAVE, a MATCH), or one in a freed block while an
 * older file still holds its own, gets a protocol error (exit 5), never
 * memory that is gone (ASan runs this too).
 */
static void test_push_stale_ids(void)
{
	for (enum forge f = FORGE_STALE_RESULT - 1; f <= FORGE_HELD; f++) {
		struct push t = { .csum = XFER_CSUM_CRC32 };

		t.mode = f == FORGE_STALE_RESULT - 1 ? FORGE_HONEST : f;
		t.resume = f == FORGE_STALE_HAVE || f == FORGE_STALE_MATCH;
		t.tree = 2500; /* the directory and 2500 files: 3 blocks */
		push_run(&t);
		if (t.mode == FORGE_HONEST) {
			CHECK_EQ(t.vc, XFER_OK);
			CHECK_EQ(t.st.files_ok, 2501);
			continue;
		}
		if (t.vc != XFER_FAIL_PROTOCOL)
			printf("#   forge %d: verdict %d\n", (int)f, (int)t.vc);
		CHECK_EQ(t.vc, XFER_FAIL_PROTOCOL);
	}
}

TAP_RUN(TAP_TEST(test_pull_honest), TAP_TEST(test_pull_other_name),
	TAP_TEST(test_pull_packed_name), TAP_TEST(test_pull_name_twice),
	TAP_TEST(test_pull_ssh_tree), TAP_TEST(test_pull_tree_without_r),
	TAP_TEST(test_pull_symlink_top), TAP_TEST(test_pull_ssh_mode),
	TAP_TEST(test_pull_resume_other), TAP_TEST(test_push_honest_forger),
	TAP_TEST(test_push_early_verdict), TAP_TEST(test_push_skipped_unasked),
	TAP_TEST(test_push_wrong_digest), TAP_TEST(test_push_pack_forged),
	TAP_TEST(test_push_dry_run), TAP_TEST(test_pull_delete),
	TAP_TEST(test_push_delete_forged), TAP_TEST(test_push_stale_ids))
