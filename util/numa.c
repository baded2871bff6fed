/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * NUMA placement from sysfs, mbind(2) and sched_setaffinity(2) (numa.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/numa.h"

/* <linux/mempolicy.h>, not always installed */
#define MPOL_PREFERRED_ 1
#define MPOL_F_NODE_ (1 << 0)
#define MPOL_F_ADDR_ (1 << 1)

const char *numa_sysfs_root(void)
{
	const char *r = getenv("RDCP_SYSFS_ROOT");

	return r && *r ? r : "/sys";
}

/* Reads the first line of root/rel (no newline) into buf; 0 or -errno. */
static int read_line(const char *root, const char *rel, char *buf, size_t n)
{
	char path[PATH_MAX];
	ssize_t got;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", root, rel) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read(fd, buf, n - 1);
	if (got < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* A node number as sysfs writes it, or -1. */
static int node_of(const char *root, const char *rel)
{
	char buf[32], *end;
	long v;

	if (read_line(root, rel, buf, sizeof(buf)))
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || *end || v < 0 || v > 4095)
		return -1;
	return (int)v;
}

/* A device or interface name fit to be a path component. */
static bool name_ok(const char *s)
{
	return s && *s && strlen(s) < 64 && !strchr(s, '/') && strcmp(s, ".") &&
	       strcmp(s, "..");
}

/*
 * The node of class/CLASS/NAME's device: its numa_node, or when it has
 * none (a virtio device: the PCI function is its parent) its parent's.
 */
static int device_node(const char *root, const char *cls, const char *name)
{
	char rel[160], buf[8];

	snprintf(rel, sizeof(rel), "class/%s/%s/device/numa_node", cls, name);
	if (!read_line(root, rel, buf, sizeof(buf)))
		return node_of(root, rel);
	snprintf(rel, sizeof(rel), "class/%s/%s/device/../numa_node", cls,
		 name);
	return node_of(root, rel);
}

int numa_netdev_node(const char *root, const char *netdev)
{
	if (!name_ok(netdev))
		return -1;
	return device_node(root, "net", netdev);
}

int numa_dev_node(const char *root, const char *dev)
{
	char rel[128], nd[64];
	int node;

	if (!name_ok(dev))
		return -1;
	node = device_node(root, "infiniband", dev);
	if (node >= 0)
		return node;
	/*
	 * A software device (rxe, siw) has no device link of its own: it
	 * sits where the network device it runs over does.
	 */
	snprintf(rel, sizeof(rel), "class/infiniband/%s/parent", dev);
	if (!read_line(root, rel, nd, sizeof(nd)) && name_ok(nd))
		return numa_netdev_node(root, nd);
	snprintf(rel, sizeof(rel),
		 "class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev);
	if (!read_line(root, rel, nd, sizeof(nd)) && name_ok(nd))
		return numa_netdev_node(root, nd);
	return -1;
}

/* A CPU number at *s (advanced past it); -1 if none or too large. */
static long cpu_num(const char **s)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)**s))
		return -1;
	errno = 0;
	v = strtol(*s, &end, 10);
	if (errno || v >= CPU_SETSIZE)
		return -1;
	*s = end;
	return v;
}

int numa_cpulist_parse(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	if (!*s || !strcmp(s, "\n"))
		return 0;
	for (;;) {
		long lo = cpu_num(&s), hi = lo;

		if (lo < 0)
			return -EINVAL;
		if (*s == '-') {
			s++;
			hi = cpu_num(&s);
			if (hi < lo)
				return -EINVAL;
		}
		for (long i = lo; i <= hi; i++)
			CPU_SET((int)i, set);
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s == '\n')
			s++;
		return *s ? -EINVAL : 0;
	}
}

int numa_node_cpus(const char *root, int node, cpu_set_t *set)
{
	char rel[96], buf[4096];
	cpu_set_t allowed;
	int rc;

	if (node < 0)
		return -EINVAL;
	snprintf(rel, sizeof(rel), "devices/system/node/node%d/cpulist", node);
	rc = read_line(root, rel, buf, sizeof(buf));
	if (rc)
		return rc;
	rc = numa_cpulist_parse(buf, set);
	if (rc)
		return rc;
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return -errno;
	CPU_AND(set, set, &allowed);
	return CPU_COUNT(set);
}

int numa_prefer(void *p, size_t len, int node)
{
	unsigned long mask[4096 / (8 * sizeof(unsigned long))] = { 0 };

	if (node < 0 || node >= 4096)
		return -EINVAL;
	mask[node / (8 * sizeof(unsigned long))] |=
		1ul << (node % (8 * sizeof(unsigned long)));
	/* maxnode counts bits, plus one (the kernel's off-by-one). */
	if (syscall(SYS_mbind, p, len, MPOL_PREFERRED_, mask,
		    (unsigned long)(8 * sizeof(mask)) + 1, 0ul))
		return -errno;
	return 0;
}

int numa_node_of_page(const void *p)
{
	int node = -1;

	if (syscall(SYS_get_mempolicy, &node, NULL, 0ul, p,
		    MPOL_F_NODE_ | MPOL_F_ADDR_))
		return -errno;
	return node;
}

int numa_pin_self(const cpu_set_t *set)
{
	return sched_setaffinity(0, sizeof(*set), set) ? -errno : 0;
}

char *numa_cpulist_format(const cpu_set_t *set, char *buf, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; i < CPU_SETSIZE && used < n; i++) {
		int j = i;

		if (!CPU_ISSET(i, set))
			continue;
		while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, set))
			j++;
		used += (size_t)snprintf(buf + used, n - used,
					 j > i ? "%s%d-%d" : "%s%d",
					 used ? "," : "", i, j);
		i = j;
	}
	return buf;
}

unsigned int numa_workers_for(int ncpus)
{
	unsigned int n = ncpus > 0 ? (unsigned int)ncpus / 2 : 0;

	return n < 2 ? 2 : n > NUMA_WORKERS_MAX ? NUMA_WORKERS_MAX : n;
}
