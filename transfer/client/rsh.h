/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: a command run on another host through the remote
 * shell (ssh), as scp and rsync start their other half. The command's
 * stdin is a pipe this process holds: when it closes (the copy is over,
 * or this process died) ssh passes the end of file on and the remote rdcp
 * exits. Its stdout is read here; its stderr is relayed to ours by a
 * thread, each line prefixed with the host, the last one kept for errors.
 */
#ifndef RDCP_RSH_H
#define RDCP_RSH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rsh {
	pid_t pid;	  /* -1 once reaped */
	int status;	  /* its status once reaped early (rsh_ended) */
	int in, out, err; /* our ends of its stdin, stdout, stderr */
	char host[256];
	bool raw;	/* relay stderr as it comes, without prefixes */
	bool relaying;	/* the relay thread runs */
	pthread_t relay;
	pthread_mutex_t lock;
	char first[512]; /* the first line on its stderr (under lock) */
	char last[512];	 /* the last one */
	char buf[4096]; /* stdout read ahead of the line asked for */
	size_t nbuf;
	bool stop; /* the relay thread is to stop (under lock) */
	bool drained; /* the relay thread read stderr's end (under lock) */
};

/*
 * Starts `RSH [OPTS] HOST 'ARGV0' 'ARGV1'...` through /bin/sh (so that
 * RSH may carry options, quotes and ~, as rsync's -e), where OPTS are
 * added for OpenSSH only (the first word of rsh is ssh): BatchMode=yes
 * unless batch is false, and ConnectTimeout. rdcp_path is the remote
 * program as the remote shell reads it (not quoted: "sudo rdcp" works),
 * argv its arguments (each quoted for the remote shell). raw: see struct.
 * 0, or -errno (logged).
 */
int rsh_start(struct rsh *r, const char *rsh, const char *host,
	      const char *rdcp_path, const char *const *argv, bool batch,
	      int connect_timeout_s, bool raw) __attribute__((warn_unused_result));

/*
 * Reads the remote's stdout up to a line that want() accepts (skipping
 * others: a login shell's chatter), until deadline_ms (clock_now_ms).
 * 0 with the line (no newline) in line; -EMSGSIZE when the line wanted
 * does not fit in len bytes with its NUL (never handed back truncated);
 * -EPIPE when the remote ended first (read its status with rsh_finish),
 * -ETIMEDOUT, or -errno.
 */
int rsh_read_line(struct rsh *r, uint64_t deadline_ms,
		  bool (*want)(const char *line), char *line, size_t len)
	__attribute__((warn_unused_result));

/*
 * Closes the remote's stdin (it sees the end of file and exits) and waits
 * up to timeout_ms for ssh to end, then ends it (SIGTERM, SIGKILL).
 * Returns its exit status, 128 + N for a signal N, or -1 if it could not
 * be had. Safe on a struct rsh that rsh_start() failed on.
 */
int rsh_finish(struct rsh *r, int timeout_ms);

/* The last line the remote wrote to stderr, "" if none. */
void rsh_last_line(struct rsh *r, char *out, size_t len);

/*
 * Whether the remote shell has ended already (without waiting): its
 * status then in *status, as rsh_finish returns it.
 */
bool rsh_ended(struct rsh *r, int *status);

/*
 * Whether a remote that ended with status (rsh_finish) before its
 * bootstrap line may start on another attempt: ssh could not reach the
 * host or lost it (connection refused, timed out, reset or closed, no
 * route, a name not resolved for now) or the remote shell was killed by a
 * signal. Not a host key or login refused, a missing or older rdcp there,
 * or anything not known to pass.
 */
bool rsh_may_heal(struct rsh *r, int status);

/*
 * Why a remote that ended with status (rsh_finish) before its bootstrap
 * line did so, as one line for the user into why.
 */
void rsh_explain(struct rsh *r, int status, const char *rdcp_path, char *why,
		 size_t whysz);

#endif
