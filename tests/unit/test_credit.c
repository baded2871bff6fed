/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for transfer/session/credit.c, the credit arithmetic that keeps
 * both sides within the peer's receive queue and ring: widening of wrapped
 * 32-bit acks, the data source's take/ack cycle, the sink's window
 * (writes arriving in any order, taken in seq order, duplicates and
 * writes outside it refused), out-of-order drain and batched reporting, the
 * control channel's reserve for ack-only messages, and a randomized two-sided
 * simulation of the control channel that must never deadlock nor leave
 * more than C messages unconsumed. Also the window's size: the one
 * cm_connect gives a link (cm_window_slots) and the most a receiver
 * grants (server_max_window).
 */
#include "tap.h"

#include "cm/cm.h"
#include "transfer/server/server_int.h"
#include "transfer/session/credit.h"
#include "transfer/wire/wire.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* The smallest ctrl_credits cm/verbs.c accepts from a peer (its
 * CTRL_CREDITS_MIN); every value from here up must behave. */
#define CM_CTRL_CREDITS_MIN 4u

static void test_widen(void)
{
	uint64_t v = 12345;

	CHECK_EQ(credit_widen(0, 0, 0, &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(credit_widen(100, 105, 200, &v), 0);
	CHECK_EQ(v, 105);
	/* equal to the limit is fine, beyond it is not */
	CHECK_EQ(credit_widen(100, 200, 200, &v), 0);
	CHECK_EQ(credit_widen(100, 201, 200, &v), -EPROTO);
	/* backwards */
	v = 777;
	CHECK_EQ(credit_widen(100, 99, 200, &v), -EPROTO);
	CHECK_EQ(v, 777); /* untouched on error */
	/* across 2^32 */
	CHECK_EQ(credit_widen(0xfffffff0ull, 0x10, 1ull << 40, &v), 0);
	CHECK_EQ(v, 0x100000010ull);
	CHECK_EQ(credit_widen(0x3fffffffeull, 2, 1ull << 40, &v), 0);
	CHECK_EQ(v, 0x400000002ull);
	/* backwards across the wrap */
	CHECK_EQ(credit_widen(0x100000005ull, 0xfffffffe, 1ull << 40, &v),
		 -EPROTO);
	/* the biggest forward step is 2^31; one more reads as backwards */
	CHECK_EQ(credit_widen(0, 0x80000000u, 1ull << 40, &v), 0);
	CHECK_EQ(v, 0x80000000ull);
	CHECK_EQ(credit_widen(0, 0x80000001u, 1ull << 40, &v), -EPROTO);
	/* the same step beyond the limit */
	CHECK_EQ(credit_widen(0xfffffff0ull, 0x10, 0x100000000ull, &v),
		 -EPROTO);
}

static void test_tx_cycle(void)
{
	struct credit_tx t;

	credit_tx_init(&t, 3);
	CHECK_EQ(credit_tx_avail(&t), 3);
	CHECK_EQ(credit_tx_take(&t), 0);
	CHECK_EQ(credit_tx_take(&t), 1);
	CHECK_EQ(credit_tx_take(&t), 2);
	CHECK_EQ(credit_tx_avail(&t), 0);
	CHECK_EQ(credit_tx_ack(&t, 2), 0);
	CHECK_EQ(credit_tx_avail(&t), 2);
	CHECK_EQ(credit_tx_take(&t), 0); /* seq 3 wraps to slot 0 */
	CHECK_EQ(credit_tx_take(&t), 1);
	CHECK_EQ(credit_tx_avail(&t), 0);
	/* a repeated ack changes nothing; backwards or beyond is refused */
	CHECK_EQ(credit_tx_ack(&t, 2), 0);
	CHECK_EQ(credit_tx_ack(&t, 1), -EPROTO);
	CHECK_EQ(credit_tx_ack(&t, 6), -EPROTO); /* only 5 posted */
	CHECK_EQ(credit_tx_ack(&t, 5), 0);
	CHECK_EQ(credit_tx_avail(&t), 3);
	CHECK_EQ(t.acked, 5);
}

/* Many laps of the ring, and the 32-bit ack wrapping on the way. */
static void test_tx_long_run(void)
{
	struct credit_tx t;
	int bad = 0;

	credit_tx_init(&t, 5);
	t.posted = t.acked = 0xffffff00ull; /* near the 32-bit wrap */
	for (unsigned int i = 0; i < 100000; i++) {
		uint64_t seq = t.posted;

		while (credit_tx_avail(&t)) {
			if (credit_tx_take(&t) != seq % 5)
				bad++;
			seq++;
		}
		/* the sink releases 1..5 at a time */
		if (credit_tx_ack(&t, (uint32_t)(t.acked + 1 + i % 5)))
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK(t.acked > 0x100000000ull);
	CHECK(t.posted - t.acked <= 5);
}

/* Arrives and takes whatever the cursor can take: one RC queue pair. */
static int rx_in(struct credit_rx *r, uint32_t imm, uint64_t *seq)
{
	uint64_t s;
	int slot = credit_rx_arrive(r, imm, seq);

	while (slot >= 0 && credit_rx_next(r, &s) >= 0)
		credit_rx_take(r);
	return slot;
}

static void test_rx_arrive(void)
{
	struct credit_rx r;
	uint64_t seq = 99, s;

	CHECK_EQ(credit_rx_init(&r, 4), 0);
	CHECK_EQ(credit_rx_next(&r, &s), -EAGAIN);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(0, 0), &seq), 0);
	CHECK_EQ(seq, 0);
	CHECK_EQ(credit_rx_busy(&r), 0); /* arrived, not taken yet */
	CHECK_EQ(credit_rx_next(&r, &s), 0);
	CHECK_EQ(s, 0);
	credit_rx_take(&r);
	CHECK_EQ(credit_rx_busy(&r), 1);
	CHECK_EQ(credit_rx_next(&r, &s), -EAGAIN);
	/* ahead of the cursor is fine, in its own slot with its own seq */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(2, 2), &seq), 2);
	CHECK_EQ(seq, 2);
	CHECK_EQ(credit_rx_next(&r, &s), -EAGAIN); /* 1 has not come */
	/* a duplicate, a wrong seq16 for the slot, a taken slot */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(2, 2), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(1, 2), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(0, 0), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(4, 0), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(5, 1), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(1, 4), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(1, 0xffff), &seq), -EPROTO);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(3, 3), &seq), 3);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(1, 1), &seq), 1);
	CHECK_EQ(seq, 1);
	for (uint64_t want = 1; want < 4; want++) {
		CHECK_EQ(credit_rx_next(&r, &s), (int)want);
		CHECK_EQ(s, want);
		credit_rx_take(&r);
	}
	CHECK_EQ(credit_rx_busy(&r), 4);
	CHECK_EQ(r.waiting, 0);
	/* a fifth while four are unreleased: the source overran the ring */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(4, 0), &seq), -EPROTO);
	CHECK(credit_rx_could_post(&r, 4));
	CHECK(!credit_rx_could_post(&r, 5));
	CHECK_EQ(credit_rx_drain(&r, 0), 0);
	CHECK_EQ(r.released, 1);
	CHECK(credit_rx_could_post(&r, 5));
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(4, 0), &seq), 0);
	CHECK_EQ(seq, 4);
	credit_rx_release(&r);
	CHECK(r.drained == NULL);
	CHECK(r.arrived == NULL);
}

static void test_rx_drain_order(void)
{
	struct credit_rx r;
	uint64_t seq;

	CHECK_EQ(credit_rx_init(&r, 4), 0);
	for (unsigned int i = 0; i < 3; i++)
		CHECK_EQ(rx_in(&r, wire_imm(i, i), &seq), (int)i);
	/* slot 3 never arrived; slots >= 4 do not exist */
	CHECK_EQ(credit_rx_drain(&r, 3), -EPROTO);
	CHECK_EQ(credit_rx_drain(&r, 4), -EPROTO);
	/* out of order: nothing is released until slot 0 is */
	CHECK_EQ(credit_rx_drain(&r, 2), 0);
	CHECK_EQ(r.released, 0);
	CHECK_EQ(credit_rx_drain(&r, 2), -EPROTO); /* double drain */
	CHECK_EQ(credit_rx_drain(&r, 0), 0);
	CHECK_EQ(r.released, 1);
	CHECK_EQ(credit_rx_drain(&r, 0), -EPROTO); /* released already */
	CHECK_EQ(credit_rx_drain(&r, 1), 0);
	CHECK_EQ(r.released, 3); /* 1 and the waiting 2 */
	CHECK_EQ(credit_rx_busy(&r), 0);
	CHECK_EQ(credit_rx_drain(&r, 1), -EPROTO);
	/* wrap: seq 3..6 use slots 3, 0, 1, 2 */
	for (unsigned int s = 3; s < 7; s++)
		CHECK_EQ(rx_in(&r, wire_imm(s, s % 4), &seq), (int)(s % 4));
	CHECK_EQ(credit_rx_drain(&r, 1), 0);
	CHECK_EQ(credit_rx_drain(&r, 0), 0);
	CHECK_EQ(r.released, 3);
	CHECK_EQ(credit_rx_drain(&r, 3), 0);
	CHECK_EQ(r.released, 6);
	CHECK_EQ(credit_rx_drain(&r, 2), 0);
	CHECK_EQ(r.released, 7);
	credit_rx_release(&r);
}

/* Past 2^16 chunks the immediate's seq16 wraps; drains in any order. */
static void test_rx_long_run(void)
{
	struct credit_rx r;
	uint64_t seq;
	unsigned int rng = 7, bad = 0;
	const unsigned int slots = 3;

	CHECK_EQ(credit_rx_init(&r, slots), 0);
	for (uint64_t s = 0; s < 200000;) {
		unsigned int busy;

		while (credit_rx_busy(&r) < slots) {
			if (rx_in(&r, wire_imm(s, s % slots), &seq) !=
				    (int)(s % slots) ||
			    seq != s)
				bad++;
			s++;
		}
		/* drain one random busy slot */
		busy = credit_rx_busy(&r);
		for (unsigned int k = rand_r(&rng) % busy;; k = (k + 1) % busy) {
			unsigned int slot =
				(unsigned int)((r.released + k) % slots);

			if (!r.drained[slot]) {
				if (credit_rx_drain(&r, slot))
					bad++;
				break;
			}
		}
	}
	CHECK_EQ(bad, 0);
	credit_rx_release(&r);
}

static void test_rx_should_report(void)
{
	struct credit_rx r;
	uint64_t seq;

	CHECK_EQ(credit_rx_init(&r, 8), 0); /* batch: 8 / 4 = 2 */
	CHECK(!credit_rx_should_report(&r));
	for (unsigned int i = 0; i < 4; i++)
		CHECK_EQ(rx_in(&r, wire_imm(i, i), &seq), (int)i);
	CHECK_EQ(credit_rx_drain(&r, 0), 0);
	CHECK(!credit_rx_should_report(&r)); /* 1 < batch, more in hand */
	CHECK_EQ(credit_rx_drain(&r, 1), 0);
	CHECK(credit_rx_should_report(&r)); /* a batch */
	r.reported = r.released;		/* as snk_slot_ack does */
	CHECK(!credit_rx_should_report(&r));
	CHECK_EQ(credit_rx_drain(&r, 2), 0);
	CHECK(!credit_rx_should_report(&r));
	CHECK_EQ(credit_rx_drain(&r, 3), 0);
	CHECK(credit_rx_should_report(&r));
	r.reported = r.released;
	/* idle: a single unreported slot goes at once */
	CHECK_EQ(rx_in(&r, wire_imm(4, 4), &seq), 4);
	CHECK_EQ(credit_rx_drain(&r, 4), 0);
	CHECK(credit_rx_should_report(&r));
	credit_rx_release(&r);

	/* tiny rings report every slot */
	CHECK_EQ(credit_rx_init(&r, 2), 0);
	CHECK_EQ(rx_in(&r, wire_imm(0, 0), &seq), 0);
	CHECK_EQ(rx_in(&r, wire_imm(1, 1), &seq), 1);
	CHECK_EQ(credit_rx_drain(&r, 0), 0);
	CHECK(credit_rx_should_report(&r));
	credit_rx_release(&r);
}

/*
 * A window sized to a fast link (256 slots) gives credits back every
 * CREDIT_BATCH_MAX slots while the sink is busy, not every quarter of the
 * ring (64 slots, 64 MiB: what the source could not use meanwhile).
 */
static void test_rx_report_large_window(void)
{
	struct credit_rx r;
	uint64_t seq;

	CHECK_EQ(credit_rx_init(&r, 256), 0);
	for (unsigned int i = 0; i < 64; i++)
		CHECK_EQ(rx_in(&r, wire_imm(i, i), &seq), (int)i);
	for (unsigned int i = 0; i < 15; i++)
		CHECK_EQ(credit_rx_drain(&r, i), 0);
	CHECK(!credit_rx_should_report(&r)); /* 15 released, more in hand */
	CHECK_EQ(credit_rx_drain(&r, 15), 0);
	CHECK(credit_rx_should_report(&r)); /* 16: a batch, not 256 / 4 */
	r.reported = r.released;
	credit_rx_release(&r);
}

/*
 * One slow write: its slot drains last. Slots are released in order, so
 * nothing goes back while it is out (the window must cover its latency,
 * cm_window_slots), and everything behind it goes back in one report the
 * moment it is done.
 */
static void test_rx_slow_slot(void)
{
	struct credit_rx r;
	uint64_t seq;

	CHECK_EQ(credit_rx_init(&r, 64), 0);
	for (unsigned int i = 0; i < 64; i++)
		CHECK_EQ(rx_in(&r, wire_imm(i, i), &seq), (int)i);
	for (unsigned int i = 1; i < 64; i++)
		CHECK_EQ(credit_rx_drain(&r, i), 0);
	CHECK_EQ(r.released, 0);
	CHECK(!credit_rx_should_report(&r));
	CHECK(!credit_rx_could_post(&r, 65)); /* the source is stopped */
	CHECK_EQ(credit_rx_drain(&r, 0), 0);
	CHECK_EQ(r.released, 64);
	CHECK(credit_rx_should_report(&r));
	CHECK(credit_rx_could_post(&r, 128));
	credit_rx_release(&r);
}

/* ---- any slot (WIRE_FEAT_ANY_SLOT) ---- */

/* The sink's side of a FREED: its slots, and the count for slot_ack. */
static unsigned int rx_report(struct credit_rx *r, uint16_t *slot)
{
	return credit_rx_freed(r, slot, WIRE_FREED_MAX);
}

/*
 * The same slow write with any slot: every other slot goes back as soon
 * as it drains, the source writes the next seqs into them, and it runs
 * on up to the span past the slow one (then stops, which keeps the
 * immediate's 16 bits of seq unambiguous).
 */
static void test_any_slow_slot(void)
{
	unsigned int span = wire_seq_span(8), bad;
	struct credit_rx r;
	struct credit_tx t;
	uint16_t fr[WIRE_FREED_MAX];
	uint64_t seq;
	unsigned int n, stuck;

	CHECK_EQ(credit_rx_init_any(&r, 8, span), 0);
	CHECK_EQ(credit_tx_init_any(&t, 8, span), 0);
	stuck = credit_tx_take(&t); /* seq 0: the slow one */
	CHECK_EQ(rx_in(&r, wire_imm(0, stuck), &seq), (int)stuck);
	CHECK_EQ(seq, 0);
	while (credit_tx_avail(&t)) {
		uint64_t s = t.posted;
		unsigned int slot = credit_tx_take(&t);

		CHECK(slot != stuck);
		CHECK_EQ(rx_in(&r, wire_imm(s, slot), &seq), (int)slot);
		CHECK_EQ(seq, s);
		CHECK_EQ(credit_rx_drain(&r, slot), 0); /* fast: done */
		n = rx_report(&r, fr);
		CHECK_EQ(n, 1);
		CHECK_EQ(credit_tx_freed(&t, fr, n, &bad), 0);
		CHECK_EQ(credit_tx_ack(&t, (uint32_t)r.reported), 0);
		CHECK(t.posted - t.acked <= 8);
		if (t.posted > 10000)
			break;
	}
	/* it stopped at the span, with the slow one's slot still out */
	CHECK_EQ(t.posted, span);
	CHECK_EQ(t.low, 0);
	CHECK_EQ(r.low, 0);
	CHECK(!credit_rx_could_post(&r, span + 1));
	CHECK(credit_rx_could_post(&r, span));
	/* it drains: the window moves past everything drained behind it */
	CHECK_EQ(credit_rx_drain(&r, stuck), 0);
	CHECK_EQ(r.low, span);
	CHECK(credit_rx_should_report(&r)); /* idle */
	n = rx_report(&r, fr);
	CHECK_EQ(credit_tx_freed(&t, fr, n, &bad), 0);
	CHECK_EQ(t.low, span);
	CHECK_EQ(credit_tx_avail(&t), 8);
	credit_rx_release(&r);
	credit_tx_release(&t);
}

/*
 * What a FREED may name, at the source: slots in use, once. Out of range,
 * never written, already released (twice, in one FREED or two) and a
 * slot_ack that is not the count named are refused.
 */
static void test_any_tx_refusals(void)
{
	struct credit_tx t;
	uint16_t fr[4];
	unsigned int bad = 99;

	CHECK_EQ(credit_tx_init_any(&t, 4, wire_seq_span(4)), 0);
	CHECK_EQ(credit_tx_ack(&t, 0), 0);
	CHECK_EQ(credit_tx_ack(&t, 1), -EPROTO); /* nothing named yet */
	CHECK_EQ(credit_tx_take(&t), 0);
	CHECK_EQ(credit_tx_take(&t), 1);
	CHECK_EQ(credit_tx_take(&t), 2);
	fr[0] = 4; /* out of range */
	CHECK_EQ(credit_tx_freed(&t, fr, 1, &bad), -EPROTO);
	CHECK_EQ(bad, 4);
	fr[0] = 3; /* never written */
	CHECK_EQ(credit_tx_freed(&t, fr, 1, &bad), -EPROTO);
	CHECK_EQ(bad, 3);
	fr[0] = 1; /* out of order is fine */
	CHECK_EQ(credit_tx_freed(&t, fr, 1, &bad), 0);
	CHECK_EQ(credit_tx_ack(&t, 0), -EPROTO);
	CHECK_EQ(credit_tx_ack(&t, 1), 0);
	CHECK_EQ(t.low, 0); /* seq 0 is still out */
	CHECK_EQ(credit_tx_freed(&t, fr, 1, &bad), -EPROTO); /* twice */
	CHECK_EQ(bad, 1);
	fr[0] = 0;
	fr[1] = 0; /* twice in one */
	CHECK_EQ(credit_tx_freed(&t, fr, 2, &bad), -EPROTO);
	CHECK_EQ(bad, 0);
	credit_tx_release(&t);

	/* the free list: the slot free longest goes first */
	CHECK_EQ(credit_tx_init_any(&t, 3, wire_seq_span(3)), 0);
	for (unsigned int i = 0; i < 3; i++)
		CHECK_EQ(credit_tx_take(&t), i);
	CHECK_EQ(credit_tx_avail(&t), 0);
	fr[0] = 2;
	fr[1] = 0;
	CHECK_EQ(credit_tx_freed(&t, fr, 2, &bad), 0);
	CHECK_EQ(credit_tx_avail(&t), 2);
	CHECK_EQ(credit_tx_take(&t), 2);
	CHECK_EQ(credit_tx_take(&t), 0);
	CHECK_EQ(t.seq[2], 3);
	CHECK_EQ(t.seq[0], 4);
	credit_tx_release(&t);
}

/*
 * What a write may be, at the sink: into a free slot, a seq within both
 * windows (credits and span), each seq once. Taking stays in seq order
 * whatever slots the seqs came in; a drain must name a taken slot, once.
 */
static void test_any_rx_refusals(void)
{
	struct credit_rx r;
	uint16_t fr[8];
	uint64_t seq;

	CHECK_EQ(credit_rx_init_any(&r, 4, 8), 0);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(0, 4), &seq), -EPROTO);
	CHECK(strstr(credit_rx_refusal(&r, wire_imm(0, 4)), "no such"));
	/* seq 1 in slot 3 first, then seq 0 in slot 2: taken 0, 1 */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(1, 3), &seq), 3);
	CHECK_EQ(credit_rx_next(&r, &seq), -EAGAIN);
	/* slot 3 again (not free), seq 1 again in slot 0 (a duplicate) */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(2, 3), &seq), -EPROTO);
	CHECK(strstr(credit_rx_refusal(&r, wire_imm(2, 3)), "not free"));
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(1, 0), &seq), -EPROTO);
	CHECK(strstr(credit_rx_refusal(&r, wire_imm(1, 0)), "twice"));
	/* seq 4: more writes than the 4 credits */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(4, 0), &seq), -EPROTO);
	CHECK(strstr(credit_rx_refusal(&r, wire_imm(4, 0)), "credits"));
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(0, 2), &seq), 2);
	CHECK_EQ(seq, 0);
	CHECK_EQ(credit_rx_next(&r, &seq), 2);
	credit_rx_take(&r);
	CHECK_EQ(credit_rx_next(&r, &seq), 3);
	CHECK_EQ(seq, 1);
	credit_rx_take(&r);
	CHECK_EQ(credit_rx_busy(&r), 2);
	/* a taken seq again (seq 0, its low bits mean seq 65536) */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(0, 0), &seq), -EPROTO);
	/* drains: not taken, out of range, then twice */
	CHECK_EQ(credit_rx_drain(&r, 0), -EPROTO);
	CHECK_EQ(credit_rx_drain(&r, 9), -EPROTO);
	CHECK_EQ(credit_rx_drain(&r, 3), 0); /* seq 1 before seq 0 */
	CHECK_EQ(credit_rx_drain(&r, 3), -EPROTO);
	CHECK_EQ(r.low, 0);
	CHECK_EQ(r.released, 1);
	CHECK(credit_rx_could_post(&r, 5));
	CHECK(!credit_rx_could_post(&r, 6));
	/* seqs 2..4 into slots 3, 0, 1 */
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(2, 3), &seq), 3);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(4, 1), &seq), 1);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(3, 0), &seq), 0);
	for (int i = 0; i < 3; i++) {
		CHECK(credit_rx_next(&r, &seq) >= 0);
		credit_rx_take(&r);
		CHECK_EQ(credit_rx_drain(&r, (unsigned int)(i == 0   ? 3
							    : i == 1 ? 0
								     : 1)),
			 0);
	}
	CHECK_EQ(r.low, 0); /* seq 0 (slot 2) holds the span */
	CHECK_EQ(rx_report(&r, fr), 4);
	CHECK_EQ(fr[0], 3);
	CHECK_EQ(fr[3], 1);
	CHECK_EQ(r.reported, 4);
	/* seqs 5..7 fit the span of 8 past seq 0; seq 8 does not */
	for (unsigned int i = 5; i < 8; i++) {
		unsigned int slot = (i + 2) % 4; /* 3, 0, 1: slot 2 is out */

		CHECK_EQ(credit_rx_arrive(&r, wire_imm(i, slot), &seq),
			 (int)slot);
		CHECK(credit_rx_next(&r, &seq) >= 0);
		credit_rx_take(&r);
		CHECK_EQ(credit_rx_drain(&r, slot), 0);
	}
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(8, 0), &seq), -EPROTO);
	CHECK(strstr(credit_rx_refusal(&r, wire_imm(8, 0)), "oldest"));
	CHECK_EQ(credit_rx_drain(&r, 2), 0);
	CHECK_EQ(r.low, 8);
	CHECK_EQ(credit_rx_arrive(&r, wire_imm(8, 0), &seq), 0);
	credit_rx_release(&r);
}

/*
 * A randomized model of both sides: writes arrive shuffled, workers drain
 * taken slots in random order, FREEDs go back in random sizes; the source
 * never has more than N slots out nor posts past the span, the sink takes
 * every seq once and in order, and the 16-bit seqs stay unambiguous far
 * past 2^16 and 2^32 of them.
 */
static void test_any_model(void)
{
	for (unsigned int slots = 1; slots <= 9; slots += 4) {
		unsigned int span = wire_seq_span(slots), bad;
		struct credit_rx r;
		struct credit_tx t;
		uint32_t inflight[16], taken[16];
		unsigned int nin = 0, ntaken = 0, errors = 0;
		uint16_t fr[WIRE_FREED_MAX];
		uint64_t rnd = 0x9e3779b97f4a7c15ull * slots, next = 0, seq;

		CHECK_EQ(credit_rx_init_any(&r, slots, span), 0);
		CHECK_EQ(credit_tx_init_any(&t, slots, span), 0);
		t.posted = t.low = t.acked = 0xfffff000ull;
		r.received = r.low = r.released = r.reported = t.posted;
		next = t.posted;
		for (unsigned int i = 0; i < 200000; i++) {
			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			switch (rnd % 4) {
			case 0: /* post */
				if (credit_tx_avail(&t) && nin < 16) {
					uint64_t s = t.posted;

					inflight[nin++] =
						wire_imm(s, credit_tx_take(&t));
				}
				break;
			case 1: /* one write arrives, any of them */
				if (nin) {
					unsigned int k = (rnd >> 8) % nin;

					errors += credit_rx_arrive(&r,
								   inflight[k],
								   &seq) < 0;
					inflight[k] = inflight[--nin];
					while (credit_rx_next(&r, &seq) >= 0) {
						errors += seq != next++;
						taken[ntaken++] = (uint32_t)
							credit_rx_next(&r,
								       &seq);
						credit_rx_take(&r);
					}
				}
				break;
			case 2: /* a worker is done with any taken slot */
				if (ntaken) {
					unsigned int k = (rnd >> 8) % ntaken;

					errors += credit_rx_drain(&r,
								  taken[k]) < 0;
					taken[k] = taken[--ntaken];
				}
				break;
			default: /* a FREED of a few */
				if (r.nfreed) {
					unsigned int n = credit_rx_freed(
						&r, fr, 1 + (rnd >> 8) % 4);

					errors += credit_tx_freed(&t, fr, n,
								  &bad) < 0;
					errors +=
						credit_tx_ack(
							&t,
							(uint32_t)r.reported) <
						0;
				}
			}
			errors += t.posted - t.acked > slots;
			errors += t.posted > t.low + span;
			errors += t.low > r.low;
		}
		CHECK_EQ(errors, 0);
		CHECK(next > 0xfffff000ull + 10000);
		credit_rx_release(&r);
		credit_tx_release(&t);
	}
}

/* The window cm_connect gives a link when the client leaves it (0). */
static void test_window_slots(void)
{
	const uint32_t mib = 1u << 20, k64 = 1u << 16;

	/* unknown rate (TCP, a device that says none): the fallback */
	CHECK_EQ(cm_window_slots(0, mib, 0), CM_WINDOW_FALLBACK);
	CHECK_EQ(cm_window_slots(CM_WINDOW_MAX_GBPS + 1, mib, 0),
		 CM_WINDOW_FALLBACK);
	/* 25 Gb/s x 20 ms = 62.5 MB: 60 slots, under the floor */
	CHECK_EQ(cm_window_slots(25, mib, 0), CM_WINDOW_FALLBACK);
	CHECK_EQ(cm_window_slots(2, mib, 0), CM_WINDOW_FALLBACK);
	/* 100 Gb/s x 20 ms = 250 MB = 238.4 MiB: 239 slots */
	CHECK_EQ(cm_window_slots(100, mib, 0), 239);
	/* 200 and 400 Gb/s: the 256 MiB budget */
	CHECK_EQ(cm_window_slots(200, mib, 0), 256);
	CHECK_EQ(cm_window_slots(400, mib, 0), 256);
	/* small chunks: more slots for the same bytes, at most 4096 */
	CHECK_EQ(cm_window_slots(100, k64, 0), 3815);
	CHECK_EQ(cm_window_slots(400, k64, 0), CM_WINDOW_MAX_SLOTS);
	CHECK_EQ(cm_window_slots(0, k64, 0), CM_WINDOW_FALLBACK);
	/* big chunks: the budget in bytes wins over the floor */
	CHECK_EQ(cm_window_slots(0, 64 * mib, 0), 4);
	/* a smaller budget caps it, and never to nothing */
	CHECK_EQ(cm_window_slots(100, mib, 32ull * mib), 32);
	CHECK_EQ(cm_window_slots(100, mib, mib / 2), 1);
	/* a larger one does not lift the cap */
	CHECK_EQ(cm_window_slots(400, mib, 1ull << 40), 256);
}

/*
 * The most a receiver grants: its --window when set; else its memory
 * budget (256 MiB of ring, or its share of the memlock limit), never
 * less than the fallback every client got before.
 */
static void test_server_max_window(void)
{
	struct xfer_opts o;

	xfer_opts_init(&o);
	CHECK_EQ(o.link.window, 0); /* left to the link */
	CHECK_EQ(server_window_for(&o, 16, UINT64_MAX), 256);
	/* 4 sessions in 512 MiB: 128 MiB each */
	CHECK_EQ(server_window_for(&o, 4, 512ull << 20), 128);
	/* 16 MiB each: below the floor */
	CHECK_EQ(server_window_for(&o, 4, 64ull << 20), CM_WINDOW_FALLBACK);
	/* 64 KiB slots: more of them in the same bytes */
	o.link.chunk_size = 1u << 16;
	CHECK_EQ(server_window_for(&o, 4, 64ull << 20), 256);
	CHECK_EQ(server_window_for(&o, 1, UINT64_MAX), CM_WINDOW_MAX_SLOTS);
	/* its own --window is its own */
	o.link.window = 10;
	CHECK_EQ(server_window_for(&o, 4, 64ull << 20), 10);
	CHECK_EQ(server_max_window(&o, 4), 10);
	o.link.window = 0;
	CHECK(server_max_window(&o, 4) >= CM_WINDOW_FALLBACK);
}

/*
 * A source posting within its credits and a network that delivers in any
 * order: every write is accepted with its full seq, the cursor hands them
 * out in seq order, and slots drain in any order, for 20000 seqs from
 * base (the callers start just below the 16-bit wrap of the immediate's
 * seq, and below the 32-bit one).
 */
static void rx_shuffled_run(unsigned int slots, uint64_t base,
			    unsigned int seed)
{
	struct credit_rx r;
	uint64_t inflight[64], taken[64], posted = base, want = base, seq, s;
	unsigned int nin = 0, ntaken = 0, rng = seed, bad = 0;

	CHECK_EQ(credit_rx_init(&r, slots), 0);
	r.received = r.released = r.reported = base;
	while (want < base + 20000) {
		unsigned int i;
		int slot;

		/* post what the credits allow (acked = released at once) */
		while (posted < r.released + slots && rand_r(&rng) % 3)
			inflight[nin++] = posted++;
		if (nin && rand_r(&rng) % 4) {
			i = rand_r(&rng) % nin;
			slot = credit_rx_arrive(
				&r, wire_imm(inflight[i], inflight[i] % slots),
				&seq);
			if (slot != (int)(inflight[i] % slots) ||
			    seq != inflight[i])
				bad++;
			/* the same write again is refused */
			if (credit_rx_arrive(
				    &r,
				    wire_imm(inflight[i], inflight[i] % slots),
				    &seq) != -EPROTO)
				bad++;
			inflight[i] = inflight[--nin];
		}
		while ((slot = credit_rx_next(&r, &s)) >= 0) {
			if (s != want || (unsigned int)slot != want % slots)
				bad++;
			credit_rx_take(&r);
			taken[ntaken++] = want++;
		}
		if (ntaken && rand_r(&rng) % 2) {
			i = rand_r(&rng) % ntaken;
			if (credit_rx_drain(&r,
					    (unsigned int)(taken[i] % slots)))
				bad++;
			taken[i] = taken[--ntaken];
		}
		if (credit_rx_busy(&r) + r.waiting > slots)
			bad++;
	}
	CHECK_EQ(bad, 0);
	credit_rx_release(&r);
}

static void test_rx_shuffled(void)
{
	static const unsigned int sizes[] = { 1, 2, 3, 4, 7, 8, 64 };

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		rx_shuffled_run(sizes[i], 0, 1 + i);
		rx_shuffled_run(sizes[i], 0xfff0, 11 + i);
		rx_shuffled_run(sizes[i], 0x1fffffffcull, 21 + i);
	}
}

/* Every order of a full window of 4, across the 16-bit wrap. */
static void test_rx_every_permutation(void)
{
	unsigned int perm[5] = { 0, 1, 2, 3, 4 }, bad = 0, n = 0;
	const uint64_t base = 0xfffe;

	for (;;) {
		struct credit_rx r;
		uint64_t seq, s, want = base;
		int slot;

		if (credit_rx_init(&r, 5))
			break;
		r.received = r.released = r.reported = base;
		for (unsigned int i = 0; i < 5; i++) {
			uint64_t q = base + perm[i];

			if (credit_rx_arrive(&r, wire_imm(q, q % 5), &seq) !=
				    (int)(q % 5) ||
			    seq != q)
				bad++;
			while ((slot = credit_rx_next(&r, &s)) >= 0) {
				if (s != want++)
					bad++;
				credit_rx_take(&r);
			}
		}
		if (want != base + 5 || credit_rx_busy(&r) != 5)
			bad++;
		credit_rx_release(&r);
		n++;
		/* next permutation (lexicographic) */
		int i = 3, j = 4;

		while (i >= 0 && perm[i] > perm[i + 1])
			i--;
		if (i < 0)
			break;
		while (perm[j] < perm[i])
			j--;
		unsigned int t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
		for (int a = i + 1, b = 4; a < b; a++, b--) {
			t = perm[a];
			perm[a] = perm[b];
			perm[b] = t;
		}
	}
	CHECK_EQ(n, 120);
	CHECK_EQ(bad, 0);
}

/*
 * Random immediates against a model of the window: accepted exactly when
 * some seq in [received, released + slots) not yet arrived has that slot
 * and those low 16 bits, and then with that seq.
 */
static void test_rx_model(void)
{
	unsigned int rng = 99, bad = 0, accepted = 0;

	for (unsigned int slots = 1; slots <= 9; slots++) {
		struct credit_rx r;
		uint64_t base = 0xfff8 - slots, seq, s;

		if (credit_rx_init(&r, slots))
			break;
		r.received = r.released = r.reported = base;
		for (unsigned int k = 0; k < 20000; k++) {
			unsigned int slot = rand_r(&rng) % (slots + 2);
			uint64_t near =
				r.released + rand_r(&rng) % (2 * slots + 2);
			uint32_t imm = wire_imm(
				rand_r(&rng) % 8 ? near
						 : (uint64_t)rand_r(&rng),
				slot);
			int expect = -EPROTO, got;
			uint64_t eseq = 0;

			for (uint64_t q = r.received; q < r.released + slots;
			     q++) {
				if (q % slots == slot &&
				    (q & 0xffff) == (imm >> 16) &&
				    !r.arrived[slot]) {
					expect = (int)slot;
					eseq = q;
				}
			}
			got = credit_rx_arrive(&r, imm, &seq);
			if (got != expect || (got >= 0 && seq != eseq))
				bad++;
			accepted += got >= 0;
			/* move the window now and then */
			if (rand_r(&rng) % 3 == 0 &&
			    credit_rx_next(&r, &s) >= 0)
				credit_rx_take(&r);
			if (rand_r(&rng) % 3 == 0 && credit_rx_busy(&r) &&
			    credit_rx_drain(&r,
					    (unsigned int)(r.released % slots)))
				bad++;
		}
		credit_rx_release(&r);
	}
	CHECK_EQ(bad, 0);
	CHECK(accepted > 1000);
}

static void test_ctrl_reserve(void)
{
	struct credit_ctrl k;

	credit_ctrl_init(&k, 4);
	CHECK(credit_ctrl_can_send(&k, false));
	CHECK(credit_ctrl_can_send(&k, true));
	CHECK_EQ(credit_ctrl_sent(&k), 0);
	CHECK_EQ(credit_ctrl_sent(&k), 0);
	CHECK(credit_ctrl_can_send(&k, false)); /* 2 left */
	CHECK_EQ(credit_ctrl_sent(&k), 0);
	/* one left: only for an ack-only message */
	CHECK(!credit_ctrl_can_send(&k, false));
	CHECK(credit_ctrl_can_send(&k, true));
	CHECK_EQ(credit_ctrl_sent(&k), 0);
	CHECK(!credit_ctrl_can_send(&k, false));
	CHECK(!credit_ctrl_can_send(&k, true));
	/* the peer consumed 3 of our 4 and says so */
	CHECK_EQ(credit_ctrl_recv(&k, 3), 0);
	CHECK_EQ(k.consumed, 1);
	CHECK(credit_ctrl_can_send(&k, false));
	/* acks beyond what was sent, or backwards, are refused */
	CHECK_EQ(credit_ctrl_recv(&k, 5), -EPROTO);
	CHECK_EQ(credit_ctrl_recv(&k, 2), -EPROTO);
	CHECK_EQ(credit_ctrl_recv(&k, 4), 0);
	CHECK_EQ(k.acked, 4);
}

static void test_ctrl_should_ack(void)
{
	struct credit_ctrl k;

	credit_ctrl_init(&k, 16);
	for (unsigned int i = 0; i < 7; i++) {
		CHECK_EQ(credit_ctrl_recv(&k, 0), 0);
		CHECK(!credit_ctrl_should_ack(&k));
	}
	CHECK_EQ(credit_ctrl_recv(&k, 0), 0);
	CHECK(credit_ctrl_should_ack(&k)); /* half of 16 */
	/* any message we send carries the ack */
	CHECK_EQ(credit_ctrl_sent(&k), 8);
	CHECK(!credit_ctrl_should_ack(&k));
	CHECK_EQ(k.reported, 8);
	/* a 1-credit channel acks every message */
	credit_ctrl_init(&k, 1);
	CHECK(!credit_ctrl_should_ack(&k));
	CHECK_EQ(credit_ctrl_recv(&k, 0), 0);
	CHECK(credit_ctrl_should_ack(&k));
}

/*
 * Two sides exchange messages at random, each within its credits, with
 * the engine's rules: a regular message when can_send(false), an ack-only
 * one when should_ack and can_send(true); receives in order, consumed at
 * random moments. Counters start near 2^32 so that acks wrap. Checks:
 * never more than C messages unconsumed in one direction (the receive
 * queue), acks always valid, and never a state where no message is in
 * flight, nothing can be sent and yet a side is stuck.
 */
struct sim_side {
	struct credit_ctrl k;
	uint32_t q[64]; /* in flight to the peer: ctrl_ack carried */
	unsigned int qh, qn;
	uint64_t regular; /* regular messages sent */
};

static bool sim_send(struct sim_side *s, bool ack_only)
{
	if (!credit_ctrl_can_send(&s->k, ack_only))
		return false;
	s->q[(s->qh + s->qn++) % 64] = credit_ctrl_sent(&s->k);
	if (!ack_only)
		s->regular++;
	return true;
}

static void sim_run(unsigned int credits, unsigned int seed, int *bad,
		    int *deadlocks, uint64_t *regular)
{
	struct sim_side s[2];
	unsigned int rng = seed;
	const uint64_t base = 0xffffff00ull;

	for (int i = 0; i < 2; i++) {
		memset(&s[i], 0, sizeof(s[i]));
		credit_ctrl_init(&s[i].k, credits);
		s[i].k.sent = s[i].k.acked = base;
		s[i].k.consumed = s[i].k.reported = base;
	}
	for (unsigned int step = 0; step < 200000; step++) {
		int x = (int)(rand_r(&rng) & 1);
		struct sim_side *me = &s[x], *peer = &s[!x];
		unsigned int r = (unsigned int)rand_r(&rng) % 100;

		/* one engine turn: take in, say what there is, then acks */
		if (r < 60) {
			unsigned int n = (unsigned int)rand_r(&rng) % 4;

			while (n-- && peer->qn) {
				uint32_t ack = peer->q[peer->qh];

				peer->qh = (peer->qh + 1) % 64;
				peer->qn--;
				if (credit_ctrl_recv(&me->k, ack))
					(*bad)++;
			}
		}
		if (rand_r(&rng) % 100 < 50)
			sim_send(me, false);
		/* the engine's turn: acks when due */
		if (credit_ctrl_should_ack(&me->k))
			sim_send(me, true);
		for (int i = 0; i < 2; i++) {
			/* the peer's receive queue never overflows */
			if (s[i].k.sent - s[!i].k.consumed > credits)
				(*bad)++;
			if (s[i].qn > credits)
				(*bad)++;
		}
		/* stuck: nothing in flight, neither can say anything */
		if (!s[0].qn && !s[1].qn &&
		    !credit_ctrl_can_send(&s[0].k, false) &&
		    !credit_ctrl_can_send(&s[1].k, false) &&
		    !(credit_ctrl_should_ack(&s[0].k) &&
		      credit_ctrl_can_send(&s[0].k, true)) &&
		    !(credit_ctrl_should_ack(&s[1].k) &&
		      credit_ctrl_can_send(&s[1].k, true)))
			(*deadlocks)++;
		/* a side that cannot send regular messages with nothing in
		 * flight must be unblocked by an ack the peer owes */
		for (int i = 0; i < 2; i++)
			if (!s[0].qn && !s[1].qn &&
			    !credit_ctrl_can_send(&s[i].k, false) &&
			    !(credit_ctrl_should_ack(&s[!i].k) &&
			      credit_ctrl_can_send(&s[!i].k, true)))
				(*deadlocks)++;
	}
	regular[0] += s[0].regular;
	regular[1] += s[1].regular;
	CHECK(s[0].k.acked > 0x100000000ull || s[1].k.acked > 0x100000000ull);
}

static void test_ctrl_simulation(void)
{
	const unsigned int credits[] = { 2, 3, 4, 16 };

	for (size_t c = 0; c < sizeof(credits) / sizeof(credits[0]); c++) {
		for (unsigned int seed = 1; seed <= 5; seed++) {
			int bad = 0, deadlocks = 0;
			uint64_t regular[2] = { 0, 0 };

			sim_run(credits[c], seed, &bad, &deadlocks, regular);
			if (bad || deadlocks)
				printf("#   C=%u seed %u: %d bad, %d stuck\n",
				       credits[c], seed, bad, deadlocks);
			CHECK_EQ(bad, 0);
			CHECK_EQ(deadlocks, 0);
			/* and both made real progress */
			CHECK(regular[0] > 1000 && regular[1] > 1000);
		}
	}
}

/*
 * Once neither side has anything to say, the acks must die out: an
 * ack-only message must not itself make an ack due on the other side,
 * or two idle peers bounce CREDITs at each other forever. Every geometry
 * cm/ accepts (ctrl_credits >= 2) is checked.
 */
static unsigned int idle_acks(unsigned int credits, unsigned int burst)
{
	struct sim_side s[2];
	unsigned int late = 0;

	for (int i = 0; i < 2; i++) {
		memset(&s[i], 0, sizeof(s[i]));
		credit_ctrl_init(&s[i].k, credits);
	}
	for (unsigned int i = 0; i < burst; i++)
		sim_send(&s[0], false);
	for (unsigned int turn = 0; turn < 1000; turn++) {
		struct sim_side *me = &s[turn & 1], *peer = &s[!(turn & 1)];

		while (peer->qn) {
			uint32_t ack = peer->q[peer->qh];

			peer->qh = (peer->qh + 1) % 64;
			peer->qn--;
			CHECK_EQ(credit_ctrl_recv(&me->k, ack), 0);
		}
		if (credit_ctrl_should_ack(&me->k) && sim_send(me, true) &&
		    turn >= 500)
			late++;
	}
	return late;
}

static void test_ctrl_idle_quiesces(void)
{
	for (unsigned int c = CM_CTRL_CREDITS_MIN; c <= 16; c++) {
		for (unsigned int burst = 1; burst < c; burst++) {
			unsigned int late = idle_acks(c, burst);

			if (late) {
				printf("#   C=%u, %u sent: still %u acks after "
				       "500 idle turns\n",
				       c, burst, late);
				CHECK_EQ(late, 0);
				break;
			}
		}
	}
}

TAP_RUN(TAP_TEST(test_widen), TAP_TEST(test_tx_cycle),
	TAP_TEST(test_tx_long_run), TAP_TEST(test_rx_arrive),
	TAP_TEST(test_rx_drain_order), TAP_TEST(test_rx_long_run),
	TAP_TEST(test_rx_should_report), TAP_TEST(test_rx_report_large_window),
	TAP_TEST(test_rx_slow_slot), TAP_TEST(test_window_slots),
	TAP_TEST(test_server_max_window), TAP_TEST(test_rx_shuffled),
	TAP_TEST(test_rx_every_permutation), TAP_TEST(test_rx_model),
	TAP_TEST(test_ctrl_reserve), TAP_TEST(test_ctrl_should_ack),
	TAP_TEST(test_ctrl_simulation), TAP_TEST(test_ctrl_idle_quiesces),
	TAP_TEST(test_any_slow_slot), TAP_TEST(test_any_tx_refusals),
	TAP_TEST(test_any_rx_refusals), TAP_TEST(test_any_model))
