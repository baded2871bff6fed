/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * aclid.h: the ids in a Linux POSIX ACL xattr value, read and rewritten
 * in place byte by byte (little-endian whatever the host), never a struct
 * cast onto the buffer.
 */
#include <errno.h>
#include <string.h>

#include "util/aclid.h"

#define HDR 4u /* u32 version */
#define ENT 8u /* u16 tag, u16 perm, u32 id */
#define VERSION 2u

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

int aclid_count(const uint8_t *v, size_t len)
{
	if (len < HDR || (len - HDR) % ENT || le32(v) != VERSION ||
	    (len - HDR) / ENT > INT32_MAX)
		return -EINVAL;
	return (int)((len - HDR) / ENT);
}

void aclid_get(const uint8_t *v, size_t i, uint16_t *tag, uint32_t *id)
{
	const uint8_t *e = v + HDR + i * ENT;

	*tag = (uint16_t)(e[0] | e[1] << 8);
	*id = le32(e + 4);
}

void aclid_set(uint8_t *v, size_t i, uint32_t id)
{
	uint8_t *e = v + HDR + i * ENT + 4;

	e[0] = (uint8_t)id;
	e[1] = (uint8_t)(id >> 8);
	e[2] = (uint8_t)(id >> 16);
	e[3] = (uint8_t)(id >> 24);
}

void aclid_sort(uint8_t *v, size_t n)
{
	uint8_t tmp[ENT];
	uint16_t ta, tb;
	uint32_t a, b;

	for (size_t i = 1; i < n; i++) /* insertion: a few entries */
		for (size_t j = i; j > 0; j--) {
			aclid_get(v, j - 1, &ta, &a);
			aclid_get(v, j, &tb, &b);
			if (ta != tb || a <= b)
				break;
			memcpy(tmp, v + HDR + (j - 1) * ENT, ENT);
			memcpy(v + HDR + (j - 1) * ENT, v + HDR + j * ENT, ENT);
			memcpy(v + HDR + j * ENT, tmp, ENT);
		}
}
