/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Host list expansion (hostlist.h): a list is split at its top-level
 * commas; each name is expanded bracket by bracket, the first bracket
 * outermost, into a growing array of strings.
 */
#include "util/hostlist.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct names {
	char **v;
	size_t n, cap;
};

static int names_add(struct names *s, const char *p, size_t len)
{
	if (s->n + 1 >= s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		char **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n] = strndup(p, len);
	if (!s->v[s->n])
		return -ENOMEM;
	s->v[++s->n] = NULL;
	return 0;
}

/* One bracket item "7" or "01-16" of [p, end): bounds and width. */
static int parse_item(const char *p, const char *end, unsigned long *lo,
		      unsigned long *hi, int *width, const char **why)
{
	const char *dash = memchr(p, '-', (size_t)(end - p));
	const char *q = dash ? dash : end;
	char num[16];

	for (int side = 0; side < 2; side++) {
		const char *a = side ? (dash ? dash + 1 : p) : p;
		const char *b = side ? end : q;
		size_t len = (size_t)(b - a);

		if (!len || len >= 10) {
			*why = len ? "a number of more than 9 digits"
				   : "an empty number in brackets";
			return -EINVAL;
		}
		for (const char *c = a; c < b; c++)
			if (*c < '0' || *c > '9') {
				*why = "brackets hold numbers and ranges "
				       "(\"[1-4,7]\")";
				return -EINVAL;
			}
		memcpy(num, a, len);
		num[len] = '\0';
		*(side ? hi : lo) = strtoul(num, NULL, 10);
		if (!side)
			*width = (int)len;
	}
	if (*hi < *lo) {
		*why = "a range backwards";
		return -EINVAL;
	}
	return 0;
}

/* How many names [p, end) gives, checked; -errno. */
static long long count_name(const char *p, const char *end, const char **why)
{
	long long total = 1;

	while (p < end) {
		const char *open = memchr(p, '[', (size_t)(end - p));
		const char *colon = memchr(p, ':', (size_t)(end - p));
		const char *close;
		long long here = 0;

		if (!open || (colon && colon < open))
			break;
		close = memchr(open, ']', (size_t)(end - open));
		if (!close ||
		    memchr(open + 1, '[', (size_t)(close - open - 1))) {
			*why = "a '[' without its ']'";
			return -EINVAL;
		}
		for (const char *i = open + 1; i <= close;) {
			const char *e = memchr(i, ',', (size_t)(close - i));
			unsigned long lo, hi;
			int w, rc;

			if (!e)
				e = close;
			rc = parse_item(i, e, &lo, &hi, &w, why);
			if (rc)
				return rc;
			here += (long long)(hi - lo) + 1;
			if (here > HOSTLIST_MAX)
				return -E2BIG;
			i = e + 1;
		}
		total *= here;
		if (total > HOSTLIST_MAX)
			return -E2BIG;
		p = close + 1;
	}
	if (memchr(p, ']', (size_t)(end - p)) &&
	    !memchr(p, ':', (size_t)(end - p))) {
		*why = "a ']' without its '['";
		return -EINVAL;
	}
	return total;
}

/* Appends every name of [p, end) after prefix (plen bytes) to s. */
static int expand_name(struct names *s, char *buf, size_t plen, const char *p,
		       const char *end)
{
	const char *open = memchr(p, '[', (size_t)(end - p));
	const char *colon = memchr(p, ':', (size_t)(end - p));
	const char *close;

	if (!open || (colon && colon < open)) {
		memcpy(buf + plen, p, (size_t)(end - p));
		return names_add(s, buf, plen + (size_t)(end - p));
	}
	memcpy(buf + plen, p, (size_t)(open - p));
	plen += (size_t)(open - p);
	close = memchr(open, ']', (size_t)(end - open));
	for (const char *i = open + 1; i <= close;) {
		const char *e = memchr(i, ',', (size_t)(close - i));
		unsigned long lo, hi;
		const char *why;
		int w, rc;

		if (!e)
			e = close;
		rc = parse_item(i, e, &lo, &hi, &w, &why);
		if (rc)
			return rc; /* count_name saw it first */
		for (unsigned long v = lo; v <= hi; v++) {
			int len = sprintf(buf + plen, "%0*lu", w, v);

			rc = expand_name(s, buf, plen + (size_t)len, close + 1,
					 end);
			if (rc)
				return rc;
		}
		i = e + 1;
	}
	return 0;
}

int hostlist_expand(const char *spec, char ***out, const char **why)
{
	struct names s = { 0 };
	size_t total = 0;
	const char *p = spec;
	char *buf;
	int rc = 0;

	*out = NULL;
	*why = "";
	/* Each expanded name is at most as long as spec plus its digits. */
	buf = malloc(strlen(spec) * 4 + 64);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		const char *end = p;
		long long n;
		int depth = 0;

		while (*end && (*end != ',' || depth)) {
			depth += *end == '[' ? 1 : *end == ']' ? -1 : 0;
			end++;
		}
		if (end == p) {
			*why = "an empty name";
			rc = -EINVAL;
			break;
		}
		if (*p == '[') { /* an IPv6 literal: as it is */
			n = 1;
			rc = names_add(&s, p, (size_t)(end - p));
		} else {
			n = count_name(p, end, why);
			if (n < 0)
				rc = (int)n;
			else if (total + (size_t)n > HOSTLIST_MAX)
				rc = -E2BIG;
			else
				rc = expand_name(&s, buf, 0, p, end);
		}
		if (rc)
			break;
		total += (size_t)n;
		if (!*end)
			break;
		p = end + 1;
	}
	free(buf);
	if (rc) {
		hostlist_free(s.v);
		return rc;
	}
	*out = s.v;
	return (int)s.n;
}

void hostlist_free(char **names)
{
	if (!names)
		return;
	for (size_t i = 0; names[i]; i++)
		free(names[i]);
	free(names);
}
