/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Untrusted relative paths: a syntactic check of what a peer sent, and
 * opening or creating it strictly beneath a root directory fd. openat2(2)
 * with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS does
 * the work where the kernel has it; otherwise the path is walked one
 * component at a time with O_NOFOLLOW opens. The choice is made once.
 */
#include "util/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>) && defined(SYS_openat2)
#include <linux/openat2.h>
#define PATH_HAVE_OPENAT2 1
#endif
#endif

#ifdef PATH_HAVE_OPENAT2
static atomic_bool path_no_openat2;
#endif

/*
 * The check behind path_check_relative(); esc is returned for a path that
 * would leave the root (absolute or ".."), -EPERM for other malformed ones.
 */
static int path_check(const char *p, size_t len, bool allow_empty, int esc)
{
	size_t i, start;

	if (!len)
		return allow_empty ? 0 : -EPERM;
	if (len > PATH_PEER_MAX)
		return -ENAMETOOLONG;
	if (memchr(p, '\0', len))
		return -EPERM;
	if (p[0] == '/')
		return esc;
	/* one trailing '/' is fine; a second one is an empty component */
	if (p[len - 1] == '/')
		len--;

	for (start = 0; start <= len; start = i + 1) {
		size_t n;

		for (i = start; i < len && p[i] != '/'; i++)
			;
		n = i - start;
		if (!n)
			return -EPERM;
		if (n > PATH_NAME_MAX)
			return -ENAMETOOLONG;
		if (p[start] == '.' && n <= 2 && p[start + n - 1] == '.')
			return n == 2 ? esc : -EPERM;
	}
	return 0;
}

int path_check_relative(const char *p, size_t len, bool allow_empty)
{
	return path_check(p, len, allow_empty, -EPERM);
}

/* Opens directory name in dirfd without following a symlink there. */
static int path_open_dir(int dirfd, const char *name)
{
	struct stat st;
	int fd, err;

	fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	err = -errno;
	if (err == -ENOTDIR &&
	    !fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) &&
	    S_ISLNK(st.st_mode))
		return -ELOOP;
	return err;
}

/* Component walk with O_NOFOLLOW, for kernels without openat2 (< 5.6). */
static int path_open_walk(int rootfd, const char *rel, int flags, mode_t mode)
{
	char buf[PATH_PEER_MAX + 1];
	size_t len = strlen(rel);
	int dirfd = rootfd, fd;
	char *comp, *slash;
	struct stat st;

	memcpy(buf, rel, len + 1);
	if (len && buf[len - 1] == '/') {
		/* "name/" must be a directory and would follow a symlink */
		if (flags & O_CREAT)
			return -EISDIR;
		buf[--len] = '\0';
		flags |= O_DIRECTORY;
	}

	for (comp = buf; (slash = strchr(comp, '/')); comp = slash + 1) {
		*slash = '\0';
		fd = path_open_dir(dirfd, comp);
		if (dirfd != rootfd)
			close(dirfd);
		if (fd < 0)
			return fd;
		dirfd = fd;
	}

	fd = openat(dirfd, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		fd = -errno;
		/* O_DIRECTORY | O_NOFOLLOW on a symlink gives ENOTDIR */
		if (fd == -ENOTDIR &&
		    !fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISLNK(st.st_mode))
			fd = -ELOOP;
	} else if ((flags & O_PATH) &&
		   (fstat(fd, &st) || S_ISLNK(st.st_mode))) {
		/* O_PATH | O_NOFOLLOW opens the link itself */
		close(fd);
		fd = -ELOOP;
	}
	if (dirfd != rootfd)
		close(dirfd);
	return fd;
}

void path_normalize_peer(char *p, bool *dir)
{
	size_t in = 0, out = 0, len = strlen(p);

	*dir = len == 0 || p[len - 1] == '/';
	while (in < len) {
		size_t n = strcspn(p + in, "/");

		if (n == 1 && p[in] == '.') {
			if (in + n == len)
				*dir = true; /* "sub/." names sub itself */
		} else if (n) {
			if (out)
				p[out++] = '/';
			memmove(p + out, p + in, n);
			out += n;
		}
		in += n + 1;
	}
	p[out] = '\0';
	if (!out)
		*dir = true;
}

int path_open_beneath(int rootfd, const char *rel, int flags, mode_t mode)
{
	int ret;

	/* Callers check already; a second look costs nothing here. */
	ret = path_check(rel, strlen(rel), false, -EXDEV);
	if (ret)
		return ret;
	/* Never wait on what is there (a FIFO); O_PATH opens nothing. */
	if (!(flags & O_PATH))
		flags |= O_NONBLOCK;

#ifdef PATH_HAVE_OPENAT2
	if (!atomic_load_explicit(&path_no_openat2, memory_order_relaxed)) {
		struct open_how how = {
			.flags = (unsigned int)(flags | O_CLOEXEC),
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
				   RESOLVE_NO_SYMLINKS,
		};
		long fd;

		/* openat2 insists on mode 0 unless something is created */
		if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
			how.mode = mode;
		fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS)
			return -errno;
		atomic_store_explicit(&path_no_openat2, true,
				      memory_order_relaxed);
	}
#endif
	return path_open_walk(rootfd, rel, flags, mode);
}

int path_mkdirs_beneath(int rootfd, const char *rel, mode_t mode)
{
	char buf[PATH_PEER_MAX + 1];
	size_t len = strlen(rel);
	int dirfd = rootfd, fd, ret;
	char *comp, *end;

	ret = path_check(rel, len, true, -EXDEV);
	if (ret)
		return ret;
	memcpy(buf, rel, len + 1);
	if (len && buf[len - 1] == '/')
		buf[--len] = '\0';

	for (comp = buf; *comp; comp = end) {
		end = strchrnul(comp, '/');
		if (*end)
			*end++ = '\0';
		if (mkdirat(dirfd, comp, mode) && errno != EEXIST) {
			ret = -errno;
			break;
		}
		/* EEXIST: fine if a directory; a symlink there is -ELOOP */
		fd = path_open_dir(dirfd, comp);
		if (dirfd != rootfd)
			close(dirfd);
		dirfd = rootfd;
		if (fd < 0) {
			ret = fd;
			break;
		}
		dirfd = fd;
	}
	if (dirfd != rootfd)
		close(dirfd);
	return ret;
}

const char *path_basename(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

int path_join(char *out, size_t outsz, const char *a, const char *b)
{
	size_t la = strlen(a), lb, sep;

	if (la) {
		while (*b == '/')
			b++;
	}
	lb = strlen(b);
	sep = la && lb && a[la - 1] != '/';
	if (la + sep + lb + 1 > outsz) {
		if (outsz)
			out[0] = '\0';
		return -ENAMETOOLONG;
	}
	memmove(out, a, la);
	if (sep)
		out[la] = '/';
	memcpy(out + la + sep, b, lb + 1);
	return 0;
}

int path_mkdirs_local(const char *p, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(p);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, p, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		buf[i] = p[i];
	}
	return 0;
}
