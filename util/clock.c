/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Monotonic time for timeouts and transfer rates. Everything reads
 * CLOCK_MONOTONIC, which never jumps with wall-clock changes; the three
 * functions only differ in the unit they return.
 */
#include "util/clock.h"

#include <time.h>

uint64_t clock_now_ns(void)
{
	struct timespec ts;

	/* Cannot fail for CLOCK_MONOTONIC with a valid pointer. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t clock_now_ms(void)
{
	return clock_now_ns() / 1000000ull;
}

double clock_now_s(void)
{
	return (double)clock_now_ns() / 1e9;
}
