/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/server*.c: the receiver's state shared by its
 * sessions, the handshake (server_hello.c), and the admission of
 * connections (server_admit.c): the hold-off of addresses that keep
 * failing authentication, the budget of connections still
 * authenticating, and the --max-sessions slots.
 */
#ifndef RDCP_SERVER_INT_H
#define RDCP_SERVER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "transfer/server/metrics.h"
#include "transfer/session/role.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/aead.h"
#include "util/key_dir.h"
#include "util/log.h"
#include "util/modconf.h"

/* Peers that failed authentication lately, to slow down key guessing. */
#define PENALTY_SLOTS 64
#define PENALTY_FREE 2	 /* failures before an address is held off */
#define PENALTY_MS 10000 /* first hold-off; doubles per failure */
#define PENALTY_MAX_MS 600000

/* Connections still in their handshake: per address, in all, how long. */
#define PREAUTH_PER_ADDR 8
#define PREAUTH_MAX 32
#define PREAUTH_MS 5000 /* from accept to the proof of the key */

struct penalty {
	char addr[64]; /* peer address without the port */
	unsigned int fails;
	uint64_t until_ms;
};

/* Why the listener refused a connection; each said at most every 10 s. */
enum refusal {
	REFUSED_HELD_OFF,
	REFUSED_ADDR,
	REFUSED_PREAUTH,
	REFUSED_BUSY,
	REFUSED_JOIN, /* a lane join no session waits for (server_join.c) */
	REFUSED_REPLAY, /* a lane's proof presented a second time (same) */
	REFUSED_STOPPING, /* SIGTERM: running sessions finish, no new one */
	REFUSED_AUTH, /* a failed authentication (counted, not refused here) */
	REFUSED_MAX
};

/*
 * A session waiting for its lanes to join (server_join.c): listed under
 * srv->lock from before its WELCOME (which carries token) until its RING;
 * the joins the listener routes to it queue in q.
 */
#define JOIN_QUEUE 32
struct join_wait {
	struct join_wait *next;
	uint8_t token[WIRE_LANE_TOKEN_LEN];
	struct cm_request *q[JOIN_QUEUE];
	unsigned int nq;
	unsigned int owed; /* lanes 1..n-1: at most that many wait in q */
	bool listed;
	/*
	 * The session went on with the lanes it has (server_join_stop):
	 * still listed, so a join that comes late is refused with an info
	 * line, not a warning (the session warned once).
	 */
	bool stopped;
	/*
	 * Lane k's proof (auth.h) and whether a join carrying it came
	 * already: a proof is good for one join, whatever became of it, so
	 * one read off the wire cannot be replayed within the session.
	 */
	unsigned int streams; /* lanes the session agreed to */
	unsigned int n;	      /* streams once server_join_arm made the proofs, or 0 */
	uint8_t proof[CM_LANES_MAX][CM_PROOF_LEN];
	bool presented[CM_LANES_MAX];
	/* The same for lane k's fallback join (its rail dropped: cm.h). */
	uint8_t proof_fb[CM_LANES_MAX][CM_PROOF_LEN];
	bool presented_fb[CM_LANES_MAX];
	const uint8_t *key; /* the session's key (server_session.key), or NULL */
};

/*
 * What the receiver serves with (modules.c): the named clients' keys
 * (--clients) and the modules (--modules), read together at the start and
 * on each reload (SIGHUP). A session holds a reference to the one it
 * started under from its HELLO to its end, so a reload never changes a
 * running session's rules; refs under server.lock.
 */
struct access_cfg {
	unsigned int refs;
	struct key_dir clients; /* empty without --clients */
	struct modconf mods;	/* empty without --modules: paths beneath root */
};

/* Sessions running in a module, for its max-sessions (across reloads). */
struct module_count {
	char name[MODCONF_NAME_MAX + 1];
	unsigned int sessions;
};

/*
 * A module's usage for its quota= (quota.c), by name across reloads, made
 * the first time a walk or a session needs it and freed at the end. Its
 * fields are under server.lock. used: the bytes its tree holds, walked
 * and kept current since with what sessions place, replace and delete;
 * while a walk runs, delta collects those changes too, and the walk's sum
 * plus delta becomes used when it ends.
 */
struct module_usage {
	struct module_usage *next;
	char name[MODCONF_NAME_MAX + 1];
	uint64_t used;
	int64_t delta;
	bool known; /* a walk finished once: until then, nothing is taken */
	bool walking;
	struct metrics_module *mm; /* its gauges */
};

/* The walker of quota= modules' trees (quota.c). Under server.lock. */
struct quota_walk {
	pthread_t tid;
	bool started;
	bool again;	     /* a walk asked for (start, reload) */
	atomic_bool stop;    /* the receiver ends: the walk too */
	pthread_cond_t wake; /* again or stop (CLOCK_MONOTONIC) */
};

/*
 * A push's byte limits in its module (quota.c): the sink's budget. mod in
 * the session's configuration; written: bytes of the files taken for
 * max-bytes (under server.lock); refused: files a rule refused.
 */
struct server;
struct quota_session {
	struct server *srv;
	const struct modconf_module *mod;
	struct module_usage *u; /* quota=: its usage, else NULL */
	struct metrics_module *mm;
	uint64_t written;
	atomic_uint refused;
	struct sink_budget budget;
};

/*
 * One session as the receiver serves it: who it is and where it works,
 * for every line the receiver writes about it. client: the named key it
 * proved, "site-key" (the receiver's one key), "one-time-key" (rdcp
 * --server) or "-" (--no-auth); module: the module's name, "-" without
 * modules (or before one was chosen).
 */
struct server_session {
	const char *client;
	const char *module;
	char client_buf[KEY_NAME_MAX + 1];
	char module_buf[MODCONF_NAME_MAX + 1];
	const uint8_t *key; /* what it proves: the site's, its own, or dummy */
	uint8_t dummy[KEY_LEN]; /* an unknown name's: random, matches none */
	const char *key_miss;	/* why dummy: said in the log if the MAC fails */
	struct access_cfg *cfg; /* a reference (server_access_get), or NULL */
	const struct modconf_module *mod; /* in cfg, or NULL */
	int modfd;	/* mod's path (O_PATH), else -1 */
	bool counted;	/* holds one of mod's max-sessions */
};

/*
 * --audit-log: JSON lines appended to path, one write() each under lock
 * (so neither threads nor a reopen cut one); fd -1 when off.
 */
struct audit_log {
	pthread_mutex_t lock;
	int fd;
	const char *path;
	bool events; /* --json: the same lines on stdout too */
};

/*
 * One authenticated session as the audit trail and the metrics see it
 * (audit.c): who, from where, into which module, which way.
 */
struct server;
struct srv_session {
	struct server *srv;
	const char *peer; /* "addr:port" */
	/* the client's name: "site-key" for the site-wide key (or none) */
	char client[64];
	char module[64];       /* the module's name, "-" without modules */
	enum wire_role role;
	struct metrics_pair *mp; /* its label set */
	struct metrics_dev *md;	 /* its device's */
	struct quota_session q;	 /* a push's byte limits */
};

struct server {
	const struct xfer_opts *o;
	unsigned int max_streams; /* lanes a session may have (1..16) */
	struct join_wait *joins;  /* sessions waiting for lanes */
	pthread_cond_t joined;	  /* a join was queued */
	bool joined_init;
	struct cm_listener *once_l; /* --once: the session takes its joins */
	unsigned int max_sessions; /* --max-sessions, or what fds allow */
	bool wide; /* each of them fits WIRE_INFLIGHT_ASK_MAX (WIRE_FEAT_WIDE) */
	int rootfd;
	const uint8_t *key; /* o->key, or --server's one-time key */
	bool auth; /* sessions authenticate: a key, or named clients */
	struct access_cfg *cfg;	      /* the current one, under lock */
	struct module_count *counts; /* under lock */
	size_t ncounts;
	struct module_usage *usage; /* under lock (quota.c) */
	struct quota_walk walk;
	bool user_paths;    /* --server: paths as the user typed them */
	mode_t umask;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned int sessions; /* authenticated, each in a slot */
	unsigned int preauth;  /* connections not yet authenticated */
	char preauth_addr[PREAUTH_MAX][64]; /* theirs, "" when free */
	struct log_every refused[REFUSED_MAX];
	struct penalty pen[PENALTY_SLOTS];
	/* --server: one authenticated session, then the end */
	bool started, served; /* one took its slot; it ended */
	enum xfer_fail verdict; /* its verdict */
	struct metrics metrics; /* counted always, served with --metrics */
	struct audit_log alog;	/* --audit-log */
	unsigned int hups;	/* *o->hup when alog was last (re)opened */
};
/*
 * ---- clients and modules (modules.c) ----
 *
 * server_access_init reads o->clients_dir and o->modules_file into
 * srv->cfg (0, or -errno: said); server_reload reads them again and, only
 * if both are good, makes them the current ones (running sessions keep
 * theirs): 0; a failure keeps the old and says so in one line: -errno.
 * server_access_release drops srv's reference (sessions' are theirs).
 */
/*
 * Raises the soft limit on open files to the hard one and returns how many
 * sessions of max_streams lanes fit in it: max_sessions, or fewer (at
 * least 1) when it is too low, said once (server_budget.c). *wide: so
 * many sessions fit with WIRE_INFLIGHT_ASK_MAX files in flight each,
 * not only WIRE_INFLIGHT_MAX, and they are offered it.
 */
unsigned int server_fit_sessions(const struct xfer_opts *o,
				 unsigned int max_sessions,
				 unsigned int max_streams, bool *wide);
/*
 * The most ring slots this receiver grants a session: its --window, or
 * when that is left to the link what its memory budget allows: 256 MiB
 * of ring (CM_WINDOW_MAX_BYTES), or a sessions'th of an eighth of the
 * RAM or of the memlock limit (when that binds this process: no
 * CAP_IPC_LOCK) when lower, never below CM_WINDOW_FALLBACK
 * (server_budget.c). server_window_for is the
 * arithmetic, for lock_limit bytes (UINT64_MAX: none).
 */
uint16_t server_max_window(const struct xfer_opts *o, unsigned int sessions);
uint16_t server_window_for(const struct xfer_opts *o, unsigned int sessions,
			   uint64_t lock_limit);
int server_access_init(struct server *srv) __attribute__((warn_unused_result));
int server_reload(struct server *srv);
void server_access_release(struct server *srv);

/*
 * s starts: a reference to the current configuration, and its client
 * named ("site-key", "-", ...) with nothing chosen yet.
 */
void server_session_begin(struct server *srv, struct server_session *s);

/*
 * The key s proves for h's client (HELLO's name, else the site's key):
 * sets s->key (NULL: none, the receiver does not authenticate) and
 * s->client; a name without a key here gets a random key that no client
 * has (the handshake then fails as a wrong key would, telling the client
 * nothing more) and s->key_miss says why for the log.
 */
void server_session_key(struct server *srv, struct server_session *s,
			const struct wire_hello *h);

/*
 * After authentication: with modules, the one h's paths name (their first
 * component), checked against its rules for s's client from peer, its
 * path opened (s->modfd) and h's paths rewritten beneath it; a slot of its
 * max-sessions taken. 0 (also without modules: nothing done), or a
 * negative errno with *fail the verdict and why the line for the client
 * (which never names a module it may not see; the log gets the rule).
 */
int server_session_module(struct server *srv, struct server_session *s,
			  struct wire_hello *h, const char *peer,
			  enum xfer_fail *fail, char *why, size_t whysz);

/* s ends: its module slot, its module's fd, its configuration let go. */
void server_session_end(struct server *srv, struct server_session *s);

/* Lets go of a reference to c (taken under srv->lock: refs++). */
void server_cfg_put(struct server *srv, struct access_cfg *c);

/*
 * ---- byte limits (quota.c) ----
 *
 * server_quota_start starts the walker of the quota= modules' trees (a
 * thread of its own: a walk now, after each server_quota_rewalk (the
 * listener's, after a reload) and every QUOTA_WALK_S); 0 or -errno, said.
 * server_quota_stop ends it (a walk under way stops between entries) and frees
 * the usage; safe when it never started. server_quota_session: the budget of a
 * push into m for the sink, or NULL when m has no byte limit.
 */
#define QUOTA_WALK_S (15 * 60)
int server_quota_start(struct server *srv) __attribute__((warn_unused_result));
void server_quota_rewalk(struct server *srv);
void server_quota_stop(struct server *srv);
const struct sink_budget *server_quota_session(struct server *srv,
					       struct quota_session *q,
					       const struct modconf_module *m);

/* Counts one failed authentication from peer ("addr:port"). */
void server_penalty_add(struct server *srv, const char *peer);

/* Whether peer's address is held off now. */
bool server_penalty_holds(struct server *srv, const char *peer);

/*
 * Takes a preauth slot for the connection from peer: its index, or -1 with
 * why it cannot have one in *why (an enum refusal).
 */
int server_admit(struct server *srv, const char *peer, enum refusal *why);

/* Refuses req (never waiting on it), saying why at most every 10 s. */
struct cm_request;
void server_refuse(struct server *srv, struct cm_request *req, enum refusal why);

/*
 * Moves the connection in preauth slot pa (-1: none, a --once or in-memory
 * session) to a --max-sessions slot now that it authenticated: false when
 * every slot is taken (it keeps pa then, for session_thread to free).
 */
bool server_promote(struct server *srv, int pa);

/*
 * ---- the handshake (server_hello.c) ----
 *
 * server_handshake: on e, by deadline_ms, the client's HELLO read into h
 * and checked, the lanes agreed (jw listed, then joined), WELCOME and the
 * proof of s's key both ways, then p filled from h (and key, p->data_key
 * with --encrypt). Nothing beneath the root is touched before the proof.
 * 0 or the error of engine_fail (the verdict in e).
 */
struct engine;
struct filter;
int server_handshake(struct server *srv, struct engine *e,
		     struct server_session *s, struct wire_hello *h,
		     struct session_params *p, uint8_t key[AEAD_KEY_LEN],
		     uint64_t deadline_ms, struct join_wait *jw);

/* A path of rdcp --server's client as the user typed it: "~/" stripped. */
const char *server_user_path(const char *p);

/*
 * A pull's SRCs in h made paths inside the root, copied into buf
 * (WIRE_PATHS_MAX bytes), srcs[i] pointing at each; with user, taken as
 * the user typed them. 0, or -errno with why filled (-EPERM: outside the
 * root).
 */
int server_check_sources(const struct wire_hello *h, bool user, char *buf,
			 const char **srcs, char *why, size_t whysz);

/*
 * A pull's --include/--exclude rules in h added to f: 0, -ENOMEM, or
 * -EPERM with why filled for a rule util/filter.c does not take.
 */
int server_hello_filter(const struct wire_hello *h, struct filter *f, char *why,
			size_t whysz);

/*
 * ---- the audit trail (audit.c) ----
 *
 * audit_log_open opens o->audit_log (none: fd -1) for appending, and
 * with events writes each JSON line to stdout too (--json): 0, or -errno
 * said. audit_log_reopen opens it anew (logrotate moved it; SIGHUP)
 * and keeps the old one when that fails (said). audit_log_close: once.
 */
int audit_log_open(struct audit_log *a, const char *path, bool events)
	__attribute__((warn_unused_result));
void audit_log_reopen(struct audit_log *a);
void audit_log_close(struct audit_log *a);

/*
 * The session line (always) and its JSON line (--audit-log), with s's
 * statistics st and verdict v after seconds.
 */
void audit_session(const struct srv_session *s, const struct xfer_stats *st,
		   enum xfer_fail v, double seconds);

/*
 * An xfer_opts on_file hook (arg: the struct srv_session): each file done
 * counted in the metrics, and at -v its line and JSON line.
 */
void audit_file(void *arg, const struct xfer_file_report *r);

/*
 * ---- lanes (server_join.c) ----
 *
 * server_join_open lists w with a fresh token before the WELCOME that carries
 * it (0 or -errno); server_join_stop refuses what it still queues and every
 * join after (idempotent); server_join_close unlists it as well
 * (idempotent). server_join_route hands a read join request to the
 * session its token names, or refuses it (unknown token, queue full, the
 * session stopped taking joins): never a session slot, never a wait.
 * server_join_lanes, on the session's thread: lanes 1..n-1 of e's
 * connection, each join's proof checked (a wrong one refused and counted
 * as a failed authentication), a lane index out of range or taken refused,
 * until all joined, deadline_ms passed or a lane's accept failed; then the
 * session goes on with lanes 0..up-1 (up: the first lane that did not
 * join; one warning when up < n), said to the client in LANES
 * (doc/PROTOCOL.md "Lanes"). 0 or the error of engine_fail.
 */
struct engine;
struct wire_hello;
int server_join_open(struct server *srv, struct join_wait *w, unsigned int streams);
/*
 * The lanes' proofs of w's session (h, the receiver's nonce nonce_s), for
 * server_join_route to hold each to one join. 0 or -errno.
 */
int server_join_arm(struct server *srv, struct join_wait *w,
	     const struct wire_hello *h, const uint8_t *nonce_s)
	__attribute__((warn_unused_result));
void server_join_stop(struct server *srv, struct join_wait *w);
void server_join_close(struct server *srv, struct join_wait *w);
void server_join_route(struct server *srv, struct cm_request *req);
int server_join_lanes(struct server *srv, struct engine *e, struct join_wait *w,
	       unsigned int n, const struct wire_hello *h,
	       const uint8_t *nonce_s, uint64_t deadline_ms);

#endif
