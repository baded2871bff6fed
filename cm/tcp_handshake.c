/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The TCP handshake's steps that a connection's setup (cm/tcp_conn.c) and
 * a lane's join (cm/tcp_lane.c) both take, standing in for rdma_cm's
 * private data: exactly len bytes moved before a deadline
 * (tcp_io_deadline), the client's reading and judging of the server's
 * answer (tcp_client_answer), a refusal with a status (tcp_refuse), a
 * lane's join refused (cm_tcp_reject_join), a close without a reset.
 * Below both: it calls neither.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/cm_int.h"
#include "cm/tcp_int.h"
#include "util/clock.h"
#include "util/log.h"

/*
 * Moves exactly len bytes on a non-blocking socket before deadline_ms.
 * Returns 0, -ETIMEDOUT, -ECONNRESET (EOF) or -errno.
 */
int tcp_io_deadline(int fd, void *buf, size_t len, bool out,
		    uint64_t deadline_ms)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd,
				      .events = out ? POLLOUT : POLLIN };
		int64_t left = (int64_t)(deadline_ms - clock_now_ms());
		ssize_t n;

		n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Closes without a reset: everything sent goes out, then FIN. */
void tcp_close_gently(int fd)
{
	shutdown(fd, SHUT_WR);
	close(fd);
}

/*
 * Reads and judges the server's answer, as rdma_cm.c's expect() does; says
 * why not at level lvl (a lane's join: debug, its caller says it once).
 */
int tcp_client_answer(int fd, const char *peer, const struct cm_geom *want,
		      uint64_t deadline_ms, int connect_ms, enum log_level lvl,
		      struct cm_geom *out)
{
	uint8_t pd[PD_LEN];
	uint16_t ver = 0, st = 0;
	struct cm_geom g;
	int rc, prc;

	rc = tcp_io_deadline(fd, pd, sizeof(pd), false, deadline_ms);
	if (rc == -ETIMEDOUT) {
		log_msg(lvl, "cannot connect to %s: timed out after %d ms",
			peer, connect_ms);
		return rc;
	}
	if (rc == -ECONNRESET) {
		log_msg(lvl,
			"cannot connect to %s: the receiver closed the "
			"connection (is 'rdcp --listen' of this version "
			"running there on this port?)",
			peer);
		return -ECONNREFUSED;
	}
	if (rc) {
		log_msg(lvl, "cannot connect to %s: %s", peer, strerror(-rc));
		return rc;
	}
	prc = cm_pd_decode(pd, sizeof(pd), &ver, &st, &g);
	if (prc == -EPROTONOSUPPORT) {
		log_msg(lvl,
			"cannot connect to %s: the receiver speaks rdcp "
			"protocol version %u, this rdcp speaks %u: install the "
			"same rdcp version on both hosts",
			peer, ver, cm_version());
		return -EPROTO;
	}
	if (prc) {
		log_msg(lvl,
			"cannot connect to %s: connection refused (is 'rdcp "
			"--listen' running there on this port?)",
			peer);
		return -ECONNREFUSED;
	}
	if (st != PD_ST_OK) {
		log_msg(lvl, "cannot connect to %s: rejected: %s", peer,
			cm_pd_status_str(st));
		return st == PD_ST_BUSY	     ? -EBUSY
		       : st == PD_ST_REFUSED ? -EACCES
					     : -EPROTO;
	}
	if (!cm_geom_valid(&g) || g.slots > want->slots ||
	    g.chunk_size > want->chunk_size || g.ctrl_size != want->ctrl_size ||
	    g.ctrl_credits != want->ctrl_credits) {
		log_msg(lvl,
			"cannot connect to %s: the receiver answered with "
			"unusable parameters (not an rdcp receiver of this "
			"version?)",
			peer);
		return -EPROTO;
	}
	*out = g;
	return 0;
}

/* Sends a refusal with status st and closes; the client logs why. */
void tcp_refuse(int fd, uint16_t st, uint64_t deadline_ms)
{
	uint8_t pd[PD_LEN];

	cm_pd_encode(pd, st, NULL);
	int rc = tcp_io_deadline(fd, pd, sizeof(pd), true, deadline_ms);

	if (rc)
		log_debug("cannot send refusal: %s", strerror(-rc));
	tcp_close_gently(fd);
}

void cm_tcp_reject_join(struct cm_request *req)
{
	tcp_refuse(req->fd, PD_ST_REFUSED, clock_now_ms() + TCP_REFUSAL_MS);
	free(req);
}
