/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to engine.c and engine_ctrl.c: what the event loop (engine.c)
 * calls of the control channel (engine_ctrl.c). Each records a failure in
 * e (engine_fail) before it returns one.
 */
#ifndef RDCP_ENGINE_INT_H
#define RDCP_ENGINE_INT_H

#include <stdbool.h>

#include "transfer/session/engine.h"

/*
 * Records the first failure and logs why; logged: cm/ already logged it
 * (why NULL: strerror of err is kept). Returns e's error (the first one's).
 */
int engine_fail_set(struct engine *e, enum xfer_fail klass, int err,
		    const char *why, bool logged);

/*
 * Sends queued messages while credits and tx buffers last: how many were
 * posted, or -1 (the failure recorded).
 */
int engine_ctrl_flush(struct engine *e);

/*
 * An ack-only CREDIT message (may use the reserved last credit): 1 when
 * posted, 0 when it cannot go now, or < 0 (the failure recorded).
 */
int engine_ctrl_acks(struct engine *e);

/*
 * A control message received in ev's rx buffer: its tag checked, decoded,
 * its acks taken, then handed to the role or held until the role is ready
 * for it. 0 or the error.
 */
int engine_ctrl_recv(struct engine *e, const struct cm_event *ev);

/* Offers the held messages again, oldest first. 0 or the error. */
int engine_ctrl_retry_held(struct engine *e);

#endif
