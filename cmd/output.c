/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What a run of rdcp tells the user as it goes and at its end (run.h):
 * the progress line (redrawn on a terminal, a plain line now and then
 * elsewhere), a line per file (-v, --progress, --dry-run, --json), each
 * file noted for --manifest and across --retry's attempts, the summary
 * line, and at -v what the process cost. main.c installs these.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cmd/json_out.h"
#include "cmd/run.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

/* --progress to a pipe or a file: a plain line at most this often (s). */
#define PROGRESS_PLAIN_S 5.0

/* Wipes the progress line so that a normal line can be printed. */
void output_clear(struct run *run)
{
	if (run->progress_shown)
		fputs("\r\033[K", stderr);
	run->progress_shown = false;
}

/* "name  12.00 MiB / 1.00 GiB  812.3 MB/s  ETA 0:01", redrawn in place. */
void output_progress(void *arg, uint64_t done, uint64_t total, const char *path)
{
	struct run *run = arg;
	char d[32], t[32], r[32], name[128];
	double now = clock_now_s(), rate;
	uint64_t eta;

	if (!run->progress)
		return;
	/* Not a terminal (a pipe, a log file): a plain line now and then. */
	if (!run->progress_t0)
		run->progress_t0 = now;
	if (!run->progress_tty) {
		/* the first after a second: it has a rate */
		if (!run->progress_next)
			run->progress_next = now + 1.0;
		if (now < run->progress_next)
			return;
		run->progress_next = now + PROGRESS_PLAIN_S;
	}
	/* A name from the peer reaches the terminal escaped (log_escape). */
	log_escape(name, sizeof(name), path_basename(path));
	rate = now > run->progress_t0 ? done / (now - run->progress_t0) : 0;
	eta = rate > 0 && total > done ? (uint64_t)((total - done) / rate) : 0;
	if (run->progress_tty)
		fputs("\r\033[K", stderr);
	if (!total) /* sources still being listed: no total yet */
		fprintf(stderr, "%-30.30s %s  %s", name,
			units_format_size(done, d, sizeof(d)),
			units_format_rate(rate, r, sizeof(r)));
	else if (rate <= 0) /* no rate yet: no time left either */
		fprintf(stderr, "%-30.30s %s / %s  %s  ETA -:--", name,
			units_format_size(done, d, sizeof(d)),
			units_format_size(total, t, sizeof(t)),
			units_format_rate(rate, r, sizeof(r)));
	else
		fprintf(stderr, "%-30.30s %s / %s  %s  ETA %llu:%02llu", name,
			units_format_size(done, d, sizeof(d)),
			units_format_size(total, t, sizeof(t)),
			units_format_rate(rate, r, sizeof(r)),
			(unsigned long long)(eta / 60),
			(unsigned long long)(eta % 60));
	if (!run->progress_tty)
		fputc('\n', stderr);
	fflush(stderr);
	run->progress_shown = run->progress_tty;
}

/*
 * --dry-run: a line per entry on stdout, what a copy would do to it: new,
 * replace (a file or symlink there now), exists (a directory there now),
 * keep (-n/-u), failed; with --delete, delete (not in the source). Named
 * as on the receiving side: beneath DEST on a push, where it would land
 * (or is) on a pull.
 */
static void dry_line(const struct xfer_file_report *r)
{
	char name[4 * 4096];
	const char *verb = r->status		    ? "failed"
			   : r->deleted		    ? "delete"
			   : r->skipped		    ? "keep"
			   : !r->exists		    ? "new"
			   : strcmp(r->kind, "dir") ? "replace"
						    : "exists";

	log_escape(name, sizeof(name), r->name ? r->name : r->path);
	printf("%-8s %s%s\n", verb, name, strcmp(r->kind, "dir") ? "" : "/");
}

void output_file(void *arg, const struct xfer_file_report *r)
{
	struct run *run = arg;
	char sz[32], rate[32], path[4 * 4096];

	if (run->retry.max && !r->deleted) {
		/* Across attempts: each file noted once (retry.h). */
		if (retry_file(&run->retry, r) && run->man.spool) {
			struct xfer_file_report copied = *r;

			copied.skipped = false;
			manifest_note(&run->man, &copied);
		}
	} else if (run->man.spool) {
		manifest_note(&run->man, r);
	}
	if (run->o.copy.dry_run && r->done && !run->a->json) {
		dry_line(r);
		return;
	}
	if (run->a->json) {
		json_file(stdout, r);
		return;
	}
	if (run->progress && r->done) {
		/* One line per file above the progress line. */
		output_clear(run);
		log_escape(path, sizeof(path), r->path);
		fprintf(stderr, "%-40s %12s  %s\n", path,
			units_format_size(r->bytes, sz, sizeof(sz)),
			r->status    ? "FAILED"
			: r->deleted ? "deleted"
			: r->skipped ? "skipped"
				     : "ok");
		return;
	}
	if (!r->done || r->status || !log_enabled(LOG_INFO))
		return;
	if (r->deleted) {
		log_info("deleted '%s'", r->path);
		return;
	}
	log_info("%s '%s': %s in %.2f s (%s), digest %s",
		 r->skipped	    ? "kept"
		 : run->o.copy.pull ? "received"
				    : "sent",
		 r->path, units_format_size(r->bytes, sz, sizeof(sz)),
		 r->seconds,
		 units_format_rate(r->seconds > 0 ? r->bytes / r->seconds : 0,
				   rate, sizeof(rate)),
		 r->digest[0] ? r->digest : "none");
}

/*
 * The copy's last line, unless -q, once a session was set up (a failure
 * to connect has its own line): what a log of cron jobs wants to read.
 * --json's summary event carries the same numbers.
 */
void output_summary(const struct xfer_stats *st, bool dry_run, bool deleting,
		    unsigned int retries)
{
	char sz[32], rate[32], del[64] = "", ses[32] = "";
	bool dev = strcmp(st->transport, st->device);

	/* --split: the sessions one file went over */
	if (st->sessions > 1)
		snprintf(ses, sizeof(ses), " in %u sessions", st->sessions);
	if (deleting)
		snprintf(del, sizeof(del), ", %s %llu",
			 dry_run ? "would delete" : "deleted",
			 (unsigned long long)st->deleted);
	fprintf(stderr,
		"%s%llu files, %s in %.2f s (%s) over %s%s%s%s; skipped %llu, "
		"failed %llu%s, retries %u\n",
		dry_run ? "dry run, nothing copied: " : "",
		(unsigned long long)st->files_ok,
		units_format_size(st->bytes, sz, sizeof(sz)), st->seconds,
		units_format_rate(st->seconds > 0 ? st->bytes / st->seconds : 0,
				  rate, sizeof(rate)),
		st->transport, dev ? " on " : "", dev ? st->device : "", ses,
		(unsigned long long)st->files_skipped,
		(unsigned long long)st->files_failed, del, retries);
}

/* -v: what this process cost, from getrusage (also read by make bench). */
void output_usage(void)
{
	struct rusage ru;
	char rss[32];

	if (!log_enabled(LOG_INFO) || getrusage(RUSAGE_SELF, &ru))
		return;
	log_info("resources: user %.2f s, system %.2f s, peak RSS %s",
		 ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		 ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
		 units_format_size((uint64_t)ru.ru_maxrss * 1024, rss,
				   sizeof(rss)));
}
