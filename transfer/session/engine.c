/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The event loop of one session (see engine.h); the control channel it
 * flushes and feeds, and the failure it ends on, are in engine_ctrl.c.
 *
 * Each turn of the loop polls the CQs, hands completions to the role,
 * collects finished worker items, lets the role post what it can, flushes
 * queued control messages as control credits allow, sends acks and
 * keepalives, and checks the peer-silence timeout. When a turn did nothing
 * it waits according to --poll: busy (spin), event (arm the CQs, poll once
 * more to close the race, sleep on the completion channel and the workq's
 * eventfd) or adaptive (spin a little, then sleep).
 */
#include <endian.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "transfer/session/affinity.h"
#include "transfer/session/engine.h"
#include "transfer/session/engine_int.h"
#include "util/clock.h"
#include "util/log.h"

#define POLL_BATCH 32 /* = sizeof(engine.evq) / sizeof(engine.evq[0]) */
#define ADAPTIVE_SPIN_NS 20000 /* spin this long after the last work */
#define WAIT_SLICE_MS 100

int engine_init(struct engine *e, struct cm_conn *c, const struct xfer_opts *o)
{
	int rc;

	memset(e, 0, sizeof(*e));
	e->c = c;
	e->o = o;
	credit_ctrl_init(&e->cc, c->geom.ctrl_credits);
	e->tx_busy = calloc(c->ntx, 1);
	e->held = calloc(c->nrx ? c->nrx : 1, sizeof(*e->held));
	if (!e->tx_busy || !e->held) {
		free(e->tx_busy);
		free(e->held);
		return -ENOMEM;
	}
	/* Pinned before the workers start: they inherit this thread's CPUs. */
	e->workers = affinity_apply(c, o);
	rc = workq_create(e->workers, &e->wq);
	if (rc) {
		free(e->tx_busy);
		free(e->held);
		log_err("cannot start worker threads: %s", strerror(-rc));
		return rc;
	}
	e->last_rx_ms = e->last_tx_ms = clock_now_ms();
	return 0;
}

void engine_release(struct engine *e)
{
	struct engine_out *o, *next;

	workq_destroy(e->wq);
	e->wq = NULL;
	for (o = e->out_head; o; o = next) {
		next = o->next;
		free(o);
	}
	e->out_head = e->out_tail = NULL;
	free(e->tx_busy);
	e->tx_busy = NULL;
	free(e->held);
	e->held = NULL;
	OPENSSL_cleanse(&e->mac, sizeof(e->mac));
}

/* ---- the loop ---- */

#ifdef RDCP_TEST_HOOKS
/*
 * RDCP_TEST_DROP_AT_WRITE=N: the Nth ring write this process receives,
 * counted over all its sessions (so it happens once), ends its session as
 * a cut link would: no ERROR to the peer, the connection just closed.
 */
static bool test_drop(struct engine *e)
{
	static atomic_ulong writes;
	const char *n = getenv("RDCP_TEST_DROP_AT_WRITE");

	if (!n || atomic_fetch_add(&writes, 1) + 1 != strtoul(n, NULL, 0))
		return false;
	e->peer_said_error = true; /* engine_tell_peer() says nothing */
	engine_fail(e, XFER_FAIL_PEER_LOST, -ECONNRESET,
		    "test hook: dropping the connection to %s at write %s",
		    e->c->peer, n);
	return true;
}
#endif

/* A flush (cm.h): the connection had failed already, for some cause. */
static bool is_flush(const struct cm_event *ev)
{
	return ev->status == -ECONNRESET ||
	       (ev->type == CM_EV_CLOSED && !ev->status);
}

/* A completion or CLOSED carrying the cause of the connection's failure. */
static int completion_failed(struct engine *e, const struct cm_event *ev)
{
	enum xfer_fail k;

	switch (ev->status) {
	case -EPROTO:
		k = XFER_FAIL_PROTOCOL;
		break;
	case -ENODEV:
		k = XFER_FAIL_RESOURCE;
		break;
	case -EOVERFLOW:
	case -EFAULT: /* a local fault: ours, not the peer's */
		k = XFER_FAIL_INTERNAL;
		break;
	default:
		k = XFER_FAIL_PEER_LOST;
		break;
	}
	/* cm/ logged it; its words go to the user's summary as well. */
	return engine_fail_set(e, k, ev->status,
			       e->c->err[0] ? e->c->err : NULL, true);
}

static int dispatch(struct engine *e, const struct cm_event *ev)
{
	int rc;

	if (is_flush(ev)) {
		/* The cause may come later in the batch: drain_failed(). */
		e->flushed = true;
		return 0;
	}
	if (ev->status || ev->type == CM_EV_CLOSED)
		return completion_failed(e, ev);
	switch (ev->type) {
	case CM_EV_RECV:
		e->last_rx_ms = clock_now_ms();
		return engine_ctrl_recv(e, ev);
	case CM_EV_DATA:
		e->last_rx_ms = clock_now_ms();
		/* The rx buffer held nothing: it goes straight back. */
		rc = e->c->ops->post_recv(e->c, (unsigned int)ev->id);
		if (rc)
			return engine_fail_logged(e, XFER_FAIL_PEER_LOST, rc);
		if (!e->role->on_data)
			return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
					   "%s wrote into a ring it was never "
					   "given",
					   e->c->peer);
#ifdef RDCP_TEST_HOOKS
		if (test_drop(e))
			return -ECONNRESET;
#endif
		rc = e->role->on_data(e, ev);
		/* What it took may be what a held message waits for. */
		return rc || !e->held_len ? rc : engine_ctrl_retry_held(e);
	case CM_EV_SEND_DONE:
		if (ev->id & ENGINE_WR_CTRL) {
			unsigned int i = (unsigned int)(ev->id & 0xffff);

			if (i < e->c->ntx && e->tx_busy[i]) {
				e->tx_busy[i] = 0;
				e->tx_inflight--;
			}
			return 0;
		}
		return e->role->on_write_done(e, ev->id);
	default:
		return 0;
	}
}

static void idle_wait(struct engine *e, int timeout_ms)
{
	int rc;

	if (e->o->link.poll == XFER_POLL_BUSY)
		return;
	if (e->o->link.poll == XFER_POLL_ADAPTIVE) {
		uint64_t now = clock_now_ns();

		if (!e->spins++)
			e->idle_since_ns = now;
		if (now - e->idle_since_ns < ADAPTIVE_SPIN_NS)
			return;
	}
	if (!e->armed) {
		/* Arm, then let the caller poll once more before sleeping. */
		if (e->c->ops->arm(e->c) == 0)
			e->armed = true;
		return;
	}
	/* Only here, before sleeping, the workq's eventfd is read. */
	if (!workq_prepare_wait(e->wq))
		return;
	rc = e->c->ops->wait(e->c, workq_fd(e->wq), timeout_ms);
	e->armed = false;
	if (rc)
		engine_fail_logged(e, XFER_FAIL_INTERNAL, rc);
}

/* Dispatches the polled batch up to the event that ends the role. */
static int dispatch_batch(struct engine *e)
{
	int done = 0;

	while (e->evq_len && !e->fail && !e->role->finished(e)) {
		e->evq_len--;
		dispatch(e, &e->evq[e->evq_head++]);
		done++;
	}
	return done;
}

/*
 * A flush or a plain CLOSED was seen: the connection failed. When it
 * failed for a cause of its own (retry exceeded, a remote access error,
 * an RNR, a fatal async event), that status is on one of the CQs too,
 * maybe behind a batch of flushes on the other: an RC QP in error flushes
 * every posted receive, and the receive CQ is polled first. Dispatches
 * what is left, as usual (a peer's ERROR, or the BYE that ends the role,
 * may still be among it), until a failure is recorded, the role ends or
 * both CQs are empty; bounded, as every work request completes once.
 * With no cause found, the peer closed the connection.
 */
static void drain_failed(struct engine *e)
{
	unsigned int bound =
		cm_rq_depth(&e->c->geom) + cm_sq_depth(&e->c->geom) + 2;

	for (unsigned int k = 0; k < bound && !e->fail && !e->role->finished(e);
	     k++) {
		int n = e->c->ops->poll(e->c, e->evq, POLL_BATCH);

		if (n <= 0)
			break;
		e->evq_head = 0;
		e->evq_len = (unsigned int)n;
		dispatch_batch(e);
	}
	if (!e->fail && !e->role->finished(e))
		engine_fail(e, XFER_FAIL_PEER_LOST, -ECONNRESET,
			    "%s went away: the connection was closed "
			    "mid-session",
			    e->c->peer);
}

static int run(struct engine *e, uint64_t deadline_ms)
{
	/* what the role before this one left: the rest of a BATCH */
	if (e->held_len && !e->fail)
		(void)engine_ctrl_retry_held(e);
	while (!e->fail && !e->role->finished(e)) {
		uint64_t now;
		int progress = 0, n, rc;

		if (!e->evq_len) {
			n = e->c->ops->poll(e->c, e->evq, POLL_BATCH);
			if (n < 0) {
				engine_fail_logged(e, XFER_FAIL_INTERNAL, n);
				break;
			}
			e->evq_head = 0;
			e->evq_len = (unsigned int)n;
		}
		/* Stop at the event that finishes the role; keep the rest. */
		progress += dispatch_batch(e);
		if (e->flushed && !e->fail && !e->role->finished(e))
			drain_failed(e);
		progress += workq_run_done(e->wq);
		if (e->fail)
			break;
		if (e->role->pump && (rc = e->role->pump(e)) > 0)
			progress += rc;
		if ((rc = engine_ctrl_flush(e)) > 0)
			progress += rc;
		now = clock_now_ms();
		if (!e->closing &&
		    (credit_ctrl_should_ack(&e->cc) ||
		     now - e->last_tx_ms >= ENGINE_KEEPALIVE_MS) &&
		    engine_ctrl_acks(e) > 0)
			progress++;
		if (e->fail)
			break;
		if (e->o->link.cancel && *e->o->link.cancel) {
			if (e->serving)
				engine_fail(e, XFER_FAIL_CANCELED, -ESHUTDOWN,
					    "receiver shutting down");
			else
				engine_fail(e, XFER_FAIL_CANCELED, -EINTR,
					    "interrupted");
			break;
		}
		if (now - e->last_rx_ms >= (uint64_t)e->o->link.timeout_ms) {
			engine_fail(e, XFER_FAIL_PEER_LOST, -ETIMEDOUT,
				    "no word from %s for %d s: its host is "
				    "down, the link is cut or it hung",
				    e->c->peer, e->o->link.timeout_ms / 1000);
			break;
		}
		if (deadline_ms && now >= deadline_ms) {
			engine_fail(e, XFER_FAIL_PROTOCOL, -ETIMEDOUT,
				    "%s did not answer the handshake in time",
				    e->c->peer);
			break;
		}
		if (progress) {
			e->spins = 0;
			continue;
		}
		idle_wait(e, e->nap_ms ? e->nap_ms : WAIT_SLICE_MS);
	}
	return e->fail ? e->err : 0;
}

int engine_run(struct engine *e, const struct engine_role *role, void *data)
{
	int rc;

	e->role = role;
	e->role_data = data;
	e->spins = 0;
	rc = run(e, 0);
	/* data lives in the caller's frame: nothing may reach it later. */
	e->role = NULL;
	e->role_data = NULL;
	return rc;
}

struct expect_state {
	uint8_t want;
	struct wire_msg *out;
	bool got;
};

static int expect_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct expect_state *x = e->role_data;

	if (m->type == WIRE_CREDIT)
		return 0;
	if (m->type != x->want)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent %s where %s was expected",
				   e->c->peer, wire_type_name(m->type),
				   wire_type_name(x->want));
	*x->out = *m;
	x->got = true;
	return 0;
}

static int expect_on_write_done(struct engine *e, uint64_t wr_id)
{
	return 0;
}

static bool expect_finished(const struct engine *e)
{
	const struct expect_state *x = e->role_data;

	return x->got;
}

int engine_expect(struct engine *e, uint8_t want, struct wire_msg *m,
		  int timeout_ms)
{
	static const struct engine_role expect_role = {
		.on_msg = expect_on_msg,
		.on_write_done = expect_on_write_done,
		.finished = expect_finished,
	};
	const struct engine_role *saved = e->role;
	void *saved_data = e->role_data;
	struct expect_state x = { .want = want, .out = m };
	int rc;

	e->role = &expect_role;
	e->role_data = &x;
	rc = run(e, clock_now_ms() + (uint64_t)timeout_ms);
	e->role = saved;
	e->role_data = saved_data;
	return rc;
}
