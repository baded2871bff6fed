/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The TCP transport's stand-in for an HCA, under one connection's ops
 * (cm/tcp.c): its send, receive and completion queues (tconn_sq_post,
 * tconn_post_recv_raw, tconn_poll_raw), the frames on the socket, and the
 * send and receive threads that play the requester and the responder
 * (started by cm/tcp_res.c). The bottom of the TCP transport's files.
 *
 * Every message is one frame, all fields big-endian:
 *
 *   0      1      4          8          12         16
 *   +------+------+----------+----------+----------+----------------+
 *   |  op  | zero |   len    |   imm    |   slot   | len bytes ...  |
 *   +------+------+----------+----------+----------+----------------+
 *   op 1 = SEND            payload lands in the oldest posted rx buffer
 *                          (len <= ctrl_size), imm and slot zero
 *   op 2 = WRITE           a 64-byte slot header, then len bytes of
 *                          payload (len <= chunk_size): the header lands in
 *                          ring_hdr[slot], the payload in ring slot
 *                          `slot`, and the frame consumes the oldest
 *                          posted rx buffer, as the RDMA transport's two
 *                          writes (the second WITH IMMEDIATE) do
 *
 * The ring is addressed by slot index, so the cm_ring_desc is all zero.
 *
 * Per connection a send thread plays the HCA's requester: it takes posted
 * work requests in order and writes each frame with one sendmsg() from the
 * tx or staging buffer; a receive thread plays the responder: it reads a
 * header, checks it, and reads the payload straight into its destination.
 * Both queue completions on a mutex-protected completion queue with an
 * eventfd that is readable while the queue is not empty. A frame for which
 * no receive is posted breaks the credit protocol: like an RNR on RC, it
 * fails the connection. Every wait is bounded; destroy() wakes both
 * threads with shutdown(2) whatever the peer does.
 */
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cm/cm_int.h"
#include "cm/tcp_int.h"
#include "util/be_codec.h"
#include "util/io.h"
#include "util/log.h"

/*
 * Socket buffers are left to the kernel's autotuning (up to tcp_rmem[2]).
 * Fixed 1, 4 or 16 MiB SO_SNDBUF/SO_RCVBUF made no difference on loopback
 * (about 1 GB/s for a 512 MiB copy either way), a fixed size turns the
 * autotuning off, and the kernel clamps it to net.core.rmem_max (208 KiB
 * on a stock system): a cap on a long or fast link. MSG_ZEROCOPY was
 * 20-35% slower for 1 MiB chunks on loopback (the kernel copies anyway
 * there and the send must wait for the notification): not used.
 */

/* ---- frames ---- */

static void fr_encode(uint8_t *p, const struct twr *wr)
{
	struct be_put w = be_put_init(p, FR_HDR);

	be_put_u8(&w, wr->op);
	be_put_zeros(&w, 3);
	be_put_u32(&w, wr->len);
	be_put_u32(&w, wr->imm);
	be_put_u32(&w, wr->slot);
}

static void fr_decode(const uint8_t *p, uint8_t *op, uint32_t *len,
		      uint32_t *imm, uint32_t *slot, bool *pad_ok)
{
	struct be_get r = be_get_init(p, FR_HDR);

	*op = be_get_u8(&r);
	*pad_ok = be_get_zeros(&r, 3);
	*len = be_get_u32(&r);
	*imm = be_get_u32(&r);
	*slot = be_get_u32(&r);
}

/* ---- completion queue ---- */

static void cq_push_locked(struct tconn *t, const struct cm_event *ev)
{
	uint64_t one = 1;

	/* Sized for every receive and send WR plus CLOSED: cannot overrun. */
	assert(t->cq_len < t->cq_cap);
	t->cq[(t->cq_head + t->cq_len) % t->cq_cap] = *ev;
	if (!t->cq_len++ && write(t->evfd, &one, sizeof(one)) < 0)
		log_debug("cannot signal completion: %s", strerror(errno));
}

static void queue_closed_locked(struct tconn *t)
{
	struct cm_event ev = { .type = CM_EV_CLOSED, .status = t->close_err };

	if (t->closed_queued)
		return;
	t->closed_queued = true;
	cq_push_locked(t, &ev);
}

/*
 * The connection is over: CLOSED goes after every completion already
 * queued and after that of a frame being written right now (the peer may
 * have it and have closed already: its SEND_DONE must come first, as on
 * RC where a completion precedes the disconnect). err is what the engine
 * sees (-ECONNRESET: the peer closed or reset).
 */
static void fail_locked(struct tconn *t, int err)
{
	if (t->dead)
		return;
	t->dead = true;
	t->close_err = err;
	if (!t->tx_writing)
		queue_closed_locked(t);
	pthread_cond_broadcast(&t->cond);
}

/* Logs the root cause of a failure once per connection, unless expected. */
static bool first_error_locked(struct tconn *t)
{
	if (t->err_logged || t->stopping || t->dead)
		return false;
	t->err_logged = true;
	return true;
}

/* What a socket error means for the user, and the errno it becomes. */
static int sock_error(struct tconn *t, int err, const char *dir)
{
	const char *what = NULL;
	int rc = err;

	switch (err) {
	case -ECONNRESET:
	case -EPIPE:
		rc = -ECONNRESET; /* the engine says "went away" */
		break;
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
		what = "the peer stopped answering: its host is down or the "
		       "link is cut";
		rc = -EHOSTUNREACH;
		break;
	default:
		what = "transfer aborted";
		break;
	}
	pthread_mutex_lock(&t->lock);
	if (first_error_locked(t)) {
		if (what) {
			/* Read by the engine once it polled CLOSED. */
			snprintf(t->base.err, sizeof(t->base.err),
				 "TCP %s %s %s failed: %s: %s", dir,
				 *dir == 's' ? "to" : "from", t->base.peer,
				 strerror(-err), what);
			log_err("%s", t->base.err);
		} else {
			log_debug("TCP %s %s %s: %s", dir,
				  *dir == 's' ? "to" : "from", t->base.peer,
				  strerror(-err));
		}
	}
	fail_locked(t, rc);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* ---- the send thread (requester) ---- */

/*
 * A WR that will never go out completes with an error, as a verbs QP in
 * the error state flushes it (IBV_WC_WR_FLUSH_ERR).
 */
static void flush_wr_locked(struct tconn *t, const struct twr *wr)
{
	struct cm_event ev = {
		.type = CM_EV_SEND_DONE,
		.status = -ECONNRESET,
		.id = wr->wr_id,
	};

	if (wr->signaled)
		cq_push_locked(t, &ev);
	else
		t->sq_used--;
}

static void flush_sq_locked(struct tconn *t)
{
	while (t->sq_len) {
		flush_wr_locked(t, &t->sq[t->sq_head]);
		t->sq_head = (t->sq_head + 1) % t->depth;
		t->sq_len--;
	}
}

/* One frame: its header, a slot header (WRITE) and the payload. */
static int send_frame(struct tconn *t, const struct twr *wr, const void *buf,
		      const void *slot_hdr)
{
	uint8_t hdr[FR_HDR];
	struct iovec iov[3] = {
		{ .iov_base = hdr, .iov_len = FR_HDR },
		{ .iov_base = (void *)slot_hdr, .iov_len = CM_SLOT_HDR },
		{ .iov_base = (void *)buf, .iov_len = wr->len },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };

	fr_encode(hdr, wr);
	if (!slot_hdr) { /* a SEND */
		iov[1] = iov[2];
		msg.msg_iovlen = 2;
	}
	if (!wr->len)
		msg.msg_iovlen--;
	while (msg.msg_iovlen) {
		ssize_t n = sendmsg(t->fd, &msg, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n > 0 && msg.msg_iovlen) {
			size_t k = (size_t)n < msg.msg_iov->iov_len
					   ? (size_t)n
					   : msg.msg_iov->iov_len;

			msg.msg_iov->iov_base =
				(uint8_t *)msg.msg_iov->iov_base + k;
			msg.msg_iov->iov_len -= k;
			n -= (ssize_t)k;
			if (!msg.msg_iov->iov_len) {
				msg.msg_iov++;
				msg.msg_iovlen--;
			}
		}
	}
	return 0;
}

void *tconn_tx_main(void *arg)
{
	struct tconn *t = arg;
	struct cm_conn *c = &t->base;

	for (;;) {
		struct cm_event ev = { .type = CM_EV_SEND_DONE };
		const uint8_t *buf, *slot_hdr = NULL;
		struct twr wr;
		int rc;

		pthread_mutex_lock(&t->lock);
		while (!t->sq_len && !t->dead && !t->stopping)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->dead || t->stopping) {
			flush_sq_locked(t);
			pthread_mutex_unlock(&t->lock);
			break;
		}
		wr = t->sq[t->sq_head];
		if (wr.op == FR_SEND) {
			buf = cm_tx(c, wr.buf);
		} else {
			buf = cm_stage(c, wr.buf);
			slot_hdr = cm_stage_hdr(c, wr.buf);
		}
		t->tx_writing = true;
		pthread_mutex_unlock(&t->lock);

		rc = send_frame(t, &wr, buf, slot_hdr);

		pthread_mutex_lock(&t->lock);
		t->tx_writing = false;
		t->sq_head = (t->sq_head + 1) % t->depth;
		t->sq_len--;
		if (!rc) {
			if (wr.signaled) {
				ev.id = wr.wr_id;
				cq_push_locked(t, &ev);
			} else {
				t->sq_used--;
			}
		}
		if (t->dead)
			queue_closed_locked(t);
		pthread_cond_broadcast(&t->cond);
		pthread_mutex_unlock(&t->lock);
		if (rc) {
			sock_error(t, rc, "send");
			break;
		}
	}
	return NULL;
}

/* ---- the receive thread (responder) ---- */

/* A frame the peer should never have sent: log it, fail the connection. */
static int rx_violation(struct tconn *t, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int rx_violation(struct tconn *t, const char *what, const char *fmt, ...)
{
	char why[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&t->lock);
	if (first_error_locked(t)) {
		snprintf(t->base.err, sizeof(t->base.err),
			 "TCP receive from %s failed: %s: %s", t->base.peer,
			 why, what);
		log_err("%s", t->base.err);
	}
	fail_locked(t, -EPROTO);
	pthread_mutex_unlock(&t->lock);
	/* As a QP in error: the peer learns at once, both threads stop. */
	shutdown(t->fd, SHUT_RDWR);
	return -EPROTO;
}

/* Receives one frame into its place; 0 or -errno (already handled). */
static int rx_frame(struct tconn *t)
{
	struct cm_conn *c = &t->base;
	struct cm_event ev = { 0 };
	uint8_t hdr[FR_HDR], op, *dst, *dst_hdr = NULL;
	uint32_t len, imm, slot;
	unsigned int idx;
	bool pad_ok;
	int rc;

	rc = io_recv_full(t->fd, hdr, sizeof(hdr));
	if (rc)
		return sock_error(t, rc, "receive");
	fr_decode(hdr, &op, &len, &imm, &slot, &pad_ok);
	if (!pad_ok || (op != FR_SEND && op != FR_WRITE))
		return rx_violation(t, "protocol bug or not an rdcp peer",
				    "unknown frame type %u", op);
	if (op == FR_SEND && t->idx)
		return rx_violation(t, "lanes carry data writes only",
				    "control message on lane %u", t->idx);
	if (op == FR_SEND && len > c->geom.ctrl_size)
		return rx_violation(t, "message longer than the receive buffer",
				    "message of %u bytes, buffers hold %u", len,
				    c->geom.ctrl_size);
	pthread_mutex_lock(&t->lock);
	if (op == FR_WRITE &&
	    (!c->ring || slot >= c->geom.slots || len > c->geom.chunk_size)) {
		bool ring = c->ring;

		pthread_mutex_unlock(&t->lock);
		return rx_violation(
			t,
			ring ? "outside the ring: protocol bug"
			     : "before the ring exists: protocol bug",
			"write of %u bytes to slot %u", len, slot);
	}
	if (!t->rq_len) {
		pthread_mutex_unlock(&t->lock);
		return rx_violation(t,
				    "peer had no receive posted: credit "
				    "protocol violated",
				    "%s frame of %u bytes",
				    op == FR_SEND ? "SEND" : "WRITE", len);
	}
	idx = t->rq[t->rq_head];
	t->rq_head = (t->rq_head + 1) % c->nrx;
	t->rq_len--;
	if (op == FR_SEND) {
		dst = cm_rx(c, idx);
	} else {
		dst = cm_slot(c, slot);
		dst_hdr = cm_slot_hdr(c, slot);
	}
	pthread_mutex_unlock(&t->lock);

	/* Both in place before the completion, as over RDMA. */
	rc = dst_hdr ? io_recv_full(t->fd, dst_hdr, CM_SLOT_HDR) : 0;
	if (!rc)
		rc = io_recv_full(t->fd, dst, len);
	if (rc)
		return sock_error(t, rc, "receive");
	ev.type = op == FR_SEND ? CM_EV_RECV : CM_EV_DATA;
	ev.imm = op == FR_WRITE ? imm : 0;
	ev.len = op == FR_WRITE ? CM_SLOT_HDR : len;
	ev.id = idx;
	pthread_mutex_lock(&t->lock);
	if (!t->dead)
		cq_push_locked(t, &ev);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void *tconn_rx_main(void *arg)
{
	struct tconn *t = arg;

	while (rx_frame(t) == 0)
		;
	pthread_mutex_lock(&t->lock);
	t->rx_done = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* ---- the send queue ---- */

/*
 * Queues a send WR for the send thread. As with ibv_post_send(), posting
 * on a failed connection succeeds and the WR is flushed: the engine then
 * meets the failure in completion order, after what arrived before it
 * (a reposted receive must not fail ahead of the BYE that was read).
 */
int tconn_sq_post(struct tconn *t, const struct twr *wr, const char *what)
{
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	if (t->sq_used >= t->depth) {
		rc = -ENOMEM;
	} else if (t->dead) {
		t->sq_used++;
		flush_wr_locked(t, wr);
	} else {
		t->sq[(t->sq_head + t->sq_len) % t->depth] = *wr;
		t->sq_len++;
		t->sq_used++;
		pthread_cond_broadcast(&t->cond);
	}
	pthread_mutex_unlock(&t->lock);
	if (rc)
		log_err("cannot post %s to %s: send queue of %u entries full",
			what, t->base.peer, t->depth);
	return rc;
}

/* ---- the receive and completion queues ---- */

int tconn_post_recv_raw(struct tconn *t, unsigned int rxbuf)
{
	struct cm_conn *c = &t->base;
	int rc = 0;

	/* Accepted on a failed connection too, as a verbs QP would. */
	pthread_mutex_lock(&t->lock);
	if (rxbuf >= c->nrx || t->rq_len >= c->nrx)
		rc = -EINVAL;
	else
		t->rq[(t->rq_head + t->rq_len++) % c->nrx] = rxbuf;
	pthread_mutex_unlock(&t->lock);
	if (rc == -EINVAL)
		log_err("cannot post receive: %s", strerror(-rc));
	return rc;
}

int tconn_poll_raw(struct tconn *t, struct cm_event *ev, int max)
{
	uint64_t cnt;
	int n = 0;

	pthread_mutex_lock(&t->lock);
	while (n < max && t->cq_len) {
		ev[n] = t->cq[t->cq_head];
		t->cq_head = (t->cq_head + 1) % t->cq_cap;
		t->cq_len--;
		if (ev[n].type == CM_EV_SEND_DONE)
			t->sq_used--;
		n++;
	}
	if (n && !t->cq_len && read(t->evfd, &cnt, sizeof(cnt)) < 0 &&
	    errno != EAGAIN)
		log_debug("cannot clear completion signal: %s",
			  strerror(errno));
	pthread_mutex_unlock(&t->lock);
	return n;
}
