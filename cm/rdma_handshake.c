/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The rdma_cm steps that a connection's setup (cm/rdma_cm.c) and a lane's
 * join (cm/rdma_lane.c) both take: the next event on an event channel
 * within a time (rcm_next_event), an awaited one judged, the accept's
 * private data checked against the geometry asked for (rcm_expect), the
 * connect parameters around the private data (rcm_conn_param), a refusal
 * with a status in the private data (rcm_reject) and a lane's join refused
 * (cm_rdma_reject_join). Below both: it calls neither.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "cm/verbs_int.h"
#include "util/clock.h"
#include "util/log.h"

#define RETRY_COUNT 6 /* 7 means "forever" on rxe: peer loss never seen */
#define RNR_RETRY 0   /* credits make RNR impossible; if one happens, fail */

/*
 * Waits up to timeout_ms for the next event on ch. The caller acks *ev.
 * Returns 0, -ETIMEDOUT, or -errno.
 */
int rcm_next_event(struct rdma_event_channel *ch, int timeout_ms,
		   struct rdma_cm_event **ev)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int64_t left = (int64_t)(deadline - clock_now_ms());
		int rc;

		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, (int)left);
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

void rcm_conn_param(struct rdma_conn_param *p, const uint8_t *pd, uint8_t pdlen)
{
	memset(p, 0, sizeof(*p));
	p->private_data = pd;
	p->private_data_len = pdlen;
	p->retry_count = RETRY_COUNT;
	p->rnr_retry_count = RNR_RETRY;
	p->initiator_depth = 0; /* no RDMA READ in rdcp */
	p->responder_resources = 0;
}

int rcm_expect(struct vconn *v, enum rdma_cm_event_type want, int timeout_ms,
	       const char *what, bool active)
{
	/*
	 * A lane's join or accept (a rail's first join too): its caller
	 * warns once, with the cause, and goes on without the lane.
	 */
	enum log_level lvl = v->probe || v->parent ? LOG_DEBUG : LOG_ERR;
	struct rdma_cm_event *ev;
	int rc = rcm_next_event(v->ech, timeout_ms, &ev);

	if (rc == -ETIMEDOUT) {
		log_msg(lvl, "%s %s: timed out after %d ms", what, v->base.peer,
			timeout_ms);
		return rc;
	}
	if (rc) {
		log_msg(lvl, "%s %s: %s", what, v->base.peer, strerror(-rc));
		return rc;
	}
	if (ev->event == want) {
		if (want == RDMA_CM_EVENT_ESTABLISHED && active) {
			uint16_t ver, st;
			struct cm_geom g;

			rc = cm_pd_decode(ev->param.conn.private_data,
					  ev->param.conn.private_data_len, &ver,
					  &st, &g);
			if (rc || !cm_geom_valid(&g) ||
			    g.slots > v->base.geom.slots ||
			    g.chunk_size > v->base.geom.chunk_size ||
			    g.ctrl_size != v->base.geom.ctrl_size ||
			    g.ctrl_credits != v->base.geom.ctrl_credits) {
				log_msg(lvl,
					"%s %s: the receiver answered with "
					"unusable parameters (not an rdcp "
					"receiver of this version?)",
					what, v->base.peer);
				rc = -EPROTO;
			} else {
				v->base.geom = g;
			}
		}
		rdma_ack_cm_event(ev);
		return rc;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED: {
		uint16_t ver = 0, st = 0;
		struct cm_geom g;
		int prc = cm_pd_decode(ev->param.conn.private_data,
				       ev->param.conn.private_data_len, &ver,
				       &st, &g);

		if (prc == -EPROTONOSUPPORT) {
			log_msg(lvl,
				"%s %s: the receiver speaks rdcp protocol "
				"version %u, this rdcp speaks %u: install the "
				"same rdcp version on both hosts",
				what, v->base.peer, ver, cm_version());
			rc = -EPROTO;
		} else if (prc == 0) {
			log_msg(lvl, "%s %s: rejected: %s", what, v->base.peer,
				cm_pd_status_str(st));
			rc = st == PD_ST_BUSY	   ? -EBUSY
			     : st == PD_ST_REFUSED ? -EACCES
						   : -EPROTO;
		} else {
			log_msg(lvl,
				"%s %s: connection refused (is 'rdcp --listen' "
				"running there on this port?)",
				what, v->base.peer);
			rc = -ECONNREFUSED;
		}
		break;
	}
	case RDMA_CM_EVENT_ADDR_ERROR:
		log_msg(lvl,
			"%s %s: no RDMA device can reach this address (set up "
			"a device, or Soft-RoCE: rdma link add rxe0 type rxe "
			"netdev eth0)",
			what, v->base.peer);
		rc = -ENODEV;
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		log_msg(lvl, "%s %s: peer unreachable (%s)", what, v->base.peer,
			rdma_event_str(ev->event));
		rc = -EHOSTUNREACH;
		break;
	default:
		log_msg(lvl, "%s %s: unexpected %s (status %d)", what,
			v->base.peer, rdma_event_str(ev->event), ev->status);
		rc = -ECONNREFUSED;
		break;
	}
	rdma_ack_cm_event(ev);
	return rc;
}

void rcm_reject(struct rdma_cm_id *id, uint16_t status)
{
	uint8_t pd[PD_LEN];

	cm_pd_encode(pd, status, NULL);
	rdma_reject(id, pd, PD_LEN);
}

void cm_rdma_reject_join(struct cm_request *req)
{
	rcm_reject(req->id, PD_ST_REFUSED);
	drain_cm_events(req->ech);
	rdma_destroy_id(req->id);
	rdma_destroy_event_channel(req->ech);
	free(req);
}
