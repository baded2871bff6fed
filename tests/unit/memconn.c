/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * An in-memory cm_conn pair (see memconn.h). Both sides share one mutex.
 * A posted SEND or WRITE_WITH_IMM becomes an operation queued on its
 * side's connection; it is delivered, in post order as on RC, when it is
 * due (at once, or later with the delay fault) by whichever thread polls,
 * posts or waits next. Delivery does what the responder's HCA would: take
 * the oldest posted receive (none: an RNR breach), copy the tx buffer into
 * that rx buffer, or the staging buffer and its header into the ring slot
 * and its header (all read only now, so a sender that reuses a buffer
 * before its completion is caught by the checksums), queue the receive
 * completion and, for a signalled WR,
 * the sender's SEND_DONE. The send queue holds a WR until a completion at
 * or after it was polled, as with selective signalling on real hardware;
 * a write is two WRs there, as in verbs.c (the payload, unsignalled, then
 * the header with the immediate), and a QP in error flushes both.
 * Completion notification follows ibv_req_notify_cq(): only an armed side
 * is woken (through its eventfd), and only by a completion queued after it
 * armed; the peer's destroy always wakes it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "memconn.h"
#include "transfer/wire/wire.h"
#include "util/clock.h"
#include "util/hugemem.h"

enum { OP_SEND = 1, OP_WRITE };

struct mc_op {
	struct mc_op *next;
	int kind;
	unsigned int buf; /* tx buffer or staging buffer */
	uint32_t len;
	unsigned int slot;
	uint32_t imm;
	bool signaled;
	uint64_t wr_id;
	uint64_t wr_seq; /* position in the sender's send queue (its last WR) */
	unsigned int nwr; /* send queue entries: 2 for a write */
	uint64_t due_ns;
	/* lanes: which one, and whether delivered (its completion waits
	 * for every earlier op's, then done_status is reported) */
	unsigned int lane;
	bool delivered, done;
	int done_status;
};

struct mc_cqe {
	struct cm_event ev;
	uint64_t wr_seq; /* send CQ: the WR it completes */
};

struct mc_cq {
	struct mc_cqe *e;
	unsigned int cap, head, len;
};

/* An acknowledgement a receiver owes its peer (the late_acks fault). */
struct mc_ack {
	struct mc_ack *next;
	struct mc_op op; /* what the sender's SEND_DONE completes */
	uint64_t gen;	 /* the receiver's poll count at delivery */
};

struct mc_pair;

struct mc_side {
	struct cm_conn base; /* first: a cm_conn * is a mc_side * */
	struct mc_pair *p;
	int idx; /* 0: a, 1: b */
	int evfd;
	bool alive, armed, closed_told;
	bool qp_err;	   /* a fault put this QP in error */
	int async_pending; /* the async fault's status, not yet polled */
	unsigned int rdepth; /* receive queue and CQ: cm_rq_depth() */
	unsigned int sdepth; /* send queue and CQ: cm_sq_depth() */
	/* posted receives, oldest first */
	unsigned int *rq;
	unsigned int rq_head, rq_len;
	uint8_t *rx_posted;
	struct mc_cq rcq, scq;
	uint64_t sq_posted, sq_retired;
	struct mc_op *out_head, *out_tail; /* in flight to the peer */
	uint64_t last_due;
	struct cm_ring_desc peer_ring;
	/* acks owed to the peer (late_acks), oldest first */
	struct mc_ack *acks_head, *acks_tail;
	uint64_t polls;
};

struct mc_pair {
	pthread_mutex_t lock;
	struct mc_side side[2];
	struct memconn_faults f;
	struct memconn_stats st;
	unsigned int rng;
	unsigned int refs;
	uint64_t credits_seen; /* CREDIT messages from b */
	uint64_t writes_tried; /* data writes from a that reached delivery */
	bool vanished;
};

static struct mc_side *to_side(struct cm_conn *c)
{
	return (struct mc_side *)c;
}

static struct mc_side *peer_of(struct mc_side *s)
{
	return &s->p->side[!s->idx];
}

static void kick(struct mc_side *s)
{
	uint64_t one = 1;
	ssize_t n;

	if (s->evfd < 0)
		return;
	n = write(s->evfd, &one, sizeof(one));
	(void)n; /* EAGAIN: the counter is saturated, readable anyway */
}

static void cq_push(struct mc_side *s, struct mc_cq *cq,
		    const struct cm_event *ev, uint64_t wr_seq)
{
	struct mc_pair *p = s->p;

	if (cq->len >= (cq == &s->rcq ? s->rdepth : s->sdepth))
		p->st.cq_overrun++;
	if (cq->len == cq->cap) {
		/* Beyond the depth: counted above; keep it anyway. */
		unsigned int cap = cq->cap * 2;
		struct mc_cqe *n = calloc(cap, sizeof(*n));

		if (!n)
			abort();
		for (unsigned int i = 0; i < cq->len; i++)
			n[i] = cq->e[(cq->head + i) % cq->cap];
		free(cq->e);
		cq->e = n;
		cq->cap = cap;
		cq->head = 0;
	}
	cq->e[(cq->head + cq->len) % cq->cap].ev = *ev;
	cq->e[(cq->head + cq->len) % cq->cap].wr_seq = wr_seq;
	cq->len++;
	if (s->armed) {
		s->armed = false;
		kick(s);
	}
}

static void send_done(struct mc_side *s, struct mc_op *op, int status)
{
	struct cm_event ev = {
		.type = CM_EV_SEND_DONE,
		.status = status,
		.id = op->wr_id,
	};

	if (s->p->f.lanes > 1 && !op->done) {
		/* reported in post order by deliver_lanes() */
		op->done = true;
		op->done_status = status;
		return;
	}
	if (op->signaled || status)
		cq_push(s, &s->scq, &ev, op->wr_seq);
}

/* late_acks: r owes its peer op's SEND_DONE until its next poll. */
static void owe_ack(struct mc_side *r, const struct mc_op *op)
{
	struct mc_ack *a = calloc(1, sizeof(*a));

	if (!a)
		abort();
	a->op = *op;
	a->op.next = NULL;
	a->gen = r->polls;
	if (r->acks_tail)
		r->acks_tail->next = a;
	else
		r->acks_head = a;
	r->acks_tail = a;
}

/* The acks r owes from before its current poll reach its peer. */
static void pay_acks(struct mc_side *r)
{
	struct mc_side *s = &r->p->side[!r->idx];

	while (r->acks_head && r->acks_head->gen < r->polls) {
		struct mc_ack *a = r->acks_head;

		r->acks_head = a->next;
		if (!r->acks_head)
			r->acks_tail = NULL;
		if (s->alive)
			send_done(s, &a->op, 0);
		free(a);
	}
}

static void drop_acks(struct mc_side *r)
{
	while (r->acks_head) {
		struct mc_ack *a = r->acks_head;

		r->acks_head = a->next;
		free(a);
	}
	r->acks_tail = NULL;
}

/* Takes the oldest posted receive of r; -1: none (RNR). */
static int take_rx(struct mc_side *r)
{
	unsigned int i;

	if (!r->rq_len)
		return -1;
	i = r->rq[r->rq_head];
	r->rq_head = (r->rq_head + 1) % r->rdepth;
	r->rq_len--;
	r->rx_posted[i] = 0;
	return (int)i;
}

static void flush_completion(struct mc_side *s, enum cm_ev_type type,
			     uint64_t id, uint64_t wr_seq)
{
	struct cm_event ev = { .type = type, .status = -ECONNRESET, .id = id };

	s->p->st.flushed++;
	cq_push(s, type == CM_EV_RECV ? &s->rcq : &s->scq, &ev, wr_seq);
}

static void qp_error(struct mc_side *s);

/*
 * The fatal_write fault: op fails at s with the fault's status and s's QP
 * goes to the error state, in the order of a real RC QP: the failed WR's
 * completion, then a flush of every later WR and of every posted receive.
 */
static void qp_fail(struct mc_side *s, const struct mc_op *op)
{
	struct mc_pair *p = s->p;
	struct cm_event ev = {
		.type = CM_EV_SEND_DONE,
		.status = p->f.fatal_status ? p->f.fatal_status : -EIO,
		.id = op->wr_id,
	};

	/* A write's payload fails; its header, the WR after it, flushes. */
	cq_push(s, &s->scq, &ev, op->wr_seq - (op->nwr - 1));
	if (op->nwr > 1)
		flush_completion(s, CM_EV_SEND_DONE, op->wr_id, op->wr_seq);
	snprintf(s->base.err, sizeof(s->base.err), "%s",
		 p->f.fatal_why ? p->f.fatal_why : "memconn: fatal completion");
	qp_error(s);
}

/* Flushes every WR of op (a write's payload, then its header). */
static void flush_op(struct mc_side *s, const struct mc_op *op)
{
	for (unsigned int i = op->nwr; i-- > 0;)
		flush_completion(s, CM_EV_SEND_DONE, op->wr_id, op->wr_seq - i);
}

/* s's QP goes to error: every WR still queued, every receive, flushed. */
static void qp_error(struct mc_side *s)
{
	int rx;

	s->qp_err = true;
	while (s->out_head) {
		struct mc_op *o = s->out_head;

		s->out_head = o->next;
		flush_op(s, o);
		free(o);
	}
	s->out_tail = NULL;
	while ((rx = take_rx(s)) >= 0)
		flush_completion(s, CM_EV_RECV, (uint64_t)rx, 0);
}

/* The responder's side of one operation from s to its peer. */
static void deliver(struct mc_side *s, struct mc_op *op)
{
	struct mc_pair *p = s->p;
	struct mc_side *r = peer_of(s);
	struct cm_event ev = { 0 };
	int rx;

	if (!r->alive || !s->alive)
		return;
	if (p->vanished || r->qp_err) {
		p->st.vanished++; /* a QP in error answers nothing */
		return;
	}
	if (op->kind == OP_WRITE && s->idx == 0 && p->f.fatal_write &&
	    ++p->writes_tried == p->f.fatal_write) {
		qp_fail(s, op);
		return;
	}
	if (op->kind == OP_SEND && s->idx == 1 &&
	    (cm_tx(&s->base, op->buf)[0] == WIRE_CREDIT ||
	     cm_tx(&s->base, op->buf)[0] == WIRE_FREED) &&
	    ++p->credits_seen == p->f.drop_credit) {
		p->st.credits_dropped++;
		send_done(s, op, 0);
		return;
	}
	if (op->kind == OP_WRITE &&
	    (!r->base.ring || s->peer_ring.addr != (uintptr_t)r->base.ring ||
	     s->peer_ring.hdr_addr != (uintptr_t)r->base.ring_hdr)) {
		p->st.no_ring++;
		send_done(s, op, -EPROTO);
		return;
	}
	rx = take_rx(r);
	if (rx < 0) {
		p->st.rnr++;
		send_done(s, op, -EPROTO);
		return;
	}
	ev.len = op->len;
	ev.id = (uint64_t)rx;
	if (op->kind == OP_SEND) {
		uint8_t *dst = cm_rx(&r->base, (unsigned int)rx);

		memcpy(dst, cm_tx(&s->base, op->buf), op->len);
		if (p->f.tamper_type && !p->st.tampered &&
		    dst[0] == p->f.tamper_type && p->f.tamper_off < op->len) {
			dst[p->f.tamper_off] ^= p->f.tamper_xor;
			p->st.tampered++;
		}
		ev.type = CM_EV_RECV;
		p->st.sends[s->idx]++;
	} else {
		uint8_t *dst = cm_slot(&r->base, op->slot);

		memcpy(dst, cm_stage(&s->base, op->buf), op->len);
		memcpy(cm_slot_hdr(&r->base, op->slot),
		       cm_stage_hdr(&s->base, op->buf), CM_SLOT_HDR);
		ev.type = CM_EV_DATA;
		ev.len = CM_SLOT_HDR;
		ev.imm = op->imm;
		p->st.writes++;
		p->st.write_bytes += CM_SLOT_HDR + op->len;
		if (p->st.writes == p->f.corrupt_write && op->len) {
			dst[op->len / 2] ^= 0x5a;
			p->st.corrupted++;
		}
	}
	cq_push(r, &r->rcq, &ev, 0);
	if (op->kind == OP_SEND && p->f.late_acks)
		owe_ack(r, op);
	else
		send_done(s, op, 0);
	if (op->kind == OP_WRITE && p->f.async_after_writes &&
	    p->st.writes == p->f.async_after_writes) {
		s->async_pending = p->f.async_status ? p->f.async_status : -EIO;
		qp_error(s);
	}
	if (op->kind == OP_WRITE && p->f.vanish_after_writes &&
	    p->st.writes >= p->f.vanish_after_writes)
		p->vanished = true;
}

/*
 * The lanes fault: delivers s's operations in a random interleaving of
 * its lanes, each lane in order, stopping now and then so that the rest
 * come at a later poll; completions go out in post order.
 */
static void deliver_lanes(struct mc_side *s)
{
	struct mc_pair *p = s->p;

	for (;;) {
		struct mc_op *heads[64], *op;
		uint64_t seen = 0;
		unsigned int n = 0;

		for (op = s->out_head; op && n < 64; op = op->next) {
			uint64_t bit = 1ull << (op->lane % 64);

			if (op->delivered || (seen & bit))
				continue;
			seen |= bit;
			heads[n++] = op;
		}
		if (!n)
			return;
		op = heads[rand_r(&p->rng) % n];
		p->st.overtaken += op != heads[0];
		op->delivered = true;
		deliver(s, op);
		/* Completions in post order, as each lane's are. */
		while (s->out_head && s->out_head->delivered) {
			op = s->out_head;
			s->out_head = op->next;
			if (!s->out_head)
				s->out_tail = NULL;
			if (op->done)
				send_done(s, op, op->done_status);
			free(op);
		}
		if (rand_r(&p->rng) % 3 == 0)
			return;
	}
}

/* Delivers every operation that is due, in order per direction. */
static void deliver_due(struct mc_pair *p)
{
	uint64_t now = clock_now_ns();

	for (int d = 0; d < 2; d++) {
		if (p->f.lanes > 1) {
			deliver_lanes(&p->side[d]);
			continue;
		}
		struct mc_side *s = &p->side[d];

		while (s->out_head && s->out_head->due_ns <= now) {
			struct mc_op *op = s->out_head;

			s->out_head = op->next;
			if (!s->out_head)
				s->out_tail = NULL;
			deliver(s, op);
			free(op);
		}
	}
}

static void drop_ops(struct mc_side *s)
{
	while (s->out_head) {
		struct mc_op *op = s->out_head;

		s->out_head = op->next;
		free(op);
	}
	s->out_tail = NULL;
}

/* Queues op on s (lock held); 0 or -errno. */
static int enqueue(struct mc_side *s, struct mc_op *proto)
{
	struct mc_pair *p = s->p;
	struct mc_op *op;
	uint64_t due = clock_now_ns();

	unsigned int nwr = proto->kind == OP_WRITE ? 2 : 1;

	if (s->sq_posted - s->sq_retired + nwr > s->sdepth) {
		p->st.sq_overflow++;
		return -ENOMEM;
	}
	op = malloc(sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = *proto;
	op->next = NULL;
	op->nwr = nwr;
	op->lane = op->kind == OP_WRITE && p->f.lanes > 1
			   ? op->slot % p->f.lanes
			   : 0;
	s->sq_posted += nwr;
	op->wr_seq = s->sq_posted - 1;
	if (s->qp_err) {
		/* As ibv_post_send() on a QP in error: flushed at once. */
		flush_op(s, op);
		free(op);
		return 0;
	}
	if (p->f.delay_max_us)
		due += (uint64_t)(rand_r(&p->rng) % (p->f.delay_max_us + 1)) *
		       1000u;
	if (op->kind == OP_SEND && p->f.late_type &&
	    cm_tx(&s->base, op->buf)[0] == p->f.late_type)
		due += (uint64_t)p->f.late_us * 1000u;
	if (due < s->last_due)
		due = s->last_due;
	s->last_due = due;
	op->due_ns = due;
	if (s->out_tail)
		s->out_tail->next = op;
	else
		s->out_head = op;
	s->out_tail = op;
	/* Lanes: held until a poll or wait, so that several can mix. */
	if (p->f.lanes <= 1)
		deliver_due(p);
	return 0;
}

static int mc_post_send(struct cm_conn *c, unsigned int txbuf, uint32_t len,
			uint64_t wr_id)
{
	struct mc_side *s = to_side(c);
	struct mc_op op = {
		.kind = OP_SEND,
		.buf = txbuf,
		.len = len,
		.signaled = true,
		.wr_id = wr_id,
	};
	int rc;

	pthread_mutex_lock(&s->p->lock);
	if (txbuf >= c->ntx || len == 0 || len > c->geom.ctrl_size) {
		s->p->st.bad_post++;
		rc = -EINVAL;
	} else {
		rc = enqueue(s, &op);
	}
	pthread_mutex_unlock(&s->p->lock);
	return rc;
}

static int mc_post_recv(struct cm_conn *c, unsigned int rxbuf)
{
	struct mc_side *s = to_side(c);
	int rc = 0;

	pthread_mutex_lock(&s->p->lock);
	if (rxbuf >= c->nrx) {
		s->p->st.bad_post++;
		rc = -EINVAL;
	} else if (s->rx_posted[rxbuf]) {
		s->p->st.double_recv++;
		rc = -EINVAL;
	} else if (s->qp_err) {
		flush_completion(s, CM_EV_RECV, rxbuf, 0);
	} else {
		s->rx_posted[rxbuf] = 1;
		s->rq[(s->rq_head + s->rq_len++) % s->rdepth] = rxbuf;
	}
	pthread_mutex_unlock(&s->p->lock);
	return rc;
}

static int mc_post_write(struct cm_conn *c, unsigned int stage, uint32_t len,
			 unsigned int slot, uint32_t imm, bool signaled,
			 uint64_t wr_id)
{
	struct mc_side *s = to_side(c);
	struct mc_op op = {
		.kind = OP_WRITE,
		.buf = stage,
		.len = len,
		.slot = slot,
		.imm = imm,
		.signaled = signaled,
		.wr_id = wr_id,
	};
	int rc;

	pthread_mutex_lock(&s->p->lock);
	if (!c->stage) {
		s->p->st.no_ring++;
		rc = -EINVAL;
	} else if (stage >= c->geom.slots || slot >= c->geom.slots ||
		   len > c->geom.chunk_size) {
		s->p->st.bad_post++;
		rc = -EINVAL;
	} else {
		rc = enqueue(s, &op);
	}
	pthread_mutex_unlock(&s->p->lock);
	return rc;
}

static int cq_pop(struct mc_side *s, struct mc_cq *cq, struct cm_event *ev,
		  int max, bool sendq)
{
	int n = 0;

	while (n < max && cq->len) {
		struct mc_cqe *e = &cq->e[cq->head];

		ev[n++] = e->ev;
		if (sendq && e->wr_seq + 1 > s->sq_retired)
			s->sq_retired = e->wr_seq + 1;
		cq->head = (cq->head + 1) % cq->cap;
		cq->len--;
	}
	return n;
}

static int mc_poll(struct cm_conn *c, struct cm_event *ev, int max)
{
	struct mc_side *s = to_side(c);
	int n;

	pthread_mutex_lock(&s->p->lock);
	deliver_due(s->p);
	pay_acks(s);
	s->polls++;
	/* As verbs.c: the receive CQ first, a quarter kept for the send CQ. */
	n = cq_pop(s, &s->rcq, ev, max - max / 4, false);
	n += cq_pop(s, &s->scq, ev + n, max - n, true);
	n += cq_pop(s, &s->rcq, ev + n, max - n, false);
	if (!n && max > 0 && s->async_pending) {
		memset(ev, 0, sizeof(*ev));
		ev->type = CM_EV_CLOSED;
		ev->status = s->async_pending;
		snprintf(c->err, sizeof(c->err), "%s",
			 s->p->f.async_why ? s->p->f.async_why
					   : "memconn: async event");
		s->async_pending = 0;
		s->closed_told = true;
		n = 1;
	} else if (!n && max > 0 && !peer_of(s)->alive && !s->closed_told) {
		s->closed_told = true;
		memset(ev, 0, sizeof(*ev));
		ev->type = CM_EV_CLOSED;
		ev->status = -ECONNRESET;
		n = 1;
	}
	pthread_mutex_unlock(&s->p->lock);
	return n;
}

static int mc_arm(struct cm_conn *c)
{
	struct mc_side *s = to_side(c);

	pthread_mutex_lock(&s->p->lock);
	s->armed = true;
	pthread_mutex_unlock(&s->p->lock);
	return 0;
}

static int mc_wait(struct cm_conn *c, int extra_fd, int timeout_ms)
{
	struct mc_side *s = to_side(c);
	struct mc_pair *p = s->p;
	struct pollfd pfd[2] = {
		{ .fd = s->evfd, .events = POLLIN },
		{ .fd = extra_fd, .events = POLLIN },
	};
	uint64_t next = 0, now, v;
	int rc;

	pthread_mutex_lock(&p->lock);
	for (int d = 0; d < 2; d++) {
		struct mc_op *op = p->side[d].out_head;

		if (op && (!next || op->due_ns < next))
			next = op->due_ns;
	}
	pthread_mutex_unlock(&p->lock);
	if (next) {
		now = clock_now_ns();
		if (next <= now) {
			timeout_ms = 0;
		} else {
			uint64_t ms = (next - now + 999999) / 1000000;

			if (timeout_ms < 0 || ms < (uint64_t)timeout_ms)
				timeout_ms = (int)ms;
		}
	}
	rc = poll(pfd, extra_fd >= 0 ? 2 : 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	if (pfd[0].revents & POLLIN) {
		ssize_t n = read(s->evfd, &v, sizeof(v));

		(void)n; /* EAGAIN: nothing left to clear */
	}
	pthread_mutex_lock(&p->lock);
	deliver_due(p);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* Bytes of a ring or staging area: payloads, then their headers. */
static size_t area_len(const struct cm_geom *g)
{
	return (size_t)g->slots * g->chunk_size +
	       (((size_t)g->slots * CM_SLOT_HDR + 4095) & ~4095ul);
}

/*
 * In the pages, and on the node, cm/mem.c gives a real ring (laid out as
 * cm_area_alloc() does), so that the ceiling bench measures them; every
 * page faulted in at once, as registering it with a NIC would.
 */
static int area_alloc(struct cm_conn *c, const char *what, uint8_t **p,
		      uint8_t **hdr)
{
	enum hugemem_kind kind;
	void *m;
	int rc = hugemem_alloc(what, area_len(&c->geom), true, c->numa_node,
			       &m, &kind);

	if (rc)
		return rc;
	/* Touched up front, as ibv_reg_mr's pinning faults every page in. */
	memset(m, 0, area_len(&c->geom));
	c->pages = hugemem_kind_name(kind);
	*p = m;
	*hdr = *p + (size_t)c->geom.slots * c->geom.chunk_size;
	return 0;
}

static void area_free(uint8_t **p, const struct cm_geom *g)
{
	hugemem_free(*p, area_len(g));
	*p = NULL;
}

static int mc_ring_create(struct cm_conn *c, struct cm_ring_desc *desc)
{
	struct mc_side *s = to_side(c);
	uint8_t *hdr, *ring;
	int rc = area_alloc(c, "ring", &ring, &hdr);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->p->lock);
	area_free(&c->ring, &c->geom);
	c->ring = ring;
	c->ring_hdr = hdr;
	pthread_mutex_unlock(&s->p->lock);
	desc->addr = (uintptr_t)ring;
	desc->hdr_addr = (uintptr_t)hdr;
	desc->rkey = 0x4d454d43u; /* "MEMC" */
	return 0;
}

static int mc_stage_create(struct cm_conn *c, const struct cm_ring_desc *peer)
{
	struct mc_side *s = to_side(c);
	uint8_t *hdr, *stage;
	int rc = area_alloc(c, "staging buffers", &stage, &hdr);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->p->lock);
	area_free(&c->stage, &c->geom);
	c->stage = stage;
	c->stage_hdr = hdr;
	s->peer_ring = *peer;
	pthread_mutex_unlock(&s->p->lock);
	return 0;
}

static void side_free(struct mc_side *s)
{
	drop_ops(s);
	drop_acks(s);
	free(s->base.tx);
	free(s->base.rx);
	area_free(&s->base.ring, &s->base.geom);
	area_free(&s->base.stage, &s->base.geom);
	s->base.tx = s->base.rx = s->base.ring = s->base.stage = NULL;
	s->base.ring_hdr = s->base.stage_hdr = NULL;
	free(s->rq);
	free(s->rx_posted);
	free(s->rcq.e);
	free(s->scq.e);
	s->rq = NULL;
	s->rx_posted = NULL;
	s->rcq.e = s->scq.e = NULL;
	if (s->evfd >= 0)
		close(s->evfd);
	s->evfd = -1;
}

static void mc_destroy(struct cm_conn *c)
{
	struct mc_side *s = to_side(c);
	struct mc_pair *p = s->p;
	bool last;

	pthread_mutex_lock(&p->lock);
	s->alive = false;
	side_free(s);
	kick(peer_of(s));
	last = --p->refs == 0;
	pthread_mutex_unlock(&p->lock);
	if (last) {
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
}

static const struct cm_ops memconn_ops = {
	.post_send = mc_post_send,
	.post_recv = mc_post_recv,
	.post_write = mc_post_write,
	.poll = mc_poll,
	.arm = mc_arm,
	.wait = mc_wait,
	.ring_create = mc_ring_create,
	.stage_create = mc_stage_create,
	.destroy = mc_destroy,
};

static int side_init(struct mc_pair *p, int idx, const struct cm_geom *g)
{
	struct mc_side *s = &p->side[idx];
	struct cm_conn *c = &s->base;

	s->p = p;
	s->idx = idx;
	s->alive = true;
	/* The depths verbs.c gives a real QP and its CQs. */
	s->rdepth = cm_rq_depth(g);
	s->sdepth = cm_sq_depth(g);
	c->ops = &memconn_ops;
	c->geom = *g;
	c->ntx = cm_ntx(g);
	c->nrx = s->rdepth;
	snprintf(c->peer, sizeof(c->peer), "memconn-%c", idx ? 'a' : 'b');
	snprintf(c->dev, sizeof(c->dev), "mem%d", idx);
	c->numa_node = -1;
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	c->tx = calloc(c->ntx, g->ctrl_size);
	c->rx = calloc(c->nrx, g->ctrl_size);
	s->rq = calloc(s->rdepth, sizeof(*s->rq));
	s->rx_posted = calloc(s->rdepth, 1);
	s->rcq.cap = s->rdepth;
	s->scq.cap = s->sdepth;
	s->rcq.e = calloc(s->rdepth, sizeof(*s->rcq.e));
	s->scq.e = calloc(s->sdepth, sizeof(*s->scq.e));
	if (s->evfd < 0 || !c->tx || !c->rx || !s->rq || !s->rx_posted ||
	    !s->rcq.e || !s->scq.e)
		return -ENOMEM;
	/* Every receive buffer starts posted, as in verbs.c. */
	for (unsigned int i = 0; i < c->nrx; i++) {
		s->rx_posted[i] = 1;
		s->rq[s->rq_len++] = i;
	}
	return 0;
}

int memconn_pair(const struct cm_geom *g, const struct memconn_faults *faults,
		 struct cm_conn **a, struct cm_conn **b)
{
	struct mc_pair *p;

	if (!g->slots || !g->ctrl_credits || g->ctrl_size < WIRE_CTRL_HDR ||
	    g->chunk_size < 4096 || (g->chunk_size & (g->chunk_size - 1)))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->side[0].evfd = p->side[1].evfd = -1;
	if (faults)
		p->f = *faults;
	p->rng = p->f.seed ? p->f.seed : 1;
	p->refs = 2;
	pthread_mutex_init(&p->lock, NULL);
	if (side_init(p, 0, g) || side_init(p, 1, g)) {
		side_free(&p->side[0]);
		side_free(&p->side[1]);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return -ENOMEM;
	}
	*a = &p->side[0].base;
	*b = &p->side[1].base;
	return 0;
}

void memconn_get_stats(struct cm_conn *c, struct memconn_stats *out)
{
	struct mc_side *s = to_side(c);

	pthread_mutex_lock(&s->p->lock);
	*out = s->p->st;
	pthread_mutex_unlock(&s->p->lock);
}

uint64_t memconn_violations(const struct memconn_stats *s)
{
	return s->rnr + s->sq_overflow + s->cq_overrun + s->bad_post +
	       s->double_recv + s->no_ring;
}
