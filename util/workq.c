/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The worker pool of workq.h: one mutex, two lists, an eventfd. The owner
 * takes finished items without a system call (an uncontended mutex is a
 * user-space atomic); the eventfd is read only in workq_prepare_wait(),
 * before the owner sleeps, so a busy-polling owner makes none.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/workq.h"

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

		it->fn(it);

		pthread_mutex_lock(&q->lock);
		if (!--q->running && !q->head)
			pthread_cond_broadcast(&q->idle);
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
	pthread_cond_destroy(&q->cond);
	pthread_cond_destroy(&q->idle);
	pthread_mutex_destroy(&q->lock);
	close(q->efd);
	free(q->threads);
	free(q);
}

void workq_push(struct workq *q, struct workq_item *item)
{
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
	while (q->head || q->running)
		pthread_cond_wait(&q->idle, &q->lock);
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
