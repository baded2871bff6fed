/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The directories a sink creates and finishes. A directory is made as it
 * is announced and remembered; directories get their final mode and times
 * at the end, deepest first, so they stay writable while they fill.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/place.h"
#include "transfer/sink_int.h"
#include "util/log.h"
#include "util/path.h"

static int remember_dir(struct sink *k, struct snk_file *f, bool created)
{
	struct snk_dir *d;

	if (k->ndirs == k->dirs_cap) {
		size_t cap = k->dirs_cap ? 2 * k->dirs_cap : 32;
		struct snk_dir *n = realloc(k->dirs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		k->dirs = n;
		k->dirs_cap = cap;
	}
	d = &k->dirs[k->ndirs];
	d->rel = strdup(f->n.rel);
	if (!d->rel)
		return -ENOMEM;
	d->mode = f->mode;
	d->created = created;
	d->times[0] = f->times[0];
	d->times[1] = f->times[1];
	k->ndirs++;
	return 0;
}

int sink_make_dir(struct sink *k, struct snk_file *f)
{
	bool created;
	int rc = place_mkdir(f->dirfd, f->n.name, &created);

	if (rc == -EEXIST)
		file_fail(f, rc,
			  "cannot create directory '%s': something else "
			  "has that name",
			  f->n.shown);
	else if (rc)
		file_fail(f, rc, "cannot create directory '%s': %s", f->n.shown,
			  strerror(-rc));
	return rc ? 0 : remember_dir(k, f, created);
}


/*
 * Directories get their mode and times last, the deepest first. Those
 * made in this session get them; an existing one keeps its own unless a
 * receiver was asked for -p (a push: its client may shape anything
 * beneath DEST, as cp -rp does). A pull never changes a directory it did
 * not make: the user's ~/.ssh keeps its mode whatever the server says.
 */
void sink_finish_dirs(struct sink *k)
{
	while (k->ndirs) {
		struct snk_dir *d = &k->dirs[--k->ndirs];
		bool preserve = k->p->flags & WIRE_HELLO_PRESERVE;
		int fd;

		if (d->created || (preserve && !k->want_check)) {
			fd = path_open_beneath(k->t->dirfd, d->rel,
					       O_RDONLY | O_DIRECTORY, 0);
			if (fd < 0 ||
			    fchmod(fd, sink_final_mode(k, d->mode)) < 0 ||
			    (preserve && futimens(fd, d->times) < 0))
				log_warn("cannot set mode/times of directory "
					 "'%s': %s",
					 d->rel,
					 strerror(fd < 0 ? -fd : errno));
			if (fd >= 0)
				close(fd);
		}
		free(d->rel);
	}
}

void sink_dirs_free(struct sink *k)
{
	while (k->ndirs)
		free(k->dirs[--k->ndirs].rel);
	free(k->dirs);
	k->dirs = NULL;
	k->dirs_cap = 0;
}
