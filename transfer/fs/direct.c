/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* O_DIRECT for a large file's chunks, both roles; see direct.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

int direct_pwrite_async(const struct direct_fd *d, int fd, const void *buf,
			size_t len, uint64_t off, struct workq_item *item)
{
	size_t head = d->drop ? 0 : direct_part(d, buf, len, off);

	/*
	 * A tail (a file's last chunk) goes as before, head then tail, at
	 * once: the direct write of the head would drop the page it shares
	 * with a tail written first from the page cache again.
	 */
	if (!head || head < len)
		return direct_pwrite(d, fd, buf, len, off);
	item->io = (struct workq_io){
		.fd = d->fd,
		.buf = buf,
		.len = head,
		.off = off,
	};
	return 0;
}

int direct_pread(const struct direct_fd *d, int fd, void *buf, size_t len,
		 uint64_t off)
{
	size_t head = direct_part(d, buf, len, off);
	int rc = head ? io_pread_full(d->fd, buf, head, off) : 0;

	if (!rc && len > head)
		rc = io_pread_full(fd, (char *)buf + head, len - head,
				   off + head);
	if (!rc && d->drop)
		posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	return rc;
}

bool direct_pread_async(const struct direct_fd *d, void *buf, size_t len,
			uint64_t off, struct workq_item *item)
{
	size_t head = d->drop ? 0 : direct_part(d, buf, len, off);

	if (!head || head < len)
		return false;
	item->io = (struct workq_io){
		.fd = d->fd,
		.buf = buf,
		.len = len,
		.off = off,
	};
	return true;
}

bool direct_cached(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned int have = 0, n = 0;
	uint64_t last = UINT64_MAX, size;
	struct stat st;

	if (page <= 0 || fstat(fd, &st) < 0 || st.st_size <= 0)
		return false;
	size = (uint64_t)st.st_size;
	for (unsigned int i = 0; i < DIRECT_CACHE_SAMPLES; i++) {
		/* The first and the last page, and evenly between. */
		uint64_t off = (size - 1) * i / (DIRECT_CACHE_SAMPLES - 1);
		unsigned char vec = 0;
		void *p;

		off -= off % (uint64_t)page;
		if (off == last) /* a small file: fewer pages than samples */
			continue;
		last = off;
		/*
		 * One page mapped at a time (a huge file's whole mapping
		 * would count in the address space), not read: mincore
		 * touches no page, and no I/O starts.
		 */
		p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd,
			 (off_t)off);
		if (p == MAP_FAILED)
			break;
		if (mincore(p, (size_t)page, &vec) < 0)
			vec = 0;
		munmap(p, (size_t)page);
		have += vec & 1;
		n++;
	}
	return n && 2 * have > n;
}
