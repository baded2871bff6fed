/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * idname.h's cache: four small tables (uid -> name, gid -> name, name ->
 * uid, name -> gid), linear search (a session sees a few ids), emptied
 * when one fills. Answers that there is no such id or name are cached
 * too: a tree full of one unknown uid costs one lookup.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/idname.h"

struct ent {
	uint32_t id;
	bool found;
	char name[IDNAME_MAX + 1];
};

struct table {
	struct ent e[IDNAME_CACHE];
	unsigned int n;
};

enum { T_UID_NAME, T_GID_NAME, T_NAME_UID, T_NAME_GID, T_N };

static struct table tabs[T_N];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The cached entry: by id (name NULL) or by name. Under the lock. */
static struct ent *find(struct table *t, uint32_t id, const char *name)
{
	for (unsigned int i = 0; i < t->n; i++)
		if (name ? !strcmp(t->e[i].name, name) : t->e[i].id == id)
			return &t->e[i];
	return NULL;
}

static void put(struct table *t, uint32_t id, const char *name, bool found)
{
	struct ent *e;

	if (t->n == IDNAME_CACHE)
		t->n = 0; /* bounded: start over */
	e = &t->e[t->n++];
	e->id = id;
	e->found = found;
	strncpy(e->name, name, IDNAME_MAX);
	e->name[IDNAME_MAX] = '\0';
}

/* A buffer for getpw*_r / getgr*_r: their own hint, or 16 KiB. */
static char *nss_buf(int which, size_t *len)
{
	long n = sysconf(which);

	*len = n > 0 && n < (1 << 20) ? (size_t)n : 16384;
	return malloc(*len);
}

static bool lookup_name(bool group, uint32_t id, char *out)
{
	size_t len;
	char *buf = nss_buf(group ? _SC_GETGR_R_SIZE_MAX : _SC_GETPW_R_SIZE_MAX,
			    &len);
	const char *name = NULL;
	struct passwd pw, *pr = NULL;
	struct group gr, *gp = NULL;

	if (!buf)
		return false;
	if (group && !getgrgid_r((gid_t)id, &gr, buf, len, &gp) && gp)
		name = gp->gr_name;
	else if (!group && !getpwuid_r((uid_t)id, &pw, buf, len, &pr) && pr)
		name = pr->pw_name;
	if (name && strlen(name) <= IDNAME_MAX && name[0])
		strcpy(out, name);
	else
		name = NULL;
	free(buf);
	return name != NULL;
}

static bool lookup_id(bool group, const char *name, uint32_t *id)
{
	size_t len;
	char *buf = nss_buf(group ? _SC_GETGR_R_SIZE_MAX : _SC_GETPW_R_SIZE_MAX,
			    &len);
	struct passwd pw, *pr = NULL;
	struct group gr, *gp = NULL;
	bool found = false;

	if (!buf)
		return false;
	if (group && !getgrnam_r(name, &gr, buf, len, &gp) && gp) {
		*id = (uint32_t)gp->gr_gid;
		found = true;
	} else if (!group && !getpwnam_r(name, &pw, buf, len, &pr) && pr) {
		*id = (uint32_t)pr->pw_uid;
		found = true;
	}
	free(buf);
	return found;
}

static bool name_of(int tab, bool group, uint32_t id, char *buf)
{
	struct ent *e;
	bool found;

	pthread_mutex_lock(&lock);
	e = find(&tabs[tab], id, NULL);
	if (e) {
		found = e->found;
		strcpy(buf, found ? e->name : "");
		pthread_mutex_unlock(&lock);
		return found;
	}
	pthread_mutex_unlock(&lock);
	found = lookup_name(group, id, buf);
	if (!found)
		buf[0] = '\0';
	pthread_mutex_lock(&lock);
	put(&tabs[tab], id, buf, found);
	pthread_mutex_unlock(&lock);
	return found;
}

static bool id_of(int tab, bool group, const char *name, uint32_t *id)
{
	struct ent *e;
	bool found;

	if (!name[0] || strlen(name) > IDNAME_MAX)
		return false;
	pthread_mutex_lock(&lock);
	e = find(&tabs[tab], 0, name);
	if (e) {
		found = e->found;
		*id = e->id;
		pthread_mutex_unlock(&lock);
		return found;
	}
	pthread_mutex_unlock(&lock);
	found = lookup_id(group, name, id);
	pthread_mutex_lock(&lock);
	put(&tabs[tab], found ? *id : 0, name, found);
	pthread_mutex_unlock(&lock);
	return found;
}

bool idname_of_uid(uid_t uid, char *buf)
{
	return name_of(T_UID_NAME, false, (uint32_t)uid, buf);
}

bool idname_of_gid(gid_t gid, char *buf)
{
	return name_of(T_GID_NAME, true, (uint32_t)gid, buf);
}

bool idname_uid(const char *name, uid_t *uid)
{
	uint32_t id = 0;
	bool ok = id_of(T_NAME_UID, false, name, &id);

	*uid = (uid_t)id;
	return ok;
}

bool idname_gid(const char *name, gid_t *gid)
{
	uint32_t id = 0;
	bool ok = id_of(T_NAME_GID, true, name, &id);

	*gid = (gid_t)id;
	return ok;
}

void idname_flush(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < T_N; i++)
		tabs[i].n = 0;
	pthread_mutex_unlock(&lock);
}
