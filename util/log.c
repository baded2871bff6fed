/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Diagnostics: level filtering and line output on stderr. Each message is
 * formatted into one stack buffer and written with a single write(2) so that
 * lines from concurrent threads never interleave. errno is preserved, so a
 * caller may log and then still inspect or return errno.
 */
#include "util/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024

static atomic_int log_level = LOG_WARN;
static _Atomic(const char *) log_prefix = "rdcp";

void log_set_level(enum log_level level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

enum log_level log_get_level(void)
{
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

bool log_enabled(enum log_level level)
{
	return level <= log_get_level() && level != LOG_QUIET;
}

void log_set_prefix(const char *prefix)
{
	atomic_store(&log_prefix, prefix ? prefix : "rdcp");
}

static const char *log_tag(enum log_level level)
{
	switch (level) {
	case LOG_WARN:
		return "warning: ";
	case LOG_DEBUG:
		return "debug: ";
	default:
		return "";
	}
}

static void log_write(const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(STDERR_FILENO, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* The last error logged by this thread, for --json (log_last_error). */
static _Thread_local char last_error[LOG_LINE_MAX];

const char *log_last_error(void)
{
	return last_error;
}

size_t log_escape(char *out, size_t outsz, const char *in)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)in;
	size_t n = 0;

	if (!outsz)
		return 0;
	for (; *p; p++) {
		unsigned int c = *p;
		/* C0, DEL, and C1 as UTF-8 encodes it (U+0080..U+009F). */
		bool c1 = c == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
		size_t need = c1 ? 6 : c < 0x20 || c == 0x7f ? 4 : 1;

		if (n + need >= outsz)
			break;
		if (c1) {
			c = *++p;
			memcpy(out + n, "\\u00", 4);
			out[n + 4] = hex[c >> 4];
			out[n + 5] = hex[c & 15];
		} else if (need == 4) {
			out[n] = '\\';
			out[n + 1] = 'x';
			out[n + 2] = hex[c >> 4];
			out[n + 3] = hex[c & 15];
		} else {
			out[n] = (char)c;
		}
		n += need;
	}
	out[n] = '\0';
	return n;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char buf[LOG_LINE_MAX], text[LOG_LINE_MAX];
	int saved = errno;
	size_t len;
	va_list ap;
	int n;

	if (level == LOG_ERR) {
		va_start(ap, fmt);
		vsnprintf(last_error, sizeof(last_error), fmt, ap);
		va_end(ap);
		errno = saved;
	}
	if (!log_enabled(level))
		return;

	n = snprintf(buf, sizeof(buf), "%s: %s", atomic_load(&log_prefix),
		     log_tag(level));
	if (n < 0)
		goto out;
	len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;

	va_start(ap, fmt);
	/* errno back in place for a %m in fmt */
	errno = saved;
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0)
		goto out;
	/*
	 * Names and messages from a peer or the file system may hold control
	 * bytes: shown escaped, they can neither forge a log line nor drive
	 * a terminal.
	 */
	len += log_escape(buf + len, sizeof(buf) - len, text);
	/* Cut (the text, or its escapes at the end of buf): say so. */
	if ((size_t)n >= sizeof(text) || len > sizeof(buf) - 8) {
		len = len > sizeof(buf) - 2 ? sizeof(buf) - 2 : len;
		memcpy(buf + len - 3, "...", 3);
	}
	buf[len++] = '\n';
	log_write(buf, len);
out:
	errno = saved;
}

bool log_every_due(struct log_every *r, uint64_t now_ms, unsigned int every_ms,
		   unsigned int *held)
{
	if (r->next_ms && now_ms < r->next_ms) {
		r->held++;
		return false;
	}
	*held = r->held;
	r->held = 0;
	r->next_ms = now_ms + every_ms;
	return true;
}
