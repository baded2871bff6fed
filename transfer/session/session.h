/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: a session's two ends, the client (client.c) and the
 * receiver (server.c), and the steps and mappings they share (session.c).
 */
#ifndef RDCP_SESSION_H
#define RDCP_SESSION_H

#include <stdbool.h>

#include "transfer/session/engine.h"

/* How long each handshake message may take to come. */
#define SESSION_HANDSHAKE_MS 15000

/*
 * One session on an established connection of any transport (the verbs one
 * from cm/, or an in-memory pair in tests): the client's (client.c) or the
 * receiver's (server.c, serving beneath rootfd). Each returns the session's
 * verdict; the caller keeps c.
 */
enum xfer_fail session_client(const struct xfer_opts *o, struct cm_conn *c,
			      struct xfer_stats *st);
enum xfer_fail session_serve(const struct xfer_opts *o, int rootfd,
			     struct cm_conn *c);

/* cm/'s resolve and connect bounds from o's connect timeout. */
struct cm_timeouts session_timeouts(const struct xfer_opts *o);

/* The verdict on a failed cm_connect()/cm_accept() that returned rc. */
enum xfer_fail session_connect_fail(int rc);

/*
 * The verdict on a finished session: the engine's failure if it failed,
 * else from the files' results in st (XFER_OK when none failed).
 */
enum xfer_fail session_verdict(const struct engine *e,
			       const struct xfer_stats *st);

/*
 * The ring step of the handshake. The sink registers its ring and announces
 * it; the source waits for that announcement and sets up its staging
 * buffers for it. Returns 0 or the error of engine_fail() (said there).
 */
int session_rings(struct engine *e, bool sink);

/*
 * The lanes a client asks for on c: --streams, else the default rule
 * (rdcp(1), --streams): over RDMA 4 when the port runs at 100 Gb/s or more, 2
 * below (or unknown); over TCP 1. SESSION_STREAMS_AUTO 0 would make the
 * default 1 everywhere (a build whose sink cannot take a file's chunks
 * out of order).
 */
#define SESSION_STREAMS_AUTO 1
unsigned int session_streams(const struct xfer_opts *o,
			     const struct cm_conn *c);

#endif
