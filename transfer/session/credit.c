/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Credit arithmetic; the rules are in credit.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/session/credit.h"

int credit_widen(uint64_t last, uint32_t wire, uint64_t limit, uint64_t *out)
{
	uint64_t v = last + (uint32_t)(wire - (uint32_t)last);

	/* Acks never go backwards: a step of more than 2^31 is one. */
	if ((uint32_t)(wire - (uint32_t)last) > 0x80000000u || v > limit)
		return -EPROTO;
	*out = v;
	return 0;
}

void credit_tx_init(struct credit_tx *t, unsigned int slots)
{
	memset(t, 0, sizeof(*t));
	t->slots = slots;
}

int credit_tx_init_any(struct credit_tx *t, unsigned int slots,
		       unsigned int span)
{
	credit_tx_init(t, slots);
	t->span = span;
	t->free = calloc(slots, sizeof(*t->free));
	t->seq = calloc(slots, sizeof(*t->seq));
	t->rel = calloc(span, 1);
	if (!t->free || !t->seq || !t->rel) {
		credit_tx_release(t);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < slots; i++) {
		t->free[i] = (uint16_t)i;
		t->seq[i] = UINT64_MAX;
	}
	t->free_len = slots;
	return 0;
}

void credit_tx_release(struct credit_tx *t)
{
	free(t->free);
	free(t->seq);
	free(t->rel);
	t->free = NULL;
	t->seq = NULL;
	t->rel = NULL;
}

unsigned int credit_tx_take(struct credit_tx *t)
{
	unsigned int slot;

	if (!t->free)
		return (unsigned int)(t->posted++ % t->slots);
	slot = t->free[t->free_head];
	t->free_head = (t->free_head + 1) % t->slots;
	t->free_len--;
	t->seq[slot] = t->posted++;
	return slot;
}

int credit_tx_ack(struct credit_tx *t, uint32_t slot_ack)
{
	if (t->free) /* released slots come in FREED, by name */
		return slot_ack == (uint32_t)t->acked ? 0 : -EPROTO;
	return credit_widen(t->acked, slot_ack, t->posted, &t->acked);
}

int credit_tx_freed(struct credit_tx *t, const uint16_t *slot, unsigned int n,
		    unsigned int *bad)
{
	for (unsigned int i = 0; i < n; i++) {
		unsigned int s = slot[i];

		*bad = s;
		if (!t->free || s >= t->slots || t->seq[s] == UINT64_MAX)
			return -EPROTO;
		t->rel[t->seq[s] % t->span] = 1;
		t->seq[s] = UINT64_MAX;
		t->free[(t->free_head + t->free_len++) % t->slots] =
			(uint16_t)s;
		t->acked++;
	}
	while (t->low < t->posted && t->rel[t->low % t->span])
		t->rel[t->low++ % t->span] = 0;
	return 0;
}

int credit_rx_init(struct credit_rx *r, unsigned int slots)
{
	memset(r, 0, sizeof(*r));
	r->slots = slots;
	r->drained = calloc(slots, 1);
	r->arrived = calloc(slots, 1);
	if (r->drained && r->arrived)
		return 0;
	credit_rx_release(r);
	return -ENOMEM;
}

/* Per slot, any slot. */
enum {
	RX_FREE,
	RX_ARRIVED, /* its write came, not taken yet */
	RX_TAKEN,   /* in the sink's hands, not drained yet */
};

int credit_rx_init_any(struct credit_rx *r, unsigned int slots,
		       unsigned int span)
{
	memset(r, 0, sizeof(*r));
	r->slots = slots;
	r->any = true;
	r->span = span;
	r->state = calloc(slots, 1);
	r->seq = calloc(slots, sizeof(*r->seq));
	r->freed = calloc(slots, sizeof(*r->freed));
	r->at = calloc(span, sizeof(*r->at));
	r->rel = calloc(span, 1);
	if (r->state && r->seq && r->freed && r->at && r->rel)
		return 0;
	credit_rx_release(r);
	return -ENOMEM;
}

void credit_rx_release(struct credit_rx *r)
{
	free(r->drained);
	free(r->arrived);
	free(r->state);
	free(r->seq);
	free(r->at);
	free(r->rel);
	free(r->freed);
	r->drained = r->arrived = r->state = r->rel = NULL;
	r->seq = NULL;
	r->at = r->freed = NULL;
}

static int arrive_any(struct credit_rx *r, unsigned int slot, uint16_t seq16,
		      uint64_t *seq)
{
	/* The one seq of [received, received + 2^16) with those bits. */
	uint64_t s = r->received + (uint16_t)(seq16 - (uint16_t)r->received);

	if (r->state[slot] != RX_FREE || s >= r->released + r->slots ||
	    s >= r->low + r->span || r->at[s % r->span])
		return -EPROTO;
	r->state[slot] = RX_ARRIVED;
	r->seq[slot] = s;
	r->at[s % r->span] = (uint16_t)(slot + 1);
	r->waiting++;
	*seq = s;
	return (int)slot;
}

int credit_rx_arrive(struct credit_rx *r, uint32_t imm, uint64_t *seq)
{
	unsigned int slot = imm & 0xffffu;
	uint64_t s;

	if (slot >= r->slots)
		return -EPROTO;
	if (r->any)
		return arrive_any(r, slot, (uint16_t)(imm >> 16), seq);
	/* The one seq of the slot in [released, released + slots). */
	s = r->released +
	    (slot + r->slots - (unsigned int)(r->released % r->slots)) %
		    r->slots;
	if (s < r->received || r->arrived[slot] || (imm >> 16) != (s & 0xffffu))
		return -EPROTO;
	r->arrived[slot] = 1;
	r->waiting++;
	*seq = s;
	return (int)slot;
}

const char *credit_rx_refusal(const struct credit_rx *r, uint32_t imm)
{
	unsigned int slot = imm & 0xffffu;
	uint64_t s = r->received + (uint16_t)((imm >> 16) - r->received);

	if (slot >= r->slots)
		return "no such slot";
	if (!r->any)
		return "not the seq of its slot, or its slot is busy";
	if (r->state[slot] != RX_FREE)
		return "its slot is not free";
	if (s >= r->released + r->slots)
		return "more writes than credits";
	if (s >= r->low + r->span)
		return "seq too far past the oldest one not released";
	return "seq written twice";
}

int credit_rx_next(const struct credit_rx *r, uint64_t *seq)
{
	unsigned int slot = (unsigned int)(r->received % r->slots);

	if (r->any) {
		if (!r->waiting || !r->at[r->received % r->span])
			return -EAGAIN;
		slot = r->at[r->received % r->span] - 1u;
	} else if (!r->waiting || !r->arrived[slot]) {
		return -EAGAIN;
	}
	*seq = r->received;
	return (int)slot;
}

void credit_rx_take(struct credit_rx *r)
{
	if (r->any) {
		uint16_t *at = &r->at[r->received % r->span];

		r->state[*at - 1u] = RX_TAKEN;
		*at = 0;
		r->held++;
	} else {
		r->arrived[r->received % r->slots] = 0;
	}
	r->waiting--;
	r->received++;
}

static int drain_any(struct credit_rx *r, unsigned int slot)
{
	if (slot >= r->slots || r->state[slot] != RX_TAKEN)
		return -EPROTO;
	r->state[slot] = RX_FREE;
	r->rel[r->seq[slot] % r->span] = 1;
	while (r->low < r->received && r->rel[r->low % r->span])
		r->rel[r->low++ % r->span] = 0;
	r->held--;
	r->released++;
	r->freed[r->nfreed++] = (uint16_t)slot;
	return 0;
}

unsigned int credit_rx_freed(struct credit_rx *r, uint16_t *slot,
			     unsigned int max)
{
	unsigned int n = r->nfreed < max ? r->nfreed : max;

	memcpy(slot, r->freed, n * sizeof(*slot));
	memmove(r->freed, r->freed + n, (r->nfreed - n) * sizeof(*slot));
	r->nfreed -= n;
	r->reported += n;
	return n;
}

int credit_rx_drain(struct credit_rx *r, unsigned int slot)
{
	if (r->any)
		return drain_any(r, slot);
	if (slot >= r->slots || r->drained[slot] ||
	    (uint64_t)((slot + r->slots - r->released % r->slots) % r->slots) >=
		    r->received - r->released)
		return -EPROTO;
	r->drained[slot] = 1;
	while (r->released < r->received &&
	       r->drained[r->released % r->slots]) {
		r->drained[r->released % r->slots] = 0;
		r->released++;
	}
	return 0;
}

bool credit_rx_should_report(const struct credit_rx *r)
{
	uint64_t unreported = r->released - r->reported;
	unsigned int batch = r->slots / 4;

	if (batch > CREDIT_BATCH_MAX)
		batch = CREDIT_BATCH_MAX;
	if (!batch)
		batch = 1;

	return unreported >= batch || (unreported && !credit_rx_busy(r));
}

void credit_ctrl_init(struct credit_ctrl *k, unsigned int credits)
{
	k->credits = credits;
	k->sent = k->acked = k->consumed = k->reported = 0;
}

bool credit_ctrl_can_send(const struct credit_ctrl *k, bool ack_only)
{
	uint64_t avail = k->credits - (k->sent - k->acked);

	return avail >= (ack_only ? 1u : 2u);
}

uint32_t credit_ctrl_sent(struct credit_ctrl *k)
{
	k->sent++;
	k->reported = k->consumed;
	return (uint32_t)k->consumed;
}

int credit_ctrl_recv(struct credit_ctrl *k, uint32_t ctrl_ack)
{
	credit_ctrl_consume(k);
	return credit_ctrl_ack(k, ctrl_ack);
}

int credit_ctrl_ack(struct credit_ctrl *k, uint32_t ctrl_ack)
{
	return credit_widen(k->acked, ctrl_ack, k->sent, &k->acked);
}

void credit_ctrl_consume(struct credit_ctrl *k)
{
	k->consumed++;
}

bool credit_ctrl_should_ack(const struct credit_ctrl *k)
{
	unsigned int half = k->credits / 2 ? k->credits / 2 : 1;

	return k->consumed - k->reported >= half;
}
