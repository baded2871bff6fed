/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's side of sessions (the sequence is in session.c): the
 * accept loop with one thread per connection, the hold-off of addresses
 * that keep failing authentication, the handshake (server_hello.c: a
 * HELLO checked and the client's proof of the key before anything beneath
 * the root is touched), and then the data sink into DEST (push) or the
 * data source of the named SRCs (pull). xfer_serve() is the public entry;
 * session_serve() serves one connection made elsewhere.
 *
 * A connection is unauthenticated until the client proved the key: such
 * connections have a budget of their own (PREAUTH_PER_ADDR per address,
 * PREAUTH_MAX in all) and PREAUTH_MS to finish the handshake; only then
 * does one take a --max-sessions slot. The listener's thread only counts
 * and hands out: refusals never wait on the client (cm_reject).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "transfer/session/auth.h"
#include "transfer/wire/boot.h"
#include "transfer/session/role.h"
#include "transfer/fs/place.h"
#include "transfer/server/server_int.h"
#include "transfer/session/session.h"
#include "transfer/walk/walk.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/log.h"
#include "util/numa.h"
#include "util/units.h"

/* The lower of two rates, 0 meaning no limit. */
static uint64_t slower(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* s began (+1) or ended (-1) on c: the running sessions' gauges. */
static void count_running(struct server *srv, const struct cm_conn *c, int n)
{
	metrics_gauge(&srv->metrics.active, n);
	metrics_gauge(&srv->metrics.ring_slots, n * (int64_t)c->geom.slots);
	metrics_gauge(&srv->metrics.ring_bytes,
		      n * (int64_t)c->geom.slots * c->geom.chunk_size);
}

/*
 * One session on c: the handshake by deadline_ms, then a slot (server_promote,
 * pa as there; *promoted says whether one was taken), then the sink or the
 * source.
 */
static enum xfer_fail serve_conn(struct server *srv, struct cm_conn *c,
				 uint64_t deadline_ms, int pa, bool *promoted)
{
	struct sink_target t = { .dirfd = -1 };
	struct xfer_stats st = { 0 };
	const char **srcs = NULL; /* a pull's SRCs, in srcbuf */
	char *srcbuf = NULL;
	struct session_params p = { 0 };
	struct wire_hello *h = NULL;
	struct filter filter = { 0 };
	uint8_t key[AEAD_KEY_LEN];
	struct join_wait jw = { 0 };
	struct server_session ss;
	struct srv_session os = { .srv = srv, .peer = c->peer };
	struct xfer_opts so = *srv->o; /* with the trail's per-file hook */
	struct engine e;
	enum xfer_fail v;
	char sz[32], why[600];
	double t0 = clock_now_s();
	int rootfd = srv->rootfd;
	int rc;

	so.copy.on_file = audit_file;
	so.copy.on_file_arg = &os;
	so.copy.on_progress = NULL;
	rc = engine_init(&e, c, &so);
	if (rc)
		return XFER_FAIL_RESOURCE;
	e.serving = true;
	e.ring_held = &srv->metrics.ring_held;
	server_session_begin(srv, &ss);
	h = malloc(sizeof(*h));
	rc = h ? server_handshake(srv, &e, &ss, h, &p, key, deadline_ms, &jw)
	       : engine_fail(&e, XFER_FAIL_RESOURCE, -ENOMEM, "out of memory");
	if (!rc) {
		*promoted = server_promote(srv, pa);
		if (!*promoted)
			metrics_add(&srv->metrics.refused[REFUSED_BUSY], 1);
		if (!*promoted)
			rc = engine_fail(&e, XFER_FAIL_CONNECT, -EBUSY,
					 "refused %s: the receiver is at its "
					 "session limit (%u sessions), try "
					 "again later",
					 c->peer, srv->max_sessions);
	}
	if (!rc) {
		enum xfer_fail f;

		rc = server_session_module(srv, &ss, h, c->peer, &f, why,
					   sizeof(why));
		if (rc)
			engine_fail(&e, f, rc, "refused %s: %s", c->peer, why);
		else if (ss.modfd >= 0)
			rootfd = ss.modfd;
	}
	if (*promoted) {
		os.role = h->role;
		snprintf(os.client, sizeof(os.client), "%s", ss.client);
		snprintf(os.module, sizeof(os.module), "%s", ss.module);
		os.mp = metrics_pair(&srv->metrics, os.client, os.module);
		os.md = metrics_dev(&srv->metrics, c->dev,
				    c->transport ? c->transport : "?");
		metrics_add(&os.mp->sessions, 1);
		metrics_add(&srv->metrics.resumed,
			    !!(h->flags & WIRE_HELLO_RESUME));
		count_running(srv, c, 1);
	}
	if (rc) {
		/* said in engine_fail */
	} else if (h->role == WIRE_PUSH) {
		t.p = p;
		t.umask = srv->umask;
		t.filter = &filter; /* --delete: what they exclude stays */
		t.budget = server_quota_session(srv, &os.q, ss.mod);
		rc = server_hello_filter(h, &filter, why, sizeof(why));
		if (rc)
			engine_fail(&e,
				    rc == -ENOMEM ? XFER_FAIL_RESOURCE
						  : XFER_FAIL_USAGE,
				    rc, "%s: %s", c->peer,
				    rc == -ENOMEM ? "out of memory" : why);
		else if (srv->user_paths)
			rc = place_target_local(
				server_user_path(wire_hello_path(h, 0)),
				h->flags & WIRE_HELLO_DEST_DIR ? 2 : 1, &t, why,
				sizeof(why));
		else
			rc = place_target_beneath(
				rootfd, wire_hello_path(h, 0),
				h->flags & WIRE_HELLO_DEST_DIR, &t, why,
				sizeof(why));
		if (rc && !e.fail) /* a DEST refused or not made */
			engine_fail(&e,
				    place_target_refused(rc) || rc == -ENOTDIR
					    ? XFER_FAIL_USAGE
					    : XFER_FAIL_LOCAL_IO,
				    rc, "%s: %s", c->peer, why);
		if (!rc && !t.is_dir) /* told in RING: a retry keeps it */
			e.target = WIRE_TARGET_NAMED;
		if (!rc && !session_rings(&e, true))
			sink_run(&e, &t, &st);
	} else {
		struct source_cfg cfg = {
			.nsrcs = h->npaths,
			.rootfd = srv->user_paths ? -1 : rootfd,
			.bwlimit = slower(srv->o->copy.bwlimit, h->bwlimit),
			.filter = &filter,
			.p = p,
		};

		srcs = calloc(h->npaths ? h->npaths : 1, sizeof(*srcs));
		srcbuf = malloc(WIRE_PATHS_MAX);
		cfg.srcs = srcs;
		rc = srcs && srcbuf
			     ? server_check_sources(h, srv->user_paths, srcbuf,
						    srcs, why, sizeof(why))
			     : -ENOMEM;
		if (!rc)
			rc = server_hello_filter(h, &filter, why, sizeof(why));
		if (rc)
			engine_fail(&e,
				    rc == -ENOMEM  ? XFER_FAIL_RESOURCE
				    : rc == -EPERM ? XFER_FAIL_USAGE
						   : XFER_FAIL_LOCAL_IO,
				    rc, "%s: %s", c->peer,
				    rc == -ENOMEM ? "out of memory" : why);
		else if (!session_rings(&e, false))
			src_run(&e, &cfg, &st);
	}
	OPENSSL_cleanse(key, sizeof(key));
	server_join_close(srv, &jw);
	engine_tell_peer(&e);
	v = session_verdict(&e, &st);
	if (v == XFER_OK)
		log_info("session %s %s: %llu files, %s in %.2f s",
			 h->role == WIRE_PUSH ? "from" : "to", c->peer,
			 (unsigned long long)st.files_ok,
			 units_format_size(st.bytes, sz, sizeof(sz)),
			 clock_now_s() - t0);
	if (*promoted) {
		count_running(srv, c, -1);
		metrics_add(&srv->metrics.verdicts[v], 1);
		audit_session(&os, &st, v, clock_now_s() - t0);
	}
	server_session_end(srv, &ss);
	engine_release(&e);
	free(srcs);
	free(srcbuf);
	filter_release(&filter);
	free(h);
	if (t.dirfd >= 0)
		close(t.dirfd);
	return v;
}

/* How long a client has from its connect to the proof of the key. */
static int preauth_ms(const struct xfer_opts *o)
{
	return o->link.connect_timeout_ms < PREAUTH_MS
		       ? o->link.connect_timeout_ms
		       : PREAUTH_MS;
}

enum xfer_fail session_serve(const struct xfer_opts *o, int rootfd,
			     struct cm_conn *c)
{
	struct server srv = { .o = o,
			      .max_sessions = o->serve.max_sessions,
			      .max_streams = 1, /* no listener for joins */
			      .rootfd = rootfd,
			      .key = o->link.key,
			      .auth = o->link.key != NULL };
	bool promoted = false;
	enum xfer_fail v;

	srv.umask = umask(022);
	umask(srv.umask);
	metrics_init(&srv.metrics);
	if (audit_log_open(&srv.alog, NULL, false))
		return XFER_FAIL_INTERNAL; /* none to open: cannot fail */
	v = serve_conn(&srv, c, clock_now_ms() + (uint64_t)preauth_ms(o), -1,
		       &promoted);
	audit_log_close(&srv.alog);
	metrics_release(&srv.metrics);
	return v;
}

/*
 * Accepts req and serves it; pa is its preauth slot (-1: none). Returns the
 * verdict, and in *promoted whether it took a session slot.
 */
static enum xfer_fail serve_one(struct server *srv, struct cm_request *req,
				int pa, bool *promoted)
{
	const struct xfer_opts *o = srv->o;
	struct cm_limits lim = {
		.max_chunk_size = o->link.chunk_size,
		.max_slots = server_max_window(o, srv->max_sessions),
	};
	struct cm_timeouts to = session_timeouts(o);
	uint64_t deadline;
	struct cm_conn *c;
	enum xfer_fail v;
	int rc;

	to.connect_ms = preauth_ms(o);
	deadline = clock_now_ms() + (uint64_t)to.connect_ms;
	*promoted = false;
	/* A lane's join goes to its session, never opens one. */
	rc = cm_request_read(req, to.connect_ms);
	if (rc)
		return session_connect_fail(rc);
	if (cm_request_join(req, NULL)) {
		server_join_route(srv, req);
		return XFER_FAIL_CONNECT;
	}
	rc = cm_accept(req, &lim, &to, &c);
	if (rc)
		return session_connect_fail(rc);
	v = serve_conn(srv, c, deadline, pa, promoted);
	cm_conn_destroy(c);
	return v;
}

struct session_arg {
	struct server *srv;
	struct cm_request *req;
	int pa;
};

static void *session_thread(void *p)
{
	struct session_arg *a = p;
	struct server *srv = a->srv;
	int pa = a->pa;
	enum xfer_fail v;
	bool promoted;

	v = serve_one(srv, a->req, pa, &promoted);
	free(a);
	pthread_mutex_lock(&srv->lock);
	if (promoted) {
		srv->sessions--;
		srv->served = true;
		srv->verdict = v;
	} else {
		srv->preauth_addr[pa][0] = '\0';
		srv->preauth--;
	}
	pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

static void spawn(struct server *srv, struct cm_request *req)
{
	struct session_arg *a;
	pthread_attr_t attr;
	enum refusal why;
	pthread_t tid;
	int pa;

	pa = server_admit(srv, cm_request_peer(req), &why);
	if (pa < 0) {
		server_refuse(srv, req, why);
		return;
	}
	a = malloc(sizeof(*a));
	if (a) {
		a->srv = srv;
		a->req = req;
		a->pa = pa;
		sigset_t hup, old;

		/*
		 * SIGHUP (reopen the audit log) is the listener's: a session
		 * and the threads it starts never see a call cut by it.
		 */
		sigemptyset(&hup);
		sigaddset(&hup, SIGHUP);
		pthread_sigmask(SIG_BLOCK, &hup, &old);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&tid, &attr, session_thread, a)) {
			free(a);
			a = NULL;
		}
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (!a) {
		log_err("cannot start a session thread for %s",
			cm_request_peer(req));
		cm_reject(req);
		pthread_mutex_lock(&srv->lock);
		srv->preauth_addr[pa][0] = '\0';
		srv->preauth--;
		pthread_mutex_unlock(&srv->lock);
	}
}

/*
 * rdcp --server: listens on a port of the range with the one-time key in
 * srv->key, and hands the bootstrap line (boot.h) to o->on_boot.
 */
static int listen_boot(struct server *srv, struct cm_listener **l)
{
	const struct xfer_opts *o = srv->o;
	struct boot b = { .proto = CM_VERSION };
	char line[BOOT_LINE_MAX];
	int rc;

	rc = cm_listen_range(
		&o->link.addr, o->ssh.port_lo ? o->ssh.port_lo : 49152,
		o->ssh.port_hi ? o->ssh.port_hi : 65535, l, &b.port);
	if (rc)
		return rc;
	snprintf(b.version, sizeof(b.version), "%s", RDCP_VERSION);
	b.rdma = cm_listener_rdma(*l);
	b.tcp = o->link.addr.transport != CM_TRANSPORT_RDMA;
	if (b.rdma)
		b.nrdma = cm_local_addrs(true, b.rdma_addrs, BOOT_ADDRS);
	if (b.tcp)
		b.ntcp = cm_local_addrs(false, b.tcp_addrs, BOOT_ADDRS);
	b.nrdma = b.nrdma < 0 ? 0 : b.nrdma;
	b.ntcp = b.ntcp < 0 ? 0 : b.ntcp;
	snprintf(b.via, sizeof(b.via), "%s", o->ssh.via ? o->ssh.via : "");
	memcpy(b.key, srv->key, KEY_LEN);
	boot_format(&b, line);
	if (o->ssh.on_boot)
		o->ssh.on_boot(o->ssh.on_boot_arg, line);
	OPENSSL_cleanse(&b, sizeof(b));
	OPENSSL_cleanse(line, sizeof(line));
	return 0;
}

/*
 * rdcp --server: whether to stop, with the verdict in *v: its one
 * authenticated session ended, or none began by until_ms.
 */
static bool boot_done(struct server *srv, uint64_t until_ms,
		      enum xfer_fail *v)
{
	bool done;

	pthread_mutex_lock(&srv->lock);
	done = srv->served || (!srv->started && clock_now_ms() > until_ms);
	if (srv->served)
		*v = srv->verdict;
	else if (done)
		*v = XFER_FAIL_CONNECT;
	pthread_mutex_unlock(&srv->lock);
	if (done && !srv->served)
		log_err("no client proved the one-time key in time (twice "
			"the connect timeout): giving up");
	return done;
}

/*
 * *o->stop is set: whether to leave the accept loop now. At once for a
 * single session (--once, --server), else once no session runs or
 * authenticates; until then new connections are refused (the loop goes
 * on, so that they are not left waiting in the backlog).
 */
static bool stopped(struct server *srv, bool *told)
{
	unsigned int n;

	if (srv->o->serve.once || srv->o->ssh.ssh_server)
		return true;
	pthread_mutex_lock(&srv->lock);
	n = srv->sessions + srv->preauth;
	pthread_mutex_unlock(&srv->lock);
	if (n && !*told)
		log_warn("shutting down: %u running session%s given up to "
			 "%d s to finish",
			 n, n == 1 ? "" : "s", XFER_STOP_GRACE_S);
	*told = true;
	return !n;
}

/* SIGHUP came since the audit log was (re)opened: reopen it. */
static void check_hup(struct server *srv)
{
	unsigned int n =
		srv->o->serve.hup ? (unsigned int)*srv->o->serve.hup : 0;

	if (n == srv->hups)
		return;
	srv->hups = n;
	audit_log_reopen(&srv->alog);
}

/*
 * The trail's file and the metrics endpoint, before listening: 0, or the
 * verdict (said) when one cannot be had.
 */
static enum xfer_fail observe_start(struct server *srv,
				    struct metrics_http **mh)
{
	const struct xfer_opts *o = srv->o;

	metrics_init(&srv->metrics);
	srv->hups = o->serve.hup ? (unsigned int)*o->serve.hup : 0;
	if (audit_log_open(&srv->alog,
			   o->ssh.ssh_server ? NULL : o->serve.audit_log,
			   o->serve.json_events && !o->ssh.ssh_server)) {
		metrics_release(&srv->metrics);
		return XFER_FAIL_LOCAL_IO;
	}
	*mh = NULL;
	if (o->serve.metrics_addr && !o->ssh.ssh_server &&
	    metrics_http_start(&srv->metrics, o->serve.metrics_addr, mh)) {
		audit_log_close(&srv->alog);
		metrics_release(&srv->metrics);
		return XFER_FAIL_CONNECT;
	}
	return XFER_OK;
}

static void observe_stop(struct server *srv, struct metrics_http *mh)
{
	metrics_http_stop(mh);
	audit_log_close(&srv->alog);
	metrics_release(&srv->metrics);
}

enum xfer_fail xfer_serve(const struct xfer_opts *o)
{
	struct server srv = { .o = o, .key = o->link.key };
	uint8_t onetime[KEY_LEN];
	struct metrics_http *mh = NULL;
	struct cm_listener *l;
	enum xfer_fail v = XFER_OK;
	uint64_t until = 0;
	bool told = false; /* stopping: the sessions' grace said */
	int rc;

	if (o->ssh.ssh_server) {
		if (getrandom(onetime, sizeof(onetime), 0) != sizeof(onetime)) {
			log_err("cannot get random bytes: %s", strerror(errno));
			return XFER_FAIL_RESOURCE;
		}
		srv.key = onetime;
		srv.user_paths = true;
	}
	srv.auth = srv.key || (o->serve.clients_dir && !o->ssh.ssh_server);
	srv.rootfd = open(o->serve.root ? o->serve.root : ".",
			  O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (srv.rootfd < 0) {
		log_err("cannot use root directory '%s': %s", o->serve.root,
			strerror(errno));
		return XFER_FAIL_USAGE;
	}
	if (!o->ssh.ssh_server && server_access_init(&srv)) {
		close(srv.rootfd);
		return XFER_FAIL_USAGE;
	}
	v = observe_start(&srv, &mh);
	if (v) {
		server_access_release(&srv);
		close(srv.rootfd);
		OPENSSL_cleanse(onetime, sizeof(onetime));
		return v;
	}
	pthread_mutex_init(&srv.lock, NULL);
	/* the quota= modules' walker, which the lock and metrics serve */
	if (o->serve.modules_file && !o->ssh.ssh_server &&
	    server_quota_start(&srv)) {
		observe_stop(&srv, mh);
		server_access_release(&srv);
		close(srv.rootfd);
		pthread_mutex_destroy(&srv.lock);
		return XFER_FAIL_RESOURCE;
	}
	srv.max_streams = o->link.streams ? o->link.streams : CM_LANES_MAX;
	/* --once and --server: one session, with its own room */
	srv.max_sessions = server_fit_sessions(
		o, o->serve.once || o->ssh.ssh_server ? 1 : o->serve.max_sessions,
		srv.max_streams, &srv.wide);
	srv.umask = umask(022);
	umask(srv.umask);
	pthread_cond_init(&srv.idle, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&srv.joined, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (o->link.rail_devices && !o->ssh.ssh_server) {
		/* --device a,b: every address, over RDMA; rails filtered. */
		struct cm_addr any = o->link.addr;

		any.device = NULL;
		any.transport = CM_TRANSPORT_RDMA;
		rc = cm_listen(&any, &l);
	} else {
		rc = o->ssh.ssh_server ? listen_boot(&srv, &l)
				       : cm_listen(&o->link.addr, &l);
	}
	if (rc) {
		server_quota_stop(&srv);
		observe_stop(&srv, mh);
		close(srv.rootfd);
		server_access_release(&srv);
		OPENSSL_cleanse(onetime, sizeof(onetime));
		return rc == -ENOMEM ? XFER_FAIL_RESOURCE : XFER_FAIL_CONNECT;
	}
	until = clock_now_ms() + 2 * (uint64_t)o->link.connect_timeout_ms +
		5000;
	while (!(o->link.cancel && *o->link.cancel)) {
		struct cm_request *req;

		if (o->serve.stop && *o->serve.stop && stopped(&srv, &told))
			break;
		check_hup(&srv);
		if (o->ssh.ssh_server && boot_done(&srv, until, &v))
			break;
		if (o->serve.reload && *o->serve.reload) {
			*o->serve.reload = 0;
			/* a module's path or quota may be new: walked again */
			if (!server_reload(&srv))
				server_quota_rewalk(&srv);
		}
		/* Out of descriptors or memory is -EAGAIN too: cm/ said so. */
		rc = cm_listener_get(l, o->ssh.ssh_server ? 100 : 500, &req);
		if (rc == -EAGAIN || rc == -EINTR)
			continue;
		if (rc) {
			log_err("listener failed: %s", strerror(-rc));
			v = XFER_FAIL_CONNECT;
			break;
		}
		log_info("connection from %s", cm_request_peer(req));
		if (o->serve.stop && *o->serve.stop) {
			/* rejected, not left waiting: the client retries */
			server_refuse(&srv, req, REFUSED_STOPPING);
			continue;
		}
		if (o->serve.once) {
			bool promoted;

			/* The session takes its own joins (server_join.c). */
			srv.once_l = l;
			if (cm_request_read(req, preauth_ms(o)))
				continue; /* consumed, said */
			if (cm_request_join(req, NULL)) {
				server_join_route(&srv,
						  req); /* none waits yet */
				continue;
			}
			if (server_penalty_holds(&srv, cm_request_peer(req))) {
				server_refuse(&srv, req, REFUSED_HELD_OFF);
				continue;
			}
			v = serve_one(&srv, req, -1, &promoted);
			break;
		}
		spawn(&srv, req);
	}
	if (!o->serve.once && ((o->link.cancel && *o->link.cancel) ||
			       (o->serve.stop && *o->serve.stop)))
		v = XFER_FAIL_CANCELED;
	pthread_mutex_lock(&srv.lock);
	while (srv.sessions || srv.preauth)
		pthread_cond_wait(&srv.idle, &srv.lock);
	/* The client closing ssh after its session is no cancel. */
	if (o->ssh.ssh_server && srv.served)
		v = srv.verdict;
	pthread_mutex_unlock(&srv.lock);
	cm_listener_destroy(l);
	server_quota_stop(&srv);
	observe_stop(&srv, mh);
	close(srv.rootfd);
	server_access_release(&srv);
	OPENSSL_cleanse(onetime, sizeof(onetime));
	pthread_cond_destroy(&srv.idle);
	pthread_cond_destroy(&srv.joined);
	pthread_mutex_destroy(&srv.lock);
	return v;
}
