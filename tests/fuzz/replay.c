/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Runs one fuzz target (linked in: fuzz_wire.c or fuzz_path.c) over every
 * file given on the command line, or every file of a directory given, in
 * name order, without libFuzzer: `make tests` builds it with the ordinary
 * compiler and run_tests.sh replays the committed corpora. Each input runs
 * in a forked child, so an abort(), a sanitizer report or a signal is one
 * "not ok" line naming the file, and the rest still run. Prints TAP and a
 * closing "N passed, N failed"; exits 1 on any failure or with no input.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

#define REPLAY_TIMEOUT 20 /* seconds per input */

static int passed, failed, count;

static int read_file(const char *path, uint8_t **data, size_t *size)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 4096, n = 0, got;
	uint8_t *buf = malloc(cap), *nbuf;

	if (!f || !buf)
		goto err;
	while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			nbuf = realloc(buf, cap * 2);
			if (!nbuf)
				goto err;
			buf = nbuf;
			cap *= 2;
		}
	}
	if (ferror(f))
		goto err;
	fclose(f);
	/* exactly size bytes, so ASan builds catch a read past the end */
	*data = malloc(n ? n : 1);
	if (!*data) {
		free(buf);
		return -ENOMEM;
	}
	memcpy(*data, buf, n);
	free(buf);
	*size = n;
	return 0;
err:
	if (f)
		fclose(f);
	free(buf);
	return -EIO;
}

static void run_one(const char *path)
{
	uint8_t *data;
	size_t size;
	pid_t pid;
	int st;

	count++;
	if (read_file(path, &data, &size)) {
		printf("not ok %d - %s (cannot read)\n", count, path);
		failed++;
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		alarm(REPLAY_TIMEOUT);
		LLVMFuzzerTestOneInput(data, size);
		free(data);
		exit(0);
	}
	free(data);
	if (pid < 0 || waitpid(pid, &st, 0) != pid) {
		printf("not ok %d - %s (fork/wait failed)\n", count, path);
		failed++;
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		printf("ok %d - %s\n", count, path);
		passed++;
	} else if (WIFSIGNALED(st)) {
		printf("not ok %d - %s (signal %d%s)\n", count, path,
		       WTERMSIG(st),
		       WTERMSIG(st) == SIGALRM ? ": timeout" : "");
		failed++;
	} else {
		printf("not ok %d - %s (exit status %d)\n", count, path,
		       WEXITSTATUS(st));
		failed++;
	}
}

static int skip_dot(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static void run_dir(const char *dir)
{
	struct dirent **ents;
	char path[4096];
	struct stat st;
	int n, i;

	n = scandir(dir, &ents, skip_dot, alphasort);
	if (n < 0) {
		printf("not ok %d - %s (cannot list: %s)\n", ++count, dir,
		       strerror(errno));
		failed++;
		return;
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		if (!stat(path, &st) && S_ISREG(st.st_mode))
			run_one(path);
		free(ents[i]);
	}
	free(ents);
}

int main(int argc, char **argv)
{
	struct stat st;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		if (!stat(argv[i], &st) && S_ISDIR(st.st_mode))
			run_dir(argv[i]);
		else
			run_one(argv[i]);
	}
	if (!count) {
		printf("not ok 1 - no inputs under the given paths\n");
		failed++;
	}
	printf("1..%d\n", count ? count : 1);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
