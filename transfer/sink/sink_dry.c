/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's side of --dry-run: each entry is answered with what a real
 * copy would do to it, and nothing is made, opened for writing or
 * changed. A regular file gets HAVE with SKIP (so the source sends none of
 * its data) and then its FILE_RESULT; a directory or symlink its
 * FILE_RESULT at once (a directory is entered, as the walk's place, but
 * not made). The verdict: kept by -n/-u or --sync's check (SKIPPED; with
 * --sync checksum nothing is read, so a file of the same size is one that
 * would be compared, reported as replaced), or would be made
 * (DRY), over a name that exists now (EXISTS). Beneath a directory
 * that does not exist yet (DEST, or one the run would make) nothing
 * exists, and nothing is looked at.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"

int sink_dry_answer(struct sink *k, struct snk_file *f, const char *path,
		    const char *link)
{
	uint32_t flags = k->p->flags;
	struct stat st;
	bool exists = f->dirfd >= 0 && fstatat(f->dirfd, f->n.name, &st,
					       AT_SYMLINK_NOFOLLOW) == 0;

	if (!f->err && exists && f->kind != WIRE_KIND_DIR &&
	    (flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE)) &&
	    place_keeps(f->dirfd, f->n.name, flags & WIRE_HELLO_NO_CLOBBER,
			&f->times[1])) {
		f->skipped = true;
	} else if (!f->err && exists &&
		   sink_sync_check(k, f, link, true) == SINK_SYNC_KEEP) {
		f->skipped = true;
	} else if (!f->err && exists && f->kind == WIRE_KIND_HARDLINK &&
		   k->p->sync != WIRE_SYNC_NONE && sink_link_same(k, f)) {
		f->skipped = true; /* -H: a name of its file already */
	} else if (!f->err && exists && f->kind == WIRE_KIND_SPECIAL &&
		   k->p->sync != WIRE_SYNC_NONE && sink_special_same(f)) {
		f->skipped = true; /* -D: a node, FIFO or socket like it */
	} else if (!f->err) {
		f->dry = true;
		f->exists = exists;
	}
	if (f->kind == WIRE_KIND_FILE)
		return sink_skip_file(k, f);
	/* Its entries follow: the walk is in it now (sink_dir.c), unmade. */
	if (f->kind == WIRE_KIND_DIR && sink_make_dir(k, f, path))
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	return sink_send_result(k, f, NULL, 0);
}
