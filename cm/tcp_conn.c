/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The TCP transport's connection setup: connect, listen, take, accept and
 * reject, and the handshake that stands in for rdma_cm's private data.
 * The connection itself is cm/tcp_res.c's tconn_create() and
 * tconn_start(), called once the handshake agreed the geometry, with the
 * ops of cm/tcp.c; the handshake's steps a lane takes too are
 * cm/tcp_handshake.c's.
 *
 * The client connects (non-blocking, bounded by connect_ms) and sends the
 * 24-byte private-data blob of rdma_cm.c (magic, version, status,
 * geometry; big-endian); the server answers with the same blob, status
 * PD_ST_OK and the geometry clamped to its limits, or with a refusal
 * status and closes, as rdma_accept()/rdma_reject() would. Every wait is
 * bounded by connect_ms.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <fcntl.h>
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

/* Refusals answered by the listener without blocking; more go at once. */
#define REFUSALS_MAX 16
#define ACCEPT_PAUSE_MS 100 /* no accept() for this long after ENOMEM */

/* A refused client whose connect data is awaited before it is answered. */
struct refusal {
	int fd;
	uint8_t pd[PD_LEN];
	size_t got;
	uint64_t deadline_ms;
	char peer[64];
};

struct cm_tcp_listener {
	int fd;
	int reserve; /* an fd held back for accept() when the table is full */
	uint64_t pause_until_ms;
	struct log_every accept_log;
	char where[80];
	pthread_mutex_t lock; /* refusals */
	struct refusal ref[REFUSALS_MAX];
	unsigned int nref;
};

/* ---- active side ---- */

/* Socket, options, non-blocking connect to one address before deadline. */
static int tcp_connect_one(const struct addrinfo *ai, uint64_t deadline_ms,
		       int *out)
{
	struct pollfd pfd;
	socklen_t len = sizeof(int);
	int fd, err = 0, rc;

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto out_ok;
	if (errno != EINPROGRESS) {
		rc = -errno;
		goto out_close;
	}
	for (;;) {
		int64_t left = (int64_t)(deadline_ms - clock_now_ms());

		if (left <= 0) {
			rc = -ETIMEDOUT;
			goto out_close;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		rc = poll(&pfd, 1, (int)left);
		if (rc > 0)
			break;
		if (rc < 0 && errno != EINTR) {
			rc = -errno;
			goto out_close;
		}
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		rc = -err;
		goto out_close;
	}
out_ok:
	*out = fd;
	return 0;
out_close:
	close(fd);
	return rc;
}

static void connect_error(const char *peer, int rc, int connect_ms)
{
	if (rc == -ECONNREFUSED)
		log_err("cannot connect to %s: %s (is 'rdcp --listen' running "
			"there?)",
			peer, strerror(-rc));
	else if (rc == -ETIMEDOUT)
		log_err("cannot connect to %s: timed out after %d ms", peer,
			connect_ms);
	else
		log_err("cannot connect to %s: %s", peer, strerror(-rc));
}

int cm_tcp_connect(const struct cm_addr *addr, const struct cm_geom *want,
		   const struct cm_timeouts *to, struct cm_conn **out)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)to->connect_ms;
	struct addrinfo *ai = NULL, *p;
	struct tconn *t = NULL;
	struct cm_geom g, ask = *want;
	uint8_t pd[PD_LEN];
	char peer[64];
	int fd = -1, rc;

	/* Left to the link: a socket does not say its rate. */
	if (!ask.slots)
		ask.slots = (uint16_t)cm_window_slots(0, ask.chunk_size, 0);
	want = &ask;
	if (!cm_geom_valid(want))
		return -EINVAL;
	snprintf(peer, sizeof(peer), "%s:%u", addr->host, addr->port);
	rc = cm_resolve(addr, false, &ai);
	if (rc)
		return rc;
	/* Every address of the name in turn, all within connect_ms. */
	for (p = ai; p; p = p->ai_next) {
		cm_sockaddr_str(p->ai_addr, peer, sizeof(peer));
		rc = tcp_connect_one(p, deadline, &fd);
		if (!rc || rc == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(ai);
	if (rc) {
		connect_error(peer, rc, to->connect_ms);
		return rc;
	}
	cm_pd_encode(pd, PD_ST_OK, want);
	rc = tcp_io_deadline(fd, pd, sizeof(pd), true, deadline);
	if (rc) {
		connect_error(peer, rc == -EPIPE ? -ECONNRESET : rc,
			      to->connect_ms);
		close(fd);
		return rc;
	}
	rc = tcp_client_answer(fd, peer, want, deadline, to->connect_ms,
			       LOG_ERR, &g);
	if (rc) {
		close(fd);
		return rc;
	}
	/* Sized for the geometry agreed (verbs.c must size for want). */
	rc = tconn_create(fd, &g, peer, 0, 1, &tconn_ops, &t);
	if (rc)
		goto out_free;
	rc = tconn_start(t, to->connect_ms);
	if (rc)
		goto out_free;
	log_info("connected to %s through tcp", t->base.peer);
	*out = &t->base;
	return 0;

out_free:
	if (t)
		cm_conn_destroy(&t->base);
	return rc;
}

/* ---- passive side ---- */

int cm_tcp_listen(const struct cm_addr *addr, bool quiet,
		  struct cm_tcp_listener **out)
{
	struct cm_tcp_listener *l;
	struct addrinfo *ai = NULL, *p, *pick[2] = { NULL, NULL };
	int rc = -EAFNOSUPPORT;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	l->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rc = cm_resolve(addr, true, &ai);
	if (rc)
		goto out_free;
	/* "Any address": one IPv6 socket serves IPv4 too; else the first. */
	for (p = ai; p; p = p->ai_next) {
		if (p->ai_family == AF_INET6 && !pick[0] && !addr->host)
			pick[0] = p;
		else if (!pick[1])
			pick[1] = p;
	}
	for (int i = 0; i < 2 && l->fd < 0; i++) {
		int one = 1, zero = 0;

		if (!pick[i])
			continue;
		p = pick[i];
		cm_sockaddr_str(p->ai_addr, l->where, sizeof(l->where));
		l->fd = socket(p->ai_family,
			       p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       p->ai_protocol);
		if (l->fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (p->ai_family == AF_INET6) {
			const struct sockaddr_in6 *s6 =
				(const void *)p->ai_addr;

			if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
				setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY,
					   &zero, sizeof(zero));
		}
		if (bind(l->fd, p->ai_addr, p->ai_addrlen) ||
		    listen(l->fd, 64)) {
			rc = -errno;
			close(l->fd);
			l->fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (l->fd < 0) {
		if (!quiet)
			log_err("cannot listen on %s: %s%s", l->where, strerror(-rc),
				rc == -EADDRINUSE ? " (is another 'rdcp --listen' "
						    "running on this port?)"
						  : "");
		goto out_free;
	}
	log_info("listening for TCP connections on %s", l->where);
	*out = l;
	return 0;

out_free:
	cm_tcp_listener_destroy(l);
	return rc;
}

int cm_tcp_listener_fd(const struct cm_tcp_listener *l)
{
	return l->fd;
}

void cm_tcp_listener_destroy(struct cm_tcp_listener *l)
{
	if (!l)
		return;
	for (unsigned int i = 0; i < l->nref; i++)
		close(l->ref[i].fd);
	if (l->fd >= 0)
		close(l->fd);
	if (l->reserve >= 0)
		close(l->reserve);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* Answers st without waiting (the send buffer of a new socket has room). */
static void refuse_now(int fd, uint16_t st)
{
	uint8_t pd[PD_LEN];

	cm_pd_encode(pd, st, NULL);
	if (send(fd, pd, sizeof(pd), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_debug("cannot send refusal: %s", strerror(errno));
	tcp_close_gently(fd);
}

/*
 * Out of descriptors: the client at the head of the backlog is taken with
 * the one held in reserve and told the receiver is busy, so that it learns
 * at once and the backlog drains; without a reserve, accepting pauses.
 */
static void shed(struct cm_tcp_listener *l)
{
	int fd;

	if (l->reserve >= 0) {
		close(l->reserve);
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0)
			refuse_now(fd, PD_ST_BUSY);
		l->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return;
	}
	l->pause_until_ms = clock_now_ms() + ACCEPT_PAUSE_MS;
}

/*
 * accept4() of the next waiting client; -EAGAIN if none, or when this
 * process ran out of descriptors or memory (logged at most every 10 s: the
 * listener goes on). Other errors are the listener's own.
 */
static int take(struct cm_tcp_listener *l, char *peer, size_t n, int *out)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned int held;
	int fd;

	if (l->pause_until_ms && clock_now_ms() < l->pause_until_ms)
		return -EAGAIN;
	l->pause_until_ms = 0;
	fd = accept4(l->fd, (struct sockaddr *)&ss, &len,
		     SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0) {
		cm_sockaddr_str((const struct sockaddr *)&ss, peer, n);
		*out = fd;
		return 0;
	}
	switch (errno) {
	case EMFILE:
	case ENFILE:
	case ENOMEM:
	case ENOBUFS: {
		int err = errno;

		if (err == EMFILE || err == ENFILE)
			shed(l);
		else
			l->pause_until_ms = clock_now_ms() + ACCEPT_PAUSE_MS;
		if (log_every_due(&l->accept_log, clock_now_ms(), 10000, &held))
			log_err("cannot accept connections on %s: %s: new "
				"clients are refused as busy until some "
				"close (%u more failures since last said)",
				l->where, strerror(err), held);
		return -EAGAIN;
	}
	/*
	 * Gone before we took it, nothing there, or a network error of that
	 * one connection (accept(2)): as a timeout.
	 */
	case EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case EWOULDBLOCK:
#endif
	case EINTR:
	case ECONNABORTED:
	case EPROTO:
	case EPERM:
	case ENETDOWN:
	case ENETUNREACH:
	case EHOSTDOWN:
	case EHOSTUNREACH:
	case ENONET:
	case ENOPROTOOPT:
	case EOPNOTSUPP:
	case ETIMEDOUT:
		return -EAGAIN;
	default:
		log_err("cannot accept a connection on %s: %s", l->where,
			strerror(errno));
		return -errno;
	}
}

/*
 * Reads the client's private data; 0 with *g, or -errno after refusing
 * (bad magic/version/geometry) or dropping the client, logged.
 */
static int server_hello(int fd, const char *peer, uint64_t deadline_ms,
			int connect_ms, struct cm_geom *g, uint16_t *stp)
{
	uint8_t pd[PD_LEN];
	uint16_t ver = 0, st = 0;
	char why[100];
	int rc;

	rc = tcp_io_deadline(fd, pd, sizeof(pd), false, deadline_ms);
	if (rc) {
		if (rc == -ETIMEDOUT)
			log_err("connection from %s: timed out after %d ms",
				peer, connect_ms);
		else
			log_err("connection from %s: %s", peer, strerror(-rc));
		close(fd);
		return rc;
	}
	rc = cm_pd_decode(pd, sizeof(pd), &ver, &st, g);
	if (rc == -EPROTONOSUPPORT) {
		log_err("refused %s: it speaks rdcp protocol version %u, this "
			"receiver speaks %u",
			peer, ver, cm_version());
		tcp_refuse(fd, PD_ST_VERSION, deadline_ms);
		return -EPROTO;
	}
	if (rc) {
		log_err("refused %s: not an rdcp client (bad connect data)",
			peer);
		tcp_refuse(fd, PD_ST_PARAMS, deadline_ms);
		return -EPROTO;
	}
	if (!cm_geom_check(g, why, sizeof(why))) {
		log_err("refused %s: it asks for %s", peer, why);
		tcp_refuse(fd, PD_ST_PARAMS, deadline_ms);
		return -EPROTO;
	}
	if (stp)
		*stp = st;
	else if (st == PD_ST_JOIN) {
		log_err("refused %s: a lane join where a session opens", peer);
		tcp_refuse(fd, PD_ST_REFUSED, deadline_ms);
		return -EPROTO;
	}
	return 0;
}

int cm_tcp_read_request(struct cm_request *req, int timeout_ms)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)timeout_ms;
	uint8_t pd[PD_JOIN_LEN];
	uint16_t st = 0;
	int rc;

	if (req->read)
		return 0;
	rc = server_hello(req->fd, req->peer, deadline, timeout_ms, &req->want,
			  &st);
	if (!rc && st == PD_ST_JOIN) {
		/* The join's tail, after the 24 bytes of any connect. */
		rc = tcp_io_deadline(req->fd, pd + PD_LEN, PD_JOIN_LEN - PD_LEN,
				     false, deadline);
		req->join = !rc && cm_pd_decode_join(pd, sizeof(pd), &req->j);
		if (!req->join) {
			log_err("refused %s: a malformed lane join", req->peer);
			tcp_refuse(req->fd, PD_ST_REFUSED, deadline);
			rc = -EPROTO;
		}
	}
	if (rc) {
		free(req);
		return rc;
	}
	req->read = true;
	return 0;
}

int cm_tcp_take(struct cm_tcp_listener *l, char *peer, size_t n, int *fd)
{
	return take(l, peer, n, fd);
}

/*
 * One look at a refusal, never waiting: true once it is over (answered
 * and closed), when its connect data came, it hung up, or its time is up.
 * A client of another protocol version is told that rather than "busy".
 */
static bool refusal_step(struct refusal *r, uint64_t now_ms)
{
	uint16_t ver = 0, st = 0;
	struct cm_geom g;
	ssize_t n;

	do {
		n = recv(r->fd, r->pd + r->got, PD_LEN - r->got, MSG_DONTWAIT);
		if (n > 0)
			r->got += (size_t)n;
	} while (n > 0 && r->got < PD_LEN);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		       errno != EINTR)) {
		close(r->fd); /* it hung up: nobody to tell */
		return true;
	}
	if (r->got < PD_LEN && now_ms < r->deadline_ms)
		return false;
	if (r->got == PD_LEN &&
	    cm_pd_decode(r->pd, PD_LEN, &ver, &st, &g) == -EPROTONOSUPPORT) {
		log_err("refused %s: it speaks rdcp protocol version %u, this "
			"receiver speaks %u",
			r->peer, ver, cm_version());
		refuse_now(r->fd, PD_ST_VERSION);
	} else {
		refuse_now(r->fd, PD_ST_BUSY);
	}
	return true;
}

void cm_tcp_refuse(struct cm_tcp_listener *l, int fd, const char *peer)
{
	struct refusal r = { .fd = fd,
			     .deadline_ms = clock_now_ms() + TCP_REFUSAL_MS };

	snprintf(r.peer, sizeof(r.peer), "%s", peer);
	if (refusal_step(&r, clock_now_ms()))
		return;
	pthread_mutex_lock(&l->lock);
	if (l->nref < REFUSALS_MAX) {
		l->ref[l->nref++] = r;
		fd = -1;
	}
	pthread_mutex_unlock(&l->lock);
	if (fd >= 0) /* too many waiting already: busy, without a word */
		refuse_now(fd, PD_ST_BUSY);
}

int cm_tcp_listener_prepare(struct cm_tcp_listener *l, int *timeout_ms)
{
	uint64_t now = clock_now_ms();

	pthread_mutex_lock(&l->lock);
	for (unsigned int i = 0; i < l->nref;) {
		if (refusal_step(&l->ref[i], now))
			l->ref[i] = l->ref[--l->nref];
		else
			i++;
	}
	/* Look again soon: these wait on no fd of their own. */
	if (l->nref && (*timeout_ms < 0 || *timeout_ms > 20))
		*timeout_ms = 20;
	pthread_mutex_unlock(&l->lock);
	if (l->pause_until_ms && now < l->pause_until_ms) {
		int left = (int)(l->pause_until_ms - now);

		if (*timeout_ms < 0 || *timeout_ms > left)
			*timeout_ms = left;
		return -1;
	}
	return l->fd;
}

int cm_tcp_accept_fd(int fd, const char *peer, const struct cm_limits *lim,
		     const struct cm_timeouts *to, struct cm_conn **out)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)to->connect_ms;
	struct cm_geom g;
	int rc;

	rc = server_hello(fd, peer, deadline, to->connect_ms, &g, NULL);
	if (rc)
		return rc;
	return cm_tcp_accept_geom(fd, peer, &g, lim, to, out);
}

int cm_tcp_accept_geom(int fd, const char *peer, const struct cm_geom *want,
		       const struct cm_limits *lim,
		       const struct cm_timeouts *to, struct cm_conn **out)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)to->connect_ms;
	struct tconn *t = NULL;
	struct cm_geom g = *want;
	uint8_t pd[PD_LEN];
	int rc;

	if (g.slots > lim->max_slots)
		g.slots = lim->max_slots;
	if (g.chunk_size > lim->max_chunk_size)
		g.chunk_size = lim->max_chunk_size;
	rc = tconn_create(fd, &g, peer, 0, 1, &tconn_ops, &t);
	if (rc) {
		if (t && t->fd >= 0) {
			tcp_refuse(t->fd, PD_ST_BUSY, deadline);
			t->fd = -1;
		}
		goto out_free;
	}
	cm_pd_encode(pd, PD_ST_OK, &g);
	rc = tcp_io_deadline(t->fd, pd, sizeof(pd), true, deadline);
	if (rc) {
		log_err("cannot accept %s: %s", peer, strerror(-rc));
		goto out_free;
	}
	rc = tconn_start(t, to->connect_ms);
	if (rc)
		goto out_free;
	log_info("accepted %s on tcp", peer);
	*out = &t->base;
	return 0;

out_free:
	if (t)
		cm_conn_destroy(&t->base);
	return rc;
}

int cm_tcp_accept(struct cm_tcp_listener *l, const struct cm_limits *lim,
		  const struct cm_timeouts *to, struct cm_conn **out)
{
	char peer[64];
	int fd, rc;

	rc = take(l, peer, sizeof(peer), &fd);
	if (rc)
		return rc;
	return cm_tcp_accept_fd(fd, peer, lim, to, out);
}

void cm_tcp_reject_fd(int fd, const char *peer, const struct cm_timeouts *to)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)to->connect_ms;
	struct cm_geom g;
	uint16_t st;

	/* Read its hello first: a version mismatch is the better answer. */
	if (server_hello(fd, peer, deadline, to->connect_ms, &g, &st) == 0)
		tcp_refuse(fd, PD_ST_BUSY, deadline);
}

int cm_tcp_reject(struct cm_tcp_listener *l, const struct cm_timeouts *to)
{
	char peer[64];
	int fd, rc;

	rc = take(l, peer, sizeof(peer), &fd);
	if (rc)
		return rc;
	cm_tcp_reject_fd(fd, peer, to);
	return 0;
}
