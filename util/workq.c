/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The worker pool of workq.h: one mutex, two lists, an eventfd. The owner
 * takes finished items without a system call (an uncontended mutex is a
 * user-space atomic); the eventfd is read only in workq_prepare_wait(),
 * before the owner sleeps, so a busy-polling owner makes none.
 *
 * With an io_uring (workq_io_start), workers submit the writes items
 * leave and the reads items come with (under sq_lock, one io_uring_enter
 * each) and the owner alone reaps the completion queue, without a system
 * call, whenever it takes finished items; the ring signals the same
 * eventfd. An item whose I/O is in flight is counted in inflight; I/O
 * cut short is submitted again for the rest by the owner; beyond depth
 * in flight, a worker writes or reads itself. An item whose read
 * completed goes back to the list to do, and a worker runs its fn. The owner
 * takes q->lock before it reads an item a CQE names: the worker counted it in
 * flight under that lock after filling it, which orders the two for the thread
 * sanitizer too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#ifdef RDCP_HAVE_LIBURING
#include <linux/capability.h>
#include <liburing.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#endif

#include "util/io.h"
#include "util/workq.h"

/* io_uring takes registered buffers of at most 1 GiB each. */
#define WORKQ_BUF_MAX (1ull << 30)
#define WORKQ_BUFS_MAX 16u

struct workq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_cond_t idle; /* signalled when running drops to 0, list empty */
	unsigned int running;
	struct workq_item *head, *tail;		  /* to do */
	struct workq_item *done_head, *done_tail; /* done */
	unsigned int pending;
	bool stop;
	int efd;
	unsigned int nthreads;
	pthread_t *threads;
	/* workq_io_start: writes in flight, under lock; the rest fixed */
	unsigned int inflight, peak, depth;
	bool uring;
#ifdef RDCP_HAVE_LIBURING
	struct io_uring ring;
	pthread_mutex_t sq_lock; /* workers and owner submit */
	uint8_t *mem;		 /* registered: WORKQ_BUF_MAX each */
	size_t mem_len;
#endif
};

static void append(struct workq_item **head, struct workq_item **tail,
		   struct workq_item *it)
{
	it->next = NULL;
	if (*tail)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
}

/*
 * A worker's write or read without io_uring: waits delay_ns, as a device
 * would.
 */
static void io_sync(struct workq_io *io)
{
	if (io->delay_ns) {
		struct timespec ts = {
			.tv_sec = (time_t)(io->delay_ns / 1000000000u),
			.tv_nsec = (long)(io->delay_ns % 1000000000u),
		};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (io->read)
		io->res = io_pread_full(io->fd, (void *)io->buf, io->len,
					io->off);
	else
		io->res = io_pwrite_full(io->fd, io->buf, io->len, io->off);
	io->len = 0;
	io->delay_ns = 0;
}

#ifdef RDCP_HAVE_LIBURING
/*
 * Queues its write or read (with its delay, a timeout linked ahead of it
 * that does not cut the link when it expires) and submits it. Under
 * sq_lock. False when the ring took none: the SQEs it got are turned into
 * NOPs whose completions are ignored (user_data 0), and the caller makes
 * the I/O.
 */
static bool submit(struct workq *q, struct workq_item *it)
{
	struct __kernel_timespec ts = {
		.tv_sec = (long long)(it->io.delay_ns / 1000000000u),
		.tv_nsec = (long long)(it->io.delay_ns % 1000000000u),
	};
	struct io_uring_sqe *t = NULL, *w;
	const uint8_t *b = it->io.buf;
	unsigned int len = (unsigned int)it->io.len;
	int rc, idx = -1;

	if (it->io.delay_ns) {
		t = io_uring_get_sqe(&q->ring);
		if (!t)
			return false;
		io_uring_prep_timeout(t, &ts, 0, 0);
		t->flags |= IOSQE_IO_HARDLINK;
		io_uring_sqe_set_data64(t, 0);
	}
	w = io_uring_get_sqe(&q->ring);
	if (!w) {
		if (t)
			io_uring_prep_nop(t); /* no link: nothing follows */
		return false;
	}
	if (q->mem && b >= q->mem && b + it->io.len <= q->mem + q->mem_len &&
	    (size_t)(b - q->mem) / WORKQ_BUF_MAX ==
		    (size_t)(b + it->io.len - 1 - q->mem) / WORKQ_BUF_MAX)
		idx = (int)((size_t)(b - q->mem) / WORKQ_BUF_MAX);
	if (it->io.read && idx >= 0)
		io_uring_prep_read_fixed(w, it->io.fd, (void *)b, len,
					 it->io.off, idx);
	else if (it->io.read)
		io_uring_prep_read(w, it->io.fd, (void *)b, len, it->io.off);
	else if (idx >= 0)
		io_uring_prep_write_fixed(w, it->io.fd, b, len, it->io.off,
					  idx);
	else
		io_uring_prep_write(w, it->io.fd, b, len, it->io.off);
	io_uring_sqe_set_data(w, it);
	rc = io_uring_submit(&q->ring);
	if (rc > 0)
		return true;
	/* Not taken: harmless whenever a later submit takes them. */
	if (t)
		io_uring_prep_nop(t);
	io_uring_prep_nop(w);
	io_uring_sqe_set_data64(w, 0);
	return false;
}

/*
 * A worker: hands its write or read to the ring. False when the ring is
 * full or refused it: the worker makes it itself.
 */
static bool io_async(struct workq *q, struct workq_item *it)
{
	bool ok;

	if (!workq_io_async(q) || it->io.len > UINT32_MAX)
		return false;
	pthread_mutex_lock(&q->lock);
	ok = q->inflight < q->depth;
	if (ok && ++q->inflight > q->peak)
		q->peak = q->inflight;
	pthread_mutex_unlock(&q->lock);
	if (!ok)
		return false;
	pthread_mutex_lock(&q->sq_lock);
	ok = submit(q, it);
	pthread_mutex_unlock(&q->sq_lock);
	if (!ok) {
		pthread_mutex_lock(&q->lock);
		q->inflight--;
		pthread_mutex_unlock(&q->lock);
	}
	return ok;
}

/*
 * The owner, under q->lock: what one CQE says of its item. Done: the
 * item goes to the done list, or (a read) back to the list to do, for a
 * worker to run its fn. Cut short (or EAGAIN, EINTR): the rest is
 * submitted again, or written or read here should the ring refuse it.
 * Nothing more (0) where more was due: -EIO for a write, -ENODATA for a
 * read (the end of the file), as io_pwrite_full and io_pread_full say.
 */
static void complete(struct workq *q, struct workq_item *it, int res)
{
	bool again;

	if (res > 0 && (size_t)res < it->io.len) {
		it->io.buf = (const uint8_t *)it->io.buf + res;
		it->io.len -= (size_t)res;
		it->io.off += (uint64_t)res;
		it->io.delay_ns = 0;
		again = true;
	} else {
		again = res == -EAGAIN || res == -EINTR;
	}
	if (again) {
		pthread_mutex_lock(&q->sq_lock);
		again = submit(q, it);
		pthread_mutex_unlock(&q->sq_lock);
		if (again)
			return;
		io_sync(&it->io);
	} else {
		it->io.res = res < 0	   ? res
			     : res > 0	   ? 0
			     : it->io.read ? -ENODATA
					   : -EIO;
		it->io.len = 0;
		it->io.delay_ns = 0;
	}
	q->inflight--;
	/* Stopping (workq_destroy): no worker is left to run fn. */
	if (it->io.read && !q->stop) {
		append(&q->head, &q->tail, it);
		pthread_cond_signal(&q->cond);
	} else {
		append(&q->done_head, &q->done_tail, it);
	}
}

/* The owner, under q->lock: every completion there is. */
static void reap(struct workq *q)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&q->ring, &cqe) == 0) {
		struct workq_item *it = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&q->ring, cqe);
		if (it) /* NULL: a delay's timeout, or a NOP */
			complete(q, it, res);
	}
}

/* The owner: waits for every write and read in flight and reaps it. */
static void drain(struct workq *q)
{
	pthread_mutex_lock(&q->lock);
	while (q->uring && q->inflight) {
		struct io_uring_cqe *cqe;

		pthread_mutex_unlock(&q->lock);
		(void)io_uring_wait_cqe(&q->ring, &cqe);
		pthread_mutex_lock(&q->lock);
		reap(q);
	}
	pthread_mutex_unlock(&q->lock);
}
#else
static bool io_async(struct workq *q, struct workq_item *it)
{
	return false;
}

static void reap(struct workq *q)
{
}

static void drain(struct workq *q)
{
}
#endif

static void *worker(void *arg)
{
	struct workq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct workq_item *it;
		bool was_empty;

		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		if (!q->head)
			break;
		it = q->head;
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
		q->running++;
		pthread_mutex_unlock(&q->lock);

		if (it->io.read && it->io.len && io_async(q, it)) {
			it = NULL; /* the owner requeues it once read */
			goto next;
		}
		if (it->io.read && it->io.len) {
			io_sync(&it->io);
		} else if (!it->io.read) {
			it->io.len = 0;
			it->io.res = 0;
			it->io.delay_ns = 0;
		}
		it->fn(it);
		if (!it->io.read && it->io.len && io_async(q, it))
			it = NULL; /* the owner takes it once written */
		else if (it && !it->io.read && it->io.len)
			io_sync(&it->io);
	next:

		pthread_mutex_lock(&q->lock);
		if (!--q->running && !q->head)
			pthread_cond_broadcast(&q->idle);
		if (!it)
			continue;
		was_empty = !q->done_head;
		append(&q->done_head, &q->done_tail, it);
		if (was_empty) {
			uint64_t one = 1;

			/* Cannot fail short of a counter overflow. */
			if (write(q->efd, &one, sizeof(one)) < 0)
				abort();
		}
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int workq_create(unsigned int n, struct workq **out)
{
	struct workq *q = calloc(1, sizeof(*q));
	int rc;

	if (!q)
		return -ENOMEM;
	q->threads = calloc(n, sizeof(*q->threads));
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!q->threads || q->efd < 0) {
		rc = q->efd < 0 ? -errno : -ENOMEM;
		goto out_free;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	pthread_cond_init(&q->idle, NULL);
	for (; q->nthreads < n; q->nthreads++) {
		rc = -pthread_create(&q->threads[q->nthreads], NULL, worker, q);
		if (rc) {
			workq_destroy(q);
			return rc;
		}
	}
	*out = q;
	return 0;

out_free:
	if (q->efd >= 0)
		close(q->efd);
	free(q->threads);
	free(q);
	return rc;
}

void workq_destroy(struct workq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	for (unsigned int i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	/* No write may land after its buffer is gone. */
	drain(q);
#ifdef RDCP_HAVE_LIBURING
	if (q->uring) {
		io_uring_queue_exit(&q->ring);
		pthread_mutex_destroy(&q->sq_lock);
	}
#endif
	pthread_cond_destroy(&q->cond);
	pthread_cond_destroy(&q->idle);
	pthread_mutex_destroy(&q->lock);
	close(q->efd);
	free(q->threads);
	free(q);
}

void workq_push(struct workq *q, struct workq_item *item)
{
	item->io.read = false;
	pthread_mutex_lock(&q->lock);
	append(&q->head, &q->tail, item);
	q->pending++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void workq_push_read(struct workq *q, struct workq_item *item)
{
	item->io.read = true;
	item->io.res = 0;
	pthread_mutex_lock(&q->lock);
	append(&q->head, &q->tail, item);
	q->pending++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

struct workq_item *workq_take_done(struct workq *q)
{
	struct workq_item *list;

	pthread_mutex_lock(&q->lock);
	if (q->uring)
		reap(q);
	list = q->done_head;
	q->done_head = q->done_tail = NULL;
	for (struct workq_item *it = list; it; it = it->next)
		q->pending--;
	pthread_mutex_unlock(&q->lock);
	return list;
}

bool workq_prepare_wait(struct workq *q)
{
	bool done;
	uint64_t cnt;

	pthread_mutex_lock(&q->lock);
	done = q->done_head != NULL;
	/*
	 * Reset the eventfd only with the list empty and the lock held: a
	 * worker that finishes after this finds the list empty and signals
	 * again, so no wake-up is lost.
	 */
	if (!done && read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing was signalled since the last reset. */
	}
#ifdef RDCP_HAVE_LIBURING
	/*
	 * The ring signals each completion after it is posted: one posted
	 * before the reset above is seen here, one after it signals again.
	 */
	if (!done && q->uring && io_uring_cq_ready(&q->ring))
		done = true;
#endif
	pthread_mutex_unlock(&q->lock);
	return !done;
}

unsigned int workq_run_done(struct workq *q)
{
	struct workq_item *it = workq_take_done(q), *next;
	unsigned int n = 0;

	for (; it; it = next, n++) {
		next = it->next; /* after may reuse the item */
		it->after(it);
	}
	return n;
}

void workq_wait_idle(struct workq *q)
{
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (q->head || q->running)
			pthread_cond_wait(&q->idle, &q->lock);
		if (!q->inflight)
			break;
		/* Reads come back to the list to do: their fn runs first. */
		pthread_mutex_unlock(&q->lock);
		drain(q);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
}

int workq_fd(const struct workq *q)
{
	return q->efd;
}

unsigned int workq_pending(const struct workq *q)
{
	return q->pending;
}

#ifdef RDCP_HAVE_LIBURING
/*
 * Whether pinning more pages costs nothing: io_uring counts registered
 * buffers in the process's pinned pages, the count rdma-core's memory
 * registration checks against RLIMIT_MEMLOCK too, so that a receiver's
 * next ring could fail to register (the budget of server_budget.c) where
 * the limit binds: without CAP_IPC_LOCK and with a finite limit.
 */
static bool pin_is_free(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2] = { 0 };
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY)
		return true;
	return syscall(SYS_capget, &h, d) == 0 &&
	       (d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32)));
}
#endif

int workq_io_start(struct workq *q, unsigned int depth, void *mem, size_t len)
{
#ifdef RDCP_HAVE_LIBURING
	struct iovec iov[WORKQ_BUFS_MAX];
	unsigned int n = 0;
	int rc;

	if (q->uring || !depth)
		return -EINVAL;
	/* A delayed write takes two entries (tests and benches). */
	rc = io_uring_queue_init(2 * depth, &q->ring, 0);
	if (rc)
		return rc;
	rc = io_uring_register_eventfd(&q->ring, q->efd);
	if (rc) {
		io_uring_queue_exit(&q->ring);
		return rc;
	}
	for (size_t at = 0; mem && at < len && n < WORKQ_BUFS_MAX;
	     at += WORKQ_BUF_MAX, n++) {
		iov[n].iov_base = (uint8_t *)mem + at;
		iov[n].iov_len =
			len - at < WORKQ_BUF_MAX ? len - at : WORKQ_BUF_MAX;
	}
	/*
	 * Pinned once here rather than per write, where that takes nothing
	 * from the memlock budget (pin_is_free); else, or refused, writes
	 * pin their pages as pwrite does.
	 */
	if (n && n * WORKQ_BUF_MAX >= len && pin_is_free() &&
	    io_uring_register_buffers(&q->ring, iov, n) == 0) {
		q->mem = mem;
		q->mem_len = len;
	}
	pthread_mutex_init(&q->sq_lock, NULL);
	pthread_mutex_lock(&q->lock);
	q->depth = depth;
	pthread_mutex_unlock(&q->lock);
	/* Last: workers that see it see the ring (release, acquire). */
	__atomic_store_n(&q->uring, true, __ATOMIC_RELEASE);
	return 0;
#else
	return -ENOSYS;
#endif
}

bool workq_io_async(const struct workq *q)
{
	return __atomic_load_n(&q->uring, __ATOMIC_ACQUIRE);
}

unsigned int workq_io_peak(struct workq *q)
{
	unsigned int n;

	pthread_mutex_lock(&q->lock);
	n = q->peak;
	pthread_mutex_unlock(&q->lock);
	return n;
}
