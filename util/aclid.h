/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The user and group ids inside a POSIX ACL as Linux's xattrs hold it
 * (system.posix_acl_access and _default, linux/posix_acl_xattr.h): a
 * little-endian u32 version 2, then entries of u16 tag, u16 perm and u32
 * id, little-endian too. -A copies those bytes; without --numeric-ids the
 * named users' and groups' ids are mapped by name, as owners are. Pure:
 * no I/O, no lookups.
 */
#ifndef RDCP_ACLID_H
#define RDCP_ACLID_H

#include <stddef.h>
#include <stdint.h>

#define ACLID_USER 0x02u  /* ACL_USER: a named user, its uid */
#define ACLID_GROUP 0x08u /* ACL_GROUP: a named group, its gid */

/*
 * The entries of the ACL value v (len bytes): their count, or -EINVAL
 * when it is not version 2 or not a whole number of entries.
 */
int aclid_count(const uint8_t *v, size_t len);

/* Entry i's tag and id, of a value aclid_count accepted. */
void aclid_get(const uint8_t *v, size_t i, uint16_t *tag, uint32_t *id);

/* Makes entry i's id id. */
void aclid_set(uint8_t *v, size_t i, uint32_t id);

/*
 * Puts each run of entries of one tag (the named users, the named groups)
 * of v's n entries in the order of their ids, as setfacl writes them:
 * ids mapped by name may come out of order.
 */
void aclid_sort(uint8_t *v, size_t n);

#endif
