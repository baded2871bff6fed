/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * sesspair: one whole session over a memconn pair in this process, the
 * server's end in a thread of its own, what both sides write to stderr
 * caught and handed back. The set-up the direct I/O and I/O depth tests
 * share.
 */
#ifndef RDCP_TEST_SESSPAIR_H
#define RDCP_TEST_SESSPAIR_H

#include <stddef.h>

#include "cm/cm.h"
#include "transfer/xfer.h"

struct sess_pair {
	enum xfer_fail vc, vs; /* the client's verdict, the server's */
	struct xfer_stats st;  /* the client's */
	char log[16384];       /* both sides' stderr, NUL-terminated */
};

/*
 * The client runs co over a memconn pair of geometry g; the server serves
 * so beneath root. A watchdog (alarm) of watchdog_s ends a hung run.
 * Returns 0, or -errno when the pair, the log file or the thread could
 * not be set up (out->vc and out->vs are XFER_FAIL_INTERNAL then).
 */
int sess_pair_run(const struct cm_geom *g, const struct xfer_opts *co,
		  const struct xfer_opts *so, const char *root,
		  unsigned int watchdog_s, struct sess_pair *out);

#endif
