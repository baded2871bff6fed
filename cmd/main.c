/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's main(): the command line parsed (cmd/args.c), then one of
 * --keygen, --check (cmd/check.c), a receiver or a copy run with the key,
 * signals and output callbacks (cmd/output.c) added, and the engine's
 * verdict mapped to an exit code.
 * With cmd/args.c, the only code that touches argv, prints usage or calls
 * exit().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cmd/args.h"
#include "cmd/exit_codes.h"
#include "cmd/json_out.h"
#include "cmd/manifest.h"
#include "cmd/retry.h"
#include "cmd/run.h"
#include "transfer/xfer.h"
#include "util/clock.h"
#include "util/key.h"
#include "util/log.h"
#include "util/path.h"

static volatile sig_atomic_t cancel;
static const struct retry *run_retry; /* the attempts, for attempt_line */
/* A receiver's first SIGTERM: take no new sessions (xfer_opts.stop). */
static volatile sig_atomic_t stop;
/*
 * A receiver's SIGHUPs: read the client keys and modules again (reload,
 * which the receiver clears) and reopen --audit-log (hup, counted).
 */
static volatile sig_atomic_t reload, hup;

static void on_signal(int sig)
{
	cancel = sig;
}

/*
 * A receiver: SIGTERM lets the running sessions finish, for up to
 * XFER_STOP_GRACE_S (then SIGALRM ends them, each client told that the
 * receiver is going away); SIGINT, or SIGTERM again, ends them at once.
 */
static void on_receiver_signal(int sig)
{
	if (sig == SIGHUP) {
		reload = 1;
		hup++;
		return;
	}
	if (sig == SIGTERM && !stop) {
		stop = 1;
		alarm(XFER_STOP_GRACE_S);
		return;
	}
	cancel = sig == SIGALRM ? SIGTERM : sig;
}

static void set_signals(bool receiver, bool listener)
{
	struct sigaction sa = { .sa_handler = receiver ? on_receiver_signal
						       : on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (receiver)
		sigaction(SIGALRM, &sa, NULL);
	/* --listen only: rdcp --server ends when its ssh hangs up */
	if (listener)
		sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int exit_code(enum xfer_fail f)
{
	return rdcp_exit_code(f);
}

/*
 * Creates FILE's directories if missing (0700), then the key (client
 * name's, when not NULL).
 */
static int keygen(const char *path, const char *name)
{
	char dir[4096];
	char *slash;
	int rc;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		/* 0700: ~/.config/rdcp may not exist yet */
		rc = path_mkdirs_local(dir, 0700);
		if (rc) {
			log_err("cannot create '%s': %s", dir, strerror(-rc));
			return RDCP_EXIT_LOCAL_IO;
		}
	}
	if (key_generate(path, name))
		return RDCP_EXIT_LOCAL_IO;
	if (name)
		fprintf(stderr,
			"rdcp: wrote a new key for client '%s' to '%s'; copy "
			"it (mode 0600) to the client as its key file, and to "
			"the receiver as /etc/rdcp/clients/%s.key\n",
			name, path, name);
	else
		fprintf(stderr,
			"rdcp: wrote a new key to '%s'; copy it (mode 0600) to "
			"the peer, e.g. as /etc/rdcp/key\n",
			path);
	return RDCP_EXIT_OK;
}

/* Loads the key, or explains why there is none. 0 or an exit code. */
static int load_key(struct run *run)
{
	int rc;

	if (run->a->server || run->o.ssh.rsh || run->a->boot_host)
		return 0; /* a one-time key, made by rdcp --server */
	if (run->a->no_auth) {
		if (run->a->listen)
			log_warn("authentication is OFF (--no-auth): any host "
				 "that reaches port %u may write into '%s'; "
				 "use this on isolated fabrics only",
				 run->o.link.addr.port,
				 run->o.serve.root ? run->o.serve.root : ".");
		return 0;
	}
	/* With named clients a receiver may go without a site key. */
	rc = args_load_key(run->a, run->key, run->key_name, "the peer",
			   run->a->listen && run->o.serve.clients_dir);
	if (rc == -ENOENT) {
		log_note("no site key: only the named clients of '%s' may "
			 "connect",
			 run->o.serve.clients_dir);
		return 0;
	}
	if (!rc)
		run->o.link.key = run->key;
	/* A receiver's own key names no client: that is the site key. */
	if (!rc && run->key_name[0] && !run->a->listen)
		run->o.link.client_name = run->key_name;
	return rc;
}

/*
 * --files-from FILE: the stream the walk reads, or with --retry the one
 * each attempt reads it again from. 0 or an exit code.
 */
static int open_list(struct run *run)
{
	const char *f = run->a->files_from;

	if (!f)
		return 0;
	run->list_file = strcmp(f, "-") ? fopen(f, "re") : stdin;
	if (!run->list_file) {
		log_err("cannot open '%s': %s", f, strerror(errno));
		return RDCP_EXIT_LOCAL_IO;
	}
	if (!run->a->retry) {
		run->o.copy.files_from = run->list_file;
		return 0;
	}
	return retry_list_init(&run->list, run->list_file,
			       run->o.copy.from0 ? '\0' : '\n')
		       ? RDCP_EXIT_LOCAL_IO
							   : 0;
}

/* The attempts after the first. */
static unsigned int retries(const struct run *run)
{
	return run->retry.attempt > 1 ? run->retry.attempt - 1 : 0;
}

/*
 * One attempt: a whole session, from connect to its verdict, the list of
 * --files-from read from its start. Whatever an attempt needs of its own
 * (a connection, a bootstrap) goes here, so that each retry has it anew.
 */
static enum xfer_fail copy_once(struct run *run, struct xfer_stats *st)
{
	enum xfer_fail v;

	if (run->list_file && run->retry.max) {
		run->o.copy.files_from = retry_list_stream(&run->list);
		if (!run->o.copy.files_from) {
			memset(st, 0, sizeof(*st));
			return XFER_FAIL_LOCAL_IO;
		}
	}
	run->progress_t0 = 0;
	run->progress_next = 0;
	v = xfer_copy(&run->o, st);
	output_clear(run);
	return v;
}

/*
 * The line that ends a failed attempt: its errors (held back while it ran,
 * log_hold) and what comes next, one line (issue #23: each attempt one
 * line). A last attempt with several errors shows them as they were, then
 * the verdict on its own line.
 */
static void attempt_line(bool again, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static char attempt_why[1024]; /* the attempt's first error, or its class */
static unsigned int attempt_errors;

static void attempt_line(bool again, const char *fmt, ...)
{
	char next[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(next, sizeof(next), fmt, ap);
	va_end(ap);
	if (again)
		log_warn("attempt %u of %u failed: %s%s%.0u%s %s",
			 run_retry->attempt, run_retry->max + 1, attempt_why,
			 attempt_errors > 1 ? " (and " : "",
			 attempt_errors > 1 ? attempt_errors - 1 : 0,
			 attempt_errors > 1 ? " more errors)" : "", next);
	else if (attempt_errors > 1)
		log_warn("attempt %u of %u failed: %s", run_retry->attempt,
			 run_retry->max + 1, next);
	else
		log_err("%s; attempt %u of %u failed: %s", attempt_why,
			run_retry->attempt, run_retry->max + 1, next);
}

/*
 * After an attempt failed with v: whether to try again, and after how
 * long, said in one line with the attempt's error (attempt_line). The wait
 * doubles with each attempt in a row that could not connect; one that
 * connected (the peer was back) starts it over.
 */
static bool try_again(struct run *run, enum xfer_fail v,
		      const struct xfer_stats *st, unsigned int *wait)
{
	struct retry *rt = &run->retry;
	bool again = v != XFER_FAIL_CANCELED && retry_is_transient(rt, v) &&
		     rt->attempt <= rt->max;
	uint32_t rnd;

	run_retry = rt;
	attempt_errors = log_held(attempt_why, sizeof(attempt_why));
	/*
	 * A cut, or a last attempt with several errors: shown as they were;
	 * with -v, those of every attempt.
	 */
	log_release(
		(!again && (v == XFER_FAIL_CANCELED || attempt_errors > 1)) ||
		log_enabled(LOG_INFO));
	if (!attempt_why[0])
		snprintf(attempt_why, sizeof(attempt_why), "%s",
			 st->error[0] ? st->error : xfer_fail_name(v));
	if (v == XFER_FAIL_CANCELED)
		return false;
	if (!retry_is_transient(rt, v)) {
		attempt_line(false,
			     "not retrying: %s (exit %d) is not a lost peer, "
			     "host or link that another attempt could get past",
			     xfer_fail_name(v), exit_code(v));
		return false;
	}
	if (!again) {
		attempt_line(false, "giving up (--retry %u)", rt->max);
		return false;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = UINT32_MAX / 2;
	rt->unconnected = st->transport[0] ? 1 : rt->unconnected + 1;
	*wait = retry_wait_ms(rt, rt->unconnected, rnd);
	attempt_line(true, "(%s, exit %d): trying again in %.1f s, resuming",
		     xfer_fail_name(v), exit_code(v), *wait / 1000.0);
	return true;
}

/*
 * The copy: one attempt, or with --retry as many as are allowed and may
 * help (retry.h). Returns the last attempt's verdict; st holds the
 * numbers of the last attempt that had a session (the files an earlier
 * attempt copied and this one kept counted as copied), its seconds those
 * of all attempts and the waits between them.
 */
static enum xfer_fail copy(struct run *run, struct xfer_stats *st)
{
	struct retry *rt = &run->retry;
	struct xfer_stats last = { 0 };
	double t0 = clock_now_s();
	unsigned int wait = 0;
	enum xfer_fail v;
	bool again;

	for (;;) {
		retry_attempt_begin(rt);
		if (rt->max) /* said with the attempt's verdict: one line */
			log_hold();
		v = copy_once(run, st);
		if (!rt->max)
			return v;
		if (v != XFER_OK && cancel)
			v = XFER_FAIL_CANCELED;
		st->files_skipped -= rt->kept_ours < st->files_skipped
					     ? rt->kept_ours
					     : st->files_skipped;
		if (st->transport[0])
			last = *st;
		/* The next attempt lands where this one did (cp -r's DEST). */
		if (st->dest_named)
			run->o.copy.dest_named = true;
		if (v == XFER_OK) {
			log_release(true);
			break;
		}
		rt->start_may_heal = st->start_may_heal;
		retry_attempt_end(rt, st->transport, v, st->cause);
		/* --transport auto: the next may go over TCP, saying why. */
		run->o.link.addr.rdma_lost = rt->rdma_lost;
		again = try_again(run, v, st, &wait);
		if (run->a->json)
			json_attempt(stdout, -1, rt->attempt, v, exit_code(v),
				     st->error[0] ? st->error : attempt_why,
				     st->transport, again, wait);
		if (!again)
			break;
		if (retry_sleep(wait, &cancel)) {
			v = XFER_FAIL_CANCELED;
			snprintf(st->error, sizeof(st->error),
				 "interrupted while waiting to try again "
				 "(what was copied stays for --resume)");
			log_err("%s", st->error);
			break;
		}
	}
	if (!st->transport[0] && last.transport[0]) {
		/* No session this time: the last one's numbers, this error. */
		memcpy(last.error, st->error, sizeof(last.error));
		*st = last;
	}
	st->seconds = clock_now_s() - t0;
	return v;
}

/* rdcp --server: the bootstrap line goes to the client, on stdout. */
static void on_boot(void *arg, const char *line)
{
	(void)arg;
	fputs(line, stdout);
	fflush(stdout);
}

/*
 * rdcp --server: stdin is ssh's; its end of file means the client or its
 * ssh is gone, and so is the copy: stop as SIGTERM would.
 */
static void *watch_stdin(void *arg)
{
	char buf[256];
	ssize_t n;

	(void)arg;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0)
		if (n < 0 && errno != EINTR)
			break;
	log_debug("stdin closed: the client is gone");
	cancel = SIGTERM;
	return NULL;
}

/* rdcp --server: serve the client that started us over ssh. */
static enum xfer_fail serve_ssh(struct run *run)
{
	const char *conn = getenv("SSH_CONNECTION");
	char via[64] = "";
	pthread_t tid;

	/* "client_ip client_port server_ip server_port" */
	if (conn && sscanf(conn, "%*s %*s %63s", via) == 1)
		run->o.ssh.via = via;
	run->o.ssh.on_boot = on_boot;
	if (pthread_create(&tid, NULL, watch_stdin, NULL) == 0)
		pthread_detach(tid);
	return xfer_serve(&run->o);
}

/*
 * The far end of a copy between two remote hosts: the bootstrap line of
 * the receiving rdcp --server is stdin's first line; stdin's end after it
 * means the rdcp that started us is gone. 0 or an exit code.
 */
static char boot_line[4096];

static int read_boot(struct run *run)
{
	size_t n = 0;
	pthread_t tid;

	/* One byte at a time: nothing past the line may be taken. */
	while (n < sizeof(boot_line) - 1 &&
	       read(STDIN_FILENO, boot_line + n, 1) == 1 &&
	       boot_line[n] != '\n')
		n++;
	boot_line[n] = '\0';
	if (!n) {
		log_err("--boot-stdin: no bootstrap line on stdin");
		return RDCP_EXIT_REMOTE_START;
	}
	run->o.ssh.boot_line = boot_line;
	if (pthread_create(&tid, NULL, watch_stdin, NULL) == 0)
		pthread_detach(tid);
	return 0;
}

/*
 * rdcp h1:SRC h2:DEST: both ends over ssh (xfer_copy_between), the far
 * one's output relayed; its exit code is ours.
 */
static int copy_between(struct run *run)
{
	char **far = run->a->far;
	const char **argv;
	size_t n = 0;
	int status;

	while (far[n])
		n++;
	argv = calloc(n + 2, sizeof(*argv));
	if (!argv)
		return RDCP_EXIT_RESOURCE;
	/* Its stderr is ours: it shows progress where we would. */
	if (run->progress)
		argv[0] = "--progress";
	memcpy(argv + (run->progress ? 1 : 0), far, n * sizeof(*argv));
	status = xfer_copy_between(&run->o, run->a->split.dest_host,
				   (const char *const *)argv);
	free(argv);
	if (status >= 0)
		return status;
	if (status == -2) {
		/* Ctrl-C: ssh got it too; nothing failed (said) */
		if (run->a->json) {
			struct xfer_stats st = { 0 };

			json_error(stdout, XFER_FAIL_CANCELED,
				   RDCP_EXIT_CANCELED, "interrupted");
			json_summary(stdout, &st, XFER_FAIL_CANCELED,
				     RDCP_EXIT_CANCELED, false, 0);
			fflush(stdout);
		}
		return RDCP_EXIT_CANCELED;
	}
	/* The far end never ran: the events it would have written. */
	if (run->a->json) {
		struct xfer_stats st = { 0 };

		snprintf(st.error, sizeof(st.error), "%s", log_last_error());
		json_error(stdout, XFER_FAIL_REMOTE_START,
			   RDCP_EXIT_REMOTE_START, st.error);
		json_summary(stdout, &st, XFER_FAIL_REMOTE_START,
			     RDCP_EXIT_REMOTE_START, false, 0);
		fflush(stdout);
	}
	return RDCP_EXIT_REMOTE_START;
}

/* Whether ssh can ask the user (a terminal to prompt on). */
static bool have_tty(void)
{
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Everything after the command line: an exit code. */
static int run_cmd(struct run *run)
{
	const struct args *a = run->a;
	enum xfer_fail v;
	int rc;

	if (a->keygen)
		return keygen(a->keygen, a->keygen_name);
	run->o.ssh.batch = !have_tty();
	if (a->check)
		return check_run(run);
	rc = load_key(run);
	if (!rc && !a->listen)
		rc = open_list(run);
	if (!rc && a->boot_host)
		rc = read_boot(run);
	if (rc)
		return rc;
	set_signals(a->server || a->listen, a->listen);
	run->o.link.cancel = &cancel;
	run->o.serve.stop = &stop;
	run->o.serve.reload = &reload;
	run->o.serve.hup = &hup;
	if (a->server) {
		v = serve_ssh(run);
	} else if (a->listen) {
		v = xfer_serve(&run->o);
	} else {
		struct xfer_stats st;

		run->o.copy.on_file = output_file;
		run->o.copy.on_file_arg = run;
		run->progress = a->progress;
		run->progress_tty = isatty(STDERR_FILENO);
		if (!run->progress)
			run->progress = isatty(STDERR_FILENO) && !a->json &&
					log_get_level() < LOG_INFO;
		if (a->quiet || a->o.copy.dry_run)
			run->progress = false;
		run->o.copy.on_progress = output_progress;
		if (a->far)
			return copy_between(run);
		if (a->manifest &&
		    manifest_open(&run->man, a->manifest,
				  a->o.copy.csum == XFER_CSUM_SHA256))
			return RDCP_EXIT_LOCAL_IO;
		v = copy(run, &st);
		/* Written for a partial run too: it lists what arrived. */
		if (a->manifest && manifest_finish(&run->man) && v == XFER_OK)
			v = XFER_FAIL_LOCAL_IO;
		manifest_release(&run->man);
		if (a->json) {
			/* A session failure (not one of its files). */
			if (v != XFER_OK && !(st.files_failed && !st.error[0]))
				json_error(stdout, v, exit_code(v),
					   st.error[0] ? st.error
						       : log_last_error());
			json_summary(stdout, &st, v, exit_code(v),
				     a->o.copy.dry_run, retries(run));
		}
		fflush(stdout); /* --dry-run's lines before the summary */
		if (!a->quiet && st.transport[0])
			output_summary(&st, a->o.copy.dry_run,
				       a->o.copy.delete_extra, retries(run));
	}
	output_usage();
	return exit_code(v);
}

int main(int argc, char **argv)
{
	struct args a;
	struct run run = { .a = &a };
	int rc;

	args_parse(&a, argc, argv);
	run.o = a.o;
	log_set_level(a.quiet	       ? LOG_ERR
		      : a.verbose >= 2 ? LOG_DEBUG
		      : a.verbose      ? LOG_INFO
				       : LOG_WARN);
	retry_init(&run.retry, a.retry, a.retry_wait_ms);
	rc = run_cmd(&run);
	retry_list_release(&run.list);
	if (run.list_file && run.list_file != stdin)
		fclose(run.list_file);
	retry_release(&run.retry);
	explicit_bzero(boot_line, sizeof(boot_line)); /* a one-time key */
	args_release(&a);
	return rc;
}
