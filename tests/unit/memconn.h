/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * memconn: an in-memory struct cm_conn pair that behaves like one RC queue
 * pair, for running both engines of a session in one process. It enforces
 * what the hardware would (every SEND and WRITE_WITH_IMM needs a receive
 * posted on the peer, the send queue and the CQs have fixed depths, writes
 * land only inside the ring, unsignalled WRs are retired only by a later
 * signalled one) and counts every breach in struct memconn_stats, which the
 * tests assert to be zero. Optional faults corrupt a write in flight, drop
 * a CREDIT message, delay deliveries, make the peer vanish, fail a's
 * queue pair with a fatal completion, hold acknowledgements back, or
 * shuffle deliveries across lanes as several queue pairs would.
 */
#ifndef RDCP_TEST_MEMCONN_H
#define RDCP_TEST_MEMCONN_H

#include <stdint.h>

#include "cm/cm.h"

struct memconn_faults {
	/* Flip one payload byte of data write number N (1-based) once it
	 * has landed in the ring, i.e. after the sender took its CRC. */
	uint64_t corrupt_write;
	/* Lose the Nth (1-based) CREDIT or FREED message from b to a. */
	uint64_t drop_credit;
	/* XOR byte tamper_off of the first control message of type
	 * tamper_type (enum wire_type; 0: none), either way, with
	 * tamper_xor, as a man in the middle would rewrite it. */
	uint8_t tamper_type;
	uint8_t tamper_xor;
	uint32_t tamper_off;
	/* Deliver each operation up to this many microseconds late (order
	 * on the connection is kept, as on RC). */
	unsigned int delay_max_us;
	unsigned int seed; /* for the delays */
	/* After N data writes were delivered, deliver nothing any more in
	 * either direction: no data, no messages, no completions. */
	uint64_t vanish_after_writes;
	/* Data write number N (1-based) from a fails at a with status
	 * fatal_status (cm.h: -EHOSTUNREACH a retry exceeded, -EPROTO a
	 * remote access error or an RNR) and a's QP goes to the error state
	 * as a real RC QP does: that write's error completion, then a flush
	 * (-ECONNRESET) of every WR still on a's send queue and of every
	 * receive posted on a; later posts on a are flushed at once and
	 * nothing reaches a any more. fatal_why is a's cm_conn.err. */
	uint64_t fatal_write;
	int fatal_status;
	const char *fatal_why;
	/* After N data writes were delivered, a's device reports a fatal
	 * asynchronous event (cm.h: -ENETDOWN its port went down, -ENODEV
	 * it failed or was removed): a's QP goes to error (every WR and
	 * posted receive flushed) and a's poll hands out the event, as a
	 * CLOSED with async_status and async_why as a's cm_conn.err, after
	 * the flushes (the worse order: verbs.c reports it at once when it
	 * read the event first). */
	uint64_t async_after_writes;
	int async_status;
	const char *async_why;
	/* A SEND's completion at its sender waits for the receiver's next
	 * poll after the one that could hand out its receive, and is lost if
	 * the receiver hangs up first: an RC responder acknowledges after it
	 * queued the receive completion (rxe: do_complete, then acknowledge),
	 * so a peer that polls its last message and disconnects at once may
	 * never acknowledge it. */
	bool late_acks;
	/* Deliver every control message whose type (enum wire_type) is
	 * late_type this many microseconds late, either way (and what follows
	 * it, order kept): a peer that hangs up before then loses it, as a
	 * disconnect flushes a SEND not yet on the wire. */
	uint8_t late_type;
	unsigned int late_us;
	/* Deliver as this many RC queue pairs would (0, 1: one): each
	 * side's control SENDs on lane 0, a data write into slot s on lane
	 * s % lanes (as --streams stripes them); each lane keeps its order,
	 * the lanes none among them. Operations are held and delivered in
	 * a random interleaving of the lanes (seeded by seed, so a run is
	 * reproducible), a few at a time, so writes overtake and trail each
	 * other and the control messages around them. Each sender's own
	 * completions still come in post order. Not with the other faults. */
	unsigned int lanes;
};

/* Breaches of the transport's rules (must stay 0) and plain counts. */
struct memconn_stats {
	/* violations */
	uint64_t rnr;		/* SEND/WRITE arrived, no receive posted */
	uint64_t sq_overflow;	/* a post beyond cm_sq_depth() outstanding */
	uint64_t cq_overrun;	/* a CQ held more entries than its depth */
	uint64_t bad_post;	/* index, length or slot out of range */
	uint64_t double_recv;	/* post_recv of a buffer already posted */
	uint64_t no_ring;	/* write before ring/stage existed */
	/* counts */
	uint64_t writes;	/* data writes delivered (a to b) */
	uint64_t write_bytes;	/* their bytes, headers included */
	uint64_t sends[2];	/* control messages delivered: a->b, b->a */
	uint64_t credits_dropped;
	uint64_t tampered;
	uint64_t corrupted;
	uint64_t vanished;	/* operations swallowed after vanishing */
	uint64_t flushed;	/* completions flushed by a QP in error */
	uint64_t overtaken;	/* lanes: deliveries ahead of an earlier op */
};

/*
 * Makes two connected conns: *a is the client (data source), *b the server
 * (data sink). faults may be NULL. Each is freed with cm_conn_destroy();
 * the second destroy frees the shared state. Returns 0 or -errno.
 */
int memconn_pair(const struct cm_geom *g, const struct memconn_faults *faults,
		 struct cm_conn **a, struct cm_conn **b);

/* A snapshot of the pair's counters (either conn, while one lives). */
void memconn_get_stats(struct cm_conn *c, struct memconn_stats *out);

/* Sum of the violation counters. */
uint64_t memconn_violations(const struct memconn_stats *s);

#endif
