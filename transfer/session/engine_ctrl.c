/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A session's control channel and its failure (see engine.h), below the
 * event loop of engine.c, which calls in through engine_int.h.
 *
 * Outgoing messages are queued, then posted in order as control credits
 * and tx buffers allow, each with fresh acks patched in and, once the
 * handshake gave a key, its tag; an ack-only CREDIT when nothing else
 * carries them. Incoming ones have their tag checked, are decoded and
 * either taken (credit back, buffer reposted, handed to the role) or held
 * until the role is ready. The first failure is recorded (class, errno,
 * why) and told to the peer as ERROR before the connection goes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/session/engine.h"
#include "transfer/session/engine_int.h"
#include "util/clock.h"
#include "util/log.h"

/* engine_tell_peer(): how long it waits for the ERROR to be sent, at most */
#define TELL_LINGER_MS 1000

/*
 * Records the first failure and logs why; logged: cm/ already logged it
 * (why NULL: strerror of err is kept).
 */
int engine_fail_set(struct engine *e, enum xfer_fail klass, int err,
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
	return engine_fail_set(e, klass, err, why, false);
}

int engine_fail_logged(struct engine *e, enum xfer_fail klass, int err)
{
	return engine_fail_set(e, klass, err, NULL, true);
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
		      e->role && e->role->slot_ack ? e->role->slot_ack(e, p)
						   : 0);
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

static void out_pop(struct engine *e)
{
	struct engine_out *o = e->out_head;

	e->out_head = o->next;
	if (!e->out_head)
		e->out_tail = NULL;
	free(o);
}

/* Whether queued message o may go inside a BATCH. */
static bool batchable(const struct engine *e, const struct engine_out *o)
{
	return e->batch && o && !o->tag_after && wire_batch_may(o->buf[0]);
}

/*
 * Moves the queued messages at the head that may travel together into
 * one BATCH at p (a tx buffer; room left for its tag). Its length.
 */
static size_t fill_batch(struct engine *e, uint8_t *p)
{
	size_t len = wire_batch_start(p);
	size_t cap = e->c->geom.ctrl_size - WIRE_TAG_LEN;

	while (batchable(e, e->out_head) &&
	       wire_batch_add(p, &len, cap, e->out_head->buf, e->out_head->len))
		out_pop(e);
	return len;
}

/* Sends queued messages while credits and tx buffers last. */
int engine_ctrl_flush(struct engine *e)
{
	int done = 0;

	while (e->out_head && credit_ctrl_can_send(&e->cc, false)) {
		struct engine_out *o = e->out_head;
		int i = free_tx(e);
		bool tag_after = false;
		size_t len;

		if (i < 0)
			break;
		if (batchable(e, o) && batchable(e, o->next) &&
		    WIRE_CTRL_HDR + 2 + o->len + o->next->len <=
			    e->c->geom.ctrl_size - WIRE_TAG_LEN) {
			len = fill_batch(e, cm_tx(e->c, (unsigned int)i));
		} else {
			memcpy(cm_tx(e->c, (unsigned int)i), o->buf, o->len);
			len = o->len;
			tag_after = o->tag_after;
			out_pop(e);
		}
		if (post_ctrl(e, (unsigned int)i, (uint32_t)len))
			return -1;
		if (tag_after) /* it went untagged: those after it carry tags */
			e->mac.tx = true;
		done++;
	}
	return done;
}

/* An ack-only CREDIT message; may use the reserved last credit. */
int engine_ctrl_acks(struct engine *e)
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
	return engine_ctrl_flush(e) < 0 ? (e->err ? e->err : -EIO) : 0;
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

/* ---- received messages ---- */

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

/*
 * Takes the messages of BATCH m (in rx buffer h->id) from h->pos on, each
 * once the role is ready for it: 1 with h->pos at one it is not ready
 * for, 0 once all are taken (the BATCH's credit back, its buffer
 * reposted), or the engine's error.
 */
static int take_batch(struct engine *e, struct engine_held *h,
		      const struct wire_msg *m)
{
	const uint8_t *p = cm_rx(e->c, h->id);
	struct wire_msg in;
	int rc;

	for (;;) {
		uint32_t pos = h->pos;

		rc = wire_batch_next(p, &m->u.batch, &pos, &in);
		if (rc < 0)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "held control message changed");
		if (rc)
			break;
		in.ctrl_ack = m->ctrl_ack; /* the BATCH's own, cumulative */
		in.slot_ack = m->slot_ack;
		in.tagged = m->tagged;
		if (e->role->ready && (rc = e->role->ready(e, &in)) != 0)
			return rc < 0 ? rc : 1;
		h->pos = pos;
		rc = e->role->on_msg(e, &in);
		if (rc || e->fail)
			return rc ? rc : -1;
		/* the rest for the role after this one, as with events */
		if (e->role->finished(e) && pos < m->u.batch.len)
			return 1;
	}
	credit_ctrl_consume(&e->cc);
	rc = e->c->ops->post_recv(e->c, h->id);
	return rc ? engine_fail_logged(e, XFER_FAIL_PEER_LOST, rc) : 0;
}

/* Holds what came in rx buffer id from pos on. 0 or the error. */
static int hold(struct engine *e, uint32_t id, uint32_t len, uint32_t pos)
{
	/* The peer's credits bound them: one per rx buffer at most. */
	if (e->held_len >= e->c->nrx)
		return engine_fail(e, XFER_FAIL_INTERNAL, -EOVERFLOW,
				   "held control messages overflow");
	e->held[(e->held_head + e->held_len++) % e->c->nrx] =
		(struct engine_held){ id, len, pos };
	return 0;
}

int engine_ctrl_recv(struct engine *e, const struct cm_event *ev)
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
	if (m.type == WIRE_BATCH) {
		struct engine_held h = { (uint32_t)ev->id, ev->len, 0 };

		if (e->held_len)
			return hold(e, h.id, h.len, 0);
		rc = take_batch(e, &h, &m);
		return rc == 1 ? hold(e, h.id, h.len, h.pos) : rc;
	}
	/* Behind a held message, or not ready itself: held (ERROR never). */
	if (m.type != WIRE_ERROR && e->role->ready &&
	    (e->held_len || (rc = e->role->ready(e, &m)) != 0)) {
		if (rc < 0)
			return rc;
		return hold(e, (uint32_t)ev->id, ev->len, 0);
	}
	return take_msg(e, (unsigned int)ev->id, &m);
}

/* Offers the held messages again, oldest first. 0 or the error. */
int engine_ctrl_retry_held(struct engine *e)
{
	struct wire_msg m;
	int rc;

	while (e->held_len && !e->fail) {
		struct engine_held *hp = &e->held[e->held_head];
		struct engine_held h = *hp;

		/* Its tag was checked when it came; the buffer is untouched. */
		rc = wire_decode(cm_rx(e->c, h.id), h.len, &m);
		if (rc)
			return engine_fail(e, XFER_FAIL_INTERNAL, rc,
					   "held control message changed");
		if (m.type == WIRE_BATCH) {
			rc = take_batch(e, hp, &m);
			if (rc)
				return rc < 0 ? rc : 0;
			e->held_head = (e->held_head + 1) % e->c->nrx;
			e->held_len--;
			continue;
		}
		rc = e->role->ready ? e->role->ready(e, &m) : 0;
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
