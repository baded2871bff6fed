/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What a chunk slot and a packed slot share on the sink: the slot flags
 * this session allows, the payload opened (decrypted, inflated) out of
 * the ring, and the bytes counted for progress. Called by sink_chunk.c
 * and sink_pack.c, so neither calls the other for them.
 */
#include "transfer/session/payload.h"
#include "transfer/session/report.h"
#include "transfer/sink/sink_int.h"

/* Worker: the payload as the source read it (opened, inflated). */
int sink_open_payload(struct sink *k, struct snk_job *j, const uint8_t **raw)
{
	return payload_open(&j->pl, &j->h, j->index, cm_slot(k->e->c, j->slot),
			    raw);
}

bool sink_flags_ok(const struct sink *k, uint16_t flags)
{
	uint16_t allowed = WIRE_SLOT_ENCRYPTED;

	if (k->p->flags & WIRE_HELLO_COMPRESS)
		allowed |= WIRE_SLOT_COMPRESSED;
	if (flags & ~allowed)
		return false;
	/* Sealed chunks only when agreed, and then nothing in the clear. */
	return !(flags & WIRE_SLOT_ENCRYPTED) == !k->p->data_key;
}

void sink_progress(struct sink *k, const char *shown, uint32_t len)
{
	k->bytes_in += len;
	if (!k->p->server)
		report_progress(k->e->o, &k->next_progress_ms, k->bytes_in,
				k->bytes_told > k->bytes_in ? k->bytes_told
							    : k->bytes_in,
				shown);
}
