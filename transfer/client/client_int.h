/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/client/: what copy.c and remote.c take from the
 * client's session (client.c) and from each other.
 */
#ifndef RDCP_CLIENT_INT_H
#define RDCP_CLIENT_INT_H

#include "cm/cm.h"
#include "transfer/xfer.h"

/* The geometry a client asks for: o's window and chunk size. */
struct cm_geom client_geom(const struct xfer_opts *o);

/* What a push's session tells --split's gate once its handshake is done. */
struct client_ready {
	uint32_t chunk_size; /* the session's chunk: ranges align to it */
	unsigned int rails;  /* the receiver's rails it reached (1: one) */
	bool rdma;	     /* over RDMA (else TCP) */
};

/*
 * --split's gate (split.c): ready is called by a push's session after its
 * handshake, before anything of the copy is sent, and may wait (bounded,
 * less than the peer's timeout): 0 with *range the byte range of the one
 * SRC to send (NULL: the whole file), or -ECANCELED: the session ends
 * with nothing sent (XFER_FAIL_CANCELED).
 */
struct client_gate {
	int (*ready)(void *arg, const struct client_ready *info,
		     const struct xfer_range **range);
	void *arg;
};

/*
 * The client's session on a connection it made (c is destroyed after),
 * with st's transport and device filled in; gate NULL or --split's.
 */
enum xfer_fail client_run(const struct xfer_opts *o, struct cm_conn *c,
			  struct xfer_stats *st,
			  const struct client_gate *gate);

/*
 * xfer_copy of one regular file in byte ranges over several sessions
 * (--split, transfer/client/split.c) when o asks for it and it can be
 * done: 1 when it cannot (the caller copies as ever, st untouched), else
 * 0 with *v the copy's verdict and st its numbers.
 */
int split_copy(const struct xfer_opts *o, struct xfer_stats *st,
	       enum xfer_fail *v);

/*
 * xfer_copy when the peer is started over ssh (o->rsh) or was
 * (o->boot_line): transfer/client/remote.c.
 */
enum xfer_fail remote_copy(const struct xfer_opts *o, struct xfer_stats *st);

#endif
