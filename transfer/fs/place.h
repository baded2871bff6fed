/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: file-system placement for the sink. Plain calls
 * over a directory fd and names: they know nothing of sessions or the
 * wire, return 0 (or an fd) or a negative errno, and name in *what the
 * step that failed ("create", "lock", "mode", ...) for the caller's one
 * line to the user. Nothing here follows a symlink in the last component
 * or gives a partly written file its final name.
 */
#ifndef RDCP_PLACE_H
#define RDCP_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "transfer/session/role.h"

/*
 * The mode a placed entry gets from the peer's mode bits: with preserve
 * (-p) all permission bits but setuid and setgid, else the rwx bits less
 * umask.
 */
mode_t place_mode(uint32_t mode, bool preserve, mode_t umask);

/*
 * Writes the temporary's name for name into tmp (len bytes), a hidden
 * name beside it that another session copying the same file also picks
 * (so the lock on it keeps them apart, and --resume finds it), and no
 * other name does: ".NAME.rdcp-part" for a name of up to PLACE_TMP_KEEP
 * bytes, else its first PLACE_TMP_KEEP - 16 bytes, '~' and 16 hex digits
 * of the whole name's SHA-256.
 */
#define PLACE_TMP_KEEP 200
void place_tmp_name(const char *name, char *tmp, size_t len);

/*
 * A directory being filled: made so (owner only, so it stays writable and
 * private while it fills), given its final mode when nothing beneath can
 * change. The sticky bit marks it as one a session made and did not
 * finish: a session cut off (kill -9, a lost link) leaves it so, and the
 * next session that enters it finishes it as one it made (issue #23
 * item 3). A directory a user made 0700 has no sticky bit and is left as
 * it is.
 */
#define PLACE_DIR_FILLING (S_ISVTX | S_IRWXU)

/*
 * Makes directory name in dirfd, PLACE_DIR_FILLING. *ours says whether it
 * is this sink's to finish: made now, or an earlier session's left
 * unfinished (its mode is PLACE_DIR_FILLING, setgid aside); false for any
 * other directory that was there. 0 or -errno; -EEXIST when something
 * else has the name.
 */
int place_mkdir(int dirfd, const char *name, bool *ours)
	__attribute__((warn_unused_result));

/*
 * Whether an existing entry at name stays as it is: any entry with
 * no_clobber, else one whose mtime is not older than mtime (--update).
 * False when nothing has the name.
 */
bool place_keeps(int dirfd, const char *name, bool no_clobber,
		 const struct timespec *mtime);

/*
 * Makes symlink name -> target through the temporary tmp, with times
 * (atime, mtime) when not NULL. 0, or -errno and *what; nothing is left
 * at tmp on failure.
 */
int place_symlink(int dirfd, const char *name, const char *tmp,
		  const char *target, const struct timespec *times,
		  const char **what) __attribute__((warn_unused_result));

/*
 * Opens the temporary tmp in dirfd, locked (a second session writing the
 * same file fails with -EWOULDBLOCK instead of mixing its chunks in). A
 * new one is made with mode (less the umask) and is empty; one that was
 * there is truncated unless keep, and *fresh says which; one that is no
 * regular file (a FIFO: never waited on) is -EINVAL, *what "type". The
 * fd (O_NONBLOCK), or -errno and *what.
 */
int place_tmp_open(int dirfd, const char *tmp, bool keep, mode_t mode,
		   bool *fresh, const char **what)
	__attribute__((warn_unused_result));

/*
 * A place_tmp_open failure as one line for the user in msg (len bytes).
 * Returns whether the temporary is this session's to remove (not when
 * another session holds it, nor when it could not be made).
 */
bool place_tmp_failed(int rc, const char *what, const char *shown, char *msg,
		      size_t len);

/*
 * Gives fd mode when set_mode, and times (atime, mtime) when not NULL.
 * 0, or -errno and *what ("mode" or "times").
 */
int place_meta(int fd, bool set_mode, mode_t mode, const struct timespec *times,
	       const char **what) __attribute__((warn_unused_result));

/*
 * An unnamed file (O_TMPFILE) in dirfd with mode: the fd, or -errno when
 * the file system cannot make one.
 */
int place_unnamed_open(int dirfd, mode_t mode);

/*
 * Links the unnamed file fd into dirfd as name: by the fd itself where
 * that is allowed (CAP_DAC_READ_SEARCH), else through /proc. Returns 1
 * when it is in place, 0 when the name is taken or neither way is open
 * (use a named temporary), or -errno.
 */
int place_unnamed_link(int fd, int dirfd, const char *name)
	__attribute__((warn_unused_result));

/*
 * Whether size bytes fit in the file system of fd: 0, or -ENOSPC with
 * the space there is in *avail. 0 also when the file system cannot say.
 */
int place_check_space(int fd, uint64_t size, uint64_t *avail);

/*
 * Reserves size bytes for fd's file up front (fallocate, which also sets
 * its size), where that buys something: blocks allocated once, in one
 * piece, and the writes that fill them may run in parallel (they no
 * longer allocate). 0 when done or when not worth it: a memory file
 * system (it would zero pages the writes fill anyway) or one that cannot
 * preallocate (the writes then allocate, as without). -ENOSPC or -EDQUOT
 * when the space is not there, another -errno when it failed.
 */
int place_allocate(int fd, uint64_t size) __attribute__((warn_unused_result));

/*
 * Opens name in dirfd read-only if it is a regular file, without waiting
 * on whatever else is there (O_NONBLOCK: a FIFO): the fd, or -errno
 * (-ENOENT: nothing there; -EINVAL: not a regular file).
 */
int place_open_regular(int dirfd, const char *name);

/*
 * A receiver's DEST, beneath its root rootfd, into t (dirfd, is_dir,
 * name, shown). dest is as the client typed it: "." and "./x" are paths
 * inside the root, a leading '/' is the root itself (as an rsync module
 * path). An existing directory, or one named as such (a trailing '/' or
 * "." or dest_dir: several files), made if missing, receives inside;
 * otherwise DEST is the new name of the only file, in a directory that
 * must exist. 0, or -errno with one line in why (whysz bytes).
 */
int place_target_beneath(int rootfd, const char *dest, bool dest_dir,
			 struct sink_target *t, char *why, size_t whysz)
	__attribute__((warn_unused_result));

/*
 * Whether a place_target_beneath failure is a refusal of the name itself
 * (a path outside the root, or a file name where a directory is needed),
 * not a failure of the file system.
 */
bool place_target_refused(int rc);

/*
 * A pull's DEST on this host (NULL or "": the current directory), into t:
 * an existing directory (or one named with a trailing '/', made if
 * needed) receives inside; otherwise DEST is the new name of the only
 * SRC. 0, or -errno with one line in why: -ENOTDIR when nsrcs > 1 and
 * DEST is no directory.
 */
int place_target_local(const char *dest, size_t nsrcs, struct sink_target *t,
		       char *why, size_t whysz)
	__attribute__((warn_unused_result));

#endif
