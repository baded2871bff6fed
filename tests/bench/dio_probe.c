/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The experiment behind rdcp's file-I/O choices (issue #14;
 * doc/PERFORMANCE.md, "Direct I/O"), run by tests/bench/direct.sh: one
 * file of MIB MiB written, then read, in 1 MiB chunks from a 64-slot
 * page-aligned "ring", the way rdcp's sink and source move a large
 * file, by
 *   buffered T  pwrite/pread through the page cache, T threads
 *   direct T    the same with O_DIRECT (space fallocated first), T threads
 *   uring Q     O_DIRECT through one io_uring, one thread, Q in flight
 * T and Q in 1, 2, 4, 8. Prints "PROBE mode n write|read MB/s cpu_s" per
 * run; the file's pages are dropped before each. Built with liburing when
 * it is there (-DHAVE_URING -luring), without the uring rows otherwise.
 *
 *   dio_probe FILE MIB
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_URING
#include <liburing.h>
#endif

#define CHUNK (1u << 20)
#define SLOTS 64u

static uint8_t *ring;
static uint64_t nchunks;
static atomic_uint_fast64_t next_chunk;

struct job {
	int fd;
	bool write;
	int err;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* A worker: takes the next chunk, moves it from/to its ring slot. */
static void *worker(void *p)
{
	struct job *j = p;
	uint64_t i;

	while ((i = atomic_fetch_add(&next_chunk, 1)) < nchunks) {
		uint8_t *buf = ring + (i % SLOTS) * CHUNK;
		off_t off = (off_t)(i * CHUNK);
		ssize_t n = j->write ? pwrite(j->fd, buf, CHUNK, off)
				     : pread(j->fd, buf, CHUNK, off);

		if (n != CHUNK) {
			j->err = n < 0 ? errno : EIO;
			break;
		}
	}
	return NULL;
}

static int threads(int fd, bool write, int t)
{
	pthread_t tid[8];
	struct job j[8];
	int err = 0;

	atomic_store(&next_chunk, 0);
	for (int k = 0; k < t; k++) {
		j[k] = (struct job){ .fd = fd, .write = write };
		pthread_create(&tid[k], NULL, worker, &j[k]);
	}
	for (int k = 0; k < t; k++) {
		pthread_join(tid[k], NULL);
		if (j[k].err)
			err = j[k].err;
	}
	return err;
}

#ifdef HAVE_URING
static int uring(int fd, bool write, unsigned int q)
{
	struct io_uring r;
	uint64_t sent = 0, done = 0;
	int rc = io_uring_queue_init(q, &r, 0);

	if (rc)
		return -rc;
	while (done < nchunks) {
		struct io_uring_cqe *cqe;

		while (sent < nchunks && sent - done < q) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r);
			uint8_t *buf = ring + (sent % SLOTS) * CHUNK;

			if (write)
				io_uring_prep_write(sqe, fd, buf, CHUNK,
						    sent * CHUNK);
			else
				io_uring_prep_read(sqe, fd, buf, CHUNK,
						   sent * CHUNK);
			sent++;
		}
		io_uring_submit_and_wait(&r, 1);
		while (io_uring_peek_cqe(&r, &cqe) == 0) {
			if (cqe->res != CHUNK) {
				rc = cqe->res < 0 ? -cqe->res : EIO;
				done = nchunks;
			}
			io_uring_cqe_seen(&r, cqe);
			done++;
		}
	}
	io_uring_queue_exit(&r);
	return rc;
}
#endif

/* One run: mode, n (threads or queue depth), write then read. */
static int run(const char *path, const char *mode, int n, uint64_t bytes)
{
	bool direct = strcmp(mode, "buffered") != 0;
	int flags = O_RDWR | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0);

	for (int w = 1; w >= 0; w--) {
		int fd = open(path, w ? flags : (flags & ~(O_CREAT | O_TRUNC)),
			      0600);
		double t0, c0, t, c;
		int err;

		if (fd < 0) {
			perror(path);
			return 1;
		}
		if (w && direct && fallocate(fd, 0, 0, (off_t)bytes) < 0)
			perror("fallocate");
		if (!w) { /* the read starts cold */
			fdatasync(fd);
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		}
		t0 = now_s();
		c0 = cpu_s();
#ifdef HAVE_URING
		err = !strcmp(mode, "uring") ? uring(fd, w, (unsigned)n)
					     : threads(fd, w, n);
#else
		err = threads(fd, w, n);
#endif
		if (w)
			fdatasync(fd); /* the data on the device, both ways */
		t = now_s() - t0;
		c = cpu_s() - c0;
		close(fd);
		if (err) {
			fprintf(stderr, "%s %d: %s\n", mode, n, strerror(err));
			return 1;
		}
		printf("PROBE %s %d %s %.1f %.3f\n", mode, n,
		       w ? "write" : "read", bytes / 1e6 / t, c);
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *modes[] = { "buffered", "direct",
#ifdef HAVE_URING
				"uring",
#endif
	};
	const int ns[] = { 1, 2, 4, 8 };
	uint64_t bytes;

	if (argc != 3) {
		fprintf(stderr, "usage: dio_probe FILE MIB\n");
		return 2;
	}
	bytes = strtoull(argv[2], NULL, 0) << 20;
	nchunks = bytes / CHUNK;
	ring = mmap(NULL, (size_t)SLOTS * CHUNK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < (size_t)SLOTS * CHUNK; i++)
		ring[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
			if (run(argv[1], modes[m], ns[k], bytes))
				return 1;
	unlink(argv[1]);
	return 0;
}
