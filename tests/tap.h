/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A tiny TAP harness for the unit and engine tests (the libuv task.h /
 * git t/unit-tests idea): each test is a function; CHECK() records a
 * failure with file:line and keeps going; tap_main() runs them, prints
 * "ok N - name" / "not ok N - name" and a closing "N passed, N failed".
 * tests/run_tests.sh adds the lines of every binary and script together.
 */
#ifndef RDCP_TAP_H
#define RDCP_TAP_H

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

static inline int tap_main(const struct tap_test *tests, size_t n)
{
	int passed = 0, failed = 0;

	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		int before = tap_failed_checks;

		fflush(stdout);
		tests[i].fn();
		if (tap_failed_checks == before) {
			passed++;
			printf("ok %zu - %s\n", i + 1, tests[i].name);
		} else {
			failed++;
			printf("not ok %zu - %s\n", i + 1, tests[i].name);
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#define TAP_RUN(...)                                                           \
	int main(void)                                                         \
	{                                                                      \
		static const struct tap_test t[] = { __VA_ARGS__ };            \
		return tap_main(t, sizeof(t) / sizeof(t[0]));                  \
	}

#endif
