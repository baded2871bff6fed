/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What the session asked of the entries the sink places: whether it
 * resumes and preserves, the mode a file ends with, and applying owner,
 * mode and times to a placed file. The bottom of the sink: it calls only
 * sink_owner.c and sink_xattr.c, so every other sink file may call it.
 */
#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"

bool sink_resuming(const struct sink *k)
{
	return k->p->flags & WIRE_HELLO_RESUME;
}

bool sink_preserving(const struct sink *k)
{
	return k->p->flags & WIRE_HELLO_PRESERVE;
}

mode_t sink_final_mode(const struct sink *k, uint32_t mode)
{
	return place_mode(mode, sink_preserving(k), k->t->umask);
}

/*
 * The final mode, unless the file was made with it already (have_mode),
 * and the times with -p. 0, or -errno and *what.
 */
int sink_apply_meta(struct sink *k, int fd, uint32_t mode, bool have_mode,
		    const struct timespec times[2], const struct snk_owner *ow,
		    const struct wire_xattrs *x, const char **what)
{
	mode_t keep = ow ? sink_owner_apply(k, fd, "", ow) : 0;
	mode_t final = sink_final_mode(k, mode);

	sink_xattrs_apply(k, fd, x, false); /* -X/-A: before the mode */
	/* setuid/setgid only with -p, and only with the owner (group) kept */
	if (sink_preserving(k))
		final |= mode & keep;
	return place_meta(fd, !have_mode || (final & (S_ISUID | S_ISGID)),
			  final, sink_preserving(k) ? times : NULL, what);
}
