/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Sessions: the client's push and the receiver's accept loop, and the
 * handshake between them (its crypto is in auth.c).
 *
 *   client                         server
 *   rdma_cm connect (magic, version, geometry in private data) ->
 *                               <- accept (geometry, maybe lowered)
 *   HELLO (role, checksum, DEST) ->
 *                               <- WELCOME (or ERROR: why not)
 *                               <- RING (address, rkey: the sink's ring)
 *   FILE, chunks, FILE_END ...  ->
 *                               <- FILE_RESULT ... (and CREDITs)
 *   DONE                        ->
 *                               <- BYE
 *   disconnect
 *
 * The ring is registered only after HELLO was accepted, so a peer that
 * connects and says nothing pins no memory and is dropped at the handshake
 * timeout. The receiver runs each session in its own thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "transfer/auth.h"
#include "transfer/role.h"
#include "transfer/session.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

#define HANDSHAKE_MS 15000

void xfer_opts_init(struct xfer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->addr.port = 7471;
	o->addr.gid_index = -1;
	o->chunk_size = 1u << 20;
	o->window = 64;
	o->workers = 2;
	o->poll = XFER_POLL_ADAPTIVE;
	o->timeout_ms = 10000;
	o->connect_timeout_ms = 10000;
	o->csum = XFER_CSUM_CRC32;
	o->max_sessions = 16;
}

const char *xfer_fail_name(enum xfer_fail f)
{
	static const char *const names[] = {
		[XFER_OK] = "ok",
		[XFER_FAIL_INTERNAL] = "internal",
		[XFER_FAIL_USAGE] = "usage",
		[XFER_FAIL_CONNECT] = "connect",
		[XFER_FAIL_AUTH] = "auth",
		[XFER_FAIL_PROTOCOL] = "protocol",
		[XFER_FAIL_LOCAL_IO] = "local-io",
		[XFER_FAIL_REMOTE_IO] = "remote-io",
		[XFER_FAIL_VERIFY] = "verify",
		[XFER_FAIL_PARTIAL] = "partial",
		[XFER_FAIL_RESOURCE] = "resource",
		[XFER_FAIL_PEER_LOST] = "peer-lost",
		[XFER_FAIL_CANCELED] = "canceled",
	};

	return (unsigned int)f < sizeof(names) / sizeof(names[0]) && names[f]
		       ? names[f]
		       : "?";
}

static struct cm_timeouts timeouts(const struct xfer_opts *o)
{
	struct cm_timeouts to = {
		.resolve_ms = o->connect_timeout_ms / 2,
		.connect_ms = o->connect_timeout_ms,
	};

	return to;
}

static enum xfer_fail connect_klass(int rc)
{
	switch (rc) {
	case -ENOMEM:
	case -EAGAIN:
		return XFER_FAIL_RESOURCE;
	case -EPROTO:
		return XFER_FAIL_PROTOCOL;
	default:
		return XFER_FAIL_CONNECT;
	}
}

/* ---- client ---- */

static enum xfer_fail verdict(const struct engine *e,
			      const struct xfer_stats *st)
{
	if (e->fail)
		return e->fail;
	if (st->files_failed)
		return st->files_ok ? XFER_FAIL_PARTIAL : st->first_fail;
	return XFER_OK;
}

static int client_auth(struct engine *e, const struct xfer_opts *o,
		       const struct wire_hello *h, const struct wire_welcome *w)
{
	struct wire_msg m = { .type = WIRE_AUTH };
	uint8_t want[WIRE_MAC_LEN];
	int rc;

	if (!o->key)
		return 0; /* the receiver has no key either, or it said so */
	if (!(w->features & WIRE_FEAT_AUTH))
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "%s does not authenticate (it runs with "
				   "--no-auth): not talking to an "
				   "unauthenticated receiver (use --no-auth "
				   "here too, on isolated fabrics only)",
				   e->c->peer);
	rc = auth_mac(o->key, AUTH_SERVER, h, w->nonce, want);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc, "HMAC failed");
	if (!auth_mac_equal(want, w->mac))
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "%s failed to authenticate: its key is not "
				   "ours (copy the same key file to both "
				   "hosts)",
				   e->c->peer);
	rc = auth_mac(o->key, AUTH_CLIENT, h, w->nonce, m.u.auth.mac);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc, "HMAC failed");
	return engine_send(e, &m);
}

static uint32_t hello_flags(const struct xfer_opts *o)
{
	return (o->fsync ? WIRE_HELLO_FSYNC : 0) |
	       (!o->pull && o->nsrcs > 1 ? WIRE_HELLO_DEST_DIR : 0) |
	       (o->recursive ? WIRE_HELLO_RECURSIVE : 0) |
	       (o->preserve ? WIRE_HELLO_PRESERVE : 0) |
	       (o->resume ? WIRE_HELLO_RESUME : 0) |
	       (o->no_clobber ? WIRE_HELLO_NO_CLOBBER : 0) |
	       (o->update ? WIRE_HELLO_UPDATE : 0) |
	       (o->encrypt ? WIRE_HELLO_ENCRYPT : 0) |
	       (o->compress ? WIRE_HELLO_COMPRESS : 0) |
	       (o->sparse ? WIRE_HELLO_SPARSE : 0);
}

static int build_hello(struct engine *e, const struct xfer_opts *o,
		       struct wire_hello *h)
{
	int rc = 0;

	h->role = o->pull ? WIRE_PULL : WIRE_PUSH;
	h->csum = (uint8_t)o->csum;
	h->level = (uint8_t)o->compress;
	h->flags = hello_flags(o);
	h->features = (o->key ? WIRE_FEAT_AUTH : 0) | WIRE_FEAT_PACK;
	h->chunk_size = e->c->geom.slot_size - WIRE_SLOT_HDR;
	h->bwlimit = o->bwlimit;
	if (getrandom(h->nonce, WIRE_NONCE_LEN, 0) != WIRE_NONCE_LEN)
		return engine_fail(e, XFER_FAIL_RESOURCE, -errno,
				   "cannot get random bytes");
	if (!o->pull)
		rc = wire_hello_add_path(h, o->dest ? o->dest : "");
	for (size_t i = 0; o->pull && !rc && i < o->nsrcs; i++)
		rc = wire_hello_add_path(h, o->srcs[i]);
	if (rc)
		return engine_fail(e, XFER_FAIL_USAGE, rc,
				   "the remote paths are too long for one "
				   "session (%u bytes at most)",
				   WIRE_PATHS_MAX);
	return 0;
}

/* The sink's ring, made here and announced (pull), or the peer's (push). */
static int rings(struct engine *e, bool sink)
{
	struct wire_msg m = { .type = WIRE_RING };
	struct cm_ring_desc ring;
	int rc;

	if (sink) {
		rc = e->c->ops->ring_create(e->c, &ring);
		if (rc)
			return engine_fail(e, XFER_FAIL_RESOURCE, rc,
					   "cannot set up the ring for %s",
					   e->c->peer);
		m.u.ring.addr = ring.addr;
		m.u.ring.rkey = ring.rkey;
		m.u.ring.slots = e->c->geom.slots;
		m.u.ring.slot_size = e->c->geom.slot_size;
		return engine_send(e, &m);
	}
	rc = engine_expect(e, WIRE_RING, &m, HANDSHAKE_MS);
	if (rc)
		return rc;
	if (m.u.ring.slots != e->c->geom.slots ||
	    m.u.ring.slot_size != e->c->geom.slot_size)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced a ring of another geometry",
				   e->c->peer);
	ring.addr = m.u.ring.addr;
	ring.rkey = m.u.ring.rkey;
	rc = e->c->ops->stage_create(e->c, &ring);
	if (rc)
		return engine_fail(e, XFER_FAIL_RESOURCE, rc,
				   "cannot set up staging buffers");
	return 0;
}

static int client_handshake(struct engine *e, const struct xfer_opts *o,
			    uint8_t key[AEAD_KEY_LEN], uint32_t *features)
{
	struct wire_msg m = { .type = WIRE_HELLO };
	struct wire_msg w;
	int rc;

	rc = build_hello(e, o, &m.u.hello);
	if (!rc)
		rc = engine_send(e, &m);
	if (!rc)
		rc = engine_expect(e, WIRE_WELCOME, &w, HANDSHAKE_MS);
	if (rc)
		return rc;
	if (w.u.welcome.status)
		return engine_fail(
			e,
			w.u.welcome.status == -EOPNOTSUPP ? XFER_FAIL_PROTOCOL
							  : XFER_FAIL_REMOTE_IO,
			w.u.welcome.status, "%s refused the session: %s",
			e->c->peer, w.u.welcome.msg);
	*features = w.u.welcome.features;
	rc = client_auth(e, o, &m.u.hello, &w.u.welcome);
	if (!rc && o->encrypt) {
		rc = auth_data_key(o->key, &m.u.hello, w.u.welcome.nonce, key);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "cannot derive the session key");
	}
	if (!rc)
		rc = rings(e, o->pull);
	return rc;
}

/*
 * A pull's DEST, on this host: an existing directory (or one named with a
 * trailing '/', made if needed) receives inside; otherwise DEST is the new
 * name of the only SRC.
 */
static int local_target(const struct xfer_opts *o, struct sink_target *t,
			struct engine *e)
{
	char dest[4096];
	size_t len;
	char *slash;
	int rc;

	snprintf(dest, sizeof(dest), "%s", o->dest && *o->dest ? o->dest : ".");
	snprintf(t->shown, sizeof(t->shown), "%s", dest);
	len = strlen(dest);
	while (len > 1 && dest[len - 1] == '/') {
		dest[--len] = '\0';
		rc = path_mkdirs_local(dest, 0755);
		if (rc)
			return engine_fail(e, XFER_FAIL_LOCAL_IO, rc,
					   "cannot create directory '%s': %s",
					   dest, strerror(-rc));
	}
	t->shown[len] = '\0';
	t->dirfd = open(dest, O_PATH | O_DIRECTORY | O_CLOEXEC);
	t->is_dir = t->dirfd >= 0;
	if (t->is_dir)
		return 0;
	if (errno != ENOENT && errno != ENOTDIR)
		return engine_fail(e, XFER_FAIL_LOCAL_IO, -errno,
				   "cannot use '%s': %s", dest,
				   strerror(errno));
	if (o->nsrcs > 1)
		return engine_fail(e, XFER_FAIL_USAGE, -ENOTDIR,
				   "'%s' is not a directory (several sources "
				   "need one; end it with '/' to create it)",
				   dest);
	slash = strrchr(dest, '/');
	snprintf(t->name, sizeof(t->name), "%.255s", slash ? slash + 1 : dest);
	if (slash)
		*slash = '\0';
	t->dirfd = open(slash ? (*dest ? dest : "/") : ".",
			O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0)
		return engine_fail(e, XFER_FAIL_LOCAL_IO, -errno,
				   "cannot use '%s': %s", o->dest,
				   strerror(errno));
	return 0;
}

static struct session_params client_params(const struct xfer_opts *o,
					   const uint8_t *key)
{
	struct session_params p = {
		.flags = hello_flags(o),
		.csum = o->csum,
		.level = o->compress,
		.data_key = o->encrypt ? key : NULL,
	};

	return p;
}

enum xfer_fail session_client(const struct xfer_opts *o, struct cm_conn *c,
			      struct xfer_stats *st)
{
	struct sink_target t = { .dirfd = -1 };
	uint8_t key[AEAD_KEY_LEN];
	uint32_t features = 0;
	struct engine e;
	enum xfer_fail v;
	double t0 = clock_now_s();
	mode_t um;
	int rc;

	rc = engine_init(&e, c, o);
	if (rc)
		return XFER_FAIL_RESOURCE;
	rc = client_handshake(&e, o, key, &features);
	if (!rc && o->pull) {
		um = umask(022);
		umask(um);
		t.umask = um;
		t.p = client_params(o, key);
		rc = local_target(o, &t, &e);
		if (!rc)
			sink_run(&e, &t, st);
	} else if (!rc) {
		struct source_cfg cfg = {
			.srcs = o->srcs,
			.nsrcs = o->nsrcs,
			.rootfd = -1,
			.bwlimit = o->bwlimit,
			.p = client_params(o, key),
		};

		cfg.p.pack = features & WIRE_FEAT_PACK;
		source_run(&e, &cfg, st);
	}
	OPENSSL_cleanse(key, sizeof(key));
	st->seconds = clock_now_s() - t0;
	snprintf(st->peer, sizeof(st->peer), "%s", c->peer);
	if (e.fail)
		snprintf(st->error, sizeof(st->error), "%s", e.why);
	engine_tell_peer(&e);
	v = verdict(&e, st);
	engine_release(&e);
	if (t.dirfd >= 0)
		close(t.dirfd);
	return v;
}

enum xfer_fail xfer_copy(const struct xfer_opts *o, struct xfer_stats *st)
{
	struct cm_geom geom = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = o->window,
		.slot_size = o->chunk_size + WIRE_SLOT_HDR,
	};
	struct cm_timeouts to = timeouts(o);
	struct cm_conn *c;
	enum xfer_fail v;
	char sz[32];
	int rc;

	memset(st, 0, sizeof(*st));
	rc = cm_connect(&o->addr, &geom, &to, &c);
	if (rc)
		return connect_klass(rc);
	snprintf(st->transport, sizeof(st->transport), "%s",
		 c->transport ? c->transport : "?");
	snprintf(st->device, sizeof(st->device), "%s", c->dev);
	log_info("ring: %u slots of %s on %s", c->geom.slots,
		 units_format_size(c->geom.slot_size - WIRE_SLOT_HDR, sz,
				   sizeof(sz)),
		 c->dev);
	v = session_client(o, c, st);
	cm_conn_destroy(c);
	return v;
}

/* ---- server ---- */

/* Peers that failed authentication lately, to slow down key guessing. */
#define PENALTY_SLOTS 64
#define PENALTY_FREE 2	 /* failures before an address is held off */
#define PENALTY_MS 10000 /* first hold-off; doubles per failure */
#define PENALTY_MAX_MS 600000

struct penalty {
	char addr[64]; /* peer address without the port */
	unsigned int fails;
	uint64_t until_ms;
};

struct server {
	const struct xfer_opts *o;
	int rootfd;
	mode_t umask;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned int sessions;
	struct penalty pen[PENALTY_SLOTS];
};

static void peer_host(const char *peer, char *out, size_t n)
{
	const char *colon = strrchr(peer, ':');

	snprintf(out, n, "%.*s",
		 colon ? (int)(colon - peer) : (int)strlen(peer), peer);
}

static struct penalty *penalty_find(struct server *srv, const char *host,
				    bool add)
{
	struct penalty *oldest = &srv->pen[0];

	for (int i = 0; i < PENALTY_SLOTS; i++) {
		if (!strcmp(srv->pen[i].addr, host))
			return &srv->pen[i];
		if (srv->pen[i].until_ms < oldest->until_ms)
			oldest = &srv->pen[i];
	}
	if (!add)
		return NULL;
	memset(oldest, 0, sizeof(*oldest));
	snprintf(oldest->addr, sizeof(oldest->addr), "%s", host);
	return oldest;
}

static void penalty_add(struct server *srv, const char *peer)
{
	char host[64];
	struct penalty *p;

	peer_host(peer, host, sizeof(host));
	pthread_mutex_lock(&srv->lock);
	p = penalty_find(srv, host, true);
	if (++p->fails > PENALTY_FREE) {
		uint64_t ms = PENALTY_MS;

		for (unsigned int i = PENALTY_FREE + 1;
		     i < p->fails && ms < PENALTY_MAX_MS; i++)
			ms *= 2;
		p->until_ms = clock_now_ms() +
			      (ms < PENALTY_MAX_MS ? ms : PENALTY_MAX_MS);
	}
	pthread_mutex_unlock(&srv->lock);
}

static bool penalty_holds(struct server *srv, const char *peer)
{
	char host[64];
	struct penalty *p;
	bool held;

	peer_host(peer, host, sizeof(host));
	pthread_mutex_lock(&srv->lock);
	p = penalty_find(srv, host, false);
	held = p && p->until_ms > clock_now_ms();
	pthread_mutex_unlock(&srv->lock);
	return held;
}

/* Resolves DEST beneath the root; 0 or -errno with *why filled. */
static int resolve_target(struct server *srv, const struct wire_hello *h,
			  struct sink_target *t, char *why, size_t whysz)
{
	const char *path = wire_hello_path(h, 0);
	char dest[WIRE_PATHS_MAX];
	size_t len = strlen(path);
	int rc;

	snprintf(dest, sizeof(dest), "%s", path);
	snprintf(t->shown, sizeof(t->shown), "%s", dest);
	rc = path_check_relative(dest, len, true);
	if (rc) {
		snprintf(why, whysz,
			 "DEST '%s' is not a path inside the "
			 "receiver's root: refused",
			 dest);
		return rc;
	}
	if (len && dest[len - 1] == '/') {
		dest[--len] = '\0';
		t->shown[len] = '\0';
		rc = path_mkdirs_beneath(srv->rootfd, dest, 0755);
		if (rc) {
			snprintf(why, whysz, "cannot create directory '%s': %s",
				 dest, strerror(-rc));
			return rc;
		}
	}
	t->is_dir = true;
	t->dirfd = len ? path_open_beneath(srv->rootfd, dest,
					   O_PATH | O_DIRECTORY, 0)
		       : openat(srv->rootfd, ".",
				O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd >= 0)
		return 0;
	rc = len ? t->dirfd : -errno;
	if ((rc == -ENOTDIR || rc == -ENOENT) &&
	    !(h->flags & WIRE_HELLO_DEST_DIR)) {
		/* A file name: its directory must exist. */
		char *slash = strrchr(dest, '/');
		const char *base = slash ? slash + 1 : dest;

		t->is_dir = false;
		snprintf(t->name, sizeof(t->name), "%.255s", base);
		if (slash) {
			*slash = '\0';
			t->dirfd = path_open_beneath(srv->rootfd, dest,
						     O_PATH | O_DIRECTORY, 0);
		} else {
			t->dirfd = openat(srv->rootfd, ".",
					  O_PATH | O_DIRECTORY | O_CLOEXEC);
		}
		if (t->dirfd >= 0)
			return 0;
		rc = t->dirfd;
		snprintf(why, whysz, "cannot use '%s': %s", path,
			 strerror(-rc));
		return rc;
	}
	if (rc == -ENOTDIR || rc == -ENOENT)
		snprintf(why, whysz,
			 "DEST '%s' is not a directory (several "
			 "files need one; end it with '/' to create it)",
			 path);
	else
		snprintf(why, whysz, "cannot use DEST '%s': %s", path,
			 strerror(-rc));
	return rc;
}

static int server_auth(struct server *srv, struct engine *e,
		       const struct wire_hello *h,
		       uint8_t nonce[WIRE_NONCE_LEN])
{
	const uint8_t *key = srv->o->key;
	struct wire_msg m = { .type = WIRE_WELCOME };
	uint8_t want[WIRE_MAC_LEN];
	int rc;

	if (key && !(h->features & WIRE_FEAT_AUTH)) {
		penalty_add(srv, e->c->peer);
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "refused %s: it has no key (give it this "
				   "receiver's key file with --key-file)",
				   e->c->peer);
	}
	m.u.welcome.features = WIRE_FEAT_PACK;
	if (key) {
		m.u.welcome.features |= WIRE_FEAT_AUTH;
		if (getrandom(m.u.welcome.nonce, WIRE_NONCE_LEN, 0) !=
		    WIRE_NONCE_LEN)
			return engine_fail(e, XFER_FAIL_RESOURCE, -errno,
					   "cannot get random bytes");
		rc = auth_mac(key, AUTH_SERVER, h, m.u.welcome.nonce,
			      m.u.welcome.mac);
		if (!rc)
			rc = auth_mac(key, AUTH_CLIENT, h, m.u.welcome.nonce,
				      want);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "HMAC failed");
	}
	memcpy(nonce, m.u.welcome.nonce, WIRE_NONCE_LEN);
	rc = engine_send(e, &m);
	if (rc || !key)
		return rc;
	rc = engine_expect(e, WIRE_AUTH, &m, HANDSHAKE_MS);
	if (rc) {
		/*
		 * A client with another key finds out first (our MAC does not
		 * verify) and says so instead of answering: count that too.
		 */
		if (e->fail == XFER_FAIL_AUTH)
			penalty_add(srv, e->c->peer);
		return rc;
	}
	if (!auth_mac_equal(want, m.u.auth.mac)) {
		penalty_add(srv, e->c->peer);
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "authentication failed for %s: wrong key",
				   e->c->peer);
	}
	return 0;
}

/* The lower of two rates, 0 meaning no limit. */
static uint64_t slower(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* A pull's SRCs: each a path inside the root. */
static int check_sources(const struct wire_hello *h, char *why, size_t whysz)
{
	if (!h->npaths) {
		snprintf(why, whysz, "nothing to send: no source named");
		return -EINVAL;
	}
	for (unsigned int i = 0; i < h->npaths; i++) {
		const char *p = wire_hello_path(h, i);

		if (path_check_relative(p, strlen(p), false)) {
			snprintf(why, whysz,
				 "source '%s' is not a path inside the "
				 "receiver's root: refused",
				 p);
			return -EPERM;
		}
	}
	return 0;
}

static int server_handshake(struct server *srv, struct engine *e,
			    struct wire_hello *h, struct session_params *p,
			    uint8_t key[AEAD_KEY_LEN])
{
	uint8_t nonce[WIRE_NONCE_LEN];
	struct wire_msg m;
	int rc;

	rc = engine_expect(e, WIRE_HELLO, &m, HANDSHAKE_MS);
	if (rc)
		return rc;
	*h = m.u.hello;
	if ((h->role != WIRE_PUSH && h->role != WIRE_PULL) ||
	    h->csum > WIRE_CSUM_SHA256 || h->level > 9 ||
	    !(h->flags & WIRE_HELLO_COMPRESS) != !h->level ||
	    h->chunk_size != e->c->geom.slot_size - WIRE_SLOT_HDR ||
	    (h->role == WIRE_PUSH && h->npaths != 1))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a bad HELLO", e->c->peer);
	if ((h->flags & WIRE_HELLO_ENCRYPT) && !srv->o->key)
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "refused %s: it asked for --encrypt, which "
				   "needs a key, and this receiver runs with "
				   "--no-auth",
				   e->c->peer);
	/* Nothing about the root is touched before the peer proved itself. */
	rc = server_auth(srv, e, h, nonce);
	if (rc)
		return rc;
	p->flags = h->flags;
	p->csum = (enum xfer_csum)h->csum;
	p->level = h->level;
	p->server = true;
	p->pack = h->features & WIRE_FEAT_PACK;
	if (h->flags & WIRE_HELLO_ENCRYPT) {
		rc = auth_data_key(srv->o->key, h, nonce, key);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "cannot derive the session key");
		p->data_key = key;
	}
	return 0;
}

static enum xfer_fail serve_conn(struct server *srv, struct cm_conn *c)
{
	struct sink_target t = { .dirfd = -1 };
	struct xfer_stats st = { 0 };
	const char *srcs[WIRE_PATHS_MAX / 2];
	struct session_params p = { 0 };
	struct wire_hello *h = NULL;
	uint8_t key[AEAD_KEY_LEN];
	struct engine e;
	enum xfer_fail v;
	char sz[32], why[600];
	double t0 = clock_now_s();
	int rc;

	rc = engine_init(&e, c, srv->o);
	if (rc)
		return XFER_FAIL_RESOURCE;
	h = malloc(sizeof(*h));
	rc = h ? server_handshake(srv, &e, h, &p, key)
	       : engine_fail(&e, XFER_FAIL_RESOURCE, -ENOMEM, "out of memory");
	if (rc) {
		/* said in engine_fail */
	} else if (h->role == WIRE_PUSH) {
		t.p = p;
		t.umask = srv->umask;
		rc = resolve_target(srv, h, &t, why, sizeof(why));
		if (rc)
			engine_fail(&e, XFER_FAIL_LOCAL_IO, rc, "%s: %s",
				    c->peer, why);
		else if (!rings(&e, true))
			sink_run(&e, &t, &st);
	} else {
		struct source_cfg cfg = {
			.srcs = srcs,
			.nsrcs = h->npaths,
			.rootfd = srv->rootfd,
			.bwlimit = slower(srv->o->bwlimit, h->bwlimit),
			.p = p,
		};

		for (unsigned int i = 0; i < h->npaths; i++)
			srcs[i] = wire_hello_path(h, i);
		rc = check_sources(h, why, sizeof(why));
		if (rc)
			engine_fail(&e, XFER_FAIL_LOCAL_IO, rc, "%s: %s",
				    c->peer, why);
		else if (!rings(&e, false))
			source_run(&e, &cfg, &st);
	}
	OPENSSL_cleanse(key, sizeof(key));
	engine_tell_peer(&e);
	v = verdict(&e, &st);
	if (v == XFER_OK)
		log_info("session %s %s: %llu files, %s in %.2f s",
			 h->role == WIRE_PUSH ? "from" : "to", c->peer,
			 (unsigned long long)st.files_ok,
			 units_format_size(st.bytes, sz, sizeof(sz)),
			 clock_now_s() - t0);
	engine_release(&e);
	free(h);
	if (t.dirfd >= 0)
		close(t.dirfd);
	return v;
}

enum xfer_fail session_serve(const struct xfer_opts *o, int rootfd,
			     struct cm_conn *c)
{
	struct server srv = { .o = o, .rootfd = rootfd };

	srv.umask = umask(022);
	umask(srv.umask);
	return serve_conn(&srv, c);
}

static enum xfer_fail serve_one(struct server *srv, struct cm_request *req)
{
	const struct xfer_opts *o = srv->o;
	struct cm_limits lim = {
		.max_slot_size = o->chunk_size + WIRE_SLOT_HDR,
		.max_slots = o->window,
	};
	struct cm_timeouts to = timeouts(o);
	struct cm_conn *c;
	enum xfer_fail v;
	int rc;

	rc = cm_accept(req, &lim, &to, &c);
	if (rc)
		return connect_klass(rc);
	v = serve_conn(srv, c);
	cm_conn_destroy(c);
	return v;
}

struct session_arg {
	struct server *srv;
	struct cm_request *req;
};

static void *session_thread(void *p)
{
	struct session_arg *a = p;
	struct server *srv = a->srv;

	serve_one(srv, a->req);
	free(a);
	pthread_mutex_lock(&srv->lock);
	srv->sessions--;
	pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

static void spawn(struct server *srv, struct cm_request *req)
{
	struct session_arg *a = malloc(sizeof(*a));
	pthread_attr_t attr;
	pthread_t tid;
	bool full;

	pthread_mutex_lock(&srv->lock);
	full = srv->sessions >= srv->o->max_sessions;
	if (!full && a)
		srv->sessions++;
	pthread_mutex_unlock(&srv->lock);
	if (full || !a) {
		log_warn("refused %s: %u sessions already running",
			 cm_request_peer(req), srv->o->max_sessions);
		cm_reject(req);
		free(a);
		return;
	}
	a->srv = srv;
	a->req = req;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&tid, &attr, session_thread, a)) {
		log_err("cannot start a session thread for %s",
			cm_request_peer(req));
		cm_reject(req);
		free(a);
		pthread_mutex_lock(&srv->lock);
		srv->sessions--;
		pthread_mutex_unlock(&srv->lock);
	}
	pthread_attr_destroy(&attr);
}

enum xfer_fail xfer_serve(const struct xfer_opts *o)
{
	struct server srv = { .o = o };
	struct cm_listener *l;
	enum xfer_fail v = XFER_OK;
	int rc;

	srv.rootfd =
		open(o->root ? o->root : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (srv.rootfd < 0) {
		log_err("cannot use root directory '%s': %s", o->root,
			strerror(errno));
		return XFER_FAIL_USAGE;
	}
	srv.umask = umask(022);
	umask(srv.umask);
	pthread_mutex_init(&srv.lock, NULL);
	pthread_cond_init(&srv.idle, NULL);
	rc = cm_listen(&o->addr, &l);
	if (rc) {
		close(srv.rootfd);
		return rc == -ENOMEM ? XFER_FAIL_RESOURCE : XFER_FAIL_CONNECT;
	}
	while (!(o->cancel && *o->cancel)) {
		struct cm_request *req;

		rc = cm_listener_get(l, 500, &req);
		if (rc == -EAGAIN || rc == -EINTR)
			continue;
		if (rc) {
			log_err("listener failed: %s", strerror(-rc));
			v = XFER_FAIL_CONNECT;
			break;
		}
		log_info("connection from %s", cm_request_peer(req));
		if (penalty_holds(&srv, cm_request_peer(req))) {
			log_warn("refused %s: too many failed "
				 "authentications, held off for now",
				 cm_request_peer(req));
			cm_reject(req);
			continue;
		}
		if (o->once) {
			v = serve_one(&srv, req);
			break;
		}
		spawn(&srv, req);
	}
	if (!o->once && o->cancel && *o->cancel)
		v = XFER_FAIL_CANCELED;
	pthread_mutex_lock(&srv.lock);
	while (srv.sessions)
		pthread_cond_wait(&srv.idle, &srv.lock);
	pthread_mutex_unlock(&srv.lock);
	cm_listener_destroy(l);
	close(srv.rootfd);
	pthread_cond_destroy(&srv.idle);
	pthread_mutex_destroy(&srv.lock);
	return v;
}
