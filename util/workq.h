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
 *
 * I/O depth beyond the threads (workq_io_start): fn may leave one write
 * in item->io for the pool, which submits it through an io_uring and
 * takes the next item; the item is done (after runs) once the write
 * completed, so many writes are in flight while few threads do the CPU
 * work. The mirror image for reads (workq_push_read): the item comes with
 * a read to make before fn, which the pool submits the same way; once it
 * completed a worker runs fn, which finds its result in item->io. Without
 * io_uring (not built, or refused by the kernel) the worker writes or
 * reads it itself, as before.
 */
#ifndef RDCP_WORKQ_H
#define RDCP_WORKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A write fn leaves for the pool (workq_io_start): len 0, none. Or, with
 * read set (workq_push_read), the read the pool makes before fn.
 */
struct workq_io {
	int fd;
	const void *buf; /* a read's (workq_push_read) is written */
	size_t len;   /* bytes; the pool clears len, delay_ns, res before fn */
	uint64_t off; /* bytes into fd */
	/*
	 * Tests and benches: the I/O completes this much later, as on a
	 * slower device (a linked io_uring timeout; a sleep in the worker
	 * without one). 0 in rdcp.
	 */
	uint64_t delay_ns;
	/*
	 * Once done: 0, or -errno (-EIO: a write wrote nothing; -ENODATA: a
	 * read met the end of the file first), as io_pwrite_full and
	 * io_pread_full say.
	 */
	int res;
	bool read; /* workq_push_read's: fn finds res, len 0 */
};

struct workq_item {
	struct workq_item *next;
	void (*fn)(struct workq_item *item);	/* in a worker */
	void (*after)(struct workq_item *item); /* in the owner, after fn */
	struct workq_io io;
};

struct workq;

/* Starts n threads (n >= 1). Returns 0 or -errno. */
int workq_create(unsigned int n, struct workq **out)
	__attribute__((warn_unused_result));
/* Runs whatever is still queued, joins the threads and frees the pool. */
void workq_destroy(struct workq *q);
void workq_push(struct workq *q, struct workq_item *item);
/*
 * Pushes item with a read to make before its fn, item->io (fd, buf, len,
 * off, delay_ns): len bytes of fd at off into buf, exactly (a short read
 * is continued, as io_pread_full does). With an io_uring (workq_io_start)
 * a worker submits it and takes its next item, and once it completed a
 * worker runs fn; else (or beyond the depth) the worker reads itself
 * first. fn then finds item->io.read set, len 0 and res the outcome.
 */
void workq_push_read(struct workq *q, struct workq_item *item);
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

/*
 * Asynchronous writes and reads for q, at most depth (>= 1) in flight: an
 * io_uring whose completions make workq_fd() readable, with mem[0, len)
 * (NULL: none), the buffers most I/O goes from or to, registered with it
 * where the kernel lets (no page pinning per write or read). 0, or -errno
 * (-ENOSYS: built without liburing; the kernel's refusal: -ENOSYS, -EPERM in a
 * container or with io_uring disabled, -ENOMEM): q then writes in its threads,
 * as without the call. The owner's thread, at any time: items pushed before it
 * that leave a write may have it made by their worker.
 */
int workq_io_start(struct workq *q, unsigned int depth, void *mem, size_t len)
	__attribute__((warn_unused_result));
/* Whether items' I/O goes through an io_uring (workq_io_start). */
bool workq_io_async(const struct workq *q);
/* The most writes or reads that were in flight at once (workq_io_start). */
unsigned int workq_io_peak(struct workq *q);

#endif
