/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi's walk on one rank (mpi_job.h): the directories it was given,
 * listed a slice at a time so that the rank keeps answering MPI while a
 * huge directory is read. What it finds becomes items: each subdirectory
 * is queued here (depth first; the coordinator may take the oldest for an
 * idle rank), each name joins a batch that goes to whichever session needs
 * names. Directories are opened without following symlinks below the SRCs
 * themselves; --include/--exclude apply as the session's walk applies them
 * (an excluded directory is not listed).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/mpi/mpi_job.h"
#include "util/filter.h"
#include "util/log.h"

struct mj_walk {
	char *base;
	const struct filter *filter;
	char **dirs; /* queued, the newest last */
	size_t ndirs, capdirs;
	size_t oldest; /* dirs[0..oldest-1] were given away */
	DIR *d;	       /* the one being listed */
	char *cur;     /* its name */
	struct mbuf batch;
	uint32_t batch_n;
	uint64_t batch_bytes;
	uint64_t failed; /* entries that could not be listed */
	uint64_t split;	 /* files this big go up alone, split (0: none) */
};

void mj_walk_split(struct mj_walk *w, uint64_t split)
{
	w->split = split;
}

int mj_walk_create(const char *base, const struct filter *filter,
		   struct mj_walk **out)
{
	struct mj_walk *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->base = strdup(base);
	if (!w->base) {
		free(w);
		return -ENOMEM;
	}
	w->filter = filter;
	*out = w;
	return 0;
}

void mj_walk_destroy(struct mj_walk *w)
{
	if (!w)
		return;
	if (w->d)
		closedir(w->d);
	for (size_t i = w->oldest; i < w->ndirs; i++)
		free(w->dirs[i]);
	free(w->dirs);
	free(w->cur);
	free(w->base);
	mbuf_release(&w->batch);
	free(w);
}

int mj_walk_add_dir(struct mj_walk *w, const char *name)
{
	char *s;

	if (w->oldest == w->ndirs)
		w->oldest = w->ndirs = 0;
	if (w->ndirs == w->capdirs) {
		size_t cap = w->capdirs ? 2 * w->capdirs : 64;
		char **v = realloc(w->dirs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->dirs = v;
		w->capdirs = cap;
	}
	s = strdup(name);
	if (!s)
		return -ENOMEM;
	w->dirs[w->ndirs++] = s;
	return 0;
}

bool mj_walk_busy(const struct mj_walk *w)
{
	return w->d || w->oldest < w->ndirs;
}

size_t mj_walk_queued(const struct mj_walk *w)
{
	return w->ndirs - w->oldest;
}

uint64_t mj_walk_failed(const struct mj_walk *w)
{
	return w->failed;
}

int mj_walk_give(struct mj_walk *w, struct mbuf *out, uint32_t *nitems)
{
	/* Half of them, the oldest: the biggest subtrees, most likely. */
	size_t n = (mj_walk_queued(w) + 1) / 2;

	for (; n; n--) {
		char *name = w->dirs[w->oldest++];

		mbuf_u8(out, ITEM_DIR);
		mbuf_u64(out, 0);
		mbuf_u32(out, 1);
		mbuf_str(out, name);
		free(name);
		(*nitems)++;
	}
	return out->bad ? -ENOMEM : 0;
}

static void flush_batch(struct mj_walk *w, struct mbuf *out, uint32_t *nitems)
{
	if (!w->batch_n)
		return;
	mbuf_u8(out, ITEM_NAMES);
	mbuf_u64(out, w->batch_bytes);
	mbuf_u32(out, w->batch_n);
	mbuf_bytes(out, w->batch.p, w->batch.len);
	(*nitems)++;
	w->batch.len = 0;
	w->batch_n = 0;
	w->batch_bytes = 0;
}

static void add_name(struct mj_walk *w, const char *name, uint64_t bytes,
		     struct mbuf *out, uint32_t *nitems)
{
	mbuf_str(&w->batch, name);
	w->batch_n++;
	w->batch_bytes += bytes;
	if (w->batch_n >= MJ_BATCH_NAMES || w->batch_bytes >= MJ_BATCH_BYTES)
		flush_batch(w, out, nitems);
}

/* Opens the newest queued directory; false when it cannot be. */
static bool open_next(struct mj_walk *w, struct mbuf *out, uint32_t *nitems)
{
	char path[8192];
	int fd;

	w->cur = w->dirs[--w->ndirs];
	/* The directory itself first: made even when it is empty. */
	add_name(w, w->cur, 0, out, nitems);
	snprintf(path, sizeof(path), "%s/%s", w->base, w->cur);
	/* A SRC as named (no '/') is followed, as rdcp follows it. */
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				(strchr(w->cur, '/') ? O_NOFOLLOW : 0));
	if (fd >= 0)
		w->d = fdopendir(fd);
	if (!w->d) {
		log_err("cannot open directory '%s': %s", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		w->failed++;
		free(w->cur);
		w->cur = NULL;
		return false;
	}
	return true;
}

static void close_dir(struct mj_walk *w, struct mbuf *out, uint32_t *nitems)
{
	closedir(w->d);
	w->d = NULL;
	free(w->cur);
	w->cur = NULL;
	flush_batch(w, out, nitems);
}

int mj_walk_step(struct mj_walk *w, unsigned int max, struct mbuf *out,
		 uint32_t *nitems)
{
	char name[8192];

	for (unsigned int i = 0; i < max;) {
		struct dirent *de;
		struct stat st;
		bool dir;

		if (!w->d) {
			if (w->oldest == w->ndirs)
				break;
			if (!open_next(w, out, nitems))
				continue;
		}
		errno = 0;
		de = readdir(w->d);
		if (!de) {
			if (errno) {
				log_err("cannot read directory '%s/%s': %s",
					w->base, w->cur, strerror(errno));
				w->failed++;
			}
			close_dir(w, out, nitems);
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		i++;
		if ((size_t)snprintf(name, sizeof(name), "%s/%s", w->cur,
				     de->d_name) >= 4096) {
			log_warn("skipping '%s/%s': path too long", w->cur,
				 de->d_name);
			continue;
		}
		if (fstatat(dirfd(w->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			log_err("cannot stat '%s/%s': %s", w->base, name,
				strerror(errno));
			w->failed++;
			continue;
		}
		dir = S_ISDIR(st.st_mode);
		if (filter_excludes(w->filter, name, dir))
			continue;
		if (dir) {
			if (mj_walk_add_dir(w, name))
				return -ENOMEM;
			continue;
		}
		if (S_ISREG(st.st_mode) && w->split &&
		    (uint64_t)st.st_size >= w->split) {
			/* rank 0 splits it into ranges for several ranks */
			mbuf_u8(out, ITEM_BIG);
			mbuf_u64(out, (uint64_t)st.st_size);
			mbuf_u32(out, 1);
			mbuf_str(out, name);
			(*nitems)++;
			continue;
		}
		add_name(w, name,
			 S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0, out,
			 nitems);
	}
	return out->bad || w->batch.bad ? -ENOMEM : 0;
}
