/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A helper the transport tests share (test_tcp, test_lanes): collect a
 * connection's completions and messages as they come, bounded in time.
 */
#ifndef RDCP_TEST_CMPOLL_H
#define RDCP_TEST_CMPOLL_H

#include "cm/cm.h"

/*
 * Polls c until n events are in ev (or 3 s passed, waiting 50 ms at a
 * time on c): how many came, or the poll's -errno.
 */
int tc_poll_n(struct cm_conn *c, struct cm_event *ev, int n);

#endif
