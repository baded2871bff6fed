/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --split: one big regular file pushed to a running receiver as byte
 * ranges (doc/PROTOCOL.md, Ranges: rdcp-mpi's machinery) by several
 * sessions of this process, a thread each, so that one file is not held
 * to one engine thread, one ring and one node; the sink writes them into
 * one temporary and gives it its name only once every range arrived and
 * verified. The sessions meet at a gate (client_gate) after their
 * handshakes, before anything of the copy is sent: with split_auto the
 * first session connects alone and the rails it reached say how many
 * there are to be (one: it sends the whole file, as ever); once all of
 * them passed their handshakes each sends its range. One that cannot
 * start (refused by the receiver's --max-sessions or a module's, a
 * connect that fails) or does not come in time makes the first ready one
 * send the whole file and the others nothing, so no range was written.
 * The user sees one file: one start and one end (the range that placed
 * it has the whole file's digest), the progress summed, one verdict.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "transfer/client/client_int.h"
#include "transfer/session/session.h"
#include "transfer/xfer.h"
#include "util/clock.h"
#include "util/log.h"

enum split_state {
	SPLIT_WAIT,  /* sessions coming to the gate */
	SPLIT_GO,    /* every range has its session */
	SPLIT_WHOLE, /* one session sends the whole file, the others nothing */
};

struct split;

/* One session of the split, and what it reported. */
struct split_sess {
	struct split *sp;
	unsigned int idx;
	pthread_t th;
	bool started;
	struct xfer_opts o; /* the copy's, with this session's callbacks */
	struct client_gate gate;
	struct xfer_stats st;
	enum xfer_fail v;
	bool ready;    /* came through its handshake to the gate */
	bool over;     /* its thread is done */
	uint64_t done; /* bytes handed to the transport (progress) */
	/* its range's end, as its source reported it */
	bool reported;
	int status;
	enum xfer_fail klass;
	bool final, skipped;
	uint64_t sent;
	double seconds;
	const char *reason, *algorithm; /* static strings */
	char message[512];
	char digest[80];
};

struct split {
	const struct xfer_opts *o;
	pthread_mutex_t mu; /* everything below, and the user's callbacks */
	pthread_cond_t cv;
	uint64_t size;	     /* the file's, bytes */
	unsigned int k;	     /* ranges and sessions; 0: not known */
	unsigned int nstart; /* sessions started (or tried) */
	unsigned int nready;
	enum split_state state;
	int whole;	   /* SPLIT_WHOLE: the session that sends it, or -1 */
	uint32_t chunk;	   /* the ranges' alignment, bytes; 0: not made */
	char why[600];	   /* why the split fell back to one session */
	uint64_t t0_ms;	   /* when the first session began to connect */
	uint64_t until_ms; /* the gate's wait ends; 0: no session came yet */
	uint64_t wait_ms;  /* until_ms, from the first session ready */
	bool started_told; /* the file's start told the user */
	char *name;	   /* the name sent, from a report */
	uint8_t token[16];
	struct xfer_range r[XFER_SPLIT_MAX];
	struct split_sess s[XFER_SPLIT_MAX];
};

/* The chunks of a file of size bytes. */
static uint64_t chunks_of(uint64_t size, uint32_t chunk)
{
	return (size + chunk - 1) / chunk;
}

/*
 * The K ranges, chunk aligned, as even as whole chunks make them. 0, or
 * -EINVAL when the file has fewer chunks than ranges.
 */
static int make_ranges(struct split *sp, uint32_t chunk)
{
	uint64_t n = chunks_of(sp->size, chunk), at = 0;

	if (n < sp->k)
		return -EINVAL;
	for (unsigned int i = 0; i < sp->k; i++) {
		uint64_t end = (n * (i + 1) / sp->k) * (uint64_t)chunk;

		if (end > sp->size || i + 1 == sp->k)
			end = sp->size;
		sp->r[i].off = at;
		sp->r[i].len = end - at;
		sp->r[i].idx = i;
		sp->r[i].count = sp->k;
		memcpy(sp->r[i].token, sp->token, sizeof(sp->token));
		at = end;
	}
	sp->chunk = chunk;
	return 0;
}

/* Falls back to one session: the first ready one. Under mu. */
static void go_whole(struct split *sp, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void go_whole(struct split *sp, const char *fmt, ...)
{
	va_list ap;

	if (sp->state != SPLIT_WAIT)
		return;
	sp->state = SPLIT_WHOLE;
	for (unsigned int i = 0; i < sp->nstart && sp->whole < 0; i++)
		if (sp->s[i].ready && !sp->s[i].over)
			sp->whole = (int)i;
	va_start(ap, fmt);
	vsnprintf(sp->why, sizeof(sp->why), fmt, ap);
	va_end(ap);
	pthread_cond_broadcast(&sp->cv);
}

static void start(struct split *sp, unsigned int i);

/* A time wait_ms from now, for pthread_cond_timedwait. */
static struct timespec deadline(int wait_ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += wait_ms / 1000;
	t.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* Auto: one session per rail the first one reached, over RDMA. Under mu. */
static void decide(struct split *sp, struct split_sess *s,
		   const struct client_ready *info)
{
	uint64_t n = chunks_of(sp->size, info->chunk_size);

	sp->k = info->rdma ? info->rails : 1;
	if (sp->k > n)
		sp->k = (unsigned int)n;
	if (sp->k > XFER_SPLIT_MAX)
		sp->k = XFER_SPLIT_MAX;
	if (sp->k <= 1) {
		sp->k = 1;
		sp->state = SPLIT_WHOLE; /* as ever: one session */
		sp->whole = (int)s->idx;
		return;
	}
	log_info("splitting '%s' (%llu bytes) into %u ranges, one session "
		 "each (one per rail)",
		 sp->o->copy.srcs[0], (unsigned long long)sp->size, sp->k);
	while (sp->nstart < sp->k && sp->state == SPLIT_WAIT)
		start(sp, sp->nstart++);
}

/* The gate (client_gate.ready), in a session's thread. */
static int gate_ready(void *arg, const struct client_ready *info,
		      const struct xfer_range **range)
{
	struct split_sess *s = arg;
	struct split *sp = s->sp;
	const volatile sig_atomic_t *cancel = sp->o->link.cancel;
	int rc = 0;

	pthread_mutex_lock(&sp->mu);
	if (!sp->until_ms) {
		/*
		 * The others' connect and handshake take about what the
		 * first one's did (auto starts them only now): three times
		 * that, at least 1 s, at most half --timeout (the peer of a
		 * session waiting here hears nothing meanwhile).
		 */
		uint64_t took = clock_now_ms() - sp->t0_ms;
		uint64_t wait = 3 * took < 1000 ? 1000 : 3 * took;

		if (wait > (uint64_t)sp->o->link.timeout_ms / 2)
			wait = (uint64_t)sp->o->link.timeout_ms / 2;
		sp->wait_ms = wait;
		sp->until_ms = clock_now_ms() + wait;
	}
	s->ready = true;
	sp->nready++;
	if (!sp->k)
		decide(sp, s, info);
	if (sp->state == SPLIT_WAIT && !sp->chunk &&
	    make_ranges(sp, info->chunk_size))
		go_whole(sp,
			 "the file has fewer chunks of %u bytes than the %u "
			 "sessions",
			 info->chunk_size, sp->k);
	if (sp->state == SPLIT_WAIT && info->chunk_size != sp->chunk)
		go_whole(sp, "its sessions agreed on different chunk sizes");
	if (sp->state == SPLIT_WAIT && sp->nready == sp->k) {
		sp->state = SPLIT_GO;
		pthread_cond_broadcast(&sp->cv);
	}
	/* The others, each bounded by its connect and handshake: this long. */
	while (sp->state == SPLIT_WAIT && !(cancel && *cancel)) {
		struct timespec slice = deadline(50);

		if (clock_now_ms() >= sp->until_ms) {
			go_whole(sp,
				 "its other sessions were not ready %.1f s "
				 "after the first",
				 (double)sp->wait_ms / 1000);
			break;
		}
		pthread_cond_timedwait(&sp->cv, &sp->mu, &slice);
	}
	/* Fallen back before any session was ready: the first to be. */
	if (sp->state == SPLIT_WHOLE && sp->whole < 0)
		sp->whole = (int)s->idx;
	if (cancel && *cancel) {
		rc = -ECANCELED;
	} else if (sp->state == SPLIT_GO) {
		*range = &sp->r[s->idx];
		/* The copy's --bwlimit shared out. */
		if (s->o.copy.bwlimit)
			s->o.copy.bwlimit = s->o.copy.bwlimit / sp->k
						    ? s->o.copy.bwlimit / sp->k
						    : 1;
	} else if (sp->whole == (int)s->idx) {
		*range = NULL;
	} else {
		rc = -ECANCELED;
	}
	pthread_mutex_unlock(&sp->mu);
	return rc;
}

/* on_progress: the sessions' bytes summed, of the whole file. */
static void on_progress(void *arg, uint64_t done, uint64_t total,
			const char *path)
{
	struct split_sess *s = arg;
	struct split *sp = s->sp;
	const struct xfer_opts *o = sp->o;
	uint64_t sum = 0;

	pthread_mutex_lock(&sp->mu);
	s->done = done;
	for (unsigned int i = 0; i < sp->nstart; i++)
		sum += sp->s[i].done;
	if (sp->state == SPLIT_WHOLE)
		sum = done;
	else
		total = sp->size;
	if (o->copy.on_progress)
		o->copy.on_progress(o->copy.on_file_arg, sum, total, path);
	pthread_mutex_unlock(&sp->mu);
}

/*
 * on_file: a session sending the whole file tells the user as it is; a
 * range's start is the file's (the first only), its end kept for the
 * file's one report (split_report).
 */
static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct split_sess *s = arg;
	struct split *sp = s->sp;
	const struct xfer_opts *o = sp->o;

	pthread_mutex_lock(&sp->mu);
	if (sp->state != SPLIT_GO) {
		if (o->copy.on_file)
			o->copy.on_file(o->copy.on_file_arg, r);
	} else if (!r->done) {
		struct xfer_file_report f = *r;

		f.range_count = f.range_idx = 0;
		f.range_len = 0;
		f.bytes = sp->size;
		if (!sp->started_told && o->copy.on_file)
			o->copy.on_file(o->copy.on_file_arg, &f);
		sp->started_told = true;
	} else {
		s->reported = true;
		s->status = r->status;
		s->klass = r->klass;
		s->final = r->final;
		s->skipped = r->skipped;
		s->sent = r->sent;
		s->seconds = r->seconds;
		s->reason = r->reason;
		s->algorithm = r->algorithm;
		snprintf(s->message, sizeof(s->message), "%s",
			 r->message ? r->message : "");
		snprintf(s->digest, sizeof(s->digest), "%s",
			 r->digest ? r->digest : "");
		if (!sp->name && r->name)
			sp->name = strdup(r->name);
	}
	pthread_mutex_unlock(&sp->mu);
}

static void *sess_main(void *arg)
{
	struct split_sess *s = arg;
	struct split *sp = s->sp;
	struct cm_geom geom = client_geom(&s->o);
	struct cm_timeouts to = session_timeouts(&s->o);
	struct cm_conn *c;
	int rc;

	/* The first session's errors are said as they come; the others' once.
	 */
	log_quiet_errors(s->idx > 0);
	rc = cm_connect(&s->o.link.addr, &geom, &to, &c);
	if (rc)
		s->v = session_connect_fail(rc);
	else
		s->v = client_run(&s->o, c, &s->st, &s->gate);
	if (s->v != XFER_OK && !s->st.error[0])
		snprintf(s->st.error, sizeof(s->st.error), "%s",
			 log_last_error()[0] ? log_last_error()
					     : xfer_fail_name(s->v));
	pthread_mutex_lock(&sp->mu);
	s->over = true;
	if (!s->ready && sp->state == SPLIT_WAIT) {
		go_whole(sp, "session %u of %u could not start (%s)",
			 s->idx + 1, sp->k, s->st.error);
	}
	pthread_cond_broadcast(&sp->cv);
	pthread_mutex_unlock(&sp->mu);
	log_quiet_errors(false);
	return NULL;
}

/* Session s's options: the copy's, with the split's callbacks. */
static void prepare(struct split *sp, struct split_sess *s)
{
	s->o = *sp->o;
	s->o.copy.on_file = on_file;
	s->o.copy.on_progress = on_progress;
	s->o.copy.on_file_arg = s;
	s->gate.ready = gate_ready;
	s->gate.arg = s;
}

/* Starts session i in a thread of its own. Under mu. */
static void start(struct split *sp, unsigned int i)
{
	struct split_sess *s = &sp->s[i];
	int rc;

	s->sp = sp;
	s->idx = i;
	prepare(sp, s);
	rc = pthread_create(&s->th, NULL, sess_main, s);
	if (rc) {
		s->over = true;
		s->v = XFER_FAIL_RESOURCE;
		snprintf(s->st.error, sizeof(s->st.error),
			 "cannot start a thread: %s", strerror(rc));
		go_whole(sp, "%s", s->st.error);
		return;
	}
	s->started = true;
}

/*
 * Whether o asks for a split that can be done: a push of one regular
 * file of at least split_size bytes and two chunks, to a running
 * receiver, that nothing else of o rules out (a list, --delete, a dry
 * run, --sync checksum, a checksum other than CRC32: cmd/ refuses an
 * explicit --split with one). *size its size.
 */
static bool wanted(const struct xfer_opts *o, uint64_t *size)
{
	const struct xfer_copy_opts *c = &o->copy;
	struct stat st;

	if ((!c->split_auto && c->split < 2) || c->pull || c->nsrcs != 1 ||
	    c->files_from || c->dry_run || c->delete_extra ||
	    c->sync == XFER_SYNC_CHECKSUM || c->csum != XFER_CSUM_CRC32 ||
	    o->ssh.rsh || o->ssh.boot_line)
		return false;
	/* As the walk takes a SRC: a symlink named is followed. */
	if (stat(c->srcs[0], &st) || !S_ISREG(st.st_mode))
		return false;
	*size = (uint64_t)st.st_size;
	return *size >= c->split_size && *size > o->link.chunk_size;
}

/*
 * The session whose verdict is the copy's: the first (by index) that
 * failed other than as canceled, else the first that failed.
 */
static struct split_sess *primary(struct split *sp)
{
	struct split_sess *canceled = NULL;

	for (unsigned int i = 0; i < sp->nstart; i++) {
		struct split_sess *s = &sp->s[i];

		if (s->v != XFER_OK && s->v != XFER_FAIL_CANCELED)
			return s;
		if (s->v == XFER_FAIL_CANCELED && !canceled)
			canceled = s;
	}
	return canceled;
}

/*
 * The file's one report: placed (a range said final), or failed (a
 * range did: the first that failed other than as canceled). None when
 * no range got as far as its result: the session's error says it.
 */
static void split_report(struct split *sp, struct split_sess *fail)
{
	const struct xfer_opts *o = sp->o;
	struct xfer_file_report r = {
		.done = true,
		.path = o->copy.srcs[0],
		.name = sp->name,
		.kind = "file",
		.bytes = sp->size,
		.seconds = 0,
	};
	struct split_sess *fin = NULL, *bad = NULL;

	for (unsigned int i = 0; i < sp->nstart; i++) {
		struct split_sess *s = &sp->s[i];

		r.sent += s->sent;
		if (s->seconds > r.seconds)
			r.seconds = s->seconds;
		if (s->reported && s->final && !s->status)
			fin = s;
		if (s->reported && s->status &&
		    (!bad ||
		     (bad->status == -ECANCELED && s->status != -ECANCELED)))
			bad = s;
	}
	if (bad) {
		r.status = bad->status;
		r.klass = bad->klass;
		r.message = bad->message[0] ? bad->message : NULL;
		r.digest = "";
		r.algorithm = bad->algorithm;
	} else if (fin) {
		r.skipped = fin->skipped;
		r.reason = fin->reason;
		r.digest = fin->digest;
		r.algorithm = fin->algorithm;
	} else if (!fail) {
		/* Every range verified, none placed it: not a copy. */
		r.status = -EIO;
		r.klass = XFER_FAIL_REMOTE_IO;
		r.message = "the receiver verified every range but placed "
			    "none";
		r.digest = "";
		r.algorithm = "crc32";
	} else {
		return;
	}
	if (o->copy.on_file)
		o->copy.on_file(o->copy.on_file_arg, &r);
}

/*
 * The copy's numbers: the first session's (or the failing one's) link,
 * the sum of the files and bytes, one file failed at most.
 */
static enum xfer_fail split_verdict(struct split *sp, struct xfer_stats *st,
				    double t0)
{
	struct split_sess *fail = primary(sp);
	struct xfer_stats sum = { 0 };
	bool placed = false, failed = false;
	enum xfer_fail v;

	for (unsigned int i = 0; i < sp->nstart; i++) {
		struct split_sess *s = &sp->s[i];

		sum.files_ok += s->st.files_ok;
		sum.files_skipped += s->st.files_skipped;
		sum.bytes += s->st.bytes;
		sum.window_wait_s += s->st.window_wait_s;
		placed |= s->reported && s->final && !s->status;
		failed |= s->reported && s->status;
		sum.dest_named |= s->st.dest_named;
	}
	split_report(sp, fail);
	*st = fail ? fail->st : sp->s[0].st;
	st->files_ok = sum.files_ok;
	st->files_skipped = sum.files_skipped;
	st->files_failed = failed || !placed ? 1 : 0;
	st->bytes = sum.bytes;
	st->window_wait_s = sum.window_wait_s;
	st->dest_named = sum.dest_named;
	st->seconds = clock_now_s() - t0;
	st->sessions = sp->nstart;
	if (!st->transport[0]) /* the failing one never connected */
		for (unsigned int i = 0; i < sp->nstart; i++)
			if (sp->s[i].st.transport[0]) {
				memcpy(st->transport, sp->s[i].st.transport,
				       sizeof(st->transport));
				memcpy(st->device, sp->s[i].st.device,
				       sizeof(st->device));
				memcpy(st->peer, sp->s[i].st.peer,
				       sizeof(st->peer));
			}
	if (fail) {
		v = fail->v;
		/* Not the first session's, whose errors were said already. */
		if (fail->idx > 0 && v != XFER_FAIL_CANCELED)
			log_err("%s", fail->st.error);
	} else if (!placed) {
		v = XFER_FAIL_REMOTE_IO;
		st->first_fail = v;
		snprintf(st->error, sizeof(st->error),
			 "'%s': the receiver verified every range but placed "
			 "none",
			 sp->o->copy.srcs[0]);
	} else {
		v = XFER_OK;
	}
	if (v == XFER_OK && failed)
		v = XFER_FAIL_REMOTE_IO;
	if (v != XFER_OK && sp->o->link.cancel && *sp->o->link.cancel)
		v = XFER_FAIL_CANCELED;
	return v;
}

int split_copy(const struct xfer_opts *o, struct xfer_stats *st,
	       enum xfer_fail *v)
{
	double t0 = clock_now_s();
	struct split *sp;
	uint64_t size;

	if (!wanted(o, &size))
		return 1;
	sp = calloc(1, sizeof(*sp));
	if (!sp) {
		log_err("out of memory");
		*v = XFER_FAIL_RESOURCE;
		return 0;
	}
	if (getrandom(sp->token, sizeof(sp->token), 0) !=
	    (ssize_t)sizeof(sp->token)) {
		log_err("cannot get random bytes: %s", strerror(errno));
		free(sp);
		*v = XFER_FAIL_RESOURCE;
		return 0;
	}
	sp->o = o;
	sp->t0_ms = clock_now_ms();
	sp->size = size;
	sp->whole = -1;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cv, NULL);
	/* Auto: the first session's rails say how many (gate_ready). */
	sp->k = o->copy.split_auto ? 0 : o->copy.split;
	if (sp->k > XFER_SPLIT_MAX)
		sp->k = XFER_SPLIT_MAX;
	if (sp->k > chunks_of(size, o->link.chunk_size))
		sp->k = (unsigned int)chunks_of(size, o->link.chunk_size);
	if (sp->k)
		log_info("splitting '%s' (%llu bytes) into %u ranges, one "
			 "session each",
			 o->copy.srcs[0], (unsigned long long)size, sp->k);
	/*
	 * Session 0 in this thread, the others in their own: started now,
	 * or with auto by session 0's gate once it knows how many.
	 */
	sp->s[0].sp = sp;
	sp->s[0].idx = 0;
	sp->nstart = 1;
	pthread_mutex_lock(&sp->mu);
	while (sp->nstart < sp->k && sp->state == SPLIT_WAIT)
		start(sp, sp->nstart++);
	pthread_mutex_unlock(&sp->mu);
	prepare(sp, &sp->s[0]);
	sess_main(&sp->s[0]);
	for (unsigned int i = 1; i < sp->nstart; i++)
		if (sp->s[i].started)
			pthread_join(sp->s[i].th, NULL);
	if (sp->state == SPLIT_WHOLE && sp->k > 1 && sp->whole >= 0)
		log_warn("'%s' went in one session, not split over %u: %s",
			 o->copy.srcs[0], sp->k, sp->why);
	if (sp->state == SPLIT_WHOLE && sp->whole >= 0) {
		/* One session sent it all, as ever: its numbers are ours. */
		*st = sp->s[sp->whole].st;
		*v = sp->s[sp->whole].v;
		if (sp->whole > 0 && *v != XFER_OK) /* its errors were quiet */
			log_err("%s", st->error);
	} else if (sp->state == SPLIT_WAIT || sp->state == SPLIT_WHOLE) {
		/* None came to the gate: the first one's failure. */
		*st = sp->s[0].st;
		*v = sp->s[0].v;
	} else {
		*v = split_verdict(sp, st, t0);
	}
	pthread_cond_destroy(&sp->cv);
	pthread_mutex_destroy(&sp->mu);
	free(sp->name);
	free(sp);
	return 0;
}
