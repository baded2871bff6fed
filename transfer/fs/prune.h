/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: removing the entries of a directory tree that a
 * caller's verdict says go (--delete: what the source did not send), a
 * step at a time, so that the engine thread that drives it keeps its
 * session alive between steps.
 *
 * Everything happens beneath the one directory the walk starts in,
 * through directory fds and single names (openat, fstatat, unlinkat): no
 * path is resolved from the top again, and no symlink is ever followed.
 * A symlink is removed as a link, whatever it points to; a directory is
 * opened with O_NOFOLLOW, checked to be the one just looked at, and
 * removed depth first once everything in it is gone. A directory to be
 * removed that is a mount point (another file system, or the root of a
 * mount) is not entered: it is an error of its own. An entry that cannot
 * be removed is an error, and the directories above it stay.
 */
#ifndef RDCP_PRUNE_H
#define RDCP_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

/* Directory levels a walk holds open at once, an fd each. */
#define PRUNE_DEPTH_MAX 256

enum prune_verdict {
	PRUNE_KEEP,   /* leave it, and whatever is in it */
	PRUNE_ENTER,  /* a directory to keep whose entries are looked at */
	PRUNE_REMOVE, /* remove it; a directory with its whole tree */
};

/*
 * The caller's verdict on the entry at path (the walk's prefix, then the
 * names beneath it, '/'-separated); is_dir: a directory, never a symlink
 * to one. inside: beneath a directory being removed, where anything but
 * PRUNE_KEEP removes (a kept entry keeps its directories too).
 */
typedef enum prune_verdict (*prune_decide_fn)(void *arg, const char *path,
					      bool is_dir, bool inside);

struct prune_cfg {
	int dirfd;	    /* where name is looked up (may be O_PATH) */
	const char *name;   /* the directory to walk beneath dirfd, or "." */
	const char *prefix; /* its path as verdicts and events name it, or "" */
	bool remove;	    /* false: only say what would go */
	/* put back the times of each entered directory that lost entries */
	bool keep_times;
	uint64_t limit; /* removals at most; more are -E2BIG events */
	prune_decide_fn decide;
	void *arg;
};

/* One entry removed (or, not removing, one that would be), or not. */
struct prune_event {
	const char *path; /* as in verdicts; valid until the next call */
	uint8_t kind;	  /* enum wire_file_kind; WIRE_KIND_OTHER */
	int status;	  /* 0, or -errno: it, and what holds it, stay */
	uint64_t bytes;	  /* a regular file's allocated bytes (st_blocks) */
	const char *why;  /* with status: what failed, for a message */
};

struct prune;

/*
 * Starts a walk of cfg (copied; its strings must outlive the walk).
 * Nothing is opened yet. 0 or -ENOMEM.
 */
int prune_create(const struct prune_cfg *cfg, struct prune **out)
	__attribute__((warn_unused_result));

/*
 * The walk's next step: 1 with *ev filled, 0 when it is over (a start
 * directory that is not there is an empty walk), or -ENOMEM. Entries in a
 * directory come before the directory itself; entries kept make no event.
 */
int prune_next(struct prune *p, struct prune_event *ev)
	__attribute__((warn_unused_result));

/* Entries removed so far. */
uint64_t prune_removed(const struct prune *p);

/* Closes what the walk holds open and frees it. p may be NULL. */
void prune_destroy(struct prune *p);

#endif
