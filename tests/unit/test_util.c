/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for util/: checksums against known vectors, full-length file
 * I/O (including offsets past 4 GiB on a sparse file), the peer path checks
 * and beneath-root opens (symlinks, "..", creation), path helpers, unit
 * parsing and printing, the monotonic clock and the logger's line format.
 */
#include "tap.h"

#include "util/aclid.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/hostlist.h"
#include "util/hset.h"
#include "util/io.h"
#include "util/lineq.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"
#include "util/workq.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static int rm_one(const char *p, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(p);
}

/* A fresh temp directory per test; returns a directory fd for it. */
static int tmp_setup(void)
{
	strcpy(tmpdir, "/tmp/rdcp-test-util.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void tmp_cleanup(int dirfd)
{
	if (dirfd >= 0)
		close(dirfd);
	nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_crc32_vector(void)
{
	CHECK_EQ(ck_crc32(0, "123456789", 9), 0xCBF43926u);
	CHECK_EQ(ck_crc32(0, "", 0), 0);
	/* continuing from a previous crc equals one pass */
	CHECK_EQ(ck_crc32(ck_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

static void test_crc32_combine(void)
{
	static uint8_t buf[10000];
	uint32_t whole;
	static const size_t splits[] = { 0, 1, 7, 4096, 5000, 9999, 10000 };

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 7));
	whole = ck_crc32(0, buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
		size_t k = splits[i];
		uint32_t a = ck_crc32(0, buf, k);
		uint32_t b = ck_crc32(0, buf + k, sizeof(buf) - k);

		CHECK_EQ(ck_crc32_combine(a, b, sizeof(buf) - k), whole);
	}
}

static void test_sha256_vectors(void)
{
	uint8_t d[CK_SHA256_LEN];
	char hex[2 * CK_SHA256_LEN + 1];

	CHECK_EQ(ck_sha256("", 0, d), 0);
	CHECK(!strcmp(checksum_hex(d, sizeof(d), hex),
		      "e3b0c44298fc1c149afbf4c8996fb924"
		      "27ae41e4649b934ca495991b7852b855"));
	CHECK_EQ(ck_sha256("abc", 3, d), 0);
	CHECK(!strcmp(checksum_hex(d, sizeof(d), hex),
		      "ba7816bf8f01cfea414140de5dae2223"
		      "b00361a396177a9cb410ff61f20015ad"));
}

static void test_sha256_incremental(void)
{
	static uint8_t buf[100000];
	uint8_t one[CK_SHA256_LEN], inc[CK_SHA256_LEN];
	struct ck_sha256 *ctx = NULL;
	size_t off = 0, step = 1;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i ^ (i >> 8));
	CHECK_EQ(ck_sha256(buf, sizeof(buf), one), 0);
	CHECK_EQ(ck_sha256_create(&ctx), 0);
	if (!ctx)
		return;
	while (off < sizeof(buf)) {
		size_t n = sizeof(buf) - off < step ? sizeof(buf) - off : step;

		CHECK_EQ(ck_sha256_update(ctx, buf + off, n), 0);
		off += n;
		step = step * 3 + 1;
	}
	CHECK_EQ(ck_sha256_update(ctx, buf, 0), 0);
	CHECK_EQ(ck_sha256_final(ctx, inc), 0);
	CHECK(!memcmp(one, inc, sizeof(one)));
	/* final resets the context for reuse */
	CHECK_EQ(ck_sha256_update(ctx, "abc", 3), 0);
	CHECK_EQ(ck_sha256_final(ctx, inc), 0);
	CHECK_EQ(ck_sha256("abc", 3, one), 0);
	CHECK(!memcmp(one, inc, sizeof(one)));
	ck_sha256_destroy(ctx);
	ck_sha256_destroy(NULL);
}

static void test_hex(void)
{
	static const uint8_t b[] = { 0x00, 0x01, 0xab, 0xff, 0x5a };
	char out[2 * sizeof(b) + 1];

	CHECK(checksum_hex(b, sizeof(b), out) == out);
	CHECK(!strcmp(out, "0001abff5a"));
	CHECK(!strcmp(checksum_hex(b, 0, out), ""));
}

static void test_pread_short(void)
{
	int dirfd = tmp_setup(), fd;
	char buf[16];

	CHECK(dirfd >= 0);
	fd = openat(dirfd, "f", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(io_pwrite_full(fd, "hello", 5, 0), 0);
	CHECK_EQ(io_pread_full(fd, buf, 5, 0), 0);
	CHECK(!memcmp(buf, "hello", 5));
	CHECK_EQ(io_pread_full(fd, buf, 6, 0), -ENODATA);
	CHECK_EQ(io_pread_full(fd, buf, 1, 5), -ENODATA);
	CHECK_EQ(io_pread_full(fd, buf, 0, 100), 0);
	CHECK_EQ(io_pread_full(-1, buf, 1, 0), -EBADF);
	CHECK_EQ(io_close(fd), 0);
	CHECK_EQ(io_close(fd), -EBADF);
	tmp_cleanup(dirfd);
}

static void test_pio_beyond_4g(void)
{
	const uint64_t off = (5ull << 30) + 12345;
	int dirfd = tmp_setup(), fd;
	char in[4096], out[4096];
	struct stat st;

	CHECK(dirfd >= 0);
	fd = openat(dirfd, "sparse", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7);
	CHECK_EQ(io_pwrite_full(fd, in, sizeof(in), off), 0);
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK_EQ(st.st_size, off + sizeof(in));
	CHECK_EQ(io_pread_full(fd, out, sizeof(out), off), 0);
	CHECK(!memcmp(in, out, sizeof(in)));
	/* the hole before it reads as zeros */
	CHECK_EQ(io_pread_full(fd, out, 16, 4ull << 30), 0);
	CHECK(!memcmp(out, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16));
	CHECK_EQ(io_pread_full(fd, out, 2, off + sizeof(in) - 1), -ENODATA);
	CHECK_EQ(io_close(fd), 0);
	tmp_cleanup(dirfd);
}

static void test_stream_io(void)
{
	int p[2];
	char buf[8];

	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(io_write_full(p[1], "abcdef", 6), 0);
	CHECK_EQ(io_read_full(p[0], buf, 4), 0);
	CHECK(!memcmp(buf, "abcd", 4));
	CHECK_EQ(io_read_full(p[0], buf, 0), 0);
	CHECK_EQ(io_close(p[1]), 0);
	CHECK_EQ(io_read_full(p[0], buf, 4), -ECONNRESET);
	CHECK_EQ(io_read_full(p[0], buf, 0), 0);
	CHECK_EQ(io_close(p[0]), 0);
}

static void test_check_relative(void)
{
	static char big[PATH_PEER_MAX + 2];
	static char name[PATH_NAME_MAX + 2];
	static const struct {
		const char *p;
		int ret;
	} t[] = {
		{ "a", 0 },	      { "a/b/c.txt", 0 },
		{ "a/", 0 },	      { "...", 0 },
		{ "..a", 0 },	      { "a.", 0 },
		{ ".hidden/x", 0 },   { "/etc/passwd", -EPERM },
		{ "/", -EPERM },      { "..", -EPERM },
		{ "../x", -EPERM },   { "a/..", -EPERM },
		{ "a/../b", -EPERM }, { "a//b", -EPERM },
		{ "a//", -EPERM },    { "//", -EPERM },
		{ ".", -EPERM },      { "./a", -EPERM },
		{ "a/./b", -EPERM },  { "a/.", -EPERM },
		{ "./", -EPERM },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int ret = path_check_relative(t[i].p, strlen(t[i].p), false);

		if (ret != t[i].ret)
			printf("#   path \"%s\": %d\n", t[i].p, ret);
		CHECK_EQ(ret, t[i].ret);
	}

	CHECK_EQ(path_check_relative("", 0, false), -EPERM);
	CHECK_EQ(path_check_relative("", 0, true), 0);
	CHECK_EQ(path_check_relative("a\0b", 3, false), -EPERM);
	CHECK_EQ(path_check_relative("ab\0", 3, false), -EPERM);
	CHECK_EQ(path_check_relative("ab\0", 2, false), 0);

	memset(name, 'n', PATH_NAME_MAX);
	CHECK_EQ(path_check_relative(name, PATH_NAME_MAX, false), 0);
	name[PATH_NAME_MAX] = 'n';
	CHECK_EQ(path_check_relative(name, PATH_NAME_MAX + 1, false),
		 -ENAMETOOLONG);

	/* "aaaa/aaaa/..." exactly PATH_PEER_MAX long, then one more */
	memset(big, 'a', sizeof(big) - 1);
	for (i = 4; i < sizeof(big) - 1; i += 5)
		big[i] = '/';
	big[PATH_PEER_MAX - 1] = 'a';
	CHECK_EQ(path_check_relative(big, PATH_PEER_MAX, false), 0);
	CHECK_EQ(path_check_relative(big, PATH_PEER_MAX + 1, false),
		 -ENAMETOOLONG);
}

static void test_open_beneath(void)
{
	int dirfd = tmp_setup(), fd, root;
	char buf[8];

	CHECK(dirfd >= 0);
	CHECK_EQ(mkdirat(dirfd, "root", 0700), 0);
	CHECK_EQ(mkdirat(dirfd, "root/a", 0700), 0);
	CHECK_EQ(mkdirat(dirfd, "root/a/b", 0700), 0);
	CHECK_EQ(mkdirat(dirfd, "outside", 0700), 0);
	fd = openat(dirfd, "root/a/b/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(io_write_full(fd, "data", 4), 0);
	CHECK_EQ(io_close(fd), 0);
	fd = openat(dirfd, "outside/secret", O_WRONLY | O_CREAT | O_CLOEXEC,
		    0600);
	CHECK(fd >= 0);
	CHECK_EQ(io_close(fd), 0);
	CHECK_EQ(symlinkat("../../outside", dirfd, "root/a/esc"), 0);
	CHECK_EQ(symlinkat("b", dirfd, "root/a/inner"), 0);
	CHECK_EQ(symlinkat("b/f", dirfd, "root/a/flink"), 0);

	root = openat(dirfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(root >= 0);

	/* a normal nested file */
	fd = path_open_beneath(root, "a/b/f", O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ(io_pread_full(fd, buf, 4, 0), 0);
		CHECK(!memcmp(buf, "data", 4));
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		CHECK_EQ(io_close(fd), 0);
	}
	fd = path_open_beneath(root, "a/b/", O_RDONLY | O_DIRECTORY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		CHECK_EQ(io_close(fd), 0);

	/* symlinks: out of the root, and even ones staying inside */
	CHECK_EQ(path_open_beneath(root, "a/esc/secret", O_RDONLY, 0), -ELOOP);
	CHECK_EQ(path_open_beneath(root, "a/inner/f", O_RDONLY, 0), -ELOOP);
	CHECK_EQ(path_open_beneath(root, "a/flink", O_RDONLY, 0), -ELOOP);
	CHECK_EQ(path_open_beneath(root, "a/esc", O_RDONLY | O_DIRECTORY, 0),
		 -ELOOP);
	CHECK_EQ(path_open_beneath(root, "a/esc/new",
				   O_WRONLY | O_CREAT | O_EXCL, 0600),
		 -ELOOP);
	CHECK_EQ(faccessat(dirfd, "outside/new", F_OK, 0), -1);

	/* ".." and absolute paths */
	CHECK_EQ(path_open_beneath(root, "..", O_RDONLY, 0), -EXDEV);
	CHECK_EQ(path_open_beneath(root, "../outside/secret", O_RDONLY, 0),
		 -EXDEV);
	CHECK_EQ(path_open_beneath(root, "a/../../outside/secret", O_RDONLY, 0),
		 -EXDEV);
	CHECK_EQ(path_open_beneath(root, "/etc/passwd", O_RDONLY, 0), -EXDEV);
	CHECK(path_open_beneath(root, "a//b/f", O_RDONLY, 0) < 0);

	/* creation, with the mode honoured */
	fd = path_open_beneath(root, "a/b/new", O_WRONLY | O_CREAT | O_EXCL,
			       0640);
	CHECK(fd >= 0);
	if (fd >= 0) {
		struct stat st;

		CHECK_EQ(fstat(fd, &st), 0);
		CHECK(S_ISREG(st.st_mode));
		CHECK_EQ(st.st_mode & 0777 & ~0640, 0);
		CHECK_EQ(io_close(fd), 0);
	}
	CHECK_EQ(faccessat(dirfd, "root/a/b/new", F_OK, 0), 0);
	CHECK_EQ(path_open_beneath(root, "a/b/new", O_WRONLY | O_CREAT | O_EXCL,
				   0640),
		 -EEXIST);
	CHECK_EQ(path_open_beneath(root, "a/missing/x", O_RDONLY, 0), -ENOENT);

	close(root);
	tmp_cleanup(dirfd);
}

static void test_mkdirs_beneath(void)
{
	int dirfd = tmp_setup(), fd;
	struct stat st;

	CHECK(dirfd >= 0);
	CHECK_EQ(mkdirat(dirfd, "outside", 0700), 0);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/y/z", 0755), 0);
	CHECK_EQ(fstatat(dirfd, "x/y/z", &st, AT_SYMLINK_NOFOLLOW), 0);
	CHECK(S_ISDIR(st.st_mode));
	/* again: everything exists already */
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/y/z/", 0755), 0);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/y/w", 0755), 0);
	CHECK_EQ(fstatat(dirfd, "x/y/w", &st, AT_SYMLINK_NOFOLLOW), 0);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "", 0755), 0);

	/* a symlink on the way, to outside or inside, is refused */
	CHECK_EQ(symlinkat("../outside", dirfd, "x/link"), 0);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/link/evil", 0755), -ELOOP);
	CHECK_EQ(fstatat(dirfd, "outside/evil", &st, AT_SYMLINK_NOFOLLOW), -1);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/link", 0755), -ELOOP);
	CHECK_EQ(symlinkat("y", dirfd, "x/ylink"), 0);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/ylink/q", 0755), -ELOOP);

	/* a file in the way */
	fd = openat(dirfd, "x/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(io_close(fd), 0);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/file/q", 0755), -ENOTDIR);

	CHECK_EQ(path_mkdirs_beneath(dirfd, "../escape", 0755), -EXDEV);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "x/../../escape", 0755), -EXDEV);
	CHECK_EQ(path_mkdirs_beneath(dirfd, "/tmp/escape", 0755), -EXDEV);
	tmp_cleanup(dirfd);
}

static void test_basename(void)
{
	CHECK(!strcmp(path_basename("a/b/c.txt"), "c.txt"));
	CHECK(!strcmp(path_basename("c.txt"), "c.txt"));
	CHECK(!strcmp(path_basename("/c"), "c"));
	CHECK(!strcmp(path_basename("a/b/"), ""));
	CHECK(!strcmp(path_basename(""), ""));
}

static void test_join(void)
{
	char out[8];

	CHECK_EQ(path_join(out, sizeof(out), "a", "b"), 0);
	CHECK(!strcmp(out, "a/b"));
	CHECK_EQ(path_join(out, sizeof(out), "a/", "b"), 0);
	CHECK(!strcmp(out, "a/b"));
	CHECK_EQ(path_join(out, sizeof(out), "", "b"), 0);
	CHECK(!strcmp(out, "b"));
	CHECK_EQ(path_join(out, sizeof(out), "a", ""), 0);
	CHECK(!strcmp(out, "a"));
	CHECK_EQ(path_join(out, sizeof(out), "a", "/b"), 0);
	CHECK(!strcmp(out, "a/b"));
	/* 7 characters fit in 8 bytes, 8 do not */
	CHECK_EQ(path_join(out, sizeof(out), "abc", "def"), 0);
	CHECK(!strcmp(out, "abc/def"));
	CHECK_EQ(path_join(out, sizeof(out), "abcd", "def"), -ENAMETOOLONG);
	CHECK(!strcmp(out, ""));
	CHECK_EQ(path_join(out, sizeof(out), "", "abcdefgh"), -ENAMETOOLONG);
	CHECK_EQ(path_join(out, 0, "", ""), -ENAMETOOLONG);
}

static void test_units_parse(void)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t v;
	} t[] = {
		{ "0", 0, 0 },
		{ "123", 0, 123 },
		{ "123B", 0, 123 },
		{ "4K", 0, 4096 },
		{ "4k", 0, 4096 },
		{ "4KiB", 0, 4096 },
		{ "4kib", 0, 4096 },
		{ "4KB", 0, 4000 },
		{ "1M", 0, 1ull << 20 },
		{ "1MiB", 0, 1ull << 20 },
		{ "2G", 0, 2ull << 30 },
		{ "1T", 0, 1ull << 40 },
		{ "1TB", 0, 1000000000000ull },
		{ "500MB", 0, 500000000ull },
		{ "1.5G", 0, 3ull << 29 },
		{ "1.5K", 0, 1536 },
		{ "0.1K", 0, 102 },
		{ "1.999", 0, 1 },
		{ "0.3333333333333333333333333M", 0, 349525 },
		{ "16777215.999999T", 0, 18446744073708452104ull },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "18446744073709551616", -ERANGE, 0 },
		{ "99999999999999999999999", -ERANGE, 0 },
		{ "16777216T", -ERANGE, 0 },
		{ "17179869184G", -ERANGE, 0 },
		{ "18446744073709551615.5", 0, UINT64_MAX },
		{ "18446744073709551615.5K", -ERANGE, 0 },
		{ "", -EINVAL, 0 },
		{ "abc", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 },
		{ "1X", -EINVAL, 0 },
		{ "1 G", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "1G ", -EINVAL, 0 },
		{ "1.", -EINVAL, 0 },
		{ ".5", -EINVAL, 0 },
		{ "1.G", -EINVAL, 0 },
		{ "1KK", -EINVAL, 0 },
		{ "1Ki", -EINVAL, 0 },
		{ "1iB", -EINVAL, 0 },
		{ "1P", -EINVAL, 0 },
		{ "K", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t v = 0xdead;
		int ret = units_parse_size(t[i].s, &v);

		if (ret != t[i].ret || (!ret && v != t[i].v))
			printf("#   \"%s\": %d %llu\n", t[i].s, ret,
			       (unsigned long long)v);
		CHECK_EQ(ret, t[i].ret);
		if (!ret && !t[i].ret)
			CHECK(v == t[i].v);
	}
}

static void test_units_format(void)
{
	static const struct {
		uint64_t b;
		const char *s;
	} sz[] = {
		{ 0, "0 B" },
		{ 1, "1 B" },
		{ 1023, "1023 B" },
		{ 1024, "1.00 KiB" },
		{ 1536, "1.50 KiB" },
		{ 4ull << 20, "4.00 MiB" },
		{ (1ull << 20) - 1, "1.00 MiB" },
		{ 3ull << 29, "1.50 GiB" },
		{ 1ull << 40, "1.00 TiB" },
		{ 1ull << 50, "1.00 PiB" },
		{ UINT64_MAX, "16384.00 PiB" },
	};
	static const struct {
		double r;
		const char *s;
	} rt[] = {
		{ 0, "0.0 B/s" },	  { -5, "0.0 B/s" },
		{ 999, "999.0 B/s" },	  { 1000, "1.0 kB/s" },
		{ 29.3e6, "29.3 MB/s" },  { 12.1e9, "12.1 GB/s" },
		{ 999.96e6, "1.0 GB/s" }, { 2.5e12, "2.5 TB/s" },
		{ 5e15, "5000.0 TB/s" },
	};
	char buf[32];

	for (size_t i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
		units_format_size(sz[i].b, buf, sizeof(buf));
		if (strcmp(buf, sz[i].s))
			printf("#   %llu: \"%s\"\n",
			       (unsigned long long)sz[i].b, buf);
		CHECK(!strcmp(buf, sz[i].s));
	}
	for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++) {
		CHECK(units_format_rate(rt[i].r, buf, sizeof(buf)) == buf);
		if (strcmp(buf, rt[i].s))
			printf("#   %g: \"%s\"\n", rt[i].r, buf);
		CHECK(!strcmp(buf, rt[i].s));
	}
	/* a short buffer truncates, still terminated */
	CHECK(!strcmp(units_format_size(4ull << 20, buf, 5), "4.00"));
}

static void test_clock(void)
{
	uint64_t prev = clock_now_ns(), ms = clock_now_ms();
	double s = clock_now_s();

	CHECK(prev > 0);
	for (int i = 0; i < 100000; i++) {
		uint64_t now = clock_now_ns();

		CHECK(now >= prev);
		prev = now;
	}
	CHECK(clock_now_ms() >= ms);
	CHECK(clock_now_s() >= s);
	CHECK(clock_now_ms() <= clock_now_ns() / 1000000 + 1);
	usleep(2000);
	CHECK(clock_now_ns() - prev >= 2000000);
}

/* Runs log_msg with stderr redirected to a pipe; returns what it wrote. */
static void log_capture(char *out, size_t outsz, enum log_level level,
			const char *msg)
{
	int p[2], saved;
	ssize_t n;

	out[0] = '\0';
	if (pipe(p))
		return;
	fflush(stderr);
	saved = dup(2);
	dup2(p[1], 2);
	errno = EAGAIN;
	log_msg(level, "%s", msg);
	CHECK_EQ(errno, EAGAIN);
	dup2(saved, 2);
	close(saved);
	close(p[1]);
	n = read(p[0], out, outsz - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
}

static void test_log(void)
{
	static char big[3000];
	char out[2048];

	CHECK_EQ(log_get_level(), LOG_WARN);
	CHECK(log_enabled(LOG_ERR));
	CHECK(log_enabled(LOG_WARN));
	CHECK(!log_enabled(LOG_INFO));

	log_capture(out, sizeof(out), LOG_ERR, "boom");
	CHECK(!strcmp(out, "rdcp: boom\n"));
	log_capture(out, sizeof(out), LOG_WARN, "hmm");
	CHECK(!strcmp(out, "rdcp: warning: hmm\n"));
	log_capture(out, sizeof(out), LOG_INFO, "quiet");
	CHECK(!strcmp(out, ""));

	log_set_level(LOG_DEBUG);
	log_capture(out, sizeof(out), LOG_INFO, "info");
	CHECK(!strcmp(out, "rdcp: info\n"));
	log_capture(out, sizeof(out), LOG_DEBUG, "dbg");
	CHECK(!strcmp(out, "rdcp: debug: dbg\n"));

	log_set_prefix("rdcpd");
	log_capture(out, sizeof(out), LOG_ERR, "x");
	CHECK(!strcmp(out, "rdcpd: x\n"));
	log_set_prefix("rdcp");

	memset(big, 'z', sizeof(big) - 1);
	log_capture(out, sizeof(out), LOG_ERR, big);
	CHECK(strlen(out) < 1100);
	CHECK(!strncmp(out, "rdcp: zzz", 9));
	CHECK(strlen(out) > 4 && !strcmp(out + strlen(out) - 4, "...\n"));

	log_set_level(LOG_QUIET);
	CHECK(!log_enabled(LOG_ERR));
	log_capture(out, sizeof(out), LOG_ERR, "silent");
	CHECK(!strcmp(out, ""));
	log_set_level(LOG_WARN);
}

/* A name with control bytes cannot forge a log line or drive a terminal. */
static void test_log_escape(void)
{
	char out[2048], small[8];

	log_capture(out, sizeof(out), LOG_ERR,
		    "'a\nrdcp: session from 10.0.0.9 ok\x1b]0;pwn\x07\x7f'");
	CHECK(!strcmp(out, "rdcp: 'a\\x0ardcp: session from 10.0.0.9 ok"
			   "\\x1b]0;pwn\\x07\\x7f'\n"));
	CHECK_EQ(strchr(out, '\n') - out, (long)strlen(out) - 1);
	/* UTF-8 stays; the C1 CSI (U+009B) as UTF-8 does not. */
	log_capture(out, sizeof(out), LOG_ERR,
		    "caf\xc3\xa9 \xc2\x9b"
		    "2J");
	CHECK(!strcmp(out, "rdcp: caf\xc3\xa9 \\u009b2J\n"));
	/*
	 * Not UTF-8 is a byte each: a bare C1 CSI (an 8-bit terminal acts on
	 * it), an overlong '/', a surrogate, a sequence cut by the end. The
	 * bidi override U+202E and the line separator U+2028 are escaped; a
	 * 4-byte emoji and CJK stay.
	 */
	log_capture(out, sizeof(out), LOG_ERR,
		    "\x9b"
		    "2J \xc0\xaf \xed\xa0\x80 \xe2\x80\xae"
		    "txt.exe \xe2\x80\xa8 \xf0\x9f\x98\x80 \xe6\x97\xa5 \xe2\x80");
	CHECK(!strcmp(out, "rdcp: \\x9b2J \\xc0\\xaf \\xed\\xa0\\x80 \\u202etxt.exe "
			   "\\u2028 \xf0\x9f\x98\x80 \xe6\x97\xa5 \\xe2\\x80\n"));
	/* Cut at a whole escape, always terminated. */
	CHECK_EQ(log_escape(small, 5,
			    "ab\x01"
			    "cd"),
		 2);
	CHECK(!strcmp(small, "ab"));
	CHECK_EQ(log_escape(small, sizeof(small), "abc"), 3);
}

/* DEST and SRC as people type them for a receiver's root. */
static void test_normalize_peer(void)
{
	static const struct {
		const char *in, *out;
		bool dir;
	} cases[] = {
		{ "", "", true },
		{ ".", "", true },
		{ "./", "", true },
		{ "/", "", true },
		{ "//", "", true },
		{ "./sub/", "sub", true },
		{ "sub/.", "sub", true },
		{ "sub/./", "sub", true },
		{ "./x", "x", false },
		{ "/a/b", "a/b", false },
		{ "a//b", "a/b", false },
		{ "a/./b/", "a/b", true },
		{ "../x", "../x", false },
		{ "a/..", "a/..", false },
		{ ".hidden", ".hidden", false },
		{ "a/.b/", "a/.b", true },
		{ "...", "...", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char p[64];
		bool dir;

		snprintf(p, sizeof(p), "%s", cases[i].in);
		path_normalize_peer(p, &dir);
		if (strcmp(p, cases[i].out) || dir != cases[i].dir)
			printf("#   '%s' -> '%s' dir %d\n", cases[i].in, p,
			       dir);
		CHECK(!strcmp(p, cases[i].out));
		CHECK_EQ(dir, cases[i].dir);
	}
}

/* workq: a worker runs fn, then the owner runs after, in push order. */
struct wq_probe {
	struct workq_item item;
	int id;
	int ran;   /* fn ran */
	int order; /* 1 + where after ran */
};

static int wq_after_count;

static void wq_fn(struct workq_item *it)
{
	((struct wq_probe *)it)->ran++;
}

static void wq_after(struct workq_item *it)
{
	struct wq_probe *p = (struct wq_probe *)it;

	p->order = ++wq_after_count;
	it->next = NULL; /* after may reuse the item: run_done is past it */
}

static void test_workq_after(void)
{
	struct wq_probe p[16];
	struct workq *q;
	unsigned int n = 0;

	CHECK_EQ(workq_create(1, &q), 0);
	wq_after_count = 0;
	CHECK_EQ(workq_run_done(q), 0);
	for (int i = 0; i < 16; i++) {
		p[i] = (struct wq_probe){ .id = i };
		p[i].item.fn = wq_fn;
		p[i].item.after = wq_after;
		workq_push(q, &p[i].item);
	}
	CHECK_EQ(workq_pending(q), 16);
	while (n < 16) {
		workq_wait_idle(q);
		n += workq_run_done(q);
	}
	CHECK_EQ(n, 16);
	CHECK_EQ(workq_pending(q), 0);
	/* One worker: done in push order, so after runs in push order. */
	for (int i = 0; i < 16; i++) {
		CHECK_EQ(p[i].ran, 1);
		CHECK_EQ(p[i].order, i + 1);
	}
	workq_destroy(q);
}

/* The eventfd is reset only before a sleep, and only with nothing done. */
static void test_workq_prepare_wait(void)
{
	struct wq_probe p = { .id = 1 };
	struct pollfd pfd;
	struct workq *q;

	CHECK_EQ(workq_create(1, &q), 0);
	pfd = (struct pollfd){ .fd = workq_fd(q), .events = POLLIN };
	CHECK(workq_prepare_wait(q));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	p.item.fn = wq_fn;
	p.item.after = wq_after;
	workq_push(q, &p.item);
	workq_wait_idle(q);
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	/* finished items wait: no sleep, and the fd stays readable */
	CHECK(!workq_prepare_wait(q));
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK_EQ(workq_run_done(q), 1);
	CHECK(workq_prepare_wait(q));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	/* the next one to finish wakes the sleeper */
	workq_push(q, &p.item);
	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	workq_wait_idle(q);
	CHECK_EQ(workq_run_done(q), 1);
	workq_destroy(q);
}

/*
 * The hash set: each key once (-EEXIST after), 0 a key like any other
 * (hset_key), every key still there after the table grew many times, and
 * keys in the same probe run (equal modulo the size) told apart.
 */
static void test_hset(void)
{
	struct hset s = { 0 };

	CHECK(!hset_has(&s, 5));
	CHECK_EQ(hset_add(&s, hset_key(0)), 0);
	CHECK(hset_has(&s, hset_key(0)));
	CHECK_EQ(hset_add(&s, 1), -EEXIST); /* hset_key(0) is 1 */
	for (uint64_t k = 2; k < 5000; k++)
		CHECK_EQ(hset_add(&s, k * 64), 0);
	CHECK_EQ(s.n, 4998 + 1);
	CHECK(2 * s.n <= s.cap);
	for (uint64_t k = 2; k < 5000; k++) {
		CHECK(hset_has(&s, k * 64));
		CHECK(!hset_has(&s, k * 64 + 1));
	}
	CHECK_EQ(hset_add(&s, 4999 * 64), -EEXIST);
	/* removed from the middle of probe runs: the rest still found */
	for (uint64_t k = 2; k < 5000; k += 3)
		hset_del(&s, k * 64);
	hset_del(&s, 7); /* not there */
	CHECK_EQ(s.n, 4999 - 1666);
	for (uint64_t k = 2; k < 5000; k++)
		CHECK_EQ(hset_has(&s, k * 64), (k - 2) % 3 != 0);
	CHECK_EQ(hset_add(&s, 2 * 64), 0);
	CHECK(hset_has(&s, 2 * 64));
	hset_release(&s);
	CHECK(!hset_has(&s, 128));
	CHECK_EQ(s.cap, 0);
}

/* Expands a host list; the names joined by spaces, or the error. */
static void hl(const char *spec, const char *want)
{
	const char *why;
	char **v, got[4096] = "";
	int n = hostlist_expand(spec, &v, &why);

	if (n < 0) {
		snprintf(got, sizeof(got), "%s",
			 n == -E2BIG ? "E2BIG" : "EINVAL");
		CHECK(n == -E2BIG || *why);
	} else {
		for (int i = 0; i < n; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got),
				 "%s%s", i ? " " : "", v[i]);
		CHECK(v[n] == NULL);
		hostlist_free(v);
	}
	if (strcmp(got, want))
		fprintf(stderr, "# '%s': got '%s', want '%s'\n", spec, got,
			want);
	CHECK(!strcmp(got, want));
}

/*
 * Host lists as Slurm writes them: ranges with their width, several
 * brackets (first outermost), commas inside and outside brackets, ports
 * and IPv6 literals left alone, and every malformed list refused.
 */
static void test_hostlist(void)
{
	hl("dst01", "dst01");
	hl("a,b", "a b");
	hl("dst[01-03]", "dst01 dst02 dst03");
	hl("n[8-11]", "n8 n9 n10 n11");
	hl("n[1-2,7],login", "n1 n2 n7 login");
	hl("r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2");
	hl("x[1-2].ib", "x1.ib x2.ib");
	hl("h[1-2]:7500,[fe80::1]:7501", "h1:7500 h2:7500 [fe80::1]:7501");
	hl("[::1]", "[::1]");
	hl("user@n[1-2]", "user@n1 user@n2");
	hl("n[2-1]", "EINVAL");
	hl("n[1-", "EINVAL");
	hl("n[]", "EINVAL");
	hl("n[a]", "EINVAL");
	hl("n1]", "EINVAL");
	hl("a,,b", "EINVAL");
	hl("", "EINVAL");
	hl("n[1-2[3]]", "EINVAL");
	hl("n[1-70000]", "E2BIG");
	hl("a[1-300]b[1-300]", "E2BIG");
}

/* lineq_next until it says something other than "none yet", 2 s at most. */
static int lineq_wait(struct lineq *q, const char **rec, size_t *len)
{
	int rc = 0;

	for (int i = 0; i < 2000 && !rc; i++) {
		rc = lineq_next(q, rec, len);
		if (!rc)
			usleep(1000);
	}
	return rc;
}

/*
 * util/lineq.h: records split across writes come whole, in order, the
 * separator dropped, the last one without a separator too; nothing yet is
 * 0, never a block; a record longer than LINEQ_MAX is refused, not cut;
 * lineq_stop returns while the writer stays silent; only a stream that
 * blocks and can stay silent is worth a reader.
 */
static void test_lineq(void)
{
	struct lineq *q;
	const char *rec = NULL;
	size_t len = 0;
	int fds[2], fd;
	char tmp[] = "/tmp/rdcp-lineq.XXXXXX";
	uint64_t t0;

	CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
	CHECK(lineq_wanted(fds[0]));
	CHECK_EQ(lineq_start(&q, fds[0], '\n'), 0);
	CHECK_EQ(lineq_next(q, &rec, &len), 0); /* nothing yet */
	CHECK_EQ(write(fds[1], "one\ntw", 6), 6);
	CHECK_EQ(lineq_wait(q, &rec, &len), 1);
	CHECK(len == 3 && !strcmp(rec, "one"));
	CHECK_EQ(lineq_next(q, &rec, &len), 0); /* "tw" is not a record */
	CHECK_EQ(write(fds[1], "o\n\nlast", 7), 7);
	CHECK_EQ(lineq_wait(q, &rec, &len), 1);
	CHECK(len == 3 && !strcmp(rec, "two"));
	CHECK_EQ(lineq_wait(q, &rec, &len), 1);
	CHECK_EQ(len, 0); /* an empty line is a record */
	close(fds[1]);
	CHECK_EQ(lineq_wait(q, &rec, &len), 1);
	CHECK(len == 4 && !strcmp(rec, "last"));
	CHECK_EQ(lineq_wait(q, &rec, &len), -1);
	lineq_stop(q);
	close(fds[0]);

	/* NUL-separated; stopped while the writer is silent */
	CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
	CHECK_EQ(lineq_start(&q, fds[0], '\0'), 0);
	CHECK_EQ(write(fds[1], "a b\nc\0", 6), 6);
	CHECK_EQ(lineq_wait(q, &rec, &len), 1);
	CHECK(len == 5 && !memcmp(rec, "a b\nc", 5));
	t0 = clock_now_ms();
	lineq_stop(q);
	CHECK(clock_now_ms() - t0 < 1000);
	close(fds[0]);
	close(fds[1]);

	/* a record longer than LINEQ_MAX */
	CHECK_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	CHECK(!lineq_wanted(fds[0])); /* O_NONBLOCK: read as it is */
	CHECK_EQ(fcntl(fds[0], F_SETFL, 0), 0);
	CHECK_EQ(lineq_start(&q, fds[0], '\n'), 0);
	{
		static char big[64 << 10];
		size_t sent = 0;

		memset(big, 'x', sizeof(big));
		while (sent <= LINEQ_MAX) {
			ssize_t n = write(fds[1], big, sizeof(big));

			if (n > 0)
				sent += (size_t)n;
			else if (errno == EAGAIN)
				usleep(1000);
			else
				break;
		}
		CHECK(sent > LINEQ_MAX);
	}
	CHECK_EQ(lineq_wait(q, &rec, &len), -ENAMETOOLONG);
	lineq_stop(q);
	close(fds[0]);
	close(fds[1]);

	/* a regular file always has its bytes: no reader */
	fd = mkstemp(tmp);
	CHECK(fd >= 0);
	CHECK(!lineq_wanted(fd));
	close(fd);
	unlink(tmp);
}

/*
 * A POSIX ACL as setfacl -m u:12345:rx,g:12346:rwx,u:7:r makes it (the
 * kernel's bytes): its entries read, an id rewritten in place, runs of
 * named users put back in id order; a bad version or length refused.
 */
static void test_aclid(void)
{
	static const uint8_t acl[] = {
		2,    0, 0, 0,			       /* version 2 */
		1,    0, 6, 0, 0xff, 0xff, 0xff, 0xff, /* USER_OBJ */
		2,    0, 4, 0, 7,    0,	   0,	 0,    /* USER 7 */
		2,    0, 5, 0, 0x39, 0x30, 0,	 0,    /* USER 12345 */
		4,    0, 4, 0, 0xff, 0xff, 0xff, 0xff, /* GROUP_OBJ */
		8,    0, 7, 0, 0x3a, 0x30, 0,	 0,    /* GROUP 12346 */
		0x10, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, /* MASK */
		0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, /* OTHER */
	};
	uint8_t v[sizeof(acl)];
	uint16_t tag;
	uint32_t id;

	memcpy(v, acl, sizeof(v));
	CHECK_EQ(aclid_count(v, sizeof(v)), 7);
	aclid_get(v, 2, &tag, &id);
	CHECK(tag == ACLID_USER && id == 12345);
	aclid_get(v, 4, &tag, &id);
	CHECK(tag == ACLID_GROUP && id == 12346);
	aclid_set(v, 1, 70000); /* now after 12345 */
	aclid_sort(v, 7);
	aclid_get(v, 1, &tag, &id);
	CHECK(tag == ACLID_USER && id == 12345);
	aclid_get(v, 2, &tag, &id);
	CHECK(tag == ACLID_USER && id == 70000);
	CHECK(v[2 * 8 + 4 + 2] == 4); /* its perm went with it */
	aclid_get(v, 3, &tag, &id);
	CHECK(tag == 4); /* no entry crossed its tag */
	CHECK_EQ(aclid_count(v, sizeof(v) - 1), -EINVAL);
	CHECK_EQ(aclid_count(v, 3), -EINVAL);
	CHECK_EQ(aclid_count(v, 4), 0);
	v[0] = 1;
	CHECK_EQ(aclid_count(v, sizeof(v)), -EINVAL);
}

TAP_RUN(TAP_TEST(test_crc32_vector), TAP_TEST(test_crc32_combine),
	TAP_TEST(test_sha256_vectors), TAP_TEST(test_sha256_incremental),
	TAP_TEST(test_hex), TAP_TEST(test_pread_short),
	TAP_TEST(test_pio_beyond_4g), TAP_TEST(test_stream_io),
	TAP_TEST(test_check_relative), TAP_TEST(test_open_beneath),
	TAP_TEST(test_mkdirs_beneath), TAP_TEST(test_basename),
	TAP_TEST(test_join), TAP_TEST(test_units_parse),
	TAP_TEST(test_units_format), TAP_TEST(test_clock), TAP_TEST(test_log),
	TAP_TEST(test_workq_after), TAP_TEST(test_workq_prepare_wait),
	TAP_TEST(test_normalize_peer), TAP_TEST(test_log_escape),
	TAP_TEST(test_hset), TAP_TEST(test_hostlist), TAP_TEST(test_lineq),
	TAP_TEST(test_aclid))
