/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA transport's verbs resources and its struct cm_ops (cm.h): the
 * PD, completion channel, CQs, QP and memory regions of one connection
 * (vconn_build), posting, arming and waiting; the ops table names the
 * polling of cm/verbs_poll.c, the lanes of cm/rdma_lane.c and the rails of
 * cm/rails.c. The QP and the teardown that mirrors vconn_build() are
 * cm/verbs_res.c's. cm/rdma_cm.c sets the connection up and calls in
 * here; nothing here resolves, connects or listens.
 *
 * One connection is one RC QP with a send CQ and a receive CQ sharing one
 * completion channel, and four memory regions: control tx and rx buffers
 * (local), the ring with its slot headers (remote write, sink only) and
 * the staging buffers with theirs (local, source only). A data write is
 * two work requests: an unsignalled RDMA WRITE of the payload into its
 * page-aligned slot, then an RDMA WRITE WITH IMMEDIATE of the 64-byte
 * header (inline where the device allows) into the slot's header: RC
 * places them in order, so the receive completion of the second says the
 * first is in place. rdma_cm drives the QP through INIT/RTR/RTS.
 *
 * Conventions normalised here, once: verbs constructors return NULL and set
 * errno; ibv_* actions return the error itself; rdma_* return -1 and set
 * errno. Every function below returns 0 or a negative errno and logs the
 * root cause where it is known. Every wait is bounded.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "cm/verbs_int.h"
#include "util/log.h"
#include "util/units.h"

#define CQ_ACK_BATCH 16

static struct vconn *to_v(struct cm_conn *c)
{
	return (struct vconn *)c;
}

/* ---- teardown (cm/verbs_res.c) ---- */

static void v_destroy(struct cm_conn *c)
{
	struct vconn *v = to_v(c);

	vconn_teardown(v);
	free(v);
}

/* ---- memory ---- */

static void memlock_hint(char *buf, size_t n, size_t want)
{
	struct rlimit rl;
	char have[32], need[32];

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY) {
		units_format_size(rl.rlim_cur, have, sizeof(have));
		units_format_size(want, need, sizeof(need));
		snprintf(buf, n,
			 " (memlock limit is %s, %s needed: raise it with "
			 "'ulimit -l unlimited', or LimitMEMLOCK=infinity "
			 "for a service)",
			 have, need);
	} else {
		buf[0] = '\0';
	}
}

/* Registers len bytes at buf (allocated already). */
static int reg_only(struct vconn *v, const char *what, uint8_t *buf, size_t len,
		    int access, struct ibv_mr **mr)
{
	char sz[32], hint[200];
	int err;

	*mr = ibv_reg_mr(v->pd, buf, len, access);
	if (!*mr) {
		err = errno ? errno : ENOMEM;
		memlock_hint(hint, sizeof(hint), len);
		log_err("cannot register %s (%s): %s%s", what,
			units_format_size(len, sz, sizeof(sz)), strerror(err),
			hint);
		return -err;
	}
	return 0;
}

/* Allocates len bytes page-aligned (not touched: no memory yet). */
static int alloc_buf(const char *what, size_t len, uint8_t **buf)
{
	char sz[32];
	int err;

	*buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*buf == MAP_FAILED) {
		*buf = NULL;
		err = errno;
		log_err("cannot allocate %s (%s): %s", what,
			units_format_size(len, sz, sizeof(sz)), strerror(err));
		return -err;
	}
	return 0;
}

/* Allocates len bytes page-aligned and registers them. */
static int reg_buf(struct vconn *v, const char *what, size_t len, int access,
		   uint8_t **buf, struct ibv_mr **mr)
{
	int rc = alloc_buf(what, len, buf);

	return rc ? rc : reg_only(v, what, *buf, len, access, mr);
}

static int v_post_recv(struct cm_conn *c, unsigned int rxbuf);

/*
 * Registers and posts the rx buffers beyond the credits', one per ring
 * slot: for the WRITE_WITH_IMMs, once the session is agreed. Idempotent.
 */
static int post_late_rx(struct vconn *v)
{
	struct cm_conn *c = &v->base;
	size_t off = (size_t)v->nrx_early * c->geom.ctrl_size;
	unsigned int n = v->nlanes > 1 ? v->nlanes : 1;
	/*
	 * With lanes, only lane 0's share of the slots writes here, and
	 * the shares of lanes that did not join (cm_keep_lanes).
	 */
	unsigned int end = cm_lane0_rq_depth(&c->geom, n, c->lanes_up);
	int rc;

	if (v->rx_late_mr || v->nrx_early >= c->nrx)
		return 0;
	for (unsigned int i = 1; i < n && i < c->lanes_up; i++)
		if (!v->lane[i]) {
			log_err("cannot set up the ring for %s: lane %u of %u "
				"never joined",
				c->peer, i, n);
			return -ENOTCONN;
		}
	rc = reg_only(v, "control receive buffers", c->rx + off,
		      (size_t)(c->nrx - v->nrx_early) * c->geom.ctrl_size,
		      IBV_ACCESS_LOCAL_WRITE, &v->rx_late_mr);
	for (unsigned int i = v->nrx_early; !rc && i < end && i < c->nrx; i++)
		rc = v_post_recv(c, i);
	return rc;
}

/*
 * The ring or staging area (cm_area_alloc), registered as one MR: with
 * rails, each lane's slots on its device's NUMA node (ibv_reg_mr faults
 * the pages in, after cm_area_alloc set their policies).
 */
static int reg_area(struct vconn *v, const char *what, int access,
		    uint8_t **data, uint8_t **hdr, struct ibv_mr **mr)
{
	int node[CM_LANES_MAX] = { v->base.numa_node }, rc;
	bool rails = v->base.numa_rails && v->nrails > 1 && v->nlanes > 1;

	for (unsigned int k = 1; rails && k < v->nlanes; k++)
		node[k] = v->lane[k] ? cm_numa_of_device(v->lane[k]->base.dev)
				     : -1;
	/* 2 MiB aligned: a NIC maps it with fewer, larger pages. */
	rc = cm_area_alloc(&v->base, what, true, rails ? node : NULL, data,
			   hdr);
	return rc ? rc
		  : reg_only(v, what, *data, cm_area_len(&v->base.geom), access,
			     mr);
}

#define RING_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static int v_ring_create(struct cm_conn *c, struct cm_ring_desc *desc)
{
	struct vconn *v = to_v(c);
	int rc;

	rc = post_late_rx(v);
	if (rc)
		return rc;
	rc = reg_area(v, "ring", RING_ACCESS, &c->ring, &c->ring_hdr,
		      &v->ring_mr);
	if (rc)
		return rc;
	desc->addr = (uintptr_t)c->ring;
	desc->hdr_addr = (uintptr_t)c->ring_hdr;
	desc->rkey = v->ring_mr->rkey;
	desc->rails = v->nrails > 1 ? v->nrails : 1;
	for (unsigned int i = 1; i < v->nlanes; i++) {
		struct vconn *l = v->lane[i];

		if (l && l->rail == l) {
			rc = reg_only(l, "ring", c->ring, cm_area_len(&c->geom),
				      RING_ACCESS, &l->ring_mr);
			if (rc)
				return rc;
		}
	}
	/*
	 * A rail no lane with data is on (the client dropped it, or its
	 * lanes did not join) gets rkey 0.
	 */
	for (unsigned int i = 1; i < v->nlanes && i < c->lanes_up; i++) {
		struct vconn *l = v->lane[i];
		unsigned int r = v->nrails > 1 ? v->lane_rail[i] : 0;

		if (!l || !l->rail || !l->rail->ring_mr || r >= desc->rails)
			return -EINVAL;
		if (r)
			desc->rkeys[r] = l->rail->ring_mr->rkey;
	}
	desc->rkeys[0] = desc->rkey;
	return 0;
}

static int v_stage_create(struct cm_conn *c, const struct cm_ring_desc *peer)
{
	struct vconn *v = to_v(c);
	int rc;

	rc = post_late_rx(v);
	if (rc)
		return rc;
	rc = reg_area(v, "staging buffers", IBV_ACCESS_LOCAL_WRITE, &c->stage,
		      &c->stage_hdr, &v->stage_mr);
	if (rc)
		return rc;
	v->remote_addr = peer->addr;
	v->remote_hdr_addr = peer->hdr_addr;
	v->remote_rkey = peer->rkey;
	v->stage_lkey = v->stage_mr->lkey;
	if ((peer->rails > 1 ? peer->rails : 1) !=
	    (v->nrails > 1 ? v->nrails : 1))
		return -EPROTO;
	for (unsigned int r = 0; r < CM_LANES_MAX; r++)
		v->remote_rkeys[r] =
			r && r < peer->rails ? peer->rkeys[r] : peer->rkey;
	v->wr_rkey = peer->rkey;
	for (unsigned int i = 1; i < v->nlanes; i++) {
		struct vconn *l = v->lane[i];

		if (l)
			l->wr_rkey =
				v->remote_rkeys[v->nrails > 1 ? v->lane_rail[i]
							      : 0];
		if (l && l->rail == l) {
			rc = reg_only(l, "staging buffers", c->stage,
				      cm_area_len(&c->geom),
				      IBV_ACCESS_LOCAL_WRITE, &l->stage_mr);
			if (rc)
				return rc;
			l->stage_lkey = l->stage_mr->lkey;
		}
	}
	return 0;
}

/* ---- data path ---- */

static int v_post_send(struct cm_conn *c, unsigned int txbuf, uint32_t len,
		       uint64_t wr_id)
{
	struct vconn *v = to_v(c);
	struct ibv_sge sge = {
		.addr = (uintptr_t)cm_tx(c, txbuf),
		.length = len,
		.lkey = v->tx_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int rc = ibv_post_send(v->id->qp, &wr, &bad);

	if (rc)
		log_err("cannot post control send to %s: %s", c->peer,
			strerror(rc));
	return -rc;
}

static int v_post_recv(struct cm_conn *c, unsigned int rxbuf)
{
	struct vconn *v = to_v(c);
	unsigned int lane = rxbuf >= c->nrx ? rxbuf - c->nrx + 1 : 0;

	/* Past the rx buffers: lane k's zero-length receive, id nrx+k-1. */
	if (lane)
		return lane < v->nlanes && v->lane[lane]
			       ? vlane_post_recv0(v->lane[lane], rxbuf)
			       : -EINVAL;
	struct ibv_sge sge = {
		.addr = (uintptr_t)cm_rx(c, rxbuf),
		.length = c->geom.ctrl_size,
		.lkey = rxbuf < v->nrx_early ? v->rx_mr->lkey
					     : v->rx_late_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = rxbuf,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;
	int rc = ibv_post_recv(v->id->qp, &wr, &bad);

	if (rc)
		log_err("cannot post receive: %s", strerror(rc));
	return -rc;
}

/*
 * The payload (unsignalled: the header's completion covers it; a flush
 * of it carries wr_id too, and the engine ignores flushes) and then the
 * header with the immediate, posted together.
 */
static int v_post_write(struct cm_conn *c, unsigned int stage, uint32_t len,
			unsigned int slot, uint32_t imm, bool signaled,
			uint64_t wr_id)
{
	struct vconn *v = to_v(c);
	/*
	 * With lanes: slot s on lane s % n (on lane 0 if that one did not
	 * join), signalled, ordered by wf.
	 */
	unsigned int ln = cm_lane_carrier(slot, v->nlanes, c->lanes_up);
	struct vconn *l = ln && ln < v->nlanes ? v->lane[ln] : v;
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2], *bad;
	uint32_t lkey, rkey;
	int rc;

	/* Before anything reads l (a lane not joined) or the slot. */
	if (len > c->geom.chunk_size || stage >= c->geom.slots ||
	    slot >= c->geom.slots || !l || !c->stage) {
		log_err("cannot post RDMA write to %s: %s", c->peer,
			strerror(EINVAL));
		return -EINVAL;
	}
	/* Its rail's registration of staging and of the peer's ring. */
	lkey = l->rail && l->rail != v ? l->rail->stage_lkey : v->stage_lkey;
	rkey = l->wr_rkey; /* its rail's, set once: no lookup per slot */
	sge[0] = (struct ibv_sge){
		.addr = (uintptr_t)cm_stage(c, stage),
		.length = len,
		.lkey = lkey,
	};
	sge[1] = (struct ibv_sge){
		.addr = (uintptr_t)cm_stage_hdr(c, stage),
		.length = CM_SLOT_HDR,
		.lkey = lkey,
	};
	wr[0] = (struct ibv_send_wr){
		.wr_id = wr_id,
		.next = &wr[1],
		.sg_list = &sge[0],
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma.remote_addr =
			v->remote_addr + (uint64_t)slot * c->geom.chunk_size,
		.wr.rdma.rkey = rkey,
	};
	wr[1] = (struct ibv_send_wr){
		.wr_id = wr_id,
		.sg_list = &sge[1],
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) |
			      (l->inline_hdr ? IBV_SEND_INLINE : 0),
		.imm_data = htobe32(imm),
		.wr.rdma.remote_addr =
			v->remote_hdr_addr + (uint64_t)slot * CM_SLOT_HDR,
		.wr.rdma.rkey = rkey,
	};
	if (v->nlanes > 1) {
		uint64_t pos;

		rc = cm_wfifo_push(&v->wf, wr_id, signaled, &pos);
		if (rc) {
			log_err("cannot post RDMA write to %s: more writes "
				"than staging buffers",
				c->peer);
			return rc;
		}
		wr[0].wr_id = wr[1].wr_id = pos;
		wr[1].send_flags |= IBV_SEND_SIGNALED;
	}
	rc = ibv_post_send(l->id->qp, len ? &wr[0] : &wr[1], &bad);

	if (rc)
		log_err("cannot post RDMA write to %s: %s", c->peer,
			strerror(rc));
	return -rc;
}

static int v_arm(struct cm_conn *c)
{
	struct vconn *v = to_v(c);
	int rc = ibv_req_notify_cq(v->rcq, 0);

	if (!rc)
		rc = ibv_req_notify_cq(v->scq, 0);
	if (rc)
		log_err("cannot arm completion queue: %s", strerror(rc));
	return rc ? -rc : vlane_arm(v);
}

/* Takes the CQ events waiting on channel ch of v's lanes. */
static void take_cq_events(struct vconn *v, struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(ch, &cq, &ctx) == 0) {
		/* Ack in batches; both CQs are acked at teardown. */
		if (cq == v->rcq && ++v->unacked_events >= CQ_ACK_BATCH) {
			ibv_ack_cq_events(v->rcq, v->unacked_events);
			v->unacked_events = 0;
		} else if (cq == v->scq || vlane_ack(v, cq)) {
			ibv_ack_cq_events(cq, 1);
		}
	}
}

static int v_wait(struct cm_conn *c, int extra_fd, int timeout_ms)
{
	struct vconn *v = to_v(c);
	/* poll(2) skips an extra_fd of -1; then each other rail's two. */
	struct pollfd pfd[4 + 2 * CM_LANES_MAX] = {
		{ .fd = v->cch->fd, .events = POLLIN },
		{ .fd = v->ech->fd, .events = POLLIN },
		{ .fd = v->id->verbs->async_fd, .events = POLLIN },
		{ .fd = extra_fd, .events = POLLIN },
	};
	struct vconn *rail[CM_LANES_MAX];
	unsigned int nr = 0;
	int rc;

	for (unsigned int i = 1; i < v->nlanes; i++) {
		struct vconn *l = v->lane[i];

		if (l && l->rail == l && l->cch) {
			rail[nr] = l;
			pfd[4 + 2 * nr] = (struct pollfd){ .fd = l->cch->fd,
							   .events = POLLIN };
			pfd[5 + 2 * nr] =
				(struct pollfd){ .fd = l->id->verbs->async_fd,
						 .events = POLLIN };
			nr++;
		}
	}
	rc = poll(pfd, 4 + 2 * nr, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	if (pfd[1].revents)
		vconn_check_cm(v);
	if (pfd[2].revents)
		vasync_read(v->id->verbs);
	if (pfd[0].revents)
		take_cq_events(v, v->cch);
	for (unsigned int k = 0; k < nr; k++) {
		if (pfd[5 + 2 * k].revents)
			vasync_read(rail[k]->id->verbs);
		if (pfd[4 + 2 * k].revents)
			take_cq_events(v, rail[k]->cch);
	}
	return 0;
}

static const struct cm_ops verbs_ops = {
	.post_send = v_post_send,
	.post_recv = v_post_recv,
	.post_write = v_post_write,
	.poll = vconn_poll,
	.arm = v_arm,
	.wait = v_wait,
	.ring_create = v_ring_create,
	.stage_create = v_stage_create,
	.destroy = v_destroy,
	.set_lanes = vconn_set_lanes,
	.keep_lanes = vconn_keep_lanes,
	.join = vconn_join,
	.accept_lane = vconn_accept_lane,
	.local_rails = vconn_local_rails,
	.set_rails = vconn_set_rails,
};

/* ---- resources ---- */

static unsigned int next_vec_base; /* the next connection's first vector */

/*
 * PD, completion channel, CQs, QP and the control buffers of one cm_id,
 * with every rx buffer posted. On failure the caller runs vconn_teardown.
 */
int vconn_build(struct vconn *v)
{
	struct cm_conn *c = &v->base;
	unsigned int sdepth = cm_sq_depth(&c->geom);
	unsigned int rdepth = cm_rq_depth(&c->geom);
	int rc, vec;

	c->ops = &verbs_ops;
	c->transport = "rdma";
	v->rail = v;
	snprintf(c->dev, sizeof(c->dev), "%s",
		 ibv_get_device_name(v->id->verbs->device));
	c->link_gbps = vconn_link_gbps(v->id->verbs, v->id->port_num);
	c->numa_node = cm_numa_of_device(c->dev);
	c->numa_rails = true;
	v->pd = ibv_alloc_pd(v->id->verbs);
	if (!v->pd) {
		log_err("cannot allocate protection domain on %s: %s", c->dev,
			strerror(errno));
		return -errno;
	}
	v->cch = ibv_create_comp_channel(v->id->verbs);
	if (!v->cch) {
		log_err("cannot create completion channel: %s",
			strerror(errno));
		return -errno;
	}
	rc = cm_set_nonblock(v->cch->fd);
	if (rc)
		return rc;
	/*
	 * Every send WR may complete (selective signalling only lowers it;
	 * a QP in error flushes them all), every receive does.
	 */
	/*
	 * Each connection starts its lanes at the next completion vector,
	 * so that the lane 0s of concurrent sessions are not all on vector
	 * 0 (its interrupt and CPU) while the other vectors idle.
	 */
	v->vec_base = __atomic_fetch_add(&next_vec_base, 1, __ATOMIC_RELAXED);
	vec = v->id->verbs->num_comp_vectors > 0
		      ? (int)(v->vec_base %
			      (unsigned int)v->id->verbs->num_comp_vectors)
		      : 0;
	v->scq = ibv_create_cq(v->id->verbs, (int)sdepth, v, v->cch, vec);
	v->rcq = v->scq ? ibv_create_cq(v->id->verbs, (int)rdepth, v, v->cch,
					vec)
			: NULL;
	if (!v->scq || !v->rcq) {
		log_err("cannot create completion queue of %u entries on %s: "
			"%s",
			v->scq ? rdepth : sdepth, c->dev, strerror(errno));
		return -errno;
	}
	rc = vconn_create_qp(v, v->pd, sdepth, rdepth, true);
	if (rc) {
		log_err("cannot create queue pair (%u send, %u receive) on %s: "
			"%s",
			sdepth, rdepth, c->dev, strerror(-rc));
		return rc;
	}
	rc = vasync_add(v);
	if (rc)
		return rc;
	c->ntx = cm_ntx(&c->geom);
	c->nrx = rdepth;
	rc = reg_buf(v, "control send buffers",
		     (size_t)c->ntx * c->geom.ctrl_size, IBV_ACCESS_LOCAL_WRITE,
		     &c->tx, &v->tx_mr);
	if (rc)
		return rc;
	/* All of rx reserved, the credits' part pinned: post_late_rx. */
	v->nrx_early = c->geom.ctrl_credits;
	rc = alloc_buf("control receive buffers",
		       (size_t)c->nrx * c->geom.ctrl_size, &c->rx);
	if (!rc)
		rc = reg_only(v, "control receive buffers", c->rx,
			      (size_t)v->nrx_early * c->geom.ctrl_size,
			      IBV_ACCESS_LOCAL_WRITE, &v->rx_mr);
	if (rc)
		return rc;
	for (unsigned int i = 0; i < v->nrx_early; i++) {
		rc = v_post_recv(c, i);
		if (rc)
			return rc;
	}
	return 0;
}
