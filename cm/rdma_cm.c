/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA transport's connection setup over rdma_cm: the event channel
 * and cm_id, address and route resolution, connect, listen, accept and
 * reject with the 24-byte private data (version and geometry, cm_int.h),
 * and the silent probe that picks RDMA or TCP for AUTO. The verbs
 * resources of a connection are built by vconn_build() (cm/verbs.c) once
 * the cm_id has its device; --device and --gid-index become a source
 * address through cm/device.c. The steps a lane's join takes too (await
 * and judge an event, the connect parameters, a refusal) are
 * cm/rdma_handshake.c's.
 *
 * rdma_* return -1 and set errno; every function below returns 0 or a
 * negative errno and logs the root cause where it is known. Every wait on
 * the event channel is bounded by a struct cm_timeouts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "cm/device.h"
#include "cm/verbs_int.h"
#include "util/clock.h"
#include "util/log.h"

struct cm_rdma_listener {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct log_every short_log;
};

/*
 * -v: which port, GID and MTU the connection uses, the facts to compare
 * with rdcp --check when a host has several devices.
 */
static void log_path(struct vconn *v, const char *what)
{
	struct ibv_port_attr pa;
	union ibv_gid sgid, g;
	char gs[INET6_ADDRSTRLEN] = "?";
	int idx = -1;

	if (!log_enabled(LOG_INFO))
		return;
	if (!v->id->route.path_rec ||
	    ibv_query_port(v->id->verbs, v->id->port_num, &pa)) {
		log_info("%s %s through %s", what, v->base.peer, v->base.dev);
		return;
	}
	sgid = v->id->route.path_rec->sgid;
	for (int i = 0; i < pa.gid_tbl_len && idx < 0; i++)
		if (!ibv_query_gid(v->id->verbs, v->id->port_num, i, &g) &&
		    !memcmp(&g, &sgid, sizeof(g)))
			idx = i;
	inet_ntop(AF_INET6, sgid.raw, gs, sizeof(gs));
	log_info("%s %s through %s port %u, GID %d (%s), active MTU %d, "
		 "link %s",
		 what, v->base.peer, v->base.dev, v->id->port_num, idx, gs,
		 128 << pa.active_mtu, cm_link_layer_str(pa.link_layer));
}

/* ---- active side ---- */

static int vconn_alloc(struct vconn **out)
{
	struct vconn *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	*out = v;
	return 0;
}

int cm_rdma_connect(const struct cm_addr *addr, const struct cm_geom *want,
		    const struct cm_timeouts *to, struct cm_conn **out)
{
	struct sockaddr_storage src;
	uint8_t gid[16] = { 0 };
	struct rdma_conn_param param;
	uint8_t pd[PD_LEN];
	struct addrinfo *ai = NULL;
	struct cm_geom g = *want;
	struct vconn *v;
	int rc;

	g.slots = want->slots ? want->slots : 1; /* 0: sized below */
	if (!cm_geom_valid(&g))
		return -EINVAL;
	rc = vconn_alloc(&v);
	if (rc)
		return rc;
	v->base.geom = *want;
	snprintf(v->base.peer, sizeof(v->base.peer), "%s:%u", addr->host,
		 addr->port);
	rc = cm_resolve(addr, false, &ai);
	if (rc)
		goto out_free;
	cm_sockaddr_str(ai->ai_addr, v->base.peer, sizeof(v->base.peer));
	if (addr->device) {
		char why[300];

		rc = cm_device_pinned_addr(addr, ai->ai_family, &src, gid, why,
					   sizeof(why));
		if (rc) {
			log_err("cannot connect to %s: %s", v->base.peer, why);
			goto out_free;
		}
	}
	v->ech = rdma_create_event_channel();
	if (!v->ech) {
		rc = -errno;
		log_err("cannot open the RDMA CM (%s): no RDMA device, or "
			"rdma_ucm not loaded (set up a device, or Soft-RoCE: "
			"rdma link add rxe0 type rxe netdev eth0)",
			strerror(errno));
		goto out_free;
	}
	rc = cm_set_nonblock(v->ech->fd);
	if (rc)
		goto out_free;
	if (rdma_create_id(v->ech, &v->id, v, RDMA_PS_TCP)) {
		rc = -errno;
		log_err("cannot create RDMA CM id: %s", strerror(errno));
		goto out_free;
	}
	if (rdma_resolve_addr(v->id,
			      addr->device ? (struct sockaddr *)&src : NULL,
			      ai->ai_addr, to->resolve_ms)) {
		rc = -errno;
		log_err("cannot resolve %s to an RDMA device: %s (set up a "
			"device, or Soft-RoCE: rdma link add rxe0 type rxe "
			"netdev eth0)",
			v->base.peer, strerror(errno));
		goto out_free;
	}
	rc = rcm_expect(v, RDMA_CM_EVENT_ADDR_RESOLVED, to->resolve_ms + 1000,
		    "cannot resolve", true);
	if (rc)
		goto out_free;
	if (rdma_resolve_route(v->id, to->resolve_ms)) {
		rc = -errno;
		log_err("cannot resolve route to %s: %s", v->base.peer,
			strerror(errno));
		goto out_free;
	}
	rc = rcm_expect(v, RDMA_CM_EVENT_ROUTE_RESOLVED, to->resolve_ms + 1000,
		    "cannot resolve route to", true);
	if (rc)
		goto out_free;
	if (addr->device &&
	    strcmp(ibv_get_device_name(v->id->verbs->device), addr->device)) {
		log_err("cannot connect to %s through %s: rdma_cm routes it "
			"through %s (check the routes of %s's network)",
			v->base.peer, addr->device,
			ibv_get_device_name(v->id->verbs->device),
			addr->device);
		rc = -ENODEV;
		goto out_free;
	}
	if (addr->device && addr->gid_index >= 0 && v->id->route.path_rec &&
	    memcmp(v->id->route.path_rec->sgid.raw, gid, 16)) {
		log_err("cannot connect to %s from GID %d of %s: rdma_cm "
			"chose another GID (check the routes and GID table "
			"with rdcp --check)",
			v->base.peer, addr->gid_index, addr->device);
		rc = -ENODEV;
		goto out_free;
	}
	/* Left to the link: its rate is known now that the route is. */
	if (!want->slots) {
		unsigned int gbps =
			vrail_gbps(v->id->verbs, v->id->port_num);

		v->base.geom.slots =
			(uint16_t)cm_window_slots(gbps, want->chunk_size, 0);
		log_debug("window: %u slots of %u bytes for a %u Gb/s link",
			  v->base.geom.slots, want->chunk_size, gbps);
	}
	rc = vconn_build(v);
	if (rc)
		goto out_free;
	cm_pd_encode(pd, PD_ST_OK, &v->base.geom);
	rcm_conn_param(&param, pd, PD_LEN);
	if (rdma_connect(v->id, &param)) {
		rc = -errno;
		log_err("cannot connect to %s: %s", v->base.peer,
			strerror(errno));
		goto out_free;
	}
	rc = rcm_expect(v, RDMA_CM_EVENT_ESTABLISHED, to->connect_ms,
		    "cannot connect to", true);
	if (rc)
		goto out_free;
	v->established = true;
	log_path(v, "connected to");
	freeaddrinfo(ai);
	*out = &v->base;
	return 0;

out_free:
	if (ai)
		freeaddrinfo(ai);
	vconn_teardown(v);
	free(v);
	return rc;
}

/* ---- passive side ---- */

static int listen_one(const struct cm_addr *addr, bool quiet,
		      struct cm_rdma_listener **out)
{
	struct cm_rdma_listener *l;
	struct addrinfo *ai = NULL;
	char where[80];
	int rc;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rc = cm_resolve(addr, true, &ai);
	if (rc)
		goto out_free;
	cm_sockaddr_str(ai->ai_addr, where, sizeof(where));
	l->ech = rdma_create_event_channel();
	if (!l->ech) {
		rc = -errno;
		if (!quiet)
			log_err("cannot open the RDMA CM (%s): no RDMA device, "
				"or rdma_ucm not loaded",
				strerror(errno));
		goto out_free;
	}
	rc = cm_set_nonblock(l->ech->fd);
	if (rc)
		goto out_free;
	if (rdma_create_id(l->ech, &l->id, NULL, RDMA_PS_TCP)) {
		rc = -errno;
		if (!quiet)
			log_err("cannot create RDMA CM id: %s",
				strerror(errno));
		goto out_free;
	}
	if (ai->ai_family == AF_INET6) {
		int v6only = 0; /* one listener for both families on "::" */

		rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				&v6only, sizeof(v6only));
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		rc = -errno;
		if (!quiet)
			log_err("cannot bind RDMA listener to %s: %s%s", where,
				strerror(errno),
				errno == EADDRNOTAVAIL || errno == ENODEV
					? " (no RDMA device has this address)"
					: "");
		goto out_free;
	}
	if (rdma_listen(l->id, 64)) {
		rc = -errno;
		if (!quiet)
			log_err("cannot listen on %s: %s", where,
				strerror(errno));
		goto out_free;
	}
	log_info("listening for RDMA connections on %s", where);
	freeaddrinfo(ai);
	*out = l;
	return 0;

out_free:
	if (ai)
		freeaddrinfo(ai);
	cm_rdma_listener_destroy(l);
	return rc;
}

int cm_rdma_listen(const struct cm_addr *addr, bool quiet,
		   struct cm_rdma_listener **out)
{
	struct cm_addr any = *addr;

	if (addr->device && !addr->host) {
		/* --device without --bind: listen on that device's address. */
		struct sockaddr_storage ss;
		char why[300], host[INET6_ADDRSTRLEN];
		int family = addr->family == CM_AF_INET6  ? AF_INET6
			     : addr->family == CM_AF_INET ? AF_INET
							  : AF_UNSPEC;
		uint8_t gid[16];
		int rc = cm_device_pinned_addr(addr, family, &ss, gid, why,
					       sizeof(why));

		if (rc) {
			log_err("cannot listen: %s", why);
			return rc;
		}
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET,
				  &((struct sockaddr_in *)&ss)->sin_addr, host,
				  sizeof(host));
		else
			inet_ntop(AF_INET6,
				  &((struct sockaddr_in6 *)&ss)->sin6_addr,
				  host, sizeof(host));
		any.host = host;
		return listen_one(&any, quiet, out);
	}

	if (addr->host || addr->family != CM_AF_ANY)
		return listen_one(addr, quiet, out);
	/* All addresses: "::" takes IPv4 too; without IPv6, 0.0.0.0. */
	any.host = "::";
	any.family = CM_AF_INET6;
	if (listen_one(&any, true, out) == 0)
		return 0;
	any.host = NULL;
	any.family = CM_AF_INET;
	return listen_one(&any, quiet, out);
}

void cm_rdma_listener_destroy(struct cm_rdma_listener *l)
{
	if (!l)
		return;
	drain_cm_events(l->ech);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ech)
		rdma_destroy_event_channel(l->ech);
	free(l);
}

/* Out of descriptors or memory: said at most every 10 s; we go on. */
static void short_of(struct cm_rdma_listener *l, const char *who, int err)
{
	unsigned int held;

	if (log_every_due(&l->short_log, clock_now_ms(), 10000, &held))
		log_err("cannot take a connection%s%s: %s: RDMA clients are "
			"refused as busy until some close (%u more failures "
			"since last said)",
			who ? " from " : "", who ? who : "", strerror(err),
			held);
}

/*
 * The device the listener is bound to went away: its cm_id must be
 * destroyed now, or the removal waits for it (rdma_get_cm_event(3)).
 */
static void device_removed(struct cm_rdma_listener *l)
{
	char where[80];
	const char *dev =
		l->id->verbs ? ibv_get_device_name(l->id->verbs->device) : "?";

	cm_sockaddr_str(rdma_get_local_addr(l->id), where, sizeof(where));
	log_err("RDMA device %s was removed: no longer listening for RDMA "
		"connections on %s",
		dev, where);
	rdma_destroy_id(l->id);
	l->id = NULL;
}

int cm_rdma_get(struct cm_rdma_listener *l, int timeout_ms,
		struct cm_request **out)
{
	struct rdma_cm_event *ev;
	struct cm_request *req;
	uint16_t ver = 0, st;
	struct cm_geom g;
	char why[100];
	int rc;

	if (!l->id)
		return -ENODEV; /* its device was removed */
	rc = rcm_next_event(l->ech, timeout_ms, &ev);
	if (rc == -ETIMEDOUT)
		return -EAGAIN;
	if (rc)
		return rc;
	if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL && ev->id == l->id) {
		rdma_ack_cm_event(ev);
		device_removed(l);
		return -ENODEV;
	}
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		log_debug("listener: ignoring %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		return -EAGAIN;
	}
	req = calloc(1, sizeof(*req));
	if (req)
		req->fd = -1;
	if (!req) {
		rcm_reject(ev->id, PD_ST_BUSY);
		rdma_destroy_id(ev->id);
		rdma_ack_cm_event(ev);
		short_of(l, NULL, ENOMEM);
		return -EAGAIN;
	}
	req->id = ev->id;
	cm_sockaddr_str(rdma_get_peer_addr(ev->id), req->peer,
			sizeof(req->peer));
	rc = cm_pd_decode(ev->param.conn.private_data,
			  ev->param.conn.private_data_len, &ver, &st, &g);
	if (rc || !cm_geom_check(&g, why, sizeof(why))) {
		if (rc == -EPROTONOSUPPORT)
			log_err("refused %s: it speaks rdcp protocol version "
				"%u, this receiver speaks %u",
				req->peer, ver, cm_version());
		else if (rc)
			log_err("refused %s: not an rdcp client (bad connect "
				"data)",
				req->peer);
		else
			log_err("refused %s: it asks for %s", req->peer, why);
		rcm_reject(ev->id,
		       rc == -EPROTONOSUPPORT ? PD_ST_VERSION : PD_ST_PARAMS);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(req->id);
		free(req);
		return -EAGAIN;
	}
	req->want = g;
	req->read = true;
	if (st == PD_ST_JOIN)
		req->join = cm_pd_decode_join(ev->param.conn.private_data,
					      ev->param.conn.private_data_len,
					      &req->j);
	if (st == PD_ST_JOIN && !req->join) {
		log_err("refused %s: a malformed lane join", req->peer);
		rcm_reject(ev->id, PD_ST_REFUSED);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(req->id);
		free(req);
		return -EAGAIN;
	}
	rdma_ack_cm_event(ev);
	req->ech = rdma_create_event_channel();
	if (!req->ech || cm_set_nonblock(req->ech->fd) ||
	    rdma_migrate_id(req->id, req->ech)) {
		rc = -errno;
		rcm_reject(req->id, PD_ST_BUSY);
		rdma_destroy_id(req->id);
		if (req->ech)
			rdma_destroy_event_channel(req->ech);
		if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM ||
		    rc == -ENOBUFS) {
			short_of(l, req->peer, -rc);
			rc = -EAGAIN;
		} else {
			log_err("cannot take connection from %s: %s", req->peer,
				strerror(-rc));
		}
		free(req);
		return rc;
	}
	*out = req;
	return 0;
}

int cm_rdma_listener_fd(const struct cm_rdma_listener *l)
{
	return l->ech->fd;
}

void cm_rdma_reject(struct cm_request *req)
{
	if (!req)
		return;
	rcm_reject(req->id, PD_ST_BUSY);
	drain_cm_events(req->ech);
	rdma_destroy_id(req->id);
	rdma_destroy_event_channel(req->ech);
	free(req);
}

int cm_rdma_accept(struct cm_request *req, const struct cm_limits *lim,
		   const struct cm_timeouts *to, struct cm_conn **out)
{
	struct rdma_conn_param param;
	uint8_t pd[PD_LEN];
	struct vconn *v;
	int rc;

	rc = vconn_alloc(&v);
	if (rc) {
		cm_rdma_reject(req);
		return rc;
	}
	v->ech = req->ech;
	v->id = req->id;
	v->base.geom = req->want;
	if (v->base.geom.slots > lim->max_slots)
		v->base.geom.slots = lim->max_slots;
	if (v->base.geom.chunk_size > lim->max_chunk_size)
		v->base.geom.chunk_size = lim->max_chunk_size;
	snprintf(v->base.peer, sizeof(v->base.peer), "%s", req->peer);
	free(req);
	rc = vconn_build(v);
	if (rc) {
		rcm_reject(v->id, PD_ST_BUSY);
		goto out_free;
	}
	cm_pd_encode(pd, PD_ST_OK, &v->base.geom);
	rcm_conn_param(&param, pd, PD_LEN);
	if (rdma_accept(v->id, &param)) {
		rc = -errno;
		log_err("cannot accept %s: %s", v->base.peer, strerror(errno));
		goto out_free;
	}
	rc = rcm_expect(v, RDMA_CM_EVENT_ESTABLISHED, to->connect_ms,
		    "connection from", false);
	if (rc)
		goto out_free;
	v->established = true;
	log_path(v, "accepted");
	*out = &v->base;
	return 0;

out_free:
	vconn_teardown(v);
	free(v);
	return rc;
}

int cm_rdma_probe(const struct cm_addr *addr, int timeout_ms, char *why,
		  size_t whysz, char *dev, size_t devsz)
{
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *ev;
	struct addrinfo *ai = NULL;
	int rc;

	if (cm_lookup(addr, false, &ai)) {
		snprintf(why, whysz, "cannot resolve '%s'", addr->host);
		return -EHOSTUNREACH;
	}
	ech = rdma_create_event_channel();
	if (!ech) {
		snprintf(why, whysz, "no RDMA stack on this host (%s)",
			 strerror(errno));
		freeaddrinfo(ai);
		return -ENODEV;
	}
	rc = -ENODEV;
	if (cm_set_nonblock(ech->fd) ||
	    rdma_create_id(ech, &id, NULL, RDMA_PS_TCP)) {
		snprintf(why, whysz, "cannot use the RDMA CM (%s)",
			 strerror(errno));
	} else if (rdma_resolve_addr(id, NULL, ai->ai_addr, timeout_ms)) {
		snprintf(why, whysz, "no RDMA device routes to it (%s)",
			 strerror(errno));
	} else if (rcm_next_event(ech, timeout_ms + 1000, &ev)) {
		snprintf(why, whysz, "RDMA address resolution timed out");
	} else {
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
			rc = 0;
			if (dev && id->verbs)
				snprintf(
					dev, devsz, "%s",
					ibv_get_device_name(id->verbs->device));
		} else
			snprintf(why, whysz, "no RDMA device routes to it");
		rdma_ack_cm_event(ev);
	}
	freeaddrinfo(ai);
	if (id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ech);
	return rc;
}
