/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Full-length I/O loops: retry on EINTR and short transfers so callers see
 * all-or-error. All return 0 or a negative errno.
 */
#ifndef RDCP_IO_H
#define RDCP_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads exactly len bytes at off; -ENODATA if the file ends first. */
int io_pread_full(int fd, void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));
int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));
/* Stream variants (sockets, pipes): -ECONNRESET on EOF before len. */
int io_read_full(int fd, void *buf, size_t len)
	__attribute__((warn_unused_result));
int io_write_full(int fd, const void *buf, size_t len)
	__attribute__((warn_unused_result));
/* io_read_full for a socket, with MSG_WAITALL: fewer calls per frame. */
int io_recv_full(int fd, void *buf, size_t len)
	__attribute__((warn_unused_result));
/* close(2) that reports the error of a failed close as -errno. */
int io_close(int fd);

#endif
