/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What the pull tests that put the real client against a receiver of
 * their own share (test_list, test_trust): the receiver's handshake done
 * by hand, the real client run over a memconn pair against such a peer in
 * a thread, and the check that it refused the pull.
 */
#ifndef RDCP_PULLPEER_H
#define RDCP_PULLPEER_H

#include <stdbool.h>
#include <stdint.h>

#include "memconn.h"
#include "transfer/session/engine.h"
#include "transfer/xfer.h"
#include "util/aead.h"

/*
 * The receiver's side of the handshake on e: HELLO (into *h), WELCOME,
 * and with key (else no authentication) the proof of it, the tagged
 * control channel, AUTH and the data key (into data_key). Returns 0 or
 * -errno.
 */
int pp_welcome(struct engine *e, const uint8_t *key, struct wire_hello *h,
	       uint8_t data_key[AEAD_KEY_LEN]);

/*
 * The real client, session_client(co), over a memconn pair of geometry g
 * (faults: NULL, or memconn's) against peer(arg) in a thread of its own,
 * which finds its end in *b; bounded by a watchdog of watchdog_s. Both
 * ends destroyed after. Returns the client's verdict (its error printed
 * when it failed), XFER_FAIL_INTERNAL when the pair or thread cannot be.
 */
enum xfer_fail pp_run_client(const struct xfer_opts *co,
			     const struct cm_geom *g,
			     const struct memconn_faults *faults,
			     struct cm_conn **b, void *(*peer)(void *),
			     void *arg, unsigned int watchdog_s,
			     struct xfer_stats *st);

/*
 * Whether a pull ended with verdict vc and stats st was refused as a
 * protocol violation naming name (else says why on a TAP comment line).
 */
bool pp_refused(enum xfer_fail vc, const struct xfer_stats *st,
		const char *name);

#endif
