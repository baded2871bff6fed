/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * lineq.h: one reader thread, one buffer, one mutex. The reader waits in
 * poll(2) on the stream and on an eventfd that lineq_stop() writes, so a
 * writer that never writes again cannot keep it; it reads into a chunk of
 * its own and appends under the lock, and while LINEQ_MAX bytes wait to
 * be taken it sleeps on a condition the taker signals.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/lineq.h"

#define CHUNK (64u << 10) /* one read(2) at most */

struct lineq {
	int fd, stopfd;
	char sep;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t room; /* the taker made room, or stop */
	/* under lock: the bytes read, [off, len) not yet taken */
	char *buf;
	size_t off, len, cap;
	bool eof, stop;
	int err; /* the reader's -errno, 0 */
	/* the taker's alone */
	char *rec;
	size_t rec_cap;
};

bool lineq_wanted(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && !(fl & O_NONBLOCK) && !fstat(fd, &st) &&
	       !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode);
}

/* Appends n bytes under the lock: 0 or -ENOMEM. */
static int append(struct lineq *q, const char *p, size_t n)
{
	if (q->off) { /* what was taken goes first */
		memmove(q->buf, q->buf + q->off, q->len - q->off);
		q->len -= q->off;
		q->off = 0;
	}
	if (q->len + n > q->cap) {
		size_t cap = q->cap ? q->cap : CHUNK;
		char *b;

		while (cap < q->len + n)
			cap *= 2;
		b = realloc(q->buf, cap);
		if (!b)
			return -ENOMEM;
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, p, n);
	q->len += n;
	return 0;
}

/* Ends the reader with eof or err set (under the lock). */
static void *reader(void *arg)
{
	struct lineq *q = arg;
	char *chunk = malloc(CHUNK);
	int rc = chunk ? 0 : -ENOMEM;

	while (!rc) {
		struct pollfd p[2] = { { .fd = q->fd, .events = POLLIN },
				       { .fd = q->stopfd, .events = POLLIN } };
		ssize_t n;

		pthread_mutex_lock(&q->lock);
		while (!q->stop && q->len - q->off >= LINEQ_MAX)
			pthread_cond_wait(&q->room, &q->lock);
		pthread_mutex_unlock(&q->lock);
		if (poll(p, 2, -1) < 0) {
			if (errno != EINTR)
				rc = -errno;
			continue;
		}
		if (p[1].revents)
			break; /* lineq_stop */
		n = read(q->fd, chunk, CHUNK);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		pthread_mutex_lock(&q->lock);
		if (n < 0)
			rc = -errno;
		else if (!n)
			q->eof = true;
		else
			rc = append(q, chunk, (size_t)n);
		pthread_mutex_unlock(&q->lock);
		if (!n)
			break;
	}
	free(chunk);
	if (rc) {
		pthread_mutex_lock(&q->lock);
		q->err = rc;
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

int lineq_start(struct lineq **out, int fd, char sep)
{
	struct lineq *q = calloc(1, sizeof(*q));
	sigset_t all, old;
	int rc;

	if (!q)
		return -ENOMEM;
	q->fd = fd;
	q->sep = sep;
	q->stopfd = eventfd(0, EFD_CLOEXEC);
	if (q->stopfd < 0) {
		rc = -errno;
		free(q);
		return rc;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->room, NULL);
	/* Signals are the main thread's: the reader takes none. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&q->thread, NULL, reader, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_cond_destroy(&q->room);
		pthread_mutex_destroy(&q->lock);
		close(q->stopfd);
		free(q);
		return rc;
	}
	*out = q;
	return 0;
}

/* Hands out n bytes at p as the current record: 1, or -ENOMEM. */
static int hand_out(struct lineq *q, const char *p, size_t n,
		    const char **rec, size_t *len)
{
	if (n + 1 > q->rec_cap) {
		char *r = realloc(q->rec, n + 1);

		if (!r)
			return -ENOMEM;
		q->rec = r;
		q->rec_cap = n + 1;
	}
	memcpy(q->rec, p, n);
	q->rec[n] = '\0';
	*rec = q->rec;
	*len = n;
	return 1;
}

int lineq_next(struct lineq *q, const char **rec, size_t *len)
{
	const char *p, *end;
	size_t left;
	int rc;

	pthread_mutex_lock(&q->lock);
	left = q->len - q->off;
	p = q->buf + q->off;
	end = left ? memchr(p, q->sep, left) : NULL;
	if (end) {
		rc = hand_out(q, p, (size_t)(end - p), rec, len);
		if (rc > 0) {
			q->off += (size_t)(end - p) + 1;
			if (left >= LINEQ_MAX)
				pthread_cond_signal(&q->room);
		}
	} else if (left >= LINEQ_MAX) {
		rc = -ENAMETOOLONG; /* and the reader waits for room */
	} else if (q->err) {
		rc = q->err;
	} else if (q->eof && left) { /* the last, with no separator */
		rc = hand_out(q, p, left, rec, len);
		if (rc > 0)
			q->off = q->len;
	} else {
		rc = q->eof ? -1 : 0;
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void lineq_stop(struct lineq *q)
{
	uint64_t one = 1;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_signal(&q->room);
	pthread_mutex_unlock(&q->lock);
	/* An eventfd write of 8 bytes cannot fail short of overflow. */
	(void)!write(q->stopfd, &one, sizeof(one));
	pthread_join(q->thread, NULL);
	close(q->stopfd);
	pthread_cond_destroy(&q->room);
	pthread_mutex_destroy(&q->lock);
	free(q->buf);
	free(q->rec);
	free(q);
}
