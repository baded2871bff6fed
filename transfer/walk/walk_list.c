/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The walk's list input (walk.h): --files-from's names, read from a
 * stream or handed over by a feed, each normalized, refused if it leaves
 * the base, preceded by the directories it implies, then added as a SRC
 * named by the user (walk.c's walk_named) or, inside a tree, as a child.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/walk/walk.h"
#include "transfer/walk/walk_int.h"
#include "transfer/wire/wire.h"
#include "util/checksum.h"
#include "util/lineq.h"
#include "util/log.h"
#include "util/path.h"

/*
 * The directories name (from the list) implies beneath the base: each
 * one the previous name did not already imply, as a directory entry of
 * its own, not walked, so that the sink has a place to put name. 0, or 1
 * when one cannot be sent: that entry fails for the name, which is not
 * walked (nothing beneath a directory the sink never made could be
 * placed), and *good is the length of the part of name that is fine.
 */
static int walk_implied(struct walk *w, const char *name, size_t *good)
{
	char local[PATH_MAX + 1];
	const char *base = w->srcs[0];
	size_t plen = w->prev ? strlen(w->prev) : 0;

	for (const char *s = strchr(name, '/'); s; s = strchr(s + 1, '/')) {
		size_t n = (size_t)(s - name);
		char dir[PATH_MAX + 1];
		struct walk_entry *e;
		int rc;

		if (plen >= n && !strncmp(w->prev, name, n) &&
		    (w->prev[n] == '/' || !w->prev[n]))
			continue; /* the previous name made it already */
		memcpy(dir, name, n);
		dir[n] = '\0';
		rc = path_join(local, sizeof(local), base, dir);
		e = walk_add(w, rc ? dir : local, dir);
		if (!e)
			return -ENOMEM;
		e->top = true;
		e->kind = WIRE_KIND_DIR;
		if (!rc)
			rc = walk_stat_named(w, local, &e->st);
		if (!rc && !S_ISDIR(e->st.st_mode))
			rc = -ENOTDIR;
		if (!rc)
			continue;
		*good = n; /* back to the end of its parent */
		while (*good && name[*good - 1] != '/')
			(*good)--;
		*good -= *good > 0;
		rc = walk_fail(e, rc,
			       "cannot send '%s' of the file list: '%s': %s",
			       name, e->local, walk_open_why(w, rc));
		return rc ? rc : 1;
	}
	return 0;
}

int walk_list_name(char *name, size_t len)
{
	bool dir, nul = memchr(name, '\0', len); /* in a line */

	path_normalize_peer(name, &dir);
	if (nul)
		return -EPERM;
	if (!name[0])
		return 1;
	return path_check_relative(name, strlen(name), false) ? -EPERM : 0;
}

/* name, len bytes, into w->line: 1 or -ENOMEM. */
static int take_name(struct walk *w, const char *name, size_t len)
{
	if (len + 1 > w->line_cap) {
		char *l = realloc(w->line, len + 1);

		if (!l)
			return -ENOMEM;
		w->line = l;
		w->line_cap = len + 1;
	}
	memcpy(w->line, name, len + 1);
	return 1;
}

/*
 * Reads the list's next name into w->line, *len bytes (the separator
 * dropped): 1, 0 at the end, 2 when a feed, a non-blocking list or a
 * list read by a thread has none yet, or -errno.
 */
static int list_read(struct walk *w, size_t *len)
{
	const char *name;
	ssize_t n;
	int rc;

	if (!w->feed && !w->lq_tried) {
		w->lq_tried = true;
		rc = fileno(w->list) >= 0 && lineq_wanted(fileno(w->list))
			     ? lineq_start(&w->lq, fileno(w->list),
					   w->list_sep)
			     : 0;
		if (rc) {
			w->list_err = rc;
			return -EIO;
		}
	}
	if (w->lq) {
		rc = lineq_next(w->lq, &name, len);
		if (rc < -1) {
			w->list_err = rc;
			return rc == -ENOMEM ? rc : -EIO;
		}
		return rc == 1 ? take_name(w, name, *len) : rc < 0 ? 0 : 2;
	}
	if (w->feed) {
		rc = w->feed(w->feed_arg, &name, len);
		if (rc <= 0)
			return rc < 0 ? 0 : 2;
		return take_name(w, name, *len);
	}
	errno = 0;
	n = getdelim(&w->line, &w->line_cap, w->list_sep, w->list);
	if (n < 0) {
		if (errno == ENOMEM)
			return -ENOMEM;
		if (errno == EAGAIN && ferror(w->list)) {
			clearerr(w->list); /* a non-blocking list, empty now */
			return 2;
		}
		if (ferror(w->list)) {
			w->list_err = errno ? -errno : -EIO;
			return -EIO;
		}
		return 0;
	}
	if (n && w->line[n - 1] == w->list_sep)
		w->line[--n] = '\0';
	*len = (size_t)n;
	return 1;
}

/*
 * A listed name inside a tree (w->list_tree): taken as walk_child() takes
 * what it finds in a directory (lstat; a symlink is a link, a device is
 * skipped), but not walked into: its parent is opened, following the
 * components above it, which the walk that listed it went through.
 */
static int walk_listed_child(struct walk *w, const char *local,
			     const char *wire)
{
	char parent[PATH_MAX + 1];
	const char *name = strrchr(local, '/') + 1;
	struct walk_entry *e;
	int dfd, rc;

	memcpy(parent, local, (size_t)(name - local - 1));
	parent[name - local - 1] = '\0';
	e = walk_add(w, local, wire);
	if (!e)
		return -ENOMEM;
	dfd = walk_open_path(w, parent, O_PATH | O_DIRECTORY);
	if (dfd < 0 || fstatat(dfd, name, &e->st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = dfd < 0 ? dfd : -errno;
		if (dfd >= 0)
			close(dfd);
		if (walk_excluded(w, e)) {
			walk_drop_last(w);
			return 0;
		}
		return walk_fail(e, rc, "cannot stat '%s': %s", local,
				 strerror(-rc));
	}
	rc = walk_classify(w, e, dfd, name);
	close(dfd);
	if (rc == 0 && walk_excluded(w, e))
		rc = 1;
	if (rc == 1) {
		walk_drop_last(w);
		return 0;
	}
	if (!rc && !e->err && e->kind == WIRE_KIND_FILE)
		w->bytes += (uint64_t)e->st.st_size;
	return rc;
}

/*
 * The next name of the list, beneath the base: normalized as a peer path
 * (walk_list_name), refused if it leaves the base. 1 when the list is at
 * its end, 2 when a feed or a non-blocking list has no name yet.
 */
int xfer_list_range(char *out, size_t cap, const struct xfer_range *r,
		    const char *name)
{
	char hex[2 * sizeof(r->token) + 1];
	int n;

	for (size_t i = 0; i < sizeof(r->token); i++)
		snprintf(hex + 2 * i, 3, "%02x", r->token[i]);
	n = snprintf(out, cap, "R%llu %llu %u %u %s %s",
		     (unsigned long long)r->off, (unsigned long long)r->len,
		     r->idx, r->count, hex, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

/*
 * A list_tree record's kind taken off w->line (*n bytes, then fewer): 0
 * for a name, 1 for a range (*r filled), -EINVAL for neither.
 */
static int record_kind(struct walk *w, size_t *n, struct xfer_range *r)
{
	unsigned long long off = 0, len = 0;
	unsigned int idx = 0, count = 0, b;
	char hex[33];
	int used = 0;

	if (!*n || (w->line[0] != 'N' && w->line[0] != 'R'))
		return -EINVAL;
	if (w->line[0] == 'R' &&
	    (sscanf(w->line + 1, "%llu %llu %u %u %32[0-9a-f] %n", &off, &len,
		    &idx, &count, hex, &used) != 5 ||
	     !used || strlen(hex) != 32 || !len || idx >= count))
		return -EINVAL;
	memmove(w->line, w->line + 1 + used, *n - 1 - (size_t)used + 1);
	*n -= 1 + (size_t)used;
	if (!*n)
		return -EINVAL;
	if (!used)
		return 0;
	r->off = off;
	r->len = len;
	r->idx = idx;
	r->count = count;
	for (int i = 0; i < 16; i++) {
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -EINVAL;
		r->token[i] = (uint8_t)b;
	}
	return 1;
}

/*
 * The entry just listed for a range record: given the range when it is
 * a regular file that still holds it, else failed.
 */
static int take_range(struct walk *w, size_t before, const char *name,
		      const struct xfer_range *r)
{
	struct walk_entry *e;

	if (w->n == before)
		return 0; /* left out: the filter */
	e = walk_at(w, w->n - 1);
	if (strcmp(e->wire, name) || e->err)
		return 0;
	if (e->kind != WIRE_KIND_FILE ||
	    r->off + r->len > (uint64_t)e->st.st_size)
		return walk_fail(e, -ESTALE,
				 "'%s' changed while the copy ran: its range "
				 "%u of %u is no longer in it",
				 e->local, r->idx + 1, r->count);
	e->range = malloc(sizeof(*e->range));
	if (!e->range)
		return -ENOMEM;
	*e->range = *r;
	/* its bytes, not the whole file's, are this walk's */
	w->bytes -= (uint64_t)e->st.st_size - r->len;
	return 0;
}

/*
 * The list's next name, added: 0, 1 at the list's end, 2 when a feed or
 * a non-blocking list has none yet, or -errno.
 */
static int walk_list_next(struct walk *w)
{
	char local[PATH_MAX + 1];
	struct xfer_range range;
	struct walk_entry *e;
	size_t n, keep, before;
	uint64_t key;
	int rc, kind = 0;

	do {
		rc = list_read(w, &n);
		if (rc != 1)
			return rc ? rc : 1;
		kind = w->list_tree ? record_kind(w, &n, &range) : 0;
		if (kind < 0) {
			log_err("a malformed record in the list of names");
			w->list_err = -EPROTO;
			return -EIO;
		}
		rc = walk_list_name(w->line, n);
	} while (rc == 1);
	before = w->n;
	if (rc) {
		e = walk_add(w, w->line, "?");
		if (!e)
			return -ENOMEM;
		return walk_fail(e, -EPERM,
				 "'%s' in the file list: not a path beneath "
				 "'%s'",
				 w->line, w->srcs[0]);
	}
	keep = strlen(w->line);
	/*
	 * A name listed again while its entry is still held (maybe in
	 * flight: two copies would race on the sink's temporary) is left
	 * out, as rsync sends a name once. One listed again after its
	 * entry was done and released goes again, after it. Ranges of one
	 * file (rdcp-mpi's records) are each their own entry.
	 */
	key = hset_key(ck_fnv1a64(w->line, keep));
	if (kind != 1 && hset_has(&w->listed, key))
		return 0;
	rc = walk_implied(w, w->line, &keep);
	if (!rc && path_join(local, sizeof(local), w->srcs[0], w->line)) {
		/* a name fit to send: the sink is told under that name */
		e = walk_add(w, w->line, w->line);
		if (!e)
			return -ENOMEM;
		e->top = true;
		rc = walk_fail(e, -ENAMETOOLONG,
			       "cannot send '%s' of the file list: the path "
			       "beneath '%s' is too long",
			       w->line, w->srcs[0]);
	} else if (!rc && w->list_tree && strchr(w->line, '/')) {
		rc = walk_listed_child(w, local, w->line);
	} else if (!rc) {
		rc = walk_named(w, local, w->line, true);
	}
	if (rc == 1)
		rc = 0;
	e = w->n > before ? walk_at(w, w->n - 1) : NULL;
	if (rc >= 0 && kind != 1 && e && !strcmp(e->wire, w->line)) {
		e->listed = true;
		if (hset_add(&w->listed, key) == -ENOMEM) {
			e->listed = false;
			rc = -ENOMEM;
		}
	}
	if (!rc && kind == 1)
		rc = take_range(w, before, w->line, &range);
	free(w->prev);
	w->prev = strndup(w->line, keep);
	if (!rc && !w->prev)
		rc = -ENOMEM;
	return rc;
}

void walk_list_start(struct walk *w, const char *const *srcs, size_t n)
{
	walk_start(w, srcs, n);
	if (w->list || w->feed)
		w->next_listed = walk_list_next;
}
