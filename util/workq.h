/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A fixed pool of worker threads for the CPU and disk work of a transfer
 * (pread + checksum on the source, checksum + pwrite on the sink), so that
 * the thread that owns the queue pair never blocks on a disk or a hash.
 *
 * The owner pushes items; a worker runs item->fn; finished items go to a
 * done list that only the owner drains, and an eventfd becomes readable
 * when it is non-empty, so the owner can sleep in poll(2) on the CQ channel
 * and this fd together. Back in the owner's thread, workq_run_done calls
 * each finished item's item->after, as libuv's uv_queue_work(work,
 * after_work) does: the code that handed work out says what follows it.
 * Items are owned by the caller throughout.
 */
#ifndef RDCP_WORKQ_H
#define RDCP_WORKQ_H

#include <stdbool.h>

struct workq_item {
	struct workq_item *next;
	void (*fn)(struct workq_item *item);	/* in a worker */
	void (*after)(struct workq_item *item); /* in the owner, after fn */
};

struct workq;

/* Starts n threads (n >= 1). Returns 0 or -errno. */
int workq_create(unsigned int n, struct workq **out)
	__attribute__((warn_unused_result));
/* Runs whatever is still queued, joins the threads and frees the pool. */
void workq_destroy(struct workq *q);
void workq_push(struct workq *q, struct workq_item *item);
/*
 * Takes every finished item, oldest first; NULL if none. Non-blocking, no
 * system call.
 */
struct workq_item *workq_take_done(struct workq *q);
/*
 * Takes every finished item and calls its after, oldest first, in the
 * calling (owner's) thread. Returns how many ran. Non-blocking.
 */
unsigned int workq_run_done(struct workq *q);
/*
 * For poll(2): readable once an item finished after the last
 * workq_prepare_wait() that returned true (and possibly spuriously).
 */
int workq_fd(const struct workq *q);
/*
 * Call before sleeping on workq_fd(): returns false when finished items
 * wait already (take them, do not sleep); true when none do, after
 * resetting the fd so that it becomes readable when the next one
 * finishes. The only call here that makes a system call.
 */
bool workq_prepare_wait(struct workq *q);
/*
 * Blocks until no item is queued or running (a session that failed waits
 * here before it frees what the items point to), then the caller takes
 * the finished ones with workq_take_done.
 */
void workq_wait_idle(struct workq *q);
/* Items pushed and not yet taken back with workq_take_done. */
unsigned int workq_pending(const struct workq *q);

#endif
