/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The client's side of a session (the sequence is in session.c): connect,
 * HELLO with this copy's parameters and the remote paths, check the
 * receiver's proof of the key and give ours, then run the data source
 * (push) or the data sink into a local DEST (pull). xfer_copy() is the
 * public entry; session_client() the same on a connection made elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "transfer/client/client_int.h"
#include "transfer/session/auth.h"
#include "transfer/fs/direct.h"
#include "transfer/session/role.h"
#include "transfer/fs/place.h"
#include "transfer/session/session.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

static int client_auth(struct engine *e, const struct xfer_opts *o,
		       const struct wire_hello *h, const struct wire_welcome *w)
{
	struct wire_msg m = { .type = WIRE_AUTH };
	uint8_t want[WIRE_MAC_LEN], ck[AUTH_CTRL_KEY_LEN];
	int rc;

	if (!o->link.key)
		return 0; /* the receiver has no key either, or it said so */
	if (!(w->features & WIRE_FEAT_AUTH))
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "%s does not authenticate (it runs with "
				   "--no-auth): not talking to an "
				   "unauthenticated receiver (use --no-auth "
				   "here too, on isolated fabrics only)",
				   e->c->peer);
	rc = auth_mac(o->link.key, AUTH_SERVER, h, w, want);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc, "HMAC failed");
	if (!auth_mac_equal(want, w->mac) && h->client[0])
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "%s failed to authenticate: it has no key "
				   "for client '%s', or another one (its "
				   "--clients directory needs this key file "
				   "as %s.key)",
				   e->c->peer, h->client, h->client);
	if (!auth_mac_equal(want, w->mac))
		return engine_fail(e, XFER_FAIL_AUTH, -EACCES,
				   "%s failed to authenticate: its key is not "
				   "ours (copy the same key file to both "
				   "hosts)",
				   e->c->peer);
	rc = auth_mac(o->link.key, AUTH_CLIENT, h, w, m.u.auth.mac);
	if (!rc)
		rc = auth_ctrl_key(o->link.key, h, w->nonce, ck);
	if (rc) {
		OPENSSL_cleanse(ck, sizeof(ck));
		return engine_fail(e, XFER_FAIL_INTERNAL, rc, "HMAC failed");
	}
	/*
	 * The receiver tags what it sends after WELCOME; we tag what we send
	 * after AUTH.
	 */
	engine_mac_key(e, ck, false);
	OPENSSL_cleanse(ck, sizeof(ck));
	engine_mac_rx_start(e);
	return engine_send_last_plain(e, &m);
}

_Static_assert((int)XFER_SYNC_EXISTS == (int)WIRE_SYNC_EXISTS &&
		       (int)XFER_SYNC_SIZE == (int)WIRE_SYNC_SIZE &&
		       (int)XFER_SYNC_MTIME == (int)WIRE_SYNC_MTIME &&
		       (int)XFER_SYNC_CHECKSUM == (int)WIRE_SYNC_CHECKSUM,
	       "--sync levels travel as they are");

static uint32_t hello_flags(const struct xfer_opts *o)
{
	return (o->copy.fsync ? WIRE_HELLO_FSYNC : 0) |
	       (!o->copy.pull && (o->copy.nsrcs > 1 || o->copy.files_from)
			? WIRE_HELLO_DEST_DIR
			: 0) |
	       (o->copy.recursive ? WIRE_HELLO_RECURSIVE : 0) |
	       (o->copy.preserve ? WIRE_HELLO_PRESERVE : 0) |
	       (o->copy.owner ? WIRE_HELLO_OWNER : 0) |
	       (o->copy.group ? WIRE_HELLO_GROUP : 0) |
	       (o->copy.numeric_ids ? WIRE_HELLO_NUMERIC_IDS : 0) |
	       (o->copy.xattrs ? WIRE_HELLO_XATTRS : 0) |
	       (o->copy.acls ? WIRE_HELLO_ACLS : 0) |
	       (o->copy.hard_links ? WIRE_HELLO_HARD_LINKS : 0) |
	       (o->copy.devices ? WIRE_HELLO_DEVICES : 0) |
	       (o->copy.specials ? WIRE_HELLO_SPECIALS : 0) |
	       (o->copy.resume ? WIRE_HELLO_RESUME : 0) |
	       (o->copy.no_clobber ? WIRE_HELLO_NO_CLOBBER : 0) |
	       (o->copy.update ? WIRE_HELLO_UPDATE : 0) |
	       (o->copy.encrypt ? WIRE_HELLO_ENCRYPT : 0) |
	       (o->copy.compress ? WIRE_HELLO_COMPRESS : 0) |
	       (o->copy.sparse ? WIRE_HELLO_SPARSE : 0) |
	       (o->copy.dry_run ? WIRE_HELLO_DRY_RUN : 0) |
	       (o->copy.delete_extra ? WIRE_HELLO_DELETE : 0) |
	       (o->copy.pull && o->copy.files_from ? WIRE_HELLO_LIST : 0) |
	       (o->copy.dest_named && o->copy.nsrcs == 1 && !o->copy.files_from
			? WIRE_HELLO_DEST_NAMED
			: 0) |
	       direct_hello_flags(o->link.direct);
}

static int build_hello(struct engine *e, const struct xfer_opts *o,
		       struct wire_hello *h)
{
	int rc = 0;

	h->role = o->copy.pull ? WIRE_PULL : WIRE_PUSH;
	h->csum = (uint8_t)o->copy.csum;
	h->level = (uint8_t)o->copy.compress;
	h->flags = hello_flags(o);
	h->features = (o->link.key ? WIRE_FEAT_AUTH : 0) | WIRE_FEAT_PACK |
		      WIRE_FEAT_ANY_SLOT;
	h->chunk_size = e->c->geom.chunk_size;
	h->bwlimit = o->copy.bwlimit;
	h->streams = (uint8_t)session_streams(o, e->c);
	h->sync = (uint8_t)o->copy.sync;
	/* A named key's name (key_load checked it): only with that key. */
	if (o->link.key && o->link.client_name)
		snprintf(h->client, sizeof(h->client), "%s",
			 o->link.client_name);
	if (getrandom(h->nonce, WIRE_NONCE_LEN, 0) != WIRE_NONCE_LEN)
		return engine_fail(e, XFER_FAIL_RESOURCE, -errno,
				   "cannot get random bytes");
	if (!o->copy.pull)
		rc = wire_hello_add_path(h, o->copy.dest ? o->copy.dest : "");
	for (size_t i = 0; o->copy.pull && !rc && i < o->copy.nsrcs; i++)
		rc = wire_hello_add_path(h, o->copy.srcs[i]);
	if (rc)
		return engine_fail(e, XFER_FAIL_USAGE, rc,
				   "the remote paths are too long for one "
				   "session (%u bytes at most)",
				   WIRE_PATHS_MAX);
	/*
	 * A pull's receiver walks, so it gets the filters; a push's with
	 * --delete keeps what they exclude.
	 */
	for (size_t i = 0; (o->copy.pull || o->copy.delete_extra) &&
			   o->copy.filter && !rc && i < o->copy.filter->n;
	     i++)
		rc = wire_hello_add_filter(h, o->copy.filter->rules[i].include,
					   o->copy.filter->rules[i].text);
	if (rc)
		return engine_fail(e, XFER_FAIL_USAGE, rc,
				   "the --include/--exclude rules are too "
				   "long for the receiver (%u bytes at most)",
				   WIRE_FILTERS_MAX);
	return 0;
}

#ifdef RDCP_TEST_HOOKS
/*
 * RDCP_TEST_LANE_JOIN_DELAY=K:MS (tests/e2e/scenarios.sh s_streams_late):
 * lane K's join waits MS milliseconds first, as on a loaded host whose join
 * comes after the receiver's deadline.
 */
static void join_delay_hook(unsigned int lane)
{
	const char *h = getenv("RDCP_TEST_LANE_JOIN_DELAY");
	char *end;
	unsigned long k, ms;

	if (!h)
		return;
	k = strtoul(h, &end, 10);
	if (*end != ':' || k != lane)
		return;
	ms = strtoul(end + 1, NULL, 10);
	usleep((useconds_t)(ms > 60000 ? 60000 : ms) * 1000);
}
#else
static void join_delay_hook(unsigned int lane)
{
	(void)lane;
}
#endif

/*
 * Lanes 1..n-1 join, each with the token and its proof (auth.h), one
 * after the other until one does not (whatever the cause: refused after
 * the receiver's deadline, timed out, resources); *up the lanes joined,
 * *why the failed join's error (0: all joined). 0, or the error of
 * engine_fail for what ends the session.
 */
static int join_lanes(struct engine *e, const struct xfer_opts *o,
		      const struct wire_hello *h, const struct wire_welcome *w,
		      unsigned int *up, unsigned int *dropped, int *why)
{
	struct cm_timeouts to = session_timeouts(o);
	unsigned int n = w->streams;
	struct cm_join j = { 0 };
	int rc = 0;

	*up = 1;
	*why = 0;
	memcpy(j.token, w->token, CM_TOKEN_LEN);
	for (unsigned int k = 1; k < n; k++) {
		j.lane = (uint16_t)k;
		j.fallback = false;
		rc = auth_lane_proof(o->link.key, h, w->nonce, j.token, k, n,
				     false, j.proof);
		if (rc)
			break;
		join_delay_hook(k);
		rc = cm_join(e->c, &j, &to);
		/*
		 * Its rail was dropped (cm/ said so, once): the lane joins
		 * rail 0 instead, with its fallback proof (auth.h).
		 */
		if (rc == -ENETUNREACH && w->rails > 1) {
			if (k < w->rails)
				(*dropped)++; /* lane k < R is rail k's first */
			j.fallback = true;
			rc = auth_lane_proof(o->link.key, h, w->nonce, j.token,
					     k, n, true, j.proof);
			if (rc)
				break;
			rc = cm_join(e->c, &j, &to);
		}
		/* Its engine does not run meanwhile: the peer is alive. */
		e->last_rx_ms = clock_now_ms();
		if (rc) { /* cm/ said why at debug level; LANES settles it */
			*why = rc;
			rc = 0;
			break;
		}
		*up = k + 1;
	}
	OPENSSL_cleanse(&j, sizeof(j));
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc, "HMAC failed");
	return 0;
}

/*
 * The lanes the receiver agreed to in WELCOME join (join_lanes) before the
 * ring is announced; then the receiver's LANES says which of them carry
 * data: lanes 0..up-1, every one of which must have joined here too. A
 * lane that did not join is one warning, never the end of the session.
 */
static int client_lanes(struct engine *e, const struct xfer_opts *o,
			const struct wire_hello *h,
			const struct wire_welcome *w, unsigned int *reached)
{
	unsigned int n = w->streams;
	unsigned int dropped = 0; /* rails */
	unsigned int mine, up;
	struct wire_msg m;
	int why, rc;

	*reached = 1;
	if (n <= 1)
		return 0;
	if (n > h->streams)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s agreed to %u streams, %u were asked "
				   "for",
				   e->c->peer, n, h->streams);
	/* AUTH first: the receiver takes joins once it checked it. */
	rc = engine_flush(e);
	if (rc)
		return rc;
	rc = cm_set_lanes(e->c, n);
	if (rc)
		return engine_fail(e, XFER_FAIL_CONNECT, rc,
				   "cannot use %u streams to %s", n,
				   e->c->peer);
	if (w->rails > 1) {
		struct cm_rail rails[CM_LANES_MAX] = { 0 };

		for (unsigned int r = 1; r < w->rails; r++) {
			rails[r].family = w->rail[r].family;
			memcpy(rails[r].addr, w->rail[r].addr, 16);
		}
		rc = cm_set_rails(e->c, w->rails, rails, o->link.rail_devices);
		if (rc)
			return engine_fail(e, XFER_FAIL_PROTOCOL, rc,
					   "cannot use the %u rails of %s",
					   w->rails, e->c->peer);
	}
	rc = join_lanes(e, o, h, w, &mine, &dropped, &why);
	/*
	 * The receiver's word comes once it stopped taking joins: all
	 * joined, or its deadline (the connect timeout from its AUTH, and
	 * CM_RAIL_JOIN_MS per rail beyond the first), or a failed accept.
	 */
	if (!rc)
		rc = engine_expect(e, WIRE_LANES, &m,
				   SESSION_HANDSHAKE_MS +
					   o->link.connect_timeout_ms +
					   (int)w->rails * CM_RAIL_JOIN_MS);
	if (rc)
		return rc;
	up = m.u.lanes.up;
	if (up > n || up > mine)
		return engine_fail(e, XFER_FAIL_CONNECT, -ENOTCONN,
				   "%s goes on with %u of %u streams, %u "
				   "joined here",
				   e->c->peer, up, n, mine);
	rc = cm_keep_lanes(e->c, up);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc,
				   "cannot go on with %u of %u streams to %s",
				   up, n, e->c->peer);
	if (up < n)
		log_warn("lane %u of %u to %s did not join (%s): going on "
			 "with %u stream%s",
			 up, n, e->c->peer,
			 up < mine	     ? "the receiver did not take it"
			 : why == -ETIMEDOUT ? "timed out"
			 : why == -EACCES    ? "the receiver refused it"
					     : strerror(-why),
			 up, up == 1 ? "" : "s");
	/* The rails some lane of this session runs on. */
	if (w->rails > 1 && (up < w->rails ? up : w->rails) > dropped)
		*reached = (up < w->rails ? up : w->rails) - dropped;
	if (w->rails > 1 && !dropped)
		log_info("%u streams to %s on %u rails", up, e->c->peer,
			 w->rails);
	else if (w->rails > 1)
		log_info("%u streams to %s on %u of %u rails (%u dropped)", up,
			 e->c->peer, w->rails - dropped, w->rails, dropped);
	log_info("%u streams to %s", up, e->c->peer);
	return 0;
}

static int client_handshake(struct engine *e, const struct xfer_opts *o,
			    uint8_t key[AEAD_KEY_LEN], uint32_t *features,
			    unsigned int *rails)
{
	struct wire_msg m = { .type = WIRE_HELLO };
	struct wire_msg w;
	int rc;

	rc = build_hello(e, o, &m.u.hello);
	if (!rc)
		rc = engine_send(e, &m);
	if (!rc)
		rc = engine_expect(e, WIRE_WELCOME, &w, SESSION_HANDSHAKE_MS);
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
	if (!rc && o->copy.encrypt) {
		rc = auth_data_key(o->link.key, &m.u.hello, w.u.welcome.nonce,
				   key);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "cannot derive the session key");
	}
	if (!rc)
		rc = client_lanes(e, o, &m.u.hello, &w.u.welcome, rails);
	if (!rc)
		rc = session_rings(e, o->copy.pull);
	return rc;
}

static struct session_params client_params(const struct xfer_opts *o,
					   const uint8_t *key)
{
	struct session_params p = {
		.flags = hello_flags(o),
		.csum = o->copy.csum,
		.level = o->copy.compress,
		.data_key = o->copy.encrypt ? key : NULL,
		.sync = (uint8_t)o->copy.sync,
		.owners_ok = true, /* a pull's sink: this user's own rights */
		.devices_ok = true,
	};

	return p;
}

/*
 * --split's gate, once the handshake is done (client_gate): 0 with
 * *range, or the error of engine_fail when the session is to end.
 */
static int client_gate_ready(struct engine *e, const struct client_gate *g,
			     unsigned int rails,
			     const struct xfer_range **range)
{
	struct client_ready info = {
		.chunk_size = e->c->geom.chunk_size,
		.rails = rails ? rails : 1,
		.rdma = e->c->transport && !strcmp(e->c->transport, "rdma"),
	};
	int rc = g->ready(g->arg, &info, range);

	/* Its engine did not run meanwhile: the peer is alive. */
	e->last_rx_ms = clock_now_ms();
	if (!rc)
		return 0;
	/* The split goes on without this session: nothing was sent. */
	return engine_fail_logged(e, XFER_FAIL_CANCELED, -ECANCELED);
}

static enum xfer_fail client_session(const struct xfer_opts *o,
				     struct cm_conn *c, struct xfer_stats *st,
				     const struct client_gate *gate)
{
	struct sink_target t = { .dirfd = -1 };
	const struct xfer_range *range = NULL;
	char why[WIRE_MSG_MAX + 1];
	uint8_t key[AEAD_KEY_LEN];
	uint32_t features = 0;
	unsigned int rails = 1;
	struct engine e;
	enum xfer_fail v;
	double t0 = clock_now_s();
	mode_t um;
	int rc;

	rc = engine_init(&e, c, o);
	if (rc)
		return XFER_FAIL_RESOURCE;
	rc = client_handshake(&e, o, key, &features, &rails);
	if (!rc && gate && !o->copy.pull)
		rc = client_gate_ready(&e, gate, rails, &range);
	if (!rc && o->copy.pull) {
		um = umask(022);
		umask(um);
		t.umask = um;
		t.p = client_params(o, key);
		t.p.any_slot = features & WIRE_FEAT_ANY_SLOT;
		t.want = o->copy.files_from ? NULL : o->copy.srcs;
		t.nwant = o->copy.files_from ? 0 : o->copy.nsrcs;
		t.list = o->copy.files_from;
		t.list_sep = o->copy.from0 ? '\0' : '\n';
		t.list_base = o->copy.srcs[0];
		t.filter = o->copy.filter;
		/* a list's names land beneath DEST: a directory */
		rc = place_target_local(o->copy.dest,
					o->copy.files_from ? 2 : o->copy.nsrcs,
					&t, why, sizeof(why));
		if (rc)
			engine_fail(&e,
				    rc == -ENOTDIR ? XFER_FAIL_USAGE
						   : XFER_FAIL_LOCAL_IO,
				    rc, "%s", why);
		else
			sink_run(&e, &t, st);
		st->dest_named = !rc && !t.is_dir;
	} else if (!rc) {
		struct source_cfg cfg = {
			.srcs = o->copy.srcs,
			.nsrcs = o->copy.nsrcs,
			.rootfd = -1,
			.bwlimit = o->copy.bwlimit,
			.filter = o->copy.filter,
			.list = o->copy.files_from,
			.list_sep = o->copy.from0 ? '\0' : '\n',
			.list_tree = o->copy.files_from_tree,
			.range = range,
			.p = client_params(o, key),
		};

		cfg.p.pack = features & WIRE_FEAT_PACK;
		cfg.p.wide = features & WIRE_FEAT_WIDE;
		cfg.p.any_slot = features & WIRE_FEAT_ANY_SLOT;
		src_run(&e, &cfg, st);
		st->dest_named = e.target == WIRE_TARGET_NAMED;
	}
	OPENSSL_cleanse(key, sizeof(key));
	st->seconds = clock_now_s() - t0;
	snprintf(st->peer, sizeof(st->peer), "%s", c->peer);
	st->streams = c->lanes > 1 ? c->lanes_up : 1;
	st->sessions = 1;
	st->numa_node = c->numa_node;
	st->workers = e.workers;
	snprintf(st->pages, sizeof(st->pages), "%s", c->pages ? c->pages : "");
	if (e.fail) {
		snprintf(st->error, sizeof(st->error), "%s", e.why);
		st->cause = e.err;
	}
	engine_tell_peer(&e);
	v = session_verdict(&e, st);
	engine_release(&e);
	if (t.dirfd >= 0)
		close(t.dirfd);
	return v;
}

enum xfer_fail session_client(const struct xfer_opts *o, struct cm_conn *c,
			      struct xfer_stats *st)
{
	return client_session(o, c, st, NULL);
}

struct cm_geom client_geom(const struct xfer_opts *o)
{
	struct cm_geom geom = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = o->link.window,
		.chunk_size = o->link.chunk_size,
	};

	return geom;
}

uint64_t xfer_pinned_bytes(const struct xfer_opts *o)
{
	struct cm_geom g = client_geom(o);

	/* Left to the link: the most it can be. */
	if (!g.slots)
		g.slots = (uint16_t)cm_window_slots(CM_WINDOW_MAX_GBPS,
						    g.chunk_size, 0);

	return cm_pinned_bytes(&g);
}

enum xfer_fail client_run(const struct xfer_opts *o, struct cm_conn *c,
			  struct xfer_stats *st, const struct client_gate *gate)
{
	enum xfer_fail v;
	char sz[32];

	snprintf(st->transport, sizeof(st->transport), "%s",
		 c->transport ? c->transport : "?");
	snprintf(st->device, sizeof(st->device), "%s", c->dev);
	log_info("ring: %u slots of %s on %s", c->geom.slots,
		 units_format_size(c->geom.chunk_size, sz, sizeof(sz)), c->dev);
	v = client_session(o, c, st, gate);
	cm_conn_destroy(c);
	return v;
}
