/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Credit accounting, pure arithmetic with no I/O so that it can be tested
 * exhaustively.
 *
 * Data credits. The sink's ring has N slots. The source writes chunk seq
 * into slot seq % N and may have at most N writes that the sink has not
 * released. The writes may arrive in any order within that window (several
 * queue pairs order nothing among themselves): each is placed by its slot,
 * and the sink takes them strictly in seq order (credit_rx_next), so what
 * it does with them sees one ordered stream. The sink releases slots
 * strictly in order (a slot drains out of order when several workers
 * verify in parallel, but is only handed back once every earlier slot is
 * drained), reposts a receive for each, and reports the cumulative release
 * count in every control message (slot_ack). So credits = N - (posted -
 * acked), and a credit is always a drained slot with a receive posted
 * behind it.
 *
 * Control credits. Each side may have at most C control messages the peer
 * has not consumed; consumption is acked cumulatively (ctrl_ack) in every
 * message. One credit is kept back for a message that carries only acks,
 * so two sides that both run out can always tell each other: an ordinary
 * message needs 2 credits, an ack-only message 1.
 *
 * Counters on the wire are 32 bits and wrap; they are widened here against
 * the last known 64-bit value, and an ack that goes backwards or beyond
 * what was sent is a protocol error.
 */
#ifndef RDCP_CREDIT_H
#define RDCP_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

/* Widens a wrapped 32-bit cumulative counter; -EPROTO if impossible. */
int credit_widen(uint64_t last, uint32_t wire, uint64_t limit, uint64_t *out)
	__attribute__((warn_unused_result));

/* ---- data source ---- */

struct credit_tx {
	unsigned int slots;
	uint64_t posted; /* writes posted, = next seq */
	uint64_t acked;	 /* slots the sink reported released */
};

void credit_tx_init(struct credit_tx *t, unsigned int slots);
static inline unsigned int credit_tx_avail(const struct credit_tx *t)
{
	return t->slots - (unsigned int)(t->posted - t->acked);
}
/* Takes a credit: returns the slot for seq t->posted, then counts it. */
unsigned int credit_tx_take(struct credit_tx *t);
/* Applies a slot_ack from the sink; -EPROTO if it is impossible. */
int credit_tx_ack(struct credit_tx *t, uint32_t slot_ack)
	__attribute__((warn_unused_result));

/* ---- data sink ---- */

/*
 * The sink's window: seqs [released, received) are taken (in the sink's
 * hands, drained or not), [received, released + slots) may arrive in any
 * order; received is the in-order cursor.
 */
struct credit_rx {
	unsigned int slots;
	uint64_t received; /* taken in order, = the cursor's seq */
	uint64_t released; /* drained in order and handed back */
	uint64_t reported; /* last released value sent to the source */
	unsigned int waiting; /* arrived, not yet taken */
	uint8_t *drained;  /* per slot: drained but not yet released */
	uint8_t *arrived;  /* per slot: arrived, not yet taken */
};

int credit_rx_init(struct credit_rx *r, unsigned int slots)
	__attribute__((warn_unused_result));
void credit_rx_release(struct credit_rx *r);
/*
 * Checks an arriving immediate against the window: its slot must be free
 * and hold a seq in [received, released + slots), the one whose low 16
 * bits the immediate carries. Marks it arrived. Returns the slot (>= 0)
 * and the full seq in *seq, or -EPROTO (out of the window, its slot busy,
 * a duplicate, the wrong seq16).
 */
int credit_rx_arrive(struct credit_rx *r, uint32_t imm, uint64_t *seq)
	__attribute__((warn_unused_result));
/*
 * The in-order cursor: the slot of seq received (in *seq) if it has
 * arrived, else -EAGAIN. Takes nothing.
 */
int credit_rx_next(const struct credit_rx *r, uint64_t *seq)
	__attribute__((warn_unused_result));
/* Takes the cursor's write (credit_rx_next said it arrived): seq + 1. */
void credit_rx_take(struct credit_rx *r);
/*
 * Whether the source may have posted up to seq_end (exclusive) by the
 * credits this side gave: seq_end <= released + slots.
 */
static inline bool credit_rx_could_post(const struct credit_rx *r,
					uint64_t seq_end)
{
	return seq_end <= r->released + r->slots;
}
/* Marks a slot drained; releases the in-order prefix. -EPROTO if bogus. */
int credit_rx_drain(struct credit_rx *r, unsigned int slot)
	__attribute__((warn_unused_result));
/* Slots in the ring that arrived and are not yet released. */
static inline unsigned int credit_rx_busy(const struct credit_rx *r)
{
	return (unsigned int)(r->received - r->released);
}
/*
 * Whether to send the released count now: a quarter of the ring (at most
 * CREDIT_BATCH_MAX slots) is unreported, or anything is and the sink has
 * nothing else in hand. Slots released and not yet reported are slots
 * the source cannot use: a batch of a quarter costs a quarter of the
 * window, and the cap keeps a large window (one sized to a fast link,
 * credit_window_auto) from giving back credits only every 64 MiB or more.
 * A CREDIT per 16 slots is one control message per 16 MiB at the default
 * chunk size: nothing beside the data.
 */
#define CREDIT_BATCH_MAX 16u
bool credit_rx_should_report(const struct credit_rx *r);

/* ---- control messages, both directions ---- */

struct credit_ctrl {
	unsigned int credits;
	uint64_t sent;	   /* messages we sent */
	uint64_t acked;	   /* of those, consumed by the peer */
	uint64_t consumed; /* messages we consumed from the peer */
	uint64_t reported; /* consumed value in our last message */
};

void credit_ctrl_init(struct credit_ctrl *k, unsigned int credits);
/* Whether a message may be sent now: ack_only ones may use the reserve. */
bool credit_ctrl_can_send(const struct credit_ctrl *k, bool ack_only);
/* Counts a sent message and returns the ctrl_ack to put in it. */
uint32_t credit_ctrl_sent(struct credit_ctrl *k);
/* Counts a consumed message and applies the ctrl_ack it carried. */
int credit_ctrl_recv(struct credit_ctrl *k, uint32_t ctrl_ack)
	__attribute__((warn_unused_result));
/*
 * The two halves of credit_ctrl_recv, for a message held before it is
 * consumed: its ctrl_ack applies when it comes, its credit goes back
 * (credit_ctrl_consume) only when it is taken.
 */
int credit_ctrl_ack(struct credit_ctrl *k, uint32_t ctrl_ack)
	__attribute__((warn_unused_result));
void credit_ctrl_consume(struct credit_ctrl *k);
/* Whether enough is unacked that an ack-only message is due. */
bool credit_ctrl_should_ack(const struct credit_ctrl *k);

#endif
