/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A command on another host through the remote shell (rsh.h): spawned
 * with posix_spawn (no fork of a threaded process), its three pipes kept
 * here, its stderr relayed by a thread, its end waited for with a bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transfer/client/rsh.h"
#include "util/clock.h"
#include "util/log.h"

extern char **environ;

/* Appends s to the buffer at *p (end at end) single-quoted for sh. */
static int put_quoted(char **p, char *end, const char *s)
{
	if (*p >= end - 3)
		return -E2BIG;
	*(*p)++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			if (end - *p < 6)
				return -E2BIG;
			memcpy(*p, "'\\''", 4);
			*p += 4;
		} else {
			if (end - *p < 3)
				return -E2BIG;
			*(*p)++ = *s;
		}
	}
	*(*p)++ = '\'';
	**p = '\0';
	return 0;
}

/* The remote command line: rdcp_path as it is, then argv quoted. */
static char *remote_command(const char *rdcp_path, const char *const *argv)
{
	size_t len = strlen(rdcp_path) + 2;
	char *cmd, *p, *end;

	for (size_t i = 0; argv[i]; i++)
		len += 4 * strlen(argv[i]) + 3;
	cmd = malloc(len);
	if (!cmd)
		return NULL;
	p = cmd + snprintf(cmd, len, "%s", rdcp_path);
	end = cmd + len;
	for (size_t i = 0; argv[i]; i++) {
		*p++ = ' ';
		if (put_quoted(&p, end, argv[i])) {
			free(cmd);
			return NULL;
		}
	}
	return cmd;
}

/* Whether the remote shell command is OpenSSH's ssh (its first word). */
static bool is_ssh(const char *rsh)
{
	size_t n = strcspn(rsh, " \t");
	const char *slash = memrchr(rsh, '/', n);
	const char *base = slash ? slash + 1 : rsh;

	return (size_t)(rsh + n - base) == 3 && !strncmp(base, "ssh", 3);
}

static void *relay_main(void *arg)
{
	struct rsh *r = arg;
	char buf[4096], line[512];
	size_t nline = 0;

	for (;;) {
		struct pollfd pfd = { .fd = r->err, .events = POLLIN };
		ssize_t n;
		bool stop;

		pthread_mutex_lock(&r->lock);
		stop = r->stop;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			break;
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(r->err, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			pthread_mutex_lock(&r->lock);
			r->drained = true;
			pthread_mutex_unlock(&r->lock);
			break;
		}
		if (r->raw && write(STDERR_FILENO, buf, (size_t)n) < 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n' && buf[i] != '\r') {
				if (nline < sizeof(line) - 1)
					line[nline++] = buf[i];
				continue;
			}
			if (!nline)
				continue;
			line[nline] = '\0';
			if (!r->raw)
				fprintf(stderr, "%s: %s\n", r->host, line);
			pthread_mutex_lock(&r->lock);
			if (!r->first[0])
				memcpy(r->first, line, nline + 1);
			memcpy(r->last, line, nline + 1);
			pthread_mutex_unlock(&r->lock);
			nline = 0;
		}
	}
	return NULL;
}

int rsh_start(struct rsh *r, const char *rsh, const char *host,
	      const char *rdcp_path, const char *const *argv, bool batch,
	      int connect_timeout_s, bool raw)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	char script[4096], cto[48];
	posix_spawn_file_actions_t fa;
	char *cmd = NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	r->pid = -1;
	r->status = -1;
	r->in = r->out = r->err = -1;
	r->raw = raw;
	snprintf(r->host, sizeof(r->host), "%s", host);
	pthread_mutex_init(&r->lock, NULL);
	snprintf(cto, sizeof(cto), "ConnectTimeout=%d",
		 connect_timeout_s > 0 ? connect_timeout_s : 10);
	/*
	 * "$@" after the user's words: options, host, remote command; exec,
	 * so that ssh is our child (its end is the remote's).
	 */
	if ((size_t)snprintf(script, sizeof(script), "exec %s \"$@\"", rsh) >=
	    sizeof(script)) {
		log_err("the remote shell command is too long");
		return -E2BIG;
	}
	cmd = remote_command(rdcp_path, argv);
	if (!cmd) {
		log_err("the remote command is too long");
		return -E2BIG;
	}
	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) ||
	    pipe2(perr, O_CLOEXEC)) {
		rc = -errno;
		log_err("cannot make pipes for ssh: %s", strerror(errno));
		goto out;
	}
	{
		const char *args[16];
		int n = 0;

		args[n++] = "/bin/sh";
		args[n++] = "-c";
		args[n++] = script;
		args[n++] = "rdcp-rsh"; /* $0 */
		if (is_ssh(rsh)) {
			args[n++] = "-T";
			if (batch) {
				args[n++] = "-o";
				args[n++] = "BatchMode=yes";
			}
			args[n++] = "-o";
			args[n++] = cto;
		}
		args[n++] = host;
		args[n++] = cmd;
		args[n] = NULL;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, pin[0], STDIN_FILENO);
		posix_spawn_file_actions_adddup2(&fa, pout[1], STDOUT_FILENO);
		posix_spawn_file_actions_adddup2(&fa, perr[1], STDERR_FILENO);
		rc = posix_spawn(&r->pid, "/bin/sh", &fa, NULL,
				 (char *const *)args, environ);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (rc) {
		r->pid = -1;
		log_err("cannot run the remote shell '%s': %s", rsh,
			strerror(rc));
		rc = -rc;
		goto out;
	}
	log_debug("started %s %s %s", rsh, host, cmd);
	r->in = pin[1];
	r->out = pout[0];
	r->err = perr[0];
	pin[1] = pout[0] = perr[0] = -1;
	rc = pthread_create(&r->relay, NULL, relay_main, r);
	r->relaying = rc == 0;
	if (rc)
		log_warn("cannot relay the remote's messages: %s",
			 strerror(rc));
	rc = 0;
out:
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	free(cmd);
	return rc;
}

int rsh_read_line(struct rsh *r, uint64_t deadline_ms,
		  bool (*want)(const char *line), char *line, size_t len)
{
	for (;;) {
		char *nl = memchr(r->buf, '\n', r->nbuf);
		struct pollfd pfd = { .fd = r->out, .events = POLLIN };
		uint64_t now = clock_now_ms();
		ssize_t n;

		if (nl) {
			size_t one = (size_t)(nl - r->buf);

			*nl = '\0';
			/*
			 * Cut to fit: enough to tell whether it is ours, and
			 * ours must have fitted whole, never be truncated.
			 */
			snprintf(line, len, "%s", r->buf);
			r->nbuf -= one + 1;
			memmove(r->buf, nl + 1, r->nbuf);
			/* What moved may have held the key: not left behind. */
			explicit_bzero(r->buf + r->nbuf, one + 1);
			if (want(line))
				return one < len ? 0 : -EMSGSIZE;
			log_debug("%s said on stdout: %.200s", r->host, line);
			continue;
		}
		if (r->nbuf == sizeof(r->buf)) {
			/* No newline in the buffer: longer than it. */
			snprintf(line, len, "%.*s", (int)r->nbuf, r->buf);
			explicit_bzero(r->buf, r->nbuf);
			r->nbuf = 0;
			if (want(line))
				return -EMSGSIZE;
			/* Someone else's; its rest is skipped as a line. */
		}
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)(deadline_ms - now));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		n = read(r->out, r->buf + r->nbuf, sizeof(r->buf) - r->nbuf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		r->nbuf += (size_t)n;
	}
}

/* waitpid for up to ms; the status, or -1 while it still runs. */
static int reap(pid_t pid, int ms)
{
	uint64_t until = clock_now_ms() + (uint64_t)ms;
	int st;

	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			return WIFEXITED(st)	? WEXITSTATUS(st)
			       : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
						 : -1;
		if (w < 0 && errno != EINTR)
			return -2;
		if (clock_now_ms() >= until)
			return -1;
		usleep(10000);
	}
}

bool rsh_ended(struct rsh *r, int *status)
{
	if (r->pid <= 0)
		return false;
	*status = reap(r->pid, 0);
	if (*status == -1)
		return false;
	r->pid = -1;
	r->status = *status;
	return true;
}

int rsh_finish(struct rsh *r, int timeout_ms)
{
	int status = r->status;

	if (r->in >= 0)
		close(r->in);
	r->in = -1;
	if (r->pid > 0) {
		status = reap(r->pid, timeout_ms);
		if (status == -1) {
			log_warn("%s: the remote shell did not end within %d "
				 "s after the copy: ending it",
				 r->host, timeout_ms / 1000);
			kill(r->pid, SIGTERM);
			status = reap(r->pid, 2000);
		}
		if (status == -1) {
			kill(r->pid, SIGKILL);
			status = reap(r->pid, 2000);
		}
		r->pid = -1;
	}
	if (r->relaying) {
		/*
		 * What is left on its stderr is read first, up to its end (1 s
		 * at most: a process it left behind may hold it open). Not a
		 * fixed wait: stderr's end is readable too, so polling it
		 * would take the whole second after every copy.
		 */
		uint64_t until = clock_now_ms() + 1000;
		bool drained = false;

		while (!drained && clock_now_ms() < until) {
			pthread_mutex_lock(&r->lock);
			drained = r->drained;
			pthread_mutex_unlock(&r->lock);
			if (!drained)
				usleep(2000);
		}
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->relay, NULL);
		r->relaying = false;
	}
	if (r->out >= 0)
		close(r->out);
	if (r->err >= 0)
		close(r->err);
	r->out = r->err = -1;
	explicit_bzero(r->buf, sizeof(r->buf));
	r->nbuf = 0;
	return status < 0 ? -1 : status;
}

void rsh_last_line(struct rsh *r, char *out, size_t len)
{
	pthread_mutex_lock(&r->lock);
	snprintf(out, len, "%s", r->last);
	pthread_mutex_unlock(&r->lock);
}

bool rsh_may_heal(struct rsh *r, int status)
{
	/* What OpenSSH says when the host, or its sshd, is not there yet. */
	static const char *const passing[] = {
		"Connection refused", "Connection timed out",
		"Connection reset",   "Connection closed",
		"No route to host",   "Network is unreachable",
		"Temporary failure",  "kex_exchange_identification",
		"Broken pipe",	      "Operation timed out",
	};
	char first[512], last[512];
	bool heal = false;

	if (status != 255) /* killed by a signal: sshd or the host going down */
		return status >= 128;
	pthread_mutex_lock(&r->lock);
	memcpy(first, r->first, sizeof(first));
	memcpy(last, r->last, sizeof(last));
	pthread_mutex_unlock(&r->lock);
	for (size_t i = 0; i < sizeof(passing) / sizeof(passing[0]); i++)
		heal |= strstr(first, passing[i]) || strstr(last, passing[i]);
	return heal;
}

void rsh_explain(struct rsh *r, int status, const char *rdcp_path, char *why,
		 size_t whysz)
{
	char last[512], said[600] = "";

	/* A usage error's first line says what; the last, "Try --help". */
	pthread_mutex_lock(&r->lock);
	snprintf(last, sizeof(last), "%s", status == 2 ? r->first : r->last);
	pthread_mutex_unlock(&r->lock);
	if (last[0])
		snprintf(said, sizeof(said), " (it said: %s)", last);
	if (status == 255)
		snprintf(why, whysz,
			 "ssh to '%s' failed%s: check that 'ssh %s' works "
			 "without a prompt (keys, known_hosts), or give the "
			 "ssh command line with -e",
			 r->host, said, r->host);
	else if (status == 127)
		snprintf(why, whysz,
			 "'%s' not found on '%s'%s: install rdcp there (the "
			 "same version as here), or name it with --rdcp-path",
			 rdcp_path, r->host, said);
	else if (status == 126)
		snprintf(why, whysz, "'%s' on '%s' cannot be run%s", rdcp_path,
			 r->host, said);
	else if (status == 2)
		snprintf(why, whysz,
			 "the rdcp on '%s' does not take --server%s: it is "
			 "older than this one (%s); install the same version "
			 "there",
			 r->host, said, RDCP_VERSION);
	else if (status >= 128)
		snprintf(why, whysz,
			 "the remote shell to '%s' was killed by signal %d%s",
			 r->host, status - 128, said);
	else
		snprintf(why, whysz,
			 "rdcp on '%s' ended before it was ready (status "
			 "%d)%s",
			 r->host, status, said);
}
