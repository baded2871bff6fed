/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -X/-A on the source's side: the extended attributes of an entry about
 * to be announced, read through its own descriptor (never a path: the
 * walk's confinement holds), the namespaces asked for only, into the
 * XATTRS that goes right before its FILE. What does not fit one message
 * is left out with a warning, never a failed file. With -A and without
 * --numeric-ids the names of the users and groups its ACLs name go with
 * them (WIRE_XATTR_ACL_NAMES), for the sink to map as it maps owners.
 * A small file without such attributes is packed as without -X/-A
 * (src_has_xattrs); one with them goes alone, after its XATTRS.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "transfer/source/source_int.h"
#include "util/aclid.h"
#include "util/idname.h"
#include "util/log.h"

#define LIST_MAX (64u << 10) /* the kernel's own limit for a list */

static bool is_acl(const char *name)
{
	return !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/* Whether the session sends attribute name. */
static bool wanted(uint32_t flags, const char *name)
{
	if (flags & WIRE_HELLO_ACLS && is_acl(name))
		return true;
	if (!(flags & WIRE_HELLO_XATTRS))
		return false;
	/* an SELinux label is the host's policy's, not the file's */
	if (!strcmp(name, "security.selinux"))
		return false;
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9);
}

/* Whether the names (len bytes, records) have tag's id already. */
static bool named(const uint8_t *names, size_t len, uint16_t tag, uint32_t id)
{
	for (size_t p = 0; p + 6 <= len; p += 6u + names[p + 5])
		if (names[p] == tag &&
		    ((uint32_t)names[p + 1] << 24 |
		     (uint32_t)names[p + 2] << 16 |
		     (uint32_t)names[p + 3] << 8 | names[p + 4]) == id)
			return true;
	return false;
}

/*
 * Appends to names (*len of WIRE_XATTRS_BYTES) a record for each named
 * user and group of the ACL value v that this host has a name for; an id
 * without a name (or without room) goes by its number.
 */
static void acl_names(uint8_t *names, size_t *len, const uint8_t *v,
		      size_t vlen)
{
	char name[IDNAME_MAX + 1];
	int n = aclid_count(v, vlen);
	uint16_t tag;
	uint32_t id;
	size_t nlen;
	bool ok;

	for (int i = 0; i < n; i++) {
		aclid_get(v, (size_t)i, &tag, &id);
		if ((tag != ACLID_USER && tag != ACLID_GROUP) ||
		    named(names, *len, tag, id))
			continue;
		ok = tag == ACLID_USER ? idname_of_uid((uid_t)id, name)
				       : idname_of_gid((gid_t)id, name);
		nlen = strlen(name);
		if (!ok || !nlen || *len + 6 + nlen > WIRE_XATTRS_BYTES)
			continue;
		names[*len] = (uint8_t)tag;
		names[*len + 1] = (uint8_t)(id >> 24);
		names[*len + 2] = (uint8_t)(id >> 16);
		names[*len + 3] = (uint8_t)(id >> 8);
		names[*len + 4] = (uint8_t)id;
		names[*len + 5] = (uint8_t)nlen;
		memcpy(names + *len + 6, name, nlen);
		*len += 6 + nlen;
	}
}

bool src_xattrs_asked(const struct source *s)
{
	return s->cfg->p.flags & (WIRE_HELLO_XATTRS | WIRE_HELLO_ACLS);
}

int src_xattrs(struct source *s, struct src_file *f, struct wire_xattrs *x)
{
	bool by_name = (s->cfg->p.flags & WIRE_HELLO_ACLS) &&
		       !(s->cfg->p.flags & WIRE_HELLO_NUMERIC_IDS);
	uint8_t *val = NULL, *names = NULL;
	size_t names_len = 0;
	char *list = NULL;
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
		names = by_name ? malloc(WIRE_XATTRS_BYTES) : NULL;
		n = list && val && (names || !by_name)
			    ? flistxattr(fd, list, LIST_MAX)
			    : -1;
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
		else if (by_name && is_acl(name))
			acl_names(names, &names_len, val, (size_t)v);
	}
	if (names_len &&
	    wire_xattrs_add(x, WIRE_XATTR_ACL_NAMES, names, names_len))
		log_warn("names of the users and groups in the ACLs of '%s' "
			 "left out (no room): they are kept by number",
			 f->path);
	free(names);
	free(list);
	free(val);
	close(fd);
	return 0;
}

bool src_has_xattrs(struct source *s, struct src_file *f)
{
	char *list;
	ssize_t n;
	int fd;

	if (f->has_xattrs)
		return f->has_xattrs > 0;
	f->has_xattrs = -1;
	fd = walk_open(&s->walk, f->w);
	if (fd < 0)
		return false;
	n = flistxattr(fd, NULL, 0);
	list = n > 0 ? malloc(LIST_MAX) : NULL;
	if (n > 0 && (!list || (n = flistxattr(fd, list, LIST_MAX)) < 0))
		f->has_xattrs = 1; /* not read: its own FILE tries again */
	for (ssize_t i = 0; list && n > 0 && i < n;
	     i += (ssize_t)strlen(list + i) + 1)
		if (wanted(s->cfg->p.flags, list + i)) {
			f->has_xattrs = 1;
			break;
		}
	free(list);
	close(fd);
	return f->has_xattrs > 0;
}
