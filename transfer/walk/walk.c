/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The source's list of entries (walk.h). Directories are read through
 * file descriptors opened without following symlinks, so a tree that
 * changes under the walk cannot lead it outside itself; on a receiver
 * serving a pull every open goes through path_open_beneath().
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/walk/walk.h"
#include "transfer/walk/walk_int.h"
#include "transfer/wire/wire.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/lineq.h"
#include "util/log.h"
#include "util/path.h"

/*
 * A directory being listed: its paths (copies: its entry may be released
 * while its children are listed), its fd and its sorted names.
 */
struct walk_frame {
	char *local, *wire;
	int dfd;
	int depth;
	char **names;
	size_t n, next;
};

struct walk_entry *walk_add(struct walk *w, const char *local, const char *wire)
{
	struct walk_entry *e;

	if (w->n == (w->blk0 + w->nblk) * WALK_BLOCK) {
		struct walk_entry **b =
			realloc(w->blk, (w->nblk + 1) * sizeof(*b));

		if (!b)
			return NULL;
		w->blk = b;
		b[w->nblk] = malloc(WALK_BLOCK * sizeof(**b));
		if (!b[w->nblk])
			return NULL;
		w->nblk++;
	}
	e = walk_at(w, w->n);
	memset(e, 0, sizeof(*e));
	e->local = strdup(local);
	e->wire = strdup(wire);
	if (!e->local || !e->wire) {
		free(e->local);
		free(e->wire);
		return NULL;
	}
	w->n++;
	return e;
}

/* Takes back the entry just added: it is left out. */
void walk_drop_last(struct walk *w)
{
	struct walk_entry *e = walk_at(w, w->n - 1);

	free(e->local);
	free(e->wire);
	free(e->link);
	free(e->range);
	w->n--;
}

/* Whether the filter leaves e out; logged at debug level. */
bool walk_excluded(const struct walk *w, const struct walk_entry *e)
{
	if (!filter_excludes(w->filter, e->wire, e->kind == WIRE_KIND_DIR))
		return false;
	log_debug("'%s': excluded", e->local);
	return true;
}

int walk_fail(struct walk_entry *e, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&e->errmsg, fmt, ap) < 0)
		e->errmsg = NULL;
	va_end(ap);
	e->err = err;
	return e->errmsg ? 0 : -ENOMEM;
}

int walk_open_path(const struct walk *w, const char *path, int flags)
{
	int fd;

	if (w->rootfd >= 0)
		return path_open_beneath(w->rootfd, path, flags, 0);
	fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * Why a path beneath the root could not be opened: path_open_beneath's
 * refusals in words, else the error's.
 */
const char *walk_open_why(const struct walk *w, int rc)
{
	if (w->rootfd >= 0 && (rc == -ELOOP || rc == -EXDEV))
		return "a symlink on the way, or a path outside the root";
	return strerror(-rc);
}

/* Inside a tree nothing is followed; a local SRC as named is, like cp. */
static int nofollow(const struct walk *w, const struct walk_entry *e)
{
	return e->top && w->rootfd < 0 ? 0 : O_NOFOLLOW;
}

int walk_open(const struct walk *w, const struct walk_entry *e)
{
	/* O_NONBLOCK: a FIFO put in a file's place must not hold us. */
	return walk_open_path(
		w, e->local, O_RDONLY | O_NOCTTY | O_NONBLOCK | nofollow(w, e));
}

/*
 * Whether directory name in dirfd was made after the walk began. The walk
 * lists a tree while the copy runs, so when DEST lies inside SRC (one
 * host, a receiver's root inside the tree sent) it would find the copy it
 * is making and copy that again, deeper each time. A directory born after
 * the start was not part of the tree the user asked for; one of unknown
 * birth (no btime on this file system) is walked.
 */
static bool born_after_start(const struct walk *w, int dirfd, const char *name)
{
	struct statx stx;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) < 0 ||
	    !(stx.stx_mask & STATX_BTIME))
		return false;
	return stx.stx_btime.tv_sec > w->t0.tv_sec ||
	       (stx.stx_btime.tv_sec == w->t0.tv_sec &&
		stx.stx_btime.tv_nsec > (uint32_t)w->t0.tv_nsec);
}

bool walk_takes_special(const struct walk *w, mode_t mode)
{
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return w->devices;
	return (S_ISFIFO(mode) || S_ISSOCK(mode)) && w->specials;
}

/*
 * Fills kind (and link) from st; 0, or 1 for an entry that cannot be sent
 * (a FIFO, socket or device w does not take), which walk_child leaves out.
 */
int walk_classify(const struct walk *w, struct walk_entry *e, int dirfd,
		  const char *name)
{
	char buf[PATH_MAX];
	ssize_t n;

	if (S_ISREG(e->st.st_mode)) {
		e->kind = WIRE_KIND_FILE;
	} else if (S_ISDIR(e->st.st_mode)) {
		e->kind = WIRE_KIND_DIR;
	} else if (S_ISLNK(e->st.st_mode)) {
		e->kind = WIRE_KIND_SYMLINK;
		n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);
		if (n < 0)
			return walk_fail(e, -errno, "cannot read link '%s': %s",
					 e->local, strerror(errno));
		buf[n] = '\0';
		e->link = strdup(buf);
		if (!e->link)
			return -ENOMEM;
	} else if (walk_takes_special(w, e->st.st_mode)) {
		e->kind = WIRE_KIND_SPECIAL;
	} else {
		return 1;
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the names in directory fd (consumed), sorted. */
static int read_names(int fd, char ***out, size_t *count)
{
	DIR *d = fdopendir(fd);
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (errno = 0; (de = readdir(d)); errno = 0) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 32) *
						       sizeof(*v));

			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n] = strdup(de->d_name);
		if (!v[n]) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	if (rc) {
		while (n)
			free(v[--n]);
		free(v);
		return rc;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_names);
	*out = v;
	*count = n;
	return 0;
}

static int walk_dir(struct walk *w, struct walk_entry *dir, int depth);

/*
 * Adds name found in the directory being listed, dir_local (dir_wire on
 * the wire), open as dirfd.
 */
static int walk_child(struct walk *w, const char *dir_local,
		      const char *dir_wire, int dirfd, const char *name,
		      int depth)
{
	char local[PATH_MAX + 1], wire[PATH_MAX + 1];
	struct walk_entry *e;
	int rc;

	if (path_join(local, sizeof(local), dir_local, name) ||
	    path_join(wire, sizeof(wire), dir_wire, name) ||
	    strlen(wire) > PATH_PEER_MAX) {
		log_warn("skipping '%s/%s': path too long", dir_local, name);
		w->skipped++;
		return 0;
	}
	e = walk_add(w, local, wire);
	if (!e)
		return -ENOMEM;
	if (fstatat(dirfd, name, &e->st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		if (walk_excluded(w, e)) {
			walk_drop_last(w);
			return 0;
		}
		return walk_fail(e, rc, "cannot stat '%s': %s", local,
				 strerror(-rc));
	}
	rc = walk_classify(w, e, dirfd, name);
	if ((rc == 0 || rc == 1) && walk_excluded(w, e)) {
		rc = 1;
	} else if (rc == 1) {
		log_warn("skipping '%s': not a regular file, directory or "
			 "symlink (-D copies devices, FIFOs and sockets)",
			 local);
		w->skipped++;
	} else if (rc == 0 && e->kind == WIRE_KIND_DIR &&
		   born_after_start(w, dirfd, name)) {
		log_warn("skipping '%s': made after the copy began (is DEST "
			 "inside the source?)",
			 local);
		w->skipped++;
		rc = 1;
	}
	if (rc == 1) {
		walk_drop_last(w);
		return 0;
	}
	if (rc || e->err)
		return rc;
	if (e->kind == WIRE_KIND_FILE)
		w->bytes += (uint64_t)e->st.st_size;
	if (e->kind == WIRE_KIND_DIR)
		return walk_dir(w, e, depth + 1);
	return 0;
}

static void free_names(char **names, size_t n)
{
	while (n)
		free(names[--n]);
	free(names);
}

/*
 * Opens the directory entry dir (the one just listed) and reads its
 * names; its children are listed from the frame pushed here, one by one,
 * by walk_more().
 */
static int walk_dir(struct walk *w, struct walk_entry *dir, int depth)
{
	struct walk_frame *f;
	char **names = NULL, *local, *wire;
	size_t n = 0;
	int fd, dfd, rc;

	if (depth > WALK_MAX_DEPTH)
		return walk_fail(dir, -ELOOP,
				 "'%s': deeper than %d levels: not copied",
				 dir->local, WALK_MAX_DEPTH);
	fd = walk_open_path(w, dir->local,
			    O_RDONLY | O_DIRECTORY | nofollow(w, dir));
	if (fd < 0)
		return walk_fail(dir, fd, "cannot open directory '%s': %s",
				 dir->local, strerror(-fd));
	dfd = dup(fd);
	if (dfd < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = read_names(fd, &names, &n);
	if (rc == -ENOMEM) {
		close(dfd);
		return rc;
	}
	if (rc) {
		close(dfd);
		return walk_fail(dir, rc, "cannot read directory '%s': %s",
				 dir->local, strerror(-rc));
	}
	local = strdup(dir->local);
	wire = strdup(dir->wire);
	if (local && wire && w->depth == w->stack_cap) {
		size_t cap = w->stack_cap ? 2 * w->stack_cap : 8;
		struct walk_frame *v = realloc(w->stack, cap * sizeof(*v));

		if (v) {
			w->stack = v;
			w->stack_cap = cap;
		}
	}
	if (!local || !wire || w->depth == w->stack_cap) {
		free(local);
		free(wire);
		free_names(names, n);
		close(dfd);
		return -ENOMEM;
	}
	f = &w->stack[w->depth++];
	f->local = local;
	f->wire = wire;
	f->dfd = dfd;
	f->depth = depth;
	f->names = names;
	f->n = n;
	f->next = 0;
	return 0;
}

static void pop_dir(struct walk *w)
{
	struct walk_frame *f = &w->stack[--w->depth];

	while (f->next < f->n)
		free(f->names[f->next++]);
	free(f->names);
	free(f->local);
	free(f->wire);
	close(f->dfd);
}

/* The name a top-level SRC gets on the wire: its last component. */
static int top_name(const char *src, char *out, size_t outsz)
{
	char buf[PATH_MAX + 1];
	size_t len = strlen(src);
	const char *base;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, src, len + 1);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	base = path_basename(buf);
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") ||
	    !strcmp(buf, "/")) {
		char real[PATH_MAX];

		if (!realpath(src, real))
			return -errno;
		base = path_basename(real);
		if (!*base)
			return -EINVAL;
		snprintf(out, outsz, "%s", base);
		return 0;
	}
	snprintf(out, outsz, "%s", base);
	return 0;
}

/* Stats a SRC as named: followed if local, confined beneath a root. */
int walk_stat_named(const struct walk *w, const char *src, struct stat *st)
{
	int rc, fd;

	if (w->rootfd < 0)
		return stat(src, st) < 0 ? -errno : 0;
	fd = walk_open_path(w, src, O_PATH);
	if (fd < 0)
		return fd;
	rc = fstat(fd, st) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/*
 * Adds a SRC named by the user (on the command line, or in the list)
 * and, for a directory with -r, starts its walk. listed: a name from the
 * list, whose directory without -r is sent as an empty one, as rsync
 * does, not refused.
 */
int walk_named(struct walk *w, const char *src, const char *wire, bool listed)
{
	struct walk_entry *e = walk_add(w, src, wire);
	int rc;

	if (!e)
		return -ENOMEM;
	e->top = true;
	rc = walk_stat_named(w, src, &e->st);
	if (rc) {
		if (walk_excluded(w, e)) {
			walk_drop_last(w);
			return 0;
		}
		return walk_fail(e, rc, "cannot %s '%s': %s",
				 w->rootfd < 0 ? "stat" : "open", src,
				 walk_open_why(w, rc));
	}
	e->kind = S_ISDIR(e->st.st_mode)		 ? WIRE_KIND_DIR
		  : walk_takes_special(w, e->st.st_mode) ? WIRE_KIND_SPECIAL
							 : WIRE_KIND_FILE;
	if (walk_excluded(w, e)) {
		walk_drop_last(w);
		return 0;
	}
	if (S_ISREG(e->st.st_mode)) {
		w->bytes += (uint64_t)e->st.st_size;
		return 0;
	}
	if (e->kind == WIRE_KIND_SPECIAL)
		return 0;
	if (!S_ISDIR(e->st.st_mode))
		return walk_fail(e, -EINVAL,
				 "cannot send '%s': not a regular "
				 "file",
				 src);
	if (!w->recursive && listed)
		return 0;
	if (!w->recursive)
		return walk_fail(e, -EISDIR,
				 "cannot send '%s': it is a directory (use "
				 "-r)",
				 src);
	return walk_dir(w, e, 0);
}

/*
 * The one SRC sent as w->top_range of it (--split): a regular file that
 * still holds the range, else failed as one that changed.
 */
static int top_range(struct walk *w, const char *src, const char *name)
{
	const struct xfer_range *r = w->top_range;
	size_t before = w->n;
	struct walk_entry *e;
	int rc = walk_named(w, src, name, false);

	if (rc || w->n == before)
		return rc; /* failed as it is, or left out (the filter) */
	e = walk_at(w, w->n - 1);
	if (e->err)
		return 0;
	if (e->kind != WIRE_KIND_FILE ||
	    r->off + r->len > (uint64_t)e->st.st_size)
		return walk_fail(e, -ESTALE,
				 "'%s' changed while the copy ran: its range "
				 "%u of %u is no longer in it",
				 src, r->idx + 1, r->count);
	e->range = malloc(sizeof(*e->range));
	if (!e->range)
		return -ENOMEM;
	*e->range = *r;
	/* its bytes, not the whole file's, are this walk's */
	w->bytes -= (uint64_t)e->st.st_size - r->len;
	return 0;
}

static int walk_top(struct walk *w, const char *src)
{
	char name[PATH_NAME_MAX + 1];
	struct walk_entry *e;
	int rc;

	rc = top_name(src, name, sizeof(name));
	if (!rc && w->top_range)
		return top_range(w, src, name);
	if (!rc)
		return walk_named(w, src, name, false);
	e = walk_add(w, src, "?");
	if (!e)
		return -ENOMEM;
	e->top = true;
	return walk_fail(e, rc, "cannot name '%s': %s", src, strerror(-rc));
}

void walk_start(struct walk *w, const char *const *srcs, size_t n)
{
	w->srcs = srcs;
	w->nsrcs = n;
	struct timespec now, nap = { .tv_nsec = 500000 };

	/*
	 * A directory made before t0 has a birth time <= t0 and is walked.
	 * File systems stamp times from the coarse clock, up to a tick
	 * behind: one made just after t0 could carry a time <= t0 too. So
	 * nothing is listed (and nothing copied) until the coarse clock has
	 * passed t0; every directory made from then on is born after t0.
	 */
	clock_gettime(CLOCK_REALTIME, &w->t0);
	for (int i = 0; i < 100; i++) {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (now.tv_sec > w->t0.tv_sec ||
		    (now.tv_sec == w->t0.tv_sec && now.tv_nsec > w->t0.tv_nsec))
			break;
		nanosleep(&nap, NULL);
	}
}

int walk_more(struct walk *w, size_t want)
{
	size_t goal = want > SIZE_MAX - w->n ? SIZE_MAX : w->n + want;
	uint64_t t0 = clock_now_ms();
	int rc = 0;

	w->starved = false;
	while (!rc && !w->done && !w->starved && w->n < goal) {
		struct walk_frame *f;
		char *name;

		/* A slow list's writer, a slow file system: the rest later. */
		if (clock_now_ms() - t0 >= WALK_SLICE_MS)
			break;
		if (!w->depth && w->next_listed) {
			rc = w->next_listed(w);
			if (rc == 1)
				w->done = true;
			if (rc == 2)
				w->starved = true;
			if (rc == 1 || rc == 2)
				rc = 0;
			continue;
		}
		if (!w->depth) {
			if (w->next_src == w->nsrcs)
				w->done = true;
			else
				rc = walk_top(w, w->srcs[w->next_src++]);
			continue;
		}
		f = &w->stack[w->depth - 1];
		if (f->next == f->n) {
			pop_dir(w);
			continue;
		}
		/* A subdirectory pushes a frame: f moves, its strings not. */
		name = f->names[f->next++];
		rc = walk_child(w, f->local, f->wire, f->dfd, name, f->depth);
		free(name);
	}
	return rc;
}

/* Frees block k of w->blk (block blk0 + k) and its listed entries. */
static void free_block(struct walk *w, size_t k)
{
	struct walk_entry *blk = w->blk[k];
	size_t first = (w->blk0 + k) * WALK_BLOCK;
	size_t n = w->n - first < WALK_BLOCK ? w->n - first : WALK_BLOCK;

	if (!blk)
		return;
	for (size_t i = 0; i < n; i++) {
		if (blk[i].listed)
			hset_del(&w->listed,
				 hset_key(ck_fnv1a64(blk[i].wire,
						     strlen(blk[i].wire))));
		free(blk[i].local);
		free(blk[i].wire);
		free(blk[i].link);
		free(blk[i].errmsg);
		free(blk[i].range);
	}
	free(blk);
	w->blk[k] = NULL;
}

void walk_release(struct walk *w, size_t b)
{
	size_t k = b - w->blk0, gone = 0;

	assert(b >= w->blk0 && k < w->nblk && w->blk[k]);
	assert((b + 1) * WALK_BLOCK <= w->n);
	free_block(w, k);
	/* The released blocks in front go from the array. */
	while (gone < w->nblk && !w->blk[gone])
		gone++;
	if (!gone)
		return;
	memmove(w->blk, w->blk + gone, (w->nblk - gone) * sizeof(*w->blk));
	w->blk0 += gone;
	w->nblk -= gone;
}

void walk_free(struct walk *w)
{
	while (w->depth)
		pop_dir(w);
	free(w->stack);
	for (size_t k = 0; k < w->nblk; k++)
		free_block(w, k);
	free(w->blk);
	hset_release(&w->listed);
	lineq_stop(w->lq);
	w->lq = NULL;
	free(w->line);
	free(w->prev);
	w->line = w->prev = NULL;
	w->blk = NULL;
	w->stack = NULL;
	w->n = w->blk0 = w->nblk = w->depth = w->stack_cap = 0;
}
