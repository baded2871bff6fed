/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -o/-g on the sink's side: the source's owner and group (numbers, and
 * names unless --numeric-ids) mapped to this host's ids (a name this
 * host knows wins, else the number), given to an entry before it takes
 * its final name, and what this side may not set said once per kind and
 * session: in its log, and on a push to the client too (NOTICE). A
 * --listen receiver gives no entry another owner unless --allow-owners
 * (the service rule, doc/SECURITY.md). Worker or engine thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/sink/sink_int.h"
#include "util/idname.h"
#include "util/log.h"

/* The notices' texts and flags: workers write them, the engine sends. */
static pthread_mutex_t notes_lock = PTHREAD_MUTEX_INITIALIZER;

bool sink_owners_asked(const struct sink *k)
{
	return k->p->flags & WIRE_HELLO_OWNERS;
}

void sink_owner_map(const struct sink *k, const struct wire_owner *o,
		    struct snk_owner *out)
{
	uint32_t fl = k->p->flags;
	bool names = !(fl & WIRE_HELLO_NUMERIC_IDS);
	uid_t uid;
	gid_t gid;

	memset(out, 0, sizeof(*out));
	if (fl & WIRE_HELLO_OWNER) {
		out->set_uid = true;
		out->uid = names && o->user[0] && idname_uid(o->user, &uid)
				   ? uid
				   : (uid_t)o->uid;
	}
	if (fl & WIRE_HELLO_GROUP) {
		out->set_gid = true;
		out->gid = names && o->group[0] && idname_gid(o->group, &gid)
				   ? gid
				   : (gid_t)o->gid;
	}
}

void sink_note(struct sink *k, unsigned int kind, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&notes_lock);
	if (k->notes_said & (1u << kind)) {
		pthread_mutex_unlock(&notes_lock);
		return;
	}
	k->notes_said |= 1u << kind;
	va_start(ap, fmt);
	vsnprintf(k->notes[kind], sizeof(k->notes[kind]), fmt, ap);
	va_end(ap);
	log_warn("%s", k->notes[kind]);
	pthread_mutex_unlock(&notes_lock);
}

/* This process's user, for "kept as USER". */
static void whoami(char *buf)
{
	if (!idname_of_uid(geteuid(), buf))
		snprintf(buf, IDNAME_MAX + 1, "uid %u", (unsigned int)geteuid());
}

static int chown_at(int dirfd, const char *name, uid_t uid, gid_t gid)
{
	int flags = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);

	return fchownat(dirfd, name, uid, gid, flags) < 0 ? -errno : 0;
}

mode_t sink_owner_apply(struct sink *k, int dirfd, const char *name,
			const struct snk_owner *ow)
{
	uid_t uid = ow->set_uid && !__atomic_load_n(&k->owner_denied,
						    __ATOMIC_RELAXED)
			    ? ow->uid
			    : (uid_t)-1;
	gid_t gid = ow->set_gid ? ow->gid : (gid_t)-1;
	char me[IDNAME_MAX + 1];
	mode_t keep = 0;
	int rc;

	if (!ow->set_uid && !ow->set_gid)
		return 0;
	if (!k->p->owners_ok) {
		/* said only when it changes something: another owner asked */
		if ((!ow->set_uid || ow->uid == geteuid()) &&
		    (!ow->set_gid || ow->gid == getegid()))
			return 0;
		whoami(me);
		sink_note(k, SINK_NOTE_SERVICE,
		     "owners and groups not kept: this receiver gives no file "
		     "another owner (it runs without --allow-owners); kept as "
		     "%s, setuid/setgid bits cleared",
		     me);
		return 0;
	}
	if (uid == (uid_t)-1 && gid == (gid_t)-1)
		return 0;
	rc = chown_at(dirfd, name, uid, gid);
	if (rc == -EPERM && uid != (uid_t)-1) {
		/* not root: the owner is out of reach, the group may not be */
		__atomic_store_n(&k->owner_denied, true, __ATOMIC_RELAXED);
		whoami(me);
		sink_note(k, SINK_NOTE_OWNER,
		     "cannot set owners: not root; kept as %s, setuid bits "
		     "cleared",
		     me);
		uid = (uid_t)-1;
		rc = gid == (gid_t)-1 ? 0 : chown_at(dirfd, name, uid, gid);
	} else if (rc && uid != (uid_t)-1) {
		sink_note(k, SINK_NOTE_OWNER, "cannot set owners: %s",
		     strerror(-rc));
		return 0;
	}
	if (rc && gid != (gid_t)-1) {
		sink_note(k, SINK_NOTE_GROUP,
		     "cannot set some groups: %s (a user may give files only "
		     "the groups it is in); kept as its own, setgid bits "
		     "cleared",
		     strerror(-rc));
		gid = (gid_t)-1;
	}
	if (uid != (uid_t)-1)
		keep |= S_ISUID;
	if (gid != (gid_t)-1)
		keep |= S_ISGID;
	return keep;
}

bool sink_owner_matches(const struct sink *k, const struct snk_owner *ow,
			const struct stat *st)
{
	if (!k->p->owners_ok)
		return true; /* nothing would be set */
	return (!ow->set_uid || st->st_uid == ow->uid ||
		__atomic_load_n(&k->owner_denied, __ATOMIC_RELAXED)) &&
	       (!ow->set_gid || st->st_gid == ow->gid);
}

int sink_notes_flush(struct sink *k)
{
	struct wire_msg m = { .type = WIRE_NOTICE };
	unsigned int due;
	int kind;

	pthread_mutex_lock(&notes_lock);
	due = k->notes_said & ~k->notes_sent;
	pthread_mutex_unlock(&notes_lock);
	if (!due || !k->p->server)
		return 0;
	kind = __builtin_ctz(due);
	pthread_mutex_lock(&notes_lock);
	snprintf(m.u.notice.msg, sizeof(m.u.notice.msg), "%s", k->notes[kind]);
	k->notes_sent |= 1u << kind;
	pthread_mutex_unlock(&notes_lock);
	return engine_send(k->e, &m) ? -1 : 1;
}
