/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for cmd/json_out.c, --json's writer: to a pipe every event
 * is there as soon as it is written; to a regular file the per-file
 * events wait in stdio's buffer (a re-run of 100,000 files wrote 200,000
 * lines, each its own write(2) before) until an event that is not a
 * file's (the summary, an error, an attempt) flushes them all, in order.
 */
#include "tap.h"

#include "cmd/json_out.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct xfer_file_report START = {
	.path = "tree/f",
	.kind = "file",
	.bytes = 1024,
};

static const struct xfer_file_report DONE = {
	.done = true,
	.path = "tree/f",
	.kind = "file",
	.bytes = 1024,
	.skipped = true,
	.reason = "mtime",
	.digest = "",
	.algorithm = "crc32",
};

static long file_size(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? -1 : (long)st.st_size;
}

static void test_file_in_blocks(void)
{
	char path[] = "/tmp/rdcp-test-json.XXXXXX";
	struct xfer_stats st = { .transport = "tcp", .device = "tcp" };
	int fd = mkstemp(path), pfd[2];
	FILE *f, *p;
	char buf[4096];
	ssize_t n;
	int lines = 0;

	CHECK(fd >= 0);
	CHECK_EQ(pipe(pfd), 0);
	f = fdopen(fd, "w");
	p = fdopen(pfd[1], "w");
	CHECK(f != NULL && p != NULL);
	if (!f || !p)
		return;
	/* a pipe: each line at once */
	json_file(p, &START);
	CHECK_EQ(fcntl(pfd[0], F_SETFL, O_NONBLOCK), 0);
	n = read(pfd[0], buf, sizeof(buf) - 1);
	CHECK(n > 0 && buf[n - 1] == '\n');
	/* a regular file: the file events wait for the summary */
	for (int i = 0; i < 3; i++) {
		json_file(f, &START);
		json_file(f, &DONE);
	}
	CHECK_EQ(file_size(fd), 0);
	json_summary(f, &st, XFER_OK, 0, false, 0);
	CHECK(file_size(fd) > 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	for (char *s = buf; (s = strchr(s, '\n')); s++)
		lines++;
	CHECK_EQ(lines, 7);
	CHECK(strstr(buf, "\"summary\"") > strstr(buf, "file_done"));
	fclose(f);
	fclose(p);
	close(pfd[0]);
	unlink(path);
}

TAP_RUN(TAP_TEST(test_file_in_blocks))
