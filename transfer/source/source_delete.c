/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The source's side of --delete (sink_delete.c deletes). DONE tells the
 * sink whether the list was whole: every entry beneath the SRCs announced,
 * none failed or skipped; without that the sink deletes nothing. On a push
 * it also carries the client's --max-delete, and the receiver's sink tells
 * each entry it removed (DELETED) and then the outcome (DELETE_END),
 * after the last result and before BYE; the client reports them as the
 * sink of a pull reports its own.
 */
#include <errno.h>
#include <string.h>

#include "transfer/source/source_int.h"
#include "util/log.h"
#include "util/path.h"

static bool deleting(const struct source *s)
{
	return s->cfg->p.flags & WIRE_HELLO_DELETE;
}

/* Whether the sink tells this side its deletions: a push's client. */
static bool told(const struct source *s)
{
	return deleting(s) && !s->cfg->p.server;
}

void src_fill_done(struct source *s, struct wire_done *d)
{
	bool whole = !s->st->files_failed && !s->walk.skipped;

	d->flags = whole ? WIRE_DONE_WHOLE : 0;
	d->max_delete =
		s->cfg->p.server ? WIRE_DELETE_ANY : s->o->copy.max_delete;
	/* Failures are counted already; a skip is one for a mirror. */
	if (deleting(s) && !whole && !s->st->files_failed &&
	    !s->cfg->p.server) {
		log_err("nothing will be deleted: %zu %s skipped (above); "
			"exclude them to mirror the rest",
			s->walk.skipped,
			s->walk.skipped == 1 ? "entry was" : "entries were");
		s->st->files_failed++;
		s->st->first_fail = XFER_FAIL_LOCAL_IO;
	}
}

int src_on_deleted(struct source *s, const struct wire_deleted *d)
{
	bool dry = s->cfg->p.flags & WIRE_HELLO_DRY_RUN;
	struct xfer_file_report r = {
		.done = true,
		.deleted = true,
		.path = d->path,
		.name = d->path,
		.kind = wire_kind_name(d->kind),
		.status = d->status,
		.klass = engine_klass_of(d->status, true),
		.message = d->status ? d->msg : NULL,
		.dry = dry,
	};

	/* Only after DONE, before DELETE_END, and as asked (dry or not). */
	if (!told(s) || !s->done_sent || s->delete_ended ||
	    !(d->flags & WIRE_DELETED_DRY) != !dry ||
	    path_check_relative(d->path, strlen(d->path), d->status != 0))
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s told of a deletion out of place: "
				   "refused",
				   s->e->c->peer);
	if (d->status) {
		log_err("%s", d->msg[0] ? d->msg : strerror(-d->status));
		if (!s->st->files_failed++)
			s->st->first_fail = r.klass;
	} else {
		s->st->deleted++;
		s->deleted_ok++;
	}
	report_file(s->o, &r, s->cfg->p.csum, NULL, 0);
	return 0;
}

int src_on_delete_end(struct source *s, const struct wire_delete_end *d)
{
	if (!told(s) || !s->done_sent || s->delete_ended ||
	    s->results != s->nfiles ||
	    (d->status && d->status != -E2BIG && d->status != -ECANCELED) ||
	    (!d->status && d->count != s->deleted_ok))
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s ended the deletions out of place or "
				   "with a count not its own: refused",
				   s->e->c->peer);
	s->delete_ended = true;
	if (d->status == -E2BIG) {
		s->st->max_delete_hit = true;
		log_err("%s: nothing deleted: %llu %s would go, more than "
			"--max-delete %llu",
			s->e->c->peer, (unsigned long long)d->count,
			d->count == 1 ? "entry" : "entries",
			(unsigned long long)s->o->copy.max_delete);
	} else if (d->status && s->st->files_failed) {
		log_warn("nothing deleted: %llu %s failed",
			 (unsigned long long)s->st->files_failed,
			 s->st->files_failed == 1 ? "entry" : "entries");
	} else if (d->status) {
		log_warn("%s deleted nothing: %s", s->e->c->peer, d->msg);
	}
	return 0;
}

bool src_bye_due(const struct source *s)
{
	return s->done_sent && s->results == s->nfiles &&
	       (!told(s) || s->delete_ended);
}
