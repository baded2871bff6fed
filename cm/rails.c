/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Rails (--streams N over several RDMA devices; doc/PROTOCOL.md:
 * Rails): a connection's lanes spread over the receiver's devices, lane k
 * on rail k % R. The receiver lists its rails (each device with an active
 * port, an address of lane 0's family and lane 0's link rate, lane 0's
 * first: vrail_select) and the client joins lane k at rail k % R's
 * address, so both ends of that lane are on that rail's device; a rail the
 * client cannot join (rdma_lane.c) is dropped and its lanes join rail 0. Each
 * device has its own PD, completion channel and registrations of the ring or
 * staging (held by lane 0 for its device, by the first lane on each other one:
 * vrail_pick), and the ring's rkey for rail r travels in RING.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_int.h"
#include "cm/verbs_int.h"
#include "util/log.h"

static struct vconn *to_v(struct cm_conn *c)
{
	return (struct vconn *)c;
}

/* Whether name is one of list's comma-separated names (NULL: any). */
static bool dev_listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	if (!list)
		return true;
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !strncmp(p, name, n))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

static void rail_of(const struct sockaddr *sa, struct cm_rail *r)
{
	memset(r, 0, sizeof(*r));
	if (sa->sa_family == AF_INET) {
		r->family = 4;
		memcpy(r->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else {
		r->family = 6;
		memcpy(r->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	}
}

/*
 * The device (with an active port) that owns local address sa, or NULL;
 * *port its port.
 */
static struct ibv_context *dev_of(const struct sockaddr *sa, uint8_t *port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_port_attr pa;

	if (!ch)
		return NULL;
	if (!rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) &&
	    !rdma_bind_addr(id, (struct sockaddr *)sa) && id->verbs &&
	    !ibv_query_port(id->verbs, id->port_num, &pa) &&
	    pa.state == IBV_PORT_ACTIVE) {
		ctx = id->verbs; /* librdmacm keeps it open */
		*port = id->port_num;
	}
	if (id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return ctx;
}

unsigned int vrail_gbps(struct ibv_context *ctx, uint8_t port)
{
#ifdef RDCP_TEST_HOOKS
	const char *h = getenv("RDCP_TEST_RAIL_GBPS");
	const char *name = ctx ? ibv_get_device_name(ctx->device) : NULL;
	size_t n = name ? strlen(name) : 0;

	for (const char *p = h; name && p && *p;) {
		if (!strncmp(p, name, n) && p[n] == '=')
			return (unsigned int)strtoul(p + n + 1, NULL, 10);
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
#endif
	return vconn_link_gbps(ctx, port);
}

unsigned int vrail_select(const struct vrail_cand *c, unsigned int n,
			  unsigned int max, enum vrail_why *why,
			  unsigned int *out)
{
	unsigned int taken = 0;

	for (unsigned int i = 0; i < n; i++) {
		bool seen = false;

		for (unsigned int k = 0; k < i && !seen; k++)
			seen = c[k].dev == c[i].dev;
		if (i == 0)
			why[i] = VRAIL_TAKEN; /* lane 0's: rail 0 */
		else if (seen)
			why[i] = VRAIL_SEEN;
		else if (!c[i].listed)
			why[i] = VRAIL_UNLISTED;
		else if (c[i].gbps != c[0].gbps)
			why[i] = VRAIL_RATE;
		else if (taken >= max)
			why[i] = VRAIL_FULL;
		else
			why[i] = VRAIL_TAKEN;
		if (why[i] == VRAIL_TAKEN)
			out[taken++] = i;
	}
	return taken;
}

#define RAIL_CANDS 64 /* interface addresses looked at, at most */

int vconn_local_rails(struct cm_conn *c, const char *devices,
		      struct cm_rail *out, unsigned int max)
{
	struct vconn *v = to_v(c);
	const struct sockaddr *own = rdma_get_local_addr(v->id);
	struct vrail_cand cand[RAIL_CANDS];
	struct sockaddr_storage addr[RAIL_CANDS];
	enum vrail_why why[RAIL_CANDS];
	unsigned int pick[RAIL_CANDS];
	struct ifaddrs *ifs, *i;
	unsigned int nc = 1, n;

	v->rail_ctx[0] = v->id->verbs;
	rail_of(own, &out[0]);
	v->nrails = 1;
	if (max <= 1 || getifaddrs(&ifs))
		return 1;
	cand[0] = (struct vrail_cand){
		.name = c->dev,
		.dev = v->id->verbs,
		.gbps = vrail_gbps(v->id->verbs, v->id->port_num),
		.listed = true,
	};
	for (i = ifs; i && nc < RAIL_CANDS; i = i->ifa_next) {
		struct ibv_context *ctx;
		uint8_t port = 1;

		if (!i->ifa_addr || i->ifa_addr->sa_family != own->sa_family ||
		    !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		if (i->ifa_addr->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(
			    &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
			continue; /* a scope the wire does not carry */
		ctx = dev_of(i->ifa_addr, &port);
		if (!ctx)
			continue;
		cand[nc] = (struct vrail_cand){
			.name = ibv_get_device_name(ctx->device),
			.dev = ctx,
			.gbps = vrail_gbps(ctx, port),
			.listed = dev_listed(devices,
					     ibv_get_device_name(ctx->device)),
		};
		memcpy(&addr[nc], i->ifa_addr,
		       i->ifa_addr->sa_family == AF_INET
			       ? sizeof(struct sockaddr_in)
			       : sizeof(struct sockaddr_in6));
		nc++;
	}
	freeifaddrs(ifs);
	n = vrail_select(cand, nc, max, why, pick);
	for (unsigned int k = 1; k < nc; k++) {
		if (why[k] == VRAIL_RATE)
			log_info("device %s left out of the rails of %s: its "
				 "link is %u Gb/s, lane 0's %s %u Gb/s (rails "
				 "are the devices of lane 0's rate)",
				 cand[k].name, c->peer, cand[k].gbps,
				 cand[0].name, cand[0].gbps);
		else if (why[k] == VRAIL_FULL)
			log_debug("device %s left out of the rails of %s: "
				  "%u rails, one per lane, taken already",
				  cand[k].name, c->peer, max);
	}
	for (unsigned int r = 1; r < n; r++) {
		v->rail_ctx[r] = (struct ibv_context *)cand[pick[r]].dev;
		rail_of((const struct sockaddr *)&addr[pick[r]], &out[r]);
		log_debug("rail %u of %s: %s", r, c->peer, cand[pick[r]].name);
	}
	v->nrails = n;
	c->rails = n;
	return (int)n;
}

int vconn_set_rails(struct cm_conn *c, unsigned int n,
		    const struct cm_rail *addr, const char *devices)
{
	struct vconn *v = to_v(c);

	if (n < 1 || n > CM_LANES_MAX || v->lane[1])
		return -EINVAL;
	v->nrails = n;
	c->rails = n;
	v->rail_devices = devices;
	memset(v->rail_ctx, 0, sizeof(v->rail_ctx));
	v->rail_ctx[0] = v->id->verbs;
	for (unsigned int r = 1; r < n; r++) {
		if (addr[r].family != 4 && addr[r].family != 6)
			return -EINVAL;
		v->rail_addr[r] = addr[r];
	}
	return 0;
}

int vrail_pick(struct vconn *parent, unsigned int idx, struct vconn *l)
{
	struct ibv_context *ctx = l->id->verbs;
	unsigned int r = parent->nrails > 1 ? parent->lane_rail[idx] : 0;
	struct ibv_context *want = r ? parent->rail_ctx[r] : parent->id->verbs;
	int fl;

	if (!want && !parent->rail_dead[r])
		want = parent->rail_ctx[r] = ctx; /* the client's first on r */
	if (ctx == want && !dev_listed(parent->rail_devices, l->base.dev)) {
		log_msg(l->probe ? LOG_DEBUG : LOG_ERR,
			"lane %u of %s: routed through %s, not one of the "
			"devices named (%s)",
			idx, parent->base.peer, l->base.dev,
			parent->rail_devices);
		return -EXDEV;
	}
	if (ctx != want) {
		log_msg(l->probe ? LOG_DEBUG : LOG_ERR,
			"lane %u of %s: routed through %s, not %s, the device "
			"of its rail",
			idx, parent->base.peer, l->base.dev,
			want ? ibv_get_device_name(want->device) : "?");
		return -EXDEV;
	}
	if (ctx == parent->id->verbs) {
		l->rail = parent;
		return 0;
	}
	for (unsigned int i = 1; i < CM_LANES_MAX; i++) {
		struct vconn *o = parent->lane[i];

		if (o && o->pd && o->id->verbs == ctx) {
			l->rail = o;
			return 0;
		}
	}
	l->rail = l;
	l->pd = ibv_alloc_pd(ctx);
	if (!l->pd) {
		log_err("cannot allocate protection domain on %s: %s",
			l->base.dev, strerror(errno));
		return -errno;
	}
	l->cch = ibv_create_comp_channel(ctx);
	if (!l->cch) {
		log_err("cannot create completion channel on %s: %s",
			l->base.dev, strerror(errno));
		return -errno;
	}
	fl = fcntl(ctx->async_fd, F_GETFL);
	if (cm_set_nonblock(l->cch->fd) || fl < 0 ||
	    fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		log_err("cannot watch %s: %s", l->base.dev, strerror(errno));
		return -EIO;
	}
	return 0;
}
