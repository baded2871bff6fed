/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A file in flight on the sink, from FILE to FILE_RESULT: the table of
 * live files by wire id, its temporary opened (and its space checked),
 * work handed to a worker, HAVE SKIP for a file the source need not send,
 * the result sent, counted and reported, and the file freed. Called by
 * every step of the sink above it (sink.c, sink_chunk.c, sink_final.c,
 * sink_resume.c, ...); it calls only sink_meta.c, sink_dir.c and
 * sink_range.c below it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/session/report.h"
#include "transfer/sink/sink_int.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/units.h"

/* Closes the temporary; removes it unless --resume may reuse it. */
void sink_discard(struct sink *k, struct snk_file *f)
{
	if (f->rg) {
		sink_range_release(k, f); /* the temporary is shared */
		return;
	}
	direct_close(&f->dio);
	if (f->fd < 0)
		return;
	close(f->fd);
	f->fd = -1;
	if (!sink_resuming(k) || f->err == -EBADMSG ||
	    f->kind != WIRE_KIND_FILE)
		unlinkat(f->dirfd, f->n.tmp, 0);
}

void sink_file_free(struct sink *k, struct snk_file *f)
{
	const struct sink_budget *b;

	if (!f)
		return;
	b = k->t->budget;
	if (b && f->charged && !f->placed)
		b->give_back(b->arg, f->charged_size, f->charged_old);
	sink_discard(k, f);
	if (f->cand >= 0)
		close(f->cand);
	if (f->parent)
		sink_parent_put(f->parent);
	else if (f->dirfd >= 0 && f->dirfd != k->t->dirfd)
		close(f->dirfd);
	free(f->sums);
	free(f->bits);
	free(f->xattrs);
	free(f->target);
	ck_sha256_destroy(f->tree);
	sink_dir_release(k, f->dir); /* after the temporary is gone */
	free(f);
}

/* The file in flight with id, or NULL. */
struct snk_file *sink_live_find(const struct sink *k, uint32_t id)
{
	unsigned int lo = 0, hi = k->nlive;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (k->live[mid]->id == id)
			return k->live[mid];
		if (k->live[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Ids only grow: appending keeps live[] sorted. */
void sink_live_add(struct sink *k, struct snk_file *f)
{
	k->live[k->nlive++] = f;
}

static void live_remove(struct sink *k, const struct snk_file *f)
{
	for (unsigned int i = k->nlive; i-- > 0;) {
		if (k->live[i] != f)
			continue;
		memmove(&k->live[i], &k->live[i + 1],
			(k->nlive - i - 1) * sizeof(k->live[0]));
		k->nlive--;
		return;
	}
}

/*
 * Fills in the digest and algorithm; the client's user sees r, and a
 * receiver's audit trail (transfer/server/audit.c).
 */
void sink_user_report(struct sink *k, struct xfer_file_report *r,
		      const uint8_t *digest, unsigned int dlen)
{
	report_file(k->e->o, r, k->p->csum, digest, dlen);
}

void sink_file_report(struct sink *k, struct snk_file *f, bool done,
			  const uint8_t *digest, unsigned int dlen)
{
	struct xfer_file_report r = {
		.done = done,
		.path = f->n.shown,
		.kind = wire_kind_name(f->kind),
		.bytes = f->size,
		.sent = f->sent,
		.seconds = clock_now_s() - f->t0,
		.status = f->err,
		.klass = engine_klass_of(f->err, f->err_remote),
		.message = f->err ? f->errmsg : NULL,
		.rule = f->err == -EDQUOT ? f->rule : NULL,
		.skipped = f->skipped,
		.reason = report_skip_reason(k->p->flags, k->p->sync),
		.dry = f->dry,
		.exists = f->exists,
	};

	sink_user_report(k, &r, digest, dlen);
}

int sink_open_tmp(struct sink *k, struct snk_file *f, bool keep)
{
	char msg[WIRE_MSG_MAX + 1];
	const char *what;
	bool fresh;
	int rc;

	f->fd = place_tmp_open(f->dirfd, f->n.tmp, keep, 0600, &fresh, &what);
	if (f->fd >= 0)
		return 0;
	rc = f->fd;
	f->fd = -1;
	if (place_tmp_failed(rc, what, f->n.shown, msg, sizeof(msg)) &&
	    !sink_resuming(k))
		unlinkat(f->dirfd, f->n.tmp, 0);
	file_fail(f, rc == -EWOULDBLOCK ? -EBUSY : rc, "%s", msg);
	return -1;
}

void sink_no_space(struct snk_file *f, uint64_t need, uint64_t avail)
{
	char sz[32], av[32];

	file_fail(f, -ENOSPC, "not enough space for '%s': %s needed, %s free",
		  f->n.shown, units_format_size(need, sz, sizeof(sz)),
		  units_format_size(avail, av, sizeof(av)));
}

/* Fails f fast when need more bytes cannot fit where it goes. */
void sink_check_space(struct snk_file *f, uint64_t need)
{
	uint64_t avail;

	if (place_check_space(f->fd, need, &avail))
		sink_no_space(f, need, avail);
}

uint64_t sink_old_bytes(int dirfd, const char *name)
{
	struct stat st;

	if (dirfd < 0 || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	return (uint64_t)st.st_blocks * 512;
}

void sink_charge(struct sink *k, struct snk_file *f, uint64_t size,
		 bool replaces, bool keep)
{
	const struct sink_budget *b = k->t->budget;
	char msg[WIRE_MSG_MAX + 1];
	uint64_t old;

	if (!b || f->err)
		return;
	old = replaces ? sink_old_bytes(f->dirfd, f->n.name) : 0;
	if (b->take(b->arg, size, old, &f->rule, msg, sizeof(msg))) {
		file_fail(f, -EDQUOT, "'%s' refused: %s", f->n.shown, msg);
		return;
	}
	f->charged = true;
	f->placed = keep;
	f->charged_size = size;
	f->charged_old = old;
}

/*
 * The source is told to send nothing of f, then f's result follows: kept
 * as it was (skipped), or failed before any data (f->err). Frees f.
 */
int sink_skip_file(struct sink *k, struct snk_file *f)
{
	struct wire_msg m = { .type = WIRE_HAVE };

	m.u.have.file_id = f->id;
	m.u.have.flags = WIRE_HAVE_SKIP;
	m.u.have.status = f->err;
	if (engine_send(k->e, &m))
		return -1;
	return sink_send_result(k, f, NULL, 0);
}

/* Hands f to a worker for fn; after runs in the engine thread. */
void sink_start_work(struct sink *k, struct snk_file *f,
		     void (*fn)(struct workq_item *),
		     void (*after)(struct workq_item *))
{
	struct snk_work *w = &f->work;

	w->item.fn = fn;
	w->item.after = after;
	w->k = k;
	w->f = f;
	workq_push(k->e->wq, &w->item);
}

/*
 * Counts a file's outcome and logs it: every failure on the client, the
 * receiver's own ones and each placed file on the receiver. msg NULL: the
 * failure was logged already.
 */
void sink_tally(struct sink *k, const char *shown, uint64_t size, int err,
		bool remote, const char *msg, bool skipped)
{
	if (err) {
		if (msg && !k->p->server)
			log_err("%s", msg);
		else if (msg && !remote && engine_user_is_peer(k->e))
			log_info("%s", msg); /* the client prints it */
		else if (msg && !remote)
			log_warn("%s", msg);
		if (!k->st->files_failed++)
			k->st->first_fail = engine_klass_of(err, remote);
		return;
	}
	if (k->p->server)
		log_info("%s '%s' (%llu bytes)", skipped ? "kept" : "received",
			 shown, (unsigned long long)size);
	k->st->files_ok++;
	k->st->files_skipped += skipped;
	k->st->bytes += size;
}

/*
 * -H: LINKED f is answered, placed (or kept) or failed: its links may be
 * made (sink_links_pump). A dry run places nothing: its links are
 * answered as they come.
 */
static void settle(struct sink *k, const struct snk_file *f)
{
	if (!f->settle || f->dry || f->exists)
		return;
	*f->settle = f->err ? SINK_TGT_FAILED : SINK_TGT_PLACED;
	k->links_due = true;
}

int sink_send_result(struct sink *k, struct snk_file *f, const uint8_t *digest,
		     unsigned int dlen)
{
	struct wire_msg m = { .type = WIRE_FILE_RESULT };
	bool final = sink_range_final(f) || f->kept_final;
	int rc;

	m.u.result.file_id = f->id;
	m.u.result.status = f->err;
	m.u.result.sent = f->sent;
	m.u.result.flags = (f->skipped ? WIRE_RESULT_SKIPPED : 0) |
			   (f->dry ? WIRE_RESULT_DRY : 0) |
			   (f->exists ? WIRE_RESULT_EXISTS : 0) |
			   (final ? WIRE_RESULT_FINAL : 0);
	if (f->err) {
		snprintf(m.u.result.msg, sizeof(m.u.result.msg), "%s",
			 f->errmsg);
	} else {
		m.u.result.digest_len = (uint8_t)dlen;
		if (dlen)
			memcpy(m.u.result.digest, digest, dlen);
	}
	if ((f->rg || f->kept_range) && !f->err && !final) {
		/* a range: the file is counted once, by its final one */
		if (f->rg)
			k->st->bytes += sink_range_len(f);
	} else
		sink_tally(k, f->n.shown, f->rg ? sink_range_len(f) : f->size,
			   f->err, f->err_remote, f->errmsg, f->skipped);
	sink_file_report(k, f, true, digest, dlen);
	settle(k, f);
	rc = engine_send(k->e, &m);
	live_remove(k, f);
	k->active--;
	sink_file_free(k, f);
	return rc;
}

/* The kept entries not yet told, in one KEPT. 0 or the engine's error. */
int sink_kept_flush(struct sink *k)
{
	struct wire_msg m = { .type = WIRE_KEPT };

	m.u.kept.first_id = k->kept_first;
	m.u.kept.count = k->kept_count;
	k->kept_count = 0;
	return engine_send(k->e, &m);
}

int sink_send_kept(struct sink *k, struct snk_file *f)
{
	int rc = 0;

	sink_tally(k, f->n.shown, f->kind == WIRE_KIND_FILE ? f->size : 0, 0,
		   false, NULL, true);
	sink_file_report(k, f, true, NULL, 0);
	settle(k, f);
	if (k->kept_count && (f->id != k->kept_first + k->kept_count ||
			      k->kept_count == WIRE_KEPT_MAX))
		rc = sink_kept_flush(k);
	if (!k->kept_count)
		k->kept_first = f->id;
	k->kept_count++;
	live_remove(k, f);
	k->active--;
	sink_file_free(k, f);
	return rc;
}
