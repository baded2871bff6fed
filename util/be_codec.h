/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The one big-endian codec of the tree: bounds-checked cursors that put
 * fields into a buffer and get them out again. Every byte layout rdcp
 * writes (the wire messages, the CM private data, the TCP frame header,
 * the range state file, rdcp-mpi's messages) goes through these. A cursor
 * that would run past its buffer sets err and writes or reads nothing
 * more (a get then yields zeros), so a codec checks err once at the end.
 */
#ifndef RDCP_BE_CODEC_H
#define RDCP_BE_CODEC_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct be_put {
	uint8_t *p;
	size_t cap, off; /* bytes */
	bool err;
};

struct be_get {
	const uint8_t *p;
	size_t len, off; /* bytes */
	bool err;
};

/* A cursor writing p[0..cap). */
static inline struct be_put be_put_init(void *p, size_t cap)
{
	return (struct be_put){ .p = p, .cap = cap };
}

/* A cursor reading p[0..len). */
static inline struct be_get be_get_init(const void *p, size_t len)
{
	return (struct be_get){ .p = p, .len = len };
}

static inline void be_put_bytes(struct be_put *w, const void *v, size_t n)
{
	if (w->err || w->cap - w->off < n) {
		w->err = true;
		return;
	}
	memcpy(w->p + w->off, v, n);
	w->off += n;
}

/* n zero bytes (padding). */
static inline void be_put_zeros(struct be_put *w, size_t n)
{
	if (w->err || w->cap - w->off < n) {
		w->err = true;
		return;
	}
	memset(w->p + w->off, 0, n);
	w->off += n;
}

static inline void be_put_u8(struct be_put *w, uint8_t v)
{
	be_put_bytes(w, &v, 1);
}

static inline void be_put_u16(struct be_put *w, uint16_t v)
{
	v = htobe16(v);
	be_put_bytes(w, &v, 2);
}

static inline void be_put_u32(struct be_put *w, uint32_t v)
{
	v = htobe32(v);
	be_put_bytes(w, &v, 4);
}

static inline void be_put_u64(struct be_put *w, uint64_t v)
{
	v = htobe64(v);
	be_put_bytes(w, &v, 8);
}

/* A u16 length then the bytes, no NUL; truncated to max. */
static inline void be_put_str(struct be_put *w, const char *s, size_t max)
{
	size_t n = strnlen(s, max > UINT16_MAX ? UINT16_MAX : max);

	be_put_u16(w, (uint16_t)n);
	be_put_bytes(w, s, n);
}

static inline void be_get_bytes(struct be_get *r, void *v, size_t n)
{
	if (r->err || r->len - r->off < n) {
		r->err = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p + r->off, n);
	r->off += n;
}

/* Skips n bytes of padding: true when they are all zero. */
static inline bool be_get_zeros(struct be_get *r, size_t n)
{
	bool zero = true;

	if (r->err || r->len - r->off < n) {
		r->err = true;
		return false;
	}
	for (size_t i = 0; i < n; i++)
		zero &= !r->p[r->off + i];
	r->off += n;
	return zero;
}

static inline uint8_t be_get_u8(struct be_get *r)
{
	uint8_t v;

	be_get_bytes(r, &v, 1);
	return v;
}

static inline uint16_t be_get_u16(struct be_get *r)
{
	uint16_t v;

	be_get_bytes(r, &v, 2);
	return be16toh(v);
}

static inline uint32_t be_get_u32(struct be_get *r)
{
	uint32_t v;

	be_get_bytes(r, &v, 4);
	return be32toh(v);
}

static inline uint64_t be_get_u64(struct be_get *r)
{
	uint64_t v;

	be_get_bytes(r, &v, 8);
	return be64toh(v);
}

/* Reads a u16-length string into out[max + 1]; no NUL allowed inside. */
static inline void be_get_str(struct be_get *r, char *out, size_t max)
{
	uint16_t n = be_get_u16(r);

	if (n > max) {
		r->err = true;
		out[0] = '\0';
		return;
	}
	be_get_bytes(r, out, n);
	out[r->err ? 0 : n] = '\0';
	if (memchr(out, '\0', n))
		r->err = true;
}

#endif
