/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for cmd/retry.c, --retry's policy: --retry-wait's values,
 * the waits (doubling, cap, jitter bounds), which verdicts are retried,
 * which attempts lost their RDMA path (retried; --transport auto then
 * may go over TCP),
 * the files' reports across attempts (each copied file noted once, kept
 * files an earlier attempt placed counted as copied), a wait that a
 * signal ends at once, and --files-from's list read again from a pipe.
 */
#include "tap.h"

#include "cmd/retry.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "util/clock.h"

static void test_parse_wait(void)
{
	static const struct {
		const char *s;
		int rc;
		unsigned int ms;
	} v[] = {
		{ "0", 0, 0 },		{ "5", 0, 5000 },
		{ "0.5", 0, 500 },	{ ".25", 0, 250 },
		{ "2.", 0, 2000 },	{ "1.2345", 0, 1234 },
		{ "3600", 0, 3600000 }, { "3601", -EINVAL, 0 },
		{ "", -EINVAL, 0 },	{ ".", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },	{ "1s", -EINVAL, 0 },
		{ "1.5.", -EINVAL, 0 }, { "99999999999999999999", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unsigned int ms = 77;
		int rc = retry_parse_wait(v[i].s, &ms);

		CHECK_EQ(rc, v[i].rc);
		if (!v[i].rc)
			CHECK_EQ(ms, v[i].ms);
		if (rc != v[i].rc)
			printf("#   '%s'\n", v[i].s);
	}
}

static void test_wait_backoff(void)
{
	struct retry r;

	retry_init(&r, 10, 5000);
	/* the middle of the jitter: the doubling itself */
	CHECK_EQ(retry_wait_ms(&r, 1, UINT32_MAX / 2), 4999);
	CHECK_EQ(retry_wait_ms(&r, 2, UINT32_MAX / 2), 9999);
	CHECK_EQ(retry_wait_ms(&r, 4, UINT32_MAX / 2), 39999);
	CHECK_EQ(retry_wait_ms(&r, 5, UINT32_MAX / 2), 59999); /* capped */
	CHECK_EQ(retry_wait_ms(&r, 10000, UINT32_MAX / 2), 59999);
	/* +-20 % */
	CHECK_EQ(retry_wait_ms(&r, 1, 0), 4000);
	CHECK_EQ(retry_wait_ms(&r, 1, UINT32_MAX), 6000);
	CHECK_EQ(retry_wait_ms(&r, 9, 0), 48000);
	CHECK_EQ(retry_wait_ms(&r, 9, UINT32_MAX), 72000);
	/* a first wait above the cap is not lowered, nor doubled */
	retry_init(&r, 3, 600000);
	CHECK_EQ(retry_wait_ms(&r, 3, 0), 480000);
	retry_init(&r, 3, 0);
	CHECK_EQ(retry_wait_ms(&r, 3, UINT32_MAX), 0);
	retry_release(&r);
}

static struct xfer_file_report done(const char *name, int status,
				    enum xfer_fail klass, bool skipped)
{
	return (struct xfer_file_report){
		.done = true,
		.path = name,
		.kind = "file",
		.status = status,
		.klass = klass,
		.skipped = skipped,
	};
}

static struct xfer_file_report start(const char *name)
{
	return (struct xfer_file_report){ .path = name, .kind = "file" };
}

static void test_transient(void)
{
	struct retry r;
	struct xfer_file_report f;

	retry_init(&r, 3, 0);
	retry_attempt_begin(&r);
	CHECK(retry_is_transient(&r, XFER_FAIL_CONNECT));
	CHECK(retry_is_transient(&r, XFER_FAIL_PEER_LOST));
	CHECK(retry_is_transient(&r, XFER_FAIL_VERIFY));     /* the session's */
	CHECK(!retry_is_transient(&r, XFER_FAIL_REMOTE_IO)); /* refused */
	CHECK(!retry_is_transient(&r, XFER_FAIL_PARTIAL));
	for (enum xfer_fail v = XFER_FAIL_INTERNAL; v <= XFER_FAIL_CANCELED;
	     v++)
		if (v == XFER_FAIL_USAGE || v == XFER_FAIL_AUTH ||
		    v == XFER_FAIL_PROTOCOL || v == XFER_FAIL_LOCAL_IO ||
		    v == XFER_FAIL_RESOURCE || v == XFER_FAIL_INTERNAL ||
		    v == XFER_FAIL_CANCELED)
			CHECK(!retry_is_transient(&r, v));
	/* ssh refused a login or no usable rdcp there: for good */
	CHECK(!retry_is_transient(&r, XFER_FAIL_REMOTE_START));
	/* ssh could not reach the host: may pass; the next attempt anew */
	r.start_may_heal = true;
	CHECK(retry_is_transient(&r, XFER_FAIL_REMOTE_START));
	r.start_may_heal = false;
	/* a file failed verification, another was busy there: retried */
	f = done("a", -EBADMSG, XFER_FAIL_VERIFY, false);
	retry_file(&r, &f);
	f = done("b", -EBUSY, XFER_FAIL_REMOTE_IO, false);
	retry_file(&r, &f);
	CHECK(retry_is_transient(&r, XFER_FAIL_PARTIAL));
	CHECK(retry_is_transient(&r, XFER_FAIL_VERIFY));
	CHECK(retry_is_transient(&r, XFER_FAIL_REMOTE_IO));
	/* and one unreadable source: another attempt fails it again */
	f = done("c", -EACCES, XFER_FAIL_LOCAL_IO, false);
	retry_file(&r, &f);
	CHECK(!retry_is_transient(&r, XFER_FAIL_PARTIAL));
	CHECK(!retry_is_transient(&r, XFER_FAIL_VERIFY));
	CHECK(retry_is_transient(&r, XFER_FAIL_PEER_LOST));
	/* the counts are the attempt's */
	retry_attempt_begin(&r);
	CHECK_EQ(r.attempt, 2);
	f = done("b", -EIO, XFER_FAIL_REMOTE_IO, false);
	retry_file(&r, &f);
	CHECK(!retry_is_transient(&r, XFER_FAIL_REMOTE_IO));
	retry_release(&r);
}

/* Which attempts lost their RDMA path, and what that makes of them. */
static void test_rdma_gone(void)
{
	static const int gone[] = { -ENODEV, -ENETDOWN, -ENETUNREACH,
				    -EHOSTUNREACH, -EADDRNOTAVAIL };
	static const int not_gone[] = { 0,    -ECONNRESET, -ETIMEDOUT,
					-EIO, -ENOMEM,	   -EPROTO };
	struct retry r;

	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		CHECK(retry_rdma_gone("rdma", XFER_FAIL_RESOURCE, gone[i]));
		CHECK(retry_rdma_gone("rdma", XFER_FAIL_PEER_LOST, gone[i]));
		/* only an RDMA session has an RDMA path to lose */
		CHECK(!retry_rdma_gone("tcp", XFER_FAIL_RESOURCE, gone[i]));
		CHECK(!retry_rdma_gone("", XFER_FAIL_CONNECT, gone[i]));
		CHECK(!retry_rdma_gone(NULL, XFER_FAIL_CONNECT, gone[i]));
		CHECK(!retry_rdma_gone("rdma", XFER_OK, gone[i]));
	}
	for (size_t i = 0; i < sizeof(not_gone) / sizeof(not_gone[0]); i++)
		CHECK(!retry_rdma_gone("rdma", XFER_FAIL_RESOURCE,
				       not_gone[i]));

	retry_init(&r, 3, 0);
	/* A session over TCP failed: no RDMA path was lost. */
	retry_attempt_begin(&r);
	retry_attempt_end(&r, "tcp", XFER_FAIL_PEER_LOST, -ECONNRESET);
	CHECK(!r.rdma_gone);
	CHECK(!r.rdma_lost);
	/* Out of memory over RDMA: still not retried. */
	retry_attempt_begin(&r);
	retry_attempt_end(&r, "rdma", XFER_FAIL_RESOURCE, -ENOMEM);
	CHECK(!r.rdma_gone);
	CHECK(!retry_is_transient(&r, XFER_FAIL_RESOURCE));
	CHECK(r.rdma_lost); /* a failed RDMA session all the same */
	/* The device removed mid-copy (verbs: ENODEV, class resource). */
	retry_init(&r, 3, 0);
	retry_attempt_begin(&r);
	retry_attempt_end(&r, "rdma", XFER_FAIL_RESOURCE, -ENODEV);
	CHECK(r.rdma_gone);
	CHECK(r.rdma_lost);
	CHECK(retry_is_transient(&r, XFER_FAIL_RESOURCE));
	/* The next attempt starts clean, but the lost path is remembered. */
	retry_attempt_begin(&r);
	CHECK(!r.rdma_gone);
	CHECK(!retry_is_transient(&r, XFER_FAIL_RESOURCE));
	retry_attempt_end(&r, "", XFER_FAIL_CONNECT, 0);
	CHECK(r.rdma_lost);
	retry_attempt_begin(&r);
	retry_attempt_end(&r, "tcp", XFER_FAIL_PEER_LOST, -ECONNRESET);
	CHECK(r.rdma_lost);
	/* Port down: the link is cut, retried as ever; the path is gone. */
	retry_init(&r, 3, 0);
	retry_attempt_begin(&r);
	retry_attempt_end(&r, "rdma", XFER_FAIL_PEER_LOST, -ENETDOWN);
	CHECK(r.rdma_gone);
	CHECK(retry_is_transient(&r, XFER_FAIL_PEER_LOST));
	/* A whole attempt over RDMA that worked: nothing lost. */
	retry_init(&r, 3, 0);
	retry_attempt_begin(&r);
	retry_attempt_end(&r, "rdma", XFER_OK, 0);
	CHECK(!r.rdma_gone);
	CHECK(!r.rdma_lost);
	retry_release(&r);
}

static void test_files_across_attempts(void)
{
	struct retry r;
	struct xfer_file_report f;

	retry_init(&r, 3, 0);
	retry_attempt_begin(&r);
	/* attempt 1: a copied, b there already, c cut off, d in flight
	 * but never reported */
	f = start("a");
	CHECK(!retry_file(&r, &f));
	f = done("a", 0, XFER_OK, false);
	CHECK(retry_file(&r, &f));
	f = start("b");
	retry_file(&r, &f);
	f = done("b", 0, XFER_OK, true);
	CHECK(!retry_file(&r, &f));
	f = start("c");
	retry_file(&r, &f);
	f = start("d");
	retry_file(&r, &f);
	CHECK_EQ(r.kept_ours, 0);

	/* attempt 2: a, b and c kept; d copied */
	retry_attempt_begin(&r);
	f = start("a");
	retry_file(&r, &f);
	f = done("a", 0, XFER_OK, true);
	CHECK(!retry_file(&r, &f)); /* noted in attempt 1 */
	f = start("b");
	retry_file(&r, &f);
	f = done("b", 0, XFER_OK, true);
	CHECK(!retry_file(&r, &f)); /* not ours */
	f = start("c");
	retry_file(&r, &f);
	f = done("c", 0, XFER_OK, true);
	CHECK(retry_file(&r, &f)); /* attempt 1 placed it, unreported */
	f = start("d");
	retry_file(&r, &f);
	f = done("d", 0, XFER_OK, false);
	CHECK(retry_file(&r, &f));
	CHECK_EQ(r.kept_ours, 2); /* a and c */

	/* attempt 3: a copied again (it changed): noted once all the same */
	retry_attempt_begin(&r);
	CHECK_EQ(r.kept_ours, 0);
	f = start("a");
	retry_file(&r, &f);
	f = done("a", 0, XFER_OK, false);
	CHECK(!retry_file(&r, &f));
	/* directories and symlinks are not the manifest's */
	f = done("dir", 0, XFER_OK, false);
	f.kind = "dir";
	CHECK(!retry_file(&r, &f));
	CHECK_EQ(r.names.n, 4);
	retry_release(&r);
}

/* Many names: the table grows and still finds each. */
static void test_many_names(void)
{
	struct retry r;
	char name[32];
	size_t noted = 0;

	retry_init(&r, 1, 0);
	retry_attempt_begin(&r);
	for (int i = 0; i < 20000; i++) {
		struct xfer_file_report f;

		snprintf(name, sizeof(name), "f%d", i);
		f = done(name, 0, XFER_OK, false);
		noted += retry_file(&r, &f);
	}
	retry_attempt_begin(&r);
	for (int i = 0; i < 20000; i++) {
		struct xfer_file_report f;

		snprintf(name, sizeof(name), "f%d", i);
		f = done(name, 0, XFER_OK, true);
		noted += retry_file(&r, &f);
	}
	CHECK_EQ(noted, 20000);
	CHECK_EQ(r.kept_ours, 20000);
	CHECK_EQ(r.names.n, 20000);
	CHECK(2 * r.names.n <= r.names.cap);
	retry_release(&r);
}

static volatile sig_atomic_t flag;

static void on_term(int sig)
{
	flag = sig;
}

/* Blocks every signal here, so the process's SIGTERM goes to the sleeper. */
static void *send_term(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	usleep(100000);
	kill(getpid(), SIGTERM);
	return NULL;
}

static void test_sleep(void)
{
	struct sigaction sa = { .sa_handler = on_term }, old;
	pthread_t t;
	double t0;

	flag = 0;
	t0 = clock_now_s();
	CHECK_EQ(retry_sleep(150, &flag), 0);
	CHECK(clock_now_s() - t0 >= 0.149);
	flag = SIGINT; /* set before: no wait at all */
	t0 = clock_now_s();
	CHECK_EQ(retry_sleep(5000, &flag), -EINTR);
	CHECK(clock_now_s() - t0 < 0.1);
	/* a SIGTERM 100 ms into a 10 s wait ends it */
	flag = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, &old);
	t0 = clock_now_s();
	CHECK_EQ(pthread_create(&t, NULL, send_term, NULL), 0);
	CHECK_EQ(retry_sleep(10000, &flag), -EINTR);
	CHECK(clock_now_s() - t0 < 2);
	CHECK_EQ(flag, SIGTERM);
	pthread_join(t, NULL);
	sigaction(SIGTERM, &old, NULL);
}

/*
 * Reads stream to its end, as the walk reads a list that may have no name
 * yet (EAGAIN: looked at again, 2 s at most).
 */
static size_t slurp(FILE *f, char *buf, size_t cap)
{
	size_t n = 0;
	int c, waits = 0;

	while (n + 1 < cap) {
		c = getc(f);
		if (c != EOF) {
			buf[n++] = (char)c;
			continue;
		}
		if (!ferror(f) || errno != EAGAIN || ++waits > 2000)
			break;
		clearerr(f);
		usleep(1000);
	}
	buf[n] = '\0';
	return n;
}

/* The next line of stream into line, as slurp waits for it: 0 or -1. */
static int next_line(FILE *f, char *line, int cap)
{
	for (int waits = 0; waits < 2000; waits++) {
		if (fgets(line, cap, f))
			return 0;
		if (!ferror(f) || errno != EAGAIN)
			return -1;
		clearerr(f);
		usleep(1000);
	}
	return -1;
}

/*
 * A list from a pipe with --retry: spooled, each attempt from its start;
 * while the writer is silent the stream says EAGAIN (the walk looks again
 * later) instead of blocking the session, and only between two names.
 */
static void test_list_pipe(void)
{
	struct retry_list l;
	char buf[256], line[64] = { 0 };
	int fd[2];
	FILE *src, *s;

	CHECK_EQ(pipe(fd), 0);
	CHECK_EQ(write(fd[1], "a\nb\n", 4), 4);
	src = fdopen(fd[0], "r");
	CHECK_EQ(retry_list_init(&l, src, '\n'), 0);
	CHECK(l.spool != NULL);
	CHECK(l.lq != NULL); /* a pipe: read by a thread */
	/* attempt 1 reads a name, then fails */
	s = retry_list_stream(&l);
	CHECK(s != NULL && next_line(s, line, sizeof(line)) == 0);
	CHECK(!strcmp(line, "a\n"));
	/* attempt 2: from the start, and on as the writer goes on */
	s = retry_list_stream(&l);
	CHECK(s != NULL && next_line(s, line, sizeof(line)) == 0);
	CHECK(!strcmp(line, "a\n"));
	CHECK(next_line(s, line, sizeof(line)) == 0);
	CHECK(!strcmp(line, "b\n"));
	/* the writer is silent: no name yet, and no block */
	CHECK(fgets(line, sizeof(line), s) == NULL);
	CHECK(ferror(s) && errno == EAGAIN);
	clearerr(s);
	CHECK_EQ(write(fd[1], "c", 1), 1); /* half a name: still none */
	usleep(50 * 1000);
	CHECK(fgets(line, sizeof(line), s) == NULL);
	CHECK(ferror(s) && errno == EAGAIN);
	clearerr(s);
	CHECK_EQ(write(fd[1], "\n", 1), 1);
	close(fd[1]);
	slurp(s, buf, sizeof(buf));
	CHECK(!strcmp(buf, "c\n"));
	/* attempt 3: all of it, the pipe at its end */
	s = retry_list_stream(&l);
	slurp(s, buf, sizeof(buf));
	CHECK(!strcmp(buf, "a\nb\nc\n"));
	retry_list_release(&l);
	fclose(src);
}

static void test_list_file(void)
{
	struct retry_list l;
	char buf[256], path[] = "/tmp/rdcp-test-retry.XXXXXX";
	int fd = mkstemp(path);
	FILE *src, *s;

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "x\0y\0", 4), 4);
	close(fd);
	src = fopen(path, "r");
	unlink(path);
	CHECK(src != NULL && getc(src) == 'x'); /* read from offset 1 on */
	CHECK_EQ(retry_list_init(&l, src, '\n'), 0);
	CHECK(l.spool == NULL); /* a file is read again, not spooled */
	s = retry_list_stream(&l);
	CHECK(s == src);
	CHECK_EQ(slurp(s, buf, sizeof(buf)), 3);
	s = retry_list_stream(&l);
	CHECK_EQ(slurp(s, buf, sizeof(buf)), 3);
	CHECK(!memcmp(buf, "\0y\0", 3));
	retry_list_release(&l);
	fclose(src);
}

int main(int argc, char **argv)
{
	static const struct tap_test tests[] = {
		TAP_TEST(test_parse_wait),
		TAP_TEST(test_wait_backoff),
		TAP_TEST(test_transient),
		TAP_TEST(test_rdma_gone),
		TAP_TEST(test_files_across_attempts),
		TAP_TEST(test_many_names),
		TAP_TEST(test_sleep),
		TAP_TEST(test_list_pipe),
		TAP_TEST(test_list_file),
	};

	return tap_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
