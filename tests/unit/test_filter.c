/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for util/filter.c: the glob checked exhaustively over small
 * alphabets against two oracles (a plain recursive matcher for *, **, ?
 * and \, glibc's fnmatch(FNM_PATHNAME) for sets), then rsync's rule
 * semantics: last component or whole path, anchoring, directories only,
 * first match wins, and the bounds.
 */
#include "tap.h"

#include "util/filter.h"

#include <errno.h>
#include <fnmatch.h>

/* The oracle for *, **, ? and \: exponential, fine on short strings. */
static bool ref_glob(const char *p, const char *s)
{
	if (!*p)
		return !*s;
	if (p[0] == '*') {
		bool deep = p[1] == '*';

		while (*p == '*')
			p++;
		for (size_t k = 0;; k++) {
			if (ref_glob(p, s + k))
				return true;
			if (!s[k] || (!deep && s[k] == '/'))
				return false;
		}
	}
	if (!*s)
		return false;
	if (p[0] == '?')
		return *s != '/' && ref_glob(p + 1, s + 1);
	if (p[0] == '\\')
		return p[1] && *s == p[1] && ref_glob(p + 2, s + 1);
	return *s == *p && ref_glob(p + 1, s + 1);
}

/* Writes the n-th string over alpha (base len(alpha), length len). */
static void nth(char *out, const char *alpha, size_t len, unsigned long n)
{
	size_t k = strlen(alpha);

	for (size_t i = 0; i < len; i++, n /= k)
		out[i] = alpha[n % k];
	out[len] = '\0';
}

static unsigned long power(unsigned long b, size_t e)
{
	unsigned long r = 1;

	while (e--)
		r *= b;
	return r;
}

/* Every pattern and subject up to 5 bytes (stars, ?, \\, a, b, slash). */
static void test_glob_exhaustive_stars(void)
{
	const char *pa = "ab/*?\\", *sa = "ab/";
	char p[8], s[8];
	unsigned long bad = 0, runs = 0;

	for (size_t pl = 0; pl <= 5; pl++)
		for (unsigned long pn = 0; pn < power(6, pl); pn++) {
			nth(p, pa, pl, pn);
			for (size_t sl = 0; sl <= 5; sl++)
				for (unsigned long sn = 0; sn < power(3, sl);
				     sn++) {
					nth(s, sa, sl, sn);
					runs++;
					if (filter_glob(p, pl, s, sl) ==
					    ref_glob(p, s))
						continue;
					if (bad++ < 5)
						printf("#   '%s' on '%s'\n", p,
						       s);
				}
		}
	CHECK_EQ(bad, 0);
	CHECK(runs > 1000000);
}

/* Sets, '?' and '*' against fnmatch(FNM_PATHNAME), no "**" (it differs). */
static void test_glob_exhaustive_sets(void)
{
	const char *pa = "a*?[]!-^\\", *sa = "a/]-!^b\\";
	char p[8], s[8];
	unsigned long bad = 0;

	for (size_t pl = 0; pl <= 4; pl++)
		for (unsigned long pn = 0; pn < power(9, pl); pn++) {
			nth(p, pa, pl, pn);
			if (strstr(p, "**"))
				continue;
			for (size_t sl = 0; sl <= 3; sl++)
				for (unsigned long sn = 0; sn < power(8, sl);
				     sn++) {
					bool want;

					nth(s, sa, sl, sn);
					want = !fnmatch(p, s, FNM_PATHNAME);
					if (filter_glob(p, pl, s, sl) == want)
						continue;
					if (bad++ < 5)
						printf("#   '%s' on '%s': "
						       "fnmatch says %d\n",
						       p, s, want);
				}
		}
	CHECK_EQ(bad, 0);
}

static void test_glob_cases(void)
{
#define G(p, s) filter_glob(p, strlen(p), s, strlen(s))
	CHECK(G("*.c", "main.c"));
	CHECK(!G("*.c", "dir/main.c"));
	CHECK(G("**.c", "dir/main.c"));
	CHECK(G("a/**/z", "a/b/c/z"));
	CHECK(G("a/**/z", "a//z"));
	CHECK(!G("a/**/z", "a/z"));
	CHECK(G("[a-c]x", "bx"));
	CHECK(!G("[a-c]x", "dx"));
	CHECK(G("[!a-c]x", "dx"));
	CHECK(G("[^a-c]x", "dx"));
	CHECK(!G("[!a-c]x", "/x")); /* a set never takes '/' */
	CHECK(G("[]]", "]"));
	CHECK(G("[a-]", "-"));
	CHECK(G("[", "["));   /* unterminated: a literal */
	CHECK(G("[\\]]", "]")); /* an escaped ']' is a member */
	CHECK(!G("[!\\]", "x")); /* "\]" is no end: a literal "[!]" */
	CHECK(G("[!\\]", "[!]"));
	CHECK(G("\\*", "*")); /* escaped */
	CHECK(!G("\\*", "x"));
	CHECK(!G("\\", "\\")); /* a '\' at the end escapes nothing */
	CHECK(G("", ""));
	CHECK(!G("", "a"));
	CHECK(G("***", "a/b")); /* more than two stars: as two */
#undef G
}

/* A pattern of many stars costs patlen * slen, not an exponential. */
static void test_glob_bounded(void)
{
	char pat[FILTER_PATTERN_MAX + 1], s[FILTER_PATH_MAX + 2];

	for (size_t i = 0; i < FILTER_PATTERN_MAX; i++)
		pat[i] = i % 2 ? '*' : 'a';
	pat[FILTER_PATTERN_MAX - 1] = 'c'; /* never matches, after 511 stars */
	pat[FILTER_PATTERN_MAX] = '\0';
	memset(s, 'a', FILTER_PATH_MAX);
	s[FILTER_PATH_MAX - 1] = 'b';
	CHECK(!filter_glob(pat, strlen(pat), s, FILTER_PATH_MAX));
	CHECK(filter_glob("*", 1, s, FILTER_PATH_MAX));
	CHECK(!filter_glob("*", 1, s, FILTER_PATH_MAX + 1)); /* too long */
}

static void test_rules_parse(void)
{
	struct filter f = { 0 };
	char big[FILTER_PATTERN_MAX + 2];

	CHECK_EQ(filter_add(&f, false, ""), -EINVAL);
	CHECK_EQ(filter_add(&f, false, "/"), -EINVAL);
	CHECK_EQ(filter_add(&f, false, "//"), -EINVAL);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ(filter_add(&f, false, big), -ENAMETOOLONG);
	CHECK_EQ(f.n, 0);
	CHECK_EQ(filter_add(&f, true, "/a/b/"), 0);
	CHECK_EQ(f.n, 1);
	CHECK(f.rules[0].include && f.rules[0].anchored &&
	      f.rules[0].dir_only && f.rules[0].whole);
	CHECK_EQ(f.rules[0].patlen, 3);
	CHECK(!strncmp(f.rules[0].pat, "a/b", 3));
	CHECK(!strcmp(f.rules[0].text, "/a/b/"));
	CHECK_EQ(filter_add(&f, false, "*.o"), 0);
	CHECK(!f.rules[1].whole && !f.rules[1].anchored);
	CHECK_EQ(filter_add(&f, false, "**.o"), 0);
	CHECK(f.rules[2].whole);
	filter_release(&f);
	CHECK_EQ(f.n, 0);
	CHECK(f.rules == NULL);
}

static void test_rules_semantics(void)
{
	struct filter f = { 0 };

	/* no rules: everything is kept */
	CHECK_EQ(filter_match(&f, "a", false), FILTER_NONE);
	CHECK_EQ(filter_match(NULL, "a", false), FILTER_NONE);

	CHECK_EQ(filter_add(&f, false, "*.o"), 0);
	CHECK_EQ(filter_add(&f, false, "build/"), 0);
	CHECK_EQ(filter_add(&f, false, "/top"), 0);
	CHECK_EQ(filter_add(&f, false, "doc/*.tmp"), 0);
	/* no '/': the last component, at any depth */
	CHECK(filter_excludes(&f, "x.o", false));
	CHECK(filter_excludes(&f, "src/deep/x.o", false));
	CHECK(!filter_excludes(&f, "x.oo", false));
	/* trailing '/': directories only */
	CHECK(filter_excludes(&f, "src/build", true));
	CHECK(!filter_excludes(&f, "src/build", false));
	/* leading '/': at the root only */
	CHECK(filter_excludes(&f, "top", false));
	CHECK(!filter_excludes(&f, "src/top", false));
	/* a '/' inside, not anchored: the path or any tail after a '/' */
	CHECK(filter_excludes(&f, "doc/a.tmp", false));
	CHECK(filter_excludes(&f, "p/doc/a.tmp", false));
	CHECK(!filter_excludes(&f, "pdoc/a.tmp", false));
	CHECK(!filter_excludes(&f, "doc/sub/a.tmp", false));
	filter_release(&f);

	/* first match wins: an include before an exclude keeps */
	CHECK_EQ(filter_add(&f, true, "keep.o"), 0);
	CHECK_EQ(filter_add(&f, false, "*.o"), 0);
	CHECK_EQ(filter_match(&f, "a/keep.o", false), FILTER_INCLUDE);
	CHECK_EQ(filter_match(&f, "a/other.o", false), FILTER_EXCLUDE);
	CHECK_EQ(filter_match(&f, "a/other.c", false), FILTER_NONE);
	filter_release(&f);

	/* the other order: the exclude wins */
	CHECK_EQ(filter_add(&f, false, "*.o"), 0);
	CHECK_EQ(filter_add(&f, true, "keep.o"), 0);
	CHECK_EQ(filter_match(&f, "a/keep.o", false), FILTER_EXCLUDE);
	filter_release(&f);

	/* rsync's "only *.c": directories in, *.c in, the rest out */
	CHECK_EQ(filter_add(&f, true, "*/"), 0);
	CHECK_EQ(filter_add(&f, true, "*.c"), 0);
	CHECK_EQ(filter_add(&f, false, "*"), 0);
	CHECK(!filter_excludes(&f, "src", true));
	CHECK(!filter_excludes(&f, "src/a.c", false));
	CHECK(filter_excludes(&f, "src/a.h", false));
	filter_release(&f);

	/* "**" anywhere in the path */
	CHECK_EQ(filter_add(&f, false, "/logs/**/old"), 0);
	CHECK(filter_excludes(&f, "logs/2026/11/old", false));
	CHECK(!filter_excludes(&f, "x/logs/2026/old", false));
	filter_release(&f);
}

TAP_RUN(TAP_TEST(test_glob_exhaustive_stars),
	TAP_TEST(test_glob_exhaustive_sets), TAP_TEST(test_glob_cases),
	TAP_TEST(test_glob_bounded), TAP_TEST(test_rules_parse),
	TAP_TEST(test_rules_semantics))
