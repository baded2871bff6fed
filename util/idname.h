/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * User and group names of numeric ids and back (-o/-g: owners travel by
 * name with the number beside it), through getpwuid_r and friends, each
 * answer cached: a tree of a million files has a handful of owners, and
 * NSS lookups (LDAP, sssd) cost milliseconds. Thread-safe (a mutex): the
 * sink's pack workers look ids up too. The cache is bounded
 * (IDNAME_CACHE entries a kind, emptied when full), so a peer that sends
 * a new name for every file costs lookups, never memory.
 */
#ifndef RDCP_IDNAME_H
#define RDCP_IDNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define IDNAME_MAX 255u	   /* bytes of a name on the wire, no NUL */
#define IDNAME_CACHE 256u  /* entries per kind (user, group, both ways) */

/*
 * The name of uid (or, group, of gid) into buf (IDNAME_MAX + 1 bytes):
 * true, or false with buf "" when it has none (or a longer one).
 */
bool idname_of_uid(uid_t uid, char *buf);
bool idname_of_gid(gid_t gid, char *buf);

/* The local id of user (group) name: true, or false when none has it. */
bool idname_uid(const char *name, uid_t *uid);
bool idname_gid(const char *name, gid_t *gid);

/* Forgets every cached answer (tests). */
void idname_flush(void);

#endif
