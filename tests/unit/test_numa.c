/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * NUMA placement and huge pages (util/numa.c, util/hugemem.c,
 * transfer/session/affinity.c) against a fake sysfs tree beneath a temporary
 * directory ($RDCP_SYSFS_ROOT): a device's node found, -1, missing; a
 * software device through its netdev; cpulist parsing; the default
 * worker count; the hugetlb pool short (a zero-size pool) and the
 * fallback to transparent or ordinary pages; threads pinned.
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
	TAP_TEST(test_prefer_node), TAP_TEST(test_affinity))
