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

/*
 * The client's session on a connection it made (c is destroyed after),
 * with st's transport and device filled in.
 */
enum xfer_fail client_run(const struct xfer_opts *o, struct cm_conn *c,
			  struct xfer_stats *st);

/*
 * xfer_copy when the peer is started over ssh (o->rsh) or was
 * (o->boot_line): transfer/client/remote.c.
 */
enum xfer_fail remote_copy(const struct xfer_opts *o, struct xfer_stats *st);

#endif
