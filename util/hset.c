/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The hash set of hset.h. The table doubles before it is more than half
 * full, so a probe ends at a free entry after two steps on average.
 */
#include <errno.h>
#include <stdlib.h>

#include "util/hset.h"

static void put(uint64_t *v, size_t cap, uint64_t key)
{
	size_t i;

	for (i = key % cap; v[i]; i = (i + 1) % cap)
		;
	v[i] = key;
}

int hset_add(struct hset *s, uint64_t key)
{
	if (hset_has(s, key))
		return -EEXIST;
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		uint64_t *v = calloc(cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t j = 0; j < s->cap; j++)
			if (s->v[j])
				put(v, cap, s->v[j]);
		free(s->v);
		s->v = v;
		s->cap = cap;
	}
	put(s->v, s->cap, key);
	s->n++;
	return 0;
}

void hset_del(struct hset *s, uint64_t key)
{
	size_t i, j;

	if (!s->cap)
		return;
	for (i = key % s->cap; s->v[i] != key; i = (i + 1) % s->cap)
		if (!s->v[i])
			return;
	/*
	 * No tombstone: each later key of the probe run whose home is not
	 * cyclically in (i, j] moves back into the hole, which moves on.
	 */
	s->v[i] = 0;
	s->n--;
	for (j = (i + 1) % s->cap; s->v[j]; j = (j + 1) % s->cap) {
		size_t home = s->v[j] % s->cap;
		bool stays = i < j ? home > i && home <= j
				   : home > i || home <= j;

		if (!stays) {
			s->v[i] = s->v[j];
			s->v[j] = 0;
			i = j;
		}
	}
}

bool hset_has(const struct hset *s, uint64_t key)
{
	if (!s->cap)
		return false;
	for (size_t i = key % s->cap; s->v[i]; i = (i + 1) % s->cap)
		if (s->v[i] == key)
			return true;
	return false;
}

void hset_release(struct hset *s)
{
	free(s->v);
	*s = (struct hset){ 0 };
}
