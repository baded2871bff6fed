/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The verbs resources that a connection (cm/verbs.c builds it) and each of
 * its lanes (cm/verbs_lane.c) make and free the same way: the RC queue
 * pair (vconn_create_qp) and the teardown that mirrors vconn_build() and
 * vlane_build() in reverse, lanes first (vconn_teardown, vlane_free). The
 * bottom of the RDMA transport's files: it calls none of them but
 * verbs_async.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "cm/verbs_int.h"
#include "util/log.h"

/* ---- teardown ---- */

static int destroy_mr(struct ibv_mr **mr)
{
	int rc = 0;

	if (*mr) {
		rc = ibv_dereg_mr(*mr);
		*mr = NULL;
	}
	return -rc;
}

static void free_buf(uint8_t **p, size_t len)
{
	if (*p)
		munmap(*p, len);
	*p = NULL;
}

/*
 * Mirrors vconn_build in reverse; accepts a partly built connection, keeps
 * going past failures and returns the first error.
 */
int vconn_teardown(struct vconn *v)
{
	struct ibv_wc wc[16];
	int first = 0, rc;

	/* Lanes first: their QPs and CQs use this PD and channel. */
	for (unsigned int i = 1; i < CM_LANES_MAX; i++) {
		if (v->lane[i] && v->lane[i]->established && !v->closed)
			rdma_disconnect(v->lane[i]->id);
	}
	/* No more asynchronous events routed here (or to a lane). */
	vasync_del(v);
	/* Last first: a lane may use the PD of an earlier one (its rail). */
	for (unsigned int i = CM_LANES_MAX - 1; i >= 1; i--) {
		vlane_free(v->lane[i]);
		v->lane[i] = NULL;
	}
	cm_wfifo_free(&v->wf);
	if (v->established && !v->closed)
		rdma_disconnect(v->id);
	/* Drain flushed completions (bounded: the QP is in error now). */
	if (v->qp_created) {
		for (int i = 0; i < 64; i++) {
			int n = 0;

			if (v->scq)
				n += ibv_poll_cq(v->scq, 16, wc) > 0;
			if (v->rcq)
				n += ibv_poll_cq(v->rcq, 16, wc) > 0;
			if (!n)
				break;
		}
	}
	/* ibv_destroy_cq waits for every event taken to be acked. */
	if (v->unacked_events) {
		ibv_ack_cq_events(v->rcq, v->unacked_events);
		v->unacked_events = 0;
	}
	if (v->qp_created) {
		rdma_destroy_qp(v->id);
		v->qp_created = false;
	}
	if (v->scq && (rc = ibv_destroy_cq(v->scq)) && !first)
		first = -rc;
	if (v->rcq && (rc = ibv_destroy_cq(v->rcq)) && !first)
		first = -rc;
	v->scq = v->rcq = NULL;
	if (v->cch && ibv_destroy_comp_channel(v->cch) && !first)
		first = -errno;
	v->cch = NULL;
	if ((rc = destroy_mr(&v->tx_mr)) && !first)
		first = rc;
	if ((rc = destroy_mr(&v->rx_mr)) && !first)
		first = rc;
	if ((rc = destroy_mr(&v->rx_late_mr)) && !first)
		first = rc;
	if ((rc = destroy_mr(&v->ring_mr)) && !first)
		first = rc;
	if ((rc = destroy_mr(&v->stage_mr)) && !first)
		first = rc;
	if (!v->parent) { /* lane 0's buffers; a lane has none */
		free_buf(&v->base.tx,
			 (size_t)v->base.ntx * v->base.geom.ctrl_size);
		free_buf(&v->base.rx,
			 (size_t)v->base.nrx * v->base.geom.ctrl_size);
		cm_area_free(&v->base.ring, &v->base.geom);
		cm_area_free(&v->base.stage, &v->base.geom);
	}
	/* A lane's PD is a rail's of its own (unused by now), or NULL. */
	if (v->pd && (rc = ibv_dealloc_pd(v->pd)) && !first)
		first = -rc;
	v->pd = NULL;
	drain_cm_events(v->ech);
	if (v->id && rdma_destroy_id(v->id) && !first)
		first = -errno;
	v->id = NULL;
	if (v->ech)
		rdma_destroy_event_channel(v->ech);
	v->ech = NULL;
	if (first)
		log_debug("teardown of %s: %s", v->base.peer, strerror(-first));
	return first;
}

void vlane_free(struct vconn *l)
{
	if (!l)
		return;
	vconn_teardown(l);
	free(l);
}

/* ---- queue pair ---- */

int vconn_create_qp(struct vconn *v, struct ibv_pd *pd, unsigned int sdepth,
		    unsigned int rdepth, bool inline_hdr)
{
	struct ibv_qp_init_attr qpa = {
		.send_cq = v->scq,
		.recv_cq = v->rcq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = sdepth,
			 .max_recv_wr = rdepth,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = inline_hdr ? CM_SLOT_HDR : 0 },
		.sq_sig_all = 0,
	};

	/* Headers inline where the device takes 64 bytes so, else by DMA. */
	if (qpa.cap.max_inline_data && rdma_create_qp(v->id, pd, &qpa)) {
		log_debug("no inline data of %u bytes on %s (%s): headers "
			  "by DMA",
			  CM_SLOT_HDR, v->base.dev, strerror(errno));
		qpa.cap.max_inline_data = 0;
	}
	if (!qpa.cap.max_inline_data && rdma_create_qp(v->id, pd, &qpa))
		return -errno;
	v->qp_created = true;
	v->inline_hdr = qpa.cap.max_inline_data >= CM_SLOT_HDR;
	return 0;
}
