/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Credit arithmetic; the rules are in credit.h. */
#include <errno.h>
#include <stdlib.h>

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
	t->slots = slots;
	t->posted = 0;
	t->acked = 0;
}

unsigned int credit_tx_take(struct credit_tx *t)
{
	return (unsigned int)(t->posted++ % t->slots);
}

int credit_tx_ack(struct credit_tx *t, uint32_t slot_ack)
{
	return credit_widen(t->acked, slot_ack, t->posted, &t->acked);
}

int credit_rx_init(struct credit_rx *r, unsigned int slots)
{
	r->slots = slots;
	r->received = r->released = r->reported = 0;
	r->waiting = 0;
	r->drained = calloc(slots, 1);
	r->arrived = calloc(slots, 1);
	if (r->drained && r->arrived)
		return 0;
	credit_rx_release(r);
	return -ENOMEM;
}

void credit_rx_release(struct credit_rx *r)
{
	free(r->drained);
	free(r->arrived);
	r->drained = r->arrived = NULL;
}

int credit_rx_arrive(struct credit_rx *r, uint32_t imm, uint64_t *seq)
{
	unsigned int slot = imm & 0xffffu;
	uint64_t s;

	if (slot >= r->slots)
		return -EPROTO;
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

int credit_rx_next(const struct credit_rx *r, uint64_t *seq)
{
	unsigned int slot = (unsigned int)(r->received % r->slots);

	if (!r->waiting || !r->arrived[slot])
		return -EAGAIN;
	*seq = r->received;
	return (int)slot;
}

void credit_rx_take(struct credit_rx *r)
{
	r->arrived[r->received % r->slots] = 0;
	r->waiting--;
	r->received++;
}

int credit_rx_drain(struct credit_rx *r, unsigned int slot)
{
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

	return unreported >= batch ||
	       (unreported && r->received == r->released);
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
