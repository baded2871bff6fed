/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The variable-length fields inside control messages: an owner (FILE and
 * packed records), the XATTRS list, HELLO's paths and filter rules, NAMES'
 * names. For each, how a caller builds it, walks it, and how wire.c's
 * decoder reads and checks it (wire_int.h). The cursors of util/be_codec.h
 * do all byte work.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "transfer/wire/wire.h"
#include "transfer/wire/wire_int.h"
#include "util/be_codec.h"

/* ---- owners (FILE and packed records) ---- */

size_t wire_owner_len(const struct wire_owner *o)
{
	return 8 + 2 + strnlen(o->user, WIRE_OWNER_NAME_MAX) +
	       strnlen(o->group, WIRE_OWNER_NAME_MAX);
}

static void put_name(struct be_put *w, const char *name)
{
	size_t n = strnlen(name, WIRE_OWNER_NAME_MAX);

	be_put_u8(w, (uint8_t)n);
	be_put_bytes(w, name, n);
}

void wire_owner_put(struct be_put *w, const struct wire_owner *o)
{
	be_put_u32(w, o->uid);
	be_put_u32(w, o->gid);
	put_name(w, o->user);
	put_name(w, o->group);
}

/* A name: its length u8, then its bytes, none of them NUL. */
static void get_name(struct be_get *r, char *out)
{
	uint8_t n = be_get_u8(r);

	be_get_bytes(r, out, n);
	out[r->err ? 0 : n] = '\0';
	if (memchr(out, '\0', n) != NULL && !r->err)
		r->err = true;
}

void wire_owner_get(struct be_get *r, struct wire_owner *o)
{
	o->uid = be_get_u32(r);
	o->gid = be_get_u32(r);
	get_name(r, o->user);
	get_name(r, o->group);
}

/* ---- extended attributes (XATTRS) ---- */

int wire_xattrs_add(struct wire_xattrs *x, const char *name,
		    const void *value, size_t vlen)
{
	size_t nlen = strlen(name), need = 3 + nlen + vlen;

	if (!nlen || nlen > WIRE_XATTR_NAME_MAX)
		return -EINVAL;
	if (need > WIRE_XATTRS_BYTES - x->len || x->count == UINT16_MAX)
		return -ENOSPC;
	x->data[x->len] = (uint8_t)nlen;
	x->data[x->len + 1] = (uint8_t)(vlen >> 8);
	x->data[x->len + 2] = (uint8_t)vlen;
	memcpy(x->data + x->len + 3, name, nlen);
	if (vlen)
		memcpy(x->data + x->len + 3 + nlen, value, vlen);
	x->len += (uint16_t)need;
	x->count++;
	return 0;
}

bool wire_xattrs_next(const struct wire_xattrs *x, size_t *pos,
		      const char **name, size_t *nlen, const uint8_t **value,
		      size_t *vlen)
{
	const uint8_t *p = x->data + *pos;

	if (*pos + 3 > x->len)
		return false;
	*nlen = p[0];
	*vlen = (size_t)p[1] << 8 | p[2];
	if (*pos + 3 + *nlen + *vlen > x->len)
		return false; /* never for a checked x */
	*name = (const char *)p + 3;
	*value = p + 3 + *nlen;
	*pos += 3 + *nlen + *vlen;
	return true;
}

/* count entries filling len bytes exactly, each name 1.. bytes, no NUL */
void wire_dec_xattrs(struct be_get *r, struct wire_xattrs *x)
{
	size_t pos = 0, nlen, vlen;
	unsigned int count = 0;
	const uint8_t *value;
	const char *name;

	x->file_id = be_get_u32(r);
	x->count = be_get_u16(r);
	x->len = be_get_u16(r);
	if (r->err || x->len > WIRE_XATTRS_BYTES || !x->count) {
		r->err = true;
		return;
	}
	be_get_bytes(r, x->data, x->len);
	while (!r->err && pos < x->len) {
		if (!wire_xattrs_next(x, &pos, &name, &nlen, &value, &vlen) ||
		    !nlen || memchr(name, '\0', nlen))
			r->err = true;
		count++;
	}
	if (count != x->count)
		r->err = true;
}

/* ---- strings back to back, each NUL-terminated ---- */

/*
 * Whether the len bytes at p are count strings back to back, each
 * NUL-terminated and of min..max bytes without its NUL; with rules, each
 * starting with '+' or '-' (a filter rule).
 */
static bool strs_ok(const char *p, size_t len, unsigned int count, size_t min,
		    size_t max, bool rules)
{
	const char *end = p + len;
	unsigned int n = 0;

	for (; p < end; n++) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t slen = nul ? (size_t)(nul - p) : 0;

		if (!nul || slen < min || slen > max ||
		    (rules && p[0] != '+' && p[0] != '-'))
			return false;
		p = nul + 1;
	}
	return n == count;
}

/* The i-th of count strings back to back at p; "" past the end. */
static const char *strs_at(const char *p, unsigned int count, unsigned int i)
{
	if (i >= count)
		return "";
	while (i--)
		p += strlen(p) + 1;
	return p;
}

/* ---- HELLO's paths and filter rules ---- */

/* HELLO paths: npaths NUL-terminated strings filling paths_len bytes. */
void wire_dec_paths(struct be_get *r, struct wire_hello *h)
{
	h->npaths = be_get_u16(r);
	h->paths_len = be_get_u16(r);
	if (h->paths_len > WIRE_PATHS_MAX) {
		r->err = true;
		return;
	}
	be_get_bytes(r, h->paths, h->paths_len);
	if (!r->err &&
	    !strs_ok(h->paths, h->paths_len, h->npaths, 0, SIZE_MAX, false))
		r->err = true;
}

/*
 * HELLO filter rules: nfilters NUL-terminated strings filling filters_len
 * bytes, each '+' or '-' and a pattern of at least one byte.
 */
void wire_dec_filters(struct be_get *r, struct wire_hello *h)
{
	h->nfilters = be_get_u16(r);
	h->filters_len = be_get_u16(r);
	if (h->filters_len > WIRE_FILTERS_MAX) {
		r->err = true;
		return;
	}
	be_get_bytes(r, h->filters, h->filters_len);
	if (!r->err && !strs_ok(h->filters, h->filters_len, h->nfilters, 2,
				SIZE_MAX, true))
		r->err = true;
}

int wire_hello_add_filter(struct wire_hello *h, bool include,
			  const char *pattern)
{
	size_t n = strlen(pattern) + 2;

	if (!*pattern)
		return -EINVAL;
	if (n > WIRE_FILTERS_MAX - h->filters_len ||
	    h->nfilters == UINT16_MAX)
		return -ENAMETOOLONG;
	h->filters[h->filters_len] = include ? '+' : '-';
	memcpy(h->filters + h->filters_len + 1, pattern, n - 1);
	h->filters_len += (uint16_t)n;
	h->nfilters++;
	return 0;
}

const char *wire_hello_filter(const struct wire_hello *h, unsigned int i)
{
	return strs_at(h->filters, h->nfilters, i);
}

int wire_hello_add_path(struct wire_hello *h, const char *path)
{
	size_t n = strlen(path) + 1;

	if (n > WIRE_PATHS_MAX - h->paths_len || h->npaths == UINT16_MAX)
		return -ENAMETOOLONG;
	memcpy(h->paths + h->paths_len, path, n);
	h->paths_len += (uint16_t)n;
	h->npaths++;
	return 0;
}

const char *wire_hello_path(const struct wire_hello *h, unsigned int i)
{
	return strs_at(h->paths, h->npaths, i);
}

/* ---- names (NAMES) ---- */

/*
 * NAMES: count names of 1..WIRE_NAME_MAX bytes, each NUL-terminated, filling
 * len bytes; none only with END.
 */
void wire_dec_names(struct be_get *r, struct wire_names *n)
{
	n->flags = be_get_u16(r);
	n->count = be_get_u16(r);
	n->len = be_get_u16(r);
	if (n->len > WIRE_NAMES_BYTES || (n->flags & ~WIRE_NAMES_END) ||
	    (!n->count && !(n->flags & WIRE_NAMES_END))) {
		r->err = true;
		return;
	}
	be_get_bytes(r, n->names, n->len);
	if (!r->err &&
	    !strs_ok(n->names, n->len, n->count, 1, WIRE_NAME_MAX, false))
		r->err = true;
}

int wire_names_add(struct wire_names *n, const char *name, size_t len)
{
	if (!len || len > WIRE_NAME_MAX ||
	    len + 1 > WIRE_NAMES_BYTES - n->len || n->count == UINT16_MAX)
		return -ENOSPC;
	memcpy(n->names + n->len, name, len);
	n->names[n->len + len] = '\0';
	n->len += (uint16_t)(len + 1);
	n->count++;
	return 0;
}
