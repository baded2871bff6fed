/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Fuzz target for the --include/--exclude matcher (util/filter.h), whose
 * patterns may come from a peer (a pull's HELLO). The input is a pattern,
 * a NUL, then a path. The target checks that filter_glob() agrees with
 * glibc's fnmatch(FNM_PATHNAME) wherever the two define the same thing (no
 * "**", no '/' next to a set, no escaped '/'), and that a rule made of the pattern decides
 * as filter.h says: on the last component or the whole path, first match
 * wins, directories-only rules never on a file. Bounded by construction:
 * the glob is patlen * pathlen steps. Any broken promise calls abort().
 */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/filter.h"
#include "fuzz.h"

/*
 * Whether glibc's fnmatch defines what filter_glob does for pat: not "**"
 * (fnmatch has none), not a '/' with a set (its sets' rules for '/'
 * differ), not an escaped '/' (which glibc never matches to a '/', and
 * rsync, as filter.c, does), no "[:", "[=" or "[." (POSIX classes, which
 * filter.c does not have: there they are plain members), no '[' left
 * open (a literal '[' here; glibc's "[a-" matches nothing).
 */
static bool comparable(const char *pat)
{
	const char *open = strrchr(pat, '[');

	/* an unterminated set: a literal here, glibc's varies ("[a-") */
	if (open && !strchr(open, ']'))
		return false;
	return !strstr(pat, "**") && !(strchr(pat, '[') && strchr(pat, '/')) &&
	       !strstr(pat, "\\/") && !strstr(pat, "[:") && !strstr(pat, "[=") &&
	       !strstr(pat, "[.");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char pat[FILTER_PATTERN_MAX + 1], path[FILTER_PATH_MAX + 1];
	const uint8_t *nul = memchr(data, '\0', size);
	size_t plen = nul ? (size_t)(nul - data) : size;
	size_t slen = nul ? size - plen - 1 : 0;
	struct filter f = { 0 };
	enum filter_verdict v;
	bool g;

	if (plen > FILTER_PATTERN_MAX || slen > FILTER_PATH_MAX)
		return 0;
	memcpy(pat, data, plen);
	pat[plen] = '\0';
	memcpy(path, nul ? nul + 1 : data, slen);
	path[slen] = '\0';
	slen = strlen(path); /* a NUL in the path ends it */
	plen = strlen(pat);

	g = filter_glob(pat, plen, path, slen);
	if (comparable(pat) && g != !fnmatch(pat, path, FNM_PATHNAME))
		abort();
	if (filter_glob("**", 2, path, slen) != true)
		abort();

	if (filter_add(&f, false, pat)) {
		filter_release(&f); /* empty or too long: refused */
		return 0;
	}
	if (filter_add(&f, true, "*")) /* a catch-all after it */
		abort();
	for (int dir = 0; dir < 2; dir++) {
		v = filter_match(&f, path, dir);
		if (v == FILTER_NONE) /* "*" matches every last component */
			abort();
		if (!dir && f.rules[0].dir_only && v != FILTER_INCLUDE)
			abort();
		/* A plain pattern on a plain name is the glob itself. */
		if (!f.rules[0].whole && !f.rules[0].dir_only &&
		    !strchr(path, '/') &&
		    (v == FILTER_EXCLUDE) !=
			    filter_glob(f.rules[0].pat, f.rules[0].patlen, path,
					slen))
			abort();
	}
	filter_release(&f);
	return 0;
}
