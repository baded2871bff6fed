/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A tiny TAP harness for the unit and engine tests (the libuv task.h /
 * git t/unit-tests idea): each test is a function; CHECK() records a
 * failure with file:line and keeps going; tap_main() runs them, prints
 * "ok N - name" / "not ok N - name" and a closing "N passed, N failed".
 * tests/run_tests.sh adds the lines of every binary and script together.
 *
 * Arguments pick the cases to run (all of them without any), so one case
 * can be run alone:
 *   build/tests/test_engine test_push_tree   that case
 *   build/tests/test_engine push             every case with "push" in it
 *   build/tests/test_engine 'test_*_tree'    a glob (fnmatch(3))
 *   build/tests/test_engine --list           the names
 * An argument that names a case exactly picks only that one; one with *,
 * ? or [ is a glob; any other picks every name that contains it.  The plan
 * and the numbering count the picked cases only.  An argument that picks
 * nothing is an error (exit 2), so a typo cannot pass for a green run.
 */
#ifndef RDCP_TAP_H
#define RDCP_TAP_H

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_failed_checks;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			tap_failed_checks++;                                   \
			printf("#   %s:%d: check failed: %s\n", __FILE__,      \
			       __LINE__, #cond);                               \
		}                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long _a = (long long)(a), _b = (long long)(b);            \
		if (_a != _b) {                                                \
			tap_failed_checks++;                                   \
			printf("#   %s:%d: %s == %s: %lld != %lld\n",          \
			       __FILE__, __LINE__, #a, #b, _a, _b);            \
		}                                                              \
	} while (0)

struct tap_test {
	const char *name;
	void (*fn)(void);
};

#define TAP_TEST(f) { #f, f }

/* Whether @pat picks the case @name: only that case if one of @tests is
 * named @pat exactly, else as a glob or a substring. */
static inline int tap_picks(const struct tap_test *tests, size_t n,
			    const char *pat, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(pat, tests[i].name) == 0)
			return strcmp(pat, name) == 0;
	if (strpbrk(pat, "*?["))
		return fnmatch(pat, name, 0) == 0;
	return strstr(name, pat) != NULL;
}

/* Whether the command line picks @name (every case without arguments). */
static inline int tap_picked(const struct tap_test *tests, size_t n,
			     int argc, char **argv, const char *name)
{
	if (argc < 2)
		return 1;
	for (int a = 1; a < argc; a++)
		if (tap_picks(tests, n, argv[a], name))
			return 1;
	return 0;
}

/*
 * Runs the cases of @tests (@n of them) that argv picks (see above) and
 * prints their TAP.  Returns the exit status: 0 all passed, 1 a case
 * failed, 2 a usage error (said on stderr).
 */
static inline int tap_main(const struct tap_test *tests, size_t n, int argc,
			   char **argv)
{
	int passed = 0, failed = 0;
	size_t picked = 0, num = 0;

	for (int a = 1; a < argc; a++) {
		size_t hits = 0;

		if (!strcmp(argv[a], "--list") && argc == 2) {
			for (size_t i = 0; i < n; i++)
				printf("%s\n", tests[i].name);
			return 0;
		}
		if (argv[a][0] == '-') {
			fprintf(stderr,
				"usage: %s [--list | NAME|SUBSTRING|GLOB...]\n",
				argv[0]);
			return 2;
		}
		for (size_t i = 0; i < n; i++)
			hits += tap_picks(tests, n, argv[a], tests[i].name);
		if (!hits) {
			fprintf(stderr,
				"%s: no test case matches '%s' (see --list)\n",
				argv[0], argv[a]);
			return 2;
		}
	}
	for (size_t i = 0; i < n; i++)
		picked += tap_picked(tests, n, argc, argv, tests[i].name);

	printf("1..%zu\n", picked);
	for (size_t i = 0; i < n; i++) {
		int before = tap_failed_checks;

		if (!tap_picked(tests, n, argc, argv, tests[i].name))
			continue;
		num++;
		fflush(stdout);
		tests[i].fn();
		if (tap_failed_checks == before) {
			passed++;
			printf("ok %zu - %s\n", num, tests[i].name);
		} else {
			failed++;
			printf("not ok %zu - %s\n", num, tests[i].name);
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#define TAP_RUN(...)                                                           \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		static const struct tap_test t[] = { __VA_ARGS__ };            \
		return tap_main(t, sizeof(t) / sizeof(t[0]), argc, argv);      \
	}

#endif
