/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The transport tests' bounded event collector (cmpoll.h). */
#include "cmpoll.h"

#include "util/clock.h"

int tc_poll_n(struct cm_conn *c, struct cm_event *ev, int n)
{
	uint64_t end = clock_now_ms() + 3000;
	int got = 0;

	while (got < n && clock_now_ms() < end) {
		int k = c->ops->poll(c, ev + got, n - got);

		if (k < 0)
			return k;
		got += k;
		if (got < n)
			c->ops->wait(c, -1, 50);
	}
	return got;
}
