/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The directories a sink creates and finishes. A directory is made as it
 * is announced, 01700 (place_mkdir: PLACE_DIR_FILLING), so it stays
 * writable while it fills and one that a session cut off left unfinished
 * is known as such by the next, which finishes it as its own. Its final
 * mode and (with -p) times come when nothing more can change it:
 * the walk has left it and nothing beneath it is still in flight (a file
 * being written, resumed or renamed into place, a pack being unpacked). A
 * rename inside changes a directory's mtime, so its times go last.
 *
 * The source walks depth first (walk.h): a directory, then its contents,
 * names sorted, each subdirectory's tree whole before the next name. So
 * the sink keeps only the directories the walk is in (k->cwd and its
 * parents: those are still open) and those it has left whose tree still
 * has something in flight; an entry closes every open directory that is
 * not its parent, and its parent must then be the deepest open one. An
 * entry anywhere else (beneath a directory already left, or one never
 * announced) is a protocol error. What is kept is bounded by the path's
 * depth times (1 + files in flight + packs in flight), never by the
 * number of directories announced (issue #16 item 2).
 *
 * Each directory counts what keeps it (busy): the entries in flight
 * anchored in it (sink_dir_hold) and its subdirectories not yet finished.
 * Everything here runs in the engine thread, except sink_dir_holds, which
 * a pack's worker calls on a chain its pack holds (names, parents and
 * depths never change while held).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/log.h"
#include "util/path.h"

struct snk_dir {
	struct snk_dir *parent; /* NULL: a top entry, beneath DEST */
	unsigned int busy;  /* entries in flight here, subdirectories kept */
	unsigned int depth; /* components in its path: 1 for a top entry */
	bool open;	    /* the walk may still list entries in it */
	bool made;	    /* placed as announced: it is to be finished */
	bool created;	    /* ... and made by this session, or left
			     * unfinished by an earlier one (place.h) */
	uint32_t mode;
	struct timespec times[2];
	struct snk_owner owner; /* -o/-g */
	struct wire_xattrs *xattrs; /* -X/-A, or NULL */
	size_t len;  /* of name */
	char name[]; /* its last component, as sent */
};

/* Components in path's parent: 0 for a top entry. */
static unsigned int parent_depth(const char *path)
{
	unsigned int n = 0;

	for (; *path; path++)
		n += *path == '/';
	return n;
}

/* Whether d's path as sent is the len bytes at path. */
static bool chain_is(const struct snk_dir *d, const char *path, size_t len)
{
	for (; d; d = d->parent) {
		if (d->len > len ||
		    memcmp(path + len - d->len, d->name, d->len))
			return false;
		len -= d->len;
		if (len && path[--len] != '/')
			return false;
		if (!len && d->parent)
			return false;
	}
	return len == 0;
}

/* d's path beneath the target's dirfd (DEST's name for the top, if so). */
static int dir_rel(const struct sink *k, const struct snk_dir *d, char *buf,
		   size_t size)
{
	size_t len = 0;
	const struct snk_dir *p;

	for (p = d; p; p = p->parent)
		len += (p->parent || k->t->is_dir ? p->len
						  : strlen(k->t->name)) +
		       1;
	if (!len) /* no directory: nothing to name */
		return -EINVAL;
	if (len > size)
		return -ENAMETOOLONG;
	buf[--len] = '\0';
	for (p = d; p; p = p->parent) {
		const char *nm =
			p->parent || k->t->is_dir ? p->name : k->t->name;
		size_t n = p->parent || k->t->is_dir ? p->len : strlen(nm);

		len -= n;
		memcpy(buf + len, nm, n);
		if (len)
			buf[--len] = '/';
	}
	return 0;
}

/*
 * d's final mode and times. Those made in this session, or left unfinished
 * by one cut off (place_mkdir), get them; an existing one keeps its own
 * unless a receiver was asked for -p (a push: its client may shape
 * anything beneath DEST, as cp -rp does). A pull never changes a
 * directory it did not make: the user's ~/.ssh keeps its mode whatever
 * the server says.
 */
static void finish(struct sink *k, const struct snk_dir *d)
{
	char rel[PATH_PEER_MAX + PATH_NAME_MAX + 2];
	bool preserve = sink_preserving(k);
	mode_t keep;
	int fd, rc;

	if (!d->made || !(d->created || (preserve && !k->want_check)))
		return;
	rc = dir_rel(k, d, rel, sizeof(rel));
	fd = rc ? rc
		: path_open_beneath(k->t->dirfd, rel, O_RDONLY | O_DIRECTORY,
				    0);
	keep = fd < 0 ? 0 : sink_owner_apply(k, fd, "", &d->owner);
	if (fd >= 0)
		sink_xattrs_apply(k, fd, d->xattrs, true);
	if (fd < 0 ||
	    fchmod(fd, sink_final_mode(k, d->mode) |
			       (preserve ? d->mode & keep : 0)) < 0 ||
	    (preserve && futimens(fd, d->times) < 0))
		log_warn("cannot set mode/times of directory '%s': %s",
			 rc ? d->name : rel, strerror(fd < 0 ? -fd : errno));
	if (fd >= 0)
		close(fd);
}

/*
 * Finishes and frees d, then each parent it was the last thing keeping,
 * once d is closed and nothing keeps it (when the session is being torn
 * down, frees them unfinished).
 */
static void settle(struct sink *k, struct snk_dir *d)
{
	while (d && !d->open && !d->busy) {
		struct snk_dir *parent = d->parent;

		if (!k->dirs_dropped)
			finish(k, d);
		free(d->xattrs);
		free(d);
		k->ndirs--;
		if (parent)
			parent->busy--;
		d = parent;
	}
}

/* The walk has left the deepest open directory. */
static void close_cwd(struct sink *k)
{
	struct snk_dir *d = k->cwd;

	sink_parent_forget(k); /* the walk is elsewhere now */
	k->cwd = d->parent;
	d->open = false;
	settle(k, d);
}

int sink_dir_enter(struct sink *k, const char *path)
{
	const char *slash = strrchr(path, '/');
	unsigned int depth = parent_depth(path);

	while (k->cwd && k->cwd->depth > depth)
		close_cwd(k);
	if (!depth)
		return 0;
	if (k->cwd && k->cwd->depth == depth &&
	    chain_is(k->cwd, path, (size_t)(slash - path)))
		return 0;
	return -EPROTO;
}

struct snk_dir *sink_dir_hold(struct sink *k)
{
	if (k->cwd)
		k->cwd->busy++;
	return k->cwd;
}

void sink_dir_release(struct sink *k, struct snk_dir *d)
{
	if (!d)
		return;
	d->busy--;
	settle(k, d);
}

bool sink_dir_holds(const struct snk_dir *d, const char *path)
{
	const char *slash = strrchr(path, '/');
	unsigned int depth = parent_depth(path);

	if (!depth)
		return true;
	while (d && d->depth > depth)
		d = d->parent;
	return d && d->depth == depth &&
	       chain_is(d, path, (size_t)(slash - path));
}

int sink_make_dir(struct sink *k, struct snk_file *f, const char *path)
{
	const char *name = strrchr(path, '/');
	bool created = false;
	struct snk_dir *d;
	bool dry = k->p->flags & WIRE_HELLO_DRY_RUN; /* entered, not made */
	int rc = 0;

	name = name ? name + 1 : path;
	if (!f->err && !dry)
		rc = place_mkdir(f->dirfd, f->n.name, &created);
	if (rc == -EEXIST)
		file_fail(f, rc,
			  "cannot create directory '%s': something else "
			  "has that name",
			  f->n.shown);
	else if (rc)
		file_fail(f, rc, "cannot create directory '%s': %s", f->n.shown,
			  strerror(-rc));
	/* Entered even when it failed: its entries come, and fail. */
	d = malloc(sizeof(*d) + strlen(name) + 1);
	if (!d)
		return -ENOMEM;
	d->parent = sink_dir_hold(k);
	d->busy = 0;
	d->depth = d->parent ? d->parent->depth + 1 : 1;
	d->open = true;
	d->made = !f->err && !dry;
	d->created = created;
	d->mode = f->mode;
	d->times[0] = f->times[0];
	d->times[1] = f->times[1];
	d->owner = f->owner;
	d->xattrs = f->xattrs; /* d's now */
	f->xattrs = NULL;
	d->len = strlen(name);
	memcpy(d->name, name, d->len + 1);
	sink_parent_forget(k);
	k->cwd = d;
	k->ndirs++;
	return 0;
}

void sink_finish_dirs(struct sink *k)
{
	while (k->cwd)
		close_cwd(k);
}

void sink_dirs_drop(struct sink *k)
{
	k->dirs_dropped = true;
	sink_finish_dirs(k);
}
