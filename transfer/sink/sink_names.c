/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Where an announced name lands: checked to be a path beneath DEST (and,
 * on a pull, one that was asked for), mapped to its place and its
 * temporary's name beside it, and its parent directory opened beneath
 * DEST. Nothing is created here; sink.c and sink_pack.c open what lands.
 *
 * A FILE's parent is opened once for the files that follow in the same
 * directory (a re-run's FILEs come a directory at a time) and kept in
 * sink_parent.c's cache.
 */
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/path.h"

/*
 * Whether an announced path may land beneath the target: 0, -EPERM for a
 * path that is not beneath, -EPROTO for one outside the first's tree when
 * DEST is not a directory. File id 0 names that tree (announced first, in
 * the engine thread; a worker placing packed files, never id 0, only
 * reads it).
 */
int sink_check_path(struct sink *k, uint32_t id, const char *path)
{
	size_t len = strlen(path), first;
	const char *slash;

	if (path_check_relative(path, len, false) || path[len - 1] == '/')
		return -EPERM;
	if (k->t->is_dir)
		return 0;
	slash = strchr(path, '/');
	first = slash ? (size_t)(slash - path) : len;
	if (id == 0 && !slash)
		snprintf(k->top, sizeof(k->top), "%s", path);
	if (!k->top[0] || strlen(k->top) != first ||
	    strncmp(path, k->top, first))
		return -EPROTO;
	return 0;
}

/*
 * Where an announced path goes beneath the target: the path itself inside
 * a directory DEST, else DEST's name in place of its first component.
 * Checks it first (sink_check_path).
 */
int sink_map_names(struct sink *k, uint32_t id, const char *path,
		   struct snk_names *n)
{
	const struct sink_target *t = k->t;
	const char *slash;
	int rc = sink_check_path(k, id, path);

	if (rc)
		return rc;
	if (t->is_dir) {
		snprintf(n->rel, sizeof(n->rel), "%s", path);
	} else {
		slash = strchr(path, '/');
		snprintf(n->rel, sizeof(n->rel), "%s%s", t->name,
			 slash ? slash : "");
	}
	slash = strrchr(n->rel, '/');
	snprintf(n->name, sizeof(n->name), "%s", slash ? slash + 1 : n->rel);
	place_tmp_name(n->name, n->tmp, sizeof(n->tmp));
	snprintf(n->shown, sizeof(n->shown), "%s%s%s", t->shown,
		 t->is_dir && t->shown[0] ? "/" : "",
		 t->is_dir ? n->rel : n->rel + strlen(t->name));
	return 0;
}

/*
 * The directory n goes into: the target's own dirfd (not to be closed)
 * or a new O_PATH fd beneath it, or -errno.
 */
int sink_open_parent(const struct sink *k, struct snk_names *n)
{
	char *slash = strrchr(n->rel, '/');
	int fd;

	if (k->t->dirfd < 0) /* --dry-run: DEST is not there yet */
		return -ENOENT;
	if (!slash)
		return k->t->dirfd;
	*slash = '\0';
	fd = path_open_beneath(k->t->dirfd, n->rel, O_PATH | O_DIRECTORY, 0);
	*slash = '/';
	return fd;
}

/*
 * f's directory in f->dirfd: the target's, the cached one (a reference
 * in f->parent, sink_parent.c) or a new one, cached. 0 or -errno.
 */
static int parent_get(struct sink *k, struct snk_file *f)
{
	const char *slash = strrchr(f->n.rel, '/');
	size_t len = slash ? (size_t)(slash - f->n.rel) : 0;
	int fd;

	if (!slash || k->t->dirfd < 0) {
		fd = sink_open_parent(k, &f->n);
		if (fd < 0)
			return fd;
		f->dirfd = fd;
		return 0;
	}
	if (!sink_parent_cached(k, f->n.rel, len)) {
		fd = sink_open_parent(k, &f->n);
		if (fd < 0)
			return fd;
		fd = sink_parent_cache(k, fd, f->n.rel, len);
		if (fd < 0)
			return fd;
	}
	f->dirfd = sink_parent_get(k, &f->parent);
	return 0;
}

/*
 * Where f lands, checked (beneath DEST; on a pull, asked for) before
 * anything is opened. 0, or the engine's error: the session ends.
 */
int sink_map_path(struct sink *k, struct snk_file *f, const char *path)
{
	const char *why;
	int rc = sink_map_names(k, f->id, path, &f->n);

	if (rc)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPERM,
				   "%s sent a file name that is not a path "
				   "beneath DEST: refused",
				   k->e->c->peer);
	why = sink_want_check(k, f->id, f->kind, path, NULL);
	if (why)
		return sink_want_refuse(k, path, why);
	if (sink_dir_enter(k, path))
		return sink_want_refuse(k, path, SINK_DIR_NOT_NOW);
	rc = parent_get(k, f);
	if (rc) {
		/* --dry-run: beneath a directory the run would make */
		if (rc != -ENOENT || !(k->p->flags & WIRE_HELLO_DRY_RUN))
			file_fail(f, rc,
				  "cannot open the directory of '%s': %s",
				  f->n.shown, strerror(-rc));
	}
	return 0;
}
