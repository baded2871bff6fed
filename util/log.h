/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Diagnostics for every module. One line per message on stderr, prefixed
 * "rdcp: " (errors) or "rdcp: warning: ". The level is set once by cmd/
 * from -q/-v; hot paths test log_enabled() before formatting anything.
 * Thread-safe: each message is formatted into one buffer and written with a
 * single write(2), so lines from several threads never interleave.
 */
#ifndef RDCP_LOG_H
#define RDCP_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_QUIET = -1, /* nothing at all, not even errors (tests only) */
	LOG_ERR = 0,
	LOG_WARN = 1,
	LOG_INFO = 2,
	LOG_DEBUG = 3,
};

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
bool log_enabled(enum log_level level);

/* Prefix for every line, default "rdcp"; the string must outlive its use. */
void log_set_prefix(const char *prefix);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A line shown at the default level (as warnings are; not under -q), with
 * no "warning: " tag: what a service logs as its trail (one line per
 * session), not a problem.
 */
void log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * --retry: one line per failed attempt. log_hold() holds back the error
 * lines logged from then on (any thread); log_held() says how many there
 * are so far and puts the first one's message in first (size bytes, ""
 * when none), for the caller's own line; log_release() ends the hold and
 * writes them as they were when write_them, else drops them.
 */
void log_hold(void);
unsigned int log_held(char *first, size_t size);
void log_release(bool write_them);
/* The text of the last error this thread logged ("" if none). */
const char *log_last_error(void);
/*
 * on: this thread's error lines are not written, only kept for
 * log_last_error (--split's sessions beside the first: the copy says
 * their failure once, from the thread that waits for them).
 */
void log_quiet_errors(bool on);

/*
 * Copies in into out (outsz bytes, NUL-terminated, cut at a whole escape)
 * with control bytes and bytes that are not well-formed UTF-8 (a bare C1
 * such as 0x9b, an overlong form, a cut sequence) shown as \xNN, and C1,
 * bidirectional and line-separator code points as \uNNNN, so that a name
 * from a peer can neither forge a log line, nor send escape sequences to
 * a terminal, nor reorder what is shown after it. Well-formed text in any
 * script is copied as it is. Returns the length written.
 */
size_t log_escape(char *out, size_t outsz, const char *in);

/*
 * One recurring message at most once per interval, for what a peer can
 * repeat at will (refusals, a listener out of descriptors). The caller owns
 * the state (zeroed to start) and serializes calls on it.
 */
struct log_every {
	uint64_t next_ms;
	unsigned int held;
};

/*
 * Whether the message is due at now_ms; if so *held is how many were held
 * back since the last one (and the next is due every_ms later), else the
 * occurrence is counted.
 */
bool log_every_due(struct log_every *r, uint64_t now_ms, unsigned int every_ms,
		   unsigned int *held);

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_enabled(LOG_DEBUG))                                    \
			log_msg(LOG_DEBUG, __VA_ARGS__);                       \
	} while (0)

#endif
