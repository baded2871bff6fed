/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Sessions: what the client's side (client.c) and the receiver's
 * (server.c) share: the ring step of the handshake, the connect bounds and
 * error classes, the verdict on a finished session, and the public API's
 * option defaults and verdict names. A session goes:
 *
 *   client                         server
 *   rdma_cm connect (magic, version, geometry in private data) ->
 *                               <- accept (geometry, maybe lowered)
 *   HELLO (role, checksum, DEST) ->
 *                               <- WELCOME (or ERROR: why not)
 *                               <- RING (address, rkey: the sink's ring)
 *   FILE, chunks, FILE_END ...  ->
 *                               <- FILE_RESULT ... (and CREDITs)
 *   DONE                        ->
 *                               <- BYE
 *   disconnect
 *
 * The ring is registered only after the client proved the key, so a peer
 * that connects and says nothing pins no ring and is dropped at the
 * handshake deadline (server.c). The receiver runs each connection in its
 * own thread.
 */
#include <errno.h>
#include <string.h>

#include "transfer/session/session.h"

/* cm/ refuses any other control geometry at connect time. */
_Static_assert(WIRE_CTRL_SIZE == CM_CTRL_SIZE &&
		       WIRE_CTRL_CREDITS == CM_CTRL_CREDITS,
	       "the wire's control geometry is cm's");
_Static_assert(WIRE_LANE_TOKEN_LEN == CM_TOKEN_LEN &&
		       WIRE_STREAMS_MAX == CM_LANES_MAX,
	       "WELCOME's token and lane count are cm's");

void xfer_opts_init(struct xfer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->link.addr.port = 7471;
	o->link.addr.gid_index = -1;
	o->link.chunk_size = 1u << 20;
	o->link.window = 0;  /* sized to the link (cm_window_slots) */
	o->link.workers = 0; /* from the CPUs of the device's node */
	o->link.poll = XFER_POLL_ADAPTIVE;
	o->link.timeout_ms = 10000;
	o->link.connect_timeout_ms = 10000;
	o->copy.csum = XFER_CSUM_CRC32;
	o->serve.max_sessions = 16;
	o->copy.max_delete = UINT64_MAX;
	o->copy.split_auto = true;
	o->copy.split_size = XFER_SPLIT_SIZE;
}

const char *xfer_fail_name(enum xfer_fail f)
{
	static const char *const names[] = {
		[XFER_OK] = "ok",
		[XFER_FAIL_INTERNAL] = "internal",
		[XFER_FAIL_USAGE] = "usage",
		[XFER_FAIL_CONNECT] = "connect",
		[XFER_FAIL_AUTH] = "auth",
		[XFER_FAIL_PROTOCOL] = "protocol",
		[XFER_FAIL_LOCAL_IO] = "local-io",
		[XFER_FAIL_REMOTE_IO] = "remote-io",
		[XFER_FAIL_VERIFY] = "verify",
		[XFER_FAIL_PARTIAL] = "partial",
		[XFER_FAIL_RESOURCE] = "resource",
		[XFER_FAIL_PEER_LOST] = "peer-lost",
		[XFER_FAIL_CANCELED] = "canceled",
		[XFER_FAIL_REMOTE_START] = "remote-start",
		[XFER_FAIL_MAX_DELETE] = "max-delete",
	};

	return (unsigned int)f < sizeof(names) / sizeof(names[0]) && names[f]
		       ? names[f]
		       : "?";
}

struct cm_timeouts session_timeouts(const struct xfer_opts *o)
{
	struct cm_timeouts to = {
		.resolve_ms = o->link.connect_timeout_ms / 2,
		.connect_ms = o->link.connect_timeout_ms,
	};

	return to;
}

enum xfer_fail session_connect_fail(int rc)
{
	switch (rc) {
	case -ENOMEM:
	case -EAGAIN:
		return XFER_FAIL_RESOURCE;
	case -EPROTO:
		return XFER_FAIL_PROTOCOL;
	default:
		return XFER_FAIL_CONNECT;
	}
}

enum xfer_fail session_verdict(const struct engine *e,
			       const struct xfer_stats *st)
{
	if (e->fail)
		return e->fail;
	if (st->files_failed)
		return st->files_ok ? XFER_FAIL_PARTIAL : st->first_fail;
	return st->max_delete_hit ? XFER_FAIL_MAX_DELETE : XFER_OK;
}

/* The sink's ring, made here and announced, or the peer's. */
int session_rings(struct engine *e, bool sink)
{
	struct wire_msg m = { .type = WIRE_RING };
	struct cm_ring_desc ring = { 0 }; /* rails 0 unless cm/ has them */
	int rc;

	if (sink) {
		rc = e->c->ops->ring_create(e->c, &ring);
		if (rc)
			return engine_fail(e, XFER_FAIL_RESOURCE, rc,
					   "cannot set up the ring for %s",
					   e->c->peer);
		m.u.ring.addr = ring.addr;
		m.u.ring.hdr_addr = ring.hdr_addr;
		m.u.ring.rkey = ring.rkey;
		m.u.ring.slots = e->c->geom.slots;
		m.u.ring.chunk_size = e->c->geom.chunk_size;
		m.u.ring.target = e->target;
		m.u.ring.rails = ring.rails > 1 && ring.rails <= CM_LANES_MAX
					 ? (uint8_t)ring.rails
					 : 0;
		for (unsigned int r = 1; r < m.u.ring.rails; r++)
			m.u.ring.rkeys[r] = ring.rkeys[r];
		return engine_send(e, &m);
	}
	rc = engine_expect(e, WIRE_RING, &m, SESSION_HANDSHAKE_MS);
	if (rc)
		return rc;
	if (m.u.ring.slots != e->c->geom.slots ||
	    m.u.ring.chunk_size != e->c->geom.chunk_size)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced a ring of another geometry",
				   e->c->peer);
	if ((m.u.ring.rails > 1 ? m.u.ring.rails : 1u) !=
	    (e->c->rails > 1 ? e->c->rails : 1u))
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced a ring for %u rails, the "
				   "session has %u",
				   e->c->peer,
				   m.u.ring.rails > 1 ? m.u.ring.rails : 1u,
				   e->c->rails > 1 ? e->c->rails : 1u);
	e->target = m.u.ring.target;
	ring.addr = m.u.ring.addr;
	ring.hdr_addr = m.u.ring.hdr_addr;
	ring.rkey = m.u.ring.rkey;
	ring.rails = m.u.ring.rails > 1 ? m.u.ring.rails : 1;
	ring.rkeys[0] = ring.rkey;
	for (unsigned int r = 1; r < ring.rails; r++)
		ring.rkeys[r] = m.u.ring.rkeys[r];
	rc = e->c->ops->stage_create(e->c, &ring);
	if (rc)
		return engine_fail(e, XFER_FAIL_RESOURCE, rc,
				   "cannot set up staging buffers");
	return 0;
}

unsigned int session_streams(const struct xfer_opts *o,
			     const struct cm_conn *c)
{
	if (o->link.streams)
		return o->link.streams;
	if (!SESSION_STREAMS_AUTO || !c->transport ||
	    strcmp(c->transport, "rdma"))
		return 1;
	return c->link_gbps >= 100 ? 4 : 2;
}
