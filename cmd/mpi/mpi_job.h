/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi (the files of cmd/mpi/): one rdcp copy run by N MPI ranks. MPI carries
 * only coordination, never data: every rank runs one ordinary rdcp
 * session (xfer_copy) to one of the receivers, fed names through a pipe
 * (xfer_opts.files_from), and the tree is walked by all ranks at once.
 *
 * Rank 0 is also the coordinator: it holds the queue of work (directories
 * to list, batches of names to copy), hands it to the ranks that ask,
 * detects the end of the walk, merges progress, --json events and the
 * ranks' verdicts, and says the job's exit code. Every MPI call is point
 * to point and non-blocking, polled with a deadline: no collective, so a
 * lost rank cannot hang the others (see rdcp-mpi(1), FAILURES).
 *
 * Messages are byte strings: a type byte, then big-endian fields.
 */
#ifndef RDCP_MPI_JOB_H
#define RDCP_MPI_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer/xfer.h"

enum mj_tag {
	TAG_UP = 1,   /* a rank to the coordinator */
	TAG_DOWN = 2, /* the coordinator to a rank */
};

enum mj_msg {
	/* up */
	MSG_HELLO = 1, /* str host, u32 pid */
	MSG_WORK,      /* items (below) found by a walk */
	MSG_REQ,       /* u8 want (enum mj_want): replaces the last one */
	MSG_STAT,      /* u64 bytes moved, u64 files done, u32 dirs queued */
	MSG_EVENTS,    /* text for rank 0's stdout (--json, --dry-run) */
	MSG_DONE,      /* the session's end: struct mj_result */
	MSG_SPLIT,     /* a split file's range failed: str path, u32 class,
			* str message (rank 0 counts the file once) */
	MSG_ATTEMPT,   /* --retry: an attempt failed: u32 attempt, u32 of,
			* u32 class, u8 again, u8 may heal, u32 wait ms,
			* str message; one after the other */
	/* down */
	MSG_GIVE, /* items */
	MSG_END,  /* nothing more to do: close the session's list */
	MSG_CANCEL,
	MSG_EXIT,  /* u32 exit code: finalize and exit */
	MSG_TICK,  /* the coordinator is alive */
	MSG_STEAL, /* give up half of your queued directories (MSG_WORK) */
};

enum mj_want {
	WANT_DIR = 1 << 0,   /* not walking: give me a directory */
	WANT_NAMES = 1 << 1, /* my session runs low: give me names */
};

/*
 * An item: u8 kind, u64 bytes (its regular files' sizes), u32 count, then
 * count names, each u16 length and bytes, beneath the base.
 */
enum mj_item {
	ITEM_DIR = 1,
	ITEM_NAMES = 2,
	/*
	 * Down only, made by rank 0 from an ITEM_BIG: one byte range of a
	 * split file; count 1, then u64 offset, u64 length, u32 index, u32
	 * ranges, token[16], the name.
	 */
	ITEM_RANGE = 3,
	/* Up only: a regular file of at least the split size, count 1. */
	ITEM_BIG = 4
};

/* A batch of names is sent once it holds this many, or this many bytes. */
#define MJ_BATCH_NAMES 256u
#define MJ_BATCH_BYTES (16ull << 20)
/*
 * A rank asks for names when less than this is queued in its session
 * (bytes: at least; half a second of its rate when that is more).
 */
#define MJ_LOW_FILES 128u
#define MJ_LOW_BYTES (8ull << 20)

/* A growable byte string, and a reader over one. */
struct mbuf {
	uint8_t *p;
	size_t len, cap;
	size_t off; /* reading */
	bool bad;   /* a read past the end, or out of memory */
};

void mbuf_u8(struct mbuf *b, uint8_t v);
void mbuf_u16(struct mbuf *b, uint16_t v);
void mbuf_u32(struct mbuf *b, uint32_t v);
void mbuf_u64(struct mbuf *b, uint64_t v);
void mbuf_bytes(struct mbuf *b, const void *p, size_t n);
void mbuf_str(struct mbuf *b, const char *s); /* u16 length, bytes */
uint8_t mbuf_get_u8(struct mbuf *b);
uint16_t mbuf_get_u16(struct mbuf *b);
uint32_t mbuf_get_u32(struct mbuf *b);
uint64_t mbuf_get_u64(struct mbuf *b);
/* A u16-length string copied into out (outsz bytes, cut), "" if bad. */
void mbuf_get_str(struct mbuf *b, char *out, size_t outsz);
void mbuf_release(struct mbuf *b);

/* A session's verdict and numbers, sent up in MSG_DONE. */
struct mj_result {
	enum xfer_fail v;
	bool early; /* it ended before the list did: a session failure */
	struct xfer_stats st;
};

void mj_result_put(struct mbuf *b, const struct mj_result *r);
void mj_result_get(struct mbuf *b, struct mj_result *r);

/*
 * Sends b (taken: the caller's b is emptied) to rank dest with tag,
 * without waiting. 0, or -EIO (logged) when MPI refuses it.
 */
int mj_post(int dest, int tag, struct mbuf *b);
/* Completes what mj_post() sent; the number still under way. */
size_t mj_sends_progress(void);
/*
 * Waits up to ms for every send to complete; what is left (to a peer that
 * is gone) is dropped, its buffer kept for MPI until the process ends.
 */
void mj_sends_drain(int ms);
/*
 * A message that arrived, if any: 1 with *b (owned by the caller), its
 * source and tag; 0 when none; -EIO (logged) when MPI fails.
 */
int mj_poll(struct mbuf *b, int *source, int *tag);

/* The walk's side of a rank (mpi_walk.c). */
struct mj_walk;

/*
 * A walker beneath base (kept); filter: the --include/--exclude rules or
 * NULL. 0 or -ENOMEM.
 */
int mj_walk_create(const char *base, const struct filter *filter,
		   struct mj_walk **out);
void mj_walk_destroy(struct mj_walk *w);
/* Files of at least split bytes go up as ITEM_BIG (0: none). */
void mj_walk_split(struct mj_walk *w, uint64_t split);
/* Queues directory name (beneath the base) to be listed. */
int mj_walk_add_dir(struct mj_walk *w, const char *name);
/* Whether a directory is queued or being listed. */
bool mj_walk_busy(const struct mj_walk *w);
/* Directories queued, not yet being listed. */
size_t mj_walk_queued(const struct mj_walk *w);
/* Entries that could not be listed (logged): failed files of the job. */
uint64_t mj_walk_failed(const struct mj_walk *w);
/*
 * Gives away the older half of the queued directories, as items appended
 * to out (*nitems counting them), for a rank that has none. 0 or -ENOMEM.
 */
int mj_walk_give(struct mj_walk *w, struct mbuf *out, uint32_t *nitems);
/*
 * Lists up to max entries; what it found (its directories, batches of
 * names) is appended to out as items, *nitems counting them. 0 or -ENOMEM.
 */
int mj_walk_step(struct mj_walk *w, unsigned int max, struct mbuf *out,
		 uint32_t *nitems);

/* The coordinator (mpi_coord.c), on rank 0. */
struct mj_coord;
struct mj_coord_cfg {
	int nranks;
	const char *const *receivers; /* "host:port", nrecv of them */
	int nrecv;
	bool json, quiet, progress, dry_run;
	int lost_ms; /* a rank silent this long is lost */
	uint64_t split; /* bytes a range holds (a multiple of the chunk) */
	bool mirror;	/* --delete: rank 0 mirrors once the copy is done */
	unsigned int retry; /* --retry N */
};

int mj_coord_create(const struct mj_coord_cfg *cfg, struct mj_coord **out);
void mj_coord_destroy(struct mj_coord *c);
/* Work found before the walk began (the SRCs), as a MSG_WORK body. */
void mj_coord_seed(struct mj_coord *c, struct mbuf *items, uint32_t n);
/* One message from a rank (tag TAG_UP); b is the caller's. */
void mj_coord_message(struct mj_coord *c, int rank, struct mbuf *b);
/*
 * The coordinator's turn: hands out work, ends the walk, checks who is
 * silent, draws progress. cancel: a signal came. Returns true once the
 * job is over: *exit_code is its code, *abort whether a rank is lost
 * (the job must end with MPI_Abort, not MPI_Finalize).
 */
bool mj_coord_step(struct mj_coord *c, bool cancel, int *exit_code,
		   bool *abort);
/*
 * --delete: true once, when every rank's copy is verified and the job
 * succeeded: the caller then runs the mirror's session and tells its
 * verdict with mj_coord_mirror_over(); the job is not over until then
 * (every rank waits, hearing rank 0). Never when a rank failed.
 */
bool mj_coord_mirror_due(struct mj_coord *c);
void mj_coord_mirror_over(struct mj_coord *c, enum xfer_fail v,
			  const struct xfer_stats *st);

#endif
