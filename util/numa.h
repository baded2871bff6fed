/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * NUMA placement without libnuma: where a device sits (sysfs), which CPUs
 * a node has (sysfs cpulist), a memory policy for a range (mbind(2) as a
 * raw system call) and a thread's CPUs (sched_setaffinity(2)). libnuma
 * would add a dependency for one system call and a list parser; it does
 * not know RDMA devices either, so the sysfs reading stays ours anyway.
 *
 * Every sysfs path is taken beneath a root: numa_sysfs_root(), which is
 * "/sys" unless the environment variable RDCP_SYSFS_ROOT names another
 * directory (the unit tests build a fake tree there).
 */
#ifndef RDCP_NUMA_H
#define RDCP_NUMA_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* The sysfs root: $RDCP_SYSFS_ROOT if set and not empty, else "/sys". */
const char *numa_sysfs_root(void);

/*
 * The NUMA node of RDMA device dev ("mlx5_0", "rxe0") beneath root:
 * class/infiniband/DEV/device/numa_node (when the device has none, as a
 * virtio device, its parent's: the PCI function), or, for a software
 * device with
 * no device link (rxe, siw), that of the network device it is bound to
 * (class/infiniband/DEV/parent, else the netdev of port 1's first GID,
 * then class/net/NETDEV/device/numa_node). Returns the node (>= 0), or -1
 * when it cannot be told (no such file, a virtual netdev, or the kernel
 * says -1: no preference).
 */
int numa_dev_node(const char *root, const char *dev);

/* The node of network device netdev ("eth0"), as numa_dev_node. */
int numa_netdev_node(const char *root, const char *netdev);

/*
 * Parses a kernel CPU list ("0-3,8,10-11", "" for none, a trailing
 * newline allowed) into set (cleared first). 0, or -EINVAL for anything
 * else (a range backwards, a CPU beyond CPU_SETSIZE).
 */
int numa_cpulist_parse(const char *s, cpu_set_t *set);

/*
 * The CPUs of node beneath root (devices/system/node/nodeN/cpulist) that
 * this process may run on (sched_getaffinity), into set. Returns their
 * count (0: none allowed, or a node without CPUs), or -errno (-ENOENT: no
 * such node).
 */
int numa_node_cpus(const char *root, int node, cpu_set_t *set);

/*
 * Asks the kernel to take [p, p + len) from node's memory where it can
 * (MPOL_PREFERRED: another node when it has none left, never a failed
 * fault); p page aligned, before the range is first touched. 0 or -errno
 * (-ENOSYS: a kernel without NUMA).
 */
int numa_prefer(void *p, size_t len, int node);

/*
 * The node of the page at p (faulted in if it is not yet, as a read
 * would), or -errno (-ENOSYS: a kernel without NUMA).
 */
int numa_node_of_page(const void *p);

/* Runs the calling thread on set only (threads it starts inherit it). */
int numa_pin_self(const cpu_set_t *set);

/*
 * The default worker count for a session whose threads may use ncpus
 * CPUs: half of them (the other half for the engine threads of this and
 * other sessions, the kernel's network and disk work, the peer when it is
 * on the same host), at least 2 (one reads or writes while the other
 * checksums) and at most NUMA_WORKERS_MAX (past that one file's chunks
 * wait on the wire, not the CPU).
 */
#define NUMA_WORKERS_MAX 8u
unsigned int numa_workers_for(int ncpus);

/*
 * The CPUs in set as a kernel CPU list ("0-3,8") into buf (cut to n
 * bytes); returns buf.
 */
char *numa_cpulist_format(const cpu_set_t *set, char *buf, size_t n);

#endif
