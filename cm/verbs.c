/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA transport: rdma_cm connection setup and the verbs resources of
 * one connection, behind the struct cm_ops seam of cm.h.
 *
 * One connection is one RC QP with a send CQ and a receive CQ sharing one
 * completion channel, and four memory regions: control tx and rx buffers
 * (local), the ring (remote write, sink only) and the staging buffers
 * (local, source only). rdma_cm drives the QP through INIT/RTR/RTS.
 *
 * Conventions normalised here, once: verbs constructors return NULL and set
 * errno; ibv_* actions return the error itself; rdma_* return -1 and set
 * errno. Every function below returns 0 or a negative errno and logs the
 * root cause where it is known. Every wait is bounded.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/units.h"

#define RETRY_COUNT 6 /* 7 means "forever" on rxe: peer loss never seen */
#define RNR_RETRY 0   /* credits make RNR impossible; if one happens, fail */
#define CQ_ACK_BATCH 16
#define CM_CHECK_EVERY 256 /* empty polls between CM channel checks */

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
	size_t ring_len, stage_len;
	uint64_t remote_addr;
	uint32_t remote_rkey;
	unsigned int unacked_events;
	unsigned int idle_polls;
};

struct cm_rdma_listener {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
};

static struct vconn *to_v(struct cm_conn *c)
{
	return (struct vconn *)c;
}

/*
 * Waits up to timeout_ms for the next event on ch. The caller acks *ev.
 * Returns 0, -ETIMEDOUT, or -errno.
 */
static int next_event(struct rdma_event_channel *ch, int timeout_ms,
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

/* Drains CM events left on the channel so rdma_destroy_id cannot block. */
static void drain_cm_events(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	while (ch && rdma_get_cm_event(ch, &ev) == 0)
		rdma_ack_cm_event(ev);
}

/*
 * Mirrors vconn_build in reverse; accepts a partly built connection, keeps
 * going past failures and returns the first error.
 */
static int vconn_teardown(struct vconn *v)
{
	struct ibv_wc wc[16];
	int first = 0, rc;

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
	if ((rc = destroy_mr(&v->ring_mr)) && !first)
		first = rc;
	if ((rc = destroy_mr(&v->stage_mr)) && !first)
		first = rc;
	free_buf(&v->base.tx, (size_t)v->base.ntx * v->base.geom.ctrl_size);
	free_buf(&v->base.rx, (size_t)v->base.nrx * v->base.geom.ctrl_size);
	free_buf(&v->base.ring, v->ring_len);
	free_buf(&v->base.stage, v->stage_len);
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

/* Allocates len bytes page-aligned and registers them. */
static int reg_buf(struct vconn *v, const char *what, size_t len, int access,
		   uint8_t **buf, struct ibv_mr **mr)
{
	char sz[32], hint[200];
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
	*mr = ibv_reg_mr(v->pd, *buf, len, access);
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

static int v_ring_create(struct cm_conn *c, struct cm_ring_desc *desc)
{
	struct vconn *v = to_v(c);
	int rc;

	v->ring_len = (size_t)c->geom.slots * c->geom.slot_size;
	rc = reg_buf(v, "ring", v->ring_len,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &c->ring,
		     &v->ring_mr);
	if (rc)
		return rc;
	desc->addr = (uintptr_t)c->ring;
	desc->rkey = v->ring_mr->rkey;
	return 0;
}

static int v_stage_create(struct cm_conn *c, const struct cm_ring_desc *peer)
{
	struct vconn *v = to_v(c);
	int rc;

	v->stage_len = (size_t)c->geom.slots * c->geom.slot_size;
	rc = reg_buf(v, "staging buffers", v->stage_len, IBV_ACCESS_LOCAL_WRITE,
		     &c->stage, &v->stage_mr);
	if (rc)
		return rc;
	v->remote_addr = peer->addr;
	v->remote_rkey = peer->rkey;
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
	struct ibv_sge sge = {
		.addr = (uintptr_t)cm_rx(c, rxbuf),
		.length = c->geom.ctrl_size,
		.lkey = v->rx_mr->lkey,
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

static int v_post_write(struct cm_conn *c, unsigned int stage, uint32_t len,
			unsigned int slot, uint32_t imm, bool signaled,
			uint64_t wr_id)
{
	struct vconn *v = to_v(c);
	struct ibv_sge sge = {
		.addr = (uintptr_t)cm_stage(c, stage),
		.length = len,
		.lkey = v->stage_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = signaled ? IBV_SEND_SIGNALED : 0,
		.imm_data = htobe32(imm),
		.wr.rdma.remote_addr =
			v->remote_addr + (uint64_t)slot * c->geom.slot_size,
		.wr.rdma.rkey = v->remote_rkey,
	}, *bad;
	int rc = ibv_post_send(v->id->qp, &wr, &bad);

	if (rc)
		log_err("cannot post RDMA write to %s: %s", c->peer,
			strerror(rc));
	return -rc;
}

/* What a failed completion means for the user, and the errno it becomes. */
static int wc_error(struct vconn *v, const struct ibv_wc *wc)
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
		what = "peer unreachable: its host or the link is down";
		err = -EHOSTUNREACH;
		break;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		what = "peer had no receive posted: credit protocol violated";
		err = -EPROTO;
		break;
	case IBV_WC_REM_ACCESS_ERR:
		what = "remote access refused: protocol bug or stale rkey";
		err = -EPROTO;
		break;
	case IBV_WC_LOC_LEN_ERR:
		what = "message longer than the receive buffer";
		err = -EPROTO;
		break;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
		what = "peer rejected the operation";
		err = -EPROTO;
		break;
	default:
		what = "transfer aborted";
		err = -EIO;
		break;
	}
	if (!v->first_err_logged) {
		v->first_err_logged = true;
		log_err("RDMA %s to %s failed: %s (status %d): %s",
			wc->opcode & IBV_WC_RECV ? "receive" : "send",
			v->base.peer, ibv_wc_status_str(wc->status), wc->status,
			what);
	}
	return err;
}

/* Reads pending CM events; only DISCONNECTED and errors matter now. */
static void check_cm(struct vconn *v)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(v->ech, &ev) == 0) {
		enum rdma_cm_event_type t = ev->event;

		rdma_ack_cm_event(ev);
		switch (t) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			log_debug("%s: %s", v->base.peer, rdma_event_str(t));
			v->closed = true;
			break;
		default:
			log_debug("%s: ignoring %s", v->base.peer,
				  rdma_event_str(t));
			break;
		}
	}
}

static int poll_one_cq(struct vconn *v, struct ibv_cq *cq, struct cm_event *ev,
		       int max)
{
	struct ibv_wc wc[32];
	int n, i;

	if (max > 32)
		max = 32;
	n = ibv_poll_cq(cq, max, wc);
	if (n < 0) {
		log_err("cannot poll completion queue: %s", strerror(-n));
		return -EIO;
	}
	for (i = 0; i < n; i++) {
		struct cm_event *e = &ev[i];

		memset(e, 0, sizeof(*e));
		e->id = wc[i].wr_id;
		if (wc[i].status != IBV_WC_SUCCESS) {
			e->status = wc_error(v, &wc[i]);
			e->type = cq == v->rcq ? CM_EV_RECV : CM_EV_SEND_DONE;
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
	return n;
}

static int v_poll(struct cm_conn *c, struct cm_event *ev, int max)
{
	struct vconn *v = to_v(c);
	int n, m;

	n = poll_one_cq(v, v->rcq, ev, max);
	if (n < 0)
		return n;
	m = poll_one_cq(v, v->scq, ev + n, max - n);
	if (m < 0)
		return m;
	n += m;
	if (n) {
		v->idle_polls = 0;
		return n;
	}
	if (++v->idle_polls >= CM_CHECK_EVERY) {
		v->idle_polls = 0;
		check_cm(v);
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

static int v_arm(struct cm_conn *c)
{
	struct vconn *v = to_v(c);
	int rc = ibv_req_notify_cq(v->rcq, 0);

	if (!rc)
		rc = ibv_req_notify_cq(v->scq, 0);
	if (rc)
		log_err("cannot arm completion queue: %s", strerror(rc));
	return -rc;
}

static int v_wait(struct cm_conn *c, int extra_fd, int timeout_ms)
{
	struct vconn *v = to_v(c);
	struct pollfd pfd[3] = {
		{ .fd = v->cch->fd, .events = POLLIN },
		{ .fd = v->ech->fd, .events = POLLIN },
		{ .fd = extra_fd, .events = POLLIN },
	};
	struct ibv_cq *cq;
	void *ctx;
	int rc;

	rc = poll(pfd, extra_fd >= 0 ? 3 : 2, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	if (pfd[1].revents)
		check_cm(v);
	if (pfd[0].revents) {
		while (ibv_get_cq_event(v->cch, &cq, &ctx) == 0) {
			/* Ack in batches; both CQs are acked at teardown. */
			if (cq == v->rcq &&
			    ++v->unacked_events >= CQ_ACK_BATCH) {
				ibv_ack_cq_events(v->rcq, v->unacked_events);
				v->unacked_events = 0;
			} else if (cq == v->scq) {
				ibv_ack_cq_events(v->scq, 1);
			}
		}
	}
	return 0;
}

static const struct cm_ops verbs_ops = {
	.post_send = v_post_send,
	.post_recv = v_post_recv,
	.post_write = v_post_write,
	.poll = v_poll,
	.arm = v_arm,
	.wait = v_wait,
	.ring_create = v_ring_create,
	.stage_create = v_stage_create,
	.destroy = v_destroy,
};

/* ---- resources ---- */

/*
 * PD, completion channel, CQs, QP and the control buffers of one cm_id,
 * with every rx buffer posted. On failure the caller runs vconn_teardown.
 */
static int vconn_build(struct vconn *v)
{
	struct cm_conn *c = &v->base;
	struct ibv_qp_init_attr qpa = { 0 };
	unsigned int depth = (unsigned int)c->geom.slots + c->geom.ctrl_credits;
	int rc;

	c->ops = &verbs_ops;
	c->transport = "rdma";
	snprintf(c->dev, sizeof(c->dev), "%s",
		 ibv_get_device_name(v->id->verbs->device));
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
	/* Every send WR may complete (selective signalling only lowers it). */
	v->scq = ibv_create_cq(v->id->verbs, (int)depth, v, v->cch, 0);
	v->rcq = v->scq ? ibv_create_cq(v->id->verbs, (int)depth, v, v->cch, 0)
			: NULL;
	if (!v->scq || !v->rcq) {
		log_err("cannot create completion queue of %u entries on %s: "
			"%s",
			depth, c->dev, strerror(errno));
		return -errno;
	}
	qpa.send_cq = v->scq;
	qpa.recv_cq = v->rcq;
	qpa.qp_type = IBV_QPT_RC;
	qpa.cap.max_send_wr = depth;
	qpa.cap.max_recv_wr = depth;
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	qpa.sq_sig_all = 0;
	if (rdma_create_qp(v->id, v->pd, &qpa)) {
		log_err("cannot create queue pair (%u send, %u receive) on %s: "
			"%s",
			depth, depth, c->dev, strerror(errno));
		return -errno;
	}
	v->qp_created = true;
	c->ntx = c->geom.ctrl_credits + 1u;
	c->nrx = depth;
	rc = reg_buf(v, "control send buffers",
		     (size_t)c->ntx * c->geom.ctrl_size, IBV_ACCESS_LOCAL_WRITE,
		     &c->tx, &v->tx_mr);
	if (rc)
		return rc;
	rc = reg_buf(v, "control receive buffers",
		     (size_t)c->nrx * c->geom.ctrl_size, IBV_ACCESS_LOCAL_WRITE,
		     &c->rx, &v->rx_mr);
	if (rc)
		return rc;
	for (unsigned int i = 0; i < c->nrx; i++) {
		rc = v_post_recv(c, i);
		if (rc)
			return rc;
	}
	return 0;
}

static void conn_param_init(struct rdma_conn_param *p, const uint8_t *pd)
{
	memset(p, 0, sizeof(*p));
	p->private_data = pd;
	p->private_data_len = PD_LEN;
	p->retry_count = RETRY_COUNT;
	p->rnr_retry_count = RNR_RETRY;
	p->initiator_depth = 0; /* no RDMA READ in rdcp */
	p->responder_resources = 0;
}

/* ---- --device: pin the RDMA device through the source address ---- */

/*
 * rdma_cm picks the device from the addresses; to use a given device,
 * resolve from an address of one of its netdevs (the GID table names them
 * for RoCE; sysfs for IPoIB). Fills out with such an address of family
 * (AF_UNSPEC: any), port 0. Returns 0, or -ENODEV with why filled.
 */
static int device_addr(const char *dev, int family,
		       struct sockaddr_storage *out, char *why, size_t whysz)
{
	unsigned int ifidx[64];
	int nif = 0, n = 0, rc = -ENODEV;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	struct ifaddrs *ifa = NULL;
	char have[256] = "";

	for (int i = 0; list && i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		if (!strcmp(name, dev))
			ctx = ibv_open_device(list[i]);
		snprintf(have + strlen(have), sizeof(have) - strlen(have),
			 "%s%s", have[0] ? ", " : "", name);
	}
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		snprintf(why, whysz, "no RDMA device named '%s' here (%s%s)",
			 dev, have[0] ? "have: " : "none at all", have);
		return -ENODEV;
	}
	{
		struct ibv_device_attr da;

		if (ibv_query_device(ctx, &da) == 0)
			for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
				struct ibv_port_attr pa;

				if (ibv_query_port(ctx, p, &pa))
					continue;
				for (int g = 0; g < pa.gid_tbl_len && nif < 64;
				     g++) {
					struct ibv_gid_entry e;

					if (!ibv_query_gid_ex(ctx, p,
							      (uint32_t)g, &e,
							      0) &&
					    e.ndev_ifindex)
						ifidx[nif++] = e.ndev_ifindex;
				}
			}
	}
	ibv_close_device(ctx);
	if (getifaddrs(&ifa) == 0) {
		for (struct ifaddrs *a = ifa; a && rc; a = a->ifa_next) {
			unsigned int idx;
			char sysfs[300];

			if (!a->ifa_addr ||
			    (a->ifa_addr->sa_family != AF_INET &&
			     a->ifa_addr->sa_family != AF_INET6) ||
			    (family != AF_UNSPEC &&
			     a->ifa_addr->sa_family != family))
				continue;
			idx = if_nametoindex(a->ifa_name);
			snprintf(sysfs, sizeof(sysfs),
				 "/sys/class/infiniband/%s/device/net/%s", dev,
				 a->ifa_name);
			for (int i = 0; i < nif && rc; i++)
				if (ifidx[i] == idx)
					rc = 0;
			if (rc && access(sysfs, F_OK) == 0)
				rc = 0;
			if (!rc) {
				memset(out, 0, sizeof(*out));
				memcpy(out, a->ifa_addr,
				       a->ifa_addr->sa_family == AF_INET
					       ? sizeof(struct sockaddr_in)
					       : sizeof(struct sockaddr_in6));
			}
		}
		freeifaddrs(ifa);
	}
	if (rc)
		snprintf(why, whysz,
			 "RDMA device '%s' has no %saddress on its network "
			 "interface (give it one: ip addr add ADDR dev NETDEV)",
			 dev,
			 family == AF_INET6  ? "IPv6 "
			 : family == AF_INET ? "IPv4 "
					     : "");
	return rc;
}

/*
 * --gid-index: the IP address held in GID gid of dev (the first port that
 * has such an index), so that rdma_cm resolves from it and uses that GID.
 */
static int gid_addr(const char *dev, int gid, struct sockaddr_storage *out,
		    uint8_t raw[16], char *why, size_t whysz)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0,	0,
					      0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t zero[16];
	int n = 0, rc = -ENODEV;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	struct ibv_device_attr da;
	struct ibv_gid_entry e;

	for (int i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		snprintf(why, whysz, "no RDMA device named '%s' here", dev);
		return -ENODEV;
	}
	snprintf(why, whysz,
		 "'%s' has no GID %d holding an address (see rdcp --check)",
		 dev, gid);
	if (ibv_query_device(ctx, &da) == 0)
		for (uint8_t p = 1; p <= da.phys_port_cnt && rc; p++)
			if (!ibv_query_gid_ex(ctx, p, (uint32_t)gid, &e, 0) &&
			    memcmp(e.gid.raw, zero, 16))
				rc = 0;
	ibv_close_device(ctx);
	if (rc)
		return rc;
	memcpy(raw, e.gid.raw, 16);
	memset(out, 0, sizeof(*out));
	if (!memcmp(e.gid.raw, v4mapped, 12)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, e.gid.raw + 12, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, e.gid.raw, 16);
		if (e.gid.raw[0] == 0xfe && (e.gid.raw[1] & 0xc0) == 0x80)
			sin6->sin6_scope_id = e.ndev_ifindex;
	}
	return 0;
}

/* The source address that pins --device (and --gid-index). */
static int pinned_addr(const struct cm_addr *addr, int family,
		       struct sockaddr_storage *out, uint8_t gid[16], char *why,
		       size_t whysz)
{
	int rc;

	if (addr->gid_index < 0)
		return device_addr(addr->device, family, out, why, whysz);
	rc = gid_addr(addr->device, addr->gid_index, out, gid, why, whysz);
	if (!rc && family != AF_UNSPEC && out->ss_family != family) {
		snprintf(why, whysz,
			 "GID %d of '%s' holds an %s address, the peer is %s",
			 addr->gid_index, addr->device,
			 out->ss_family == AF_INET ? "IPv4" : "IPv6",
			 family == AF_INET ? "IPv4" : "IPv6");
		rc = -EAFNOSUPPORT;
	}
	return rc;
}

/*
 * -v: which port, GID and MTU the connection uses, the facts to compare
 * with rdcp --check when a host has several devices.
 */
static void log_path(struct vconn *v, const char *what)
{
	struct ibv_port_attr pa;
	union ibv_gid sgid, g;
	char gs[INET6_ADDRSTRLEN] = "?";
	int idx = -1;

	if (!log_enabled(LOG_INFO))
		return;
	if (!v->id->route.path_rec ||
	    ibv_query_port(v->id->verbs, v->id->port_num, &pa)) {
		log_info("%s %s through %s", what, v->base.peer, v->base.dev);
		return;
	}
	sgid = v->id->route.path_rec->sgid;
	for (int i = 0; i < pa.gid_tbl_len && idx < 0; i++)
		if (!ibv_query_gid(v->id->verbs, v->id->port_num, i, &g) &&
		    !memcmp(&g, &sgid, sizeof(g)))
			idx = i;
	inet_ntop(AF_INET6, sgid.raw, gs, sizeof(gs));
	log_info("%s %s through %s port %u, GID %d (%s), active MTU %d, "
		 "link %s",
		 what, v->base.peer, v->base.dev, v->id->port_num, idx, gs,
		 128 << pa.active_mtu,
		 pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)"
							  : "InfiniBand");
}

/* ---- active side ---- */

static int expect(struct vconn *v, enum rdma_cm_event_type want, int timeout_ms,
		  const char *what, bool active)
{
	struct rdma_cm_event *ev;
	int rc = next_event(v->ech, timeout_ms, &ev);

	if (rc == -ETIMEDOUT) {
		log_err("%s %s: timed out after %d ms", what, v->base.peer,
			timeout_ms);
		return rc;
	}
	if (rc) {
		log_err("%s %s: %s", what, v->base.peer, strerror(-rc));
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
			    g.slot_size > v->base.geom.slot_size ||
			    g.ctrl_size != v->base.geom.ctrl_size ||
			    g.ctrl_credits != v->base.geom.ctrl_credits) {
				log_err("%s %s: the receiver answered with "
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
			log_err("%s %s: the receiver speaks rdcp protocol "
				"version %u, this rdcp speaks %u: install the "
				"same rdcp version on both hosts",
				what, v->base.peer, ver, cm_version());
			rc = -EPROTO;
		} else if (prc == 0) {
			log_err("%s %s: rejected: %s", what, v->base.peer,
				cm_pd_status_str(st));
			rc = st == PD_ST_BUSY ? -EBUSY : -EPROTO;
		} else {
			log_err("%s %s: connection refused (is 'rdcp --listen' "
				"running there on this port?)",
				what, v->base.peer);
			rc = -ECONNREFUSED;
		}
		break;
	}
	case RDMA_CM_EVENT_ADDR_ERROR:
		log_err("%s %s: no RDMA device can reach this address (set up "
			"a device, or Soft-RoCE: rdma link add rxe0 type rxe "
			"netdev eth0)",
			what, v->base.peer);
		rc = -ENODEV;
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		log_err("%s %s: peer unreachable (%s)", what, v->base.peer,
			rdma_event_str(ev->event));
		rc = -EHOSTUNREACH;
		break;
	default:
		log_err("%s %s: unexpected %s (status %d)", what, v->base.peer,
			rdma_event_str(ev->event), ev->status);
		rc = -ECONNREFUSED;
		break;
	}
	rdma_ack_cm_event(ev);
	return rc;
}

static int vconn_alloc(struct vconn **out)
{
	struct vconn *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	*out = v;
	return 0;
}

int cm_rdma_connect(const struct cm_addr *addr, const struct cm_geom *want,
		    const struct cm_timeouts *to, struct cm_conn **out)
{
	struct sockaddr_storage src;
	uint8_t gid[16] = { 0 };
	struct rdma_conn_param param;
	uint8_t pd[PD_LEN];
	struct addrinfo *ai = NULL;
	struct vconn *v;
	int rc;

	if (!cm_geom_valid(want))
		return -EINVAL;
	rc = vconn_alloc(&v);
	if (rc)
		return rc;
	v->base.geom = *want;
	snprintf(v->base.peer, sizeof(v->base.peer), "%s:%u", addr->host,
		 addr->port);
	rc = cm_resolve(addr, false, &ai);
	if (rc)
		goto out_free;
	cm_sockaddr_str(ai->ai_addr, v->base.peer, sizeof(v->base.peer));
	if (addr->device) {
		char why[300];

		rc = pinned_addr(addr, ai->ai_family, &src, gid, why,
				 sizeof(why));
		if (rc) {
			log_err("cannot connect to %s: %s", v->base.peer, why);
			goto out_free;
		}
	}
	v->ech = rdma_create_event_channel();
	if (!v->ech) {
		rc = -errno;
		log_err("cannot open the RDMA CM (%s): no RDMA device, or "
			"rdma_ucm not loaded (set up a device, or Soft-RoCE: "
			"rdma link add rxe0 type rxe netdev eth0)",
			strerror(errno));
		goto out_free;
	}
	rc = cm_set_nonblock(v->ech->fd);
	if (rc)
		goto out_free;
	if (rdma_create_id(v->ech, &v->id, v, RDMA_PS_TCP)) {
		rc = -errno;
		log_err("cannot create RDMA CM id: %s", strerror(errno));
		goto out_free;
	}
	if (rdma_resolve_addr(v->id,
			      addr->device ? (struct sockaddr *)&src : NULL,
			      ai->ai_addr, to->resolve_ms)) {
		rc = -errno;
		log_err("cannot resolve %s to an RDMA device: %s (set up a "
			"device, or Soft-RoCE: rdma link add rxe0 type rxe "
			"netdev eth0)",
			v->base.peer, strerror(errno));
		goto out_free;
	}
	rc = expect(v, RDMA_CM_EVENT_ADDR_RESOLVED, to->resolve_ms + 1000,
		    "cannot resolve", true);
	if (rc)
		goto out_free;
	if (rdma_resolve_route(v->id, to->resolve_ms)) {
		rc = -errno;
		log_err("cannot resolve route to %s: %s", v->base.peer,
			strerror(errno));
		goto out_free;
	}
	rc = expect(v, RDMA_CM_EVENT_ROUTE_RESOLVED, to->resolve_ms + 1000,
		    "cannot resolve route to", true);
	if (rc)
		goto out_free;
	if (addr->device &&
	    strcmp(ibv_get_device_name(v->id->verbs->device), addr->device)) {
		log_err("cannot connect to %s through %s: rdma_cm routes it "
			"through %s (check the routes of %s's network)",
			v->base.peer, addr->device,
			ibv_get_device_name(v->id->verbs->device),
			addr->device);
		rc = -ENODEV;
		goto out_free;
	}
	if (addr->device && addr->gid_index >= 0 && v->id->route.path_rec &&
	    memcmp(v->id->route.path_rec->sgid.raw, gid, 16)) {
		log_err("cannot connect to %s from GID %d of %s: rdma_cm "
			"chose another GID (check the routes and GID table "
			"with rdcp --check)",
			v->base.peer, addr->gid_index, addr->device);
		rc = -ENODEV;
		goto out_free;
	}
	rc = vconn_build(v);
	if (rc)
		goto out_free;
	cm_pd_encode(pd, PD_ST_OK, want);
	conn_param_init(&param, pd);
	if (rdma_connect(v->id, &param)) {
		rc = -errno;
		log_err("cannot connect to %s: %s", v->base.peer,
			strerror(errno));
		goto out_free;
	}
	rc = expect(v, RDMA_CM_EVENT_ESTABLISHED, to->connect_ms,
		    "cannot connect to", true);
	if (rc)
		goto out_free;
	v->established = true;
	log_path(v, "connected to");
	freeaddrinfo(ai);
	*out = &v->base;
	return 0;

out_free:
	if (ai)
		freeaddrinfo(ai);
	vconn_teardown(v);
	free(v);
	return rc;
}

/* ---- passive side ---- */

static int listen_one(const struct cm_addr *addr, bool quiet,
		      struct cm_rdma_listener **out)
{
	struct cm_rdma_listener *l;
	struct addrinfo *ai = NULL;
	char where[80];
	int rc;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rc = cm_resolve(addr, true, &ai);
	if (rc)
		goto out_free;
	cm_sockaddr_str(ai->ai_addr, where, sizeof(where));
	l->ech = rdma_create_event_channel();
	if (!l->ech) {
		rc = -errno;
		if (!quiet)
			log_err("cannot open the RDMA CM (%s): no RDMA device, "
				"or rdma_ucm not loaded",
				strerror(errno));
		goto out_free;
	}
	rc = cm_set_nonblock(l->ech->fd);
	if (rc)
		goto out_free;
	if (rdma_create_id(l->ech, &l->id, NULL, RDMA_PS_TCP)) {
		rc = -errno;
		if (!quiet)
			log_err("cannot create RDMA CM id: %s",
				strerror(errno));
		goto out_free;
	}
	if (ai->ai_family == AF_INET6) {
		int v6only = 0; /* one listener for both families on "::" */

		rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				&v6only, sizeof(v6only));
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		rc = -errno;
		if (!quiet)
			log_err("cannot bind RDMA listener to %s: %s%s", where,
				strerror(errno),
				errno == EADDRNOTAVAIL || errno == ENODEV
					? " (no RDMA device has this address)"
					: "");
		goto out_free;
	}
	if (rdma_listen(l->id, 64)) {
		rc = -errno;
		if (!quiet)
			log_err("cannot listen on %s: %s", where,
				strerror(errno));
		goto out_free;
	}
	log_info("listening for RDMA connections on %s", where);
	freeaddrinfo(ai);
	*out = l;
	return 0;

out_free:
	if (ai)
		freeaddrinfo(ai);
	cm_rdma_listener_destroy(l);
	return rc;
}

int cm_rdma_listen(const struct cm_addr *addr, bool quiet,
		   struct cm_rdma_listener **out)
{
	struct cm_addr any = *addr;

	if (addr->device && !addr->host) {
		/* --device without --bind: listen on that device's address. */
		struct sockaddr_storage ss;
		char why[300], host[INET6_ADDRSTRLEN];
		int family = addr->family == CM_AF_INET6  ? AF_INET6
			     : addr->family == CM_AF_INET ? AF_INET
							  : AF_UNSPEC;
		uint8_t gid[16];
		int rc = pinned_addr(addr, family, &ss, gid, why, sizeof(why));

		if (rc) {
			log_err("cannot listen: %s", why);
			return rc;
		}
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET,
				  &((struct sockaddr_in *)&ss)->sin_addr, host,
				  sizeof(host));
		else
			inet_ntop(AF_INET6,
				  &((struct sockaddr_in6 *)&ss)->sin6_addr,
				  host, sizeof(host));
		any.host = host;
		return listen_one(&any, quiet, out);
	}

	if (addr->host || addr->family != CM_AF_ANY)
		return listen_one(addr, quiet, out);
	/* All addresses: "::" takes IPv4 too; without IPv6, 0.0.0.0. */
	any.host = "::";
	any.family = CM_AF_INET6;
	if (listen_one(&any, true, out) == 0)
		return 0;
	any.host = NULL;
	any.family = CM_AF_INET;
	return listen_one(&any, quiet, out);
}

void cm_rdma_listener_destroy(struct cm_rdma_listener *l)
{
	if (!l)
		return;
	drain_cm_events(l->ech);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ech)
		rdma_destroy_event_channel(l->ech);
	free(l);
}

static void reject(struct rdma_cm_id *id, uint16_t status)
{
	uint8_t pd[PD_LEN];

	cm_pd_encode(pd, status, NULL);
	rdma_reject(id, pd, PD_LEN);
}

int cm_rdma_get(struct cm_rdma_listener *l, int timeout_ms,
		struct cm_request **out)
{
	struct rdma_cm_event *ev;
	struct cm_request *req;
	uint16_t ver = 0, st;
	struct cm_geom g;
	int rc;

	rc = next_event(l->ech, timeout_ms, &ev);
	if (rc == -ETIMEDOUT)
		return -EAGAIN;
	if (rc)
		return rc;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		log_debug("listener: ignoring %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		return -EAGAIN;
	}
	req = calloc(1, sizeof(*req));
	if (req)
		req->fd = -1;
	if (!req) {
		reject(ev->id, PD_ST_BUSY);
		rdma_destroy_id(ev->id);
		rdma_ack_cm_event(ev);
		return -ENOMEM;
	}
	req->id = ev->id;
	cm_sockaddr_str(rdma_get_peer_addr(ev->id), req->peer,
			sizeof(req->peer));
	rc = cm_pd_decode(ev->param.conn.private_data,
			  ev->param.conn.private_data_len, &ver, &st, &g);
	if (rc || !cm_geom_valid(&g)) {
		if (rc == -EPROTONOSUPPORT)
			log_err("refused %s: it speaks rdcp protocol version "
				"%u, this receiver speaks %u",
				req->peer, ver, cm_version());
		else
			log_err("refused %s: not an rdcp client (bad connect "
				"data)",
				req->peer);
		reject(ev->id,
		       rc == -EPROTONOSUPPORT ? PD_ST_VERSION : PD_ST_PARAMS);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(req->id);
		free(req);
		return -EAGAIN;
	}
	req->want = g;
	rdma_ack_cm_event(ev);
	req->ech = rdma_create_event_channel();
	if (!req->ech || cm_set_nonblock(req->ech->fd) ||
	    rdma_migrate_id(req->id, req->ech)) {
		rc = -errno;
		log_err("cannot take connection from %s: %s", req->peer,
			strerror(errno));
		reject(req->id, PD_ST_BUSY);
		rdma_destroy_id(req->id);
		if (req->ech)
			rdma_destroy_event_channel(req->ech);
		free(req);
		return rc;
	}
	*out = req;
	return 0;
}

int cm_rdma_listener_fd(const struct cm_rdma_listener *l)
{
	return l->ech->fd;
}

void cm_rdma_reject(struct cm_request *req)
{
	if (!req)
		return;
	reject(req->id, PD_ST_BUSY);
	drain_cm_events(req->ech);
	rdma_destroy_id(req->id);
	rdma_destroy_event_channel(req->ech);
	free(req);
}

int cm_rdma_accept(struct cm_request *req, const struct cm_limits *lim,
		   const struct cm_timeouts *to, struct cm_conn **out)
{
	struct rdma_conn_param param;
	uint8_t pd[PD_LEN];
	struct vconn *v;
	int rc;

	rc = vconn_alloc(&v);
	if (rc) {
		cm_rdma_reject(req);
		return rc;
	}
	v->ech = req->ech;
	v->id = req->id;
	v->base.geom = req->want;
	if (v->base.geom.slots > lim->max_slots)
		v->base.geom.slots = lim->max_slots;
	if (v->base.geom.slot_size > lim->max_slot_size)
		v->base.geom.slot_size = lim->max_slot_size;
	snprintf(v->base.peer, sizeof(v->base.peer), "%s", req->peer);
	free(req);
	rc = vconn_build(v);
	if (rc) {
		reject(v->id, PD_ST_BUSY);
		goto out_free;
	}
	cm_pd_encode(pd, PD_ST_OK, &v->base.geom);
	conn_param_init(&param, pd);
	if (rdma_accept(v->id, &param)) {
		rc = -errno;
		log_err("cannot accept %s: %s", v->base.peer, strerror(errno));
		goto out_free;
	}
	rc = expect(v, RDMA_CM_EVENT_ESTABLISHED, to->connect_ms,
		    "connection from", false);
	if (rc)
		goto out_free;
	v->established = true;
	log_path(v, "accepted");
	*out = &v->base;
	return 0;

out_free:
	vconn_teardown(v);
	free(v);
	return rc;
}

int cm_rdma_probe(const struct cm_addr *addr, int timeout_ms, char *why,
		  size_t whysz, char *dev, size_t devsz)
{
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *ev;
	struct addrinfo hints = { 0 }, *ai = NULL;
	char port[8];
	int rc;

	hints.ai_family = addr->family == CM_AF_INET	? AF_INET
			  : addr->family == CM_AF_INET6 ? AF_INET6
							: AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%u", addr->port);
	if (getaddrinfo(addr->host, port, &hints, &ai)) {
		snprintf(why, whysz, "cannot resolve '%s'", addr->host);
		return -EHOSTUNREACH;
	}
	ech = rdma_create_event_channel();
	if (!ech) {
		snprintf(why, whysz, "no RDMA stack on this host (%s)",
			 strerror(errno));
		freeaddrinfo(ai);
		return -ENODEV;
	}
	rc = -ENODEV;
	if (cm_set_nonblock(ech->fd) ||
	    rdma_create_id(ech, &id, NULL, RDMA_PS_TCP)) {
		snprintf(why, whysz, "cannot use the RDMA CM (%s)",
			 strerror(errno));
	} else if (rdma_resolve_addr(id, NULL, ai->ai_addr, timeout_ms)) {
		snprintf(why, whysz, "no RDMA device routes to it (%s)",
			 strerror(errno));
	} else if (next_event(ech, timeout_ms + 1000, &ev)) {
		snprintf(why, whysz, "RDMA address resolution timed out");
	} else {
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
			rc = 0;
			if (dev && id->verbs)
				snprintf(
					dev, devsz, "%s",
					ibv_get_device_name(id->verbs->device));
		} else
			snprintf(why, whysz, "no RDMA device routes to it");
		rdma_ack_cm_event(ev);
	}
	freeaddrinfo(ai);
	if (id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ech);
	return rc;
}
