/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * NUMA placement and huge pages (util/numa.c, util/hugemem.c,
 * transfer/session/affinity.c) against a fake sysfs tree beneath a temporary
 * directory ($RDCP_SYSFS_ROOT): a device's node found, -1, missing; a
 * software device through its netdev; cpulist parsing; the default
 * worker count; the hugetlb pool short (a zero-size pool) and the
 * fallback to transparent or ordinary pages; threads pinned; per-rail
 * placement (cm/mem.c): the plan, and where a ring's slots really land
 * with two devices on two nodes (only on a host or guest with two NUMA
 * nodes: tests/e2e/numa.sh runs this binary in its two-node guest).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cm/cm_int.h"
#include "tap.h"
#include "testfs.h"
#include "transfer/session/affinity.h"
#include "util/hugemem.h"
#include "util/log.h"
#include "util/numa.h"

static char root[64];

/* Writes text to root/rel, making its directories. */
static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	f = fopen(path, "w");
	if (!f) {
		printf("#   cannot write %s\n", path);
		return;
	}
	fputs(text, f);
	fclose(f);
}

/* root/rel, in a static buffer. */
static const char *path_of(const char *rel)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return path;
}

/* A fresh fake sysfs, named in RDCP_SYSFS_ROOT. */
static void fake_sysfs(void)
{
	if (root[0])
		tf_rm_tree(root);
	snprintf(root, sizeof(root), "/tmp/rdcp-numa-XXXXXX");
	if (!mkdtemp(root))
		abort();
	setenv("RDCP_SYSFS_ROOT", root, 1);
}

static void test_dev_node_found(void)
{
	fake_sysfs();
	put("class/infiniband/mlx5_0/device/numa_node", "1\n");
	put("class/infiniband/mlx5_1/device/numa_node", "0\n");
	CHECK_EQ(numa_dev_node(root, "mlx5_0"), 1);
	CHECK_EQ(numa_dev_node(root, "mlx5_1"), 0);
	CHECK(!strcmp(numa_sysfs_root(), root));
}

static void test_dev_node_none(void)
{
	fake_sysfs();
	put("class/infiniband/mlx5_0/device/numa_node", "-1\n");
	put("class/infiniband/bad0/device/numa_node", "one\n");
	CHECK_EQ(numa_dev_node(root, "mlx5_0"), -1);
	CHECK_EQ(numa_dev_node(root, "bad0"), -1);
	CHECK_EQ(numa_dev_node(root, "mlx5_9"), -1); /* no such file */
	CHECK_EQ(numa_dev_node(root, "../x"), -1);
	CHECK_EQ(numa_dev_node(root, ""), -1);
}

/* rxe and siw have no device link: the netdev's node counts. */
static void test_dev_node_soft(void)
{
	fake_sysfs();
	put("class/infiniband/rxe0/parent", "eth1\n");
	put("class/net/eth1/device/numa_node", "1\n");
	put("class/infiniband/rxe1/ports/1/gid_attrs/ndevs/0", "eth2\n");
	put("class/net/eth2/device/numa_node", "0\n");
	put("class/infiniband/rxe2/parent", "dummy0\n"); /* no device */
	/* virtio-net: device is the virtio device, its parent the PCI one */
	put("class/infiniband/rxe3/parent", "eth3\n");
	put("devices/pci0000:08/0000:08:01.0/numa_node", "1\n");
	put("devices/pci0000:08/0000:08:01.0/virtio0/vendor", "0x1af4\n");
	put("class/net/eth3/x", "");
	CHECK(!symlinkat("../../../devices/pci0000:08/0000:08:01.0/virtio0",
			 AT_FDCWD, path_of("class/net/eth3/device")));
	CHECK_EQ(numa_dev_node(root, "rxe0"), 1);
	CHECK_EQ(numa_dev_node(root, "rxe1"), 0);
	CHECK_EQ(numa_dev_node(root, "rxe2"), -1);
	CHECK_EQ(numa_dev_node(root, "rxe3"), 1);
	CHECK_EQ(numa_netdev_node(root, "eth1"), 1);
}

static void test_cpulist_parse(void)
{
	static const char *const bad[] = { "3-1",     "a",  "1,,2",
					   "1-",      ",1", "1 2",
					   "0-99999", "-1", "1,\n" };
	cpu_set_t set;
	char buf[64];

	CHECK_EQ(numa_cpulist_parse("0-3,8,10-11\n", &set), 0);
	CHECK_EQ(CPU_COUNT(&set), 7);
	CHECK(CPU_ISSET(0, &set) && CPU_ISSET(3, &set) && CPU_ISSET(8, &set));
	CHECK(CPU_ISSET(11, &set) && !CPU_ISSET(4, &set) &&
	      !CPU_ISSET(9, &set));
	CHECK(!strcmp(numa_cpulist_format(&set, buf, sizeof(buf)),
		      "0-3,8,10-11"));
	CHECK_EQ(numa_cpulist_parse("5", &set), 0);
	CHECK_EQ(CPU_COUNT(&set), 1);
	CHECK(!strcmp(numa_cpulist_format(&set, buf, sizeof(buf)), "5"));
	CHECK_EQ(numa_cpulist_parse("", &set), 0);
	CHECK_EQ(CPU_COUNT(&set), 0);
	CHECK_EQ(numa_cpulist_parse("\n", &set), 0);
	CHECK_EQ(numa_cpulist_parse("2,4-4,6", &set), 0);
	CHECK_EQ(CPU_COUNT(&set), 3);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (numa_cpulist_parse(bad[i], &set) != -EINVAL) {
			printf("#   '%s' was taken\n", bad[i]);
			CHECK(0);
		}
}

/* A node's CPUs are cut to those this process may run on. */
static void test_node_cpus(void)
{
	cpu_set_t set, allowed;

	fake_sysfs();
	CHECK(!sched_getaffinity(0, sizeof(allowed), &allowed));
	put("devices/system/node/node0/cpulist", "0-1023\n");
	put("devices/system/node/node1/cpulist", "\n"); /* memory only */
	put("devices/system/node/node2/cpulist", "0-x\n");
	CHECK_EQ(numa_node_cpus(root, 0, &set), CPU_COUNT(&allowed));
	CHECK(CPU_EQUAL(&set, &allowed));
	CHECK_EQ(numa_node_cpus(root, 1, &set), 0);
	CHECK_EQ(numa_node_cpus(root, 2, &set), -EINVAL);
	CHECK_EQ(numa_node_cpus(root, 3, &set), -ENOENT);
	CHECK_EQ(numa_node_cpus(root, -1, &set), -EINVAL);
}

static void test_workers_rule(void)
{
	CHECK_EQ(numa_workers_for(-1), 2);
	CHECK_EQ(numa_workers_for(0), 2);
	CHECK_EQ(numa_workers_for(2), 2);
	CHECK_EQ(numa_workers_for(5), 2);
	CHECK_EQ(numa_workers_for(6), 3);
	CHECK_EQ(numa_workers_for(16), 8);
	CHECK_EQ(numa_workers_for(128), NUMA_WORKERS_MAX);
}

/* Whether the real hugetlb pool has n free 2 MiB pages. */
static bool real_pool_has(long n)
{
	return hugemem_pool_free("/sys") >= n;
}

/* len bytes at p can be written and read back. */
static bool usable(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i += 4096)
		p[i] = (uint8_t)i;
	p[len - 1] = 0x5a;
	for (size_t i = 0; i < len - 1; i += 4096)
		if (p[i] != (uint8_t)i)
			return false;
	return p[len - 1] == 0x5a;
}

static void put_pool(long freep, long resv, const char *thp)
{
	char n[32];

	snprintf(n, sizeof(n), "%ld\n", freep);
	put("kernel/mm/hugepages/hugepages-2048kB/free_hugepages", n);
	snprintf(n, sizeof(n), "%ld\n", resv);
	put("kernel/mm/hugepages/hugepages-2048kB/resv_hugepages", n);
	put("kernel/mm/transparent_hugepage/enabled", thp);
}

/* An empty pool: auto falls back, on fails with the reason. */
static void test_huge_pool_empty(void)
{
	size_t len = (8u << 20) + 4096;
	enum hugemem_kind k;
	void *p;
	int rc;

	fake_sysfs();
	put_pool(0, 0, "always [madvise] never\n");
	CHECK_EQ(hugemem_pool_free(root), 0);
	hugemem_set_mode(HUGEMEM_AUTO);
	CHECK_EQ(hugemem_alloc("ring", len, true, -1, &p, &k), 0);
	CHECK_EQ(k, HUGEMEM_THP);
	CHECK_EQ((uintptr_t)p % HUGEMEM_PAGE, 0); /* aligned for THP */
	CHECK(usable(p, len));
	hugemem_free(p, len);
	/* THP switched off: ordinary pages, said so. */
	put_pool(0, 0, "always madvise [never]\n");
	CHECK_EQ(hugemem_alloc("ring", len, true, -1, &p, &k), 0);
	CHECK_EQ(k, HUGEMEM_PLAIN);
	hugemem_free(p, len);
	/* on: no mapping without the pool (here the real one is used) */
	hugemem_set_mode(HUGEMEM_ON);
	if (!real_pool_has(5)) {
		log_set_level(LOG_QUIET);
		rc = hugemem_alloc("ring", len, true, -1, &p, &k);
		log_set_level(LOG_WARN);
		CHECK_EQ(rc, -ENOMEM);
		CHECK(p == NULL);
		CHECK(strstr(log_last_error(), "0 of 2 MiB free, 5 needed"));
	}
	/* off: plain pages even where huge ones are free */
	put_pool(1000, 0, "always [madvise] never\n");
	hugemem_set_mode(HUGEMEM_OFF);
	CHECK_EQ(hugemem_alloc("ring", len, true, -1, &p, &k), 0);
	CHECK_EQ(k, HUGEMEM_PLAIN);
	CHECK(usable(p, len));
	hugemem_free(p, len);
	hugemem_set_mode(HUGEMEM_AUTO);
}

/*
 * The pool says it has pages (reserved ones are not free): auto maps
 * MAP_HUGETLB, and when the kernel refuses (the real pool is empty on
 * this host) falls back to THP on the same terms.
 */
static void test_huge_fallback(void)
{
	size_t len = 6u << 20;
	enum hugemem_kind k;
	void *p;

	fake_sysfs();
	put_pool(10, 8, "[always] madvise never\n");
	CHECK_EQ(hugemem_pool_free(root), 2);
	put_pool(100, 0, "[always] madvise never\n");
	CHECK_EQ(hugemem_pool_free(root), 100);
	hugemem_set_mode(HUGEMEM_AUTO);
	CHECK_EQ(hugemem_alloc("ring", len, true, -1, &p, &k), 0);
	if (real_pool_has(3))
		CHECK_EQ(k, HUGEMEM_HUGETLB);
	else
		CHECK_EQ(k, HUGEMEM_THP);
	CHECK_EQ((uintptr_t)p % HUGEMEM_PAGE, 0);
	CHECK(usable(p, len));
	hugemem_free(p, len);
	/* Not for a NIC (TCP): no hugetlb in auto, THP advice only. */
	CHECK_EQ(hugemem_alloc("ring", len, false, -1, &p, &k), 0);
	CHECK_EQ(k, HUGEMEM_THP);
	hugemem_free(p, len);
	/* Under 2 MiB: ordinary pages, whatever the pool. */
	CHECK_EQ(hugemem_alloc("ring", 65536, true, -1, &p, &k), 0);
	CHECK_EQ(k, HUGEMEM_PLAIN);
	CHECK(usable(p, 65536));
	hugemem_free(p, 65536);
}

/* A node preference on this host's node 0 (or no NUMA in the kernel). */
static void test_prefer_node(void)
{
	size_t len = 4u << 20;
	enum hugemem_kind k;
	void *p;
	int rc;

	fake_sysfs();
	put_pool(0, 0, "always [madvise] never\n");
	CHECK_EQ(hugemem_alloc("ring", len, true, 0, &p, &k), 0);
	CHECK(usable(p, len));
	rc = numa_prefer(p, len, 0);
	CHECK(rc == 0 || rc == -ENOSYS);
	CHECK_EQ(numa_prefer(p, len, -1), -EINVAL);
	hugemem_free(p, len);
}

/* The plan of 8 slots over lanes on lane_node, in pages of page bytes. */
static int plan8(uint32_t chunk, unsigned int n, const int *lane_node,
		 size_t page, struct cm_run *run, unsigned int *mis)
{
	struct cm_geom g = { .slots = 8, .chunk_size = chunk };

	return cm_area_plan(&g, n, n, lane_node, page, run, 16, mis);
}

/* Which node each slot should go to, with and without huge pages. */
static void test_rail_plan(void)
{
	const int two[4] = { 0, 1, 0, 1 }, skew[4] = { 0, 1, 1, 1 };
	const int same[2] = { 1, 1 }, unknown[2] = { 0, -1 };
	struct cm_geom g = { .slots = 8, .chunk_size = 2u << 20 };
	struct cm_run run[16];
	unsigned int mis = 99;

	/* 2 MiB slots, 2 lanes on nodes 0 and 1: slot s on s % 2's. */
	CHECK_EQ(plan8(2u << 20, 2, two, HUGEMEM_PAGE, run, &mis), 8);
	CHECK_EQ(mis, 0);
	for (unsigned int s = 0; s < 8; s++) {
		CHECK_EQ(run[s].off, (size_t)s << 21);
		CHECK_EQ(run[s].len, 2u << 20);
		CHECK_EQ(run[s].node, (int)(s % 2));
	}
	/* 4 lanes, rails 0 1 0 1, 4 MiB slots: the same alternation. */
	CHECK_EQ(plan8(4u << 20, 4, two, HUGEMEM_PAGE, run, &mis), 8);
	CHECK_EQ(run[3].node, 1);
	CHECK_EQ(run[3].off, 12u << 20);
	/* 64 KiB slots in 4 KiB pages: exact, slot by slot. */
	CHECK_EQ(plan8(65536, 2, two, 4096, run, &mis), 8);
	CHECK_EQ(mis, 0);
	CHECK_EQ(run[5].off, 5u * 65536);
	CHECK_EQ(run[5].len, 65536);
	/*
	 * 1 MiB slots in 2 MiB pages: a page holds slots 2i and 2i + 1 of
	 * lanes 0 and 1, a tie the first slot's node wins: all on node 0
	 * (one run: nothing to place), 4 slots away from their rail.
	 */
	CHECK_EQ(plan8(1u << 20, 2, two, HUGEMEM_PAGE, run, &mis), 0);
	CHECK_EQ(mis, 4);
	/* Lanes on nodes 0 1 1 1: pages (0,1) on 0, (2,3) on 1, ... */
	CHECK_EQ(plan8(1u << 20, 4, skew, HUGEMEM_PAGE, run, &mis), 4);
	CHECK_EQ(mis, 2);
	CHECK_EQ(run[0].node, 0);
	CHECK_EQ(run[1].node, 1);
	CHECK_EQ(run[1].off, 2u << 20);
	CHECK_EQ(run[1].len, 2u << 20);
	/* 512 KiB slots, 4 to a huge page, 3 of them node 1's: node 1. */
	CHECK_EQ(plan8(512u << 10, 4, skew, HUGEMEM_PAGE, run, &mis), 0);
	CHECK_EQ(mis, 2);
	/* One node, an unknown one, one lane: as without rails. */
	CHECK_EQ(plan8(2u << 20, 2, same, HUGEMEM_PAGE, run, &mis), 0);
	CHECK_EQ(plan8(2u << 20, 2, unknown, HUGEMEM_PAGE, run, &mis), 0);
	CHECK_EQ(plan8(2u << 20, 1, two, HUGEMEM_PAGE, run, &mis), 0);
	/* Lane 1 never joined (up 1): its slots ride lane 0, one node. */
	CHECK_EQ(cm_area_plan(&g, 2, 1, two, HUGEMEM_PAGE, run, 16, &mis), 0);
	/* More runs than room: refused, nothing half planned. */
	CHECK_EQ(cm_area_plan(&g, 2, 2, two, HUGEMEM_PAGE, run, 7, &mis),
		 -E2BIG);
}

/* NUMA nodes online on this host (the real sysfs), 1 when unknown. */
static int host_nodes(void)
{
	char buf[64] = "";
	int fd = open("/sys/devices/system/node/online", O_RDONLY), n = 0;
	ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	cpu_set_t set;

	if (fd >= 0)
		close(fd);
	if (got <= 0 || numa_cpulist_parse(buf, &set))
		return 1;
	n = CPU_COUNT(&set); /* a node list has the cpulist's syntax */
	return n ? n : 1;
}

/*
 * A ring of 8 slots (chunk bytes, pages as hugepages says) over 2 lanes
 * whose devices, mlx5_0 and mlx5_1, the fake sysfs puts on nodes 0 and
 * 1; where the pages of each slot land once touched.
 */
static void rail_ring(uint32_t chunk, enum hugemem_mode hp)
{
	struct cm_conn c = { .geom = { .slots = 8, .chunk_size = chunk },
			     .lanes = 2,
			     .lanes_up = 2 };
	int node[2], two = host_nodes() >= 2;
	uint8_t *data, *hdr;

	c.numa_node = node[0] = cm_numa_of_device("mlx5_0");
	node[1] = cm_numa_of_device("mlx5_1");
	CHECK_EQ(node[0], 0);
	CHECK_EQ(node[1], 1);
	hugemem_set_mode(hp);
	/* One node here: placing on node 1 fails, logged, not fatal. */
	log_set_level(two ? LOG_WARN : LOG_QUIET);
	CHECK_EQ(cm_area_alloc(&c, "ring", true, node, &data, &hdr), 0);
	log_set_level(LOG_WARN);
	hugemem_set_mode(HUGEMEM_AUTO);
	if (!data)
		return;
	CHECK(usable(data, cm_area_len(&c.geom)));
	for (unsigned int s = 0; s < 8; s++) {
		uint8_t *p = data + (size_t)s * chunk;
		int got = numa_node_of_page(p),
		    last = numa_node_of_page(p + chunk - 4096);

		if (!two || got == -ENOSYS) {
			/* Every page on the one node there is. */
			CHECK(got == 0 || got == -ENOSYS);
			continue;
		}
		if (got != (int)(s % 2) || last != got)
			printf("#   slot %u: pages on node %d and %d, want "
			       "%u\n",
			       s, got, last, s % 2);
		CHECK_EQ(got, (int)(s % 2));
		CHECK_EQ(last, (int)(s % 2));
	}
	/* The headers stay on lane 0's node. */
	if (two)
		CHECK_EQ(numa_node_of_page(hdr), 0);
	cm_area_free(&data, &c.geom);
}

static void test_rail_place(void)
{
	fake_sysfs();
	put("class/infiniband/mlx5_0/device/numa_node", "0\n");
	put("class/infiniband/mlx5_1/device/numa_node", "1\n");
	put_pool(0, 0, "always [madvise] never\n");
	if (host_nodes() < 2)
		printf("# skip: this host has %d NUMA node: where the pages "
		       "land is checked in a two-node host or guest "
		       "(tests/e2e/numa.sh runs this case there); here only "
		       "that the allocation goes on without node 1\n",
		       host_nodes());
	/* Slots of a huge page (THP advised): each on its rail's node. */
	rail_ring(2u << 20, HUGEMEM_AUTO);
	/* 64 KiB slots in 4 KiB pages: the same, slot by slot. */
	rail_ring(64u << 10, HUGEMEM_OFF);
	tf_rm_tree(root);
	root[0] = '\0';
}

struct pin_case {
	struct xfer_opts o;
	struct cm_conn c;
	unsigned int workers;
	cpu_set_t after;
};

static void *pin_thread(void *arg)
{
	struct pin_case *pc = arg;

	pc->workers = affinity_apply(&pc->c, &pc->o);
	sched_getaffinity(0, sizeof(pc->after), &pc->after);
	return NULL;
}

/* Runs affinity_apply in a thread of its own (pins only that one). */
static void run_pin(struct pin_case *pc)
{
	pthread_t t;

	CHECK(!pthread_create(&t, NULL, pin_thread, pc));
	pthread_join(t, NULL);
}

static void test_affinity(void)
{
	struct pin_case pc = { 0 };
	cpu_set_t allowed;
	char list[32];
	int first = -1;

	CHECK(!sched_getaffinity(0, sizeof(allowed), &allowed));
	for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
		if (CPU_ISSET(i, &allowed))
			first = i;
	fake_sysfs();
	snprintf(list, sizeof(list), "%d\n", first);
	put("devices/system/node/node1/cpulist", list);
	put("devices/system/node/node0/cpulist", "1023\n");
	/* The device on node 1, one CPU there: pinned to it, 2 workers. */
	pc.c.numa_node = 1;
	snprintf(pc.c.dev, sizeof(pc.c.dev), "mlx5_0");
	run_pin(&pc);
	CHECK_EQ(CPU_COUNT(&pc.after), 1);
	CHECK(CPU_ISSET(first, &pc.after));
	CHECK_EQ(pc.workers, 2);
	CHECK_EQ(pc.c.numa_node, 1);
	/* --workers wins over the rule. */
	pc.o.link.workers = 5;
	run_pin(&pc);
	CHECK_EQ(pc.workers, 5);
	/* --numa off: not pinned, the memory anywhere. */
	pc.o.link.numa = XFER_NUMA_OFF;
	run_pin(&pc);
	CHECK(CPU_EQUAL(&pc.after, &allowed));
	CHECK_EQ(pc.c.numa_node, -1);
	/* --numa 0 whose CPUs this process may not use: not pinned. */
	if (!CPU_ISSET(1023, &allowed)) {
		pc.o.link.numa = XFER_NUMA_NODE;
		pc.o.link.numa_node = 0;
		run_pin(&pc);
		CHECK(CPU_EQUAL(&pc.after, &allowed));
		CHECK_EQ(pc.c.numa_node, 0);
	}
	/* No such node (sysfs says nothing): not pinned, no failure. */
	pc.o.link.numa = XFER_NUMA_AUTO;
	pc.o.link.workers = 0;
	pc.c.numa_node = 7;
	log_set_level(LOG_QUIET);
	run_pin(&pc);
	log_set_level(LOG_WARN);
	CHECK(CPU_EQUAL(&pc.after, &allowed));
	CHECK_EQ(pc.workers, numa_workers_for(CPU_COUNT(&allowed)));
	tf_rm_tree(root);
	root[0] = '\0';
}

TAP_RUN(TAP_TEST(test_dev_node_found), TAP_TEST(test_dev_node_none),
	TAP_TEST(test_dev_node_soft), TAP_TEST(test_cpulist_parse),
	TAP_TEST(test_node_cpus), TAP_TEST(test_workers_rule),
	TAP_TEST(test_huge_pool_empty), TAP_TEST(test_huge_fallback),
	TAP_TEST(test_prefer_node), TAP_TEST(test_affinity),
	TAP_TEST(test_rail_plan), TAP_TEST(test_rail_place))
