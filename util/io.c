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
#include <sys/socket.h>
#include <unistd.h>

/* One syscall moves at most this much on Linux anyway (MAX_RW_COUNT). */
#define IO_STEP ((size_t)0x7ffff000)

static size_t io_step(size_t len)
{
	return len < IO_STEP ? len : IO_STEP;
}

enum io_op {
	IO_PREAD,
	IO_PWRITE,
	IO_READ,
	IO_WRITE,
	IO_RECV
};

/*
 * The one loop behind every call below: op until len bytes moved, retrying
 * EINTR and short transfers. A 0 return before the end is eof_err.
 */
static int io_full(enum io_op op, int fd, void *buf, size_t len, uint64_t off,
		   int eof_err)
{
	char *p = buf;

	while (len) {
		ssize_t n;

		if (off > (uint64_t)INT64_MAX)
			return -EINVAL;
		switch (op) {
		case IO_PREAD:
			n = pread(fd, p, io_step(len), (off_t)off);
			break;
		case IO_PWRITE:
			n = pwrite(fd, p, io_step(len), (off_t)off);
			break;
		case IO_READ:
			n = read(fd, p, io_step(len));
			break;
		case IO_WRITE:
			n = write(fd, p, io_step(len));
			break;
		default:
			n = recv(fd, p, io_step(len), MSG_WAITALL);
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return eof_err;
		p += n;
		len -= (size_t)n;
		if (op == IO_PREAD || op == IO_PWRITE)
			off += (uint64_t)n;
	}
	return 0;
}

int io_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	return io_full(IO_PREAD, fd, buf, len, off, -ENODATA);
}

int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	/* The loop only reads through p for the write ops. */
	return io_full(IO_PWRITE, fd, (void *)buf, len, off, -EIO);
}

int io_read_full(int fd, void *buf, size_t len)
{
	return io_full(IO_READ, fd, buf, len, 0, -ECONNRESET);
}

int io_recv_full(int fd, void *buf, size_t len)
{
	return io_full(IO_RECV, fd, buf, len, 0, -ECONNRESET);
}

int io_write_full(int fd, const void *buf, size_t len)
{
	return io_full(IO_WRITE, fd, (void *)buf, len, 0, -EIO);
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
