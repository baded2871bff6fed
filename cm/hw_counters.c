/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA devices' own counters, from sysfs (cm.h, cm_hw_counters): the
 * retries, RNR NAKs and sequence errors that the hardware or the rxe
 * driver counts per port and that no verbs call returns. The receiver's
 * metrics read them at each scrape; nothing on the data path comes here.
 * Only the files that exist are read: a driver that does not count
 * something has no file for it, and its counter is left out rather than
 * shown as 0.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm/cm.h"
#include "util/numa.h"

/* Each counter's files, the first that exists wins (rxe, mlx5, IB PMA). */
static const struct {
	enum cm_hw_counter c;
	const char *file; /* beneath ports/N/ */
} files[] = {
	{ CM_HW_RNR_NAK_RCVD, "hw_counters/rcvd_rnr_err" },
	{ CM_HW_RNR_NAK_SENT, "hw_counters/send_rnr_err" },
	{ CM_HW_RETRY_EXCEEDED, "hw_counters/retry_exceeded_err" },
	{ CM_HW_RNR_RETRY_EXCEEDED, "hw_counters/retry_rnr_exceeded_err" },
	{ CM_HW_RNR_RETRY_EXCEEDED, "hw_counters/rnr_nak_retry_err" },
	{ CM_HW_ACK_TIMEOUT, "hw_counters/local_ack_timeout_err" },
	{ CM_HW_DUPLICATE, "hw_counters/duplicate_request" },
	{ CM_HW_OUT_OF_SEQ, "hw_counters/out_of_seq_request" },
	{ CM_HW_OUT_OF_SEQ, "hw_counters/out_of_sequence" },
	{ CM_HW_LINK_DOWNED, "counters/link_downed" },
	{ CM_HW_LINK_DOWNED, "hw_counters/link_downed" },
	{ CM_HW_PKTS_SENT, "hw_counters/sent_pkts" },
	{ CM_HW_PKTS_SENT, "counters/port_xmit_packets" },
	{ CM_HW_PKTS_RCVD, "hw_counters/rcvd_pkts" },
	{ CM_HW_PKTS_RCVD, "counters/port_rcv_packets" },
};

/* The number in the file at dirfd/name: 0, or -errno (-ENOENT: none). */
static int read_u64(int dirfd, const char *name, uint64_t *v)
{
	char buf[32], *end;
	ssize_t len;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return len ? -errno : -EINVAL;
	buf[len] = '\0';
	errno = 0;
	*v = strtoull(buf, &end, 10);
	if (end == buf || errno || (*end && *end != '\n'))
		return -EINVAL;
	return 0;
}

static void read_port(int portfd, struct cm_hw_port *p)
{
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		uint64_t v = 0;

		if (p->have & (1u << files[i].c))
			continue;
		if (!read_u64(portfd, files[i].file, &v)) {
			p->v[files[i].c] = v;
			p->have |= 1u << files[i].c;
		}
	}
}

/* A decimal port number, else 0. */
static unsigned int port_number(const char *name)
{
	char *end;
	unsigned long v = strtoul(name, &end, 10);

	return *name >= '1' && *name <= '9' && !*end && v < 256 ? (unsigned)v
								: 0;
}

static int by_device_port(const void *a, const void *b)
{
	const struct cm_hw_port *x = a, *y = b;
	int c = strcmp(x->device, y->device);

	return c ? c : (x->port > y->port) - (x->port < y->port);
}

/* Every port of dev (a directory under class/infiniband) into ports. */
static void read_device(int classfd, const char *dev, struct cm_hw_port *ports,
			size_t cap, size_t *n)
{
	char path[300];
	struct dirent *d;
	DIR *dir;
	int fd;

	snprintf(path, sizeof(path), "%s/ports", dev);
	fd = openat(classfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while (*n < cap && (d = readdir(dir))) {
		struct cm_hw_port *p = &ports[*n];
		unsigned int port = port_number(d->d_name);
		int pfd;

		if (!port)
			continue;
		pfd = openat(dirfd(dir), d->d_name,
			     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0)
			continue;
		memset(p, 0, sizeof(*p));
		snprintf(p->device, sizeof(p->device), "%s", dev);
		p->port = port;
		read_port(pfd, p);
		close(pfd);
		(*n)++;
	}
	closedir(dir);
}

int cm_hw_counters(const char *sysroot, struct cm_hw_port *ports, size_t cap,
		   size_t *n)
{
	char path[4096];
	struct dirent *d;
	DIR *dir;

	*n = 0;
	snprintf(path, sizeof(path), "%s/class/infiniband",
		 sysroot ? sysroot : numa_sysfs_root());
	dir = opendir(path);
	if (!dir)
		return errno == ENOMEM ? -ENOMEM : 0; /* no RDMA device */
	while (*n < cap && (d = readdir(dir))) {
		if (d->d_name[0] == '.' || strlen(d->d_name) >= 64)
			continue;
		read_device(dirfd(dir), d->d_name, ports, cap, n);
	}
	closedir(dir);
	qsort(ports, *n, sizeof(*ports), by_device_port);
	return 0;
}
