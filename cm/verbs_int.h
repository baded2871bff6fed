/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to the RDMA transport: the connection object that its files
 * share. Calls go one way (tests/layers/layers.py checks it): rdma_cm.c
 * (setup) -> verbs.c (resources and the cm_ops) -> rdma_lane.c (lanes
 * joined), rails.c, verbs_poll.c, verbs_lane.c -> verbs_res.c (QP,
 * teardown), rdma_handshake.c (rdma_cm steps), verbs_async.c.
 */
#ifndef RDCP_VERBS_INT_H
#define RDCP_VERBS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"

/* One RDMA connection; base first, so a struct cm_conn * is a vconn. */
struct vconn {
	struct cm_conn base;
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *scq;
	struct ibv_cq *rcq;
	bool qp_created;
	bool established;
	bool closed;	  /* DISCONNECTED (or worse) seen */
	bool closed_told; /* CM_EV_CLOSED handed out */
	bool first_err_logged;
	struct ibv_mr *tx_mr, *rx_mr, *ring_mr, *stage_mr;
	/*
	 * rx buffers 0..nrx_early-1 are registered (rx_mr) and posted at
	 * build; the rest, one per ring slot, only with the ring or staging
	 * (rx_late_mr), after the handshake: until a client authenticated,
	 * the receiver pins control buffers for its credits only.
	 */
	struct ibv_mr *rx_late_mr;
	unsigned int nrx_early;
	uint64_t remote_addr, remote_hdr_addr; /* the peer's ring */
	uint32_t remote_rkey;
	bool inline_hdr; /* slot headers go inline (max_inline_data) */
	unsigned int unacked_events;
	unsigned int idle_polls;
	bool flush_seen; /* a flushed completion: the QP is in error */
	/*
	 * A fatal asynchronous event or a removed device (verbs_async.c):
	 * the status (cm.h conventions; written once, under the async lock,
	 * after async_why; read by the owner with acquire) and its words.
	 */
	int async_err;
	char async_why[200];
	bool async_told; /* reported by v_poll */
	bool async_listed;
	struct vconn *async_next;
	/*
	 * Lanes (--streams): on lane 0 (this vconn, which owns the PD, the
	 * completion channel, the buffers and the memory regions),
	 * lane[1..nlanes-1] once joined, each a vconn of its own cm_id, QP
	 * and CQs (on the same channel) and nothing else; on those, parent
	 * is lane 0 and idx their index. wf orders writes across lanes.
	 */
	unsigned int nlanes; /* 0 or 1: lane 0 only */
	unsigned int vec_base; /* lane k's CQs: vector (vec_base + k) % n */
	struct vconn *lane[CM_LANES_MAX];
	struct vconn *parent;
	unsigned int idx;
	struct cm_wfifo wf;
	uint32_t stage_lkey;
	/*
	 * Rails (cm/rails.c): on lane 0, nrails (0 or 1: one), the device
	 * lanes k % nrails == r must be on (rail_ctx[r]: the receiver's from
	 * local_rails, the client's from lane r once built), the address
	 * they join (client) and the peer's rkey for their writes. On a
	 * lane, rail: the vconn that holds its device's PD, completion
	 * channel and memory regions (lane 0, or the first lane on that
	 * device, which then has pd and cch of its own).
	 */
	unsigned int nrails;
	struct ibv_context *rail_ctx[CM_LANES_MAX];
	struct cm_rail rail_addr[CM_LANES_MAX];
	uint32_t remote_rkeys[CM_LANES_MAX];
	const char *rail_devices; /* client: --device a,b, NULL: any */
	struct vconn *rail;
	/*
	 * On lane 0: lane_rail[k], the rail lane k is on (k % nrails, or 0
	 * for a fallback join), set before the lane is built; rail_dead[r]:
	 * the client dropped rail r (its first join failed, or its link is
	 * not lane 0's rate). On any lane (and lane 0): wr_rkey, the peer's
	 * rkey its writes use (its rail's), set by stage_create so the
	 * per-slot post needs no lookup. probe: a rail's first join, whose
	 * failures rcm_expect logs at debug (the caller warns once).
	 */
	uint8_t lane_rail[CM_LANES_MAX];
	bool rail_dead[CM_LANES_MAX];
	uint32_t wr_rkey;
	bool probe;
};

/*
 * cm/verbs_lane.c: a lane's verbs resources and its part of the ops.
 * vlane_build makes l (allocated by the caller, l->id with its device,
 * which must be its rail's: vrail_pick) lane idx of parent: CQs on its
 * rail's channel and completion vector (parent's vec_base + idx) %
 * num_comp_vectors, a QP on
 * its rail's PD sized for the lane (cm.h), its zero-length receives posted.
 * 0 or -errno, logged; the caller frees l with vlane_free (verbs_res.c;
 * idempotent on NULL) in every case. vlane_arm arms the lanes' CQs;
 * vlane_ack says whether cq is a lane's (its event to ack).
 */
/* The rate of ctx's port in Gb/s (active speed x width), 0 unknown. */
unsigned int vconn_link_gbps(struct ibv_context *ctx, uint8_t port);
/*
 * The same from ibv_port_attr's speed (active_speed, or active_speed_ex
 * where the headers have it: XDR's 0x100 does not fit in 8 bits) and
 * width values, 0 unknown.
 */
unsigned int vconn_rate_gbps(uint32_t speed, uint8_t width);
int vlane_build(struct vconn *parent, unsigned int idx, struct vconn *l)
	__attribute__((warn_unused_result));
int vlane_arm(struct vconn *v);
bool vlane_ack(struct vconn *v, struct ibv_cq *cq);
/*
 * cm/verbs_poll.c: the ops' poll (cm.h) and the CM events that matter once
 * connected (DISCONNECTED of lane 0, a removed device), read without
 * blocking, for verbs.c's wait. vlane_poll polls every lane's CQs, lane 0
 * first, into ev (at most max) with the writes done in order.
 */
int vconn_poll(struct cm_conn *c, struct cm_event *ev, int max);
void vconn_check_cm(struct vconn *v);
int vlane_poll(struct vconn *v, struct cm_event *ev, int max);

/*
 * verbs_poll.c's CQ poll and verbs_lane.c's receive post, for a lane: poll cq of
 * lane l (parent v) into ev (at most max, write completions of lanes
 * folded into v->wf); post the zero-length receive rxbuf on l.
 */
int vconn_poll_cq(struct vconn *v, struct vconn *l, struct ibv_cq *cq,
		  struct cm_event *ev, int max);
/* Lane l's receive CQ with 3/4 of max, its send CQ, its receive CQ again. */
int vconn_poll_pair(struct vconn *v, struct vconn *l, struct cm_event *ev,
		    int max);
int vlane_post_recv0(struct vconn *l, uint64_t wr_id);

/* cm/rails.c: the rails calls of verbs' struct cm_ops (cm.h). */
int vconn_local_rails(struct cm_conn *c, const char *devices,
		      struct cm_rail *out, unsigned int max);
int vconn_set_rails(struct cm_conn *c, unsigned int n,
		    const struct cm_rail *addr, const char *devices);
/*
 * The device and PD lane idx (on ctx) of parent is to use: -EXDEV (logged)
 * when ctx is not the device of its rail; else 0 with l->rail set (to a
 * lane of parent on ctx already, or to l itself, its PD and channel then
 * allocated here).
 */
int vrail_pick(struct vconn *parent, unsigned int idx, struct vconn *l);

/*
 * The rule that picks rails (cm/rails.c vrail_select; doc/rdcp.1
 * --device): candidates in getifaddrs order, c[0] lane 0's device (always
 * rail 0). A device is a rail when it is named by --device (or none was),
 * was not seen before (one rail per device, whatever its addresses), its
 * link rate is lane 0's (active speed x width in Gb/s, equal; 0, unknown,
 * only matches 0) and fewer than max rails were taken. why[i] says what
 * became of c[i]; returns the rails taken (>= 1), their indexes in
 * out[0..R-1].
 */
struct vrail_cand {
	const char *name;  /* device name, for the log */
	const void *dev;   /* its identity (struct ibv_context *) */
	unsigned int gbps; /* link rate, 0 unknown */
	bool listed;	   /* named by --device, or no --device list */
};
enum vrail_why {
	VRAIL_TAKEN,
	VRAIL_UNLISTED, /* not one of --device's */
	VRAIL_SEEN,	/* a device already considered */
	VRAIL_RATE,	/* its link rate is not lane 0's */
	VRAIL_FULL,	/* max rails taken already */
};
unsigned int vrail_select(const struct vrail_cand *c, unsigned int n,
			  unsigned int max, enum vrail_why *why,
			  unsigned int *out);
/*
 * The link rate rails are compared by: vconn_link_gbps, or in a test-hooks
 * build RDCP_TEST_RAIL_GBPS ("rxe1=40,rxe2=0") for the devices it names.
 */
unsigned int vrail_gbps(struct ibv_context *ctx, uint8_t port);

/*
 * cm/rdma_lane.c: the lane calls of verbs' struct cm_ops (cm.h):
 * set_lanes, join (client) and accept_lane (receiver), with the rdma_cm
 * steps of rdma_cm.c below.
 */
int vconn_set_lanes(struct cm_conn *c, unsigned int n);
int vconn_keep_lanes(struct cm_conn *c, unsigned int up);
int vconn_join(struct cm_conn *c, const struct cm_join *j,
	       const struct cm_timeouts *to);
int vconn_accept_lane(struct cm_conn *c, struct cm_request *req,
		      unsigned int lane, const struct cm_timeouts *to);

/*
 * cm/rdma_handshake.c: the rdma_cm steps of rdma_cm.c that the lanes take
 * too. rcm_expect: the next event on v->ech, judged as a connect's
 * (active: the accept's private data checked against v->base.geom)
 * within timeout_ms, logged as "what peer: why". rcm_conn_param: the
 * connect parameters around private data pd of pdlen bytes.
 * rcm_next_event: waits up to timeout_ms for the next event on ch (the
 * caller acks *ev); 0, -ETIMEDOUT or -errno. rcm_reject: rejects id with
 * status in the private data.
 */
int rcm_expect(struct vconn *v, enum rdma_cm_event_type want, int timeout_ms,
	       const char *what, bool active);
void rcm_conn_param(struct rdma_conn_param *p, const uint8_t *pd,
		    uint8_t pdlen);
int rcm_next_event(struct rdma_event_channel *ch, int timeout_ms,
		   struct rdma_cm_event **ev);
void rcm_reject(struct rdma_cm_id *id, uint16_t status);

/* Drains CM events left on the channel so rdma_destroy_id cannot block. */
static inline void drain_cm_events(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	while (ch && rdma_get_cm_event(ch, &ev) == 0)
		rdma_ack_cm_event(ev);
}

/*
 * Sets v's ops and device name and builds the PD, completion channel,
 * CQs, QP and control buffers on v->id (which has its device: route
 * resolved, or a connect request taken), sized from v->base.geom, with
 * the rx buffers for the control credits registered and posted (the rest
 * come with ring_create or stage_create). Returns 0 or -errno, logged; on
 * failure the caller runs vconn_teardown() (and owns v).
 */
int vconn_build(struct vconn *v) __attribute__((warn_unused_result));
/*
 * cm/verbs_res.c: what a connection and its lanes make and free alike.
 * v's RC queue pair on v->id with the CQs v->scq and v->rcq in pd:
 * sdepth send and rdepth receive WRs of one SGE each, the slot headers
 * inline when inline_hdr and the device takes them so, else by DMA (sets
 * v->inline_hdr to what it got). Returns 0 or -errno (not logged).
 */
int vconn_create_qp(struct vconn *v, struct ibv_pd *pd, unsigned int sdepth,
		    unsigned int rdepth, bool inline_hdr)
	__attribute__((warn_unused_result));

/*
 * cm/verbs_async.c: v's share of its device's asynchronous events.
 * vasync_add (once its QP exists: returns 0 or -errno, logged) makes the
 * device's async fd non-blocking and lists v; vasync_del (idempotent)
 * unlists it before its QP and CQs go. vasync_read reads, acks and routes
 * every event pending on ctx; never blocks. vasync_set records a cause of
 * failure on v itself (the first one stays).
 */
int vasync_add(struct vconn *v) __attribute__((warn_unused_result));
void vasync_del(struct vconn *v);
void vasync_read(struct ibv_context *ctx);
void vasync_set(struct vconn *v, int status, const char *why);
/*
 * Sets (or clears, l NULL) lane idx of v under the lock vasync_read routes
 * events under, so that an event on a lane's QP or CQ, read by any
 * session's thread, finds its connection.
 */
void vasync_lane(struct vconn *v, unsigned int idx, struct vconn *l);

/*
 * cm/verbs_res.c: disconnects (if established) and frees everything v
 * holds, its lanes first, v->id and v->ech included, in the order of
 * STYLE.md; accepts a partly built v, keeps going past failures and
 * returns the first error (-errno, logged at debug level only). v itself
 * stays the caller's to free; vlane_free frees a lane whole.
 */
int vconn_teardown(struct vconn *v);
void vlane_free(struct vconn *l);

#endif
