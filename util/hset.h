/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A set of 64-bit hashes: open addressing, linear probing, kept at most
 * half full, so 16 to 32 bytes an element. For the names a sink must
 * remember for a whole session (each answered once: sink_resume.c; the
 * names a mirror keeps: sink_delete.c) and the listed names a walk holds
 * (walk.c). Pure: no I/O, no locking.
 */
#ifndef RDCP_HSET_H
#define RDCP_HSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hset {
	uint64_t *v; /* 0: a free entry (hset_key never gives 0) */
	size_t n, cap;
};

/* h as a key: every value but 0 is itself, 0 becomes 1. */
static inline uint64_t hset_key(uint64_t h)
{
	return h ? h : 1;
}

/*
 * Adds key (hset_key). 0, -EEXIST when it is there already, or -ENOMEM
 * (the set is as it was).
 */
int hset_add(struct hset *s, uint64_t key) __attribute__((warn_unused_result));

/* Removes key (hset_key) if it is there; never fails. */
void hset_del(struct hset *s, uint64_t key);

/* Whether key (hset_key) is in the set. */
bool hset_has(const struct hset *s, uint64_t key);

/* Frees the table; s is empty and reusable after. */
void hset_release(struct hset *s);

#endif
