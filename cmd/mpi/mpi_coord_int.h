/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to mpi_coord.c and mpi_report.c: rank 0's coordinator state
 * (struct mj_coord, made by mj_coord_create) and what the coordinator
 * asks of the report at the job's end.
 */
#ifndef RDCP_MPI_COORD_INT_H
#define RDCP_MPI_COORD_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/mpi/mpi_job.h"
#include "transfer/xfer.h"

struct mj_rank_state {
	char host[64];
	unsigned int pid;
	uint8_t want;	  /* of its last current REQ, less what it got */
	uint32_t gives;	  /* GIVE messages sent to it */
	bool steal_sent;  /* a STEAL not yet answered */
	bool heard;	  /* anything at all came from it */
	uint64_t last_ms; /* when it was last heard */
	uint64_t bytes;	  /* moved by its session, so far */
	uint64_t files;	  /* done by its session, so far */
	uint32_t dirs;	  /* queued in its walk */
	bool done;	  /* its MSG_DONE came */
	bool lost;	  /* silent for too long */
	struct mj_result res;
};

struct mj_coord {
	struct mj_coord_cfg cfg;
	struct mj_rank_state *r;
	char **dirs; /* directories to list, the newest last */
	size_t ndirs, capdirs;
	struct mbuf *names; /* batches, the oldest first */
	size_t nnames, capnames, headnames;
	uint64_t total_bytes; /* every regular file found, so far */
	uint64_t total_names;
	bool end_sent, cancel_sent;
	uint64_t cancel_ms;   /* when the cancel went out */
	enum xfer_fail cause; /* what ended the job early, or XFER_OK */
	char cause_msg[800];
	double t0;
	uint64_t tick_ms, progress_ms;
	bool progress_shown;
	int rr; /* where the next round of giving starts */
	/* split files with a failed range (MSG_SPLIT): each counted once */
	char **split_failed;
	size_t nsplit_failed;
	enum xfer_fail split_first; /* the first one's class */
	/* --delete: the mirror's session, after every rank's copy */
	enum {
		MIRROR_NONE,
		MIRROR_DUE,
		MIRROR_RUNNING,
		MIRROR_OVER,
		MIRROR_SKIPPED
	} mirror;
	enum xfer_fail mirror_v;
	struct xfer_stats mirror_st;
	unsigned int attempts; /* --retry: failed attempts, every rank's */
};

/* The receiver rank's session copies to. */
static inline const char *mj_coord_receiver(const struct mj_coord *c, int rank)
{
	return c->cfg.receivers[rank % c->cfg.nrecv];
}

/*
 * The job's verdict so far (mpi_report.c): every rank's statistics added
 * into st, with the split files that failed and --delete's mirror; the
 * job's cause when it was ended early, else canceled, the mirror's
 * failure, PARTIAL or the first failure's class, else XFER_OK.
 */
enum xfer_fail mj_coord_verdict(const struct mj_coord *c,
				struct xfer_stats *st);

/*
 * The end of the job with verdict v and exit code code (mpi_report.c):
 * --json's summary event with the ranks and the receivers, and unless
 * --quiet the text lines on stderr.
 */
void mj_coord_summary(struct mj_coord *c, enum xfer_fail v, int code);

#endif
