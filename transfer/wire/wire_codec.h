/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/wire*.c: the bounds-checked cursors (put/get) that
 * do all byte work of the wire format, big-endian. A cursor that would
 * run past its buffer sets err and writes or reads nothing more.
 */
#ifndef RDCP_WIRE_CODEC_H
#define RDCP_WIRE_CODEC_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct put {
	uint8_t *p;
	size_t cap, off;
	bool err;
};

struct get {
	const uint8_t *p;
	size_t len, off;
	bool err;
};

static inline void put_bytes(struct put *w, const void *v, size_t n)
{
	if (w->err || w->cap - w->off < n) {
		w->err = true;
		return;
	}
	memcpy(w->p + w->off, v, n);
	w->off += n;
}

static inline void put_u8(struct put *w, uint8_t v)
{
	put_bytes(w, &v, 1);
}

static inline void put_u16(struct put *w, uint16_t v)
{
	v = htobe16(v);
	put_bytes(w, &v, 2);
}

static inline void put_u32(struct put *w, uint32_t v)
{
	v = htobe32(v);
	put_bytes(w, &v, 4);
}

static inline void put_u64(struct put *w, uint64_t v)
{
	v = htobe64(v);
	put_bytes(w, &v, 8);
}

/* A u16 length then the bytes, no NUL; truncated to max. */
static inline void put_str(struct put *w, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	put_u16(w, (uint16_t)n);
	put_bytes(w, s, n);
}

static inline void get_bytes(struct get *r, void *v, size_t n)
{
	if (r->err || r->len - r->off < n) {
		r->err = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p + r->off, n);
	r->off += n;
}

static inline uint8_t get_u8(struct get *r)
{
	uint8_t v;

	get_bytes(r, &v, 1);
	return v;
}

static inline uint16_t get_u16(struct get *r)
{
	uint16_t v;

	get_bytes(r, &v, 2);
	return be16toh(v);
}

static inline uint32_t get_u32(struct get *r)
{
	uint32_t v;

	get_bytes(r, &v, 4);
	return be32toh(v);
}

static inline uint64_t get_u64(struct get *r)
{
	uint64_t v;

	get_bytes(r, &v, 8);
	return be64toh(v);
}

/* Reads a u16-length string into out[max + 1]; no NUL allowed inside. */
static inline void get_str(struct get *r, char *out, size_t max)
{
	uint16_t n = get_u16(r);

	if (n > max) {
		r->err = true;
		out[0] = '\0';
		return;
	}
	get_bytes(r, out, n);
	out[r->err ? 0 : n] = '\0';
	if (memchr(out, '\0', n))
		r->err = true;
}

#endif
