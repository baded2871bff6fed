/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The TCP transport's connection resources (tcp_int.h): a connection made
 * around a connected socket (buffers, queues, receives posted), its
 * socket tuned and its two threads started, and the teardown that stops
 * them and frees everything, lanes first. tcp_hca.c's threads run the
 * connection, under tcp.c's ops.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm/cm_int.h"
#include "cm/tcp_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/units.h"

#define LINGER_MS 1000 /* destroy: wait this long for a clean close */

static int set_blocking(int fd, bool blocking)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK;
	if (fcntl(fd, F_SETFL, fl) < 0)
		return -errno;
	return 0;
}

static void setopt(int fd, int level, int name, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)))
		log_debug("cannot set %s on a TCP socket: %s", what,
			  strerror(errno));
}

/*
 * Control messages are latency-bound: no Nagle. A peer host that vanishes
 * must fail a blocked send or an idle connection in bounded time.
 */
static void sock_tune(int fd, int connect_ms)
{
	int user_ms = connect_ms > 0 ? 2 * connect_ms : 20000;
	int idle_s = user_ms / 3000 > 0 ? user_ms / 3000 : 1;

	setopt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
	setopt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
	setopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle_s, "TCP_KEEPIDLE");
	setopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, idle_s, "TCP_KEEPINTVL");
	setopt(fd, IPPROTO_TCP, TCP_KEEPCNT, 3, "TCP_KEEPCNT");
	setopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, user_ms, "TCP_USER_TIMEOUT");
}

static int alloc_buf(const char *what, size_t len, uint8_t **out)
{
	char sz[32];
	void *p;

	p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		int err = errno;

		log_err("cannot allocate %s (%s): %s", what,
			units_format_size(len, sz, sizeof(sz)), strerror(err));
		return -err;
	}
	/*
	 * Huge pages where the kernel allows them: a ring or staging area is
	 * touched once per 4 KiB page otherwise, 16 384 faults for 64 MiB,
	 * a cost paid again by every session. Advice only: no error.
	 */
	madvise(p, len ? len : 1, MADV_HUGEPAGE);
	*out = p;
	return 0;
}

static void free_buf(uint8_t **p, size_t len)
{
	if (*p)
		munmap(*p, len ? len : 1);
	*p = NULL;
}

/* Waits on t->cond until done() or deadline_ms; called with the lock. */
static void wait_locked(struct tconn *t, bool (*done)(const struct tconn *),
			uint64_t deadline_ms)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ms / 1000),
		.tv_nsec = (long)(deadline_ms % 1000) * 1000000L,
	};

	while (!done(t) && clock_now_ms() < deadline_ms)
		pthread_cond_timedwait(&t->cond, &t->lock, &ts);
}

static bool sq_drained(const struct tconn *t)
{
	return t->dead || (!t->sq_len && !t->tx_writing);
}

static bool rx_ended(const struct tconn *t)
{
	return t->rx_done;
}

/*
 * Stops both threads and frees everything; accepts a partly built
 * connection. While the link is healthy it first lets posted sends go out
 * and the peer close its side (bounded by LINGER_MS): closing a socket
 * with unread data would reset the connection and could discard our last
 * message (BYE) before the peer has it.
 */
void tconn_teardown(struct tconn *t)
{
	struct cm_conn *c = &t->base;

	for (unsigned int i = 1; i < CM_LANES_MAX; i++) {
		if (t->lane[i]) {
			tconn_teardown(t->lane[i]);
			free(t->lane[i]);
			t->lane[i] = NULL;
		}
	}
	cm_wfifo_free(&t->wf);
	if (t->tx_started || t->rx_started) {
		uint64_t deadline = clock_now_ms() + LINGER_MS;

		pthread_mutex_lock(&t->lock);
		wait_locked(t, sq_drained, deadline);
		t->stopping = true;
		pthread_cond_broadcast(&t->cond);
		pthread_mutex_unlock(&t->lock);
		shutdown(t->fd, SHUT_WR);
		pthread_mutex_lock(&t->lock);
		wait_locked(t, rx_ended, deadline);
		pthread_mutex_unlock(&t->lock);
		/* Wakes a receive or send blocked on a vanished peer. */
		shutdown(t->fd, SHUT_RDWR);
		if (t->tx_started)
			pthread_join(t->tx_thr, NULL);
		if (t->rx_started)
			pthread_join(t->rx_thr, NULL);
		t->tx_started = t->rx_started = false;
	}
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	if (t->evfd >= 0)
		close(t->evfd);
	t->evfd = -1;
	free_buf(&c->tx, (size_t)c->ntx * c->geom.ctrl_size);
	free_buf(&c->rx, (size_t)c->nrx * c->geom.ctrl_size);
	if (!t->borrowed) {
		cm_area_free(&c->ring, &c->geom);
		cm_area_free(&c->stage, &c->geom);
	}
	free(t->rxb);
	t->rxb = NULL;
	free(t->sq);
	free(t->rq);
	free(t->cq);
	t->sq = NULL;
	t->rq = NULL;
	t->cq = NULL;
	if (t->sync_init) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
		t->sync_init = false;
	}
}

/* ---- resources ---- */

/*
 * A connection around the socket fd (taken over, closed by teardown) with
 * control buffers, queues and every rx buffer posted; no threads yet.
 * On failure *out is a partly built connection for cm_conn_destroy().
 */
int tconn_create(int fd, const struct cm_geom *g, const char *peer,
		 unsigned int lane, unsigned int nlanes,
		 const struct cm_ops *ops, struct tconn **out)
{
	struct tconn *t = calloc(1, sizeof(*t));
	struct cm_conn *c;
	pthread_condattr_t ca;
	int rc;

	if (!t) {
		close(fd);
		return -ENOMEM;
	}
	*out = t;
	c = &t->base;
	t->fd = fd;
	t->evfd = -1;
	c->ops = ops;
	c->geom = *g;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	snprintf(c->dev, sizeof(c->dev), "tcp");
	c->transport = "tcp";
	c->numa_node = -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	t->sync_init = true;
	t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->evfd < 0) {
		rc = -errno;
		log_err("cannot create eventfd: %s", strerror(errno));
		return rc;
	}
	/* One entry per posted write (one frame), not verbs' two. */
	t->idx = lane;
	t->depth = (unsigned int)g->slots + (lane ? 0u : cm_ntx(g));
	c->ntx = lane ? 0 : cm_ntx(g);
	c->nrx = lane ? cm_lane_rq_depth(g, nlanes, lane) : cm_rq_depth(g);
	t->cq_cap = c->nrx + t->depth + 1; /* + CLOSED */
	t->sq = calloc(t->depth, sizeof(*t->sq));
	t->rq = calloc(c->nrx, sizeof(*t->rq));
	t->cq = calloc(t->cq_cap, sizeof(*t->cq));
	t->rxb = malloc(TCP_RX_BUF);
	if (!t->sq || !t->rq || !t->cq || !t->rxb) {
		log_err("cannot allocate queues of %u entries: %s", t->depth,
			strerror(ENOMEM));
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < c->nrx; i++)
		t->rq[t->rq_len++] = lane ? 0 : i; /* a lane's: zero-length */
	if (lane)
		return 0;
	rc = alloc_buf("control send buffers", (size_t)c->ntx * g->ctrl_size,
		       &c->tx);
	if (rc)
		return rc;
	return alloc_buf("control receive buffers",
			 (size_t)c->nrx * g->ctrl_size, &c->rx);
}

/* Switches to blocking I/O and starts the threads, signals blocked. */
int tconn_start(struct tconn *t, int connect_ms)
{
	sigset_t all, old;
	int rc;

	sock_tune(t->fd, connect_ms);
	rc = set_blocking(t->fd, true);
	if (rc) {
		log_err("cannot set up socket: %s", strerror(-rc));
		return rc;
	}
	/* Signals are for the thread that runs the engine. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t->tx_thr, NULL, tconn_tx_main, t);
	t->tx_started = !rc;
	if (!rc) {
		rc = pthread_create(&t->rx_thr, NULL, tconn_rx_main, t);
		t->rx_started = !rc;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		log_err("cannot start TCP transport threads: %s", strerror(rc));
		return -rc;
	}
	return 0;
}
