/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA transport's completions (verbs_int.h): polling a connection's
 * CQs, every lane's with --streams, into struct cm_event, what a failed
 * completion means (the first real cause logged once and kept in
 * cm_conn.err), the CM events that matter once connected, and a fatal
 * asynchronous event reported as CLOSED. verbs.c posts, arms and waits.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "cm/verbs_int.h"
#include "util/log.h"

#define CM_CHECK_EVERY 256 /* empty polls between CM channel checks */

static struct vconn *to_v(struct cm_conn *c)
{
	return (struct vconn *)c;
}

/*
 * What a failed completion means for the user, and the errno it becomes
 * (the status conventions of cm.h). The first one that is not a flush is
 * logged, with ibv_wc_status_str(), and kept in c->err. recv: it came on
 * a receive CQ (wc->opcode is undefined on an error completion, so the CQ
 * says which queue failed).
 */
static int wc_error(struct vconn *v, const struct ibv_wc *wc, bool recv)
{
	const char *what;
	int err;

	switch (wc->status) {
	case IBV_WC_WR_FLUSH_ERR:
		/* Secondary: the QP already failed or was disconnected. */
		log_debug("flushed work request %llu",
			  (unsigned long long)wc->wr_id);
		return -ECONNRESET;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
		what = "the peer stopped answering (retry exceeded): its host "
		       "is down or the link is cut";
		err = -EHOSTUNREACH;
		break;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		what = "the peer had no receive posted (RNR retry exceeded): "
		       "it broke the credit protocol";
		err = -EPROTO;
		break;
	case IBV_WC_REM_ACCESS_ERR:
		/*
		 * Seen when the peer's process dies mid-write (kill -9 on
		 * rxe): its ring's MR goes before its QP. A peer gone, not a
		 * protocol violation (a bad rkey of ours would fail the
		 * first write of every session, which the suite would see).
		 */
		what = "the peer refused the access (remote access error): it "
		       "went away and took its ring with it";
		err = -ECONNABORTED;
		break;
	case IBV_WC_LOC_LEN_ERR:
		if (recv) {
			what = "a message was longer than the receive buffer";
			err = -EPROTO;
			break;
		}
		/* A send of ours longer than the QP allows: ours. */
		/* fall through */
	case IBV_WC_LOC_QP_OP_ERR:
	case IBV_WC_LOC_EEC_OP_ERR:
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_LOC_RDD_VIOL_ERR:
	case IBV_WC_MW_BIND_ERR:
		/* Not the peer: a work request of ours, or our device. */
		what = "a local fault (a bug in rdcp or the local RDMA "
		       "device), not the peer";
		err = -EFAULT;
		break;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
		what = "the peer rejected the operation";
		err = -EPROTO;
		break;
	default:
		what = "transfer aborted";
		err = -EIO;
		break;
	}
	if (!v->first_err_logged) {
		v->first_err_logged = true;
		snprintf(v->base.err, sizeof(v->base.err),
			 "RDMA %s %s failed: %s (status %d): %s",
			 recv ? "receive from" : "send or write to",
			 v->base.peer, ibv_wc_status_str(wc->status),
			 wc->status, what);
		log_err("%s", v->base.err);
	}
	return err;
}

/* Reads pending CM events; only DISCONNECTED and errors matter now. */
void vconn_check_cm(struct vconn *v)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(v->ech, &ev) == 0) {
		enum rdma_cm_event_type t = ev->event;
		struct rdma_cm_id *id = ev->id;

		rdma_ack_cm_event(ev);
		switch (t) {
		case RDMA_CM_EVENT_DEVICE_REMOVAL: {
			char why[sizeof(v->async_why)];

			/* The session ends and tears down: the removal
			 * waits for its cm_id to be destroyed. */
			snprintf(why, sizeof(why),
				 "RDMA device %s was removed: the connection "
				 "to %s is lost",
				 v->base.dev, v->base.peer);
			vasync_set(v, -ENODEV, why);
			v->closed = true;
			break;
		}
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			log_debug("%s: %s", v->base.peer, rdma_event_str(t));
			/*
			 * Lane 0's only: the peer ends its lanes first and
			 * its last words (BYE) come on lane 0, maybe after;
			 * a lane that fails says so in its completions.
			 */
			if (id == v->id)
				v->closed = true;
			break;
		default:
			log_debug("%s: ignoring %s", v->base.peer,
				  rdma_event_str(t));
			break;
		}
	}
}

/*
 * Polls cq, lane l's (v itself for lane 0), into ev. With lanes, a
 * write's completion only marks it done in v->wf (handed out in order by
 * v_poll), so fewer events than completions may come back.
 */
int vconn_poll_cq(struct vconn *v, struct vconn *l, struct ibv_cq *cq,
		  struct cm_event *ev, int max)
{
	struct ibv_wc wc[32];
	int n, i, k = 0;

	if (max > 32)
		max = 32;
	n = ibv_poll_cq(cq, max, wc);
	if (n < 0) {
		log_err("cannot poll completion queue: %s", strerror(-n));
		return -EIO;
	}
	for (i = 0; i < n; i++) {
		struct cm_event *e = &ev[k];

		if (wc[i].status == IBV_WC_SUCCESS && v->nlanes > 1 &&
		    cq == l->scq && wc[i].opcode == IBV_WC_RDMA_WRITE &&
		    cm_wf_is(wc[i].wr_id)) {
			if (cm_wfifo_done(&v->wf, wc[i].wr_id)) {
				log_err("completion of a write never posted");
				return -EIO;
			}
			continue;
		}
		k++;
		memset(e, 0, sizeof(*e));
		e->id = wc[i].wr_id;
		if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
			v->flush_seen = true;
		if (wc[i].status != IBV_WC_SUCCESS) {
			e->status = wc_error(v, &wc[i], cq == l->rcq);
			e->type = cq == l->rcq ? CM_EV_RECV : CM_EV_SEND_DONE;
			continue;
		}
		switch (wc[i].opcode) {
		case IBV_WC_RECV:
			e->type = CM_EV_RECV;
			e->len = wc[i].byte_len;
			break;
		case IBV_WC_RECV_RDMA_WITH_IMM:
			e->type = CM_EV_DATA;
			e->len = wc[i].byte_len;
			e->imm = be32toh(wc[i].imm_data);
			break;
		default:
			e->type = CM_EV_SEND_DONE;
			break;
		}
	}
	return k;
}

/*
 * A fatal asynchronous event or a removed device, reported once, as a
 * CLOSED carrying the cause; logged unless a completion's cause was.
 */
static int async_report(struct vconn *v, struct cm_event *ev, int max)
{
	int err = __atomic_load_n(&v->async_err, __ATOMIC_ACQUIRE);

	if (!err || v->async_told || max <= 0)
		return 0;
	v->async_told = true;
	v->closed_told = true;
	if (!v->base.err[0]) {
		snprintf(v->base.err, sizeof(v->base.err), "%s", v->async_why);
		log_err("%s", v->base.err);
	} else {
		log_debug("%s", v->async_why);
	}
	memset(ev, 0, sizeof(*ev));
	ev->type = CM_EV_CLOSED;
	ev->status = err;
	return 1;
}

/*
 * A fatal asynchronous event first. Then the receive CQ, but never with
 * the whole budget: a quarter is kept for the send CQ, so that a flood of
 * receives (data, or a QP in error flushing every posted receive) cannot
 * starve it; what the send CQ leaves goes to the receive CQ again; with
 * lanes, so for each lane in turn, lane 0 first (vlane_poll). With all
 * empty, the CM channel and the async fd are read every CM_CHECK_EVERY
 * calls, or at once after a flush (the cause may be there).
 */
int vconn_poll_pair(struct vconn *v, struct vconn *l, struct cm_event *ev,
		    int max)
{
	int n, m, k;

	n = vconn_poll_cq(v, l, l->rcq, ev, max - max / 4);
	if (n < 0)
		return n;
	m = vconn_poll_cq(v, l, l->scq, ev + n, max - n);
	if (m < 0)
		return m;
	n += m;
	if (n < max && n - m == max - max / 4) {
		k = vconn_poll_cq(v, l, l->rcq, ev + n, max - n);
		if (k < 0)
			return k;
		n += k;
	}
	return n;
}

int vlane_poll(struct vconn *v, struct cm_event *ev, int max)
{
	int n = cm_wfifo_emit(&v->wf, ev, max);

	for (unsigned int i = 0; i < v->nlanes && n < max; i++) {
		struct vconn *l = i ? v->lane[i] : v;
		int k;

		if (!l)
			continue;
		k = vconn_poll_pair(v, l, ev + n, max - n);
		if (k < 0)
			return k;
		n += k;
	}
	return n + cm_wfifo_emit(&v->wf, ev + n, max - n);
}

int vconn_poll(struct cm_conn *c, struct cm_event *ev, int max)
{
	struct vconn *v = to_v(c);
	int n;

	if (async_report(v, ev, max))
		return 1;
	n = v->nlanes > 1 ? vlane_poll(v, ev, max)
			  : vconn_poll_pair(v, v, ev, max);
	if (n < 0)
		return n;
	if (n) {
		v->idle_polls = 0;
		return n;
	}
	if (v->flush_seen || ++v->idle_polls >= CM_CHECK_EVERY) {
		v->idle_polls = 0;
		vconn_check_cm(v);
		vasync_read(v->id->verbs);
		/*
		 * Every rail's device too: busy polling never sleeps in
		 * v_wait, the one other place their async fds are read.
		 */
		for (unsigned int i = 1; i < v->nlanes; i++) {
			struct vconn *l = v->lane[i];

			if (l && l->rail == l && l->id && l->id->verbs)
				vasync_read(l->id->verbs);
		}
		if (async_report(v, ev, max))
			return 1;
	}
	if (v->closed && !v->closed_told && max > 0) {
		v->closed_told = true;
		memset(ev, 0, sizeof(*ev));
		ev->type = CM_EV_CLOSED;
		ev->status = -ECONNRESET;
		return 1;
	}
	return 0;
}
