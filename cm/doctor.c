/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp --check: the environment doctor. Looks at what RDMA users lose hours
 * to: no device or provider, a port that is not ACTIVE, which GID index is
 * RoCE v2 over IPv4, the memlock limit against the ring, the rdma_cm
 * device node, whether rdma_cm resolves the peer and through which device,
 * and whether a receiver answers there and over which transport. Every
 * problem comes with the command that fixes it. Findings go to a callback
 * (cmd/ prints them); nothing here prints.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "cm/cm_int.h"
#include "cm/device.h"
#include "util/checksum.h"
#include "util/hugemem.h"
#include "util/log.h"
#include "util/numa.h"
#include "util/units.h"

struct doc {
	void (*say)(void *arg, enum cm_check_kind kind, const char *text);
	void *arg;
	int problems;
};

static void say(struct doc *d, enum cm_check_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct doc *d, enum cm_check_kind kind, const char *fmt, ...)
{
	char buf[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (kind == CM_CHECK_PROBLEM)
		d->problems++;
	d->say(d->arg, kind, buf);
}

static const char *port_state(enum ibv_port_state s)
{
	return ibv_port_state_str(s);
}

static const char *gid_type(uint32_t t)
{
	return t == IBV_GID_TYPE_ROCE_V2   ? "RoCE v2"
	       : t == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1"
					   : "IB";
}

static void gids(struct doc *d, struct ibv_context *ctx, const char *name,
		 uint8_t port, int len)
{
	int v2_ipv4 = -1;

	for (int i = 0; i < len; i++) {
		struct ibv_gid_entry e;
		char a[INET6_ADDRSTRLEN];

		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0))
			continue;
		inet_ntop(AF_INET6, e.gid.raw, a, sizeof(a));
		say(d, CM_CHECK_INFO, "  %s port %u GID %d: %s (%s)", name,
		    port, i, a, gid_type(e.gid_type));
		if (v2_ipv4 < 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    IN6_IS_ADDR_V4MAPPED((struct in6_addr *)e.gid.raw))
			v2_ipv4 = i;
	}
	if (v2_ipv4 >= 0)
		say(d, CM_CHECK_OK,
		    "%s port %u: RoCE v2 over IPv4 is GID index %d (rdma_cm "
		    "picks it from the address; perftest wants -x %d)",
		    name, port, v2_ipv4, v2_ipv4);
}

/* Where a device's sessions will run (cm/mem.c, transfer/session/affinity.c). */
static void numa(struct doc *d, const char *name)
{
	int node = cm_numa_of_device(name);
	char list[128];
	cpu_set_t set;
	int n;

	if (node < 0) {
		say(d, CM_CHECK_INFO,
		    "%s: NUMA node unknown (one node, or a virtual device): "
		    "memory and threads not placed",
		    name);
		return;
	}
	n = numa_node_cpus(numa_sysfs_root(), node, &set);
	if (n > 0)
		say(d, CM_CHECK_OK,
		    "%s: NUMA node %d: ring, staging and threads go there "
		    "(CPUs %s)",
		    name, node, numa_cpulist_format(&set, list, sizeof(list)));
	else
		say(d, CM_CHECK_INFO,
		    "%s: NUMA node %d, none of whose CPUs this process may "
		    "use: threads not pinned",
		    name, node);
}

/* Whether a session's ring (or staging) fits in the hugetlb pool. */
static void hugepages(struct doc *d, uint64_t need)
{
	long have = hugemem_pool_free(numa_sysfs_root());
	long want = (long)((need + HUGEMEM_PAGE - 1) / HUGEMEM_PAGE);

	if (hugemem_get_mode() == HUGEMEM_OFF)
		say(d, CM_CHECK_INFO, "huge pages: off (--hugepages off)");
	else if (have >= want)
		say(d, CM_CHECK_OK,
		    "huge pages: %ld of 2 MiB free, a session takes %ld: ring "
		    "and staging in huge pages",
		    have, want);
	else if (hugemem_get_mode() == HUGEMEM_ON)
		say(d, CM_CHECK_PROBLEM,
		    "huge pages: %ld of 2 MiB free, a session takes %ld: with "
		    "--hugepages on it fails (sysctl vm.nr_hugepages=%ld)",
		    have, want, want);
	else
		say(d, CM_CHECK_INFO,
		    "huge pages: %ld of 2 MiB free, a session takes %ld: "
		    "transparent huge pages instead (for 2 MiB pages: sysctl "
		    "vm.nr_hugepages=%ld)",
		    have, want, want);
}

static void unopened(void *arg, const char *name, int err)
{
	say(arg, CM_CHECK_PROBLEM,
	    "%s: cannot open (%s): is its provider installed? "
	    "apt-get install ibverbs-providers",
	    name, strerror(err));
}

static bool port(void *arg, struct ibv_context *ctx, const char *name,
		 uint8_t p, const struct ibv_port_attr *pa)
{
	struct doc *d = arg;

	if (!pa)
		return false;
	say(d, pa->state == IBV_PORT_ACTIVE ? CM_CHECK_OK : CM_CHECK_PROBLEM,
	    "%s port %u: %s, %s, active MTU %d%s", name, p,
	    port_state(pa->state), cm_link_layer_str(pa->link_layer),
	    128 << pa->active_mtu,
	    pa->state == IBV_PORT_ACTIVE
		    ? ""
		    : ": bring its link up (ip link set DEV up, "
		      "check the cable and the switch port)");
	gids(d, ctx, name, p, pa->gid_tbl_len);
	if (p == 1)
		numa(d, name);
	return false;
}

static void devices(struct doc *d)
{
	struct cm_port_walk w = {
		.unopened = unopened,
		.port = port,
		.arg = d,
	};

	if (cm_device_walk(&w) == -ENODEV)
		say(d, CM_CHECK_PROBLEM,
		    "no RDMA device: load your NIC's driver, or for Soft-RoCE: "
		    "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "
		    "eth0 (rdcp will use TCP meanwhile)");
}

static void memlock(struct doc *d, uint64_t need)
{
	struct rlimit rl;
	char have[32], want[32];

	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		return;
	units_format_size(need, want, sizeof(want));
	if (rl.rlim_cur == RLIM_INFINITY) {
		say(d, CM_CHECK_OK,
		    "memlock limit: unlimited (a session pins %s)", want);
		return;
	}
	units_format_size(rl.rlim_cur, have, sizeof(have));
	if (rl.rlim_cur >= need)
		say(d, CM_CHECK_OK, "memlock limit %s covers a session (%s)",
		    have, want);
	else
		say(d, CM_CHECK_PROBLEM,
		    "memlock limit %s is below the %s a session pins: 'ulimit "
		    "-l unlimited' (or memlock in /etc/security/limits.conf); "
		    "for the service LimitMEMLOCK=infinity",
		    have, want);
}

/*
 * Which CRC32 the chunk checksums (the default --checksum) run on: zlib's
 * takes ~3.5 times the CPU of ISA-L's per byte (util/checksum.c), which a
 * fast link or few workers feel.
 */
static void crc(struct doc *d)
{
	if (ck_crc32_is_isal())
		say(d, CM_CHECK_OK, "CRC32 by ISA-L (PCLMULQDQ)");
	else
		say(d, CM_CHECK_WARN,
		    "CRC32 by zlib: this rdcp was built without ISA-L, whose "
		    "CRC32 is ~3.5x faster per core (install libisal-dev, "
		    "or the distribution's ISA-L package, and rebuild)");
}

int cm_check(const struct cm_addr *peer, uint64_t session_bytes,
	     void (*out)(void *arg, enum cm_check_kind kind, const char *text),
	     void *arg)
{
	struct doc d = { .say = out, .arg = arg };
	char why[200], dev[64];
	int fd;

	devices(&d);
	fd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		say(&d, CM_CHECK_PROBLEM,
		    "cannot open /dev/infiniband/rdma_cm (%s): modprobe "
		    "rdma_ucm",
		    strerror(errno));
	else
		close(fd);
	memlock(&d, session_bytes);
	hugepages(&d, session_bytes);
	crc(&d);
	if (!peer || !peer->host)
		return d.problems;
	if (cm_rdma_probe(peer, 2000, why, sizeof(why), dev, sizeof(dev)))
		say(&d, CM_CHECK_PROBLEM,
		    "rdma_cm cannot reach %s: %s: rdcp would use TCP (set up a "
		    "device on that network, or Soft-RoCE: rdma link add rxe0 "
		    "type rxe netdev eth0)",
		    peer->host, why);
	else
		say(&d, CM_CHECK_OK, "rdma_cm resolves %s through %s",
		    peer->host, dev);
	{
		struct cm_geom g = {
			.ctrl_size = CM_CTRL_SIZE,
			.ctrl_credits = CM_CTRL_CREDITS,
			.slots = 1,
			.chunk_size = 4096,
		};
		struct cm_timeouts to = { .resolve_ms = 2000,
					  .connect_ms = 4000 };
		struct cm_conn *c;
		enum log_level lvl = log_get_level();
		int rc;

		/* The connect errors are findings here, not failures. */
		log_set_level(LOG_QUIET);
		rc = cm_connect(peer, &g, &to, &c);
		log_set_level(lvl);
		if (rc) {
			say(&d, CM_CHECK_PROBLEM,
			    "no rdcp receiver answers at %s port %u: %s (start "
			    "one: rdcp --listen --root DIR, or systemctl start "
			    "rdcpd)",
			    peer->host, peer->port, log_last_error());
		} else {
			say(&d, CM_CHECK_OK,
			    "an rdcp receiver answers at %s over %s (%s)",
			    c->peer, c->transport, c->dev);
			cm_conn_destroy(c);
		}
	}
	return d.problems;
}
