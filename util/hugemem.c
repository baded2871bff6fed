/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Huge-page buffers on a NUMA node (hugemem.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/hugemem.h"
#include "util/log.h"
#include "util/numa.h"
#include "util/units.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif

static _Atomic int mode = HUGEMEM_AUTO;

void hugemem_set_mode(enum hugemem_mode m)
{
	atomic_store(&mode, (int)m);
}

enum hugemem_mode hugemem_get_mode(void)
{
	return (enum hugemem_mode)atomic_load(&mode);
}

const char *hugemem_kind_name(enum hugemem_kind k)
{
	return k == HUGEMEM_HUGETLB ? "2 MiB huge pages"
	       : k == HUGEMEM_THP   ? "transparent huge pages"
				    : "4 KiB pages";
}

/* The first line of root/rel into buf; 0 or -1. */
static int read_sys(const char *root, const char *rel, char *buf, size_t n)
{
	char path[PATH_MAX];
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	got = read(fd, buf, n - 1);
	close(fd);
	if (got < 0)
		return -1;
	buf[got] = '\0';
	return 0;
}

static long read_count(const char *root, const char *rel)
{
	char buf[32];

	return read_sys(root, rel, buf, sizeof(buf)) ? 0 : atol(buf);
}

long hugemem_pool_free(const char *root)
{
	static const char dir[] = "kernel/mm/hugepages/hugepages-2048kB/";
	char rel[96];
	long freep, resv;

	snprintf(rel, sizeof(rel), "%sfree_hugepages", dir);
	freep = read_count(root, rel);
	snprintf(rel, sizeof(rel), "%sresv_hugepages", dir);
	resv = read_count(root, rel);
	return freep > resv ? freep - resv : 0;
}

/* Whether THP is not switched off ("[never]"). */
static bool thp_enabled(const char *root)
{
	char buf[128];

	if (read_sys(root, "kernel/mm/transparent_hugepage/enabled", buf,
		     sizeof(buf)))
		return false;
	return !strstr(buf, "[never]");
}

/* The length mapped for len: whole 2 MiB pages from 2 MiB up. */
static size_t map_len(size_t len)
{
	return len >= HUGEMEM_PAGE
		       ? (len + HUGEMEM_PAGE - 1) & ~(size_t)(HUGEMEM_PAGE - 1)
		       : len;
}

/* mmap of len bytes aligned to align (a power of two); NULL on failure. */
static void *map_aligned(size_t len, size_t align)
{
	size_t extra = align > 4096 ? align : 0;
	uintptr_t start, aligned;
	void *p;

	/* Over-map by one alignment unit and trim both ends. */
	p = mmap(NULL, len + extra, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	start = (uintptr_t)p;
	aligned = extra ? (start + align - 1) & ~(uintptr_t)(align - 1) : start;
	if (aligned > start)
		munmap(p, aligned - start);
	if (start + extra > aligned)
		munmap((uint8_t *)aligned + len, start + extra - aligned);
	return (void *)aligned;
}

/* MAP_HUGETLB of len (a multiple of 2 MiB); NULL with errno. */
static void *map_hugetlb(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int hugemem_alloc(const char *what, size_t len, bool nic, int node, void **out,
		  enum hugemem_kind *kind)
{
	enum hugemem_mode m = hugemem_get_mode();
	const char *root = numa_sysfs_root();
	size_t mlen = map_len(len);
	bool big = len >= HUGEMEM_PAGE;
	char sz[32];
	void *p = NULL;
	int err;

	*out = NULL;
	*kind = HUGEMEM_PLAIN;
	if (big && (m == HUGEMEM_ON || (m == HUGEMEM_AUTO && nic))) {
		long need = (long)(mlen / HUGEMEM_PAGE);
		long avail = hugemem_pool_free(root);

		/* The pool first: no mapping tried when it is short. */
		if (avail >= need || m == HUGEMEM_ON)
			p = map_hugetlb(mlen);
		if (p) {
			*kind = HUGEMEM_HUGETLB;
		} else if (m == HUGEMEM_ON) {
			err = errno ? errno : ENOMEM;
			log_err("cannot allocate %s (%s) in huge pages: %ld of "
				"2 MiB free, %ld needed (raise "
				"vm.nr_hugepages, or --hugepages auto)",
				what, units_format_size(len, sz, sizeof(sz)),
				avail, need);
			return -err;
		}
	}
	if (!p) {
		p = map_aligned(mlen, big && nic ? HUGEMEM_PAGE : 4096);
		if (!p) {
			err = errno;
			log_err("cannot allocate %s (%s): %s", what,
				units_format_size(len, sz, sizeof(sz)),
				strerror(err));
			return -err;
		}
		/*
		 * Advice only, no error: a ring or staging area is touched
		 * once per 4 KiB page otherwise, 16 384 faults for 64 MiB,
		 * paid again by every session.
		 */
		if (m == HUGEMEM_OFF)
			madvise(p, mlen, MADV_NOHUGEPAGE);
		else if (big && !madvise(p, mlen, MADV_HUGEPAGE) &&
			 thp_enabled(root))
			*kind = HUGEMEM_THP;
	}
	/* Before the first touch: pages are placed when they fault in. */
	if (node >= 0) {
		int rc = numa_prefer(p, mlen, node);

		if (rc)
			log_debug("%s: cannot prefer NUMA node %d: %s", what,
				  node, strerror(-rc));
	}
	*out = p;
	return 0;
}

void hugemem_free(void *p, size_t len)
{
	if (p)
		munmap(p, map_len(len));
}
