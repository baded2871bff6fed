/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the event loop and control channel shared by the
 * data source (source.c) and the data sink (sink.c). One engine runs one
 * session on one connection, in one thread that owns the queue pair; CPU
 * and disk work goes to a workq.
 */
#ifndef RDCP_ENGINE_H
#define RDCP_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cm/cm.h"
#include "transfer/session/auth.h"
#include "transfer/session/credit.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/workq.h"

#define ENGINE_WR_CTRL (1ull << 63) /* wr_id tag of control sends */
#define ENGINE_KEEPALIVE_MS 1000

struct engine;

/* What a role does with what the loop hands it. Returns 0 or -errno. */
struct engine_role {
	int (*on_msg)(struct engine *e, const struct wire_msg *m);
	int (*on_data)(struct engine *e, const struct cm_event *ev);
	int (*on_write_done)(struct engine *e, uint64_t wr_id);
	/* Posts whatever can go now; returns how much was done (>= 0). */
	int (*pump)(struct engine *e);
	bool (*finished)(const struct engine *e);
	/*
	 * The sink's released-slot count for the slot_ack of msg (encoded,
	 * being posted), NULL on the source.
	 */
	uint32_t (*slot_ack)(struct engine *e, const uint8_t *msg);
	/*
	 * Whether m may be taken now (NULL: every message as it comes): 0
	 * yes, 1 not yet, or the engine's error. A message not yet taken is
	 * held, its control credit not returned and its buffer not reposted,
	 * with every later one behind it (ERROR aside), and offered again
	 * after each data event, oldest first.
	 */
	int (*ready)(struct engine *e, const struct wire_msg *m);
};

/* A control message received and not yet taken (engine_role.ready). */
struct engine_held {
	uint32_t id; /* its rx buffer */
	uint32_t len;
	uint32_t pos; /* a BATCH: where its first message not taken is */
};

struct engine_out {
	struct engine_out *next;
	uint32_t len;
	bool tag_after; /* the messages posted after this one carry tags */
	uint8_t buf[];
};

/* The control channel's authentication (auth.h), once the key is known. */
struct engine_mac {
	uint8_t key[AUTH_CTRL_KEY_LEN];
	enum auth_dir tx_dir, rx_dir;
	uint64_t tx_seq, rx_seq; /* tagged messages sent, received */
	bool tx, rx;		 /* tagging on, per direction */
};

struct engine {
	struct cm_conn *c;
	const struct xfer_opts *o;
	const struct engine_role *role;
	void *role_data;
	struct workq *wq;
	unsigned int workers; /* its threads (affinity_apply) */
	struct credit_ctrl cc;
	uint8_t *tx_busy; /* per tx buffer */
	unsigned int tx_inflight;
	struct engine_out *out_head, *out_tail;
	uint64_t last_rx_ms, last_tx_ms;
	/* polled but not yet dispatched (a role may finish mid-batch) */
	struct cm_event evq[32];
	unsigned int evq_head, evq_len;
	/* held messages, a ring of c->nrx: they keep their rx buffers */
	struct engine_held *held;
	unsigned int held_head, held_len;
	bool armed;
	/*
	 * The longest sleep of an idle turn, 0: the default slice. A role
	 * waiting on something no completion announces (a list with no
	 * names yet) lowers it to look again soon.
	 */
	int nap_ms;
	unsigned int spins;	/* empty turns in a row */
	uint64_t idle_since_ns; /* when the current run of them began */
	/* the first fatal error: class, errno and one line for the user */
	enum xfer_fail fail;
	int err;
	char why[600];
	struct engine_mac mac;
	/*
	 * Entry messages queued together leave in BATCHes (wire_batch_may):
	 * set by the role where a session asks first (-n, -u, --sync). One
	 * that comes is taken in any session, message by message, each
	 * checked by the role as if it came alone.
	 */
	bool batch;
	bool peer_said_error; /* the peer sent ERROR: do not answer it */
	/*
	 * A receiver's session (server.c): a cancel is the receiver going
	 * away (-ESHUTDOWN, its client retries), not an interrupted copy.
	 */
	bool serving;
	bool flushed; /* a flush or CLOSED was seen: the connection failed */
	/* RING's target (enum wire_ring_target): sent by the sink, or got */
	uint8_t target;
	bool closing; /* the role said its last word: no acks or keepalives,
		       * which the peer, free to hang up now, would not read */
	/*
	 * A receiver's session: the gauge of ring slots its sink holds
	 * (metrics.h ring_held), added to as it changes; NULL: none.
	 */
	atomic_int_fast64_t *ring_held;
};

int engine_init(struct engine *e, struct cm_conn *c, const struct xfer_opts *o)
	__attribute__((warn_unused_result));

/*
 * Whether this session's user is the peer's: an rdcp --server started
 * over ssh, whose stderr is relayed to the client's user, who is also
 * told every failure (the session's, each file's) over the wire. Its
 * failures are then logged at info level, so that they are printed once.
 */
bool engine_user_is_peer(const struct engine *e);
void engine_release(struct engine *e);

/*
 * Records the first fatal error (later ones are consequences) and logs it.
 * Returns err for the caller to return.
 */
int engine_fail(struct engine *e, enum xfer_fail klass, int err,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * engine_fail for a failure whose root cause was logged where it was
 * known (cm/ logs its own verbs and socket errors): recorded, not logged
 * again. Returns err.
 */
int engine_fail_logged(struct engine *e, enum xfer_fail klass, int err);

/* Queues m (acks are filled in when it goes out). 0 or -ENOMEM. */
int engine_send(struct engine *e, struct wire_msg *m)
	__attribute__((warn_unused_result));
/*
 * The control channel's key, once the handshake has one (ck: see
 * auth_ctrl_key(); server: which end this is). Tagging then starts in each
 * direction at the point engine_send_last_plain() and
 * engine_mac_rx_start() mark. Sessions without a key never call it and
 * carry no tags.
 */
void engine_mac_key(struct engine *e, const uint8_t ck[AUTH_CTRL_KEY_LEN],
		    bool server);

/*
 * engine_send() for the last untagged message this side sends: every
 * message posted after it carries a tag. 0 or -ENOMEM.
 */
int engine_send_last_plain(struct engine *e, struct wire_msg *m)
	__attribute__((warn_unused_result));

/*
 * From the next message received on, every one must carry the tag of the
 * next sequence number in the peer's direction, or the session fails
 * (XFER_FAIL_PROTOCOL).
 */
void engine_mac_rx_start(struct engine *e);

/* True when every queued control message has been posted. */
bool engine_out_empty(const struct engine *e);
/*
 * Posts what engine_send() queued, as far as tx buffers and credits allow,
 * without running the engine (before a step that does not: the lanes'
 * joins). 0 or the error of engine_fail().
 */
int engine_flush(struct engine *e);

/*
 * Runs the loop with role until role->finished or a failure. Returns 0 or
 * the error recorded with engine_fail.
 */
int engine_run(struct engine *e, const struct engine_role *role, void *data);

/*
 * Handshake helper: runs the loop (acks only) until a message of type want
 * arrives, an ERROR arrives, or timeout_ms passes.
 */
int engine_expect(struct engine *e, uint8_t want, struct wire_msg *m,
		  int timeout_ms) __attribute__((warn_unused_result));

/*
 * Sends ERROR with the recorded failure to the peer, best effort, and
 * waits (bounded) for its send to complete, so that the caller may
 * disconnect next.
 */
void engine_tell_peer(struct engine *e);

/* Maps a peer's -errno status on a file to a verdict. */
enum xfer_fail engine_klass_of(int status, bool remote);

#endif
