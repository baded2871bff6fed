/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's handshake (the sequence is in session.c): a HELLO read
 * and checked, the lanes agreed, WELCOME, the client's proof of the key
 * (AUTH) before anything beneath the root is touched, then the session's
 * parameters and data key. Also what the session does with the HELLO's
 * content once authenticated: a pull's SRCs made paths inside the root
 * (or taken as the user typed them under rdcp --server) and its filter
 * rules. server.c's serve_conn calls these (server_int.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>

#include "transfer/fs/direct.h"
#include "transfer/server/server_int.h"
#include "transfer/session/auth.h"
#include "transfer/session/role.h"
#include "transfer/session/session.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/log.h"
#include "util/path.h"

/* Milliseconds left before deadline_ms, at least 1. */
static int left_ms(uint64_t deadline_ms)
{
	uint64_t now = clock_now_ms();

	return deadline_ms > now ? (int)(deadline_ms - now) : 1;
}

static int server_auth(struct server *srv, struct engine *e,
		       struct server_session *s, const struct wire_hello *h,
		       uint8_t nonce[WIRE_NONCE_LEN], uint64_t deadline_ms,
		       unsigned int streams, struct join_wait *jw)
{
	const uint8_t *key;
	struct wire_msg m = { .type = WIRE_WELCOME };
	uint8_t want[WIRE_MAC_LEN], ck[AUTH_CTRL_KEY_LEN];
	int rc;

	server_session_key(srv, s, h);
	key = s->key;
	jw->key = key;
	if (key && !(h->features & WIRE_FEAT_AUTH)) {
		server_penalty_add(srv, e->c->peer);
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "refused %s: it has no key (give it this "
				   "receiver's key file with --key-file)",
				   e->c->peer);
	}
	m.u.welcome.features = WIRE_FEAT_PACK;
	/* a push's sink with room for it: the window of questions */
	if (h->role == WIRE_PUSH && srv->wide)
		m.u.welcome.features |= WIRE_FEAT_WIDE;
	/* slots released in any order: when the client offered it */
	m.u.welcome.features |= h->features & WIRE_FEAT_ANY_SLOT;
	m.u.welcome.streams = (uint8_t)streams;
	if (streams > 1)
		memcpy(m.u.welcome.token, jw->token, WIRE_LANE_TOKEN_LEN);
	/*
	 * Rails: with lanes, on a receiver listening on every address, each
	 * other device with an address there takes lanes k % R == r.
	 */
	if (streams > 1 && !srv->o->link.addr.host &&
	    (!srv->o->link.addr.device || srv->o->link.rail_devices)) {
		struct cm_rail rails[WIRE_STREAMS_MAX];
		int n = cm_local_rails(e->c, srv->o->link.rail_devices, rails,
				       streams);

		m.u.welcome.rails = n > 1 ? (uint8_t)n : 0;
		for (int r = 1; r < n; r++) {
			m.u.welcome.rail[r].family = rails[r].family;
			memcpy(m.u.welcome.rail[r].addr, rails[r].addr, 16);
		}
		if (n > 1)
			log_info("%u streams from %s on %d rails", streams,
				 e->c->peer, n);
	}
	if (key) {
		m.u.welcome.features |= WIRE_FEAT_AUTH;
		if (getrandom(m.u.welcome.nonce, WIRE_NONCE_LEN, 0) !=
		    WIRE_NONCE_LEN)
			return engine_fail(e, XFER_FAIL_RESOURCE, -errno,
					   "cannot get random bytes");
		rc = auth_mac(key, AUTH_SERVER, h, &m.u.welcome,
			      m.u.welcome.mac);
		if (!rc)
			rc = auth_mac(key, AUTH_CLIENT, h, &m.u.welcome, want);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "HMAC failed");
	}
	memcpy(nonce, m.u.welcome.nonce, WIRE_NONCE_LEN);
	/* Before WELCOME, which a lane needs to make its proof. */
	if (streams > 1) {
		rc = server_join_arm(srv, jw, h, nonce);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "HMAC failed");
	}
	if (!key)
		return engine_send(e, &m);
	/*
	 * We tag what we send after WELCOME; the client tags what it sends
	 * after AUTH.
	 */
	rc = auth_ctrl_key(key, h, m.u.welcome.nonce, ck);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc,
				   "cannot derive the control key");
	engine_mac_key(e, ck, true);
	OPENSSL_cleanse(ck, sizeof(ck));
	rc = engine_send_last_plain(e, &m);
	if (rc)
		return rc;
	rc = engine_expect(e, WIRE_AUTH, &m, left_ms(deadline_ms));
	if (rc) {
		/*
		 * A client with another key finds out first (our MAC does not
		 * verify) and says so instead of answering: count that too.
		 */
		if (e->fail == XFER_FAIL_AUTH) {
			server_penalty_add(srv, e->c->peer);
			if (s->key_miss)
				log_warn("authentication failed for %s as "
					 "client %s: %s",
					 e->c->peer, s->client, s->key_miss);
		}
		return rc;
	}
	if (!auth_mac_equal(want, m.u.auth.mac)) {
		server_penalty_add(srv, e->c->peer);
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "authentication failed for %s as client "
				   "%s: %s",
				   e->c->peer, s->client,
				   s->key_miss ? s->key_miss : "wrong key");
	}
	engine_mac_rx_start(e);
	return 0;
}

/*
 * A path of rdcp --server's client, as scp takes them: relative to the
 * current directory (the home ssh starts in) or absolute, "~/" meaning
 * the home too.
 */
const char *server_user_path(const char *p)
{
	if (p[0] == '~' && (p[1] == '/' || !p[1]))
		p += p[1] ? 2 : 1;
	return *p ? p : ".";
}

/*
 * A pull's SRCs as the client typed them, each made a path inside the root
 * (path_normalize_peer: "./x" and "/x" are "x") and copied into buf
 * (WIRE_PATHS_MAX bytes: no path grows), srcs[i] pointing at each. 0, or
 * -errno with why filled: -EPERM for a SRC outside the root, or the root
 * itself (but as the directory of a --files-from list's names: HELLO flag
 * LIST). With user (rdcp --server), each is taken as the user typed it
 * (server_user_path): the client proved the one-time key, it is the user.
 */
int server_check_sources(const struct wire_hello *h, bool user, char *buf,
			 const char **srcs, char *why, size_t whysz)
{
	bool base = h->flags & WIRE_HELLO_LIST;
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

		if (!len && !base) {
			snprintf(why, whysz,
				 "source %u of %u is an empty name: refused "
				 "(name a file or directory %s)",
				 i + 1, (unsigned int)h->npaths,
				 user ? "in the home or by its absolute path"
				      : "beneath the receiver's root");
			return -EPERM;
		}
		if (user) { /* as the user typed it, ~/ stripped */
			srcs[i] = server_user_path(p);
			continue;
		}
		memcpy(n, p, len + 1);
		path_normalize_peer(n, &dir);
		len = strlen(n);
		if (len && dir)
			n[len++] = '/', n[len] = '\0';
		if ((!len && !base) ||
		    (len && path_check_relative(n, len, false))) {
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
int server_hello_filter(const struct wire_hello *h, struct filter *f, char *why,
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

/* Lanes for h's session on e: min(its ask, ours), 1 without lanes. */
static unsigned int agree_streams(const struct server *srv,
				  const struct engine *e,
				  const struct wire_hello *h)
{
	unsigned int n = h->streams < srv->max_streams ? h->streams
						       : srv->max_streams;

	return e->c->ops->accept_lane && n > 1 ? n : 1;
}

int server_handshake(struct server *srv, struct engine *e,
		     struct server_session *s, struct wire_hello *h,
		     struct session_params *p, uint8_t key[AEAD_KEY_LEN],
		     uint64_t deadline_ms, struct join_wait *jw)
{
	uint8_t nonce[WIRE_NONCE_LEN];
	struct wire_msg m;
	unsigned int streams;
	int rc;

	rc = engine_expect(e, WIRE_HELLO, &m, left_ms(deadline_ms));
	if (rc)
		return rc;
	*h = m.u.hello;
	if ((h->role != WIRE_PUSH && h->role != WIRE_PULL) ||
	    h->csum > WIRE_CSUM_SHA256 || h->level > 9 ||
	    !(h->flags & WIRE_HELLO_COMPRESS) != !h->level ||
	    h->chunk_size != e->c->geom.chunk_size ||
	    ((h->flags & WIRE_HELLO_DELETE) &&
	     !(h->flags & WIRE_HELLO_RECURSIVE)) ||
	    ((h->flags & WIRE_HELLO_DIRECT) &&
	     (h->flags & WIRE_HELLO_NO_DIRECT)) ||
	    ((h->flags & WIRE_HELLO_DEST_NAMED) &&
	     (h->flags & WIRE_HELLO_DEST_DIR)) ||
	    (h->role == WIRE_PUSH &&
	     (h->npaths != 1 ||
	      (h->nfilters && !(h->flags & WIRE_HELLO_DELETE)))) ||
	    /* a list's names come beneath one path, and mirror nothing */
	    ((h->flags & WIRE_HELLO_LIST) &&
	     (h->role != WIRE_PULL || h->npaths != 1 ||
	      (h->flags & WIRE_HELLO_DELETE))))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a bad HELLO", e->c->peer);
	if ((h->flags & WIRE_HELLO_ENCRYPT) && !srv->auth)
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "refused %s: it asked for --encrypt, which "
				   "needs a key, and this receiver runs with "
				   "--no-auth",
				   e->c->peer);
	if (srv->o->serve.require_encrypt && !(h->flags & WIRE_HELLO_ENCRYPT))
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "refused %s: this receiver requires "
				   "--encrypt (run the copy with --encrypt)",
				   e->c->peer);
	/* Listed before WELCOME: a lane may join as soon as it has it. */
	streams = agree_streams(srv, e, h);
	if (streams > 1 && server_join_open(srv, jw, streams))
		return engine_fail(e, XFER_FAIL_RESOURCE, -EIO,
				   "cannot get random bytes");
	/* Nothing about the root is touched before the peer proved itself. */
	rc = server_auth(srv, e, s, h, nonce, deadline_ms, streams, jw);
	if (!rc && streams > 1)
		rc = server_join_lanes(
			srv, e, jw, streams, h, nonce,
			clock_now_ms() +
				(uint64_t)srv->o->link.connect_timeout_ms);
	if (rc)
		return rc;
	/* The client's O_DIRECT choice, else this receiver's own. */
	p->flags = direct_session_flags(h->flags, srv->o->link.direct);
	p->csum = (enum xfer_csum)h->csum;
	p->level = h->level;
	p->server = true;
	p->pack = h->features & WIRE_FEAT_PACK;
	p->any_slot = h->features & WIRE_FEAT_ANY_SLOT; /* as WELCOME said */
	p->wide = h->role == WIRE_PUSH && srv->wide; /* as WELCOME said */
	p->sync = h->sync; /* wire_decode checked its range */
	/* the service rule (SECURITY.md): other owners only if allowed */
	p->owners_ok = srv->o->ssh.ssh_server || srv->o->serve.allow_owners;
	/* ... and device nodes only if allowed (--allow-devices) */
	p->devices_ok = srv->o->ssh.ssh_server || srv->o->serve.allow_devices;
	if (h->flags & WIRE_HELLO_ENCRYPT) {
		rc = auth_data_key(s->key, h, nonce, key);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "cannot derive the session key");
		p->data_key = key;
	}
	return 0;
}
