/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* File-system placement for the sink; see place.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "transfer/place.h"

mode_t place_mode(uint32_t mode, bool preserve, mode_t umask)
{
	if (preserve)
		return mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
	return mode & 0777 & ~umask;
}

void place_tmp_name(const char *name, char *tmp, size_t len)
{
	snprintf(tmp, len, ".%.200s.rdcp-part", name);
}

int place_mkdir(int dirfd, const char *name, bool *created)
{
	struct stat st;

	*created = mkdirat(dirfd, name, 0700) == 0;
	if (*created)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		return -EEXIST;
	return 0;
}

bool place_keeps(int dirfd, const char *name, bool no_clobber,
		 const struct timespec *mtime)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	if (no_clobber)
		return true;
	return st.st_mtim.tv_sec > mtime->tv_sec ||
	       (st.st_mtim.tv_sec == mtime->tv_sec &&
		st.st_mtim.tv_nsec >= mtime->tv_nsec);
}

int place_symlink(int dirfd, const char *name, const char *tmp,
		  const char *target, const struct timespec times[2],
		  const char **what)
{
	int rc = 0;

	unlinkat(dirfd, tmp, 0);
	*what = "create symlink";
	if (symlinkat(target, dirfd, tmp) < 0)
		return -errno;
	*what = "set times of";
	if (times && utimensat(dirfd, tmp, times, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (!rc) {
		*what = "rename into";
		if (renameat(dirfd, tmp, dirfd, name) < 0)
			rc = -errno;
	}
	if (rc)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

int place_tmp_open(int dirfd, const char *tmp, bool keep, mode_t mode,
		   bool *fresh, const char **what)
{
	int fd, rc;

	*what = "create";
	fd = openat(dirfd, tmp,
		    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	*fresh = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = openat(dirfd, tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*what = "lock";
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		goto fail;
	*what = "truncate";
	if (!keep && !*fresh && ftruncate(fd, 0) < 0)
		goto fail;
	return fd;
fail:
	rc = -errno;
	close(fd);
	return rc;
}

bool place_tmp_failed(int rc, const char *what, const char *shown, char *msg,
		      size_t len)
{
	if (!strcmp(what, "lock") && rc == -EWOULDBLOCK) {
		snprintf(msg, len,
			 "cannot write '%s': another session is writing it",
			 shown);
		return false; /* not ours to remove */
	}
	snprintf(msg, len, "cannot %s '%s': %s", what, shown, strerror(-rc));
	return strcmp(what, "create") != 0;
}

int place_meta(int fd, bool set_mode, mode_t mode,
	       const struct timespec times[2], const char **what)
{
	*what = "mode";
	if (set_mode && fchmod(fd, mode) < 0)
		return -errno;
	*what = "times";
	if (times && futimens(fd, times) < 0)
		return -errno;
	return 0;
}

int place_unnamed_open(int dirfd, mode_t mode)
{
	int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);

	return fd < 0 ? -errno : fd;
}

int place_unnamed_link(int fd, int dirfd, const char *name)
{
	char proc[40];
	int rc;

	/*
	 * By the fd itself where that is allowed (it needs
	 * CAP_DAC_READ_SEARCH: a receiver running as root), else through
	 * /proc, which costs a path walk.
	 */
	rc = linkat(fd, "", dirfd, name, AT_EMPTY_PATH);
	if (rc < 0 && errno == ENOENT) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		rc = linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW);
	}
	if (rc == 0)
		return 1;
	if (errno == EEXIST || errno == ENOENT || errno == EPERM)
		return 0; /* taken, or no /proc: the named way */
	return -errno;
}

int place_check_space(int fd, uint64_t size, uint64_t *avail)
{
	struct statvfs vfs;

	if (fstatvfs(fd, &vfs) < 0)
		return 0;
	*avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	return *avail < size ? -ENOSPC : 0;
}

int place_open_regular(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		return fd;
	close(fd);
	return -EINVAL;
}
