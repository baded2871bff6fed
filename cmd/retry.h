/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --retry N and --retry-wait SECONDS: the policy around one copy attempt
 * (main.c runs the attempts, each a whole session from connect on). Which
 * verdicts another attempt may cure, the waits between attempts (doubling
 * from --retry-wait up to a cap, +-20 % jitter) and a wait that SIGINT or
 * SIGTERM ends at once; what the files' reports of every attempt add up
 * to for the summary and --manifest; and --files-from's list, read again
 * from its start by every attempt.
 *
 * Every attempt runs with --resume, so a cut attempt leaves its verified
 * chunks in the temporaries and the next sends only what is missing;
 * files an earlier attempt placed are found complete and kept.
 */
#ifndef RDCP_RETRY_H
#define RDCP_RETRY_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "transfer/xfer.h"

#define RETRY_MAX 10000		   /* --retry N: 0..RETRY_MAX */
#define RETRY_WAIT_MAX_MS 3600000u /* --retry-wait: 0..3600 s */
#define RETRY_WAIT_DEFAULT_MS 5000u
/* The doubling stops here, or at the first wait when that is longer. */
#define RETRY_WAIT_CAP_MS 60000u

/*
 * The regular files of this invocation's attempts, as 61-bit hashes of
 * their names (FNV-1a) with three flags in the low bits (retry.c): open
 * addressing, at most half full, 8 bytes a slot. Only with --retry.
 */
struct retry_names {
	uint64_t *slot; /* 0: empty */
	size_t cap;	/* a power of two, or 0 */
	size_t n;
};

struct retry {
	unsigned int max;     /* --retry: attempts after the first */
	unsigned int wait_ms; /* --retry-wait: the first wait */
	unsigned int attempt; /* the one running or last run, from 1 */
	unsigned int unconnected; /* failed attempts in a row since one that
				   * connected, that one counted (main.c) */
	/* this attempt's failed files: those another attempt may cure
	 * (verify, peer-lost, or the receiver's "another session is writing
	 * it", likely the previous attempt's session not yet ended there),
	 * and the others */
	uint64_t failed_transient, failed_other;
	/* this attempt's files kept as they were (skipped) that an earlier
	 * attempt copied or was cut off in: copied by this invocation */
	uint64_t kept_ours;
	/* this attempt's remote-start failure may pass (xfer_stats) */
	bool start_may_heal;
	/* this attempt lost its RDMA path (retry_rdma_gone) */
	bool rdma_gone;
	/* an attempt of this copy ran over RDMA and failed: with --transport
	 * auto, the next goes over TCP where RDMA no longer reaches the peer,
	 * saying so (cm_addr.rdma_lost) */
	bool rdma_lost;
	struct retry_names names;
	int err; /* -ENOMEM: names could not grow (said once; a file not
		  * found in names is then taken as new) */
};

/* --files-from's list, from its start for every attempt. */
struct retry_list {
	FILE *src;     /* the user's stream (not owned) */
	char sep;      /* between its names */
	/* a pipe, terminal or socket: read by a thread (util/lineq.h) */
	struct lineq *lq;
	int64_t start; /* its offset at the start when it can seek, else -1 */
	FILE *spool;   /* else: what was read of it (unlinked temp file) */
	uint64_t len;  /* bytes in the spool */
	uint64_t pos;  /* where the current stream reads in it */
	FILE *stream;  /* the stream handed out last, when it is the spool's */
};

/*
 * --retry-wait's value: seconds, a decimal fraction allowed ("0.5"),
 * 0..RETRY_WAIT_MAX_MS/1000, as ms in *ms. 0 or -EINVAL.
 */
int retry_parse_wait(const char *s, unsigned int *ms)
	__attribute__((warn_unused_result));

/* Starts r for --retry max and --retry-wait wait_ms (zeroes the rest). */
void retry_init(struct retry *r, unsigned int max, unsigned int wait_ms);

/* Frees what r holds. */
void retry_release(struct retry *r);

/* A new attempt begins: its number goes up, its counts start at 0. */
void retry_attempt_begin(struct retry *r);

/*
 * Takes in a file's report of the current attempt (rep->done only; any
 * other is ignored). Returns true when --manifest should note rep as a
 * copied file: copied (ok, not skipped) for the first time in this
 * invocation, or kept now after an earlier attempt failed while it was
 * on its way (its copy had completed: the final name is only ever given
 * to a verified file). A file copied again (it changed in between) is
 * noted once.
 */
bool retry_file(struct retry *r, const struct xfer_file_report *rep);

/*
 * Whether an attempt that ran over transport ("rdma", "tcp", or "" when it
 * had no session) and ended with verdict v, its session's cause being
 * the -errno cause (xfer_stats.cause), lost its RDMA path: the device was
 * removed or failed (ENODEV), its port went down (ENETDOWN), the route or
 * the local address went (ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL).
 */
bool retry_rdma_gone(const char *transport, enum xfer_fail v, int cause);

/*
 * Takes in how the attempt ended, before retry_is_transient: sets
 * r->rdma_gone, and r->rdma_lost after a failed attempt over RDMA (it
 * stays set).
 */
void retry_attempt_end(struct retry *r, const char *transport, enum xfer_fail v,
		       int cause);

/*
 * Whether an attempt that ended with verdict v is worth another: connect
 * and peer-lost always (a peer that was interrupted or stopped, a
 * receiver shutting down, is peer-lost: only this process's own signal
 * is canceled); remote-start when r->start_may_heal (ssh could not reach
 * the host, not a refused login or a missing rdcp); resource when
 * r->rdma_gone (the next may go over TCP, or find RDMA back); verify,
 * partial and remote-io when every file that failed in it failed in a way
 * another attempt may cure (a session that failed as a whole with
 * remote-io is the receiver refusing: not retried). Never usage, auth,
 * protocol, local-io, another resource, internal or canceled. Attempts
 * left are not counted here.
 */
bool retry_is_transient(const struct retry *r, enum xfer_fail v);

/*
 * The wait in ms after the kth failed attempt in a row (from 1; main.c
 * counts from the last attempt that connected): wait_ms doubled k-1
 * times, capped at max(RETRY_WAIT_CAP_MS, wait_ms), times a factor in
 * [0.8, 1.2] from rnd (uniform over 0..UINT32_MAX).
 */
unsigned int retry_wait_ms(const struct retry *r, unsigned int k, uint32_t rnd);

/*
 * Sleeps ms, or less if *cancel becomes non-zero (a SIGINT or SIGTERM
 * handler's flag: those two signals are blocked but while waiting, so one
 * that arrives at any point ends the wait at once). 0 after the whole
 * wait, -EINTR when cancelled.
 */
int retry_sleep(unsigned int ms, const volatile sig_atomic_t *cancel);

/*
 * Starts l for the list src, from which nothing was read yet. 0, or
 * -errno (-ENOMEM, or the spool file could not be made: said).
 */
int retry_list_init(struct retry_list *l, FILE *src, char sep)
	__attribute__((warn_unused_result));

/*
 * The stream an attempt reads the list from: from the list's start, and
 * past what earlier attempts read, on from src. A list that can seek is
 * rewound; any other (a pipe, stdin) is spooled as it is read. One that
 * can stay silent (a pipe, a terminal, a socket) is read by a thread of
 * its own, and the stream fails with EAGAIN, only ever between two names,
 * while none has come yet: the walk reads it as the non-blocking list it
 * knows (transfer/walk/walk.h), so a silent writer never blocks a session.
 * The stream stays l's (valid until the next call or retry_list_release).
 * NULL with errno set on failure (said).
 */
FILE *retry_list_stream(struct retry_list *l);

void retry_list_release(struct retry_list *l);

#endif
