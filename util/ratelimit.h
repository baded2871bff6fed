/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A token bucket for --bwlimit: pure arithmetic on the caller's clock
 * (clock_now_ns() in rdcp, synthetic times in tests), no sleeping, no
 * locking. The caller asks how long to wait before n bytes may go, waits,
 * then takes them:
 *
 *	while ((d = ratelimit_delay_ns(&rl, n, now))) {
 *		(sleep d ns: nanosleep, or a timed wait that can be woken)
 *		now = clock_now_ns();
 *	}
 *	ratelimit_take(&rl, n, now);
 *
 * The bucket starts full, earns rate bytes per second and holds at most
 * burst bytes, so over T seconds at most rate * T + burst bytes go (plus
 * the one chunk in flight when a chunk is larger than burst).
 */
#ifndef RDCP_RATELIMIT_H
#define RDCP_RATELIMIT_H

#include <stdint.h>

struct ratelimit {
	uint64_t rate;	  /* bytes per second; 0 = unlimited */
	uint64_t burst;	  /* bytes the bucket holds at most */
	double tokens;	  /* bytes at last_ns; below 0 = debt still owed */
	uint64_t last_ns; /* caller's clock when tokens was last updated */
};

/*
 * Starts a full bucket at now_ns. bytes_per_sec 0 means unlimited: every
 * delay is 0 and take does nothing. burst_bytes is how much may go at once
 * after an idle spell. Make it at least one chunk plus what the rate earns
 * while the caller oversleeps (timer slack, say 1 ms): a chunk waits for
 * min(chunk, burst) tokens, and what a full bucket would earn beyond burst
 * is lost. Two chunks or ~10 ms of rate is a fair choice. burst_bytes 0
 * saves nothing up: each take waits until the previous one is paid for.
 */
void ratelimit_init(struct ratelimit *r, uint64_t bytes_per_sec,
		    uint64_t burst_bytes, uint64_t now_ns);

/*
 * Nanoseconds to wait from now_ns before n bytes may go; 0 = go now. Does
 * not consume. n may go once the bucket holds min(n, burst) bytes, so a
 * chunk larger than burst goes when the bucket is full (and any earlier
 * debt is repaid) and is never starved: the wait is at most
 * (min(n, burst) - tokens) / rate rounded up to a nanosecond. Waiting
 * exactly the returned time makes the next call return 0. Saturates at
 * UINT64_MAX (a debt that the rate cannot repay in 584 years). A now_ns
 * before the last take (another thread's older clock reading) waits from
 * that take on.
 */
uint64_t ratelimit_delay_ns(const struct ratelimit *r, uint64_t n,
			    uint64_t now_ns);

/*
 * Consumes n bytes at now_ns; always succeeds. When each take follows a
 * ratelimit_delay_ns() of 0 for the same n and now_ns, tokens never fall
 * below min(0, burst - n): no debt for a chunk of at most burst bytes, at
 * most n - burst for a larger one. A caller that takes without asking goes
 * further into debt, which later delays repay in full: debt is never forgiven,
 * so the average rate holds either way.
 */
void ratelimit_take(struct ratelimit *r, uint64_t n, uint64_t now_ns);

#endif
