/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's side of --sync (and -a): whether what is already at an
 * announced name may stay as it is. One fstatat beneath the parent
 * directory's fd (opened for the FILE anyway) answers the levels exists,
 * size and mtime; a symlink is kept when its target is the same. The
 * level checksum is not decided here: an existing regular file is
 * compared chunk by chunk through SUMS/MATCH (sink_resume.c), so the sink
 * learns only what --resume lets it learn. A file kept with -p gets the
 * source's mode and times where they differ, as rsync's quick check does;
 * a kept symlink its owner and group (-o/-g) and, with -p, its times.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"

/* Whether the symlink here points where the source's does. */
static bool same_target(const struct snk_file *f, const char *link)
{
	char here[4096];
	size_t len = strlen(link);
	ssize_t n;

	if (len >= sizeof(here))
		return false;
	n = readlinkat(f->dirfd, f->n.name, here, sizeof(here));
	return n >= 0 && (size_t)n == len && !memcmp(here, link, len);
}

static bool same_mtime(const struct stat *st, const struct timespec *t)
{
	return st->st_mtim.tv_sec == t->tv_sec &&
	       st->st_mtim.tv_nsec == t->tv_nsec;
}

/*
 * A kept file's owner (-o/-g), mode and times (-p) made the source's where
 * they differ: a re-run fixes what changed of a file whose data did not
 * (a size check keeps files whose mtime is not the source's).
 */
static void fix_meta(struct sink *k, struct snk_file *f, const struct stat *st)
{
	mode_t mode = sink_final_mode(k, f->mode), keep = 0;
	struct snk_owner ow = f->owner;

	if (ow.set_uid && ow.uid == st->st_uid)
		ow.set_uid = false; /* as it is: no chown, its bits stay */
	if (ow.set_gid && ow.gid == st->st_gid)
		ow.set_gid = false;
	keep = sink_owner_apply(k, f->dirfd, f->n.name, &ow);
	if (sink_xattrs_asked(k)) { /* -X/-A: through its own descriptor */
		int fd = openat(f->dirfd, f->n.name,
				O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

		if (fd >= 0) {
			sink_xattrs_apply(k, fd, f->xattrs, false);
			close(fd);
		}
	}
	if (f->owner.set_uid && !ow.set_uid)
		keep |= S_ISUID;
	if (f->owner.set_gid && !ow.set_gid)
		keep |= S_ISGID;
	if (!sink_preserving(k))
		return;
	mode |= f->mode & keep;
	/* a chown cleared the setuid/setgid bits: the mode again */
	if (((st->st_mode & 07777) != (mode & 07777) || ow.set_uid ||
	     ow.set_gid) &&
	    fchmodat(f->dirfd, f->n.name, mode & 07777, 0) < 0)
		file_fail(f, -errno, "cannot set mode of '%s': %s", f->n.shown,
			  strerror(errno));
	else if (!same_mtime(st, &f->times[1]) &&
		 utimensat(f->dirfd, f->n.name, f->times,
			   AT_SYMLINK_NOFOLLOW) < 0)
		file_fail(f, -errno, "cannot set times of '%s': %s",
			  f->n.shown, strerror(errno));
}

/*
 * A kept symlink's owner and group (lchown) and, with -p, times made the
 * source's where they differ; a link has no mode of its own to fix.
 */
static void fix_link_meta(struct sink *k, struct snk_file *f,
			  const struct stat *st)
{
	struct snk_owner ow = f->owner;

	if (ow.set_uid && ow.uid == st->st_uid)
		ow.set_uid = false;
	if (ow.set_gid && ow.gid == st->st_gid)
		ow.set_gid = false;
	(void)sink_owner_apply(k, f->dirfd, f->n.name, &ow);
	if (sink_preserving(k) && !same_mtime(st, &f->times[1]) &&
	    utimensat(f->dirfd, f->n.name, f->times, AT_SYMLINK_NOFOLLOW) < 0)
		file_fail(f, -errno, "cannot set times of '%s': %s", f->n.shown,
			  strerror(errno));
}

enum sink_sync_verdict sink_sync_check(struct sink *k, struct snk_file *f,
				       const char *link, bool dry)
{
	uint8_t level = k->p->sync;
	struct stat st;

	/* hard links and special files: sink_link.c, sink_special.c */
	if (level == WIRE_SYNC_NONE || f->err || f->dirfd < 0 ||
	    f->kind == WIRE_KIND_DIR || f->kind == WIRE_KIND_HARDLINK ||
	    f->kind == WIRE_KIND_SPECIAL ||
	    fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return SINK_SYNC_SEND;
	if (f->kind == WIRE_KIND_SYMLINK) {
		if (!S_ISLNK(st.st_mode) ||
		    (level != WIRE_SYNC_EXISTS && !same_target(f, link)))
			return SINK_SYNC_SEND;
		if (!dry && level != WIRE_SYNC_EXISTS)
			fix_link_meta(k, f, &st);
		return SINK_SYNC_KEEP;
	}
	if (!S_ISREG(st.st_mode))
		return SINK_SYNC_SEND;
	if (level == WIRE_SYNC_EXISTS)
		return SINK_SYNC_KEEP; /* as it is: nothing of it is set */
	if ((uint64_t)st.st_size != f->size)
		return SINK_SYNC_SEND;
	if (level == WIRE_SYNC_CHECKSUM)
		return SINK_SYNC_COMPARE;
	if (level == WIRE_SYNC_MTIME && !same_mtime(&st, &f->times[1]))
		return SINK_SYNC_SEND;
	if (!dry)
		fix_meta(k, f, &st);
	return SINK_SYNC_KEEP;
}
