/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* File reports and progress for the data roles; see report.h. */
#include <stdarg.h>
#include <stdio.h>

#include "transfer/session/report.h"
#include "transfer/wire/wire.h"
#include "util/checksum.h"
#include "util/clock.h"

void report_fail(int *err, char *msg, size_t len, int e, const char *fmt, ...)
{
	va_list ap;

	if (*err)
		return;
	*err = e;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
}

const char *report_csum_name(enum xfer_csum c)
{
	return c == XFER_CSUM_SHA256  ? "sha256"
	       : c == XFER_CSUM_CRC32 ? "crc32"
				      : "none";
}

const char *report_skip_reason(uint32_t flags, uint8_t sync)
{
	static const char *const level[] = {
		[WIRE_SYNC_EXISTS] = "exists",
		[WIRE_SYNC_SIZE] = "size",
		[WIRE_SYNC_MTIME] = "mtime",
		[WIRE_SYNC_CHECKSUM] = "checksum",
	};

	if (flags & WIRE_HELLO_NO_CLOBBER)
		return "no-clobber";
	if (sync && sync <= WIRE_SYNC_MAX)
		return level[sync];
	if (flags & WIRE_HELLO_UPDATE)
		return "update";
	return "resume";
}

void report_file(const struct xfer_opts *o, struct xfer_file_report *r,
		 enum xfer_csum csum, const uint8_t *digest, unsigned int dlen)
{
	char hex[2 * WIRE_DIGEST_MAX + 1] = "";

	if (!o->copy.on_file)
		return;
	if (dlen)
		checksum_hex(digest, dlen, hex);
	r->digest = hex;
	r->algorithm = report_csum_name(csum);
	o->copy.on_file(o->copy.on_file_arg, r);
}

void report_progress(const struct xfer_opts *o, uint64_t *next_ms,
		     uint64_t done, uint64_t total, const char *path)
{
	uint64_t now;

	if (!o->copy.on_progress)
		return;
	now = clock_now_ms();
	if (now < *next_ms)
		return;
	*next_ms = now + REPORT_PROGRESS_MS;
	o->copy.on_progress(o->copy.on_file_arg, done, total, path);
}
