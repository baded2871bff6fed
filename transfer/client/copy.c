/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * xfer_copy, the client's entry point: a session to a receiver that is
 * already running (client.c), one big file over several (split.c), or one
 * started over ssh or by the far end of a copy between two hosts
 * (remote.c). The top of the client: none of them calls it, nor each
 * other but remote.c -> client.c and split.c -> client.c.
 */
#include <string.h>

#include "transfer/client/client_int.h"
#include "transfer/session/session.h"
#include "transfer/xfer.h"

enum xfer_fail xfer_copy(const struct xfer_opts *o, struct xfer_stats *st)
{
	struct cm_geom geom = client_geom(o);
	struct cm_timeouts to = session_timeouts(o);
	struct cm_conn *c;
	int rc;

	enum xfer_fail v;

	memset(st, 0, sizeof(*st));
	if (o->ssh.rsh || o->ssh.boot_line)
		return remote_copy(o, st);
	if (!split_copy(o, st, &v))
		return v;
	rc = cm_connect(&o->link.addr, &geom, &to, &c);
	if (rc)
		return session_connect_fail(rc);
	return client_run(o, c, st, NULL);
}
