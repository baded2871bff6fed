/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's side of sessions (the sequence is in session.c): the
 * accept loop with one thread per session up to --max-sessions, the
 * hold-off of addresses that keep failing authentication, the handshake
 * that checks a HELLO and the client's proof of the key before anything
 * beneath the root is touched, and then the data sink into DEST (push) or
 * the data source of the named SRCs (pull). xfer_serve() is the public
 * entry; session_serve() serves one connection made elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "transfer/auth.h"
#include "transfer/role.h"
#include "transfer/place.h"
#include "transfer/session.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

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
	rc = engine_expect(e, WIRE_AUTH, &m, SESSION_HANDSHAKE_MS);
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

/*
 * A pull's SRCs as the client typed them, each made a path inside the root
 * (path_normalize_peer: "./x" and "/x" are "x") and copied into buf
 * (WIRE_PATHS_MAX bytes: no path grows), srcs[i] pointing at each. 0, or
 * -errno with why filled: -EPERM for a SRC outside the root, or the root
 * itself.
 */
static int check_sources(const struct wire_hello *h, char *buf,
			 const char **srcs, char *why, size_t whysz)
{
	size_t off = 0;

	if (!h->npaths) {
		snprintf(why, whysz, "nothing to send: no source named");
		return -EINVAL;
	}
	for (unsigned int i = 0; i < h->npaths; i++) {
		const char *p = wire_hello_path(h, i);
		char *n = buf + off;
		size_t len = strlen(p);
		bool dir;

		memcpy(n, p, len + 1);
		path_normalize_peer(n, &dir);
		len = strlen(n);
		if (len && dir)
			n[len++] = '/', n[len] = '\0';
		if (!len || path_check_relative(n, len, false)) {
			snprintf(why, whysz,
				 "source '%s' is not a path inside the "
				 "receiver's root: refused (name a file or "
				 "directory beneath it)",
				 p);
			return -EPERM;
		}
		srcs[i] = n;
		off += len + 1;
	}
	return 0;
}

/*
 * A pull's --include/--exclude rules from the HELLO, for the walk. 0,
 * -ENOMEM, or -EPERM with why filled for a rule util/filter.c does not
 * take (an honest client checked them all before sending).
 */
static int hello_filter(const struct wire_hello *h, struct filter *f, char *why,
			size_t whysz)
{
	for (unsigned int i = 0; i < h->nfilters; i++) {
		const char *r = wire_hello_filter(h, i);
		int rc = filter_add(f, r[0] == '+', r + 1);

		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			snprintf(why, whysz, "filter rule '%.200s' refused: %s",
				 r + 1, strerror(-rc));
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

	rc = engine_expect(e, WIRE_HELLO, &m, SESSION_HANDSHAKE_MS);
	if (rc)
		return rc;
	*h = m.u.hello;
	if ((h->role != WIRE_PUSH && h->role != WIRE_PULL) ||
	    h->csum > WIRE_CSUM_SHA256 || h->level > 9 ||
	    !(h->flags & WIRE_HELLO_COMPRESS) != !h->level ||
	    h->chunk_size != e->c->geom.slot_size - WIRE_SLOT_HDR ||
	    (h->role == WIRE_PUSH && (h->npaths != 1 || h->nfilters)))
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
	const char **srcs = NULL; /* a pull's SRCs, in srcbuf */
	char *srcbuf = NULL;
	struct session_params p = { 0 };
	struct wire_hello *h = NULL;
	struct filter filter = { 0 };
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
		rc = place_target_beneath(srv->rootfd, wire_hello_path(h, 0),
					  h->flags & WIRE_HELLO_DEST_DIR, &t,
					  why, sizeof(why));
		if (rc)
			engine_fail(&e,
				    place_target_refused(rc)
					    ? XFER_FAIL_USAGE
					    : XFER_FAIL_LOCAL_IO,
				    rc, "%s: %s", c->peer, why);
		else if (!session_rings(&e, true))
			sink_run(&e, &t, &st);
	} else {
		struct source_cfg cfg = {
			.nsrcs = h->npaths,
			.rootfd = srv->rootfd,
			.bwlimit = slower(srv->o->bwlimit, h->bwlimit),
			.filter = &filter,
			.p = p,
		};

		srcs = calloc(h->npaths ? h->npaths : 1, sizeof(*srcs));
		srcbuf = malloc(WIRE_PATHS_MAX);
		cfg.srcs = srcs;
		rc = srcs && srcbuf
			     ? check_sources(h, srcbuf, srcs, why, sizeof(why))
			     : -ENOMEM;
		if (!rc)
			rc = hello_filter(h, &filter, why, sizeof(why));
		if (rc)
			engine_fail(&e,
				    rc == -ENOMEM  ? XFER_FAIL_RESOURCE
				    : rc == -EPERM ? XFER_FAIL_USAGE
						   : XFER_FAIL_LOCAL_IO,
				    rc, "%s: %s", c->peer,
				    rc == -ENOMEM ? "out of memory" : why);
		else if (!session_rings(&e, false))
			source_run(&e, &cfg, &st);
	}
	OPENSSL_cleanse(key, sizeof(key));
	engine_tell_peer(&e);
	v = session_verdict(&e, &st);
	if (v == XFER_OK)
		log_info("session %s %s: %llu files, %s in %.2f s",
			 h->role == WIRE_PUSH ? "from" : "to", c->peer,
			 (unsigned long long)st.files_ok,
			 units_format_size(st.bytes, sz, sizeof(sz)),
			 clock_now_s() - t0);
	engine_release(&e);
	free(srcs);
	free(srcbuf);
	filter_release(&filter);
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
	struct cm_timeouts to = session_timeouts(o);
	struct cm_conn *c;
	enum xfer_fail v;
	int rc;

	rc = cm_accept(req, &lim, &to, &c);
	if (rc)
		return session_connect_fail(rc);
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
