/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Asynchronous verbs events (ibv_get_async_event(3)): a QP or CQ that
 * failed outside any completion, a port that went down, a device that
 * failed. They arrive on the device context's async fd, which librdmacm
 * shares between every connection of this process on that device, so
 * whichever session's thread finds the fd readable reads every pending
 * event, acks it at once (ibv_destroy_qp/cq wait for the acks) and hands
 * it to the connection it concerns: its QP or CQ, its port, or all of the
 * device's. A fatal one becomes the connection's cause of failure
 * (vconn.async_err and its words), which v_poll reports before anything
 * else. One mutex guards the list of connections and the routing, so a
 * connection being torn down is never written to.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/verbs_int.h"
#include "util/log.h"

static pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vconn *async_list;

int vasync_add(struct vconn *v)
{
	int fd = v->id->verbs->async_fd;
	int fl = fcntl(fd, F_GETFL);

	/* Never block in ibv_get_async_event: only read when told. */
	if (fl < 0 ||
	    (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)) {
		log_err("cannot watch %s for asynchronous events: %s",
			v->base.dev, strerror(errno));
		return -errno;
	}
	pthread_mutex_lock(&async_lock);
	v->async_next = async_list;
	async_list = v;
	v->async_listed = true;
	pthread_mutex_unlock(&async_lock);
	return 0;
}

void vasync_del(struct vconn *v)
{
	struct vconn **p;

	if (!v->async_listed)
		return;
	pthread_mutex_lock(&async_lock);
	for (p = &async_list; *p; p = &(*p)->async_next) {
		if (*p == v) {
			*p = v->async_next;
			break;
		}
	}
	v->async_listed = false;
	pthread_mutex_unlock(&async_lock);
}

/*
 * What a fatal event means (the status conventions of cm.h); 0 for the
 * events that are news, not failures (COMM_EST, PORT_ACTIVE, LID and GID
 * changes, SQ_DRAINED, path migration, ...).
 */
static int async_status(enum ibv_event_type t, const char **what)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
		*what = "the queue pair failed (local catastrophic error)";
		return -EIO;
	case IBV_EVENT_QP_REQ_ERR:
		*what = "the peer sent a request the queue pair cannot take: "
			"it broke the protocol";
		return -EPROTO;
	case IBV_EVENT_QP_ACCESS_ERR:
		*what = "the peer accessed memory it was not given: it broke "
			"the protocol";
		return -EPROTO;
	case IBV_EVENT_CQ_ERR:
		*what = "a completion queue overran: a bug, please report it";
		return -EOVERFLOW;
	case IBV_EVENT_PORT_ERR:
		*what = "the port went down: the link is cut";
		return -ENETDOWN;
	case IBV_EVENT_DEVICE_FATAL:
		*what = "the device failed: reset or reload its driver";
		return -ENODEV;
	default:
		return 0;
	}
}

/* Records a cause on v, once, for its own thread to report (lock held). */
static void async_fail(struct vconn *v, int status, const char *why)
{
	if (__atomic_load_n(&v->async_err, __ATOMIC_RELAXED))
		return;
	snprintf(v->async_why, sizeof(v->async_why), "%s", why);
	/* The words first: the owner reads them after the status. */
	__atomic_store_n(&v->async_err, status, __ATOMIC_RELEASE);
}

void vasync_lane(struct vconn *v, unsigned int idx, struct vconn *l)
{
	pthread_mutex_lock(&async_lock);
	v->lane[idx] = l;
	pthread_mutex_unlock(&async_lock);
}

void vasync_set(struct vconn *v, int status, const char *why)
{
	pthread_mutex_lock(&async_lock);
	async_fail(v, status, why);
	pthread_mutex_unlock(&async_lock);
}

/* Whether ev is about e, lane 0 or a lane: its QP, CQs, port or device. */
static bool async_hits(const struct vconn *e, struct ibv_context *ctx,
		       const struct ibv_async_event *ev)
{
	if (!e || !e->id || e->id->verbs != ctx)
		return false;
	switch (ev->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		return e->qp_created && ev->element.qp == e->id->qp;
	case IBV_EVENT_CQ_ERR:
		return ev->element.cq == e->scq || ev->element.cq == e->rcq;
	case IBV_EVENT_PORT_ERR:
		return ev->element.port_num == e->id->port_num;
	case IBV_EVENT_DEVICE_FATAL:
		return true;
	default:
		return false;
	}
}

/*
 * Whether ev is about v: about lane 0 or any of its lanes (--streams),
 * which may sit on other devices (rails): one lane's failure fails the
 * whole connection.
 */
static bool async_concerns(const struct vconn *v, struct ibv_context *ctx,
			   const struct ibv_async_event *ev)
{
	if (async_hits(v, ctx, ev))
		return true;
	for (unsigned int i = 1; i < CM_LANES_MAX; i++)
		if (async_hits(v->lane[i], ctx, ev))
			return true;
	return false;
}

void vasync_read(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	pthread_mutex_lock(&async_lock);
	while (ibv_get_async_event(ctx, &ev) == 0) {
		const char *what = NULL;
		int status = async_status(ev.event_type, &what);
		bool mine = false;

		for (struct vconn *v = async_list; status && v;
		     v = v->async_next) {
			char why[sizeof(v->async_why)];

			if (!async_concerns(v, ctx, &ev))
				continue;
			snprintf(why, sizeof(why),
				 "RDMA device %s, connection to %s: %s "
				 "(async event %s)",
				 ibv_get_device_name(ctx->device), v->base.peer,
				 what, ibv_event_type_str(ev.event_type));
			async_fail(v, status, why);
			mine = true;
		}
		if (!status || !mine)
			log_debug("asynchronous event %s on %s%s",
				  ibv_event_type_str(ev.event_type),
				  ibv_get_device_name(ctx->device),
				  status ? " (no connection of ours)" : "");
		ibv_ack_async_event(&ev);
	}
	pthread_mutex_unlock(&async_lock);
}
