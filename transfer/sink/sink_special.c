/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -D on the sink: a SPECIAL (a device node with --devices, a FIFO or a
 * socket with --specials) made beside its name with mknodat()/mkfifoat(),
 * given its owner, mode and times, then renamed onto the name, as the
 * source's is. A device node is made only where this side may: its user
 * is root and, on a receiver run as a service, --allow-devices says so
 * (doc/SECURITY.md); else the entry is left out, reported skipped, and
 * that is said once a session and kind (NOTICE on a push), never a
 * failure. Engine thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "transfer/sink/sink_int.h"

static bool is_device(uint32_t mode)
{
	return S_ISCHR(mode) || S_ISBLK(mode);
}

int sink_special_check(struct sink *k, const struct wire_file *wf)
{
	uint32_t need =
		is_device(wf->mode) ? WIRE_HELLO_DEVICES : WIRE_HELLO_SPECIALS;

	if (!(k->p->flags & need) || (wf->flags & WIRE_FILE_XATTRS))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a %s, which %s did not ask for: "
				   "refused",
				   k->e->c->peer,
				   is_device(wf->mode) ? "device node"
						       : "FIFO or socket",
				   need == WIRE_HELLO_DEVICES ? "--devices"
							      : "--specials");
	return 0;
}

/* Whether what f's name holds is the entry asked for: kept by --sync. */
static bool same_special(const struct snk_file *f, const struct stat *st)
{
	if ((st->st_mode & S_IFMT) != (f->mode & S_IFMT))
		return false;
	return !is_device(f->mode) ||
	       (major(st->st_rdev) == WIRE_RDEV_MAJOR(f->rdev) &&
		minor(st->st_rdev) == WIRE_RDEV_MINOR(f->rdev));
}

/* Whether this side may make f: said once a kind when it may not. */
static bool may_make(struct sink *k, const struct snk_file *f)
{
	if (!is_device(f->mode))
		return true;
	if (!k->p->devices_ok) {
		sink_note(k, SINK_NOTE_DEVICES,
			  "device nodes were not made: the receiver runs "
			  "without --allow-devices");
		return false;
	}
	if (geteuid() != 0) {
		sink_note(k, SINK_NOTE_DEVICES,
			  "device nodes were not made: only root may make "
			  "them");
		return false;
	}
	return true;
}

/* f made as its temporary, its metadata set, renamed. 0 or -errno. */
static int make(struct sink *k, struct snk_file *f, const char **what)
{
	mode_t mode = sink_final_mode(k, f->mode & 07777), keep;
	dev_t dev = is_device(f->mode) ? makedev(WIRE_RDEV_MAJOR(f->rdev),
						 WIRE_RDEV_MINOR(f->rdev))
				       : 0;
	int rc = 0;

	*what = "make";
	(void)unlinkat(f->dirfd, f->n.tmp, 0);
	if (mknodat(f->dirfd, f->n.tmp, (f->mode & S_IFMT) | 0600, dev) < 0)
		return -errno;
	keep = sink_owner_apply(k, f->dirfd, f->n.tmp, &f->owner);
	mode = (mode & ~(mode_t)(S_ISUID | S_ISGID)) | (mode & keep);
	*what = "set mode of";
	/* ours, just made and not a symlink: fchmodat may follow it */
	if (fchmodat(f->dirfd, f->n.tmp, mode & 07777, 0) < 0)
		rc = -errno;
	if (!rc && sink_preserving(k)) {
		*what = "set times of";
		if (utimensat(f->dirfd, f->n.tmp, f->times,
			      AT_SYMLINK_NOFOLLOW) < 0)
			rc = -errno;
	}
	if (!rc) {
		*what = "rename onto";
		if (renameat(f->dirfd, f->n.tmp, f->dirfd, f->n.name) < 0)
			rc = -errno;
	}
	if (rc)
		(void)unlinkat(f->dirfd, f->n.tmp, 0);
	return rc;
}

bool sink_special_same(const struct snk_file *f)
{
	struct stat st;

	return f->dirfd >= 0 &&
	       fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       same_special(f, &st);
}

int sink_make_special(struct sink *k, struct snk_file *f)
{
	uint32_t flags = k->p->flags;
	const char *what;
	struct stat st;
	bool exists;
	int rc;

	if (f->err)
		return sink_send_result(k, f, NULL, 0);
	exists = fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists &&
	    ((flags & WIRE_HELLO_NO_CLOBBER) ||
	     (k->p->sync != WIRE_SYNC_NONE && same_special(f, &st)))) {
		f->skipped = true;
		return sink_send_kept(k, f);
	}
	if (!may_make(k, f)) {
		f->skipped = true;
		return sink_send_result(k, f, NULL, 0);
	}
	rc = make(k, f, &what);
	if (rc == -EPERM && is_device(f->mode)) {
		sink_note(k, SINK_NOTE_DEVICES,
			  "device nodes were not made: %s", strerror(EPERM));
		f->skipped = true;
	} else if (rc) {
		file_fail(f, rc, "cannot %s '%s': %s", what, f->n.shown,
			  strerror(-rc));
	}
	return sink_send_result(k, f, NULL, 0);
}
