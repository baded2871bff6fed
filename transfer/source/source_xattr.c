/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -X/-A on the source's side: the extended attributes of an entry about
 * to be announced, read through its own descriptor (never a path: the
 * walk's confinement holds), the namespaces asked for only, into the
 * XATTRS that goes right before its FILE. What does not fit one message
 * is left out with a warning, never a failed file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "transfer/source/source_int.h"
#include "util/log.h"

#define LIST_MAX (64u << 10) /* the kernel's own limit for a list */

/* Whether the session sends attribute name. */
static bool wanted(uint32_t flags, const char *name)
{
	if (flags & WIRE_HELLO_ACLS &&
	    (!strcmp(name, "system.posix_acl_access") ||
	     !strcmp(name, "system.posix_acl_default")))
		return true;
	if (!(flags & WIRE_HELLO_XATTRS))
		return false;
	/* an SELinux label is the host's policy's, not the file's */
	if (!strcmp(name, "security.selinux"))
		return false;
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9);
}

bool src_xattrs_asked(const struct source *s)
{
	return s->cfg->p.flags & (WIRE_HELLO_XATTRS | WIRE_HELLO_ACLS);
}

int src_xattrs(struct source *s, struct src_file *f, struct wire_xattrs *x)
{
	char *list = NULL;
	uint8_t *val = NULL;
	ssize_t n, v;
	int fd;

	x->file_id = f->wire_id;
	x->count = x->len = 0;
	/* a hard link's are its file's; a special file's are not kept */
	if (!src_xattrs_asked(s) || f->w->kind == WIRE_KIND_SYMLINK ||
	    f->w->kind == WIRE_KIND_HARDLINK || f->w->kind == WIRE_KIND_SPECIAL)
		return 0;
	fd = walk_open(&s->walk, f->w);
	if (fd < 0)
		return 0; /* its own open says why, if it matters */
	n = flistxattr(fd, NULL, 0);
	if (n > 0) {
		list = malloc(LIST_MAX);
		val = malloc(WIRE_XATTRS_BYTES);
		n = list && val ? flistxattr(fd, list, LIST_MAX) : -1;
	}
	for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(list + i) + 1) {
		const char *name = list + i;

		if (!wanted(s->cfg->p.flags, name))
			continue;
		v = fgetxattr(fd, name, val, WIRE_XATTRS_BYTES);
		if (v < 0 && errno == ERANGE) {
			log_warn("cannot keep extended attribute '%s' of '%s': "
				 "larger than the %u bytes a file may carry",
				 name, f->path, WIRE_XATTRS_BYTES);
			continue;
		}
		if (v < 0)
			continue; /* gone meanwhile, or not ours to read */
		if (wire_xattrs_add(x, name, val, (size_t)v))
			log_warn("cannot keep extended attribute '%s' of '%s': "
				 "its attributes are larger than the %u bytes a "
				 "file may carry",
				 name, f->path, WIRE_XATTRS_BYTES);
	}
	free(list);
	free(val);
	close(fd);
	return 0;
}
