/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The TCP transport's struct cm_ops (cm.h) over one connection: posting
 * (work requests queued for the send thread of cm/tcp_hca.c), polling and
 * waiting on its completion queue, the ring and staging areas, destroy;
 * the ops table names the lanes' calls of cm/tcp_lane.c. It behaves as the
 * RDMA transport of verbs.c does, so the engine, wire format, credits,
 * checksums and placement are the same. The connection comes made
 * (cm/tcp_res.c) and its handshake done from cm/tcp_conn.c, which installs
 * these ops.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm_int.h"
#include "cm/tcp_int.h"
#include "util/log.h"

static struct tconn *to_t(struct cm_conn *c)
{
	return (struct tconn *)c;
}

static int t_post_send(struct cm_conn *c, unsigned int txbuf, uint32_t len,
		       uint64_t wr_id)
{
	struct twr wr = {
		.op = FR_SEND,
		.signaled = true,
		.buf = txbuf,
		.len = len,
		.wr_id = wr_id,
	};

	if (txbuf >= c->ntx || len > c->geom.ctrl_size) {
		log_err("cannot post control send to %s: %s", c->peer,
			strerror(EINVAL));
		return -EINVAL;
	}
	return tconn_sq_post(to_t(c), &wr, "control send");
}

static int t_post_write(struct cm_conn *c, unsigned int stage, uint32_t len,
			unsigned int slot, uint32_t imm, bool signaled,
			uint64_t wr_id)
{
	struct twr wr = {
		.op = FR_WRITE,
		.signaled = signaled,
		.buf = stage,
		.len = len,
		.imm = imm,
		.slot = slot,
		.wr_id = wr_id,
	};

	struct tconn *t = to_t(c), *l = tlane_pick(t, slot);

	if (!c->stage || stage >= c->geom.slots || slot >= c->geom.slots ||
	    len > c->geom.chunk_size || !l) {
		log_err("cannot post data write to %s: %s", c->peer,
			strerror(EINVAL));
		return -EINVAL;
	}
	if (t->nlanes > 1) { /* signalled on its lane, ordered by wf */
		uint64_t pos;
		int rc = cm_wfifo_push(&t->wf, wr_id, signaled, &pos);

		if (rc) {
			log_err("cannot post data write to %s: more writes "
				"than staging buffers",
				c->peer);
			return rc;
		}
		wr.wr_id = pos;
		wr.signaled = true;
	}
	return tconn_sq_post(l, &wr, "data write");
}

/* Past the rx buffers: lane k's zero-length receive, id nrx + k - 1. */
static int t_post_recv(struct cm_conn *c, unsigned int rxbuf)
{
	struct tconn *t = to_t(c);
	unsigned int k = rxbuf >= c->nrx ? rxbuf - c->nrx + 1 : 0;

	if (!k)
		return tconn_post_recv_raw(t, rxbuf);
	if (k >= t->nlanes || !t->lane[k]) {
		log_err("cannot post receive: %s", strerror(EINVAL));
		return -EINVAL;
	}
	return tconn_post_recv_raw(t->lane[k], 0);
}

static int t_poll(struct cm_conn *c, struct cm_event *ev, int max)
{
	struct tconn *t = to_t(c);

	return t->nlanes > 1 ? tlane_poll(t, ev, max)
			     : tconn_poll_raw(t, ev, max);
}

/* Completions are always signalled through the eventfd: nothing to arm. */
static int t_arm(struct cm_conn *c)
{
	return 0;
}

static int t_wait(struct cm_conn *c, int extra_fd, int timeout_ms)
{
	struct tconn *t = to_t(c);
	struct pollfd pfd[2] = {
		{ .fd = t->evfd, .events = POLLIN },
		{ .fd = extra_fd, .events = POLLIN },
	};

	if (t->nlanes > 1)
		return tlane_wait(t, extra_fd, timeout_ms);
	if (poll(pfd, extra_fd >= 0 ? 2 : 1, timeout_ms) < 0)
		return errno == EINTR ? 0 : -errno;
	return 0;
}

static int t_ring_create(struct cm_conn *c, struct cm_ring_desc *desc)
{
	struct tconn *t = to_t(c);
	uint8_t *p, *hdr;
	int rc;

	if (c->ring)
		return -EEXIST;
	/*
	 * Page aligned only: 2 MiB alignment bought nothing measurable over
	 * loopback and looked slower in some interleaved runs
	 * (doc/PERFORMANCE.md, "Aligned slots"); no NIC maps this memory.
	 */
	rc = cm_area_alloc(c, "ring", false, NULL, &p, &hdr);
	if (rc)
		return rc;
	pthread_mutex_lock(&t->lock); /* the receive thread reads it */
	c->ring = p;
	c->ring_hdr = hdr;
	pthread_mutex_unlock(&t->lock);
	rc = tlane_share(t);
	if (rc)
		return rc;
	desc->addr = 0; /* the peer addresses slots by index */
	desc->hdr_addr = 0;
	desc->rkey = 0;
	return 0;
}

static int t_stage_create(struct cm_conn *c, const struct cm_ring_desc *peer)
{
	struct tconn *t = to_t(c);
	uint8_t *p, *hdr;
	int rc;

	if (c->stage)
		return -EEXIST;
	rc = cm_area_alloc(c, "staging buffers", false, NULL, &p, &hdr);
	if (rc)
		return rc;
	pthread_mutex_lock(&t->lock);
	c->stage = p;
	c->stage_hdr = hdr;
	pthread_mutex_unlock(&t->lock);
	return tlane_share(t);
}

static void t_destroy(struct cm_conn *c)
{
	struct tconn *t = to_t(c);

	tconn_teardown(t);
	free(t);
}

const struct cm_ops tconn_ops = {
	.post_send = t_post_send,
	.post_recv = t_post_recv,
	.post_write = t_post_write,
	.poll = t_poll,
	.arm = t_arm,
	.wait = t_wait,
	.ring_create = t_ring_create,
	.stage_create = t_stage_create,
	.destroy = t_destroy,
	.set_lanes = tlane_set,
	.keep_lanes = tlane_keep,
	.join = tlane_join,
	.accept_lane = tlane_accept,
};
