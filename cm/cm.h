/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The transport seam. transfer/ moves bytes only through a struct cm_conn
 * and its ops: post a control SEND from a registered tx buffer, repost a
 * registered rx buffer, write a staging buffer and its slot header into a
 * slot of the peer's ring, poll completions, wait. cm/verbs.c implements
 * the ops with rdma_cm + libibverbs; tests implement them in memory.
 * Nothing outside cm/ includes rdma_cma.h or verbs.h.
 *
 * Memory model (identical for every implementation):
 *   tx[ntx]       control send buffers, geom.ctrl_size bytes each
 *   rx[nrx]       control receive buffers, geom.ctrl_size bytes each; every
 *                 incoming SEND or data write consumes one posted rx
 *   ring[slots]   the data sink's ring: payloads of geom.chunk_size bytes
 *                 each (a power of two, at least 4 KiB), so every slot is
 *                 page aligned; and beside it
 *   ring_hdr[slots] CM_SLOT_HDR bytes each, the slots' headers. Both are
 *                 remotely writable, made by ops->ring_create() after the
 *                 session is agreed (never before authentication)
 *   stage[slots], stage_hdr[slots]  the data source's staging buffers and
 *                 their headers, same geometry, made by ops->stage_create()
 * Queue depths are fixed at connect time from the geometry: the receive
 * queue and its CQ hold slots + ctrl_credits entries (cm_rq_depth), the
 * send queue and its CQ 2 x slots + ctrl_credits + 1 (cm_sq_depth: two
 * work requests per staging buffer, payload and header, and one per tx
 * buffer), so neither a peer that keeps to its credits nor this side's
 * own posting can ever overrun either.
 *
 * Lanes (--streams N): a connection may carry N lanes, lane 0 the one
 * connected first, lanes 1..N-1 joined after authentication (cm_join,
 * cm_accept_lane), each an RC QP (or a TCP connection) of its own with its
 * own send and receive CQ. Control SENDs and their receives stay on lane
 * 0; the write of slot s goes on lane s % N (cm_lane_of), or on lane 0
 * when that lane never joined (cm_keep_lanes, cm_lane_carrier). The ring and
 * staging stay one memory each, registered once per protection domain.
 * Per lane, the depths stay exact (cm_lane_rq_depth, cm_lane_sq_depth).
 * With N > 1 every data write is signalled on its lane and cm/ hands the
 * caller a write's completion only once every write posted before it
 * completed too (struct cm_wfifo), so "a signalled completion covers the
 * earlier unsignalled writes" holds across lanes as on one QP.
 */
#ifndef RDCP_CM_H
#define RDCP_CM_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Connection-time parameters, carried in the rdma_cm private data. */
struct cm_geom {
	uint32_t ctrl_size;    /* bytes per control buffer */
	uint16_t ctrl_credits; /* control messages one side may have unread */
	uint16_t slots;	       /* ring slots (the data window) */
	uint32_t chunk_size;   /* payload bytes per slot: the chunk size */
};

/*
 * The data window when the client leaves it to the link (cm_geom slots 0
 * in cm_connect): enough slots to keep the link busy for CM_WINDOW_COVER_MS
 * while the sink holds one slot back (slots are released in order, so one
 * slow write holds every later one: credit.h), at least
 * CM_WINDOW_FALLBACK, at most CM_WINDOW_MAX_BYTES of ring (pinned on both
 * sides) and CM_WINDOW_MAX_SLOTS. A link whose rate is unknown (TCP, or a
 * device reporting none or an implausible one: over CM_WINDOW_MAX_GBPS)
 * gets CM_WINDOW_FALLBACK. The figures are justified in
 * doc/PERFORMANCE.md ("Window").
 */
#define CM_WINDOW_COVER_MS 20u
#define CM_WINDOW_FALLBACK 64u
#define CM_WINDOW_MAX_BYTES (256ull << 20)
#define CM_WINDOW_MAX_SLOTS 4096u
#define CM_WINDOW_MAX_GBPS 1600u

/*
 * Slots of chunk_size bytes for a link of gbps Gb/s (0: unknown) under
 * the rule above, capped by budget bytes of ring (0: CM_WINDOW_MAX_BYTES;
 * the cap wins over the floor, but the result is at least 1).
 */
unsigned int cm_window_slots(unsigned int gbps, uint32_t chunk_size,
			     uint64_t budget);

/* Bytes of a slot's header (its own area, beside the payloads). */
#define CM_SLOT_HDR 64u

/*
 * Control send buffers: one per control credit and one more. A message the
 * peer has consumed (its credit back) may still wait for its own send
 * completion to be polled; the extra buffer lets an ack-only CREDIT or the
 * final ERROR go out even then.
 */
static inline unsigned int cm_ntx(const struct cm_geom *g)
{
	return g->ctrl_credits + 1u;
}

/*
 * Receive queue (and receive CQ) entries: a WRITE_WITH_IMM per ring slot
 * and a SEND per control credit are all the peer may have unconsumed.
 */
static inline unsigned int cm_rq_depth(const struct cm_geom *g)
{
	return (unsigned int)g->slots + g->ctrl_credits;
}

/*
 * Send queue (and send CQ) entries: a send WR holds its entry until a
 * completion at or after it is polled, so the worst case is a write from
 * every staging buffer (two WRs over RDMA: the payload, then the header
 * with the immediate) and a SEND from every tx buffer at once.
 */
static inline unsigned int cm_sq_depth(const struct cm_geom *g)
{
	return 2u * g->slots + cm_ntx(g);
}

/* At most this many lanes per connection (--streams 1..CM_LANES_MAX). */
#define CM_LANES_MAX 16u

/* The lane that carries the write of ring slot `slot` among n lanes. */
static inline unsigned int cm_lane_of(unsigned int slot, unsigned int n)
{
	return n > 1 ? slot % n : 0;
}

/*
 * The lane that carries slot `slot`'s write when lanes 0..up-1 of n joined
 * (cm_keep_lanes): its own, s % n, if that one joined, else lane 0, which
 * takes the slots of every lane that did not.
 */
static inline unsigned int cm_lane_carrier(unsigned int slot, unsigned int n,
					   unsigned int up)
{
	unsigned int k = cm_lane_of(slot, n);

	return k < up ? k : 0u;
}

/*
 * Receives a lane keeps posted among n: the WRITE_WITH_IMMs of its slots
 * (those with slot % n == lane: at most ceil(slots / n), each unconsumed
 * at most once, as the credits allow), and on lane 0 a SEND per control
 * credit as well. Lanes 1..n-1 take zero-length receives (no buffer: a
 * SEND there is a protocol violation that fails the QP); lane 0's are full
 * control buffers, since a SEND takes whichever receive comes next.
 */
static inline unsigned int cm_lane_rq_depth(const struct cm_geom *g,
					    unsigned int n, unsigned int lane)
{
	unsigned int share = n > 1 ? (g->slots + n - 1) / n : g->slots;

	return share + (lane ? 0u : g->ctrl_credits);
}

/*
 * Receives lane 0 keeps posted when lanes 0..up-1 of n joined: its own
 * share and the credits (cm_lane_rq_depth), and every slot of lanes
 * up..n-1 (cm_lane_carrier). At most cm_rq_depth(g), what it was built
 * with.
 */
static inline unsigned int cm_lane0_rq_depth(const struct cm_geom *g,
					     unsigned int n, unsigned int up)
{
	unsigned int d = cm_lane_rq_depth(g, n, 0);

	for (unsigned int k = up; n > 1 && k < n; k++)
		d += g->slots / n + (k < g->slots % n ? 1u : 0u);
	return d;
}

/*
 * Send queue (and send CQ) entries of a lane: a staging buffer is freed
 * only once its write's completion was polled, but the sink may return a
 * slot's credit before that, so a lane can hold a write from every staging
 * buffer at once (2 x slots WRs); lane 0 also a SEND per tx buffer. Lane 0
 * is cm_sq_depth() whatever n.
 */
static inline unsigned int cm_lane_sq_depth(const struct cm_geom *g,
					    unsigned int lane)
{
	return 2u * g->slots + (lane ? 0u : cm_ntx(g));
}

enum cm_ev_type {
	CM_EV_RECV = 1,	 /* a control message: rx buffer id, len bytes */
	CM_EV_DATA,	 /* a slot's header landed, its payload before it: imm,
			  * len (of the header: CM_SLOT_HDR) */
	CM_EV_SEND_DONE, /* a signalled SEND or WRITE completed: id */
	CM_EV_CLOSED,	 /* the peer disconnected or the link failed */
};

/*
 * Status conventions: 0, or a negative errno. -ECONNRESET is a flush (the
 * work request never ran because the connection had already failed or
 * closed: IBV_WC_WR_FLUSH_ERR), a consequence; the cause, if the
 * connection failed for a reason of its own, is another event's status:
 * -EHOSTUNREACH the peer stopped answering (retries exceeded), -EPROTO the
 * peer broke the protocol (remote access, RNR), -ENETDOWN the local port
 * went down, -ENODEV the local device failed or was removed, -EOVERFLOW a
 * CQ overran (a bug), -EFAULT a local fault of a work request (protection,
 * QP operation, length: a bug, never the peer), another errno any other
 * failure. Its words, as
 * logged, are in cm_conn.err.
 */
struct cm_event {
	enum cm_ev_type type;
	int status;   /* 0, or a negative errno for a failed completion */
	uint32_t imm; /* CM_EV_DATA: immediate (host byte order) */
	uint32_t len; /* bytes received (RECV, DATA) */
	uint64_t id;  /* RECV: rx buffer index; SEND_DONE: caller's wr_id */
};

/* Where the sink's ring and its headers live, as the source must know. */
struct cm_ring_desc {
	uint64_t addr;	   /* slot 0's payload */
	uint64_t hdr_addr; /* slot 0's header */
	uint32_t rkey;	   /* of both */
	/*
	 * Rails (cm_local_rails): with rails > 1, rkeys[r] is the rkey the
	 * writes of lanes k with k % rails == r use (rkeys[0] == rkey).
	 */
	unsigned int rails;
	uint32_t rkeys[CM_LANES_MAX];
};

/* A rail's address, as WELCOME carries it: family 4 or 6. */
struct cm_rail {
	uint8_t family;
	uint8_t addr[16]; /* IPv4 in the first 4 bytes */
};

struct cm_conn;
struct cm_request;
struct cm_timeouts;

/*
 * A lane's join, carried in its connect private data (cm_int.h): the
 * session's token (chosen by the receiver), the lane index (1..n-1) and
 * the proof that the joiner holds the session key (transfer/session/auth.c).
 * fallback: the lane joins rail 0 because the rail it belongs to (k % R)
 * could not be joined (doc/PROTOCOL.md "Rails"); its proof is then the
 * fallback proof, so the first attempt's proof is never presented twice.
 */
#define CM_TOKEN_LEN 8u
#define CM_PROOF_LEN 16u
struct cm_join {
	uint8_t token[CM_TOKEN_LEN];
	uint16_t lane;
	bool fallback;
	uint8_t proof[CM_PROOF_LEN];
};

/*
 * A rail's first join (address and route resolution, connect) gives up
 * after at most this many milliseconds: the client then drops that rail
 * and its lanes join rail 0; the receiver's wait for the lanes is longer
 * by this much for each rail beyond rail 0.
 */
#define CM_RAIL_JOIN_MS 5000

struct cm_ops {
	/* SEND len bytes of tx[txbuf]; always signalled (id = wr_id). */
	int (*post_send)(struct cm_conn *c, unsigned int txbuf, uint32_t len,
			 uint64_t wr_id);
	/* Post rx[rxbuf] for the next incoming message or immediate. */
	int (*post_recv)(struct cm_conn *c, unsigned int rxbuf);
	/*
	 * Write len bytes (at most chunk_size) of stage[stage] into the
	 * peer's ring slot, then stage_hdr[stage] into ring_hdr[slot] with
	 * the immediate imm: the peer's CM_EV_DATA for it means both are in
	 * place. One completion (id = wr_id) if signaled.
	 */
	int (*post_write)(struct cm_conn *c, unsigned int stage, uint32_t len,
			  unsigned int slot, uint32_t imm, bool signaled,
			  uint64_t wr_id);
	/* Non-blocking: up to max events; returns the count or -errno. */
	int (*poll)(struct cm_conn *c, struct cm_event *ev, int max);
	/*
	 * Arm completion notification. The caller must poll once more after
	 * arming before it waits, to close the race with a completion that
	 * arrived in between (ibv_req_notify_cq(3)).
	 */
	int (*arm)(struct cm_conn *c);
	/*
	 * Sleep until the armed CQs or the connection have news, extra_fd
	 * (if >= 0) is readable, or timeout_ms passes. Returns 0; the caller
	 * then polls. -errno on failure.
	 */
	int (*wait)(struct cm_conn *c, int extra_fd, int timeout_ms);
	/*
	 * Sink: allocate and register the ring; fills desc for the peer
	 * (rails and rkeys only on a transport with rails: the caller
	 * zeroes desc first).
	 */
	int (*ring_create)(struct cm_conn *c, struct cm_ring_desc *desc);
	/* Source: allocate and register staging; remember the peer's ring. */
	int (*stage_create)(struct cm_conn *c, const struct cm_ring_desc *peer);
	/* Disconnect, drain, and free everything (accepts partly built). */
	void (*destroy)(struct cm_conn *c);
	/*
	 * Lanes (NULL: this transport has lane 0 only). set_lanes: the
	 * session has n lanes (1..CM_LANES_MAX), said once on both sides
	 * before any join and before ring_create/stage_create. join (client):
	 * connect lane j->lane to the peer of lane 0, with j's token and
	 * proof, bounded by to; with rails, to its rail's address, or with
	 * j->fallback to lane 0's peer. -ENETUNREACH (one warning, or an
	 * info line when its link is slower): the lane's rail is dropped,
	 * nothing was joined; join the lane again with fallback set.
	 * accept_lane (receiver): accept req, a join for lane `lane` whose
	 * proof the caller checked; consumes req. Each returns 0 or -errno,
	 * logged (join's connect and answer failures at debug level: the
	 * caller goes on without the lane and says so once).
	 * keep_lanes (both sides, the same up, after the joins and before
	 * ring_create/stage_create): only lanes 0..up-1 (1 <= up <= n)
	 * carry writes, the slots of lanes up..n-1 go on lane 0
	 * (cm_lane_carrier), whose receives grow to cm_lane0_rq_depth; a
	 * lane joined beyond up stays idle until destroy. 0, -EINVAL, or
	 * -ENOTCONN when one of lanes 1..up-1 did not join.
	 */
	int (*set_lanes)(struct cm_conn *c, unsigned int n);
	int (*join)(struct cm_conn *c, const struct cm_join *j,
		    const struct cm_timeouts *to);
	int (*accept_lane)(struct cm_conn *c, struct cm_request *req,
			   unsigned int lane, const struct cm_timeouts *to);
	int (*keep_lanes)(struct cm_conn *c, unsigned int up);
	/*
	 * Rails (NULL: one). local_rails (receiver, before set_lanes): the
	 * devices with an active port and an address of lane 0's family
	 * (all of them, or those named in devices, "a,b"), lane 0's first,
	 * at most max, whose link rate is lane 0's (others are left out with
	 * an info line); their addresses into out[0..R-1]; the session's lane
	 * k must then arrive on rail k % R's device, or with a fallback join
	 * on rail 0's. Returns R >= 1.
	 * set_rails (client): the receiver's R rails, addr[1..R-1] where
	 * lanes k % R == r join (rail 0: lane 0's peer), each lane then on
	 * one of devices ("a,b"; NULL: any). 0 or -errno.
	 */
	int (*local_rails)(struct cm_conn *c, const char *devices,
			   struct cm_rail *out, unsigned int max);
	int (*set_rails)(struct cm_conn *c, unsigned int n,
			 const struct cm_rail *addr, const char *devices);
};

struct cm_conn {
	const struct cm_ops *ops;
	struct cm_geom geom;
	uint8_t *tx;
	unsigned int ntx;
	uint8_t *rx;
	unsigned int nrx;
	uint8_t *ring;	       /* NULL until ring_create */
	uint8_t *ring_hdr;     /* with ring */
	uint8_t *stage;	       /* NULL until stage_create */
	uint8_t *stage_hdr;    /* with stage */
	unsigned int lanes;    /* set_lanes()'s n; 0 or 1: lane 0 only */
	unsigned int lanes_up; /* keep_lanes()'s up, else n: lanes with data */
	unsigned int rails;    /* local_rails/set_rails's; 0 or 1: one */
	unsigned int link_gbps; /* RDMA: the port's rate; 0 unknown, TCP */
	char peer[64];	       /* printable peer address, "[addr]:port" */
	char dev[64];	       /* device name ("rxe0"; "tcp" over TCP) */
	const char *transport; /* "rdma" or "tcp" */
	/*
	 * The NUMA node of the device, -1: unknown or none (TCP). Its ring
	 * or staging memory is taken from there; the engine may change it
	 * (--numa) before ring_create or stage_create.
	 */
	int numa_node;
	/*
	 * Whether the ring or staging slots may follow their lanes' rails
	 * (cm/mem.c cm_area_plan): set by an RDMA connection, cleared by
	 * the engine when --numa names a node or is off.
	 */
	bool numa_rails;
	const char *pages; /* what ring/staging are made of ("2 MiB huge
			    * pages"), NULL before either exists */
	/*
	 * The first cause of failure in words, as cm/ logged it, set with
	 * the first failed completion or CLOSED whose status is not a flush;
	 * "" until then. Only the thread that polls reads it.
	 */
	char err[256];
};

static inline uint8_t *cm_tx(struct cm_conn *c, unsigned int i)
{
	return c->tx + (size_t)i * c->geom.ctrl_size;
}

static inline uint8_t *cm_rx(struct cm_conn *c, unsigned int i)
{
	return c->rx + (size_t)i * c->geom.ctrl_size;
}

static inline uint8_t *cm_slot(struct cm_conn *c, unsigned int i)
{
	return c->ring + (size_t)i * c->geom.chunk_size;
}

static inline uint8_t *cm_stage(struct cm_conn *c, unsigned int i)
{
	return c->stage + (size_t)i * c->geom.chunk_size;
}

static inline uint8_t *cm_slot_hdr(struct cm_conn *c, unsigned int i)
{
	return c->ring_hdr + (size_t)i * CM_SLOT_HDR;
}

static inline uint8_t *cm_stage_hdr(struct cm_conn *c, unsigned int i)
{
	return c->stage_hdr + (size_t)i * CM_SLOT_HDR;
}

static inline void cm_conn_destroy(struct cm_conn *c)
{
	if (c)
		c->ops->destroy(c);
}

/*
 * The lane calls of struct cm_ops, for any transport: n == 1 is always
 * fine; more lanes on a transport without them is -EOPNOTSUPP.
 */
static inline int cm_set_lanes(struct cm_conn *c, unsigned int n)
{
	if (n <= 1 && !c->ops->set_lanes)
		return 0;
	return c->ops->set_lanes ? c->ops->set_lanes(c, n) : -EOPNOTSUPP;
}

static inline int cm_keep_lanes(struct cm_conn *c, unsigned int up)
{
	if (c->lanes <= 1)
		return up == 1 ? 0 : -EINVAL;
	return c->ops->keep_lanes ? c->ops->keep_lanes(c, up) : -EOPNOTSUPP;
}

/* The ops' rails calls for any transport: one rail without them. */
static inline int cm_local_rails(struct cm_conn *c, const char *devices,
				 struct cm_rail *out, unsigned int max)
{
	return c->ops->local_rails ? c->ops->local_rails(c, devices, out, max)
				   : 1;
}

static inline int cm_set_rails(struct cm_conn *c, unsigned int n,
			       const struct cm_rail *addr, const char *devices)
{
	if (n <= 1)
		return 0;
	return c->ops->set_rails ? c->ops->set_rails(c, n, addr, devices)
				 : -EOPNOTSUPP;
}

static inline int cm_join(struct cm_conn *c, const struct cm_join *j,
			  const struct cm_timeouts *to)
{
	return c->ops->join ? c->ops->join(c, j, to) : -EOPNOTSUPP;
}

/*
 * ---- connection setup (cm/transport.c over cm/rdma_cm.c, cm/tcp_conn.c) --
 *
 * RDMA is rdma_cm (rdma_cm.c) + verbs (verbs.c). TCP (tcp_conn.c +
 * tcp.c) is for hosts without an RDMA device: the same ops, memory model,
 * events and connect handshake over one TCP connection, so the engine
 * cannot tell them apart. With CM_TRANSPORT_AUTO a client uses RDMA when
 * rdma_cm resolves the peer to an RDMA device, else TCP (saying so once);
 * a receiver listens on both, on the same port number (rdma_cm has its
 * own port space).
 */

enum cm_family {
	CM_AF_ANY = 0,
	CM_AF_INET = 4,
	CM_AF_INET6 = 6
};
enum cm_transport {
	CM_TRANSPORT_AUTO = 0,
	CM_TRANSPORT_RDMA,
	CM_TRANSPORT_TCP,
};

struct cm_addr {
	const char *host; /* name or literal; NULL = any (listen) */
	uint16_t port;
	enum cm_family family;
	enum cm_transport transport;
	const char *device; /* RDMA device to use ("mlx5_0"), NULL: any */
	int gid_index;	    /* with device: take its address from this GID */
	/*
	 * A client's AUTO after an attempt of the same copy that ran over
	 * RDMA and failed (--retry): going over TCP is said as that RDMA
	 * path gone, and an RDMA connect that finds no path (cm_connect)
	 * goes over TCP too.
	 */
	bool rdma_lost;
};

/* What a receiver accepts; a client asking for more is clamped down. */
struct cm_limits {
	uint32_t max_chunk_size;
	uint16_t max_slots;
};

/* Timeouts; every wait in cm/ is bounded by one of these. */
struct cm_timeouts {
	int resolve_ms; /* address and route resolution, each */
	int connect_ms; /* connect request to ESTABLISHED */
};

struct cm_listener;
struct cm_request;

/*
 * Bind and listen (RDMA, TCP, or both for AUTO: then a host without an
 * RDMA device serves TCP alone, after one notice). Returns 0 with *out, or
 * -errno (logged: -EADDRINUSE, -ENODEV when RDMA was asked for and no
 * device can serve the address).
 */
int cm_listen(const struct cm_addr *addr, struct cm_listener **out)
	__attribute__((warn_unused_result));
/*
 * cm_listen on a free port of lo..hi, tried from a random one so that
 * receivers started at once rarely collide, both transports on the same
 * number for AUTO (TCP alone, silently, when RDMA cannot be served). 0
 * with *out and the port in *port, or -errno (logged; -EADDRINUSE when
 * every port is taken).
 */
int cm_listen_range(const struct cm_addr *addr, uint16_t lo, uint16_t hi,
		    struct cm_listener **out, uint16_t *port)
	__attribute__((warn_unused_result));

/* Whether l listens for RDMA (else TCP alone). */
bool cm_listener_rdma(const struct cm_listener *l);

void cm_listener_destroy(struct cm_listener *l);

/*
 * Wait up to timeout_ms for a connection request on either transport;
 * never blocks on one client. An RDMA request with a bad magic, version or
 * geometry is rejected here (both sides log why) and the call returns
 * -EAGAIN as for a timeout; so does running out of descriptors or memory
 * (logged at most every 10 s; the clients are refused as busy meanwhile).
 * When the RDMA device a listener is bound to is removed, that is logged
 * and the listener stops listening for RDMA: -EAGAIN if it serves TCP too
 * (from then on TCP alone), else -ENODEV. Any other error is the
 * listener's own. On success *out is owned by the
 * caller and may be accepted from another thread; it must be accepted or
 * rejected before the listener is destroyed.
 */
int cm_listener_get(struct cm_listener *l, int timeout_ms,
		    struct cm_request **out)
	__attribute__((warn_unused_result));

/* Printable address of the requesting peer. */
const char *cm_request_peer(const struct cm_request *req);

/*
 * Run the server half of the connect handshake with the geometry clamped
 * to lim (verbs resources and ESTABLISHED, or the TCP hello), bounded by
 * to->connect_ms. Consumes req in every case.
 */
int cm_accept(struct cm_request *req, const struct cm_limits *lim,
	      const struct cm_timeouts *to, struct cm_conn **out)
	__attribute__((warn_unused_result));

/*
 * Reads a request's connect data if it is not in yet (a TCP client sends
 * it after connecting: up to timeout_ms; RDMA has it already). 0, or
 * -errno with req consumed (the client dropped or refused, logged).
 */
int cm_request_read(struct cm_request *req, int timeout_ms)
	__attribute__((warn_unused_result));

/*
 * Whether req (read) asks to join a lane of a session, with what in *j.
 * A join is accepted with ops->accept_lane of that session's connection,
 * or refused with cm_reject_join; never with cm_accept.
 */
bool cm_request_join(const struct cm_request *req, struct cm_join *j);

/* Refuses a join (the client is told "lane join refused"); frees req. */
void cm_reject_join(struct cm_request *req);

/*
 * Reject and free a request as busy (e.g. too many sessions), never
 * waiting on the client: a TCP client's connect data is read later by the
 * listener (cm_listener_get), for up to 1 s, so that a client of another
 * version is told that instead.
 */
void cm_reject(struct cm_request *req);

/*
 * Resolve, build resources, connect with the wanted geometry over
 * addr->transport (the server may lower slots/chunk_size: read
 * (*out)->geom). AUTO with addr->rdma_lost: an RDMA connect that fails
 * for want of a path (cm_rdma_no_path) goes over TCP as well. Returns 0
 * or -errno, logged: -ETIMEDOUT, -ECONNREFUSED (nobody listening, or
 * rejected), -EPROTO (version mismatch), -EHOSTUNREACH, -ENODEV (RDMA
 * asked for, no device routes there).
 */
int cm_connect(const struct cm_addr *addr, const struct cm_geom *want,
	       const struct cm_timeouts *to, struct cm_conn **out)
	__attribute__((warn_unused_result));

/*
 * Whether an RDMA connect's -errno means there is no path to the peer (no
 * device routes there, the port or the route is gone, no answer), rather
 * than a peer that answered (refused, busy, another version) or a local
 * shortage.
 */
bool cm_rdma_no_path(int err);

/*
 * Whether rdma_cm resolves addr (host, family, device) to an RDMA device
 * within timeout_ms, silently: 0, or -errno with the reason in why.
 */
int cm_rdma_routes(const struct cm_addr *addr, int timeout_ms, char *why,
		   size_t whysz);

/*
 * This host's addresses a peer may reach it by, numeric, without brackets
 * or scope: with rdma, those of the network interfaces behind an active
 * RDMA port (RoCE's GID tables, IPoIB's sysfs); else those of every
 * interface that is up. Loopback and IPv6 link-local ones are left out.
 * At most max into out; returns the count (0: none, or no RDMA device)
 * or -errno.
 */
#define CM_ADDRSTR_LEN 46
int cm_local_addrs(bool rdma, char (*out)[CM_ADDRSTR_LEN], int max);

/* ---- rdcp --check (cm/doctor.c) ---- */

enum cm_check_kind {
	CM_CHECK_OK,
	CM_CHECK_INFO,
	CM_CHECK_PROBLEM,
	/* Works, but slower or weaker than it could: not a problem. */
	CM_CHECK_WARN
};

/*
 * Bytes one connection of geometry g registers (pins): its ring or its
 * staging area (payloads and headers), and its control send and receive
 * buffers.
 */
uint64_t cm_pinned_bytes(const struct cm_geom *g);

/*
 * Looks over the RDMA environment and, with peer->host, the way to that
 * peer; each finding goes to out (a problem says how to fix it). A
 * session pins session_bytes of memory. Returns the number of problems.
 */
int cm_check(const struct cm_addr *peer, uint64_t session_bytes,
	     void (*out)(void *arg, enum cm_check_kind kind, const char *text),
	     void *arg);

/* Protocol identity in the private data. */
#define CM_MAGIC 0x52444350u /* "RDCP" */
#define CM_VERSION 3

/*
 * The control geometry of protocol version 2: a receiver refuses any other
 * (status 2), so an unauthenticated client cannot size its buffers.
 */
#define CM_CTRL_SIZE 8192u
#define CM_CTRL_CREDITS 64u

/* ---- the RDMA devices' own counters (cm/hw_counters.c) ---- */

/*
 * What the kernel counts per port of an RDMA device, under
 * SYSROOT/class/infiniband/DEV/ports/N/{hw_counters,counters}/: the
 * counters that show retries and RNR (receiver not ready) waits, which the
 * verbs API does not report. Drivers name them differently (rxe:
 * rcvd_rnr_err; mlx5: rnr_nak_retry_err, ...); each is the first of its
 * files that exists.
 */
enum cm_hw_counter {
	CM_HW_RNR_NAK_RCVD,   /* RNR NAKs received: the peer was not ready */
	CM_HW_RNR_NAK_SENT,   /* RNR NAKs sent: this side was not */
	CM_HW_RETRY_EXCEEDED, /* transport retries ran out (QP in error) */
	CM_HW_RNR_RETRY_EXCEEDED, /* RNR retries ran out (QP in error) */
	CM_HW_ACK_TIMEOUT,	  /* local ACK timeouts: a retransmission */
	CM_HW_DUPLICATE,	  /* duplicate requests received */
	CM_HW_OUT_OF_SEQ,	  /* out-of-sequence requests received */
	CM_HW_LINK_DOWNED,	  /* the link went down */
	CM_HW_PKTS_SENT,	  /* packets sent */
	CM_HW_PKTS_RCVD,	  /* packets received */
	CM_HW_MAX
};

struct cm_hw_port {
	char device[64];
	unsigned int port;
	uint32_t have;	       /* 1 << enum cm_hw_counter: was read */
	uint64_t v[CM_HW_MAX]; /* as the kernel counts (packets, events) */
};

/*
 * The counters of every port of every RDMA device under sysroot (NULL:
 * $RDCP_SYSFS_ROOT, else "/sys"), sorted by device and port, into
 * ports[0 .. cap), their number in *n. A port with none of the files is
 * still listed (have 0); no device at all is 0 with *n = 0. Reads sysfs:
 * for a scrape, never on the data path. 0, or -ENOMEM.
 */
int cm_hw_counters(const char *sysroot, struct cm_hw_port *ports, size_t cap,
		   size_t *n) __attribute__((warn_unused_result));

#endif
