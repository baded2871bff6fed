/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A copy whose other end is started over ssh, as scp's and rsync's are:
 * `rdcp --server` runs on the host through the remote shell (rsh.c) as
 * the user, listens on a port of its own and answers with the bootstrap
 * line (boot.h): its addresses, the port and a one-time key. The data
 * connection then goes to the address rdma_cm routes to (RDMA) or, when
 * there is none and the transport allows it, over TCP, and the session
 * authenticates with that key exactly as with a pre-shared one. The ssh
 * channel carries nothing else; when the copy is over its stdin is
 * closed and the remote rdcp exits.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "transfer/wire/boot.h"
#include "transfer/client/client_int.h"
#include "transfer/client/rsh.h"
#include "transfer/session/session.h"
#include "util/clock.h"
#include "util/log.h"

/* How long the remote has to end after its stdin closed. */
#define REMOTE_END_MS 5000

/* Fails the copy before any session: st->error, logged, the verdict. */
static enum xfer_fail fail(struct xfer_stats *st, enum xfer_fail v,
			   const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static enum xfer_fail fail(struct xfer_stats *st, enum xfer_fail v,
			   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->error, sizeof(st->error), fmt, ap);
	va_end(ap);
	log_err("%s", st->error);
	return v;
}

/* The remote rdcp's command line: --server and what the receiver needs. */
static void server_argv(const struct xfer_opts *o, const char **argv,
			char num[][24])
{
	static const char *const polls[] = { "adaptive", "busy", "event" };
	int n = 0, k = 0;

	argv[n++] = "--server";
	argv[n++] = "--transport";
	argv[n++] = o->link.addr.transport == CM_TRANSPORT_RDMA	 ? "rdma"
		    : o->link.addr.transport == CM_TRANSPORT_TCP ? "tcp"
								 : "auto";
	argv[n++] = "--chunk-size";
	snprintf(num[k], sizeof(num[k]), "%u", o->link.chunk_size);
	argv[n++] = num[k++];
	if (o->link.window) { /* else the far side's memory budget */
		argv[n++] = "--window";
		snprintf(num[k], sizeof(num[k]), "%u", o->link.window);
		argv[n++] = num[k++];
	}
	if (o->link.workers) { /* else the far side counts its own CPUs */
		argv[n++] = "--workers";
		snprintf(num[k], sizeof(num[k]), "%u", o->link.workers);
		argv[n++] = num[k++];
	}
	argv[n++] = "--timeout";
	snprintf(num[k], sizeof(num[k]), "%d", o->link.timeout_ms / 1000);
	argv[n++] = num[k++];
	argv[n++] = "--connect-timeout";
	snprintf(num[k], sizeof(num[k]), "%d",
		 o->link.connect_timeout_ms / 1000);
	argv[n++] = num[k++];
	argv[n++] = "--poll";
	argv[n++] = polls[o->link.poll];
	if (o->ssh.port_lo) {
		argv[n++] = "--port-range";
		snprintf(num[k], sizeof(num[k]), "%u-%u", o->ssh.port_lo,
			 o->ssh.port_hi);
		argv[n++] = num[k++];
	}
	if (o->link.addr.family == CM_AF_INET)
		argv[n++] = "-4";
	else if (o->link.addr.family == CM_AF_INET6)
		argv[n++] = "-6";
	if (log_enabled(LOG_INFO))
		argv[n++] = log_enabled(LOG_DEBUG) ? "-vv" : "-v";
	argv[n] = NULL;
}

/*
 * Starts the remote rdcp over o->rsh and reads its bootstrap line into
 * line. XFER_OK, or the verdict with st->error.
 */
static enum xfer_fail start_remote(const struct xfer_opts *o, struct rsh *r,
				   char *line, struct xfer_stats *st)
{
	const char *argv[32];
	char num[8][24];
	/* A prompt (password, host key) may take a person a while. */
	uint64_t wait_ms =
		o->ssh.batch ? 3 * (uint64_t)o->link.connect_timeout_ms + 10000
			     : 300000;
	int rc, status;

	server_argv(o, argv, num);
	rc = rsh_start(r, o->ssh.rsh, o->ssh.rsh_host, o->ssh.rdcp_path, argv,
		       o->ssh.batch, o->link.connect_timeout_ms / 1000, false);
	if (rc)
		return fail(st, XFER_FAIL_REMOTE_START,
			    "cannot start the remote shell '%s'", o->ssh.rsh);
	rc = rsh_read_line(r, clock_now_ms() + wait_ms, boot_is_line, line,
			   BOOT_LINE_MAX);
	if (!rc)
		return XFER_OK;
	status = rsh_finish(r, rc == -EPIPE ? REMOTE_END_MS : 0);
	if (o->link.cancel &&
	    *o->link.cancel) /* ssh got the terminal's SIGINT too */
		return fail(st, XFER_FAIL_CANCELED, "interrupted");
	st->start_may_heal =
		rc == -ETIMEDOUT || (rc == -EPIPE && rsh_may_heal(r, status));
	if (rc == -EMSGSIZE)
		return fail(
			st, XFER_FAIL_REMOTE_START,
			"rdcp on '%s' answered with a bootstrap line longer "
			"than %d bytes",
			o->ssh.rsh_host, BOOT_LINE_MAX);
	if (rc == -ETIMEDOUT)
		return fail(st, XFER_FAIL_REMOTE_START,
			    "rdcp on '%s' did not answer within %llu s (is "
			    "ssh waiting for a password? try 'ssh %s true')",
			    o->ssh.rsh_host,
			    (unsigned long long)(wait_ms / 1000),
			    o->ssh.rsh_host);
	if (rc != -EPIPE)
		return fail(st, XFER_FAIL_REMOTE_START,
			    "cannot read from the remote shell: %s",
			    strerror(-rc));
	rsh_explain(r, status, o->ssh.rdcp_path, st->error, sizeof(st->error));
	log_err("%s", st->error);
	return XFER_FAIL_REMOTE_START;
}

/* Puts via first in list (if it is there). */
static void via_first(char (*list)[CM_ADDRSTR_LEN], int n, const char *via)
{
	for (int i = 1; via[0] && i < n; i++) {
		if (strcmp(list[i], via))
			continue;
		char t[CM_ADDRSTR_LEN];

		memcpy(t, list[i], sizeof(t));
		memmove(list[1], list[0], (size_t)i * sizeof(list[0]));
		memcpy(list[0], t, sizeof(t));
	}
}

/*
 * Connects to the remote rdcp: to o->rdma_addr when given; else to the
 * first of its RDMA addresses rdma_cm routes to (the one ssh used first),
 * else, when the transport allows, over TCP to the address ssh used, then
 * the others (AUTO after a lost RDMA session, cm_addr.rdma_lost: also when
 * the RDMA connect finds no path). 0 with *c, or -errno with why.
 */
static int connect_boot(const struct xfer_opts *o, struct boot *b,
			struct cm_conn **c, char *why, size_t whysz)
{
	struct cm_geom geom = client_geom(o);
	struct cm_timeouts to = session_timeouts(o);
	struct cm_addr a = o->link.addr;
	const char *host =
		o->ssh.rsh_host ? o->ssh.rsh_host : "the remote host";
	char tried[256] = "", r[200] = "";
	bool connect_failed = false;
	int rc = -EHOSTUNREACH;

	a.port = b->port;
	if (o->ssh.rdma_addr) {
		a.host = o->ssh.rdma_addr;
		if (a.transport == CM_TRANSPORT_AUTO)
			a.transport = CM_TRANSPORT_RDMA;
		rc = cm_connect(&a, &geom, &to, c);
		if (rc)
			snprintf(why, whysz, "cannot connect to --rdma-addr %s",
				 o->ssh.rdma_addr);
		return rc;
	}
	if (o->link.addr.transport != CM_TRANSPORT_TCP && b->rdma) {
		via_first(b->rdma_addrs, b->nrdma, b->via);
		for (int i = 0; i < b->nrdma; i++) {
			a.host = b->rdma_addrs[i];
			a.transport = CM_TRANSPORT_RDMA;
			if (cm_rdma_routes(&a, to.resolve_ms, r, sizeof(r))) {
				log_info("%s: no RDMA route to %s: %s", host,
					 a.host, r);
				continue;
			}
			log_info("%s: data over RDMA to %s", host, a.host);
			rc = cm_connect(&a, &geom, &to, c);
			/* After a lost RDMA session: its path may be gone. */
			if (!rc || !o->link.addr.rdma_lost ||
			    o->link.addr.transport != CM_TRANSPORT_AUTO ||
			    !cm_rdma_no_path(rc))
				return rc;
			snprintf(r, sizeof(r),
				 "the RDMA connect to %s failed: %s", a.host,
				 strerror(-rc));
			connect_failed = true;
			break;
		}
	}
	if (o->link.addr.transport == CM_TRANSPORT_RDMA) {
		for (int i = 0; i < b->nrdma; i++)
			snprintf(tried + strlen(tried),
				 sizeof(tried) - strlen(tried), "%s%s",
				 i ? ", " : "", b->rdma_addrs[i]);
		snprintf(why, whysz,
			 !b->rdma   ? "rdcp on '%s' cannot listen for RDMA (no "
				      "RDMA device there?)%s"
			 : !b->nrdma ? "rdcp on '%s' names no RDMA address%s"
				     : "rdma_cm routes to none of the RDMA "
				       "addresses of '%s' (%s): name one with "
				       "--rdma-addr",
			 host, tried);
		return -EHOSTUNREACH;
	}
	if (!b->tcp) {
		snprintf(why, whysz, "rdcp on '%s' does not listen for TCP",
			 host);
		return -EHOSTUNREACH;
	}
	if (o->link.addr.transport == CM_TRANSPORT_AUTO &&
	    o->link.addr.rdma_lost)
		log_warn("rdma path to %s gone (%s): going on over tcp", host,
			 connect_failed ? r
			 : b->rdma	? "rdma_cm routes to none of its RDMA "
					  "addresses"
					: "it has no RDMA device now");
	else if (o->link.addr.transport == CM_TRANSPORT_AUTO)
		log_warn("using TCP to %s: %s", host,
			 b->rdma ? "rdma_cm routes to none of its RDMA "
				   "addresses"
				 : "it has no RDMA device");
	a.transport = CM_TRANSPORT_TCP;
	if (b->via[0]) {
		a.host = b->via;
		rc = cm_connect(&a, &geom, &to, c);
		if (!rc)
			return 0;
	}
	for (int i = 0; i < b->ntcp; i++) {
		if (!strcmp(b->tcp_addrs[i], b->via))
			continue;
		a.host = b->tcp_addrs[i];
		rc = cm_connect(&a, &geom, &to, c);
		if (!rc)
			return 0;
	}
	snprintf(why, whysz, "cannot connect to rdcp on '%s' over TCP", host);
	return rc;
}

enum xfer_fail remote_copy(const struct xfer_opts *o, struct xfer_stats *st)
{
	struct xfer_opts ko = *o;
	char line[BOOT_LINE_MAX], why[400];
	struct rsh r = {
		.pid = -1, .status = -1, .in = -1, .out = -1, .err = -1
	};
	struct cm_conn *c = NULL;
	enum xfer_fail v = XFER_OK;
	struct boot b;
	int rc, status;

	if (o->ssh.boot_line && strlen(o->ssh.boot_line) >= sizeof(line))
		v = fail(st, XFER_FAIL_REMOTE_START,
			 "the bootstrap line for '%s' is longer than %d bytes",
			 o->ssh.rsh_host, BOOT_LINE_MAX);
	else if (o->ssh.boot_line)
		snprintf(line, sizeof(line), "%s", o->ssh.boot_line);
	else
		v = start_remote(o, &r, line, st);
	if (v != XFER_OK)
		goto out;
	if (boot_parse(line, &b, why, sizeof(why))) {
		v = fail(st, XFER_FAIL_REMOTE_START,
			 "rdcp on '%s' answered with a bad bootstrap line (%s)",
			 o->ssh.rsh_host, why);
		goto out;
	}
	if (b.proto != CM_VERSION) {
		v = fail(st, XFER_FAIL_REMOTE_START,
			 "rdcp on '%s' is release %s (protocol %u), this one "
			 "is %s (protocol %u): install the same version on "
			 "both hosts",
			 o->ssh.rsh_host, b.version, b.proto, RDCP_VERSION,
			 CM_VERSION);
		goto out;
	}
	if (strcmp(b.version, RDCP_VERSION))
		log_info("rdcp on '%s' is release %s, this one %s (same "
			 "protocol %u)",
			 o->ssh.rsh_host, b.version, RDCP_VERSION, CM_VERSION);
	rc = connect_boot(o, &b, &c, why, sizeof(why));
	if (rc) {
		v = session_connect_fail(rc);
		snprintf(st->error, sizeof(st->error), "%s", why);
		log_err("%s", why);
		goto out;
	}
	ko.link.key = b.key;
	v = client_run(&ko, c, st, NULL);
	/* The remote stops when ssh goes: say so, not what it told us. */
	if (v != XFER_OK && !(o->link.cancel && *o->link.cancel) && r.pid > 0 &&
	    rsh_ended(&r, &status)) {
		snprintf(st->error, sizeof(st->error),
			 "the ssh connection to '%s' ended mid-copy (status "
			 "%d): the rdcp there stopped",
			 o->ssh.rsh_host, status);
		log_err("%s", st->error);
		v = XFER_FAIL_PEER_LOST;
	}
out:
	OPENSSL_cleanse(&b, sizeof(b));
	OPENSSL_cleanse(line, sizeof(line));
	if (r.pid > 0 || r.status >= 0) {
		status = rsh_finish(&r, REMOTE_END_MS);
		if (status && v == XFER_OK)
			log_warn("%s: the remote rdcp ended with status %d",
				 o->ssh.rsh_host, status);
	} else if (!o->ssh.boot_line) {
		rsh_finish(&r, 0);
	}
	return v;
}

/* Relays the far rdcp's stdout to ours until it ends; a cancel closes its
 * stdin (it stops as on SIGTERM). */
static void relay_out(const struct xfer_opts *o, struct rsh *s)
{
	char buf[4096];

	for (;;) {
		struct pollfd pfd = { .fd = s->out, .events = POLLIN };
		ssize_t n;

		if (o->link.cancel && *o->link.cancel && s->in >= 0) {
			close(s->in);
			s->in = -1;
		}
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		n = read(s->out, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || write(STDOUT_FILENO, buf, (size_t)n) != n)
			return;
	}
}

int xfer_copy_between(const struct xfer_opts *o, const char *dest_host,
		      const char *const *far_argv)
{
	struct xfer_opts od = *o;
	struct xfer_stats st = { 0 };
	char line[BOOT_LINE_MAX + 1], why[700];
	struct rsh d, s;
	int status;

	od.ssh.rsh_host = dest_host;
	if (start_remote(&od, &d, line, &st) != XFER_OK)
		return o->link.cancel && *o->link.cancel ? -2 : -1;
	if (rsh_start(&s, o->ssh.rsh, o->ssh.rsh_host, o->ssh.rdcp_path,
		      far_argv, o->ssh.batch, o->link.connect_timeout_ms / 1000,
		      true)) {
		rsh_finish(&d, 0);
		return -1;
	}
	strcat(line, "\n");
	if (write(s.in, line, strlen(line)) != (ssize_t)strlen(line))
		log_debug("%s: its stdin closed early", o->ssh.rsh_host);
	OPENSSL_cleanse(line, sizeof(line));
	relay_out(o, &s);
	status = rsh_finish(&s, REMOTE_END_MS);
	rsh_finish(&d, REMOTE_END_MS);
	if (o->link.cancel && *o->link.cancel) {
		log_err("interrupted");
		return -2;
	}
	if (status == 255 || status == 127 || status == 126 || status < 0) {
		rsh_explain(&s, status, o->ssh.rdcp_path, why, sizeof(why));
		log_err("%s", why);
		return -1;
	}
	return status;
}

int xfer_check_remote(const struct xfer_opts *o,
		      void (*out)(void *arg, enum cm_check_kind kind,
				  const char *text),
		      void *arg)
{
	struct cm_timeouts to = session_timeouts(o);
	struct xfer_stats st = { 0 };
	char line[BOOT_LINE_MAX], why[400], text[700];
	const char *chosen = NULL;
	struct cm_addr a = o->link.addr;
	struct rsh r;
	struct boot b;
	int problems = 0;

	if (start_remote(o, &r, line, &st) != XFER_OK) {
		out(arg, CM_CHECK_PROBLEM, st.error);
		return 1;
	}
	if (boot_parse(line, &b, why, sizeof(why)) || b.proto != CM_VERSION) {
		snprintf(text, sizeof(text),
			 "rdcp on '%s' is not this version (%s %u): install "
			 "the same version on both hosts",
			 o->ssh.rsh_host, b.version, b.proto);
		out(arg, CM_CHECK_PROBLEM, text);
		rsh_finish(&r, REMOTE_END_MS);
		return 1;
	}
	snprintf(text, sizeof(text),
		 "rdcp %s started on '%s' over ssh, listening for %s%s%s on "
		 "port %u",
		 b.version, o->ssh.rsh_host, b.rdma ? "RDMA" : "",
		 b.rdma && b.tcp ? " and " : "", b.tcp ? "TCP" : "", b.port);
	out(arg, CM_CHECK_OK, text);
	snprintf(text, sizeof(text), "ssh reached it at %s",
		 b.via[0] ? b.via : "an address it did not say");
	out(arg, CM_CHECK_INFO, text);
	via_first(b.rdma_addrs, b.nrdma, b.via);
	for (int i = 0; b.rdma && i < b.nrdma && !o->ssh.rdma_addr; i++) {
		a.host = b.rdma_addrs[i];
		a.port = b.port;
		a.transport = CM_TRANSPORT_RDMA;
		if (cm_rdma_routes(&a, to.resolve_ms, why, sizeof(why))) {
			snprintf(text, sizeof(text),
				 "its RDMA address %s: no route (%s)", a.host,
				 why);
			out(arg, CM_CHECK_INFO, text);
			continue;
		}
		snprintf(text, sizeof(text),
			 "its RDMA address %s: rdma_cm routes there; the data "
			 "goes over RDMA to it",
			 a.host);
		out(arg, CM_CHECK_OK, text);
		chosen = a.host;
		break;
	}
	if (o->ssh.rdma_addr) {
		snprintf(text, sizeof(text),
			 "--rdma-addr %s: the data goes there, as named",
			 o->ssh.rdma_addr);
		out(arg, CM_CHECK_INFO, text);
	} else if (!chosen) {
		snprintf(text, sizeof(text),
			 "no RDMA route to '%s' (%s): the data would go over "
			 "TCP%s; set up RDMA there, or name an address with "
			 "--rdma-addr",
			 o->ssh.rsh_host,
			 !b.rdma    ? "it has no RDMA device"
			 : !b.nrdma ? "it names no RDMA address"
				    : "rdma_cm routes to none of its addresses",
			 o->link.addr.transport == CM_TRANSPORT_RDMA
				 ? " if --transport allowed it"
				 : "");
		out(arg, CM_CHECK_PROBLEM, text);
		problems++;
	}
	OPENSSL_cleanse(&b, sizeof(b));
	OPENSSL_cleanse(line, sizeof(line));
	rsh_finish(&r, REMOTE_END_MS);
	return problems;
}
