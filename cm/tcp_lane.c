/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Lanes over TCP (--streams; cm.h "Lanes"): lane k of a connection is a
 * TCP connection of its own, a tconn (tcp_res.c) with its own send and receive
 * threads and completion queue, that carries only the writes of the slots
 * s with s % n == k, straight into lane 0's ring (borrowed, never freed
 * here). It has no control buffers: its receives are zero-length, and a
 * SEND on it fails it (tcp_hca.c rx_frame). The client connects it to lane 0's
 * peer address and opens with a join's connect data (cm_int.h
 * PD_JOIN_LEN); the receiver's session accepts it once it checked the
 * proof. Lane 0 merges the lanes' completions and waits on every lane's
 * eventfd.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/cm_int.h"
#include "cm/cm_tcp.h"
#include "cm/tcp_int.h"
#include "util/clock.h"
#include "util/log.h"

static struct tconn *to_t(struct cm_conn *c)
{
	return (struct tconn *)c;
}

int tlane_set(struct cm_conn *c, unsigned int n)
{
	struct tconn *t = to_t(c);

	return cm_lanes_set(c, &t->nlanes, &t->wf, n);
}

int tlane_keep(struct cm_conn *c, unsigned int up)
{
	struct tconn *t = to_t(c);
	unsigned int joined = 1;

	while (joined < t->nlanes && t->lane[joined])
		joined++;
	return cm_lanes_keep(c, t->nlanes, up, joined);
}

struct tconn *tlane_pick(struct tconn *t, unsigned int slot)
{
	unsigned int k = cm_lane_carrier(slot, t->nlanes, t->base.lanes_up);

	return k ? t->lane[k] : t;
}

int tlane_share(struct tconn *t)
{
	struct cm_conn *c = &t->base;
	unsigned int keep;

	if (t->nlanes <= 1)
		return 0;
	/*
	 * Lane 0 keeps receives for its share of the slots only, and those
	 * of the lanes that did not join (cm_lane0_rq_depth).
	 */
	keep = cm_lane0_rq_depth(&c->geom, t->nlanes, c->lanes_up);
	pthread_mutex_lock(&t->lock);
	if (t->rq_len > keep)
		t->rq_len = keep;
	pthread_mutex_unlock(&t->lock);
	for (unsigned int i = 1; i < c->lanes_up; i++) {
		struct tconn *l = t->lane[i];

		if (!l) {
			log_err("cannot set up the ring for %s: lane %u of %u "
				"never joined",
				c->peer, i, t->nlanes);
			return -ENOTCONN;
		}
		pthread_mutex_lock(&l->lock); /* its threads read these */
		l->base.ring = c->ring;
		l->base.ring_hdr = c->ring_hdr;
		l->base.stage = c->stage;
		l->base.stage_hdr = c->stage_hdr;
		pthread_mutex_unlock(&l->lock);
	}
	return 0;
}

/*
 * Folds k events of lane i at ev in place: writes done go to t->wf, a
 * data write's receive gets lane i's id. Returns how many remain.
 */
static int fold(struct tconn *t, unsigned int i, struct cm_event *ev, int k)
{
	int n = 0;

	for (int j = 0; j < k; j++) {
		struct cm_event e = ev[j];

		if (e.type == CM_EV_SEND_DONE && !e.status && cm_wf_is(e.id)) {
			if (cm_wfifo_done(&t->wf, e.id)) {
				log_err("completion of a write never posted");
				return -EIO;
			}
			continue;
		}
		/*
		 * A lane the peer closed cleanly is no news: the peer ends
		 * lanes before lane 0 and its last words (BYE) come on lane
		 * 0, maybe after. A lane that failed says why (its status).
		 */
		if (i && e.type == CM_EV_CLOSED &&
		    (!e.status || e.status == -ECONNRESET))
			continue;
		if (i && e.type == CM_EV_DATA)
			e.id = t->base.nrx + i - 1;
		ev[n++] = e;
	}
	return n;
}

int tlane_poll(struct tconn *t, struct cm_event *ev, int max)
{
	int n = cm_wfifo_emit(&t->wf, ev, max);

	for (unsigned int i = 0; i < t->nlanes && n < max; i++) {
		struct tconn *l = i ? t->lane[i] : t;
		int k;

		if (!l)
			continue;
		k = fold(t, i, ev + n, tconn_poll_raw(l, ev + n, max - n));
		if (k < 0)
			return k;
		n += k;
	}
	return n + cm_wfifo_emit(&t->wf, ev + n, max - n);
}

int tlane_wait(struct tconn *t, int extra_fd, int timeout_ms)
{
	struct pollfd pfd[CM_LANES_MAX + 1];
	nfds_t n = 0;

	for (unsigned int i = 0; i < t->nlanes; i++) {
		struct tconn *l = i ? t->lane[i] : t;

		if (l)
			pfd[n++] = (struct pollfd){ .fd = l->evfd,
						    .events = POLLIN };
	}
	/* poll(2) skips an fd of -1. */
	pfd[n++] = (struct pollfd){ .fd = extra_fd, .events = POLLIN };
	if (poll(pfd, n, timeout_ms) < 0)
		return errno == EINTR ? 0 : -errno;
	return 0;
}

/* Lane k's tconn around fd (taken over) and its threads, adopted by t. */
static int lane_start(struct tconn *t, int fd, unsigned int k, const char *peer,
		      int connect_ms)
{
	struct tconn *l = NULL;
	int rc;

	rc = tconn_create(fd, &t->base.geom, peer, k, t->nlanes, NULL, &l);
	if (!rc) {
		l->parent = t;
		l->borrowed = true;
		rc = tconn_start(l, connect_ms);
	}
	if (rc) {
		if (l) { /* a lane has no ops: tconn_teardown frees it */
			tconn_teardown(l);
			free(l);
		}
		return rc;
	}
	t->lane[k] = l;
	log_debug("lane %u of %s established", k, t->base.peer);
	return 0;
}

int tlane_join(struct cm_conn *c, const struct cm_join *j,
	       const struct cm_timeouts *to)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)to->connect_ms;
	struct tconn *t = to_t(c);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	uint8_t pd[PD_JOIN_LEN];
	struct cm_geom g;
	int fd, rc;

	if (j->lane < 1 || j->lane >= t->nlanes || t->lane[j->lane])
		return -EINVAL;
	if (getpeername(t->fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		log_err("lane %u to %s: %s", j->lane, c->peer, strerror(errno));
		return rc;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		rc = -errno;
		log_err("lane %u to %s: %s", j->lane, c->peer, strerror(errno));
		return rc;
	}
	rc = connect(fd, (struct sockaddr *)&ss, sl) < 0 ? -errno : 0;
	if (rc == -EINPROGRESS) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int err = 0;
		socklen_t el = sizeof(err);
		int64_t left = (int64_t)(deadline - clock_now_ms());

		rc = poll(&p, 1, left > 0 ? (int)left : 0) == 1 ? 0
								: -ETIMEDOUT;
		if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0)
			rc = -err;
	}
	cm_pd_encode_join(pd, &c->geom, j);
	if (!rc)
		rc = tcp_io_deadline(fd, pd, sizeof(pd), true, deadline);
	if (rc) {
		log_debug("cannot join lane %u to %s: %s", j->lane, c->peer,
			  strerror(-rc));
		close(fd);
		return rc;
	}
	rc = tcp_client_answer(fd, c->peer, &c->geom, deadline, to->connect_ms,
			       LOG_DEBUG, &g);
	if (!rc &&
	    (g.slots != c->geom.slots || g.chunk_size != c->geom.chunk_size)) {
		log_err("lane %u to %s: the receiver answered with another "
			"geometry",
			j->lane, c->peer);
		rc = -EPROTO;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return lane_start(t, fd, j->lane, c->peer, to->connect_ms);
}

int tlane_accept(struct cm_conn *c, struct cm_request *req, unsigned int lane,
		 const struct cm_timeouts *to)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)to->connect_ms;
	struct tconn *t = to_t(c);
	uint8_t pd[PD_LEN];
	char peer[sizeof(req->peer)];
	int fd, rc;

	if (!req->tcp || !req->join || lane < 1 || lane >= t->nlanes ||
	    t->lane[lane] || req->want.slots != c->geom.slots ||
	    req->want.chunk_size != c->geom.chunk_size) {
		log_err("refused lane %u from %s: not a lane this session "
			"waits for",
			lane, req->peer);
		cm_reject_join(req);
		return -EPROTO;
	}
	fd = req->fd;
	snprintf(peer, sizeof(peer), "%s", req->peer);
	free(req);
	cm_pd_encode(pd, PD_ST_OK, &c->geom);
	rc = tcp_io_deadline(fd, pd, sizeof(pd), true, deadline);
	if (rc) {
		log_debug("cannot accept lane %u from %s: %s", lane, peer,
			  strerror(-rc));
		close(fd);
		return rc;
	}
	return lane_start(t, fd, lane, peer, to->connect_ms);
}
