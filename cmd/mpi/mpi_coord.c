/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi's coordinator, on rank 0 (mpi_job.h). It keeps the queue of
 * work the ranks' walks found (directories to list, batches of names to
 * copy) and hands it to the ranks that ask; when nobody is walking and
 * the queue is empty the walk is over (END); a rank with directories
 * queued gives half of them up when another is idle (STEAL). It merges
 * progress and events, hears every rank at least every second (a rank
 * silent for the --timeout is lost), cancels every session when one
 * fails, and when all are done has the sessions' verdicts turned into the
 * job's (mpi_report.c).
 *
 * A rank's REQ counts as "not walking" only if it saw every GIVE sent to
 * it (the GIVE number it carries is the last one sent): a REQ crossing a
 * GIVE of a directory on the wire would otherwise end the walk early.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cmd/exit_codes.h"
#include "cmd/json_out.h"
#include "cmd/mpi/mpi_coord_int.h"
#include "cmd/mpi/mpi_job.h"
#include "transfer/wire/wire.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/units.h"

int mj_coord_create(const struct mj_coord_cfg *cfg, struct mj_coord **out)
{
	struct mj_coord *c = calloc(1, sizeof(*c));
	uint64_t now = clock_now_ms();

	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->r = calloc((size_t)cfg->nranks, sizeof(*c->r));
	if (!c->r) {
		free(c);
		return -ENOMEM;
	}
	for (int i = 0; i < cfg->nranks; i++)
		c->r[i].last_ms = now;
	c->t0 = clock_now_s();
	*out = c;
	return 0;
}

void mj_coord_destroy(struct mj_coord *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->ndirs; i++)
		free(c->dirs[i]);
	free(c->dirs);
	for (size_t i = c->headnames; i < c->nnames; i++)
		mbuf_release(&c->names[i]);
	free(c->names);
	for (size_t i = 0; i < c->nsplit_failed; i++)
		free(c->split_failed[i]);
	free(c->split_failed);
	free(c->r);
	free(c);
}

static int push_dir(struct mj_coord *c, const char *name)
{
	if (c->ndirs == c->capdirs) {
		size_t cap = c->capdirs ? 2 * c->capdirs : 64;
		char **v = realloc(c->dirs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->dirs = v;
		c->capdirs = cap;
	}
	c->dirs[c->ndirs] = strdup(name);
	return c->dirs[c->ndirs++] ? 0 : -ENOMEM;
}

static int push_names(struct mj_coord *c, const uint8_t *p, size_t len)
{
	struct mbuf b = { 0 };

	if (c->headnames && c->headnames == c->nnames)
		c->headnames = c->nnames = 0;
	if (c->nnames == c->capnames) {
		size_t cap = c->capnames ? 2 * c->capnames : 64;
		struct mbuf *v;

		if (c->headnames) { /* slide down before growing */
			memmove(c->names, c->names + c->headnames,
				(c->nnames - c->headnames) * sizeof(*v));
			c->nnames -= c->headnames;
			c->headnames = 0;
		}
		v = realloc(c->names, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->names = v;
		c->capnames = cap;
	}
	mbuf_bytes(&b, p, len);
	if (b.bad)
		return -ENOMEM;
	c->names[c->nnames++] = b;
	return 0;
}

/*
 * A file of size bytes, at least the split size: its ranges queued as
 * items of their own, each for whichever rank asks next, all with one
 * token, new for this file in this job (rdcp-mpi(1), DESCRIPTION).
 */
static int split_big(struct mj_coord *c, const char *name, uint64_t size)
{
	uint64_t split = c->cfg.split ? c->cfg.split : size;
	uint64_t n = (size + split - 1) / split;
	uint8_t token[WIRE_TOKEN_LEN];

	if (!size || n > WIRE_RANGES_MAX) /* too many: larger ranges */
		split = (size + WIRE_RANGES_MAX - 1) / WIRE_RANGES_MAX;
	if (!size || n > WIRE_RANGES_MAX)
		n = 1;
	if (getrandom(token, sizeof(token), 0) != (ssize_t)sizeof(token))
		return -EIO;
	for (uint64_t i = 0; i < n; i++) {
		struct mbuf b = { 0 };
		uint64_t off = i * split;
		uint64_t len = size - off < split ? size - off : split;

		mbuf_u8(&b, ITEM_RANGE);
		mbuf_u64(&b, len);
		mbuf_u32(&b, 1);
		mbuf_u64(&b, off);
		mbuf_u64(&b, len);
		mbuf_u32(&b, (uint32_t)i);
		mbuf_u32(&b, (uint32_t)n);
		mbuf_bytes(&b, token, sizeof(token));
		mbuf_str(&b, name);
		if (b.bad || push_names(c, b.p, b.len)) {
			mbuf_release(&b);
			return -ENOMEM;
		}
		mbuf_release(&b);
		c->total_names++;
	}
	c->total_bytes += size;
	return 0;
}

/* Items (a MSG_WORK body after its count) into the queues. */
static void take_items(struct mj_coord *c, struct mbuf *b, uint32_t n)
{
	char name[8192];

	for (uint32_t i = 0; i < n && !b->bad; i++) {
		size_t start = b->off;
		uint8_t kind = mbuf_get_u8(b);
		uint64_t bytes = mbuf_get_u64(b);
		uint32_t count = mbuf_get_u32(b);

		if (kind == ITEM_DIR) {
			mbuf_get_str(b, name, sizeof(name));
			if (!b->bad && push_dir(c, name))
				b->bad = true;
			continue;
		}
		if (kind == ITEM_BIG) {
			mbuf_get_str(b, name, sizeof(name));
			if (!b->bad && split_big(c, name, bytes))
				b->bad = true;
			continue;
		}
		if (kind != ITEM_NAMES) {
			b->bad = true;
			break;
		}
		for (uint32_t k = 0; k < count && !b->bad; k++)
			b->off += mbuf_get_u16(b);
		if (b->off > b->len)
			b->bad = true;
		if (b->bad || push_names(c, b->p + start, b->off - start))
			break;
		c->total_bytes += bytes;
		c->total_names += count;
	}
	if (b->bad)
		log_err("a malformed or too big work message: ignored");
}

void mj_coord_seed(struct mj_coord *c, struct mbuf *items, uint32_t n)
{
	take_items(c, items, n);
}

static void post(struct mj_coord *c, int rank, struct mbuf *b)
{
	(void)c;
	mj_post(rank, TAG_DOWN, b);
}

static void send_all(struct mj_coord *c, uint8_t type)
{
	for (int i = 0; i < c->cfg.nranks; i++) {
		struct mbuf b = { 0 };

		if (c->r[i].lost)
			continue;
		mbuf_u8(&b, type);
		post(c, i, &b);
	}
}

/* The job cannot finish: every session is told to stop. */
static void fail_job(struct mj_coord *c, enum xfer_fail v, const char *msg)
{
	if (c->cause == XFER_OK) {
		c->cause = v;
		snprintf(c->cause_msg, sizeof(c->cause_msg), "%s", msg);
		log_err("%s", msg);
		if (c->cfg.json)
			json_error(stdout, v, rdcp_exit_code(v), msg);
	}
	if (!c->cancel_sent) {
		c->cancel_sent = true;
		c->cancel_ms = clock_now_ms();
		send_all(c, MSG_CANCEL);
	}
}

static void on_done(struct mj_coord *c, int rank, struct mbuf *b)
{
	struct mj_rank_state *r = &c->r[rank];
	char msg[1024];

	mj_result_get(b, &r->res);
	r->done = true;
	if (r->res.v == XFER_OK || (!r->res.st.error[0] && !r->res.early))
		return; /* its files' failures are counted, not a cause */
	if (c->cancel_sent && r->res.v == XFER_FAIL_CANCELED)
		return; /* stopped because we asked */
	snprintf(msg, sizeof(msg), "rank %d on %s (to %s): %s", rank, r->host,
		 mj_coord_receiver(c, rank),
		 r->res.st.error[0] ? r->res.st.error
				    : "its session ended before its list did");
	if (c->end_sent && c->cause == XFER_OK) {
		/* The others only finish what they have: let them. */
		c->cause = r->res.v;
		snprintf(c->cause_msg, sizeof(c->cause_msg), "%s", msg);
		log_err("%s", msg);
		if (c->cfg.json)
			json_error(stdout, r->res.v, rdcp_exit_code(r->res.v),
				   msg);
		return;
	}
	fail_job(c, r->res.v, msg);
}

/*
 * Ranges of split files that failed: each file is one failed file of the
 * job, reported once (its other ranges fail with it, or are kept for
 * --resume). A linear search: files this large are few.
 */
static void on_split(struct mj_coord *c, struct mbuf *b)
{
	char path[8192], msg[1024];

	while (b->off < b->len && !b->bad) {
		struct xfer_file_report r = { .done = true,
					      .kind = "file",
					      .status = -EIO };
		bool seen = false;
		char **v;

		mbuf_get_str(b, path, sizeof(path));
		r.klass = (enum xfer_fail)mbuf_get_u32(b);
		mbuf_get_str(b, msg, sizeof(msg));
		if (b->bad)
			break;
		for (size_t i = 0; i < c->nsplit_failed && !seen; i++)
			seen = !strcmp(c->split_failed[i], path);
		if (seen)
			continue;
		v = realloc(c->split_failed,
			    (c->nsplit_failed + 1) * sizeof(*v));
		if (!v || !(v[c->nsplit_failed] = strdup(path))) {
			c->split_failed = v ? v : c->split_failed;
			break;
		}
		c->split_failed = v;
		if (!c->nsplit_failed++)
			c->split_first = r.klass;
		if (c->cfg.json) {
			r.path = path;
			r.message = msg;
			json_file(stdout, &r);
			fflush(stdout);
		}
	}
}

/*
 * --retry: a rank's failed attempts, one line each (and an "attempt"
 * event with --json): what failed, and whether it tries again.
 */
static void on_attempt(struct mj_coord *c, int rank, struct mbuf *b)
{
	const struct mj_rank_state *r = &c->r[rank];
	char msg[1024], who[256];

	snprintf(who, sizeof(who), "rank %d%s%s (to %s)", rank,
		 r->host[0] ? " on " : "", r->host, mj_coord_receiver(c, rank));
	while (b->off < b->len && !b->bad) {
		uint32_t attempt = mbuf_get_u32(b), of = mbuf_get_u32(b);
		enum xfer_fail v = (enum xfer_fail)mbuf_get_u32(b);
		bool again = mbuf_get_u8(b), heal = mbuf_get_u8(b);
		uint32_t wait = mbuf_get_u32(b);
		int code = rdcp_exit_code(v);

		mbuf_get_str(b, msg, sizeof(msg));
		if (b->bad)
			break;
		c->attempts++;
		if (again)
			log_warn("%s: attempt %u of %u failed: %s (%s, exit "
				 "%d): trying again in %.1f s, resuming",
				 who, attempt, of, msg, xfer_fail_name(v), code,
				 wait / 1000.0);
		else if (heal)
			log_err("%s: attempt %u of %u failed: %s: giving up "
				"(--retry %u)",
				who, attempt, of, msg, c->cfg.retry);
		else
			log_err("%s: attempt %u of %u failed: %s: not "
				"retrying: %s (exit %d) is not a lost peer, "
				"host "
				"or link that another attempt could get past",
				who, attempt, of, msg, xfer_fail_name(v), code);
		if (!c->cfg.json)
			continue;
		/* The rank's transport is not told: the field left out. */
		json_attempt(stdout, rank, attempt, v, code, msg, NULL, again,
			     wait);
	}
}

void mj_coord_message(struct mj_coord *c, int rank, struct mbuf *b)
{
	struct mj_rank_state *r;
	uint8_t type;

	if (rank < 0 || rank >= c->cfg.nranks)
		return;
	r = &c->r[rank];
	r->last_ms = clock_now_ms();
	r->heard = true;
	type = mbuf_get_u8(b);
	switch (type) {
	case MSG_HELLO:
		mbuf_get_str(b, r->host, sizeof(r->host));
		r->pid = mbuf_get_u32(b);
		break;
	case MSG_WORK:
		r->steal_sent = false;
		take_items(c, b, mbuf_get_u32(b));
		break;
	case MSG_REQ: {
		uint8_t want = mbuf_get_u8(b);
		uint32_t seen = mbuf_get_u32(b);

		/* A REQ that crossed a GIVE: it may not ask for a dir. */
		r->want = seen == r->gives ? want : want & ~WANT_DIR;
		break;
	}
	case MSG_STAT:
		r->bytes = mbuf_get_u64(b);
		r->files = mbuf_get_u64(b);
		r->dirs = mbuf_get_u32(b);
		break;
	case MSG_EVENTS:
		fwrite(b->p + b->off, 1, b->len - b->off, stdout);
		fflush(stdout);
		break;
	case MSG_DONE:
		on_done(c, rank, b);
		break;
	case MSG_SPLIT:
		on_split(c, b);
		break;
	case MSG_ATTEMPT:
		on_attempt(c, rank, b);
		break;
	default:
		break;
	}
}

/* One GIVE to rank i, if it wants what there is. */
static void give(struct mj_coord *c, int i)
{
	struct mj_rank_state *r = &c->r[i];
	struct mbuf b = { 0 };
	uint32_t n = 0;
	size_t count_at;

	if (r->done || r->lost || !r->want)
		return;
	if (!(r->want & WANT_DIR && c->ndirs) &&
	    !(r->want & WANT_NAMES && c->headnames < c->nnames))
		return;
	mbuf_u8(&b, MSG_GIVE);
	count_at = b.len;
	mbuf_u32(&b, 0);
	if (r->want & WANT_DIR && c->ndirs) {
		char *d = c->dirs[--c->ndirs];

		mbuf_u8(&b, ITEM_DIR);
		mbuf_u64(&b, 0);
		mbuf_u32(&b, 1);
		mbuf_str(&b, d);
		free(d);
		r->want &= ~WANT_DIR;
		n++;
	}
	if (r->want & WANT_NAMES && c->headnames < c->nnames) {
		struct mbuf *nm = &c->names[c->headnames++];

		mbuf_bytes(&b, nm->p, nm->len);
		mbuf_release(nm);
		r->want &= ~WANT_NAMES;
		n++;
	}
	if (!b.bad) {
		uint32_t be = htobe32(n);

		memcpy(b.p + count_at, &be, sizeof(be));
	}
	r->gives++;
	post(c, i, &b);
}

/* An idle rank and no directory queued: ask the busiest walker for some. */
static void steal(struct mj_coord *c)
{
	int idle = 0, best = -1;

	for (int i = 0; i < c->cfg.nranks; i++) {
		struct mj_rank_state *r = &c->r[i];

		if (r->done || r->lost)
			continue;
		if (r->want & WANT_DIR)
			idle++;
		else if (r->dirs > 1 && !r->steal_sent &&
			 (best < 0 || r->dirs > c->r[best].dirs))
			best = i;
	}
	if (idle && best >= 0) {
		struct mbuf b = { 0 };

		mbuf_u8(&b, MSG_STEAL);
		c->r[best].steal_sent = true;
		post(c, best, &b);
	}
}

/* Nobody walks, nothing is queued: every session gets the end of its list. */
static bool walk_over(const struct mj_coord *c)
{
	if (c->ndirs || c->headnames < c->nnames)
		return false;
	for (int i = 0; i < c->cfg.nranks; i++)
		if (!c->r[i].heard || !(c->r[i].want & WANT_DIR))
			return false;
	return true;
}

static void progress(struct mj_coord *c, uint64_t now)
{
	char d[32], t[32], rt[32];
	uint64_t bytes = 0, files = 0;
	double s = clock_now_s() - c->t0;

	if (!c->cfg.progress || now - c->progress_ms < 500)
		return;
	c->progress_ms = now;
	for (int i = 0; i < c->cfg.nranks; i++) {
		bytes += c->r[i].bytes;
		files += c->r[i].files;
	}
	fprintf(stderr,
		"\r\033[K%s / %s%s  %s  %" PRIu64 " of %" PRIu64
		"%s names  %d ranks",
		units_format_size(bytes, d, sizeof(d)),
		units_format_size(c->total_bytes, t, sizeof(t)),
		c->end_sent ? "" : "+",
		units_format_rate(s > 0 ? bytes / s : 0, rt, sizeof(rt)), files,
		c->total_names, c->end_sent ? "" : "+", c->cfg.nranks);
	fflush(stderr);
	c->progress_shown = true;
}

static bool all_done(const struct mj_coord *c)
{
	for (int i = 0; i < c->cfg.nranks; i++)
		if (!c->r[i].done && !c->r[i].lost)
			return false;
	return true;
}

bool mj_coord_step(struct mj_coord *c, bool cancel, int *exit_code, bool *abort)
{
	uint64_t now = clock_now_ms();
	enum xfer_fail v;
	struct xfer_stats st;

	if (cancel && !c->cancel_sent)
		fail_job(c, XFER_FAIL_CANCELED,
			 "interrupted: mpirun sends SIGTERM to every rank on "
			 "Ctrl-C and when a rank exits or is killed; what "
			 "was verified stays (run again with --resume)");
	for (int i = 0; i < c->cfg.nranks; i++) {
		struct mj_rank_state *r = &c->r[i];
		char msg[256];

		if (r->lost || now - r->last_ms < (uint64_t)c->cfg.lost_ms)
			continue;
		if (r->done && c->cancel_sent)
			continue;
		r->lost = true;
		snprintf(msg, sizeof(msg),
			 "rank %d%s%s: no word from it for %d s: its node is "
			 "down, it was killed or it hung",
			 i, r->host[0] ? " on " : "", r->host,
			 c->cfg.lost_ms / 1000);
		fail_job(c, XFER_FAIL_PEER_LOST, msg);
	}
	if (!c->cancel_sent && !c->end_sent) {
		for (int k = 0; k < c->cfg.nranks; k++)
			give(c, (c->rr + k) % c->cfg.nranks);
		c->rr = (c->rr + 1) % c->cfg.nranks;
		steal(c);
		if (walk_over(c)) {
			c->end_sent = true;
			send_all(c, MSG_END);
		}
	}
	if (now - c->tick_ms >= 500) {
		c->tick_ms = now;
		send_all(c, MSG_TICK);
	}
	progress(c, now);
	if (!all_done(c))
		return false;
	if (c->cfg.mirror && c->mirror == MIRROR_NONE) {
		v = mj_coord_verdict(c, &st);
		c->mirror = v == XFER_OK ? MIRROR_DUE : MIRROR_SKIPPED;
		if (v != XFER_OK && v != XFER_FAIL_CANCELED)
			log_warn("--delete: nothing deleted: the copy did not "
				 "succeed (%s)",
				 xfer_fail_name(v));
	}
	if (c->mirror == MIRROR_DUE || c->mirror == MIRROR_RUNNING)
		return false; /* the ranks wait, ticked, for the mirror */
	if (c->progress_shown)
		fputs("\r\033[K", stderr);
	v = mj_coord_verdict(c, &st);
	*exit_code = rdcp_exit_code(v);
	*abort = false;
	for (int i = 0; i < c->cfg.nranks; i++)
		*abort |= c->r[i].lost;
	mj_coord_summary(c, v, *exit_code);
	/*
	 * A rank lost: MPI_Finalize could wait for it, or fail inside MPI
	 * on the others; rank 0's MPI_Abort ends them all instead.
	 */
	for (int i = 1; i < c->cfg.nranks && !*abort; i++) {
		struct mbuf b = { 0 };

		mbuf_u8(&b, MSG_EXIT);
		mbuf_u32(&b, (uint32_t)*exit_code);
		post(c, i, &b);
	}
	return true;
}

bool mj_coord_mirror_due(struct mj_coord *c)
{
	if (c->mirror != MIRROR_DUE)
		return false;
	c->mirror = MIRROR_RUNNING;
	return true;
}

void mj_coord_mirror_over(struct mj_coord *c, enum xfer_fail v,
			  const struct xfer_stats *st)
{
	c->mirror_v = v;
	c->mirror_st = *st;
	c->mirror = MIRROR_OVER;
	if (v != XFER_OK && v != XFER_FAIL_MAX_DELETE && st->error[0])
		log_err("--delete: %s", st->error);
}
