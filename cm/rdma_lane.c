/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Lanes over rdma_cm (--streams; cm.h "Lanes"): the lane calls of the
 * verbs transport's struct cm_ops. The client connects lane k to the same
 * receiver from the same local address as lane 0 (so through the same
 * device), or with rails (rails.c) to rail k % R's address from whichever
 * device routes there, with a join's private data (cm_int.h PD_JOIN_LEN: token, lane,
 * proof); the receiver's listener hands such a request to the session
 * that waits for it (transfer/), which checks the proof and accepts it
 * here. Each lane's cm_id then moves to lane 0's event channel, where a
 * DISCONNECTED of any lane ends the connection.
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

static struct vconn *to_v(struct cm_conn *c)
{
	return (struct vconn *)c;
}

int vconn_set_lanes(struct cm_conn *c, unsigned int n)
{
	struct vconn *v = to_v(c);
	int rc;

	if (n < 1 || n > CM_LANES_MAX)
		return -EINVAL;
	if (v->nlanes || c->ring || c->stage)
		return -EBUSY;
	if (n > 1) {
		rc = cm_wfifo_init(&v->wf, c->geom.slots);
		if (rc)
			return rc;
	}
	v->nlanes = n;
	c->lanes = n;
	return 0;
}

/* Moves a connected lane onto lane 0's event channel and lists it. */
static int lane_adopt(struct vconn *v, struct vconn *l, unsigned int idx)
{
	if (rdma_migrate_id(l->id, v->ech)) {
		int rc = -errno;

		log_err("lane %u of %s: cannot move its events: %s", idx,
			v->base.peer, strerror(errno));
		return rc;
	}
	rdma_destroy_event_channel(l->ech);
	l->ech = NULL;
	vasync_lane(v, idx, l);
	log_debug("lane %u of %s established", idx, v->base.peer);
	return 0;
}

static int lane_alloc(struct vconn *v, struct vconn **out)
{
	struct vconn *l = calloc(1, sizeof(*l));

	*out = l;
	if (!l)
		return -ENOMEM;
	l->parent = v;
	l->base.geom = v->base.geom;
	snprintf(l->base.peer, sizeof(l->base.peer), "%s", v->base.peer);
	return 0;
}

static bool geom_same(const struct cm_geom *a, const struct cm_geom *b)
{
	return a->ctrl_size == b->ctrl_size &&
	       a->ctrl_credits == b->ctrl_credits && a->slots == b->slots &&
	       a->slot_size == b->slot_size;
}

int vconn_join(struct cm_conn *c, const struct cm_join *j,
	       const struct cm_timeouts *to)
{
	struct vconn *v = to_v(c), *l = NULL;
	struct sockaddr_storage src, dst;
	struct rdma_conn_param param;
	uint8_t pd[PD_JOIN_LEN];
	bool rail = false;
	int rc;

	if (j->lane < 1 || j->lane >= v->nlanes || v->lane[j->lane])
		return -EINVAL;
	rc = lane_alloc(v, &l);
	if (rc)
		goto out;
	/* From lane 0's address (so its device), any port. */
	memcpy(&src, rdma_get_local_addr(v->id), sizeof(src));
	memcpy(&dst, rdma_get_peer_addr(v->id), sizeof(dst));
	if (src.ss_family == AF_INET)
		((struct sockaddr_in *)&src)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&src)->sin6_port = 0;
	/* Another rail: its address, from whichever device routes there. */
	if (v->nrails > 1 && j->lane % v->nrails) {
		const struct cm_rail *r = &v->rail_addr[j->lane % v->nrails];

		rail = true;
		if (r->family == 4 && dst.ss_family == AF_INET)
			memcpy(&((struct sockaddr_in *)&dst)->sin_addr, r->addr,
			       4);
		else if (r->family == 6 && dst.ss_family == AF_INET6)
			memcpy(&((struct sockaddr_in6 *)&dst)->sin6_addr,
			       r->addr, 16);
		else
			rail = false;
		if (!rail) {
			log_err("lane %u to %s: its rail is of another address "
				"family",
				j->lane, c->peer);
			rc = -EPROTO;
			goto out;
		}
	}
	l->ech = rdma_create_event_channel();
	if (!l->ech || cm_set_nonblock(l->ech->fd) ||
	    rdma_create_id(l->ech, &l->id, l, RDMA_PS_TCP)) {
		rc = -errno;
		log_err("lane %u to %s: cannot create RDMA CM id: %s", j->lane,
			c->peer, strerror(errno));
		goto out;
	}
	if (rdma_resolve_addr(l->id, rail ? NULL : (struct sockaddr *)&src,
			      (struct sockaddr *)&dst, to->resolve_ms)) {
		rc = -errno;
		log_err("lane %u to %s: cannot resolve: %s", j->lane, c->peer,
			strerror(errno));
		goto out;
	}
	rc = rcm_expect(l, RDMA_CM_EVENT_ADDR_RESOLVED, to->resolve_ms + 1000,
			"cannot resolve lane to", true);
	if (!rc && rdma_resolve_route(l->id, to->resolve_ms)) {
		rc = -errno;
		log_err("lane %u to %s: cannot resolve route: %s", j->lane,
			c->peer, strerror(errno));
	}
	if (!rc)
		rc = rcm_expect(l, RDMA_CM_EVENT_ROUTE_RESOLVED,
				to->resolve_ms + 1000,
				"cannot resolve route of lane to", true);
	if (!rc)
		rc = vlane_build(v, j->lane, l);
	if (rc)
		goto out;
	cm_pd_encode_join(pd, &c->geom, j);
	rcm_conn_param(&param, pd, PD_JOIN_LEN);
	if (rdma_connect(l->id, &param)) {
		rc = -errno;
		log_err("lane %u to %s: cannot connect: %s", j->lane, c->peer,
			strerror(errno));
		goto out;
	}
	rc = rcm_expect(l, RDMA_CM_EVENT_ESTABLISHED, to->connect_ms,
			"cannot join a lane to", true);
	if (rc)
		goto out;
	l->established = true;
	if (!geom_same(&l->base.geom, &c->geom)) {
		log_err("lane %u to %s: the receiver answered with another "
			"geometry",
			j->lane, c->peer);
		rc = -EPROTO;
		goto out;
	}
	rc = lane_adopt(v, l, j->lane);
	if (!rc)
		return 0;
out:
	vlane_free(l);
	return rc;
}

static void lane_refuse(struct rdma_cm_id *id)
{
	uint8_t pd[PD_LEN];

	cm_pd_encode(pd, PD_ST_REFUSED, NULL);
	rdma_reject(id, pd, PD_LEN);
}

int vconn_accept_lane(struct cm_conn *c, struct cm_request *req,
		      unsigned int lane, const struct cm_timeouts *to)
{
	struct vconn *v = to_v(c), *l = NULL;
	struct rdma_conn_param param;
	uint8_t pd[PD_LEN];
	int rc;

	if (req->tcp || !req->join || lane < 1 || lane >= v->nlanes ||
	    v->lane[lane] || !geom_same(&req->want, &c->geom)) {
		log_err("refused lane %u from %s: not a lane this session "
			"waits for",
			lane, req->peer);
		cm_reject_join(req);
		return -EPROTO;
	}
	rc = lane_alloc(v, &l);
	if (rc) {
		cm_reject_join(req);
		return rc;
	}
	l->ech = req->ech;
	l->id = req->id;
	l->id->context = l;
	snprintf(l->base.peer, sizeof(l->base.peer), "%s", req->peer);
	free(req);
	rc = vlane_build(v, lane, l);
	if (rc) {
		lane_refuse(l->id);
		goto out;
	}
	cm_pd_encode(pd, PD_ST_OK, &c->geom);
	rcm_conn_param(&param, pd, PD_LEN);
	if (rdma_accept(l->id, &param)) {
		rc = -errno;
		log_err("cannot accept lane %u from %s: %s", lane, l->base.peer,
			strerror(errno));
		goto out;
	}
	rc = rcm_expect(l, RDMA_CM_EVENT_ESTABLISHED, to->connect_ms,
			"lane join from", false);
	if (rc)
		goto out;
	l->established = true;
	rc = lane_adopt(v, l, lane);
	if (!rc)
		return 0;
out:
	vlane_free(l);
	return rc;
}
