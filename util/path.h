/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Paths received from a peer are untrusted. These helpers check them and
 * open them strictly beneath a root directory fd: openat2(2) with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS where the
 * kernel has it, else a component-by-component walk with O_NOFOLLOW.
 */
#ifndef RDCP_PATH_H
#define RDCP_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PATH_PEER_MAX 4095 /* bytes, without the NUL */
#define PATH_NAME_MAX 255  /* one component */

/*
 * Checks a relative path from a peer: len bytes, no NUL inside, not empty
 * unless allow_empty, not absolute, no ".." or "." component, no empty
 * component ("a//b"), each component <= PATH_NAME_MAX, total <=
 * PATH_PEER_MAX. A single trailing '/' is accepted. Returns 0, -EPERM
 * (escapes or malformed) or -ENAMETOOLONG.
 */
int path_check_relative(const char *p, size_t len, bool allow_empty)
	__attribute__((warn_unused_result));

/*
 * Rewrites, in place, a path a user typed for a peer's root the way scp
 * and rsync users type them: a leading '/' (the root itself, as an rsync
 * module path), "." components and empty ones are dropped, so "./a//b/."
 * becomes "a/b" and "/" or "." becomes "". *dir is set when the path
 * named a directory by its form alone: a trailing '/' or "." component,
 * or nothing left (the root). ".." is kept, for path_check_relative to
 * refuse.
 */
void path_normalize_peer(char *p, bool *dir);

/*
 * openat beneath rootfd; rel must have passed path_check_relative. No
 * symlink is followed in any component. flags/mode as openat(2) (O_CLOEXEC
 * is added, and O_NONBLOCK unless O_PATH: a FIFO there is never waited
 * on; the caller checks the type of what it opened). Returns an fd or a negative errno (-EXDEV/-ELOOP when the path
 * would leave the root or crosses a symlink).
 */
int path_open_beneath(int rootfd, const char *rel, int flags, mode_t mode)
	__attribute__((warn_unused_result));

/* mkdir -p of rel beneath rootfd (no symlinks followed). 0 or -errno. */
int path_mkdirs_beneath(int rootfd, const char *rel, mode_t mode)
	__attribute__((warn_unused_result));

/* mkdir -p of a local, trusted path (the user's own DEST). 0 or -errno. */
int path_mkdirs_local(const char *p, mode_t mode)
	__attribute__((warn_unused_result));

/* Last component of p (after the last '/'), p itself if none. */
const char *path_basename(const char *p);

/*
 * Joins a and b with one '/' into out (size outsz). Returns 0 or
 * -ENAMETOOLONG. a may be empty (result is b).
 */
int path_join(char *out, size_t outsz, const char *a, const char *b)
	__attribute__((warn_unused_result));

#endif
