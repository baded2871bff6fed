/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Lanes over rdma_cm (--streams; cm.h "Lanes"): the lane calls of the
 * verbs transport's struct cm_ops. The client connects lane k to the same
 * receiver from the same local address as lane 0 (so through the same
 * device), or with rails (rails.c) to rail k % R's address from whichever
 * device routes there (a rail whose first join fails, bounded by
 * CM_RAIL_JOIN_MS, or whose device is slower than lane 0's is dropped
 * with one line and -ENETUNREACH, and the caller joins the lane again as a
 * fallback, to lane 0's peer), with a join's private data (cm_int.h
 * PD_JOIN_LEN: token, lane, proof); the receiver's listener hands such a
 * request to the session that waits for it (transfer/), which checks the proof
 * and accepts it here. Each lane's cm_id then moves to lane 0's event channel,
 * where a DISCONNECTED of any lane ends the connection.
 */
#include <arpa/inet.h>
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

	return cm_lanes_set(c, &v->nlanes, &v->wf, n);
}

int vconn_keep_lanes(struct cm_conn *c, unsigned int up)
{
	struct vconn *v = to_v(c);
	unsigned int joined = 1;

	while (joined < v->nlanes && v->lane[joined])
		joined++;
	return cm_lanes_keep(c, v->nlanes, up, joined);
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
	       a->chunk_size == b->chunk_size;
}

/* "rail 1 (10.0.0.2) of [10.0.0.1]:4791" into buf, for the log. */
static const char *rail_name(const struct vconn *v, unsigned int r, char *buf,
			     size_t len)
{
	const struct cm_rail *a = &v->rail_addr[r];
	char ip[INET6_ADDRSTRLEN] = "?";

	inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->addr, ip, sizeof(ip));
	snprintf(buf, len, "rail %u (%s) of %s", r, ip, v->base.peer);
	return buf;
}

/*
 * The first join on rail r failed with rc, or found the rail's link slower
 * (rc 0): the rail is dropped for the rest of the session, once said.
 */
static int rail_drop(struct vconn *v, unsigned int r, unsigned int lane,
		     struct vconn *l, int rc)
{
	char name[128];

	v->rail_dead[r] = true;
	rail_name(v, r, name, sizeof(name));
	if (rc)
		log_warn("%s dropped: lane %u cannot join it (%s); its lanes "
			 "go to rail 0",
			 name, lane, strerror(-rc));
	else
		log_info("%s left out: reached through %s at %u Gb/s, lane "
			 "0's %s is %u Gb/s (rails are the devices of lane 0's "
			 "rate); its lanes go to rail 0",
			 name, l->base.dev,
			 vrail_gbps(l->id->verbs, l->id->port_num), v->base.dev,
			 vrail_gbps(v->id->verbs, v->id->port_num));
	return -ENETUNREACH;
}

int vconn_join(struct cm_conn *c, const struct cm_join *j,
	       const struct cm_timeouts *to)
{
	struct vconn *v = to_v(c), *l = NULL;
	struct sockaddr_storage src, dst;
	struct rdma_conn_param param;
	struct cm_timeouts pto = *to;
	uint8_t pd[PD_JOIN_LEN];
	unsigned int r = 0;
	bool probe = false;
	int rc;

	if (j->lane < 1 || j->lane >= v->nlanes || v->lane[j->lane] ||
	    (j->fallback && v->nrails <= 1))
		return -EINVAL;
	if (v->nrails > 1 && !j->fallback)
		r = j->lane % v->nrails;
	if (r && v->rail_dead[r])
		return -ENETUNREACH; /* said when it was dropped */
	/* A rail's first join is its probe, bounded by CM_RAIL_JOIN_MS. */
	if (r && !v->rail_ctx[r]) {
		probe = true;
		if (pto.resolve_ms > CM_RAIL_JOIN_MS / 10)
			pto.resolve_ms = CM_RAIL_JOIN_MS / 10;
		if (pto.connect_ms >
		    CM_RAIL_JOIN_MS - 2 * (pto.resolve_ms + 1000))
			pto.connect_ms =
				CM_RAIL_JOIN_MS - 2 * (pto.resolve_ms + 1000);
	}
	v->lane_rail[j->lane] = (uint8_t)r;
	rc = lane_alloc(v, &l);
	if (rc)
		goto out;
	l->probe = probe;
	/* From lane 0's address (so its device), any port. */
	memcpy(&src, rdma_get_local_addr(v->id), sizeof(src));
	memcpy(&dst, rdma_get_peer_addr(v->id), sizeof(dst));
	if (src.ss_family == AF_INET)
		((struct sockaddr_in *)&src)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&src)->sin6_port = 0;
	/* Another rail: its address, from whichever device routes there. */
	if (r) {
		const struct cm_rail *ra = &v->rail_addr[r];

		if (ra->family == 4 && dst.ss_family == AF_INET) {
			memcpy(&((struct sockaddr_in *)&dst)->sin_addr,
			       ra->addr, 4);
		} else if (ra->family == 6 && dst.ss_family == AF_INET6) {
			memcpy(&((struct sockaddr_in6 *)&dst)->sin6_addr,
			       ra->addr, 16);
		} else {
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
	if (rdma_resolve_addr(l->id, r ? NULL : (struct sockaddr *)&src,
			      (struct sockaddr *)&dst, pto.resolve_ms)) {
		rc = -errno;
		log_debug("lane %u to %s: cannot resolve: %s", j->lane, c->peer,
			  strerror(errno));
		goto out;
	}
	rc = rcm_expect(l, RDMA_CM_EVENT_ADDR_RESOLVED, pto.resolve_ms + 1000,
			"cannot resolve lane to", true);
	if (!rc && rdma_resolve_route(l->id, pto.resolve_ms)) {
		rc = -errno;
		log_debug("lane %u to %s: cannot resolve route: %s", j->lane,
			  c->peer, strerror(errno));
	}
	if (!rc)
		rc = rcm_expect(l, RDMA_CM_EVENT_ROUTE_RESOLVED,
				pto.resolve_ms + 1000,
				"cannot resolve route of lane to", true);
	/* A rail reached through a device slower than lane 0's: left out. */
	if (!rc && probe &&
	    vrail_gbps(l->id->verbs, l->id->port_num) !=
		    vrail_gbps(v->id->verbs, v->id->port_num)) {
		snprintf(l->base.dev, sizeof(l->base.dev), "%s",
			 ibv_get_device_name(l->id->verbs->device));
		rc = rail_drop(v, r, j->lane, l, 0);
		probe = false; /* said */
		goto out;
	}
	if (!rc)
		rc = vlane_build(v, j->lane, l);
	if (rc)
		goto out;
	cm_pd_encode_join(pd, &c->geom, j);
	rcm_conn_param(&param, pd, PD_JOIN_LEN);
	if (rdma_connect(l->id, &param)) {
		rc = -errno;
		log_debug("lane %u to %s: cannot connect: %s", j->lane, c->peer,
			  strerror(errno));
		goto out;
	}
	rc = rcm_expect(l, RDMA_CM_EVENT_ESTABLISHED, pto.connect_ms,
			"cannot join a lane to", true);
	if (rc)
		goto out;
	l->established = true;
	l->probe = false;
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
	/*
	 * A probe that failed before the receiver took the lane: the rail
	 * is dropped and the lane may join rail 0 (with its fallback proof:
	 * whatever reached the receiver, this proof is never shown again).
	 */
	if (probe && rc && !(l && l->established)) {
		if (r && v->rail_ctx[r] && l && l->id &&
		    v->rail_ctx[r] == l->id->verbs)
			v->rail_ctx[r] = NULL;
		rc = rail_drop(v, r, j->lane, l, rc);
	}
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
	/* Its rail's device (vrail_pick): k % R, or rail 0 for a fallback. */
	v->lane_rail[lane] =
		(uint8_t)(v->nrails > 1 && !req->j.fallback ? lane % v->nrails
							    : 0);
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
		log_debug("cannot accept lane %u from %s: %s", lane,
			  l->base.peer, strerror(errno));
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
