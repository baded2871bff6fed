/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the source's list of what to send. Each SRC becomes
 * one entry, and with recursion a directory becomes itself followed by its
 * contents, depth first, names sorted, so a parent is always announced
 * before its children. Symlinks inside a tree are entries of their own
 * (copied as links, never followed); hard links are not detected (each
 * name is copied as a file of its own). Entries that cannot be read carry
 * their error and are reported as failed files.
 */
#ifndef RDCP_WALK_H
#define RDCP_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct walk_entry {
	char *local; /* the path to open: local, or beneath the root */
	char *wire;  /* the name the sink gets: beneath its DEST */
	char *link;  /* symlink target, NULL otherwise */
	struct stat st;
	uint8_t kind; /* enum wire_file_kind */
	bool top;     /* a SRC as named: a symlink there is followed */
	int err;      /* 0, or why this entry cannot be sent */
	char *errmsg;
};

struct walk {
	int rootfd; /* -1: SRCs are local paths; else confined beneath */
	bool recursive;
	struct walk_entry *v;
	size_t n, cap;
	uint64_t bytes; /* regular files' sizes, for progress */
};

/*
 * Lists srcs into w (zeroed by the caller except rootfd and recursive).
 * Returns 0, or -ENOMEM; per-entry failures are recorded in the entries.
 */
int walk_sources(struct walk *w, const char *const *srcs, size_t n)
	__attribute__((warn_unused_result));

/* Opens an entry for reading (regular files), confined when w says so. */
int walk_open(const struct walk *w, const struct walk_entry *e)
	__attribute__((warn_unused_result));

void walk_free(struct walk *w);

#endif
