/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the entry points of one session on a connection
 * that is already made, for xfer_copy()/xfer_serve() and the tests.
 */
#ifndef RDCP_SESSION_H
#define RDCP_SESSION_H

#include "transfer/engine.h"

/*
 * One session on an established connection of any transport (the verbs one
 * from cm/, or an in-memory pair in tests). The caller keeps c.
 */
enum xfer_fail session_client(const struct xfer_opts *o, struct cm_conn *c,
			      struct xfer_stats *st);
enum xfer_fail session_serve(const struct xfer_opts *o, int rootfd,
			     struct cm_conn *c);

#endif
