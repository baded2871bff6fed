/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Fuzz target for untrusted peer paths (util/path.h). The input is the
 * path; bit 0 of its first byte chooses allow_empty (an empty input tries
 * both). When path_check_relative() accepts, the target checks every
 * promise of path.h against an independent reading of the rules, then
 * opens the path with path_open_beneath(O_RDONLY | O_PATH) in a scratch
 * root holding directories, files and symlinks (one of them "out -> /"):
 * an fd it returns must be no symlink, must be exactly ROOT/path (no link
 * was followed, nothing left the root) and a directory if the path ends in
 * '/'. Any broken promise calls abort().
 *
 * RDCP_FUZZ_PATH_WALK=1 in the environment makes openat2(2) fail with
 * ENOSYS (a seccomp filter), so the O_NOFOLLOW component walk that kernels
 * before 5.6 get is fuzzed instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/path.h"
#include "fuzz.h"

static char root[PATH_MAX];
static size_t root_len;
static int root_fd = -1;

static void rm_root(void);

static void fail(const char *what, const char *path)
{
	fprintf(stderr, "fuzz_path: %s: \"%s\"\n", what, path ? path : "");
	rm_root();
	abort();
}

/* ---- the openat2 switch ---- */

/*
 * A seccomp filter that fails openat2(2) with ENOSYS, as a kernel before
 * 5.6 does; path_open_beneath() then falls back to its walk for good.
 */
static void no_openat2(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(filter) / sizeof(filter[0]),
		.filter = filter,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0))
		fail("cannot install the openat2 seccomp filter", NULL);
}

/* ---- the scratch root ---- */

static void rm_root(void)
{
	static const char *const links[] = { "out", "lnk", "dl", "d/up",
					     "d/loop", "d/e/abs" };
	static const char *const files[] = { "f", "d/g" };
	static const char *const dirs[] = { "d/e", "d" };
	char p[PATH_MAX + 16];
	size_t i;

	if (!root_len) /* never made, or removed already */
		return;
	if (root_fd >= 0)
		close(root_fd);
	root_fd = -1;
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, links[i]);
		unlink(p);
	}
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, files[i]);
		unlink(p);
	}
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		rmdir(p);
	}
	rmdir(root);
	root_len = 0;
}

static void mk_root(void)
{
	char tmpl[] = "/tmp/rdcp-fuzz-path.XXXXXX";
	int fd;
	const char *walk = getenv("RDCP_FUZZ_PATH_WALK");

	if (walk && !strcmp(walk, "1"))
		no_openat2();
	if (!mkdtemp(tmpl) || !realpath(tmpl, root))
		fail("cannot make the scratch root", tmpl);
	root_len = strlen(root);
	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0 || mkdirat(root_fd, "d", 0755) ||
	    mkdirat(root_fd, "d/e", 0755) ||
	    symlinkat("/", root_fd, "out") || symlinkat("d", root_fd, "lnk") ||
	    symlinkat("f", root_fd, "dl") || symlinkat("..", root_fd, "d/up") ||
	    symlinkat("../out", root_fd, "d/loop") ||
	    symlinkat("/etc", root_fd, "d/e/abs"))
		fail("cannot fill the scratch root", root);
	fd = openat(root_fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("cannot fill the scratch root", root);
	close(fd);
	fd = openat(root_fd, "d/g", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("cannot fill the scratch root", root);
	close(fd);
	atexit(rm_root);
}

/* ---- the checks ---- */

/* path.h's rules, read independently of path.c: true if p is valid. */
static bool rules_accept(const char *p, size_t len, bool allow_empty)
{
	size_t i, start, n;

	if (!len)
		return allow_empty;
	if (len > PATH_PEER_MAX || memchr(p, '\0', len) || p[0] == '/')
		return false;
	if (p[len - 1] == '/')
		len--; /* one trailing '/'; "a//" leaves an empty component */
	start = 0;
	for (i = 0; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		n = i - start;
		if (n == 0 || n > PATH_NAME_MAX)
			return false;
		if ((n == 1 && p[start] == '.') ||
		    (n == 2 && p[start] == '.' && p[start + 1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}

/* The fd must be ROOT/rel exactly (rel without its trailing '/'). */
static void check_fd(int fd, const char *rel, size_t len)
{
	char proc[64], got[PATH_MAX + 1];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st))
		fail("fstat of a returned fd failed", rel);
	if (S_ISLNK(st.st_mode))
		fail("returned an fd on a symlink", rel);
	if (rel[len - 1] == '/') {
		if (!S_ISDIR(st.st_mode))
			fail("\"name/\" opened a non-directory", rel);
		len--;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, got, sizeof(got) - 1);
	if (n < 0)
		fail("readlink of a returned fd failed", rel);
	got[n] = '\0';
	if ((size_t)n < root_len || memcmp(got, root, root_len) ||
	    (got[root_len] != '/' && got[root_len] != '\0'))
		fail("opened outside the root", got);
	if ((size_t)n != root_len + 1 + len || got[root_len] != '/' ||
	    memcmp(got + root_len + 1, rel, len))
		fail("opened something other than ROOT/path (followed a link?)",
		     got);
}

static void one(const uint8_t *data, size_t size, bool allow_empty)
{
	const char *p = (const char *)data;
	char *rel;
	int ret, fd;

	ret = path_check_relative(p, size, allow_empty);
	if (ret != 0 && ret != -EPERM && ret != -ENAMETOOLONG)
		fail("unexpected return from path_check_relative", NULL);
	if ((ret == 0) != rules_accept(p, size, allow_empty))
		fail(ret ? "rejected a valid path" : "accepted an invalid path",
		     NULL);
	if (ret || !size)
		return;

	rel = malloc(size + 1);
	if (!rel)
		return;
	memcpy(rel, data, size);
	rel[size] = '\0';
	fd = path_open_beneath(root_fd, rel, O_RDONLY | O_PATH, 0);
	if (fd >= 0) {
		check_fd(fd, rel, size);
		close(fd);
	} else if (fd == -EPERM || fd == -ENAMETOOLONG) {
		/* it passed the same check a moment ago */
		fail("path_open_beneath rejected a checked path", rel);
	}
	free(rel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (root_fd < 0)
		mk_root();
	if (!size) {
		one(data, 0, false);
		one(data, 0, true);
		return 0;
	}
	one(data, size, data[0] & 1);
	return 0;
}
