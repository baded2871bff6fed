/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to walk.c and walk_list.c: the helpers the list input shares
 * with the tree walk. Each works on the walk's entries as walk.h says.
 */
#ifndef RDCP_WALK_INT_H
#define RDCP_WALK_INT_H

#include "transfer/walk/walk.h"

/* Appends an entry (copies of local and wire); NULL when out of memory. */
struct walk_entry *walk_add(struct walk *w, const char *local,
			    const char *wire);
/* Takes back the entry just added: it is left out. */
void walk_drop_last(struct walk *w);
/* Whether the filter leaves e out; logged at debug level. */
bool walk_excluded(const struct walk *w, const struct walk_entry *e);
/* Records err and why in e: 0, or -ENOMEM when the message is lost. */
int walk_fail(struct walk_entry *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Opens path, confined beneath the root when w has one: fd or -errno. */
int walk_open_path(const struct walk *w, const char *path, int flags);
/* Why a path could not be opened, in words. */
const char *walk_open_why(const struct walk *w, int rc);
/*
 * Fills kind (and link) from e->st: 0, 1 for an entry that cannot be sent
 * (a FIFO, socket or device w does not take), or -ENOMEM.
 */
int walk_classify(const struct walk *w, struct walk_entry *e, int dirfd,
		  const char *name);
/* Whether w takes st's kind of special file (-D). */
bool walk_takes_special(const struct walk *w, mode_t mode);
/* Stats a SRC as named: followed if local, confined beneath a root. */
int walk_stat_named(const struct walk *w, const char *src, struct stat *st);
/*
 * Adds a SRC named by the user (or the list) and with -r starts its walk:
 * 0 or -ENOMEM (per-entry failures are kept in the entry).
 */
int walk_named(struct walk *w, const char *src, const char *wire, bool listed);

#endif
