/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to cm/: what the RDMA transport (rdma_cm.c, verbs.c), the TCP
 * transport (tcp_conn.c, tcp.c) and the dispatcher (transport.c) share.
 * Nothing outside cm/ includes this.
 *
 * Both transports open a connection with the same 24-byte blob (the RC
 * private data over rdma_cm; the first bytes each way over TCP), so a
 * version or geometry mismatch is found and reported the same way.
 */
#ifndef RDCP_CM_INT_H
#define RDCP_CM_INT_H

#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cm/cm.h"

/*
 * Private data of connect, accept and reject; 56 bytes at most on RC. A
 * lane's join (cm.h struct cm_join) is PD_JOIN_LEN bytes: the 24 of a
 * connect with status PD_ST_JOIN and the session's geometry, then token
 * (8 bytes), lane (u16 BE), flags (u8: 1, a fallback join, else 0), a
 * zero byte and proof (16 bytes).
 */
enum {
	PD_LEN = 24,
	PD_JOIN_LEN = 52,
	PD_ST_OK = 0,
	PD_ST_VERSION = 1, /* protocol version not supported */
	PD_ST_PARAMS = 2,  /* geometry out of range */
	PD_ST_BUSY = 3,	   /* receiver at its session limit */
	PD_ST_JOIN = 4,	   /* connect: a lane joins a session */
	PD_ST_REFUSED = 5, /* reject: that join is refused */
};
_Static_assert(PD_JOIN_LEN <= 56, "RC private data holds a join");

/* Allowed geometry on either side, whatever the peer asks for. */
#define SLOT_SIZE_MIN 4096u
#define SLOT_SIZE_MAX (64u << 20)

/* The protocol version this side speaks; a test build can pretend. */
uint16_t cm_version(void);
void cm_pd_encode(uint8_t *p, uint16_t status, const struct cm_geom *g);
/*
 * Decodes private data (which may arrive longer than sent, zero padded).
 * Returns 0, -EPROTO for a foreign or short blob, or -EPROTONOSUPPORT with
 * *version set when the magic matches but the version does not.
 */
int cm_pd_decode(const void *data, size_t len, uint16_t *version,
		 uint16_t *status, struct cm_geom *g);
const char *cm_pd_status_str(uint16_t st);
/* A join's private data (PD_JOIN_LEN bytes) for geometry g. */
void cm_pd_encode_join(uint8_t *p, const struct cm_geom *g,
		       const struct cm_join *j);
/*
 * Whether data (len bytes, decoded by cm_pd_decode with status
 * PD_ST_JOIN) is a well-formed join: true with *j filled.
 */
bool cm_pd_decode_join(const void *data, size_t len, struct cm_join *j);
/*
 * Whether g is a geometry of this protocol: control buffers of exactly
 * CM_CTRL_SIZE bytes and CM_CTRL_CREDITS credits, at least one slot, of a
 * power of two from SLOT_SIZE_MIN to SLOT_SIZE_MAX bytes (so that every
 * slot is page aligned). If not, and why, one line saying what is wrong
 * ("control buffers of 65536 bytes (the protocol's are 8192)").
 */
bool cm_geom_valid(const struct cm_geom *g);
bool cm_geom_check(const struct cm_geom *g, char *why, size_t n);

/*
 * The ring's or the staging buffers' memory for c's geometry, one mapping
 * of cm_area_len(&c->geom) bytes (util/hugemem.c): the slots' payloads
 * (*data, page aligned, and with nic (RDMA registers it) aligned to 2 MiB
 * when the area is that large; slot i at i x chunk_size), then their
 * CM_SLOT_HDR-byte headers (*hdr), not touched; in the pages --hugepages
 * allows and from c->numa_node's memory when that is >= 0. Sets
 * c->pages to what it got and says so at -v. Returns 0 or -errno, logged
 * naming what. cm_area_free takes *data and the same geometry
 * (idempotent: NULL is left alone).
 */
/*
 * The NUMA node of RDMA device dev (util/numa.h numa_dev_node beneath
 * numa_sysfs_root()), -1 when unknown.
 */
int cm_numa_of_device(const char *dev);
size_t cm_area_len(const struct cm_geom *g);
/*
 * lane_node (NULL: none): per-rail placement (doc/PERFORMANCE.md, "NUMA
 * placement"): lane_node[k] is the node of lane k's device for the
 * c->lanes lanes (-1 unknown); slot s goes to the node of the lane that
 * carries it (cm_lane_carrier with c->lanes_up) as cm_area_plan says,
 * the headers stay on c->numa_node's.
 */
int cm_area_alloc(struct cm_conn *c, const char *what, bool nic,
		  const int *lane_node, uint8_t **data, uint8_t **hdr)
	__attribute__((warn_unused_result));

/* A stretch of an area on one NUMA node: bytes [off, off + len). */
struct cm_run {
	size_t off;
	size_t len;
	int node;
};

/*
 * Per-rail placement of geometry g's slots, carried by lanes 0..up-1 of
 * n (cm_lane_carrier), lane k's device on NUMA node lane_node[k], in an
 * area whose pages are page bytes (4 KiB, or 2 MiB for huge pages). The
 * unit placed is max(chunk size, page): a slot of a huge page or more
 * goes to its lane's node; a huge page holding smaller slots of several
 * nodes cannot be split and goes where most of its slots' lanes are
 * (ties: its first slot's). Fills run[0..R-1] (consecutive units of one
 * node merged, covering the slots' payloads from offset 0) and
 * *misplaced (slots not on their lane's node, NULL: not wanted).
 * Returns R >= 2, or 0 when there is nothing to place per rail (one
 * lane, every lane's node the same, or one of them unknown: as without
 * rails), or -E2BIG when more than max runs would be needed.
 */
int cm_area_plan(const struct cm_geom *g, unsigned int n, unsigned int up,
		 const int *lane_node, size_t page, struct cm_run *run,
		 unsigned int max, unsigned int *misplaced);
void cm_area_free(uint8_t **data, const struct cm_geom *g);

/* "a.b.c.d:port", "[v6]:port" (v4-mapped shown as v4). */
void cm_sockaddr_str(const struct sockaddr *sa, char *buf, size_t n);
int cm_set_nonblock(int fd);
/*
 * getaddrinfo for a (stream sockets, a's family, AI_PASSIVE when passive):
 * 0 or its EAI_* code, nothing logged. The caller frees *res.
 */
int cm_lookup(const struct cm_addr *a, bool passive, struct addrinfo **res);

/* getaddrinfo for addr (logged on failure). 0 or -errno. */
int cm_resolve(const struct cm_addr *a, bool passive, struct addrinfo **res);

/* ---- what the dispatcher in transport.c uses ---- */

struct rdma_event_channel;
struct rdma_cm_id;
struct cm_tcp_listener;

/* A waiting connection of either transport, taken by cm_listener_get. */
struct cm_request {
	bool tcp;
	char peer[64];
	/* RDMA: the cm_id, migrated to its own event channel */
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct cm_geom want;
	/* TCP: the accepted socket, handshake not yet run, and its listener */
	int fd;
	struct cm_tcp_listener *tl;
	/* Connect data read (always for RDMA; TCP: cm_request_read) */
	bool read;
	bool join; /* a lane's join: j and want are its */
	struct cm_join j;
};

/*
 * The lane calls of the two transports (cm/rdma_lane.c, cm/tcp_lane.c):
 * req (read, a join) accepted as lane `lane` of c, consumed in every case;
 * a refused one, told PD_ST_REFUSED (cm/rdma_handshake.c,
 * cm/tcp_handshake.c; cm/lane_reject.c picks the one).
 */
int cm_rdma_accept_lane(struct cm_conn *c, struct cm_request *req,
			unsigned int lane, const struct cm_timeouts *to);
void cm_rdma_reject_join(struct cm_request *req);
int cm_tcp_read_request(struct cm_request *req, int timeout_ms);
void cm_tcp_reject_join(struct cm_request *req);

/*
 * ---- write order across lanes (cm/lanes.c) ----
 *
 * With several lanes, a completion on one lane says nothing of the writes
 * on the others, while the caller frees staging buffers up to each
 * completion (cm.h). So every write is signalled on its lane, its place in
 * posting order kept here, and the caller's completions are handed out in
 * that order, only for the writes it asked to be signalled.
 */
struct cm_wfifo {
	struct cm_wfent {
		uint64_t wr_id;
		bool sig;  /* the caller asked for a completion */
		bool done; /* its lane's completion was polled */
	} *e;
	unsigned int cap, head, len;
};

/* Room for cap writes in flight. 0 or -ENOMEM. */
int cm_wfifo_init(struct cm_wfifo *f, unsigned int cap);
void cm_wfifo_free(struct cm_wfifo *f);
/* Records a write; returns its position, the lane's wr_id (tagged). */
int cm_wfifo_push(struct cm_wfifo *f, uint64_t wr_id, bool sig,
		  uint64_t *pos);
/* The write at pos (a lane's wr_id) completed. -EPROTO if unknown. */
int cm_wfifo_done(struct cm_wfifo *f, uint64_t pos);
/* Up to max SEND_DONEs due in posting order, into ev; the count. */
int cm_wfifo_emit(struct cm_wfifo *f, struct cm_event *ev, int max);
/*
 * The lane count both transports keep (cm_ops set_lanes, keep_lanes, whose
 * rules cm.h gives). cm_lanes_set: n lanes for c, into the transport's
 * *nlanes, and with several its write order wf. cm_lanes_keep: only the
 * first up of nlanes carry writes, lanes 0..joined-1 being joined (the
 * caller counts them, lane 0 always one). 0 or -errno.
 */
int cm_lanes_set(struct cm_conn *c, unsigned int *nlanes, struct cm_wfifo *wf,
		 unsigned int n);
int cm_lanes_keep(struct cm_conn *c, unsigned int nlanes, unsigned int up,
		  unsigned int joined);
/*
 * A lane's wr_id made by cm_wfifo_push: bit 62 set, 63 clear (the
 * engine's wr_ids are staging indexes, or control sends with bit 63).
 */
#define CM_WF_TAG (1ull << 62)
static inline bool cm_wf_is(uint64_t wr_id)
{
	return (wr_id >> 62) == 1;
}

/*
 * cm/rdma_cm.c: the rdma_cm halves of the calls in cm.h, each returning
 * and logging as its cm.h counterpart does (cm_listen, cm_listener_get,
 * cm_accept, cm_reject, cm_connect); the listener's fd is its event
 * channel's, readable when an event waits. cm_rdma_get returns -EAGAIN,
 * after rejecting the request, when this process is out of memory or
 * descriptors (logged at most every 10 s).
 */
struct cm_rdma_listener;
/* quiet: no log line on failure (AUTO says why itself). */
int cm_rdma_listen(const struct cm_addr *addr, bool quiet,
		   struct cm_rdma_listener **out);
int cm_rdma_listener_fd(const struct cm_rdma_listener *l);
int cm_rdma_get(struct cm_rdma_listener *l, int timeout_ms,
		struct cm_request **out);
void cm_rdma_listener_destroy(struct cm_rdma_listener *l);
int cm_rdma_accept(struct cm_request *req, const struct cm_limits *lim,
		   const struct cm_timeouts *to, struct cm_conn **out);
void cm_rdma_reject(struct cm_request *req);
int cm_rdma_connect(const struct cm_addr *addr, const struct cm_geom *want,
		    const struct cm_timeouts *to, struct cm_conn **out);
/*
 * Whether an RDMA device routes to addr (rdma_resolve_addr), silently:
 * 0 with the device's name in dev (if dev), or -ENODEV/-EHOSTUNREACH with
 * the reason in why.
 */
int cm_rdma_probe(const struct cm_addr *addr, int timeout_ms, char *why,
		  size_t whysz, char *dev, size_t devsz);

#endif
