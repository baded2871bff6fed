/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --include/--exclude rules, matched as rsync matches them, on paths
 * relative to the transfer root ("dir/sub/file", as the sink names them).
 * Pure: no I/O, no global state; reading rule files is cmd/'s business.
 *
 * A rule is a pattern. The first rule that matches an entry decides:
 * include keeps it, exclude drops it (and, for a directory, everything in
 * it); no match keeps it. In a pattern:
 *   *      any run of characters but '/'
 *   **     any run of characters, '/' included
 *   ?      one character but '/'
 *   [...]  one character of a set ("[a-z]", "[!0-9]" or "[^0-9]"); an
 *          unterminated '[' is a literal '[' (rsync's wildmatch would
 *          match nothing: "a[1" finds "a[1"); no POSIX classes: in
 *          "[[:digit:]]", '[', ':', 'd', ... are members (rsync's
 *          wildmatch has such classes)
 *   \c     c itself (inside a set too); a '\' at the end matches nothing
 *   a trailing '/' matches directories only
 *   a leading '/' anchors the pattern at the transfer root
 * A pattern with no '/' but a trailing one, and no "**", is matched against
 * the entry's last component; else against the whole path, or (unless
 * anchored) any tail of it that begins after a '/'.
 */
#ifndef RDCP_FILTER_H
#define RDCP_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#define FILTER_PATTERN_MAX 1024u /* bytes of one rule's text */
#define FILTER_PATH_MAX 4096u	 /* longest path matched, NUL excluded */

enum filter_verdict {
	FILTER_NONE = 0, /* no rule matched: the entry is kept */
	FILTER_INCLUDE,
	FILTER_EXCLUDE,
};

struct filter_rule {
	bool include;
	bool dir_only;	 /* the text ended in '/' */
	bool anchored;	 /* the text began with '/' */
	bool whole;	 /* matched against the path, not its last component */
	char *text;	 /* as given, for the wire and messages */
	const char *pat; /* the pattern proper, within text */
	size_t patlen;
};

struct filter {
	struct filter_rule *rules;
	size_t n, cap;
};

/*
 * Appends a rule. text is copied. Returns 0, -EINVAL for an empty pattern
 * ("", "/", "//"), -ENAMETOOLONG past FILTER_PATTERN_MAX, or -ENOMEM; on
 * failure f keeps the rules it had (filter_release() it as ever).
 */
int filter_add(struct filter *f, bool include, const char *text)
	__attribute__((warn_unused_result));

/*
 * The first rule matching path (relative, no leading '/'; is_dir: it names
 * a directory). A path longer than FILTER_PATH_MAX matches no rule.
 */
enum filter_verdict filter_match(const struct filter *f, const char *path,
				 bool is_dir);

/* Whether the entry is dropped: filter_match() said FILTER_EXCLUDE. */
bool filter_excludes(const struct filter *f, const char *path, bool is_dir);

/*
 * The glob alone: whether pattern pat (patlen bytes) matches all of s
 * (slen bytes) by the rules above. O(patlen * slen) time, no allocation.
 * slen > FILTER_PATH_MAX never matches.
 */
bool filter_glob(const char *pat, size_t patlen, const char *s, size_t slen);

/* Frees the rules; f is empty and reusable after. */
void filter_release(struct filter *f);

#endif
