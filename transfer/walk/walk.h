/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the source's list of what to send. Each SRC becomes
 * one entry, and with recursion a directory becomes itself followed by its
 * contents, depth first, names sorted, so a parent is always announced
 * before its children. Symlinks inside a tree are entries of their own
 * (copied as links, never followed); hard links are not detected here
 * (the source does that with -H, source_links.c). Device nodes, FIFOs and
 * sockets are left out with a warning unless the walk is told to take
 * them (-D). Entries that cannot be read carry their error and are
 * reported as failed files.
 *
 * The walk is incremental: walk_more() lists the next entries on demand,
 * so a copy starts moving data at once instead of after stat-ing a whole
 * tree of millions of files. Entries never move once listed; the caller
 * gives back each block of WALK_BLOCK entries it is done with
 * (walk_release), so a walk of millions of entries holds only those still
 * in use and the directories being listed (a copy of their paths and
 * their names), not all it listed.
 *
 * Entries a filter excludes are left out (an excluded directory with all
 * it holds); the filter sees the wire name. With a list (--files-from) the
 * SRCs are not given at once: each name read from the list, beneath the
 * one base directory, is an entry named by its whole path on the wire,
 * preceded by the directories it implies (those the previous name did not
 * already imply), as rsync's --files-from does. The list is read as the
 * walk goes, never held: from a stream (a push's), or handed over a name
 * at a time by a feed (a pull's, whose names come from the client), which
 * may have none yet: the walk then stops until it has.
 */
#ifndef RDCP_WALK_H
#define RDCP_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "transfer/xfer.h"
#include "util/hset.h"

struct walk_entry {
	char *local; /* the path to open: local, or beneath the root */
	char *wire;  /* the name the sink gets: beneath its DEST */
	char *link;  /* symlink target, NULL otherwise */
	struct stat st;
	uint8_t kind; /* enum wire_file_kind */
	bool top;     /* a SRC as named: a symlink there is followed */
	bool listed;  /* a name of the list, in walk.listed */
	int err;      /* 0, or why this entry cannot be sent */
	char *errmsg;
	struct xfer_range *range; /* NULL: the whole file */
};

#define WALK_BLOCK 1024u /* entries per block */
/* Levels listed beneath a SRC; each level being listed holds an fd. */
#define WALK_MAX_DEPTH 256

struct walk_frame; /* a directory being listed */
struct filter;
struct lineq;

/*
 * A list handed over by the caller: 1 with the next name in *name (len
 * bytes, NUL-terminated, valid until the walk asks again), 0 when none
 * has come yet, -1 when the list has ended.
 */
typedef int walk_feed_fn(void *arg, const char **name, size_t *len);

struct walk {
	int rootfd; /* -1: SRCs are local paths; else confined beneath */
	bool recursive;
	bool devices;  /* device nodes are entries (WIRE_KIND_SPECIAL) */
	bool specials; /* ... and FIFOs and sockets */
	const struct filter *filter; /* NULL: every entry */
	FILE *list;		     /* names beneath srcs[0], or NULL */
	char list_sep;		     /* '\n', or '\0' (--from0) */
	bool list_tree; /* a listed name with a '/' is inside a tree:
			 * not followed, as walk_child() takes it; each
			 * record starts with a kind: 'N' a name, 'R' a
			 * range (xfer_list_range) */
	/*
	 * Without a list: the one SRC, a regular file, is sent as this byte
	 * range of it (--split, transfer/client/split.c), or NULL.
	 */
	const struct xfer_range *top_range;
	walk_feed_fn *feed;	     /* or these names (list NULL) */
	void *feed_arg;
	bool starved;		     /* walk_more stopped: no name yet */
	size_t n;		     /* entries listed so far */
	uint64_t bytes; /* their regular files' sizes, for progress */
	size_t skipped; /* entries left out with a warning (not filtered) */
	bool done;	/* every entry is listed: n and bytes are final */
	struct timespec
		t0; /* when it began: newer directories are not walked */
	/*
	 * private: the entries, and where the depth-first walk stands.
	 * blk[k] holds block blk0 + k (entries from its number times
	 * WALK_BLOCK on), NULL once released; blocks below blk0 are gone.
	 */
	struct walk_entry **blk;
	size_t blk0, nblk;
	const char *const *srcs;
	size_t nsrcs, next_src;
	struct walk_frame *stack;
	size_t depth, stack_cap;
	char *line, *prev; /* the list's current and previous name */
	size_t line_cap;
	struct hset listed; /* the listed names of the entries held */
	int list_err; /* a list that could not be read: -errno */
	/* a list from a pipe, terminal or socket, read by a thread of its
	 * own (util/lineq.h), so a silent writer never blocks the engine */
	struct lineq *lq;
	bool lq_tried;
	/* with a list or feed: its next name (walk_list_next), set by
	 * walk_list_start, so the tree walk never calls the list input */
	int (*next_listed)(struct walk *w);
};

/* Entry i < w->n, in a block not released. */
static inline struct walk_entry *walk_at(const struct walk *w, size_t i)
{
	return &w->blk[i / WALK_BLOCK - w->blk0][i % WALK_BLOCK];
}

/*
 * Starts a walk of srcs (kept, not copied) in w, zeroed by the caller
 * except rootfd, recursive, filter, list, list_sep and list_tree, or feed
 * and feed_arg (with a list, srcs holds one path: the base the names are
 * beneath). Nothing is listed yet.
 */
void walk_start(struct walk *w, const char *const *srcs, size_t n);
/*
 * walk_start, and with a list or a feed set, the names they give are what
 * the walk lists (walk_list.c). The source starts every walk with it.
 */
void walk_list_start(struct walk *w, const char *const *srcs, size_t n);

/*
 * Lists at least want more entries, or all that are left (then w->done),
 * or as many as it can before the feed runs dry or a non-blocking list
 * has no more names yet (then w->starved; the caller asks again later: a
 * name is never read in part, so the list's writer must write whole
 * names, at most PIPE_BUF bytes a write), or as many as it listed in
 * WALK_SLICE_MS (neither done nor starved: the caller, an engine that
 * must also read its connection, asks again at once).
 * Returns 0, -ENOMEM, or -EIO when the list cannot be read (w->list_err
 * says why); per-entry failures are recorded in the entries.
 */
#define WALK_SLICE_MS 50
int walk_more(struct walk *w, size_t want) __attribute__((warn_unused_result));

/*
 * A name as a list gives it (len bytes, the separator dropped), made in
 * place the name the walk sends: a leading '/', "." and empty components
 * dropped (path_normalize_peer). 0 for a path beneath the base, 1 for an
 * empty one (skipped), -EPERM for one that is not (a NUL inside, "..").
 */
int walk_list_name(char *name, size_t len) __attribute__((warn_unused_result));

/*
 * Opens an entry for reading (regular files), confined when w says so,
 * O_NONBLOCK (a FIFO is not waited on): the caller checks its type.
 */
int walk_open(const struct walk *w, const struct walk_entry *e)
	__attribute__((warn_unused_result));

/*
 * Frees block b (entries [b, b + 1) x WALK_BLOCK, all listed: the caller
 * counted them) and what its entries hold: the caller is done with them
 * and no pointer to one may be used again. A block released twice, or
 * one not wholly listed, is a programmer error.
 */
void walk_release(struct walk *w, size_t b);

void walk_free(struct walk *w);

#endif
