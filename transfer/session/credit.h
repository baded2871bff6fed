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
 * Any slot (WIRE_FEAT_ANY_SLOT, the "_any" constructors). The sink releases
 * a slot as soon as it is drained, in any order, and lists the slots it
 * released (FREED); the source keeps them in a free list and writes the
 * next seq into the one free longest. Taking stays in seq order: the
 * sink maps each arrived seq to its slot. Bounds: at most N slots in use
 * (posted - released <= N), and no seq posted span or more past the
 * oldest one not released (low), so the immediate's low 16 bits of seq
 * name one seq when span <= 2^15 and the sink's per-seq state is span
 * entries.
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
	/* any slot (free != NULL): */
	unsigned int span; /* seqs past low that may be posted */
	uint64_t low;	   /* oldest seq not released (or posted) */
	uint16_t *free;	   /* ring of slots free, oldest first */
	unsigned int free_head, free_len;
	uint64_t *seq; /* per slot: the seq in it, or UINT64_MAX */
	uint8_t *rel;  /* per seq % span in [low, posted): released */
};

/* Slots released in order (slot = seq % slots). */
void credit_tx_init(struct credit_tx *t, unsigned int slots);
/* Any slot; 0 or -ENOMEM (credit_tx_release frees). slots <= 65536. */
int credit_tx_init_any(struct credit_tx *t, unsigned int slots,
		       unsigned int span) __attribute__((warn_unused_result));
void credit_tx_release(struct credit_tx *t);
static inline unsigned int credit_tx_avail(const struct credit_tx *t)
{
	unsigned int n = t->slots - (unsigned int)(t->posted - t->acked);
	uint64_t ahead;

	if (!t->free)
		return n;
	ahead = t->low + t->span - t->posted;
	return ahead < n ? (unsigned int)ahead : n;
}
/* Takes a credit (avail > 0): the slot for seq t->posted, then counts it. */
unsigned int credit_tx_take(struct credit_tx *t);
/*
 * Applies a slot_ack from the sink; -EPROTO if it is impossible (any
 * slot: one that is not the count of slots FREEDs named, mod 2^32: a
 * FREED lost or made up).
 */
int credit_tx_ack(struct credit_tx *t, uint32_t slot_ack)
	__attribute__((warn_unused_result));
/*
 * Any slot: the sink released the n slots slot[]. -EPROTO, with the
 * culprit's index in *bad, for a slot out of range or not in use (never
 * written, or already released: named twice).
 */
int credit_tx_freed(struct credit_tx *t, const uint16_t *slot, unsigned int n,
		    unsigned int *bad) __attribute__((warn_unused_result));

/* ---- data sink ---- */

/*
 * The sink's window: seqs [released, received) are taken (in the sink's
 * hands, drained or not), [received, released + slots) may arrive in any
 * order; received is the in-order cursor.
 */
struct credit_rx {
	unsigned int slots;
	uint64_t received; /* taken in order, = the cursor's seq */
	uint64_t released; /* drained and handed back (any slot: a count) */
	uint64_t reported; /* last released value sent to the source */
	unsigned int waiting; /* arrived, not yet taken */
	uint8_t *drained;  /* per slot: drained but not yet released */
	uint8_t *arrived;  /* per slot: arrived, not yet taken */
	/* any slot (any): */
	bool any;
	unsigned int span; /* seqs past low the source may post */
	uint64_t low;	   /* oldest seq not released */
	unsigned int held; /* taken and not released */
	uint8_t *state;	   /* per slot: RX_FREE, RX_ARRIVED, RX_TAKEN */
	uint64_t *seq;	   /* per slot not free: its seq */
	uint16_t *at;	   /* per seq % span untaken: its slot + 1, or 0 */
	uint8_t *rel;	   /* per seq % span in [low, received): released */
	uint16_t *freed;   /* released, not yet reported, oldest first */
	unsigned int nfreed;
};

/* Slots released in order: 0 or -ENOMEM. */
int credit_rx_init(struct credit_rx *r, unsigned int slots)
	__attribute__((warn_unused_result));
/* Any slot, span <= 2^15 and slots <= 65535: 0 or -ENOMEM. */
int credit_rx_init_any(struct credit_rx *r, unsigned int slots,
		       unsigned int span) __attribute__((warn_unused_result));
void credit_rx_release(struct credit_rx *r);
/*
 * Checks an arriving immediate against the window: its slot must be free
 * and hold a seq in [received, released + slots), the one whose low 16
 * bits the immediate carries. Marks it arrived. Returns the slot (>= 0)
 * and the full seq in *seq, or -EPROTO (out of the window, its slot busy,
 * a duplicate, the wrong seq16). Any slot: the slot must be free (not
 * arrived, not taken and not released) and the seq, the one of [received,
 * received + 2^16) with those low bits, below both released + slots and
 * low + span and not arrived in another slot.
 */
int credit_rx_arrive(struct credit_rx *r, uint32_t imm, uint64_t *seq)
	__attribute__((warn_unused_result));
/* Why credit_rx_arrive refused imm, in a few words for the user. */
const char *credit_rx_refusal(const struct credit_rx *r, uint32_t imm);
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
static inline uint64_t credit_rx_post_limit(const struct credit_rx *r)
{
	uint64_t lim = r->released + r->slots;

	return r->any && r->low + r->span < lim ? r->low + r->span : lim;
}
static inline bool credit_rx_could_post(const struct credit_rx *r,
					uint64_t seq_end)
{
	return seq_end <= credit_rx_post_limit(r);
}
/*
 * Marks a taken slot drained; releases the in-order prefix (any slot: the
 * slot itself, listed for the next FREED). -EPROTO if bogus.
 */
int credit_rx_drain(struct credit_rx *r, unsigned int slot)
	__attribute__((warn_unused_result));
/* Slots taken and not yet released. */
static inline unsigned int credit_rx_busy(const struct credit_rx *r)
{
	return r->any ? r->held : (unsigned int)(r->received - r->released);
}
/*
 * Any slot: moves up to max of the slots released and not reported into
 * slot[] (oldest first), counts them reported, and returns how many.
 */
unsigned int credit_rx_freed(struct credit_rx *r, uint16_t *slot,
			     unsigned int max);
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
