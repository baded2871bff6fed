/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * One rdcp-mpi rank's session: an ordinary rdcp session (xfer_copy) in a
 * thread of its own, reading the names the rank's main thread feeds it
 * through a pipe (xfer_opts.files_from), and what it shares back with
 * that thread under sh.mu: bytes moved, entries finished, their events
 * (text or --json lines for rank 0's stdout) and its failed ranges.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cmd/exit_codes.h"
#include "cmd/json_out.h"
#include "cmd/mpi/mpi_rank.h"
#include "transfer/xfer.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/hset.h"
#include "util/log.h"

static void on_progress(void *arg, uint64_t done, uint64_t total,
			const char *path)
{
	struct shared *sh = arg;

	(void)total;
	(void)path;
	pthread_mutex_lock(&sh->mu);
	sh->bytes = done;
	pthread_mutex_unlock(&sh->mu);
}

/*
 * A record of the list (walk.h, files_from_tree: "N" and the name, or
 * "R" and a range's numbers, then the name) by its key: the name's, a
 * range's index mixed in.
 */
static uint64_t rec_key(const char *name, size_t len, bool range, uint32_t idx)
{
	uint64_t h = ck_fnv1a64(name, len);

	if (range)
		h = (h ^ ((uint64_t)idx + 1)) * 0x100000001b3ull;
	return hset_key(h);
}

/* A regular file or range done: its record is not replayed. Under mu. */
static void note_done(struct shared *sh, const struct xfer_file_report *r)
{
	size_t blen = strlen(sh->base);
	const char *name = r->path;
	int rc;

	if (!strncmp(name, sh->base, blen) && name[blen] == '/')
		name += blen + 1;
	else if (r->name)
		name = r->name;
	rc = hset_add(&sh->done, rec_key(name, strlen(name), r->range_count,
					 r->range_idx));
	(void)rc; /* out of memory: replayed, and --resume keeps it */
}

static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct shared *sh = arg;
	const char *kind = r->kind ? r->kind : "file";
	char *line = NULL;
	size_t len = 0;
	FILE *f = NULL;

	if (!r->done)
		return;
	/*
	 * A split file's ranges: range_done events, and one file_done from
	 * the range that placed it (with the whole file's digest); a failed
	 * one goes to rank 0, which reports and counts its file once.
	 */
	if ((sh->json || sh->dry_run) &&
	    (!r->range_count || sh->json || (!r->status && !r->range_idx)))
		f = open_memstream(&line, &len);
	if (f && sh->json) {
		json_file(f, r);
	} else if (f) {
		char name[4 * 4096];
		const char *verb = r->status		 ? "failed"
				   : r->skipped		 ? "keep"
				   : !r->exists		 ? "new"
				   : strcmp(kind, "dir") ? "replace"
							 : "exists";

		log_escape(name, sizeof(name), r->name ? r->name : r->path);
		fprintf(f, "%-8s %s%s\n", verb, name,
			strcmp(kind, "dir") ? "" : "/");
	}
	if (f)
		fclose(f);
	pthread_mutex_lock(&sh->mu);
	if (sh->rt && !r->deleted)
		retry_file(sh->rt, r); /* across attempts (retry.h) */
	if (sh->rt && !r->status && !r->deleted && !strcmp(kind, "file"))
		note_done(sh, r);
	if (r->range_count && r->status) {
		mbuf_str(&sh->split, r->path);
		mbuf_u32(&sh->split, (uint32_t)r->klass);
		mbuf_str(&sh->split, r->message ? r->message : "failed");
		sh->range_failed++;
	}
	sh->files++;
	if (!strcmp(kind, "file"))
		sh->fbytes += r->range_count ? r->range_len : r->bytes;
	if (line)
		mbuf_bytes(&sh->text, line, len);
	pthread_mutex_unlock(&sh->mu);
	free(line);
	if (!sh->json && !sh->dry_run && !r->status && log_enabled(LOG_INFO) &&
	    r->range_count && !r->final)
		log_info("sent range %u of %u of '%s'", r->range_idx + 1,
			 r->range_count, r->path);
	else if (!sh->json && !sh->dry_run && !r->status &&
		 log_enabled(LOG_INFO))
		log_info("%s '%s': digest %s", r->skipped ? "kept" : "sent",
			 r->path, r->digest[0] ? r->digest : "none");
}

/*
 * One attempt's end, told to rank 0 (MSG_ATTEMPT), which says it in one
 * line: the attempt, its verdict, whether another follows and when.
 */
static void tell_attempt(struct rank *r, bool again, unsigned int wait,
			 const char *why)
{
	pthread_mutex_lock(&r->sh.mu);
	mbuf_u32(&r->sh.attempts, r->rt.attempt);
	mbuf_u32(&r->sh.attempts, r->rt.max + 1);
	mbuf_u32(&r->sh.attempts, (uint32_t)r->v);
	mbuf_u8(&r->sh.attempts, again);
	mbuf_u8(&r->sh.attempts, retry_is_transient(&r->rt, r->v));
	mbuf_u32(&r->sh.attempts, wait);
	mbuf_str(&r->sh.attempts, why);
	pthread_mutex_unlock(&r->sh.mu);
}

/*
 * The wait between two attempts, in slices: a cancel (a signal, rank 0's
 * CANCEL) ends it within 50 ms. -EINTR when it did.
 */
static int wait_attempt(struct rank *r, unsigned int ms)
{
	struct timespec slice = { .tv_nsec = 50 * 1000000L };

	for (unsigned int t = 0; t < ms; t += 50) {
		if (*r->cancel)
			return -EINTR;
		nanosleep(&slice, NULL);
	}
	return *r->cancel ? -EINTR : 0;
}

/*
 * After a failed attempt: whether to try again (retry.h: what may heal,
 * attempts left), and after how long: the wait doubles with each attempt
 * in a row that could not connect, one that connected starts it over.
 */
static bool try_again(struct rank *r, unsigned int *wait)
{
	struct retry *rt = &r->rt;
	uint32_t rnd;

	rt->start_may_heal = r->st.start_may_heal;
	if (*r->cancel || r->v == XFER_FAIL_CANCELED ||
	    !retry_is_transient(rt, r->v) || rt->attempt > rt->max)
		return false;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = UINT32_MAX / 2;
	rt->unconnected = r->st.transport[0] ? 1 : rt->unconnected + 1;
	*wait = retry_wait_ms(rt, rt->unconnected, rnd);
	return true;
}

/*
 * Between two attempts: the list's spool (what the session read of the
 * pipe) rewritten without the records of regular files and ranges an
 * attempt finished, so the next one reads only what was cut off or
 * failed, and directories (whose -p times its placements apply), before
 * it reads on from the pipe. Left as it is when anything fails: the next
 * attempt then reads it all, and --resume keeps what is done.
 */
static void drop_done(struct rank *r)
{
	struct retry_list *l = &r->list;
	FILE *in, *out;
	char *rec = NULL;
	size_t cap = 0;
	uint64_t at = 0;
	ssize_t n;
	int fd;

	if (!l->spool || (fd = dup(fileno(l->spool))) < 0)
		return;
	in = fdopen(fd, "r");
	out = tmpfile();
	if (!in || !out || fseeko(in, 0, SEEK_SET)) {
		if (in)
			fclose(in);
		else
			close(fd);
		if (out)
			fclose(out);
		return;
	}
	pthread_mutex_lock(&r->sh.mu);
	while (at < l->len && (n = getdelim(&rec, &cap, '\0', in)) > 0) {
		const char *name = rec + 1;
		uint32_t idx = 0;
		bool range = rec[0] == 'R';

		at += (uint64_t)n;
		/* "R" off len idx count token name */
		for (int sp = 0; range && sp < 5 && name; sp++) {
			if (sp == 2)
				idx = (uint32_t)strtoul(name, NULL, 10);
			name = strchr(name, ' ');
			name = name ? name + 1 : NULL;
		}
		if (name && (rec[0] == 'N' || range) &&
		    hset_has(&r->sh.done,
			     rec_key(name, strlen(name), range, idx)))
			continue;
		fwrite(rec, 1, (size_t)n, out);
	}
	pthread_mutex_unlock(&r->sh.mu);
	free(rec);
	fclose(in);
	if (fflush(out) || ferror(out)) {
		fclose(out);
		return;
	}
	fclose(l->spool);
	l->spool = out;
	l->len = (uint64_t)ftello(out);
}

/* A later attempt's numbers added to the earlier ones' (acc). */
static void add_stats(struct xfer_stats *acc, const struct xfer_stats *st)
{
	acc->files_ok += st->files_ok;
	acc->files_skipped += st->files_skipped;
	acc->files_packed += st->files_packed;
	acc->bytes += st->bytes;
}

/*
 * The rank's session: one attempt, or with --retry as many as may help,
 * each reading the list from its start (retry_list: what earlier attempts
 * read, less what they finished: drop_done, then on from the pipe) with
 * --resume's semantics, so that what an attempt was cut off in is
 * finished from its verified chunks. The main thread goes on meanwhile:
 * rank 0 hears the rank, and it asks for no names while it waits
 * (r->waiting).
 */
static void *session_main(void *arg)
{
	struct rank *r = arg;
	struct xfer_stats acc = { 0 };
	double t0 = clock_now_s();
	unsigned int wait = 0;

	for (;;) {
		bool again;

		if (r->rt.attempt)
			drop_done(r);
		retry_attempt_begin(&r->rt);
		memset(&r->st, 0, sizeof(r->st));
		if (r->rt.max) {
			r->o.copy.files_from = retry_list_stream(&r->list);
			if (!r->o.copy.files_from) {
				r->v = XFER_FAIL_LOCAL_IO;
				break;
			}
		}
		/*
		 * Rank 0 says each attempt in one line (MSG_ATTEMPT): another
		 * rank holds its session's errors back meanwhile, as rdcp
		 * does. Not rank 0, whose coordinator logs as it goes.
		 */
		if (r->rt.max && r->id)
			log_hold();
		r->v = xfer_copy(&r->o, &r->st);
		/*
		 * A failure before the session (connect) is only in the log;
		 * a session's own is in st.error, and its files' are no
		 * session's.
		 */
		if (r->v != XFER_OK && !r->st.error[0] && !r->st.transport[0])
			snprintf(r->st.error, sizeof(r->st.error), "%s",
				 log_last_error());
		if (r->rt.max) {
			/* Each attempt did its own files: the sum. */
			add_stats(&acc, &r->st);
			r->st.files_ok = acc.files_ok;
			r->st.files_skipped = acc.files_skipped;
			r->st.files_packed = acc.files_packed;
			r->st.bytes = acc.bytes;
			r->st.seconds = clock_now_s() - t0;
		}
		if (!r->rt.max || r->v == XFER_OK) {
			if (r->rt.max && r->id)
				log_release(true);
			break;
		}
		if (r->v != XFER_OK && *r->cancel)
			r->v = XFER_FAIL_CANCELED;
		if (r->st.dest_named)
			r->o.copy.dest_named = true;
		again = try_again(r, &wait);
		if (r->id) /* a last attempt's errors stay, as they were */
			log_release(!again || log_enabled(LOG_INFO));
		if (r->v != XFER_FAIL_CANCELED)
			tell_attempt(r, again, wait,
				     r->st.error[0] ? r->st.error
						    : xfer_fail_name(r->v));
		if (!again)
			break;
		atomic_store(&r->waiting, true);
		if (wait_attempt(r, wait)) {
			r->v = XFER_FAIL_CANCELED;
			snprintf(r->st.error, sizeof(r->st.error),
				 "interrupted while waiting to try again "
				 "(what was copied stays for --resume)");
		}
		atomic_store(&r->waiting, false);
		if (r->v == XFER_FAIL_CANCELED)
			break;
	}
	atomic_store(&r->session_over, true);
	return NULL;
}

int mpi_start_session(struct rank *r, volatile sig_atomic_t *cancel)
{
	int fds[2];
	FILE *list;
	int rc;

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK)) {
		log_err("cannot make a pipe: %s", strerror(errno));
		return RDCP_EXIT_RESOURCE;
	}
	fcntl(fds[1], F_SETPIPE_SZ, 1 << 20); /* a bigger one if allowed */
	list = fdopen(fds[0], "r");
	if (!list) {
		close(fds[0]);
		close(fds[1]);
		return RDCP_EXIT_RESOURCE;
	}
	r->pipe_w = fds[1];
	r->o.copy.files_from = list;
	r->cancel = cancel;
	/* Mirroring is one session's, rank 0's, after the copy. */
	r->o.copy.delete_extra = false;
	if (r->a.retry) {
		retry_init(&r->rt, r->a.retry, r->a.retry_wait_ms);
		r->sh.rt = &r->rt;
		r->sh.base = r->base;
		/* O_NONBLOCK: read as it is (no thread), names NUL-ended */
		if (retry_list_init(&r->list, list, '\0'))
			return RDCP_EXIT_LOCAL_IO;
	}
	r->o.copy.files_from_tree = true;
	/* The walk is ours: a directory listed is sent as itself only. */
	r->o.copy.recursive = false;
	r->o.copy.from0 = true;
	r->srcv[0] = r->base;
	r->o.copy.srcs = r->srcv;
	r->o.copy.nsrcs = 1;
	r->o.link.cancel = cancel;
	r->o.copy.on_file = on_file;
	r->o.copy.on_progress = on_progress;
	r->o.copy.on_file_arg = &r->sh;
	rc = pthread_create(&r->th, NULL, session_main, r);
	if (rc) {
		log_err("cannot start a thread: %s", strerror(rc));
		return RDCP_EXIT_RESOURCE;
	}
	return 0;
}

/*
 * The mirror's reports: only what was deleted (or would be, or could not
 * be) and what failed; the files it found there already are the copy's.
 */
static void on_delete_file(void *arg, const struct xfer_file_report *rep)
{
	struct rank *r = arg;
	char name[4 * 4096];

	if (!rep->done || (!rep->deleted && !rep->status))
		return;
	if (r->a.json) {
		json_file(stdout, rep);
		fflush(stdout);
		return;
	}
	log_escape(name, sizeof(name), rep->name ? rep->name : rep->path);
	if (r->o.copy.dry_run) {
		printf("%-8s %s%s\n", rep->status ? "failed" : "delete", name,
		       rep->kind && !strcmp(rep->kind, "dir") ? "/" : "");
		fflush(stdout);
	} else if (rep->deleted && !rep->status) {
		log_info("deleted '%s'", name);
	}
}

static void *delete_main(void *arg)
{
	struct rank *r = arg;

	r->del_v = xfer_copy(&r->del_o, &r->del_st);
	if (r->del_v != XFER_OK && !r->del_st.error[0])
		snprintf(r->del_st.error, sizeof(r->del_st.error), "%s",
			 log_last_error()[0] ? log_last_error()
					     : xfer_fail_name(r->del_v));
	atomic_store(&r->del_over, true);
	return NULL;
}

/*
 * --delete: one more session, rank 0's, to the first receiver (the
 * receivers share one file system: rdcp-mpi(1)), that walks the SRCs
 * alone, as rdcp -r does, and announces every entry, keeping whatever
 * is there (--sync exists: the copy was verified), so that the sink's
 * --delete (sink_delete.c) lists DEST once and removes what was not
 * announced: the receiver's machinery, its rules (excluded entries kept,
 * no symlink followed, --max-delete, --dry-run), over the protocol as is.
 */
int mpi_start_delete(struct rank *r)
{
	struct xfer_opts *o = &r->del_o;
	int rc;

	*o = r->o;
	o->copy = r->a.o.copy;
	o->copy.dest = r->dest;
	o->copy.srcs = (const char *const *)r->abs_srcs;
	o->copy.files_from = NULL;
	o->copy.files_from_tree = false;
	o->copy.from0 = false;
	o->copy.resume = false;
	o->copy.no_clobber = false;
	o->copy.update = false;
	o->copy.sync = XFER_SYNC_EXISTS;
	o->copy.delete_extra = true;
	o->copy.dest_named = false;
	o->copy.on_file = on_delete_file;
	o->copy.on_progress = NULL;
	o->copy.on_file_arg = r;
	o->link.cancel = r->cancel;
	rc = pthread_create(&r->del_th, NULL, delete_main, r);
	if (rc) {
		log_err("cannot start a thread: %s", strerror(rc));
		return RDCP_EXIT_RESOURCE;
	}
	r->del_started = true;
	return 0;
}
