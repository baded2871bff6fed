/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The connection calls of cm.h, dispatched to the RDMA transport
 * (rdma_cm.c) or the TCP one (tcp_conn.c) by addr->transport. AUTO on a
 * client: RDMA when rdma_cm resolves the peer to an RDMA device, otherwise
 * TCP, with one notice saying why (after a lost RDMA session of the same
 * copy, cm_addr.rdma_lost: also when the RDMA connect finds no path, and
 * said as that path gone). AUTO on a receiver: both listeners on
 * the same port number, TCP alone (after a notice) when the host has no
 * RDMA; one whose RDMA device is removed goes on over TCP and listens for
 * RDMA again once a device is back.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm/cm_int.h"
#include "cm/cm_tcp.h"
#include "util/clock.h"
#include "util/log.h"

struct cm_listener {
	struct cm_rdma_listener *rdma;
	struct cm_tcp_listener *tcp;
	/*
	 * AUTO whose RDMA device went: rdma_cm is tried again at relisten_ms
	 * and every RELISTEN_MS after, so that RDMA serves again once a
	 * device is back (addr's strings are the caller's options').
	 */
	struct cm_addr addr;
	uint64_t relisten_ms; /* 0: not waiting for RDMA to come back */
};

#define RELISTEN_MS 5000

#define RDMA_HINT                                                              \
	"set up a device, or Soft-RoCE: rdma link add rxe0 type rxe netdev "   \
	"eth0"

int cm_connect(const struct cm_addr *addr, const struct cm_geom *want,
	       const struct cm_timeouts *to, struct cm_conn **out)
{
	char why[200];
	int rc;

	switch (addr->transport) {
	case CM_TRANSPORT_RDMA:
		return cm_rdma_connect(addr, want, to, out);
	case CM_TRANSPORT_AUTO:
		/* A device named on the command line means RDMA, or fail. */
		if (addr->device)
			return cm_rdma_connect(addr, want, to, out);
		break;
	case CM_TRANSPORT_TCP:
		return cm_tcp_connect(addr, want, to, out);
	default:
		break;
	}
	rc = cm_rdma_probe(addr, to->resolve_ms, why, sizeof(why), NULL, 0);
	if (rc == 0) {
		rc = cm_rdma_connect(addr, want, to, out);
		/* After a lost RDMA session: the path it had may be gone. */
		if (!rc || !addr->rdma_lost || !cm_rdma_no_path(rc))
			return rc;
		snprintf(why, sizeof(why), "the RDMA connect failed: %s",
			 strerror(-rc));
	}
	if (addr->rdma_lost)
		log_warn("rdma path to %s gone (%s): going on over tcp",
			 addr->host, why);
	else
		log_warn("using TCP to %s: %s (for RDMA: %s)", addr->host, why,
			 RDMA_HINT);
	return cm_tcp_connect(addr, want, to, out);
}

bool cm_rdma_no_path(int err)
{
	switch (err) {
	case -ENODEV:	     /* no device routes there (any more) */
	case -ENETDOWN:	     /* the port went down */
	case -ENETUNREACH:   /* no route */
	case -EHOSTUNREACH:  /* route or connect: unreachable */
	case -EADDRNOTAVAIL: /* the local address is gone */
	case -ETIMEDOUT:     /* no answer at all */
		return true;
	default:
		return false;
	}
}

/*
 * cm_listen's work; quiet: a port in use is no error worth a line (the
 * range is being searched), nor is AUTO falling back to TCP alone.
 * *no_rdma is set when RDMA cannot be served at all (not a busy port).
 */
static int listen_on(const struct cm_addr *addr, bool quiet, bool *no_rdma,
		     struct cm_listener **out)
{
	struct cm_listener *l = calloc(1, sizeof(*l));
	int rc = 0;

	if (!l)
		return -ENOMEM;
	if (addr->transport != CM_TRANSPORT_TCP && !*no_rdma) {
		/* A device named on the command line means RDMA, or fail. */
		bool rdma_only = addr->transport == CM_TRANSPORT_RDMA ||
				 addr->device;

		rc = cm_rdma_listen(addr, quiet || !rdma_only, &l->rdma);
		if (rc && (rdma_only || rc == -EADDRINUSE))
			goto out_free;
		if (rc && !quiet)
			log_warn("serving TCP only: cannot listen for RDMA "
				 "(%s; %s)",
				 strerror(-rc), RDMA_HINT);
		if (rc)
			*no_rdma = true;
	}
	if (addr->transport != CM_TRANSPORT_RDMA) {
		rc = cm_tcp_listen(addr, quiet, &l->tcp);
		if (rc)
			goto out_free;
	}
	l->addr = *addr;
	*out = l;
	return 0;

out_free:
	cm_listener_destroy(l);
	return rc;
}

int cm_rdma_routes(const struct cm_addr *addr, int timeout_ms, char *why,
		   size_t whysz)
{
	return cm_rdma_probe(addr, timeout_ms, why, whysz, NULL, 0);
}

int cm_listen(const struct cm_addr *addr, struct cm_listener **out)
{
	bool no_rdma = false;

	return listen_on(addr, false, &no_rdma, out);
}

int cm_listen_range(const struct cm_addr *addr, uint16_t lo, uint16_t hi,
		    struct cm_listener **out, uint16_t *port)
{
	unsigned int n = (unsigned int)hi - lo + 1, start;
	struct cm_addr a = *addr;
	bool no_rdma = false;
	int rc = -EADDRINUSE;

	if (!lo || hi < lo)
		return -EINVAL;
	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (unsigned int)getpid();
	for (unsigned int i = 0; i < n && rc == -EADDRINUSE; i++) {
		a.port = (uint16_t)(lo + (start + i) % n);
		rc = listen_on(&a, true, &no_rdma, out);
	}
	if (rc == -EADDRINUSE)
		log_err("cannot listen: every port of %u-%u is in use", lo,
			hi);
	else if (rc)
		log_err("cannot listen on port %u: %s", a.port, strerror(-rc));
	if (!rc)
		*port = a.port;
	return rc;
}

bool cm_listener_rdma(const struct cm_listener *l)
{
	return l->rdma != NULL;
}

void cm_listener_destroy(struct cm_listener *l)
{
	if (!l)
		return;
	if (l->rdma)
		cm_rdma_listener_destroy(l->rdma);
	if (l->tcp)
		cm_tcp_listener_destroy(l->tcp);
	free(l);
}

int cm_listener_get(struct cm_listener *l, int timeout_ms,
		    struct cm_request **out)
{
	struct pollfd pfd[2];
	int n = 0, rdma = -1, tcp = -1, fd, rc;

	if (l->relisten_ms && clock_now_ms() >= l->relisten_ms) {
		/* Quiet: a try a while, until a device is back. */
		if (!cm_rdma_listen(&l->addr, true, &l->rdma)) {
			log_warn("listening for RDMA connections again");
			l->relisten_ms = 0;
		} else {
			l->relisten_ms = clock_now_ms() + RELISTEN_MS;
		}
	}
	if (l->rdma) {
		rdma = n;
		pfd[n++] = (struct pollfd){ .fd = cm_rdma_listener_fd(l->rdma),
					    .events = POLLIN };
	}
	/* -1 while accepting pauses (out of descriptors or memory). */
	fd = l->tcp ? cm_tcp_listener_prepare(l->tcp, &timeout_ms) : -1;
	if (fd >= 0) {
		tcp = n;
		pfd[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
	}
	rc = poll(pfd, (nfds_t)n, timeout_ms);
	if (rc < 0)
		return errno == EINTR || errno == ENOMEM ? -EAGAIN : -errno;
	if (rdma >= 0 && pfd[rdma].revents) {
		rc = cm_rdma_get(l->rdma, 0, out);
		/* Its device is gone (logged): TCP goes on, if served. */
		if (rc == -ENODEV && l->tcp) {
			log_warn("serving TCP only until an RDMA device is "
				 "back");
			cm_rdma_listener_destroy(l->rdma);
			l->rdma = NULL;
			l->relisten_ms = clock_now_ms() + RELISTEN_MS;
			return -EAGAIN;
		}
		return rc;
	}
	if (tcp >= 0 && pfd[tcp].revents) {
		struct cm_request *req = calloc(1, sizeof(*req));
		char peer[sizeof(req->peer)];

		/* No memory for one: taken and refused, or left waiting. */
		if (!req) {
			if (!cm_tcp_take(l->tcp, peer, sizeof(peer), &fd))
				cm_tcp_refuse(l->tcp, fd, peer);
			return -EAGAIN;
		}
		req->tcp = true;
		req->tl = l->tcp;
		rc = cm_tcp_take(l->tcp, req->peer, sizeof(req->peer),
				 &req->fd);
		if (rc) {
			free(req);
			return rc;
		}
		*out = req;
		return 0;
	}
	return -EAGAIN;
}

const char *cm_request_peer(const struct cm_request *req)
{
	return req->peer;
}

int cm_request_read(struct cm_request *req, int timeout_ms)
{
	return req->tcp ? cm_tcp_read_request(req, timeout_ms) : 0;
}

bool cm_request_join(const struct cm_request *req, struct cm_join *j)
{
	if (req->join && j)
		*j = req->j;
	return req->join;
}

int cm_accept(struct cm_request *req, const struct cm_limits *lim,
	      const struct cm_timeouts *to, struct cm_conn **out)
{
	int rc;

	if (req->join) { /* a lane: the caller should have seen it */
		log_err("refused %s: a lane join where a session opens",
			req->peer);
		cm_reject_join(req);
		return -EPROTO;
	}
	if (!req->tcp)
		return cm_rdma_accept(req, lim, to, out);
	if (req->read)
		rc = cm_tcp_accept_geom(req->fd, req->peer, &req->want, lim, to,
					out);
	else
		rc = cm_tcp_accept_fd(req->fd, req->peer, lim, to, out);
	free(req);
	return rc;
}

void cm_reject(struct cm_request *req)
{
	if (!req)
		return;
	if (!req->tcp) {
		cm_rdma_reject(req);
		return;
	}
	/* Never waits: this runs on the listener's thread. */
	cm_tcp_refuse(req->tl, req->fd, req->peer);
	free(req);
}
