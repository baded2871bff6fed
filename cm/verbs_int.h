/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to the RDMA transport: the connection object that cm/verbs.c
 * (verbs resources and the cm_ops) and cm/rdma_cm.c (connection setup)
 * share. Calls go one way: rdma_cm.c builds and tears down a connection
 * through the two functions below; verbs.c never calls into rdma_cm.c.
 */
#ifndef RDCP_VERBS_INT_H
#define RDCP_VERBS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

#include "cm/cm.h"

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
};

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
 * Disconnects (if established) and frees everything v holds, v->id and
 * v->ech included, in the order of STYLE.md; accepts a partly built v,
 * keeps going past failures and returns the first error (-errno, logged
 * at debug level only). v itself stays the caller's to free.
 */
int vconn_teardown(struct vconn *v);

#endif
