/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* File-system placement for the sink; see place.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "util/checksum.h"
#include "util/path.h"

mode_t place_mode(uint32_t mode, bool preserve, mode_t umask)
{
	if (preserve)
		return mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
	return mode & 0777 & ~umask;
}

/* 64 bits of the name's SHA-256 (FNV-1a should OpenSSL fail). */
static uint64_t name_hash(const char *name, size_t len)
{
	uint8_t sha[CK_SHA256_LEN];
	uint64_t h = 0;

	if (ck_sha256(name, len, sha))
		return ck_fnv1a64(name, len);
	for (unsigned int i = 0; i < 8; i++)
		h = h << 8 | sha[i];
	return h;
}

void place_tmp_name(const char *name, char *tmp, size_t len)
{
	size_t n = strlen(name);

	/*
	 * Names up to PLACE_TMP_KEEP bytes appear whole. A longer one keeps
	 * a prefix and gains a hash of the whole name: two long names that
	 * share a prefix get two temporaries. The hashed part is one byte
	 * longer than any whole name shown, so the two forms never meet.
	 */
	if (n <= PLACE_TMP_KEEP)
		snprintf(tmp, len, ".%s.rdcp-part", name);
	else
		snprintf(tmp, len, ".%.*s~%016llx.rdcp-part",
			 PLACE_TMP_KEEP - 16, name,
			 (unsigned long long)name_hash(name, n));
}

int place_mkdir(int dirfd, const char *name, bool *ours)
{
	struct stat st;

	*ours = mkdirat(dirfd, name, PLACE_DIR_FILLING) == 0;
	if (*ours)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		return -EEXIST;
	/* setgid may come from the parent; every other bit says it */
	*ours = (st.st_mode & 07777 & ~(mode_t)S_ISGID) == PLACE_DIR_FILLING;
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
		  const char *target, const struct timespec *times,
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
	/* Nothing that was there may block the open (a FIFO). */
	const int flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	struct stat st;
	int fd, rc;

	*what = "create";
	fd = openat(dirfd, tmp, flags | O_CREAT | O_EXCL, mode);
	*fresh = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = openat(dirfd, tmp, flags);
	if (fd < 0)
		return -errno;
	*what = "type";
	if (!*fresh && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
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
	if (!strcmp(what, "type")) {
		snprintf(msg, len,
			 "cannot write '%s': its temporary is not a regular "
			 "file",
			 shown);
		return false; /* not ours: someone else made it */
	}
	if (!strcmp(what, "lock") && rc == -EWOULDBLOCK) {
		snprintf(msg, len,
			 "cannot write '%s': another session is writing it",
			 shown);
		return false; /* not ours to remove */
	}
	snprintf(msg, len, "cannot %s '%s': %s", what, shown, strerror(-rc));
	return strcmp(what, "create") != 0;
}

int place_meta(int fd, bool set_mode, mode_t mode, const struct timespec *times,
	       const char **what)
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

int place_allocate(int fd, uint64_t size)
{
	struct statfs fs;

	if (!size || size > (uint64_t)INT64_MAX)
		return 0;
	if (fstatfs(fd, &fs) == 0 &&
	    (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC))
		return 0;
	if (fallocate(fd, 0, 0, (off_t)size) == 0)
		return 0;
	if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
		return 0; /* not here: the writes allocate */
	return -errno;
}

int place_open_regular(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		return fd;
	close(fd);
	return -EINVAL;
}

/*
 * --dry-run: DEST is never made; a DEST (or its directory) that is not
 * there leaves t->dirfd at -1, and the sink takes every name as new.
 */
static bool dry_run(const struct sink_target *t)
{
	return t->p.flags & WIRE_HELLO_DRY_RUN;
}

/* DEST's last component into t->name, its directory's fd in t->dirfd. */
static int open_parent_of(int rootfd, char *dest, struct sink_target *t)
{
	char *slash = strrchr(dest, '/');

	t->is_dir = false;
	snprintf(t->name, sizeof(t->name), "%.255s", slash ? slash + 1 : dest);
	if (!slash) {
		t->dirfd =
			openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		return t->dirfd < 0 ? -errno : 0;
	}
	*slash = '\0';
	t->dirfd = path_open_beneath(rootfd, dest, O_PATH | O_DIRECTORY, 0);
	*slash = '/';
	return t->dirfd < 0 ? t->dirfd : 0;
}

/*
 * Whether an existing directory DEST (fd) is the copy of the one SRC,
 * not a directory to put it in: the client says an earlier attempt made
 * it so (HELLO flag DEST_NAMED), or with --resume it is one a session
 * made and did not finish (PLACE_DIR_FILLING): a copy cut off, whose
 * resumed run must land where the first did, not inside it.
 */
static bool dest_is_copy(const struct sink_target *t, int fd)
{
	struct stat st;

	if (t->p.flags & WIRE_HELLO_DEST_NAMED)
		return true;
	return (t->p.flags & WIRE_HELLO_RESUME) && !fstat(fd, &st) &&
	       (st.st_mode & 07777 & ~(mode_t)S_ISGID) == PLACE_DIR_FILLING;
}

int place_target_beneath(int rootfd, const char *dest, bool dest_dir,
			 struct sink_target *t, char *why, size_t whysz)
{
	char rel[PATH_PEER_MAX + 2];
	size_t len = strlen(dest);
	bool dir;
	int rc;

	snprintf(t->shown, sizeof(t->shown), "%s", dest);
	if (len > PATH_PEER_MAX) {
		snprintf(why, whysz, "DEST is longer than %u bytes: refused",
			 PATH_PEER_MAX);
		return -ENAMETOOLONG;
	}
	memcpy(rel, dest, len + 1);
	path_normalize_peer(rel, &dir);
	len = strlen(rel);
	snprintf(t->shown, sizeof(t->shown), "%s", rel);
	rc = path_check_relative(rel, len, true);
	if (rc) {
		snprintf(why, whysz,
			 "DEST '%s' is not a path inside the receiver's root: "
			 "refused (name one beneath it, such as 'dir/' or '.')",
			 dest);
		return -EPERM;
	}
	if (len && dir && !dry_run(t)) {
		rc = path_mkdirs_beneath(rootfd, rel, 0755);
		if (rc) {
			snprintf(why, whysz, "cannot create directory '%s': %s",
				 rel, strerror(-rc));
			return rc;
		}
	}
	t->is_dir = true;
	t->dirfd = len ? path_open_beneath(rootfd, rel, O_PATH | O_DIRECTORY, 0)
		       : openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd >= 0 && len && !dir && !dest_dir &&
	    dest_is_copy(t, t->dirfd)) {
		close(t->dirfd);
		rc = open_parent_of(rootfd, rel, t);
		if (rc)
			snprintf(why, whysz, "cannot use '%s': %s", dest,
				 strerror(-rc));
		return rc;
	}
	if (t->dirfd >= 0)
		return 0;
	rc = len ? t->dirfd : -errno;
	if (rc == -ENOENT && (dest_dir || dir) && dry_run(t)) {
		t->dirfd = -1; /* nothing beneath it yet */
		return 0;
	}
	if ((rc == -ENOTDIR || rc == -ENOENT) && !dest_dir && !dir) {
		/* A file name: its directory must exist. */
		rc = open_parent_of(rootfd, rel, t);
		if (rc == -ENOENT && dry_run(t)) {
			t->dirfd = -1;
			return 0;
		}
		if (rc)
			snprintf(why, whysz, "cannot use '%s': %s", dest,
				 strerror(-rc));
		return rc;
	}
	if (rc == -ENOTDIR || rc == -ENOENT) {
		snprintf(why, whysz,
			 "DEST '%s' is not a directory (several files need "
			 "one; end it with '/' to create it)",
			 dest);
		return -ENOTDIR;
	}
	snprintf(why, whysz, "cannot use DEST '%s': %s", dest, strerror(-rc));
	return rc;
}

bool place_target_refused(int rc)
{
	return rc == -EPERM || rc == -ENOTDIR || rc == -ENAMETOOLONG;
}

int place_target_local(const char *dest, size_t nsrcs, struct sink_target *t,
		       char *why, size_t whysz)
{
	char path[4096], *slash;
	size_t len;
	int rc;

	dest = dest && *dest ? dest : ".";
	snprintf(path, sizeof(path), "%s", dest);
	snprintf(t->shown, sizeof(t->shown), "%s", path);
	len = strlen(path);
	while (len > 1 && path[len - 1] == '/') {
		path[--len] = '\0';
		rc = dry_run(t) ? 0 : path_mkdirs_local(path, 0755);
		if (rc) {
			snprintf(why, whysz, "cannot create directory '%s': %s",
				 path, strerror(-rc));
			return rc;
		}
	}
	t->shown[len] = '\0';
	t->dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	t->is_dir = t->dirfd >= 0;
	slash = strrchr(path, '/');
	slash = slash ? slash + 1 : path; /* the last component */
	if (t->is_dir && nsrcs == 1 && len == strlen(dest) && *slash &&
	    strcmp(slash, ".") && strcmp(slash, "..") &&
	    dest_is_copy(t, t->dirfd)) {
		/* the copy itself, named as the file-name case below does */
		close(t->dirfd);
		t->dirfd = -1;
		t->is_dir = false;
		errno = ENOENT;
	}
	if (t->is_dir)
		return 0;
	if (errno == ENOENT && len < strlen(dest) && dry_run(t)) {
		t->is_dir = true; /* ends in '/': would be made */
		return 0;
	}
	if (errno != ENOENT && errno != ENOTDIR) {
		rc = -errno;
		snprintf(why, whysz, "cannot use '%s': %s", path,
			 strerror(-rc));
		return rc;
	}
	if (nsrcs > 1) {
		snprintf(why, whysz,
			 "'%s' is not a directory (several sources need one; "
			 "end it with '/' to create it)",
			 path);
		return -ENOTDIR;
	}
	/* The user's own path: symlinks and ".." are theirs to use. */
	slash = strrchr(path, '/');
	snprintf(t->name, sizeof(t->name), "%.255s", slash ? slash + 1 : path);
	if (slash)
		*slash = '\0';
	t->dirfd = open(slash ? (*path ? path : "/") : ".",
			O_PATH | O_DIRECTORY | O_CLOEXEC);
	rc = t->dirfd < 0 ? -errno : 0;
	if (rc == -ENOENT && dry_run(t))
		return 0;
	if (rc)
		snprintf(why, whysz, "cannot use '%s': %s", dest,
			 strerror(-rc));
	return rc;
}
