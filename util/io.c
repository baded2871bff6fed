/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Full-length I/O: positional loops for files and stream loops for sockets
 * and pipes. Short transfers and EINTR are retried so callers see either the
 * whole length moved or a negative errno; EOF before the end is reported as
 * -ENODATA (files) or -ECONNRESET (streams).
 */
#include "util/io.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

/* One syscall moves at most this much on Linux anyway (MAX_RW_COUNT). */
#define IO_STEP ((size_t)0x7ffff000)

static size_t io_step(size_t len)
{
	return len < IO_STEP ? len : IO_STEP;
}

int io_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n;

		if (off > (uint64_t)INT64_MAX)
			return -EINVAL;
		n = pread(fd, p, io_step(len), (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n;

		if (off > (uint64_t)INT64_MAX)
			return -EINVAL;
		n = pwrite(fd, p, io_step(len), (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int io_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, io_step(len));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int io_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, io_step(len));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int io_close(int fd)
{
	/*
	 * The fd is released even when close fails (EINTR included on
	 * Linux), so never retry; only report, as a failed flush may mean
	 * lost data.
	 */
	if (close(fd) < 0)
		return -errno;
	return 0;
}
