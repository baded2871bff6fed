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
 * work requests in order and writes the frames queued at that moment (up
 * to TX_BATCH of them and TX_BATCH_BYTES) with one sendmsg() from the tx
 * or staging buffers; a receive thread plays the responder: it reads what
 * the socket holds into a buffer of its own (RX_BUF bytes), takes each
 * frame's header from there, checks it, and copies the payload to its
 * destination, reading a long payload's rest straight into place. A
 * re-run announces one small FILE per file: one system call for many of
 * them on either side, not one (send) or two (receive) each.
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

/*
 * Frames written by one sendmsg(): as many as are queued, up to this many
 * and, past the first, this many bytes, so that a chunk's completion (and
 * its staging buffer) never waits behind a long batch.
 */
#define TX_BATCH 64
#define TX_BATCH_BYTES (256u * 1024)

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

/* Frames to write with one sendmsg(): their WRs, headers and iovecs. */
struct tx_batch {
	unsigned int n;
	size_t bytes;
	struct twr wr[TX_BATCH];
	uint8_t hdr[TX_BATCH][FR_HDR];
	struct iovec iov[3 * TX_BATCH];
	unsigned int niov;
};

/* Adds one frame: its header, a slot header (WRITE) and the payload. */
static void batch_add(struct tx_batch *b, const struct twr *wr, const void *buf,
		      const void *slot_hdr)
{
	struct iovec *iov = b->iov + b->niov;

	b->wr[b->n] = *wr;
	fr_encode(b->hdr[b->n], wr);
	*iov++ = (struct iovec){ .iov_base = b->hdr[b->n], .iov_len = FR_HDR };
	if (slot_hdr)
		*iov++ = (struct iovec){ .iov_base = (void *)slot_hdr,
					 .iov_len = CM_SLOT_HDR };
	if (wr->len)
		*iov++ = (struct iovec){ .iov_base = (void *)buf,
					 .iov_len = wr->len };
	b->niov = (unsigned int)(iov - b->iov);
	b->bytes += FR_HDR + (slot_hdr ? CM_SLOT_HDR : 0) + wr->len;
	b->n++;
}

/* Writes every frame of b, whole; 0 or -errno. */
static int send_batch(struct tconn *t, struct tx_batch *b)
{
	struct msghdr msg = { .msg_iov = b->iov, .msg_iovlen = b->niov };

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

/* Takes the WRs queued now into b (at least one); called with the lock. */
static void batch_take_locked(struct tconn *t, struct tx_batch *b)
{
	struct cm_conn *c = &t->base;

	b->n = 0;
	b->niov = 0;
	b->bytes = 0;
	for (unsigned int i = 0; i < t->sq_len && b->n < TX_BATCH; i++) {
		const struct twr *wr = &t->sq[(t->sq_head + i) % t->depth];

		if (b->n && b->bytes + wr->len > TX_BATCH_BYTES)
			break;
		if (wr->op == FR_SEND)
			batch_add(b, wr, cm_tx(c, wr->buf), NULL);
		else
			batch_add(b, wr, cm_stage(c, wr->buf),
				  cm_stage_hdr(c, wr->buf));
	}
}

void *tconn_tx_main(void *arg)
{
	struct tconn *t = arg;
	struct tx_batch batch, *b = &batch; /* about 7 KB */

	for (;;) {
		int rc;

		pthread_mutex_lock(&t->lock);
		while (!t->sq_len && !t->dead && !t->stopping)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->dead || t->stopping) {
			flush_sq_locked(t);
			pthread_mutex_unlock(&t->lock);
			break;
		}
		batch_take_locked(t, b);
		t->tx_writing = true;
		pthread_mutex_unlock(&t->lock);

		rc = send_batch(t, b);

		pthread_mutex_lock(&t->lock);
		t->tx_writing = false;
		t->sq_head = (t->sq_head + b->n) % t->depth;
		t->sq_len -= b->n;
		for (unsigned int i = 0; !rc && i < b->n; i++) {
			struct cm_event ev = { .type = CM_EV_SEND_DONE,
					       .id = b->wr[i].wr_id };

			if (b->wr[i].signaled)
				cq_push_locked(t, &ev);
			else
				t->sq_used--;
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

/*
 * The next len bytes of the stream into dst: what the receive buffer
 * holds first, then a long rest (a chunk's) straight from the socket, a
 * short one through the buffer, reading whatever more has come with it.
 * 0 or -errno (-ECONNRESET: the peer closed). The receive thread's alone.
 */
static int rx_read(struct tconn *t, void *dst, size_t len)
{
	uint8_t *p = dst;
	size_t k = len < t->rxb_len ? len : t->rxb_len;

	memcpy(p, t->rxb + t->rxb_off, k);
	t->rxb_off += k;
	t->rxb_len -= k;
	p += k;
	len -= k;
	if (!len)
		return 0;
	t->rxb_off = 0; /* empty */
	if (len >= TCP_RX_BUF / 2)
		return io_recv_full(t->fd, p, len);
	while (t->rxb_len < len) {
		ssize_t n = recv(t->fd, t->rxb + t->rxb_len,
				 TCP_RX_BUF - t->rxb_len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		t->rxb_len += (size_t)n;
	}
	memcpy(p, t->rxb, len);
	t->rxb_off = len;
	t->rxb_len -= len;
	return 0;
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

	rc = rx_read(t, hdr, sizeof(hdr));
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
	rc = dst_hdr ? rx_read(t, dst_hdr, CM_SLOT_HDR) : 0;
	if (!rc)
		rc = rx_read(t, dst, len);
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
