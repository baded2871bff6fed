/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Token bucket arithmetic for --bwlimit. Times stay uint64_t nanoseconds
 * and are only subtracted (now - last, never now + x), so a clock near
 * 2^63 or 2^64 cannot overflow; the level is kept in double bytes, where
 * rate * elapsed cannot overflow either (400 Gbit/s for 2^64 ns is ~1e21
 * bytes, far inside a double) and fractions of a byte earned between two
 * close calls are kept rather than lost.
 */
#include "util/ratelimit.h"

#define RL_NS_PER_S 1e9
/* 2^64 as a double: the first value that does not fit a uint64_t. */
#define RL_U64_LIMIT 18446744073709551616.0

void ratelimit_init(struct ratelimit *r, uint64_t bytes_per_sec,
		    uint64_t burst_bytes, uint64_t now_ns)
{
	r->rate = bytes_per_sec;
	r->burst = burst_bytes;
	r->tokens = (double)burst_bytes;
	r->last_ns = now_ns;
}

/*
 * Bytes in the bucket at now_ns: what it held at last_ns plus what the
 * rate earned since, capped at burst. A time at or before last_ns earns
 * nothing.
 */
static double rl_level(const struct ratelimit *r, uint64_t now_ns)
{
	double level, burst = (double)r->burst;

	if (now_ns <= r->last_ns)
		return r->tokens;
	level = r->tokens +
		(double)r->rate * (double)(now_ns - r->last_ns) / RL_NS_PER_S;
	return level < burst ? level : burst;
}

/* Whole nanoseconds, rounded up, for the rate to earn need bytes. */
static uint64_t rl_ns_for(const struct ratelimit *r, double need)
{
	double ns = need * RL_NS_PER_S / (double)r->rate;
	uint64_t d;

	if (ns >= RL_U64_LIMIT)
		return UINT64_MAX;
	d = (uint64_t)ns;
	return (double)d < ns ? d + 1 : d;
}

uint64_t ratelimit_delay_ns(const struct ratelimit *r, uint64_t n,
			    uint64_t now_ns)
{
	uint64_t ready, elapsed, behind;
	double want;

	if (!r->rate)
		return 0;
	want = (double)(n < r->burst ? n : r->burst);
	if (r->tokens >= want)
		return 0;
	/*
	 * The bucket holds want bytes ready ns after last_ns (the cap at
	 * burst >= want does not delay that). The time is worked out from
	 * the stored state alone, never from now_ns, so asking again after
	 * waiting the answer gives exactly 0: no float rounding in between.
	 */
	ready = rl_ns_for(r, want - r->tokens);
	if (ready == UINT64_MAX)
		return UINT64_MAX; /* saturated: not within the clock's range */
	if (now_ns >= r->last_ns) {
		elapsed = now_ns - r->last_ns;
		return ready > elapsed ? ready - elapsed : 0;
	}
	/* an older clock reading (another thread's) waits from last_ns */
	behind = r->last_ns - now_ns;
	return ready > UINT64_MAX - behind ? UINT64_MAX : ready + behind;
}

void ratelimit_take(struct ratelimit *r, uint64_t n, uint64_t now_ns)
{
	if (!r->rate)
		return;
	r->tokens = rl_level(r, now_ns) - (double)n;
	if (now_ns > r->last_ns)
		r->last_ns = now_ns;
}
