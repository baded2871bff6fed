/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The walk of prune.h. A stack of open directories, one level per
 * directory being looked at: the start directory, the directories entered
 * (kept, their entries looked at) and those being removed (purged: their
 * entries go, then they do). A level reads its directory's names when it
 * is entered, sorted (so the order is the source walk's, and the same in
 * a dry run), as walk.c does; each step takes one name, asks the caller's
 * verdict and acts on it: a name is looked at with fstatat(AT_SYMLINK_
 * NOFOLLOW) beneath its directory's fd, removed with unlinkat() there, and
 * a directory entered with openat(O_NOFOLLOW | O_DIRECTORY) and fstat()
 * checked to be the inode just looked at, so a name swapped for a symlink
 * meanwhile is never followed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/fs/prune.h"
#include "transfer/wire/wire.h"
#include "util/path.h"

struct prune_level {
	int fd;	      /* the directory (O_RDONLY) */
	char **names; /* its entries' names, sorted */
	size_t n, next;
	size_t plen;  /* its path's length in p->path */
	bool purge;   /* being removed: everything in it goes, then it */
	bool kept;    /* something in it stays: it cannot go */
	bool changed; /* something in it went */
	dev_t dev;
	struct timespec times[2]; /* atime, mtime when it was opened */
};

struct prune {
	struct prune_cfg cfg;
	bool started;
	unsigned int depth;
	uint64_t removed;
	struct prune_level lv[PRUNE_DEPTH_MAX];
	char path[PATH_PEER_MAX + 1];
};

int prune_create(const struct prune_cfg *cfg, struct prune **out)
{
	struct prune *p;

	*out = NULL;
	if (strlen(cfg->prefix) > PATH_PEER_MAX)
		return -ENAMETOOLONG;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cfg = *cfg;
	*out = p;
	return 0;
}

uint64_t prune_removed(const struct prune *p)
{
	return p->removed;
}

static uint8_t kind_of(mode_t mode)
{
	return S_ISREG(mode)   ? WIRE_KIND_FILE
	       : S_ISDIR(mode) ? WIRE_KIND_DIR
	       : S_ISLNK(mode) ? WIRE_KIND_SYMLINK
			       : WIRE_KIND_OTHER;
}

/* An event about p->path: 1 for prune_next to return. */
static int event(struct prune *p, struct prune_event *ev, uint8_t kind,
		 int status, const char *why)
{
	ev->path = p->path;
	ev->kind = kind;
	ev->status = status;
	ev->why = status ? why : NULL;
	ev->bytes = 0;
	return 1;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(struct prune_level *l)
{
	while (l->n)
		free(l->names[--l->n]);
	free(l->names);
	l->names = NULL;
}

/* The names in directory fd (not consumed), sorted, into l. 0 or -errno. */
static int read_names(struct prune_level *l, int fd)
{
	int dfd = dup(fd);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	size_t cap = 0;
	struct dirent *de;
	int rc = 0;

	l->names = NULL;
	l->n = l->next = 0;
	if (!d) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	for (errno = 0; (de = readdir(d)); errno = 0) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (l->n == cap) {
			char **v =
				realloc(l->names, (cap = cap ? 2 * cap : 32) *
							  sizeof(*v));

			if (!v) {
				rc = -ENOMEM;
				break;
			}
			l->names = v;
		}
		if (!(l->names[l->n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		l->n++;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	if (rc)
		free_names(l);
	else if (l->n)
		qsort(l->names, l->n, sizeof(*l->names), cmp_names);
	return rc;
}

/* A directory opened at fd (consumed) becomes the deepest level. */
static int push(struct prune *p, int fd, const struct stat *st, bool purge)
{
	struct prune_level *l = &p->lv[p->depth];
	int rc = read_names(l, fd);

	if (rc) {
		close(fd);
		return rc;
	}
	l->fd = fd;
	l->plen = strlen(p->path);
	l->purge = purge;
	l->kept = l->changed = false;
	l->dev = st->st_dev;
	l->times[0] = st->st_atim;
	l->times[1] = st->st_mtim;
	p->depth++;
	return 0;
}

/* Whether the directory open at fd is the root of a mount. */
static bool mount_root(int fd)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, 0, &sx) < 0)
		return false;
	return sx.stx_attributes_mask & sx.stx_attributes &
	       STATX_ATTR_MOUNT_ROOT;
}

/*
 * Enters directory name of level l (p->path names it), looked at as st:
 * 0, or an event (1) when it cannot be, and l keeps it.
 */
static int enter(struct prune *p, struct prune_level *l, const char *name,
		 const struct stat *st, bool purge, struct prune_event *ev)
{
	const char *why = "cannot open the directory";
	struct stat now;
	int fd, rc;

	if (p->depth == PRUNE_DEPTH_MAX) {
		rc = -ELOOP;
		why = "more than 256 directory levels down";
		goto out_kept;
	}
	fd = openat(l->fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0; /* gone meanwhile: nothing to remove */
	if (fd < 0) {
		rc = -errno;
		goto out_kept;
	}
	if (fstat(fd, &now) < 0 || now.st_ino != st->st_ino ||
	    now.st_dev != st->st_dev) {
		rc = -EAGAIN;
		why = "it changed while it was looked at";
		goto out_close;
	}
	if (purge && (now.st_dev != l->dev || mount_root(fd))) {
		rc = -EBUSY;
		why = "it is a mount point";
		goto out_close;
	}
	rc = push(p, fd, &now, purge); /* consumes fd */
	if (!rc)
		return 0;
	why = "cannot read the directory";
	goto out_kept;
out_close:
	close(fd);
out_kept:
	l->kept = true;
	return event(p, ev, WIRE_KIND_DIR, rc, why);
}

/*
 * Removes name of level l (p->path names it; bytes: what it holds, for
 * the event): an event.
 */
static int remove_name(struct prune *p, struct prune_level *l, const char *name,
		       uint8_t kind, int flags, uint64_t bytes,
		       struct prune_event *ev)
{
	int rc;

	if (!p->cfg.remove)
		return event(p, ev, kind, 0, NULL);
	if (p->removed >= p->cfg.limit) {
		l->kept = true;
		return event(p, ev, kind, -E2BIG, "no more removals allowed");
	}
	if (unlinkat(l->fd, name, flags) < 0) {
		if (errno == ENOENT)
			return 0; /* gone meanwhile */
		l->kept = true;
		return event(p, ev, kind, -errno, "cannot remove it");
	}
	p->removed++;
	l->changed = true;
	rc = event(p, ev, kind, 0, NULL);
	ev->bytes = bytes;
	return rc;
}

/* Name in the deepest level: 0 (kept, entered) or an event. */
static int look_at(struct prune *p, const char *name, struct prune_event *ev)
{
	struct prune_level *l = &p->lv[p->depth - 1];
	size_t off = l->plen, n = strlen(name);
	enum prune_verdict v;
	struct stat st;
	bool dir;

	p->path[off] = '\0';
	if (off + !!off + n > PATH_PEER_MAX) {
		l->kept = true;
		return event(p, ev, WIRE_KIND_OTHER, -ENAMETOOLONG,
			     "a name in it makes a path too long to check");
	}
	if (off)
		p->path[off++] = '/';
	memcpy(p->path + off, name, n + 1);
	if (fstatat(l->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		l->kept = true;
		return event(p, ev, WIRE_KIND_OTHER, -errno,
			     "cannot look at it");
	}
	dir = S_ISDIR(st.st_mode);
	v = p->cfg.decide(p->cfg.arg, p->path, dir, l->purge);
	if (l->purge && v != PRUNE_KEEP)
		v = PRUNE_REMOVE;
	if (v == PRUNE_ENTER && !dir)
		v = PRUNE_KEEP;
	switch (v) {
	case PRUNE_KEEP:
		l->kept = true;
		return 0;
	case PRUNE_ENTER:
		return enter(p, l, name, &st, false, ev);
	default:
		if (dir)
			return enter(p, l, name, &st, true, ev);
		return remove_name(
			p, l, name, kind_of(st.st_mode), 0,
			S_ISREG(st.st_mode) ? (uint64_t)st.st_blocks * 512 : 0,
			ev);
	}
}

/*
 * The deepest level is listed: closes it; a purged directory with nothing
 * kept in it is removed now (an event), else its parent keeps it.
 */
static int pop(struct prune *p, struct prune_event *ev)
{
	struct prune_level *l = &p->lv[--p->depth];
	struct prune_level *up = p->depth ? &p->lv[p->depth - 1] : NULL;
	const char *name;

	p->path[l->plen] = '\0';
	free_names(l);
	if (!l->purge) {
		if (p->cfg.keep_times && l->changed && p->cfg.remove)
			(void)futimens(l->fd, l->times); /* best effort */
		close(l->fd);
		return 0;
	}
	close(l->fd);
	if (l->kept) {
		up->kept = true;
		return 0;
	}
	name = strrchr(p->path, '/');
	name = name ? name + 1 : p->path;
	return remove_name(p, up, name, WIRE_KIND_DIR, AT_REMOVEDIR, 0, ev);
}

/* The start directory becomes level 0: 0, or an event. */
static int start(struct prune *p, struct prune_event *ev)
{
	struct stat st;
	int fd, rc;

	p->started = true;
	strcpy(p->path, p->cfg.prefix);
	fd = openat(p->cfg.dirfd, p->cfg.name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return event(p, ev, WIRE_KIND_DIR, -errno,
			     "cannot open the directory");
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		close(fd);
		return event(p, ev, WIRE_KIND_DIR, rc, "cannot look at it");
	}
	rc = push(p, fd, &st, false);
	return rc ? event(p, ev, WIRE_KIND_DIR, rc, "cannot read the directory")
		  : 0;
}

int prune_next(struct prune *p, struct prune_event *ev)
{
	int rc;

	if (!p->started && (rc = start(p, ev)))
		return rc;
	while (p->depth) {
		struct prune_level *l = &p->lv[p->depth - 1];

		if (l->next == l->n) {
			if ((rc = pop(p, ev)))
				return rc;
			continue;
		}
		if ((rc = look_at(p, l->names[l->next++], ev)))
			return rc;
	}
	return 0;
}

void prune_destroy(struct prune *p)
{
	if (!p)
		return;
	while (p->depth) {
		struct prune_level *l = &p->lv[--p->depth];

		free_names(l);
		close(l->fd);
	}
	free(p);
}
