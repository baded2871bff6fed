/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA devices of this host, their ports and GID tables: one walk
 * over them (cm_device_walk) for the doctor's listing and for --device
 * and --gid-index, which this file turns into the source address that
 * makes rdma_cm pick that device and GID (rdma_cm chooses the device
 * from the addresses alone); and the addresses a peer may reach this host
 * by (cm_local_addrs, for a receiver started over ssh). Nothing here
 * logs: callers get the reason.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "cm/device.h"

int cm_device_walk(const struct cm_port_walk *w)
{
	struct ibv_device **list;
	int n = 0, opened = 0;
	bool stop = false;

	if (w->names)
		w->names[0] = '\0';
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	for (int i = 0; w->names && i < n; i++) {
		size_t used = strlen(w->names);

		snprintf(w->names + used, w->namesz - used, "%s%s",
			 w->names[0] ? ", " : "", ibv_get_device_name(list[i]));
	}
	for (int i = 0; i < n && !stop; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_device_attr da;
		struct ibv_context *ctx;

		if (w->only && strcmp(name, w->only))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			if (w->unopened)
				w->unopened(w->arg, name, errno);
			continue;
		}
		opened++;
		if (ibv_query_device(ctx, &da) == 0)
			for (uint8_t p = 1; p <= da.phys_port_cnt && !stop;
			     p++) {
				struct ibv_port_attr pa;
				bool ok = ibv_query_port(ctx, p, &pa) == 0;

				stop = w->port(w->arg, ctx, name, p,
					       ok ? &pa : NULL);
			}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return opened;
}

const char *cm_link_layer_str(uint8_t link_layer)
{
	return link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)"
						     : "InfiniBand";
}

/* ---- --device: pin the RDMA device through the source address ---- */

/* The network interfaces a device's GID tables name (RoCE). */
struct netdevs {
	unsigned int ifidx[64];
	int n;
};

static bool netdevs_port(void *arg, struct ibv_context *ctx, const char *dev,
			 uint8_t port, const struct ibv_port_attr *pa)
{
	struct netdevs *nd = arg;

	if (!pa)
		return false;
	for (int g = 0; g < pa->gid_tbl_len && nd->n < 64; g++) {
		struct ibv_gid_entry e;

		if (!ibv_query_gid_ex(ctx, port, (uint32_t)g, &e, 0) &&
		    e.ndev_ifindex)
			nd->ifidx[nd->n++] = e.ndev_ifindex;
	}
	return false;
}

/*
 * rdma_cm picks the device from the addresses; to use a given device,
 * resolve from an address of one of its netdevs (the GID table names them
 * for RoCE; sysfs for IPoIB). Fills out with such an address of family
 * (AF_UNSPEC: any), port 0. Returns 0, or -ENODEV with why filled.
 */
static int device_addr(const char *dev, int family,
		       struct sockaddr_storage *out, char *why, size_t whysz)
{
	struct netdevs nd = { .n = 0 };
	char have[256] = "";
	struct cm_port_walk w = {
		.only = dev,
		.port = netdevs_port,
		.arg = &nd,
		.names = have,
		.namesz = sizeof(have),
	};
	struct ifaddrs *ifa = NULL;
	int rc = -ENODEV;

	if (cm_device_walk(&w) <= 0) {
		snprintf(why, whysz, "no RDMA device named '%s' here (%s%s)",
			 dev, have[0] ? "have: " : "none at all", have);
		return -ENODEV;
	}
	if (getifaddrs(&ifa) == 0) {
		for (struct ifaddrs *a = ifa; a && rc; a = a->ifa_next) {
			unsigned int idx;
			char sysfs[300];

			if (!a->ifa_addr ||
			    (a->ifa_addr->sa_family != AF_INET &&
			     a->ifa_addr->sa_family != AF_INET6) ||
			    (family != AF_UNSPEC &&
			     a->ifa_addr->sa_family != family))
				continue;
			idx = if_nametoindex(a->ifa_name);
			snprintf(sysfs, sizeof(sysfs),
				 "/sys/class/infiniband/%s/device/net/%s", dev,
				 a->ifa_name);
			for (int i = 0; i < nd.n && rc; i++)
				if (nd.ifidx[i] == idx)
					rc = 0;
			if (rc && access(sysfs, F_OK) == 0)
				rc = 0;
			if (!rc) {
				memset(out, 0, sizeof(*out));
				memcpy(out, a->ifa_addr,
				       a->ifa_addr->sa_family == AF_INET
					       ? sizeof(struct sockaddr_in)
					       : sizeof(struct sockaddr_in6));
			}
		}
		freeifaddrs(ifa);
	}
	if (rc)
		snprintf(why, whysz,
			 "RDMA device '%s' has no %saddress on its network "
			 "interface (give it one: ip addr add ADDR dev NETDEV)",
			 dev,
			 family == AF_INET6  ? "IPv6 "
			 : family == AF_INET ? "IPv4 "
					     : "");
	return rc;
}

/* Finds the first port of a device whose GID index holds an address. */
struct gid_find {
	int index;
	bool found;
	struct ibv_gid_entry e;
};

static bool gid_find_port(void *arg, struct ibv_context *ctx, const char *dev,
			  uint8_t port, const struct ibv_port_attr *pa)
{
	static const uint8_t zero[16];
	struct gid_find *f = arg;

	f->found = !ibv_query_gid_ex(ctx, port, (uint32_t)f->index, &f->e, 0) &&
		   memcmp(f->e.gid.raw, zero, 16);
	return f->found;
}

/*
 * --gid-index: the IP address held in GID gid of dev (the first port that
 * has such an index), so that rdma_cm resolves from it and uses that GID.
 */
static int gid_addr(const char *dev, int gid, struct sockaddr_storage *out,
		    uint8_t raw[16], char *why, size_t whysz)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0,	0,
					      0, 0, 0, 0, 0xff, 0xff };
	struct gid_find f = { .index = gid };
	struct cm_port_walk w = {
		.only = dev,
		.port = gid_find_port,
		.arg = &f,
	};
	const struct ibv_gid_entry *e = &f.e;

	if (cm_device_walk(&w) <= 0) {
		snprintf(why, whysz, "no RDMA device named '%s' here", dev);
		return -ENODEV;
	}
	if (!f.found) {
		snprintf(why, whysz,
			 "'%s' has no GID %d holding an address (see rdcp "
			 "--check)",
			 dev, gid);
		return -ENODEV;
	}
	memcpy(raw, e->gid.raw, 16);
	memset(out, 0, sizeof(*out));
	if (!memcmp(e->gid.raw, v4mapped, 12)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, e->gid.raw + 12, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, e->gid.raw, 16);
		if (e->gid.raw[0] == 0xfe && (e->gid.raw[1] & 0xc0) == 0x80)
			sin6->sin6_scope_id = e->ndev_ifindex;
	}
	return 0;
}

/* The source address that pins --device (and --gid-index). */
int cm_device_pinned_addr(const struct cm_addr *addr, int family,
			  struct sockaddr_storage *out, uint8_t gid[16],
			  char *why, size_t whysz)
{
	int rc;

	if (addr->gid_index < 0)
		return device_addr(addr->device, family, out, why, whysz);
	rc = gid_addr(addr->device, addr->gid_index, out, gid, why, whysz);
	if (!rc && family != AF_UNSPEC && out->ss_family != family) {
		snprintf(why, whysz,
			 "GID %d of '%s' holds an %s address, the peer is %s",
			 addr->gid_index, addr->device,
			 out->ss_family == AF_INET ? "IPv4" : "IPv6",
			 family == AF_INET ? "IPv4" : "IPv6");
		rc = -EAFNOSUPPORT;
	}
	return rc;
}

/* Whether a is worth telling a peer: not loopback, not IPv6 link-local. */
static bool addr_reachable(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >>
			24) != 127;
	if (a->sa_family == AF_INET6) {
		const struct in6_addr *v6 =
			&((const struct sockaddr_in6 *)a)->sin6_addr;

		return !IN6_IS_ADDR_LOOPBACK(v6) && !IN6_IS_ADDR_LINKLOCAL(v6);
	}
	return false;
}

/* Whether interface name (index idx) carries an RDMA port of nd. */
static bool on_rdma(const struct netdevs *nd, const char *name,
		    unsigned int idx)
{
	char sysfs[300];
	struct dirent *d;
	bool found = false;
	DIR *dir;

	for (int i = 0; i < nd->n; i++)
		if (nd->ifidx[i] == idx)
			return true;
	/* IPoIB: the GID table names no netdev, sysfs does. */
	dir = opendir("/sys/class/infiniband");
	while (dir && !found && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(sysfs, sizeof(sysfs),
			 "/sys/class/infiniband/%s/device/net/%s", d->d_name,
			 name);
		found = access(sysfs, F_OK) == 0;
	}
	if (dir)
		closedir(dir);
	return found;
}

/* The GID tables' netdevs of every active port. */
static bool active_netdevs(void *arg, struct ibv_context *ctx, const char *dev,
			   uint8_t port, const struct ibv_port_attr *pa)
{
	if (pa && pa->state == IBV_PORT_ACTIVE)
		netdevs_port(arg, ctx, dev, port, pa);
	return false;
}

int cm_local_addrs(bool rdma, char (*out)[CM_ADDRSTR_LEN], int max)
{
	struct netdevs nd = { .n = 0 };
	struct cm_port_walk w = { .port = active_netdevs, .arg = &nd };
	struct ifaddrs *ifa = NULL;
	int n = 0;

	if (rdma && cm_device_walk(&w) <= 0)
		return 0;
	if (getifaddrs(&ifa))
		return -errno;
	for (struct ifaddrs *a = ifa; a && n < max; a = a->ifa_next) {
		const void *raw;
		bool dup = false;

		if (!a->ifa_addr || !(a->ifa_flags & IFF_UP) ||
		    !addr_reachable(a->ifa_addr))
			continue;
		if (rdma && !on_rdma(&nd, a->ifa_name,
				     if_nametoindex(a->ifa_name)))
			continue;
		raw = a->ifa_addr->sa_family == AF_INET
			      ? (const void *)&((const struct sockaddr_in *)
							a->ifa_addr)
					->sin_addr
			      : (const void *)&((const struct sockaddr_in6 *)
							a->ifa_addr)
					->sin6_addr;
		if (!inet_ntop(a->ifa_addr->sa_family, raw, out[n],
			       CM_ADDRSTR_LEN))
			continue;
		for (int i = 0; i < n && !dup; i++)
			dup = !strcmp(out[i], out[n]);
		n += !dup;
	}
	freeifaddrs(ifa);
	return n;
}
