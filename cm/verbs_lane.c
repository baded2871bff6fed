/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The verbs resources of a connection's lanes 1..N-1 (--streams; cm.h
 * "Lanes"): each lane is a struct vconn of its own cm_id, RC QP, send CQ
 * and receive CQ, and nothing else: the PD, the completion channel, the
 * control buffers and the memory regions of the ring and staging stay lane
 * 0's (its parent), registered once; a lane on another device (rails.c)
 * uses that device's PD, channel and registrations (vrail_pick). Its CQs share the parent's channel,
 * so waiting sleeps on one fd, but each sits on its own completion vector.
 * A lane carries WRITE_WITH_IMMs only: its receives are zero-length (no
 * buffer to pin or to touch), and a SEND there would find none that fits
 * and fail the QP. rdma_lane.c connects and accepts lanes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_int.h"
#include "cm/verbs_int.h"
#include "util/log.h"

int vlane_post_recv0(struct vconn *l, uint64_t wr_id)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id }, *bad;
	int rc = ibv_post_recv(l->id->qp, &wr, &bad);

	if (rc)
		log_err("cannot post receive on lane %u: %s", l->idx,
			strerror(rc));
	return -rc;
}

int vlane_build(struct vconn *parent, unsigned int idx, struct vconn *l)
{
	struct ibv_context *ctx = l->id->verbs;
	const struct cm_geom *g = &parent->base.geom;
	unsigned int sdepth = cm_lane_sq_depth(g, idx);
	unsigned int rdepth = cm_lane_rq_depth(g, parent->nlanes, idx);
	int vec, rc;

	l->parent = parent;
	l->idx = idx;
	l->base.geom = *g;
	snprintf(l->base.dev, sizeof(l->base.dev), "%s",
		 ctx ? ibv_get_device_name(ctx->device) : "?");
	rc = vrail_pick(parent, idx, l);
	if (rc)
		return rc;
	vec = ctx->num_comp_vectors > 0
		      ? (int)((parent->vec_base + idx) %
			      (unsigned int)ctx->num_comp_vectors)
		      : 0;
	l->scq = ibv_create_cq(ctx, (int)sdepth, l, l->rail->cch, vec);
	l->rcq = l->scq ? ibv_create_cq(ctx, (int)rdepth, l, l->rail->cch, vec)
			: NULL;
	if (!l->scq || !l->rcq) {
		rc = -errno;
		log_err("cannot create completion queue of %u entries for "
			"lane %u on %s: %s",
			l->scq ? rdepth : sdepth, idx, l->base.dev,
			strerror(errno));
		return rc;
	}
	/* Headers by DMA where lane 0 found no inline room for them. */
	rc = vconn_create_qp(l, l->rail->pd, sdepth, rdepth,
			     parent->inline_hdr);
	if (rc) {
		log_err("cannot create queue pair (%u send, %u receive) for "
			"lane %u on %s: %s",
			sdepth, rdepth, idx, l->base.dev, strerror(-rc));
		return rc;
	}
	for (unsigned int i = 0; i < rdepth; i++) {
		rc = vlane_post_recv0(l, parent->base.nrx + idx - 1);
		if (rc)
			return rc;
	}
	return 0;
}

int vlane_arm(struct vconn *v)
{
	for (unsigned int i = 1; i < v->nlanes; i++) {
		struct vconn *l = v->lane[i];
		int rc;

		if (!l)
			continue;
		rc = ibv_req_notify_cq(l->rcq, 0);
		if (!rc)
			rc = ibv_req_notify_cq(l->scq, 0);
		if (rc) {
			log_err("cannot arm completion queue of lane %u: %s", i,
				strerror(rc));
			return -rc;
		}
	}
	return 0;
}

bool vlane_ack(struct vconn *v, struct ibv_cq *cq)
{
	for (unsigned int i = 1; i < v->nlanes; i++)
		if (v->lane[i] &&
		    (cq == v->lane[i]->rcq || cq == v->lane[i]->scq))
			return true;
	return false;
}
