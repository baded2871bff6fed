/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* O_DIRECT for a large file's chunks, both roles; see direct.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "transfer/fs/direct.h"
#include "transfer/wire/wire.h"
#include "util/io.h"

/* Buffers are page aligned (ring, staging, scratch): no stricter need. */
#define DIRECT_ALIGN_MAX 4096u

uint32_t direct_hello_flags(enum xfer_direct mode)
{
	return mode == XFER_DIRECT_ON	 ? WIRE_HELLO_DIRECT
	       : mode == XFER_DIRECT_OFF ? WIRE_HELLO_NO_DIRECT
					 : 0;
}

uint32_t direct_session_flags(uint32_t hello_flags, enum xfer_direct mode)
{
	if (hello_flags & (WIRE_HELLO_DIRECT | WIRE_HELLO_NO_DIRECT))
		return hello_flags;
	return hello_flags | direct_hello_flags(mode);
}

bool direct_wanted(uint32_t hello_flags, uint64_t size, bool *forced)
{
	*forced = hello_flags & WIRE_HELLO_DIRECT;
	if (hello_flags & WIRE_HELLO_NO_DIRECT)
		return false;
	return *forced || size >= DIRECT_AUTO_MIN;
}

/* A file system whose files live in the page cache itself. */
static bool in_memory(int fd)
{
	struct statfs fs;

	return fstatfs(fd, &fs) == 0 &&
	       (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

/*
 * The alignment direct I/O needs on d's file (statx STATX_DIOALIGN, Linux
 * 6.1), at least 512 bytes; 0 when the file system says it has none. A
 * kernel or file system that does not say gets a page, which every
 * block device's logical block fits.
 */
static uint32_t dio_align(int fd)
{
	struct statx sx;
	uint32_t a;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) < 0 ||
	    !(sx.stx_mask & STATX_DIOALIGN))
		return DIRECT_ALIGN_MAX;
	if (!sx.stx_dio_offset_align || !sx.stx_dio_mem_align)
		return 0;
	a = sx.stx_dio_offset_align > sx.stx_dio_mem_align
		    ? sx.stx_dio_offset_align
		    : sx.stx_dio_mem_align;
	return a < 512 ? 512 : a;
}

int direct_open(int fd, bool write, struct direct_fd *d)
{
	char proc[40];
	uint32_t align;
	int rc;

	d->fd = -1;
	d->align = 0;
	d->drop = false;
	d->by_chunk = false;
	if (in_memory(fd))
		return -EOPNOTSUPP;
	d->drop = true; /* unless it works, below */
	/*
	 * The same inode through /proc, not by name again: nothing can swap
	 * the file in between. A new open file description, so O_DIRECT is
	 * this descriptor's alone and fd stays buffered for the tail.
	 */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	d->fd = open(proc,
		     (write ? O_WRONLY : O_RDONLY) | O_DIRECT | O_CLOEXEC);
	if (d->fd < 0)
		return -errno;
	align = dio_align(d->fd);
	/* A power of two no larger than a page: the buffers meet it. */
	if (!align || align > DIRECT_ALIGN_MAX || (align & (align - 1))) {
		rc = -EINVAL;
		direct_close(d);
		return rc;
	}
	d->align = align;
	d->drop = false;
	return 0;
}

void direct_close(struct direct_fd *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

const char *direct_why(int rc)
{
	switch (rc) {
	case -EOPNOTSUPP:
		return "a memory file system (tmpfs) has no direct I/O";
	case -EINVAL:
		return "the file system does not take O_DIRECT";
	case -ENOENT:
		return "/proc is not mounted";
	default:
		return "O_DIRECT failed";
	}
}

/* How many of len bytes at buf and off d may move: its aligned part. */
static size_t direct_part(const struct direct_fd *d, const void *buf,
			  size_t len, uint64_t off)
{
	uint64_t mask;

	if (d->fd < 0)
		return 0;
	mask = d->align - 1;
	if (((uintptr_t)buf & mask) || (off & mask))
		return 0;
	return len & ~(size_t)mask;
}

int direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
		  size_t len, uint64_t off)
{
	size_t head = direct_part(d, buf, len, off);
	int rc = head ? io_pwrite_full(d->fd, buf, head, off) : 0;

	if (!rc && len > head)
		rc = io_pwrite_full(fd, (const char *)buf + head, len - head,
				    off + head);
	if (!rc && d->drop) {
		/* On the device first: dirty pages cannot be dropped. */
		if (sync_file_range(fd, (off_t)off, (off_t)len,
				    SYNC_FILE_RANGE_WAIT_BEFORE |
					    SYNC_FILE_RANGE_WRITE |
					    SYNC_FILE_RANGE_WAIT_AFTER) < 0)
			return -errno;
		posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	}
	return rc;
}

int direct_pread(const struct direct_fd *d, int fd, void *buf, size_t len,
		 uint64_t off)
{
	size_t head = direct_part(d, buf, len, off);
	int rc;

	/* From memory what is there: a direct read would go to the disk. */
	if (head && d->by_chunk && direct_range_cached(fd, off, len))
		head = 0;
	rc = head ? io_pread_full(d->fd, buf, head, off) : 0;

	if (!rc && len > head)
		rc = io_pread_full(fd, (char *)buf + head, len - head,
				   off + head);
	if (!rc && d->drop)
		posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	return rc;
}

/* cachestat(2) (Linux 6.5; the same number on every architecture). */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct cs_range {
	uint64_t off, len;
};

struct cs_stat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
		nr_recently_evicted;
};

static atomic_bool no_cachestat; /* ENOSYS once: mincore from then on */

/* Cached pages of [off, off + len) by mincore, one 1 MiB window at a time. */
static int mincore_pages(int fd, uint64_t off, uint64_t len, uint64_t page,
			 uint64_t *cached)
{
	unsigned char vec[256];
	uint64_t first = off - off % page;
	uint64_t end = off + len;

	*cached = 0;
	for (uint64_t at = first; at < end;) {
		uint64_t n = (end - at + page - 1) / page;
		void *p;

		if (n > sizeof(vec))
			n = sizeof(vec);
		/*
		 * Mapped, not read: mincore touches no page, and no I/O
		 * starts; a window at a time, so a huge chunk's mapping stays
		 * small.
		 */
		p = mmap(NULL, (size_t)(n * page), PROT_READ, MAP_SHARED, fd,
			 (off_t)at);
		if (p == MAP_FAILED)
			return -errno;
		if (mincore(p, (size_t)(n * page), vec) < 0) {
			int rc = -errno;

			munmap(p, (size_t)(n * page));
			return rc;
		}
		munmap(p, (size_t)(n * page));
		for (uint64_t i = 0; i < n; i++)
			*cached += vec[i] & 1;
		at += n * page;
	}
	return 0;
}

bool direct_range_cached(int fd, uint64_t off, uint64_t len)
{
	long psz = sysconf(_SC_PAGESIZE);
	uint64_t page = psz > 0 ? (uint64_t)psz : 4096;
	uint64_t first = off - off % page;
	uint64_t pages = (off + len - first + page - 1) / page;
	uint64_t cached = 0;

	if (!len)
		return false;
	if (!atomic_load_explicit(&no_cachestat, memory_order_relaxed)) {
		struct cs_range r = { .off = first, .len = pages * page };
		struct cs_stat cs;

		if (syscall(SYS_cachestat, fd, &r, &cs, 0) == 0)
			return 2 * cs.nr_cache > pages;
		if (errno != ENOSYS)
			return false; /* direct: what it would do anyway */
		atomic_store_explicit(&no_cachestat, true,
				      memory_order_relaxed);
	}
	if (mincore_pages(fd, off, len, page, &cached))
		return false;
	return 2 * cached > pages;
}
