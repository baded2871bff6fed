/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: O_DIRECT for a large file's chunks, in both roles
 * (the source's reads, the sink's writes). Whether a file gets it (the
 * session's HELLO flags and the file's size), a second descriptor on the
 * same open file opened with O_DIRECT, and chunk I/O split between the two
 * descriptors: the part aligned to the file system's direct-I/O alignment
 * goes straight between the file and the page-aligned ring slot or staging
 * buffer, the unaligned tail (less than one alignment unit, only in a
 * file's last chunk) through the buffered descriptor. Both descriptors
 * name one inode, so fsync of either covers both; the kernel keeps the
 * page cache coherent between them (a direct write drops cached pages of
 * its range, and no range is written both ways).
 */
#ifndef RDCP_DIRECT_H
#define RDCP_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer/xfer.h"
#include "util/workq.h"

/*
 * Auto mode (neither --direct nor --no-direct): files of at least this
 * many bytes go direct, a default ring's worth (64 x 1 MiB). Measured
 * faster from 32 MiB up (doc/PERFORMANCE.md, "Direct I/O"); smaller
 * files are what the page cache holds without notice and what is often
 * read again soon.
 */
#define DIRECT_AUTO_MIN (64ull << 20)

/*
 * A file's direct descriptor: fd -1 when the file goes buffered. drop: it
 * should have gone direct but its file system has no O_DIRECT (a disk
 * one: not tmpfs), so the page cache is spared another way: each chunk is
 * dropped from it once read, or once written and on the device.
 */
struct direct_fd {
	int fd;
	uint32_t align; /* bytes: offsets, lengths and buffers, a power of 2 */
	bool drop;
};

/* HELLO's flags for the user's choice (WIRE_HELLO_DIRECT, _NO_DIRECT). */
uint32_t direct_hello_flags(enum xfer_direct mode);

/*
 * A receiver's own choice (mode) where the client's HELLO flags left it
 * on auto: the flags the session then runs with.
 */
uint32_t direct_session_flags(uint32_t hello_flags, enum xfer_direct mode);

/*
 * Whether a file of size bytes should go direct under the session's HELLO
 * flags (WIRE_HELLO_DIRECT forces it, WIRE_HELLO_NO_DIRECT forbids it,
 * neither: files of DIRECT_AUTO_MIN bytes and more). *forced says whether
 * the user asked for it (then a refusal is worth a line).
 */
bool direct_wanted(uint32_t hello_flags, uint64_t size, bool *forced);

/*
 * Opens the file of fd (a regular file, opened by the caller) a second
 * time with O_DIRECT, for writing when write, else for reading, into d.
 * 0, or -errno with d->fd -1: -EOPNOTSUPP on a memory file system (tmpfs,
 * ramfs: its page cache is the file, nothing to bypass), -EINVAL where the
 * file system has no O_DIRECT or its alignment is more than a page, or the
 * reopen's own failure (-ENOENT without /proc); but for -EOPNOTSUPP,
 * d->drop is then set.
 */
int direct_open(int fd, bool write, struct direct_fd *d)
	__attribute__((warn_unused_result));

/* Closes d's descriptor, if any; d->fd is -1 after. */
void direct_close(struct direct_fd *d);

/* Why direct_open failed, for the user: "tmpfs has no direct I/O", ... */
const char *direct_why(int rc);

/*
 * Writes len bytes of buf at off: the aligned part through d (when d has
 * a descriptor and buf and off are aligned), the rest through fd; with
 * d->drop, waits for the range to reach the device and drops it from the
 * page cache. 0 or -errno. Worker threads may call this at once for
 * different ranges.
 */
int direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
		  size_t len, uint64_t off) __attribute__((warn_unused_result));

/*
 * direct_pwrite in a worker of a pool with asynchronous writes
 * (workq_io_start): a write that goes wholly direct is left in item->io
 * for the pool to submit, so that the worker takes its next item
 * meanwhile; item->io.res then says how it went, once the item is done.
 * Any other (an unaligned tail: a file's last chunk; d without a
 * descriptor, or with drop) is written now, as direct_pwrite. 0 or
 * -errno for what was written now.
 */
int direct_pwrite_async(const struct direct_fd *d, int fd, const void *buf,
			size_t len, uint64_t off, struct workq_item *item)
	__attribute__((warn_unused_result));

/*
 * The same for reading exactly len bytes (d->drop: the range is dropped
 * from the page cache after): -ENODATA if the file ends first.
 */
int direct_pread(const struct direct_fd *d, int fd, void *buf, size_t len,
		 uint64_t off) __attribute__((warn_unused_result));

/*
 * direct_pread for a pool with asynchronous reads (workq_io_start): true
 * when the read goes wholly direct (buf, off and len aligned, d with a
 * descriptor and without drop), after leaving it in item->io for
 * workq_push_read; false for any other (a file's last chunk with an
 * unaligned tail), which is read with direct_pread, as before. Makes no
 * system call.
 */
bool direct_pread_async(const struct direct_fd *d, void *buf, size_t len,
			uint64_t off, struct workq_item *item);

/*
 * Whether fd's file is in the page cache now (read or written lately):
 * most of DIRECT_CACHE_SAMPLES pages spread over it, the first and the
 * last included, are (mincore). The source then reads it buffered, from
 * memory; a file of which only some part is cached (its start, read by
 * file(1) or a previous copy cut short) goes direct. No page is read.
 */
#define DIRECT_CACHE_SAMPLES 32u
bool direct_cached(int fd);

#endif
