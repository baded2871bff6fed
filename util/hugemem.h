/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Large buffers (the ring and the staging area of a session) in the
 * largest pages this host will give, on a chosen NUMA node: 2 MiB huge
 * pages from the hugetlb pool (vm.nr_hugepages) when it has enough free,
 * else transparent huge pages (madvise(MADV_HUGEPAGE) on 2 MiB aligned
 * memory), else ordinary pages. A NIC translates a registered buffer page
 * by page: 64 MiB is 16 384 translation entries in 4 KiB pages, 32 in
 * 2 MiB ones, and as many page faults when it is first touched.
 *
 * The mode is process-wide, set once by cmd/ before any session starts.
 */
#ifndef RDCP_HUGEMEM_H
#define RDCP_HUGEMEM_H

#include <stdbool.h>
#include <stddef.h>

#define HUGEMEM_PAGE (2u << 20) /* the huge page size used: 2 MiB */

enum hugemem_mode {
	HUGEMEM_AUTO = 0, /* hugetlb pages when free, else THP, else plain */
	HUGEMEM_ON,	  /* hugetlb pages or fail (says how many are free) */
	HUGEMEM_OFF,	  /* ordinary pages only (MADV_NOHUGEPAGE) */
};

enum hugemem_kind {
	HUGEMEM_PLAIN = 0, /* ordinary pages */
	HUGEMEM_THP,	   /* transparent huge pages asked for (madvise) */
	HUGEMEM_HUGETLB,   /* 2 MiB pages of the hugetlb pool */
};

/* Sets the mode for every later hugemem_alloc (default HUGEMEM_AUTO). */
void hugemem_set_mode(enum hugemem_mode m);
enum hugemem_mode hugemem_get_mode(void);

/* "2 MiB huge pages", "transparent huge pages", "4 KiB pages". */
const char *hugemem_kind_name(enum hugemem_kind k);

/*
 * 2 MiB pages of the hugetlb pool free for a new mapping (free less
 * reserved) beneath sysfs root (kernel/mm/hugepages/hugepages-2048kB/);
 * 0 when there is no pool or it cannot be read.
 */
long hugemem_pool_free(const char *root);

/*
 * Maps len (> 0) bytes of zeroed memory, page aligned, into *out. nic:
 * the memory will be registered with a NIC, so in auto mode it is worth
 * hugetlb pages and a 2 MiB alignment (otherwise THP advice only, as for
 * TCP); node >= 0: taken from that NUMA node where the kernel can
 * (numa_prefer), -1: anywhere. Areas under 2 MiB get ordinary pages. *kind
 * says what was used. Returns 0, or -errno with the reason logged (what:
 * the buffer's name in the message), e.g. -ENOMEM in mode on when the
 * pool is short.
 */
int hugemem_alloc(const char *what, size_t len, bool nic, int node, void **out,
		  enum hugemem_kind *kind) __attribute__((warn_unused_result));

/* Unmaps what hugemem_alloc(len) mapped at p (NULL: nothing). */
void hugemem_free(void *p, size_t len);

#endif
