/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for util/ratelimit: the token bucket is driven by synthetic
 * clocks, so each run is deterministic and a simulated 10 s takes
 * milliseconds. Unlimited never waits; the long-run total matches
 * rate * T + burst within 1% (also with a caller that oversleeps); a chunk
 * larger than burst goes after a bounded wait; waiting the returned delay
 * is always enough; 400 Gbit/s and clocks near 2^63 and 2^64 do not
 * overflow.
 */
#include "tap.h"

#include "util/ratelimit.h"

#include <stdint.h>

#define NS_PER_S 1000000000ull
#define KIB 1024ull
#define MIB (1024ull * 1024)
/* 400 Gbit/s in bytes per second. */
#define RATE_400G (400000000000ull / 8)

/* xorshift64: a fixed-seed PRNG so every run sees the same numbers. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Sends n-byte chunks from start_ns for span_ns, waiting as told (plus up
 * to max_over_ns of oversleep when it is not 0) and taking each chunk at
 * the time it may go. Returns the bytes taken; *waits counts the waits.
 */
static uint64_t simulate(uint64_t rate, uint64_t burst, uint64_t n,
			 uint64_t start_ns, uint64_t span_ns,
			 uint64_t max_over_ns, uint64_t *waits)
{
	struct ratelimit r;
	uint64_t now = start_ns, end = start_ns + span_ns, total = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	*waits = 0;
	ratelimit_init(&r, rate, burst, now);
	for (;;) {
		uint64_t d = ratelimit_delay_ns(&r, n, now);

		if (d) {
			if (max_over_ns)
				d += rng_next(&seed) % max_over_ns;
			if (d > end - now)
				break;
			now += d;
			(*waits)++;
			/* waiting as told is always enough */
			if (!max_over_ns && ratelimit_delay_ns(&r, n, now)) {
				CHECK(!"waited the delay but must wait more");
				break;
			}
			continue;
		}
		ratelimit_take(&r, n, now);
		total += n;
	}
	return total;
}

/* |got - want| <= want / 100 */
static int within_1pct(uint64_t got, uint64_t want)
{
	uint64_t diff = got > want ? got - want : want - got;

	return diff <= want / 100;
}

static void test_unlimited(void)
{
	static const uint64_t ns[] = { 0, 1, NS_PER_S, UINT64_MAX / 2,
				       UINT64_MAX };
	static const uint64_t sizes[] = { 0, 1, MIB, UINT64_MAX };
	struct ratelimit r;

	ratelimit_init(&r, 0, 0, 5);
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			CHECK_EQ(ratelimit_delay_ns(&r, sizes[j], ns[i]), 0);
			ratelimit_take(&r, sizes[j], ns[i]);
		}
	}
	/* a million chunks never wait */
	for (uint64_t i = 0; i < 1000000; i++) {
		if (ratelimit_delay_ns(&r, MIB, 7)) {
			CHECK(!"unlimited delayed");
			break;
		}
		ratelimit_take(&r, MIB, 7);
	}
}

static void test_bucket_starts_full(void)
{
	struct ratelimit r;

	ratelimit_init(&r, 1000, 4000, 100);
	/* the burst goes at once, in any pieces */
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(ratelimit_delay_ns(&r, 1000, 100), 0);
		ratelimit_take(&r, 1000, 100);
	}
	/* then 1000 B/s: one byte per ms */
	CHECK_EQ(ratelimit_delay_ns(&r, 1, 100), 1000000);
	CHECK_EQ(ratelimit_delay_ns(&r, 500, 100), 500000000);
	CHECK_EQ(ratelimit_delay_ns(&r, 500, 100 + 200000000), 300000000);
	CHECK_EQ(ratelimit_delay_ns(&r, 500, 100 + 500000000), 0);
	/* asking does not consume */
	CHECK_EQ(ratelimit_delay_ns(&r, 500, 100 + 500000000), 0);
	/* an idle hour refills only up to burst */
	CHECK_EQ(ratelimit_delay_ns(&r, 4000, 3600 * NS_PER_S), 0);
	ratelimit_take(&r, 4000, 3600 * NS_PER_S);
	CHECK_EQ(ratelimit_delay_ns(&r, 1000, 3600 * NS_PER_S), NS_PER_S);
}

static void test_rate_10s(void)
{
	static const struct {
		uint64_t rate, burst, n;
	} c[] = {
		{ 1000, 0, 10 },
		{ 1000000, 64 * KIB, 4 * KIB },
		{ 125000000, 4 * MIB, MIB },	   /* 1 Gbit/s */
		{ 1000000000, MIB, MIB },	   /* chunk == burst */
		{ 1000000000, 256 * KIB, MIB },	   /* chunk > burst */
		{ 3000000000, 16 * MIB, 1000003 }, /* odd chunk */
		{ RATE_400G, 16 * MIB, MIB },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t want = 10 * c[i].rate + c[i].burst, waits, got;

		got = simulate(c[i].rate, c[i].burst, c[i].n, 0, 10 * NS_PER_S,
			       0, &waits);
		if (!within_1pct(got, want))
			printf("#   case %zu: took %llu, want %llu\n", i,
			       (unsigned long long)got,
			       (unsigned long long)want);
		CHECK(within_1pct(got, want));
		CHECK(waits > 0);
		/*
		 * A sleeper that wakes up to 50 us late loses nothing when
		 * burst holds a chunk plus 50 us of rate (see ratelimit.h).
		 */
		got = simulate(c[i].rate, c[i].burst, c[i].n, 0, 10 * NS_PER_S,
			       50000, &waits);
		if (c[i].burst >= c[i].n + c[i].rate / 20000)
			CHECK(within_1pct(got, want));
		/* never more than the rate allows */
		CHECK(got <= want + c[i].n);
	}
}

static void test_chunk_over_burst(void)
{
	const uint64_t rate = 1000000, burst = 64 * KIB, n = MIB;
	const uint64_t t0 = 12345;
	struct ratelimit r;
	uint64_t d, now;

	ratelimit_init(&r, rate, burst, t0);
	/* a full bucket lets the first one through at once */
	CHECK_EQ(ratelimit_delay_ns(&r, n, t0), 0);
	ratelimit_take(&r, n, t0);
	/* debt n - burst, then a full bucket: n / rate */
	d = ratelimit_delay_ns(&r, n, t0);
	CHECK(d >= n * NS_PER_S / rate);
	CHECK(d <= n * NS_PER_S / rate + 2);
	now = t0 + d;
	CHECK_EQ(ratelimit_delay_ns(&r, n, now), 0);
	ratelimit_take(&r, n, now);
	/* the debt never exceeds n - burst when the caller waits */
	CHECK(r.tokens >= -(double)(n - burst) - 1e-6);

	/* from a half-drained bucket the wait is bounded the same way */
	ratelimit_init(&r, rate, burst, 0);
	ratelimit_take(&r, burst / 2, 0);
	d = ratelimit_delay_ns(&r, n, 0);
	CHECK(d >= (burst / 2) * NS_PER_S / rate);
	CHECK(d <= (burst / 2) * NS_PER_S / rate + 2);

	/* burst 0: each chunk waits for the previous one to be paid */
	ratelimit_init(&r, rate, 0, 0);
	CHECK_EQ(ratelimit_delay_ns(&r, n, 0), 0);
	ratelimit_take(&r, n, 0);
	d = ratelimit_delay_ns(&r, n, 0);
	CHECK(d >= n * NS_PER_S / rate && d <= n * NS_PER_S / rate + 2);
}

/* Waiting the returned delay is enough, whatever the numbers. */
static void test_delay_is_enough(void)
{
	uint64_t seed = 42;
	int bad = 0;

	for (int i = 0; i < 100000; i++) {
		struct ratelimit r;
		uint64_t rate = 1 + rng_next(&seed) % RATE_400G;
		uint64_t burst = rng_next(&seed) % (64 * MIB);
		uint64_t n = 1 + rng_next(&seed) % (4 * MIB);
		uint64_t now = rng_next(&seed) >> 1, d;

		if (rate > 1000000000 && (i & 1))
			rate %= 1000000; /* slow rates too */
		rate += !rate;
		ratelimit_init(&r, rate, burst, now);
		ratelimit_take(&r, burst, now); /* empty */
		ratelimit_take(&r, rng_next(&seed) % n, now);
		now += rng_next(&seed) % NS_PER_S;
		d = ratelimit_delay_ns(&r, n, now);
		if (d > UINT64_MAX - now ||
		    ratelimit_delay_ns(&r, n, now + d) != 0)
			bad++;
		/* and not much more than enough */
		if (d > 1 && !ratelimit_delay_ns(&r, n, now + d - 3))
			bad += d > 3;
	}
	CHECK_EQ(bad, 0);
}

static void test_no_overflow(void)
{
	const uint64_t near63 = (1ull << 63) - 5 * NS_PER_S;
	const uint64_t near64 = UINT64_MAX - 20 * NS_PER_S;
	uint64_t want = 10 * RATE_400G + 16 * MIB, waits, got, d;
	struct ratelimit r;

	/* 10 s at 400 Gbit/s across 2^63, and ending just short of 2^64 */
	got = simulate(RATE_400G, 16 * MIB, MIB, near63, 10 * NS_PER_S, 0,
		       &waits);
	CHECK(within_1pct(got, want));
	got = simulate(RATE_400G, 16 * MIB, MIB, near64, 10 * NS_PER_S, 0,
		       &waits);
	CHECK(within_1pct(got, want));

	/* started at 0, asked at the end of the clock: a full bucket */
	ratelimit_init(&r, RATE_400G, 16 * MIB, 0);
	ratelimit_take(&r, 16 * MIB, 0);
	CHECK_EQ(ratelimit_delay_ns(&r, 16 * MIB, UINT64_MAX), 0);
	CHECK_EQ(ratelimit_delay_ns(&r, 16 * MIB, 1ull << 63), 0);

	/* the largest chunk: goes once, then a finite, huge wait */
	ratelimit_init(&r, RATE_400G, MIB, 1ull << 63);
	CHECK_EQ(ratelimit_delay_ns(&r, UINT64_MAX, 1ull << 63), 0);
	ratelimit_take(&r, UINT64_MAX, 1ull << 63);
	d = ratelimit_delay_ns(&r, UINT64_MAX, 1ull << 63);
	/* (2^64 - 1 - 1 MiB + 1 MiB) / 5e10 B/s ~ 3.7e17 ns */
	CHECK(d > 368934881000000000ull && d < 368934882000000000ull);

	/* a debt the rate cannot repay in 2^64 ns saturates */
	ratelimit_init(&r, 1, 0, 0);
	ratelimit_take(&r, UINT64_MAX, 0);
	CHECK(ratelimit_delay_ns(&r, 1, 0) == UINT64_MAX);
	CHECK(ratelimit_delay_ns(&r, 1, UINT64_MAX) == UINT64_MAX);

	/* the fastest rate there is */
	ratelimit_init(&r, UINT64_MAX, 0, 0);
	ratelimit_take(&r, UINT64_MAX, 0);
	d = ratelimit_delay_ns(&r, 1, 0);
	CHECK(d >= NS_PER_S && d <= NS_PER_S + 2);
}

static void test_clock_backwards(void)
{
	struct ratelimit r;

	ratelimit_init(&r, 1000, 1000, 10 * NS_PER_S);
	ratelimit_take(&r, 1000, 10 * NS_PER_S);
	/* an older clock waits from the last take and moves nothing back */
	CHECK_EQ(ratelimit_delay_ns(&r, 500, 5 * NS_PER_S),
		 5 * NS_PER_S + NS_PER_S / 2);
	ratelimit_take(&r, 0, 5 * NS_PER_S);
	CHECK_EQ(r.last_ns, 10 * NS_PER_S);
	CHECK_EQ(ratelimit_delay_ns(&r, 500, 10 * NS_PER_S), NS_PER_S / 2);
}

TAP_RUN(TAP_TEST(test_unlimited), TAP_TEST(test_bucket_starts_full),
	TAP_TEST(test_rate_10s), TAP_TEST(test_chunk_over_burst),
	TAP_TEST(test_delay_is_enough), TAP_TEST(test_no_overflow),
	TAP_TEST(test_clock_backwards))
