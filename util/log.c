/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Diagnostics: level filtering and line output on stderr. Each message is
 * formatted into one stack buffer and written with a single write(2) so that
 * lines from concurrent threads never interleave. errno is preserved, so a
 * caller may log and then still inspect or return errno.
 */
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
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

/*
 * log_hold: the error lines held_buf back (whole, as they would have been
 * written), the first one's text, and how many there were.
 */
#define LOG_HELD_MAX (16 * LOG_LINE_MAX)
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool holding;
static char held_buf[LOG_HELD_MAX];
static size_t held_len;
static char held_first[LOG_LINE_MAX];
static unsigned int held_n;

void log_hold(void)
{
	pthread_mutex_lock(&held_lock);
	held_len = 0;
	held_n = 0;
	held_first[0] = '\0';
	atomic_store(&holding, true);
	pthread_mutex_unlock(&held_lock);
}

/*
 * Keeps an error line of len bytes (its message from byte pre on, the
 * newline last) if errors are held_buf.
 */
static bool hold_line(const char *line, size_t len, size_t pre)
{
	bool kept = false;

	if (!atomic_load(&holding))
		return false;
	pthread_mutex_lock(&held_lock);
	if (atomic_load(&holding)) {
		if (!held_n++)
			snprintf(held_first, sizeof(held_first), "%.*s",
				 (int)(len - 1 - pre), line + pre);
		if (held_len + len <= sizeof(held_buf))
			memcpy(held_buf + held_len, line, len);
		held_len += len <= sizeof(held_buf) - held_len ? len : 0;
		kept = true;
	}
	pthread_mutex_unlock(&held_lock);
	return kept;
}

unsigned int log_held(char *first, size_t size)
{
	unsigned int n;

	pthread_mutex_lock(&held_lock);
	n = held_n;
	snprintf(first, size, "%s", held_first);
	pthread_mutex_unlock(&held_lock);
	return n;
}

void log_release(bool write_them)
{
	pthread_mutex_lock(&held_lock);
	atomic_store(&holding, false);
	if (write_them)
		log_write(held_buf, held_len);
	held_len = 0;
	held_n = 0;
	pthread_mutex_unlock(&held_lock);
}

/* The last error logged by this thread, for --json (log_last_error). */
static _Thread_local char last_error[LOG_LINE_MAX];
/* This thread's error lines are kept as last_error only (log_quiet_errors). */
static _Thread_local bool quiet_errors;

void log_quiet_errors(bool on)
{
	quiet_errors = on;
}

const char *log_last_error(void)
{
	return last_error;
}

/*
 * The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF) and its code point, or 0.
 */
static size_t utf8_seq(const unsigned char *p, unsigned int *cp)
{
	unsigned int c = p[0], lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2, *cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, *cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, *cp = c & 0x07;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* above U+10FFFF */
	for (i = 1; i < len; i++) {
		if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
			return 0; /* also the NUL that ends a cut sequence */
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	return len;
}

/*
 * Code points a terminal or a log viewer acts on rather than shows: C1
 * controls, the bidirectional controls that reorder what follows
 * (Trojan Source, CVE-2021-42574), and the line and paragraph separators.
 */
static bool is_format_control(unsigned int cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	       cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

size_t log_escape(char *out, size_t outsz, const char *in)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)in;
	size_t n = 0;

	if (!outsz)
		return 0;
	while (*p) {
		unsigned int c = *p, cp = c;
		size_t len = c < 0x80 ? 1 : utf8_seq(p, &cp);
		enum {
			AS_IS,
			HEX,
			CODE_POINT
		} how = AS_IS;
		size_t need;

		if (!len) /* not UTF-8: a byte of its own (a bare C1, ...) */
			how = HEX, len = 1;
		else if (len == 1 && (c < 0x20 || c == 0x7f))
			how = HEX;
		else if (len > 1 && is_format_control(cp))
			how = CODE_POINT;
		need = how == HEX ? 4 : how == CODE_POINT ? 6 : len;
		if (n + need >= outsz)
			break;
		if (how == HEX) {
			memcpy(out + n, "\\x", 2);
			out[n + 2] = hex[c >> 4];
			out[n + 3] = hex[c & 15];
		} else if (how == CODE_POINT) {
			memcpy(out + n, "\\u", 2);
			for (int i = 0; i < 4; i++)
				out[n + 2 + i] = hex[(cp >> (12 - 4 * i)) & 15];
		} else {
			memcpy(out + n, p, len);
		}
		n += need;
		p += len;
	}
	out[n] = '\0';
	return n;
}

/* One line at level, tagged tag; errno as it was at the caller's. */
static void vlog(enum log_level level, const char *tag, int saved,
		 const char *fmt, va_list ap)
{
	char buf[LOG_LINE_MAX], text[LOG_LINE_MAX];
	size_t len, pre;
	int n;

	if (!log_enabled(level) || (level == LOG_ERR && quiet_errors))
		return;

	n = snprintf(buf, sizeof(buf), "%s: %s", atomic_load(&log_prefix), tag);
	if (n < 0)
		goto out;
	len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
	pre = len;

	/* errno back in place for a %m in fmt */
	errno = saved;
	n = vsnprintf(text, sizeof(text), fmt, ap);
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
	if (level != LOG_ERR || !hold_line(buf, len, pre))
		log_write(buf, len);
out:
	errno = saved;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (level == LOG_ERR) {
		va_start(ap, fmt);
		vsnprintf(last_error, sizeof(last_error), fmt, ap);
		va_end(ap);
		errno = saved;
	}
	va_start(ap, fmt);
	vlog(level, log_tag(level), saved, fmt, ap);
	va_end(ap);
	errno = saved;
}

void log_note(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_WARN, "", saved, fmt, ap);
	va_end(ap);
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
