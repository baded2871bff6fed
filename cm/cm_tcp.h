/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The TCP transport (cm/tcp_conn.c sets up, cm/tcp.c and cm/tcp_hca.c
 * run): the same struct cm_conn, ops, memory model, events and connection
 * handshake as
 * the RDMA transport of cm/rdma_cm.c and cm/verbs.c, over one TCP
 * connection, for hosts without an RDMA device. A send thread and a
 * receive thread per connection play the HCA: posted work requests go out
 * in order, incoming frames land in the oldest posted receive buffer or
 * straight in the addressed ring slot, and completions queue up for poll().
 * The protocol engine cannot tell the two transports apart.
 */
#ifndef RDCP_CM_TCP_H
#define RDCP_CM_TCP_H

#include "cm/cm.h"

struct cm_tcp_listener;

/*
 * Resolve addr (host name or literal, addr->family respected), connect
 * within to->connect_ms and agree the geometry as cm_connect() does: the
 * receiver may lower slots/chunk_size (read (*out)->geom). Returns 0 with
 * *out (freed with cm_conn_destroy), or -errno, logged: -ECONNREFUSED
 * (nobody listening, or not an rdcp receiver), -ETIMEDOUT, -EPROTO
 * (version mismatch or bad geometry), -EBUSY (receiver at its session
 * limit), -EHOSTUNREACH, -EINVAL (want out of range), -ENOMEM.
 */
int cm_tcp_connect(const struct cm_addr *addr, const struct cm_geom *want,
		   const struct cm_timeouts *to, struct cm_conn **out)
	__attribute__((warn_unused_result));

/*
 * Bind addr->host (NULL: any address; "::" or any also accepts IPv4) on
 * addr->port (0: the kernel picks; read it with getsockname() on the fd)
 * and listen. Returns 0 with *out, or -errno (logged unless quiet:
 * -EADDRINUSE, ...).
 */
int cm_tcp_listen(const struct cm_addr *addr, bool quiet,
		  struct cm_tcp_listener **out)
	__attribute__((warn_unused_result));

/* The listening socket: readable when a connection waits. Still owned. */
int cm_tcp_listener_fd(const struct cm_tcp_listener *l);

/*
 * Take the next waiting connection, run the server half of the handshake
 * (bounded by to->connect_ms) with the client's geometry clamped to lim,
 * and return the connection in *out. Returns 0, -EAGAIN when no connection
 * waits (or none can be taken now: out of descriptors or memory, see
 * cm_tcp_take), or -errno. Errors other than -EAGAIN concern that one
 * client only (the caller keeps listening); all are logged: -EPROTO (bad
 * magic, version or geometry: the client is told why, as with
 * rdma_reject), -ETIMEDOUT (client silent), -ECONNRESET.
 */
int cm_tcp_accept(struct cm_tcp_listener *l, const struct cm_limits *lim,
		  const struct cm_timeouts *to, struct cm_conn **out)
	__attribute__((warn_unused_result));

/*
 * Take the next waiting connection and refuse it as busy (the client gets
 * -EBUSY and "receiver is at its session limit"; a client of another
 * version is told that instead). Returns 0, -EAGAIN if none waits, -errno.
 */
int cm_tcp_reject(struct cm_tcp_listener *l, const struct cm_timeouts *to);

void cm_tcp_listener_destroy(struct cm_tcp_listener *l);

/*
 * The two halves of cm_tcp_accept, so a listener thread only takes the
 * socket (never blocks) and the session thread runs the handshake:
 * take returns 0 with *fd and peer filled, or -EAGAIN (none waits; or the
 * process is out of descriptors or memory: logged at most every 10 s, the
 * client at the head of the backlog told "busy" with a descriptor held in
 * reserve, accepting paused briefly; see cm_tcp_listener_prepare), or
 * -errno for a failure of the listening socket itself. accept_fd and
 * reject_fd consume fd in every case; reject_fd waits (up to
 * to->connect_ms) for the client's connect data, so a listener thread
 * refuses with cm_tcp_refuse instead.
 */
int cm_tcp_take(struct cm_tcp_listener *l, char *peer, size_t n, int *fd);
int cm_tcp_accept_fd(int fd, const char *peer, const struct cm_limits *lim,
		     const struct cm_timeouts *to, struct cm_conn **out)
	__attribute__((warn_unused_result));
void cm_tcp_reject_fd(int fd, const char *peer, const struct cm_timeouts *to);
/* accept_fd once the client's geometry want was read (cm_request_read). */
int cm_tcp_accept_geom(int fd, const char *peer, const struct cm_geom *want,
		       const struct cm_limits *lim,
		       const struct cm_timeouts *to, struct cm_conn **out)
	__attribute__((warn_unused_result));

/*
 * Refuse a taken connection as busy (as reject_fd does, a client of another
 * version is told that instead) without ever waiting: fd is answered now
 * if its connect data is there, else kept (at most 16, for up to 1 s) and
 * answered by cm_tcp_listener_prepare once it comes; beyond 16, answered
 * "busy" at once. Consumes fd. Thread-safe.
 */
void cm_tcp_refuse(struct cm_tcp_listener *l, int fd, const char *peer);

/*
 * Before each wait on the listener: moves the refusals in progress on
 * (never blocks) and returns the fd to wait on for new connections, or -1
 * while accepting pauses; lowers *timeout_ms (-1: none) to when either
 * needs another look.
 */
int cm_tcp_listener_prepare(struct cm_tcp_listener *l, int *timeout_ms);

#endif
