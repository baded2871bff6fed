/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's side of --delete (HELLO flag DELETE): once the whole copy is
 * verified, what DEST holds and the source did not send goes, as rsync's
 * --delete does, in the directories the copy sent as directories.
 *
 * Every entry announced (FILE, and each record of a packed slot) is
 * remembered until the end as a 64-bit hash of its path as sent, with a
 * directory's told apart (sink_delete_key): 16 to 32 bytes an entry
 * (util/hset.h). A collision can only keep an entry that should have gone.
 *
 * Nothing is looked at unless the session is whole: DONE said the source
 * announced every entry beneath its SRCs, and no entry failed here. Then,
 * a step per engine turn (prune.c: beneath DEST's directory fd, no
 * symlink followed, a mount point never entered), each directory sent is
 * entered and each entry in it that was not announced is removed with its
 * tree; DEST's own entries are only entered, never removed (a file SRC
 * deletes nothing). Entries the --include/--exclude rules exclude are
 * kept, as rsync keeps them without --delete-excluded: on a push the
 * rules come in the HELLO, on a pull they are the client's own. With
 * --max-delete N (DONE's max_delete on a push, the client's own on a
 * pull) the tree is first only counted; more than N to go, and none goes.
 * --dry-run lists instead of removing. On a push each entry is told to the
 * client (DELETED), then the outcome (DELETE_END), then BYE follows.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/sink/sink_int.h"
#include "util/filter.h"
#include "util/log.h"

#define DEL_BATCH 64	     /* entries removed (and told) per engine turn */
#define DEL_COUNT_BATCH 1024 /* entries counted per engine turn */

enum {
	DEL_START,
	DEL_COUNT,
	DEL_ACT,
	DEL_OVER
};

bool sink_deleting(const struct sink *k)
{
	return k->p->flags & WIRE_HELLO_DELETE;
}

uint64_t sink_delete_key(const char *path, size_t len, bool dir)
{
	uint64_t h = ck_fnv1a64(path, len);

	/* A directory's is that of its path and a '/' (FNV-1a, one byte on). */
	if (dir)
		h = (h ^ '/') * 0x100000001b3ull;
	return hset_key(h);
}

int sink_delete_note(struct sink *k, uint64_t key)
{
	int rc = hset_add(&k->del.names, key);

	if (rc == -ENOMEM)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, rc,
				   "out of memory remembering the names sent");
	return 0; /* -EEXIST: a name sent twice (two SRCs of one name) */
}

void sink_delete_done(struct sink *k, const struct wire_done *d)
{
	k->del.whole = d->flags & WIRE_DONE_WHOLE;
	/* A pull's brake is the client's own, not what its server says. */
	k->del.max = k->p->server ? d->max_delete : k->e->o->copy.max_delete;
}

void sink_delete_release(struct sink *k)
{
	prune_destroy(k->del.pr);
	k->del.pr = NULL;
	hset_release(&k->del.names);
}

static bool sent(const struct sink *k, const char *path, bool dir)
{
	return hset_has(&k->del.names,
			sink_delete_key(path, strlen(path), dir));
}

/* The verdict on an entry of DEST (prune.h). */
static enum prune_verdict decide(void *arg, const char *path, bool is_dir,
				 bool inside)
{
	const struct sink *k = arg;

	if (filter_excludes(k->t->filter, path, is_dir))
		return PRUNE_KEEP; /* excluded: protected, with its tree */
	if (inside)
		return PRUNE_REMOVE;
	if (sent(k, path, true))
		return PRUNE_ENTER; /* a directory sent (kept if not one now) */
	if (sent(k, path, false))
		return PRUNE_KEEP;
	/* DEST's own entries are no directory the copy sent: kept. */
	return strchr(path, '/') ? PRUNE_REMOVE : PRUNE_KEEP;
}

/* Where path (as sent) is, as this side shows it (sink_map_names). */
static void landed(const struct sink *k, const char *path, char *out, size_t n)
{
	const struct sink_target *t = k->t;

	if (!t->is_dir)
		snprintf(out, n, "%s%s", t->shown, path + strlen(k->top));
	else
		snprintf(out, n, "%s%s%s", t->shown,
			 t->shown[0] && path[0] ? "/" : "", path);
}

/* The phase is over: said (DELETE_END on a push) and logged. */
static int del_end(struct sink *k, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int del_end(struct sink *k, int status, const char *fmt, ...)
{
	struct snk_del *d = &k->del;
	struct wire_msg m = { .type = WIRE_DELETE_END };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m.u.delete_end.msg, sizeof(m.u.delete_end.msg), fmt, ap);
	va_end(ap);
	prune_destroy(d->pr);
	d->pr = NULL;
	d->phase = DEL_OVER;
	if (status == -E2BIG) {
		k->st->max_delete_hit = true;
		if (k->p->server)
			log_warn("%s", m.u.delete_end.msg);
		else
			log_err("%s", m.u.delete_end.msg);
	} else if (status && m.u.delete_end.msg[0]) {
		if (k->p->server)
			log_info("%s", m.u.delete_end.msg);
		else
			log_warn("%s", m.u.delete_end.msg);
	}
	if (!k->p->server)
		return 1;
	m.u.delete_end.status = status;
	m.u.delete_end.count = status == -E2BIG ? d->would : d->gone;
	return engine_send(k->e, &m) ? 0 : 1;
}

/* One entry removed (or listed), or not: counted, logged and told. */
static int del_report(struct sink *k, const struct prune_event *ev)
{
	bool dry = k->p->flags & WIRE_HELLO_DRY_RUN;
	struct wire_msg m = { .type = WIRE_DELETED };
	struct wire_deleted *w = &m.u.deleted;
	char shown[PATH_PEER_MAX + 4400];

	landed(k, ev->path, shown, sizeof(shown));
	if (ev->status == -E2BIG)
		snprintf(w->msg, sizeof(w->msg),
			 "cannot delete '%s': more than --max-delete %llu "
			 "entries would go",
			 shown, (unsigned long long)k->del.max);
	else if (ev->status)
		snprintf(w->msg, sizeof(w->msg), "cannot delete '%s': %s (%s)",
			 shown, ev->why, strerror(-ev->status));
	if (ev->status) {
		if (!k->st->files_failed++)
			k->st->first_fail = engine_klass_of(ev->status, false);
		if (k->p->server)
			log_warn("%s", w->msg);
		else
			log_err("%s", w->msg);
	} else {
		const struct sink_budget *b = k->t->budget;

		k->st->deleted++;
		k->del.gone++;
		if (b && ev->bytes && !dry)
			b->freed(b->arg, ev->bytes);
		if (k->p->server)
			log_info("%s '%s'", dry ? "would delete" : "deleted",
				 shown);
	}
	if (!k->p->server) {
		struct xfer_file_report r = {
			.done = true,
			.deleted = true,
			.path = shown,
			.kind = wire_kind_name(ev->kind),
			.status = ev->status,
			.klass = engine_klass_of(ev->status, false),
			.message = ev->status ? w->msg : NULL,
			.dry = dry,
		};

		sink_user_report(k, &r, NULL, 0);
		return 0;
	}
	w->kind = ev->kind;
	w->flags = dry ? WIRE_DELETED_DRY : 0;
	w->status = ev->status;
	snprintf(w->path, sizeof(w->path), "%s", ev->path);
	return engine_send(k->e, &m);
}

/* Starts a walk of what DEST has: counting only, or the real one. */
static int del_walk(struct sink *k, bool count)
{
	const struct sink_target *t = k->t;
	struct prune_cfg c = {
		.dirfd = t->dirfd,
		.name = t->is_dir ? "." : t->name,
		.prefix = t->is_dir ? "" : k->top,
		.remove = !count && !(k->p->flags & WIRE_HELLO_DRY_RUN),
		.keep_times = sink_preserving(k),
		.limit = k->del.max,
		.decide = decide,
		.arg = k,
	};
	int rc = prune_create(&c, &k->del.pr);

	if (rc) {
		engine_fail(k->e, XFER_FAIL_RESOURCE, rc,
			    "cannot start deleting: %s", strerror(-rc));
		return 0;
	}
	k->del.phase = count ? DEL_COUNT : DEL_ACT;
	return 1;
}

/* Whether to delete at all, and how: the first step. */
static int del_start(struct sink *k)
{
	struct snk_del *d = &k->del;

	if (k->st->files_failed)
		return del_end(k, -ECANCELED, "nothing deleted: %llu %s failed",
			       (unsigned long long)k->st->files_failed,
			       k->st->files_failed == 1 ? "entry" : "entries");
	if (!d->whole && !k->p->server) {
		/* A pull's server skipped an entry: a failure of the run. */
		log_err("nothing deleted: %s did not send every entry beneath "
			"the SRCs (it skipped some: see its log)",
			k->e->c->peer);
		k->st->files_failed++;
		k->st->first_fail = XFER_FAIL_REMOTE_IO;
		return del_end(k, -ECANCELED, "%s", "");
	}
	if (!d->whole) /* a push's client knows why: its own walk */
		return del_end(k, -ECANCELED,
			       "nothing deleted: %s did not send every entry "
			       "beneath the SRCs",
			       k->e->c->peer);
	/* A dry run into a DEST not there yet; a tree not sent as one. */
	if (k->t->dirfd < 0 || (!k->t->is_dir && !sent(k, k->top, true)))
		return del_end(k, 0, "%s", "");
	return del_walk(k, d->max != WIRE_DELETE_ANY);
}

bool sink_delete_pending(const struct sink *k)
{
	return sink_deleting(k) && k->del.phase != DEL_OVER;
}

int sink_delete_step(struct sink *k)
{
	struct snk_del *d = &k->del;
	struct prune_event ev;
	int n, rc, batch = d->phase == DEL_COUNT ? DEL_COUNT_BATCH : DEL_BATCH;

	if (d->phase == DEL_START)
		return del_start(k);
	/* What was told goes out first: the queue stays one batch long. */
	if (d->phase == DEL_ACT && !engine_out_empty(k->e))
		return 0;
	for (n = 0; n < batch; n++) {
		rc = prune_next(d->pr, &ev);
		if (rc < 0) {
			engine_fail(k->e, XFER_FAIL_RESOURCE, rc,
				    "cannot delete: %s", strerror(-rc));
			return 0;
		}
		if (rc == 0 && d->phase == DEL_ACT)
			return del_end(k, 0, "%s", "");
		if (rc == 0 && d->would > d->max)
			return del_end(k, -E2BIG,
				       "nothing deleted: %llu %s would go, "
				       "more than --max-delete %llu",
				       (unsigned long long)d->would,
				       d->would == 1 ? "entry" : "entries",
				       (unsigned long long)d->max);
		if (rc == 0) {
			prune_destroy(d->pr);
			d->pr = NULL;
			return del_walk(k, false);
		}
		if (d->phase == DEL_COUNT)
			d->would += !ev.status;
		else if (del_report(k, &ev))
			return 0;
	}
	return n;
}
