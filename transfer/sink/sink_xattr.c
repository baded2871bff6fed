/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -X/-A on the sink's side: the XATTRS that comes right before its FILE
 * held for it (one at a time, at most one message's bytes), then given to
 * the entry through its descriptor before it takes its final name: the
 * source's attributes set where they differ, and those of the namespaces
 * the session copies that the source does not have removed (user.* with
 * -X, the two ACLs with -A), as rsync does. trusted.* and security.* are
 * set only by root and, on a --listen receiver, only with --allow-owners
 * (security.capability is as strong as a setuid bit). What cannot be set
 * is said once a kind and session, never a failed file. Without
 * --numeric-ids the named users and groups of an ACL get this host's ids
 * of the names the source sent with them (WIRE_XATTR_ACL_NAMES), an id
 * without a name or with one unknown here its number, as owners do.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "transfer/sink/sink_int.h"
#include "util/aclid.h"
#include "util/idname.h"

#define LIST_MAX (64u << 10)

static const char acl_access[] = "system.posix_acl_access";
static const char acl_default[] = "system.posix_acl_default";

bool sink_xattrs_asked(const struct sink *k)
{
	return k->p->flags & (WIRE_HELLO_XATTRS | WIRE_HELLO_ACLS);
}

int sink_on_xattrs(struct sink *k, const struct wire_xattrs *x)
{
	if (!sink_xattrs_asked(k))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent extended attributes that -X/-A did "
				   "not ask for: refused",
				   k->e->c->peer);
	if (k->xpending || x->file_id != k->nfiles)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent extended attributes for file %u, "
				   "which is not the next one: refused",
				   k->e->c->peer, x->file_id);
	k->xpending = malloc(sizeof(*x));
	if (!k->xpending)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	memcpy(k->xpending, x, sizeof(*x));
	return 0;
}

int sink_xattrs_take(struct sink *k, const struct wire_file *wf,
		     struct wire_xattrs **out)
{
	*out = NULL;
	if ((wf->flags & WIRE_FILE_XATTRS) && !k->xpending)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced file %u with extended "
				   "attributes that never came: refused",
				   k->e->c->peer, wf->file_id);
	if (k->xpending &&
	    (!(wf->flags & WIRE_FILE_XATTRS) || wf->kind == WIRE_KIND_SYMLINK ||
	     wf->kind == WIRE_KIND_HARDLINK || wf->kind == WIRE_KIND_SPECIAL))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent extended attributes for file %u, "
				   "which does not take them: refused",
				   k->e->c->peer, wf->file_id);
	*out = k->xpending;
	k->xpending = NULL;
	return 0;
}

/* What of name this side sets: 1 yes, 0 not asked, -1 not allowed. */
static int settable(struct sink *k, const char *name, bool dir)
{
	uint32_t fl = k->p->flags;

	if (!strcmp(name, acl_access))
		return fl & WIRE_HELLO_ACLS ? 1 : 0;
	if (!strcmp(name, acl_default))
		return fl & WIRE_HELLO_ACLS && dir ? 1 : 0;
	if (!(fl & WIRE_HELLO_XATTRS))
		return 0;
	if (!strncmp(name, "user.", 5))
		return 1;
	if (strncmp(name, "trusted.", 8) && strncmp(name, "security.", 9))
		return 0; /* no other namespace: system.* aside, none */
	if (!strcmp(name, "security.selinux"))
		return 0;
	if (!k->p->owners_ok) {
		sink_note(k, SINK_NOTE_XATTR_PRIV,
			  "trusted.* and security.* attributes not kept: this "
			  "receiver runs without --allow-owners");
		return -1;
	}
	if (geteuid() != 0) {
		sink_note(k, SINK_NOTE_XATTR_PRIV,
			  "trusted.* and security.* attributes not kept: not "
			  "root");
		return -1;
	}
	return 1;
}

/* Whether a name this side has is one the session removes when absent. */
static bool removable(const struct sink *k, const char *name, bool dir)
{
	uint32_t fl = k->p->flags;

	if (fl & WIRE_HELLO_ACLS &&
	    (!strcmp(name, acl_access) || (dir && !strcmp(name, acl_default))))
		return true;
	return fl & WIRE_HELLO_XATTRS && !strncmp(name, "user.", 5);
}

static bool in_x(const struct wire_xattrs *x, const char *name)
{
	size_t pos = 0, nlen, vlen, len = strlen(name);
	const uint8_t *value;
	const char *n;

	while (x && wire_xattrs_next(x, &pos, &n, &nlen, &value, &vlen))
		if (nlen == len && !memcmp(n, name, len))
			return true;
	return false;
}

/* The value of x's entry name, or NULL (*vlen its length). */
static const uint8_t *value_of(const struct wire_xattrs *x, const char *name,
			       size_t *vlen)
{
	size_t pos = 0, nlen, len = strlen(name);
	const uint8_t *value;
	const char *n;

	while (wire_xattrs_next(x, &pos, &n, &nlen, &value, vlen))
		if (nlen == len && !memcmp(n, name, len))
			return value;
	return NULL;
}

/*
 * The local id of the name the source sent for tag's id (names: len bytes
 * of records, a peer's: each checked to lie within them): true, or false
 * when it sent none or this host does not know it.
 */
static bool local_id(const uint8_t *names, size_t len, uint16_t tag,
		     uint32_t id, uint32_t *out)
{
	char name[IDNAME_MAX + 1];
	size_t nlen;
	uid_t uid;
	gid_t gid;

	for (size_t p = 0; p + 6 <= len; p += 6 + nlen) {
		nlen = names[p + 5];
		if (!nlen || p + 6 + nlen > len)
			return false; /* malformed: the rest by number */
		if (names[p] != tag ||
		    ((uint32_t)names[p + 1] << 24 |
		     (uint32_t)names[p + 2] << 16 |
		     (uint32_t)names[p + 3] << 8 | names[p + 4]) != id)
			continue;
		memcpy(name, names + p + 6, nlen);
		name[nlen] = '\0';
		if (strlen(name) != nlen)
			return false;
		if (tag == ACLID_USER && idname_uid(name, &uid))
			*out = (uint32_t)uid;
		else if (tag == ACLID_GROUP && idname_gid(name, &gid))
			*out = (uint32_t)gid;
		else
			return false;
		return true;
	}
	return false;
}

/*
 * An ACL value (vlen bytes) with its named users' and groups' ids mapped
 * by name into out (WIRE_XATTRS_BYTES), as sink_owner_map maps owners:
 * out, or value itself when nothing is mapped.
 */
static const uint8_t *acl_mapped(const struct sink *k,
				 const struct wire_xattrs *x,
				 const uint8_t *value, size_t vlen,
				 uint8_t *out)
{
	const uint8_t *names;
	size_t len;
	int n = aclid_count(value, vlen);
	uint16_t tag;
	uint32_t id, local;

	if (!out || n <= 0 || k->p->flags & WIRE_HELLO_NUMERIC_IDS ||
	    !(names = value_of(x, WIRE_XATTR_ACL_NAMES, &len)))
		return value;
	memcpy(out, value, vlen);
	for (int i = 0; i < n; i++) {
		aclid_get(out, (size_t)i, &tag, &id);
		if ((tag == ACLID_USER || tag == ACLID_GROUP) &&
		    local_id(names, len, tag, id, &local))
			aclid_set(out, (size_t)i, local);
	}
	aclid_sort(out, (size_t)n);
	return out;
}

static void set_failed(struct sink *k, const char *name, int err)
{
	if (err == ENOTSUP)
		sink_note(k, SINK_NOTE_XATTR,
			  "cannot set extended attributes: the file system "
			  "does not support them (%s)",
			  name);
	else
		sink_note(k, SINK_NOTE_XATTR,
			  "cannot set extended attribute '%s': %s", name,
			  strerror(err));
}

void sink_xattrs_apply(struct sink *k, int fd, const struct wire_xattrs *x,
		       bool dir)
{
	char name[WIRE_XATTR_NAME_MAX + 1], *list = NULL;
	size_t pos = 0, nlen, vlen;
	const uint8_t *value;
	uint8_t *have = NULL, *mapped = NULL;
	const char *n;
	ssize_t got;

	if (!sink_xattrs_asked(k))
		return;
	if (x) {
		have = malloc(WIRE_XATTRS_BYTES + 1);
		mapped = malloc(WIRE_XATTRS_BYTES);
	}
	while (x && have && wire_xattrs_next(x, &pos, &n, &nlen, &value, &vlen)) {
		memcpy(name, n, nlen);
		name[nlen] = '\0';
		if (settable(k, name, dir) <= 0)
			continue;
		if (!strcmp(name, acl_access) || !strcmp(name, acl_default))
			value = acl_mapped(k, x, value, vlen, mapped);
		got = fgetxattr(fd, name, have, WIRE_XATTRS_BYTES + 1);
		if (got == (ssize_t)vlen && !memcmp(have, value, vlen))
			continue; /* as it is */
		if (fsetxattr(fd, name, value, vlen, 0) < 0)
			set_failed(k, name, errno);
	}
	free(have);
	free(mapped);
	/* what the source does not have, in the namespaces copied */
	got = flistxattr(fd, NULL, 0);
	if (got > 0)
		list = malloc(LIST_MAX);
	got = list ? flistxattr(fd, list, LIST_MAX) : -1;
	for (ssize_t i = 0; got > 0 && i < got;
	     i += (ssize_t)strlen(list + i) + 1)
		if (removable(k, list + i, dir) && !in_x(x, list + i) &&
		    fremovexattr(fd, list + i) < 0 && errno != ENODATA)
			set_failed(k, list + i, errno);
	free(list);
}
