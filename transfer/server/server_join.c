/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's half of lanes (--streams; server_int.h): a session that
 * agreed to n lanes lists itself with a random token before its WELCOME
 * carries it; the listener reads every connection's connect data on the
 * connection's own thread, and a lane's join goes to the session its
 * token names (server_join_route) instead of opening a session, so it never
 * takes a session slot. A lane's proof is good for one join: once the
 * session made its proofs (server_join_arm, before its WELCOME goes out), the
 * listener refuses a second join that carries one, so a join read off the
 * wire cannot be replayed within the session, even after the first was
 * turned away. The session itself checks each join's proof of
 * the session key (auth.h auth_lane_proof), its lane index (1..n-1, once
 * each) and accepts it; once all joined, at its deadline, or when a lane's
 * accept failed, it goes on with lanes 0..up-1, the lanes up to the first
 * that did not join (one warning), tells the client so in LANES, and
 * refuses every later join (server_join_stop) with an info line: a join
 * after RING is refused, as is any join once the session ended and
 * unlisted itself (server_join_close).
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cm/cm.h"
#include "transfer/session/auth.h"
#include "transfer/session/engine.h"
#include "transfer/server/server_int.h"
#include "transfer/session/session.h"
#include "util/clock.h"

int server_join_arm(struct server *srv, struct join_wait *w,
	     const struct wire_hello *h, const uint8_t *nonce_s)
{
	uint8_t proof[CM_LANES_MAX][CM_PROOF_LEN];
	uint8_t proof_fb[CM_LANES_MAX][CM_PROOF_LEN];
	unsigned int n = w->streams < CM_LANES_MAX ? w->streams : CM_LANES_MAX;

	for (unsigned int k = 1; k < n; k++) {
		int rc = auth_lane_proof(w->key, h, nonce_s, w->token, k,
					 w->streams, false, proof[k]);

		if (!rc)
			rc = auth_lane_proof(w->key, h, nonce_s, w->token, k,
					     w->streams, true, proof_fb[k]);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&srv->lock);
	memcpy(w->proof, proof, sizeof(proof));
	memcpy(w->proof_fb, proof_fb, sizeof(proof_fb));
	w->n = n;
	pthread_mutex_unlock(&srv->lock);
	return 0;
}

int server_join_open(struct server *srv, struct join_wait *w, unsigned int streams)
{
	if (getrandom(w->token, sizeof(w->token), 0) != sizeof(w->token))
		return -errno;
	w->streams = streams;
	w->n = 0; /* no proof to hold joins to until server_join_arm */
	memset(w->presented, 0, sizeof(w->presented));
	memset(w->presented_fb, 0, sizeof(w->presented_fb));
	w->nq = 0;
	w->owed = streams - 1 < JOIN_QUEUE ? streams - 1 : JOIN_QUEUE;
	pthread_mutex_lock(&srv->lock);
	w->next = srv->joins;
	srv->joins = w;
	w->listed = true;
	pthread_mutex_unlock(&srv->lock);
	return 0;
}

/* Stops w taking joins, and unlists it too with unlist. */
static void join_end(struct server *srv, struct join_wait *w, bool unlist)
{
	struct cm_request *q[JOIN_QUEUE];
	unsigned int nq;

	if (!w->listed) /* only a listed one is routed to */
		return;
	pthread_mutex_lock(&srv->lock);
	w->stopped = true;
	if (w->listed && unlist) {
		for (struct join_wait **p = &srv->joins; *p; p = &(*p)->next)
			if (*p == w) {
				*p = w->next;
				break;
			}
		w->listed = false;
	}
	nq = w->nq;
	memcpy(q, w->q, sizeof(q[0]) * nq);
	w->nq = 0;
	pthread_mutex_unlock(&srv->lock);
	for (unsigned int i = 0; i < nq; i++)
		cm_reject_join(q[i]);
}

void server_join_stop(struct server *srv, struct join_wait *w)
{
	join_end(srv, w, false);
}

void server_join_close(struct server *srv, struct join_wait *w)
{
	join_end(srv, w, true);
}

static void refuse_join(struct server *srv, struct cm_request *req,
			const char *why)
{
	unsigned int held;

	if (log_every_due(&srv->refused[REFUSED_JOIN], clock_now_ms(), 10000,
			  &held))
		log_warn("refused a lane join from %s: %s (%u more refusals "
			 "since last said)",
			 cm_request_peer(req), why, held);
	cm_reject_join(req);
}

static void refuse_replay(struct server *srv, struct cm_request *req,
			  unsigned int lane)
{
	unsigned int held;

	if (log_every_due(&srv->refused[REFUSED_REPLAY], clock_now_ms(), 10000,
			  &held))
		log_warn("refused lane %u from %s: that lane joined already, "
			 "or its proof was presented before (a replay) (%u "
			 "more refusals since last said)",
			 lane, cm_request_peer(req), held);
	cm_reject_join(req);
}

void server_join_route(struct server *srv, struct cm_request *req)
{
	struct join_wait *w;
	struct cm_join j;

	if (!cm_request_join(req, &j)) {
		refuse_join(srv, req, "not a join");
		return;
	}
	pthread_mutex_lock(&srv->lock);
	for (w = srv->joins; w; w = w->next)
		if (!memcmp(w->token, j.token, sizeof(w->token)))
			break;
	/*
	 * A lane's proof is good for one join: the second to carry it is a
	 * copy (the first was the client's, seen on the wire, or the
	 * client's own again), refused whatever became of the first. A
	 * wrong proof goes on to the session, which says so.
	 */
	if (w && j.lane && j.lane < w->n &&
	    auth_proof_equal(j.fallback ? w->proof_fb[j.lane]
					: w->proof[j.lane],
			     j.proof)) {
		bool *seen = j.fallback ? &w->presented_fb[j.lane]
					: &w->presented[j.lane];

		if (*seen) {
			pthread_mutex_unlock(&srv->lock);
			refuse_replay(srv, req, j.lane);
			return;
		}
		*seen = true;
	}
	/* Late: the session went on without that lane, and warned. */
	if (w && w->stopped) {
		pthread_mutex_unlock(&srv->lock);
		log_info("refused lane %u from %s: it came after its session "
			 "went on without it",
			 j.lane, cm_request_peer(req));
		cm_reject_join(req);
		return;
	}
	/*
	 * No more wait than the session is owed: before its AUTH, joins
	 * with its token (which anyone on the path read in WELCOME) would
	 * otherwise hold descriptors nobody budgeted.
	 */
	if (w && w->nq < w->owed) {
		w->q[w->nq++] = req;
		pthread_cond_broadcast(&srv->joined);
		pthread_mutex_unlock(&srv->lock);
		return;
	}
	pthread_mutex_unlock(&srv->lock);
	refuse_join(srv, req,
		    w ? "too many joins at once"
		      : "no session waits for it (unknown token, or its "
			"session started already)");
}

/* --once: no listener thread runs, so the session takes its joins. */
static void once_pump(struct server *srv, int timeout_ms)
{
	struct cm_request *req;

	if (cm_listener_get(srv->once_l, timeout_ms, &req))
		return;
	if (cm_request_read(req, timeout_ms))
		return; /* consumed, said */
	if (cm_request_join(req, NULL))
		server_join_route(srv, req);
	else
		server_refuse(srv, req, REFUSED_BUSY);
}

/* The next join queued for w, waiting until deadline_ms; NULL: none. */
static struct cm_request *next_join(struct server *srv, struct join_wait *w,
				    uint64_t deadline_ms)
{
	struct cm_request *req = NULL;

	for (;;) {
		uint64_t now = clock_now_ms();

		pthread_mutex_lock(&srv->lock);
		if (w->nq) {
			req = w->q[0];
			memmove(w->q, w->q + 1, sizeof(w->q[0]) * --w->nq);
		} else if (now < deadline_ms && !srv->once_l) {
			uint64_t until = now + 100 < deadline_ms ? now + 100
								 : deadline_ms;
			struct timespec ts = {
				.tv_sec = (time_t)(until / 1000),
				.tv_nsec = (long)(until % 1000) * 1000000L,
			};

			pthread_cond_timedwait(&srv->joined, &srv->lock, &ts);
		}
		pthread_mutex_unlock(&srv->lock);
		if (req || clock_now_ms() >= deadline_ms)
			return req;
		if (srv->once_l)
			once_pump(srv, (int)(deadline_ms - now < 100
						     ? deadline_ms - now
						     : 100));
	}
}

/*
 * Lanes 0..up-1 go on (up: the first lane that did not join), said once
 * when that is not all n, and told to the client in LANES.
 */
static int join_settle(struct engine *e, const bool *have, unsigned int n,
		       unsigned int got, int why)
{
	struct wire_msg m = { .type = WIRE_LANES };
	unsigned int up = 1;
	int rc;

	while (up < n && have[up])
		up++;
	if (up < n)
		log_warn("%s: lane %u of %u did not join (%s): going on with "
			 "%u stream%s",
			 e->c->peer, up, n,
			 why == -ETIMEDOUT ? "not in time" : strerror(-why), up,
			 up == 1 ? "" : "s");
	rc = cm_keep_lanes(e->c, up);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc,
				   "cannot go on with %u of %u streams (%u "
				   "joined) for %s",
				   up, n, got + 1, e->c->peer);
	m.u.lanes.up = (uint8_t)up;
	rc = engine_send(e, &m);
	if (!rc && up == n)
		log_info("%u streams from %s", n, e->c->peer);
	return rc;
}

int server_join_lanes(struct server *srv, struct engine *e, struct join_wait *w,
	       unsigned int n, const struct wire_hello *h,
	       const uint8_t *nonce_s, uint64_t deadline_ms)
{
	struct cm_timeouts to = session_timeouts(srv->o);
	bool have[CM_LANES_MAX] = { false };
	uint8_t want[CM_PROOF_LEN];
	unsigned int got = 0;
	bool rail_first;
	int why = 0;
	int rc;

	/* Each rail's first join may take the client CM_RAIL_JOIN_MS. */
	if (e->c->rails > 1) {
		deadline_ms += (uint64_t)(e->c->rails - 1) * CM_RAIL_JOIN_MS;
		if (to.connect_ms > CM_RAIL_JOIN_MS)
			to.connect_ms = CM_RAIL_JOIN_MS;
	}
	rc = engine_flush(e); /* the WELCOME, without a key */
	if (rc)
		return rc;
	rc = cm_set_lanes(e->c, n);
	if (rc)
		return engine_fail(e, XFER_FAIL_RESOURCE, rc,
				   "cannot use %u streams for %s", n,
				   e->c->peer);
	while (got + 1 < n) {
		struct cm_request *req = next_join(srv, w, deadline_ms);
		struct cm_join j;

		if (!req) { /* the rest did not come in time */
			why = -ETIMEDOUT;
			break;
		}
		cm_request_join(req, &j);
		rail_first = e->c->rails > 1 && j.lane < e->c->rails;
		if (j.lane >= n || have[j.lane]) {
			log_warn("refused lane %u from %s: %s", j.lane,
				 cm_request_peer(req),
				 j.lane >= n ? "the session has fewer"
					     : "that lane joined already");
			cm_reject_join(req);
			continue;
		}
		rc = auth_lane_proof(w->key, h, nonce_s, w->token, j.lane, n,
				     j.fallback, want);
		if (rc) {
			cm_reject_join(req);
			server_join_close(srv, w);
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "HMAC failed");
		}
		if (!auth_proof_equal(want, j.proof)) {
			log_warn("refused lane %u from %s: wrong proof of the "
				 "session key",
				 j.lane, cm_request_peer(req));
			server_penalty_add(srv, cm_request_peer(req));
			cm_reject_join(req);
			continue;
		}
		rc = e->c->ops->accept_lane(e->c, req, j.lane, &to);
		/*
		 * A rail's first join the client gave up on (it bounds that
		 * wait by CM_RAIL_JOIN_MS, drops the rail and sends the lane
		 * to rail 0 as a fallback): not the end of the session.
		 */
		if (rc && rail_first && !j.fallback) {
			log_info("lane %u of %s did not join its rail (%s): "
				 "waiting for it on rail 0",
				 j.lane, e->c->peer, strerror(-rc));
			continue;
		}
		/*
		 * Nor is any lane that fails to join: the client, which sees
		 * its join fail too, joins no more, and both go on with the
		 * lanes before it (LANES).
		 */
		if (rc) {
			why = rc;
			break;
		}
		have[j.lane] = true;
		got++;
		/* Its engine does not run meanwhile: the peer is alive. */
		e->last_rx_ms = clock_now_ms();
	}
	server_join_stop(srv, w);
	return join_settle(e, have, n, got, why);
}
