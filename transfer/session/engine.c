/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The event loop and control channel of one session (see engine.h).
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
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "transfer/session/affinity.h"
#include "transfer/session/engine.h"
#include "util/clock.h"
#include "util/log.h"

#define POLL_BATCH 32 /* = sizeof(engine.evq) / sizeof(engine.evq[0]) */
#define ADAPTIVE_SPIN_NS 20000 /* spin this long after the last work */
#define WAIT_SLICE_MS 100
/* engine_tell_peer(): how long it waits for the ERROR to be sent, at most */
#define TELL_LINGER_MS 1000

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

/*
 * Records the first failure and logs why; logged: cm/ already logged it
 * (why NULL: strerror of err is kept).
 */
static int fail_set(struct engine *e, enum xfer_fail klass, int err,
		    const char *why, bool logged)
{
	if (e->fail)
		return e->err;
	e->fail = klass;
	e->err = err ? err : -EIO;
	snprintf(e->why, sizeof(e->why), "%s", why ? why : strerror(-e->err));
	if (!logged && engine_user_is_peer(e))
		log_info("%s", e->why);
	else if (!logged)
		log_err("%s", e->why);
	return e->err;
}

bool engine_user_is_peer(const struct engine *e)
{
	return e->serving && e->o->ssh.ssh_server;
}

int engine_fail(struct engine *e, enum xfer_fail klass, int err,
		const char *fmt, ...)
{
	char why[sizeof(e->why)];
	va_list ap;

	if (e->fail)
		return e->err;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return fail_set(e, klass, err, why, false);
}

int engine_fail_logged(struct engine *e, enum xfer_fail klass, int err)
{
	return fail_set(e, klass, err, NULL, true);
}

enum xfer_fail engine_klass_of(int status, bool remote)
{
	switch (status) {
	case 0:
		return XFER_OK;
	case -EBADMSG:
		return XFER_FAIL_VERIFY;
	case -EPROTO:
		return XFER_FAIL_PROTOCOL;
	case -ENOMEM:
		return XFER_FAIL_RESOURCE;
	default:
		return remote ? XFER_FAIL_REMOTE_IO : XFER_FAIL_LOCAL_IO;
	}
}

/* ---- control channel ---- */

void engine_mac_key(struct engine *e, const uint8_t ck[AUTH_CTRL_KEY_LEN],
		    bool server)
{
	memcpy(e->mac.key, ck, AUTH_CTRL_KEY_LEN);
	e->mac.tx_dir = server ? AUTH_DIR_TO_CLIENT : AUTH_DIR_TO_SERVER;
	e->mac.rx_dir = server ? AUTH_DIR_TO_SERVER : AUTH_DIR_TO_CLIENT;
}

void engine_mac_rx_start(struct engine *e)
{
	e->mac.rx = true;
}

static int queue_msg(struct engine *e, struct wire_msg *m, bool tag_after)
{
	uint8_t buf[WIRE_CTRL_SIZE];
	struct engine_out *o;
	/* Every message leaves room for a tag, whether it gets one or not. */
	int len = wire_encode(m, buf, sizeof(buf) - WIRE_TAG_LEN);

	if (len < 0)
		return engine_fail(e, XFER_FAIL_INTERNAL, len,
				   "cannot encode %s message: %s",
				   wire_type_name(m->type), strerror(-len));
	o = malloc(sizeof(*o) + (size_t)len);
	if (!o)
		return engine_fail(e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory queueing a message");
	o->next = NULL;
	o->len = (uint32_t)len;
	o->tag_after = tag_after;
	memcpy(o->buf, buf, (size_t)len);
	if (e->out_tail)
		e->out_tail->next = o;
	else
		e->out_head = o;
	e->out_tail = o;
	return 0;
}

int engine_send(struct engine *e, struct wire_msg *m)
{
	return queue_msg(e, m, false);
}

int engine_send_last_plain(struct engine *e, struct wire_msg *m)
{
	return queue_msg(e, m, true);
}

bool engine_out_empty(const struct engine *e)
{
	return !e->out_head;
}

static int free_tx(const struct engine *e)
{
	for (unsigned int i = 0; i < e->c->ntx; i++)
		if (!e->tx_busy[i])
			return (int)i;
	return -1;
}

/*
 * Once tagging is on, appends the tag of the len-byte message at p (a tx
 * buffer) under the next sequence number. Returns the length to post, or
 * -errno (recorded).
 */
static int seal(struct engine *e, uint8_t *p, uint32_t len)
{
	int n, rc;

	if (!e->mac.tx)
		return (int)len;
	n = wire_tag_append(p, len, e->c->geom.ctrl_size);
	if (n < 0)
		return engine_fail(e, XFER_FAIL_INTERNAL, n,
				   "no room for a control message's tag");
	rc = auth_ctrl_tag(e->mac.key, e->mac.tx_dir, e->mac.tx_seq, p, len,
			   p + len);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc,
				   "cannot tag a control message");
	e->mac.tx_seq++;
	return n;
}

/*
 * Posts len bytes already in tx buffer i, with fresh acks patched in and,
 * once tagging is on, its tag.
 */
static int post_ctrl(struct engine *e, unsigned int i, uint32_t len)
{
	uint8_t *p = cm_tx(e->c, i);
	int n, rc;

	wire_set_acks(p, credit_ctrl_sent(&e->cc),
		      e->role && e->role->slot_ack ? e->role->slot_ack(e) : 0);
	n = seal(e, p, len);
	if (n < 0)
		return n;
	rc = e->c->ops->post_send(e->c, i, (uint32_t)n, ENGINE_WR_CTRL | i);
	if (rc)
		return engine_fail_logged(e, XFER_FAIL_PEER_LOST, rc);
	e->tx_busy[i] = 1;
	e->tx_inflight++;
	e->last_tx_ms = clock_now_ms();
	return 0;
}

/* Sends queued messages while credits and tx buffers last. */
static int flush(struct engine *e)
{
	int done = 0;

	while (e->out_head && credit_ctrl_can_send(&e->cc, false)) {
		struct engine_out *o = e->out_head;
		int i = free_tx(e);

		if (i < 0)
			break;
		memcpy(cm_tx(e->c, (unsigned int)i), o->buf, o->len);
		if (post_ctrl(e, (unsigned int)i, o->len))
			return -1;
		if (o->tag_after)
			e->mac.tx = true;
		e->out_head = o->next;
		if (!e->out_head)
			e->out_tail = NULL;
		free(o);
		done++;
	}
	return done;
}

/* An ack-only CREDIT message; may use the reserved last credit. */
static int send_acks(struct engine *e)
{
	struct wire_msg m = { .type = WIRE_CREDIT };
	int i = free_tx(e);
	int len;

	if (i < 0 || !credit_ctrl_can_send(&e->cc, true))
		return 0;
	len = wire_encode(&m, cm_tx(e->c, (unsigned int)i),
			  e->c->geom.ctrl_size);
	if (len < 0)
		return engine_fail(e, XFER_FAIL_INTERNAL, len, "cannot encode");
	return post_ctrl(e, (unsigned int)i, (uint32_t)len) ? -1 : 1;
}

int engine_flush(struct engine *e)
{
	return flush(e) < 0 ? (e->err ? e->err : -EIO) : 0;
}

/*
 * Whether ev ends engine_tell_peer()'s wait for the send from tx buffer i:
 * its completion, or any failure or end of the connection.
 */
static bool tell_done(const struct cm_event *ev, unsigned int i)
{
	return ev->status || ev->type == CM_EV_CLOSED ||
	       (ev->type == CM_EV_SEND_DONE && ev->id == (ENGINE_WR_CTRL | i));
}

/*
 * Waits (at most TELL_LINGER_MS) for the send from tx buffer i to
 * complete: the caller disconnects next, and a disconnect flushes a SEND
 * not yet on the wire (RDMA), so that the peer would see a lost
 * connection instead of the message. What is polled meanwhile is dropped.
 */
static void linger_send(struct engine *e, unsigned int i)
{
	uint64_t deadline = clock_now_ms() + TELL_LINGER_MS;
	bool armed = false;

	for (;;) {
		struct cm_event ev[8];
		int n = e->c->ops->poll(e->c, ev, 8);

		if (n < 0)
			return;
		for (int k = 0; k < n; k++)
			if (tell_done(&ev[k], i))
				return;
		if (clock_now_ms() >= deadline)
			return;
		if (n)
			continue;
		/* Arm, poll once more, then sleep (cm.h: arm). */
		if (!armed) {
			armed = e->c->ops->arm(e->c) == 0;
			continue;
		}
		armed = false;
		if (e->c->ops->wait(e->c, -1, 10))
			return;
	}
}

void engine_tell_peer(struct engine *e)
{
	struct wire_msg m = { .type = WIRE_ERROR };
	const char *why = e->why;
	size_t plen = strlen(e->c->peer);
	int i = free_tx(e);
	int len;

	if (!e->fail || e->peer_said_error || i < 0 ||
	    !credit_ctrl_can_send(&e->cc, true))
		return;
	m.ctrl_ack = credit_ctrl_sent(&e->cc);
	m.u.error.status = e->err;
	m.u.error.klass = (uint32_t)e->fail;
	/* "PEER: why" names the peer in our log; it knows who it is, and
	 * puts our name before what it prints */
	if (plen && !strncmp(why, e->c->peer, plen) && why[plen] == ':' &&
	    why[plen + 1] == ' ')
		why += plen + 2;
	snprintf(m.u.error.msg, sizeof(m.u.error.msg), "%.*s",
		 (int)WIRE_MSG_MAX, why);
	len = wire_encode(&m, cm_tx(e->c, (unsigned int)i),
			  e->c->geom.ctrl_size - WIRE_TAG_LEN);
	if (len > 0)
		len = seal(e, cm_tx(e->c, (unsigned int)i), (uint32_t)len);
	if (len > 0 &&
	    e->c->ops->post_send(e->c, (unsigned int)i, (uint32_t)len,
				 ENGINE_WR_CTRL | (unsigned int)i) == 0) {
		e->tx_busy[i] = 1;
		linger_send(e, (unsigned int)i);
	}
}

/* ---- the loop ---- */

/*
 * Checks the tag of a received message once tagging is on, and that none
 * comes before. 0, or -errno (recorded).
 */
static int check_tag(struct engine *e, const uint8_t *p, uint32_t len)
{
	uint8_t want[WIRE_TAG_LEN];
	size_t covered;
	bool tagged = wire_tag_split(p, len, &covered);
	int rc;

	if (!e->mac.rx) {
		if (tagged)
			return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
					   "malformed control message from %s: "
					   "a tag before the handshake gave a "
					   "key",
					   e->c->peer);
		return 0;
	}
	if (!tagged)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "control message %llu from %s came without "
				   "its tag: the session is not authenticated "
				   "end to end, or it was forged in flight",
				   (unsigned long long)e->mac.rx_seq,
				   e->c->peer);
	rc = auth_ctrl_tag(e->mac.key, e->mac.rx_dir, e->mac.rx_seq, p,
			   covered, want);
	if (rc)
		return engine_fail(e, XFER_FAIL_INTERNAL, rc,
				   "cannot check a control message's tag");
	if (!auth_tag_equal(want, p + covered))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "control message %llu from %s failed "
				   "authentication: changed, injected, "
				   "dropped, replayed or reordered on the way",
				   (unsigned long long)e->mac.rx_seq,
				   e->c->peer);
	e->mac.rx_seq++;
	return 0;
}

/* Takes m, received in rx buffer id: its credit back, the buffer reposted. */
static int take_msg(struct engine *e, unsigned int id, const struct wire_msg *m)
{
	int rc;

	credit_ctrl_consume(&e->cc);
	rc = e->c->ops->post_recv(e->c, id);
	if (rc)
		return engine_fail_logged(e, XFER_FAIL_PEER_LOST, rc);
	if (m->type == WIRE_ERROR) {
		enum xfer_fail k =
			m->u.error.klass > 0 &&
					m->u.error.klass <= XFER_FAIL_CANCELED
				? (enum xfer_fail)m->u.error.klass
				: XFER_FAIL_PROTOCOL;

		e->peer_said_error = true;
		if (k == XFER_FAIL_LOCAL_IO)
			k = XFER_FAIL_REMOTE_IO; /* its local is our remote */
		/*
		 * The peer interrupted (a receiver stopped, a remote rdcp
		 * killed with SIGTERM) went away: only this process's own
		 * signal is a cancel, so --retry tries again.
		 */
		if (k == XFER_FAIL_CANCELED)
			k = XFER_FAIL_PEER_LOST;
		return engine_fail(e, k,
				   m->u.error.status < 0 ? m->u.error.status
							 : -EPROTO,
				   "%s: %s", e->c->peer, m->u.error.msg);
	}
	return e->role->on_msg(e, m);
}

static int on_recv(struct engine *e, const struct cm_event *ev)
{
	const uint8_t *p = cm_rx(e->c, (unsigned int)ev->id);
	struct wire_msg m;
	int rc;

	rc = check_tag(e, p, ev->len);
	if (rc)
		return rc;
	rc = wire_decode(p, ev->len, &m);
	if (rc)
		return engine_fail(e, XFER_FAIL_PROTOCOL, rc,
				   "malformed control message from %s",
				   e->c->peer);
	rc = credit_ctrl_ack(&e->cc, m.ctrl_ack);
	if (rc)
		return engine_fail(
			e, XFER_FAIL_PROTOCOL, rc,
			"%s acknowledged control messages never sent",
			e->c->peer);
	/* Behind a held message, or not ready itself: held (ERROR never). */
	if (m.type != WIRE_ERROR && e->role->ready &&
	    (e->held_len || (rc = e->role->ready(e, &m)) != 0)) {
		if (rc < 0)
			return rc;
		/* The peer's credits bound them: one per rx buffer at most. */
		if (e->held_len >= e->c->nrx)
			return engine_fail(e, XFER_FAIL_INTERNAL, -EOVERFLOW,
					   "held control messages overflow");
		e->held[(e->held_head + e->held_len++) % e->c->nrx] =
			(struct engine_held){ (uint32_t)ev->id, ev->len };
		return 0;
	}
	return take_msg(e, (unsigned int)ev->id, &m);
}

/* Offers the held messages again, oldest first. 0 or the error. */
static int retry_held(struct engine *e)
{
	struct wire_msg m;
	int rc;

	while (e->held_len && !e->fail) {
		struct engine_held h = e->held[e->held_head];

		/* Its tag was checked when it came; the buffer is untouched. */
		rc = wire_decode(cm_rx(e->c, h.id), h.len, &m);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "held control message changed");
		rc = e->role->ready(e, &m);
		if (rc)
			return rc < 0 ? rc : 0;
		e->held_head = (e->held_head + 1) % e->c->nrx;
		e->held_len--;
		rc = take_msg(e, h.id, &m);
		if (rc)
			return rc;
	}
	return 0;
}

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
	return fail_set(e, k, ev->status, e->c->err[0] ? e->c->err : NULL,
			true);
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
		return on_recv(e, ev);
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
		return rc || !e->held_len ? rc : retry_held(e);
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
		if ((rc = flush(e)) > 0)
			progress += rc;
		now = clock_now_ms();
		if (!e->closing &&
		    (credit_ctrl_should_ack(&e->cc) ||
		     now - e->last_tx_ms >= ENGINE_KEEPALIVE_MS) &&
		    send_acks(e) > 0)
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
