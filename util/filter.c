/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The include/exclude matcher (filter.h). The glob runs as a set of
 * positions in the subject that the pattern read so far can end at, one
 * pass over the subject per pattern token, so no pattern (however many
 * stars) costs more than patlen * slen steps: patterns may come from a
 * peer (a pull's HELLO).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/filter.h"

/* The index just past the ']' of the set opening at pat[i], or 0. */
static size_t set_end(const char *pat, size_t i, size_t plen)
{
	size_t k = i + 1;

	if (k < plen && (pat[k] == '!' || pat[k] == '^'))
		k++;
	if (k < plen && pat[k] == ']') /* a leading ']' is a member */
		k++;
	while (k < plen) {
		if (pat[k] == '\\' && k + 1 < plen) /* "\c" is c, even ']' */
			k += 2;
		else if (pat[k] == ']')
			return k + 1;
		else
			k++;
	}
	return 0;
}

/* One member character of a set at pat[*k] ("\c" is c); moves *k past. */
static unsigned char set_char(const char *pat, size_t *k, size_t last)
{
	if (pat[*k] == '\\' && *k + 1 < last)
		(*k)++;
	return (unsigned char)pat[(*k)++];
}

/* Whether c is in the set pat[i, end) ("[...]", end past its ']'). */
static bool set_has(const char *pat, size_t i, size_t end, unsigned char c)
{
	size_t k = i + 1, last = end - 1; /* last: the closing ']' */
	bool neg = false, in = false;

	if (pat[k] == '!' || pat[k] == '^') {
		neg = true;
		k++;
	}
	while (k < last) {
		unsigned char lo = set_char(pat, &k, last), hi = lo;

		if (k + 1 < last && pat[k] == '-') {
			k++;
			hi = set_char(pat, &k, last);
		}
		if (c >= lo && c <= hi)
			in = true;
	}
	return in != neg;
}

bool filter_glob(const char *pat, size_t plen, const char *s, size_t slen)
{
	unsigned char a[FILTER_PATH_MAX + 1], b[FILTER_PATH_MAX + 1];
	unsigned char *cur = a, *nxt = b, *t;
	size_t i = 0;

	if (slen > FILTER_PATH_MAX)
		return false;
	memset(cur, 0, slen + 1);
	cur[0] = 1;
	while (i < plen) {
		bool live = false;

		if (pat[i] == '*') {
			bool deep = i + 1 < plen && pat[i + 1] == '*';
			bool on = false;

			while (i < plen && pat[i] == '*')
				i++;
			for (size_t j = 0; j <= slen; j++) {
				/* a run of '*' never takes a '/' */
				if (!deep && j && s[j - 1] == '/')
					on = false;
				if (cur[j])
					on = true;
				nxt[j] = on;
				live |= on;
			}
		} else {
			size_t end = pat[i] == '[' ? set_end(pat, i, plen) : 0;
			unsigned char lit = (unsigned char)pat[i];
			size_t next = i + 1;

			if (pat[i] == '\\' && i + 1 == plen)
				return false; /* escapes nothing: no match */
			if (pat[i] == '\\') {
				lit = (unsigned char)pat[i + 1];
				next = i + 2;
			} else if (end) {
				next = end;
			}
			nxt[0] = 0;
			for (size_t j = 0; j < slen; j++) {
				unsigned char c = (unsigned char)s[j];
				bool ok;

				if (!cur[j]) {
					nxt[j + 1] = 0;
					continue;
				}
				if (end)
					ok = c != '/' &&
					     set_has(pat, i, end, c);
				else if (pat[i] == '?' && next == i + 1)
					ok = c != '/';
				else
					ok = c == lit;
				nxt[j + 1] = ok;
				live |= ok;
			}
			i = next;
		}
		t = cur;
		cur = nxt;
		nxt = t;
		if (!live)
			return false;
	}
	return cur[slen];
}

int filter_add(struct filter *f, bool include, const char *text)
{
	size_t len = strlen(text);
	struct filter_rule *r;
	const char *pat;

	if (len > FILTER_PATTERN_MAX)
		return -ENAMETOOLONG;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		struct filter_rule *v = realloc(f->rules, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->rules = v;
		f->cap = cap;
	}
	r = &f->rules[f->n];
	memset(r, 0, sizeof(*r));
	r->include = include;
	pat = text;
	if (*pat == '/') {
		r->anchored = true;
		pat++;
	}
	r->patlen = strlen(pat);
	if (r->patlen && pat[r->patlen - 1] == '/') {
		r->dir_only = true;
		r->patlen--;
	}
	if (!r->patlen)
		return -EINVAL;
	r->text = strdup(text);
	if (!r->text)
		return -ENOMEM;
	r->pat = r->text + (pat - text);
	r->whole = r->anchored || memchr(r->pat, '/', r->patlen) ||
		   memmem(r->pat, r->patlen, "**", 2);
	f->n++;
	return 0;
}

static bool rule_matches(const struct filter_rule *r, const char *path,
			 size_t len)
{
	const char *base;

	if (!r->whole) {
		base = strrchr(path, '/');
		base = base ? base + 1 : path;
		return filter_glob(r->pat, r->patlen, base,
				   len - (size_t)(base - path));
	}
	if (filter_glob(r->pat, r->patlen, path, len))
		return true;
	if (r->anchored)
		return false;
	for (size_t k = 0; k < len; k++)
		if (path[k] == '/' &&
		    filter_glob(r->pat, r->patlen, path + k + 1, len - k - 1))
			return true;
	return false;
}

enum filter_verdict filter_match(const struct filter *f, const char *path,
				 bool is_dir)
{
	size_t len;

	if (!f || !f->n)
		return FILTER_NONE;
	len = strlen(path);
	if (len > FILTER_PATH_MAX)
		return FILTER_NONE;
	for (size_t i = 0; i < f->n; i++) {
		const struct filter_rule *r = &f->rules[i];

		if (r->dir_only && !is_dir)
			continue;
		if (rule_matches(r, path, len))
			return r->include ? FILTER_INCLUDE : FILTER_EXCLUDE;
	}
	return FILTER_NONE;
}

bool filter_excludes(const struct filter *f, const char *path, bool is_dir)
{
	return filter_match(f, path, is_dir) == FILTER_EXCLUDE;
}

void filter_release(struct filter *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->rules[i].text);
	free(f->rules);
	f->rules = NULL;
	f->n = f->cap = 0;
}
