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
#include <unistd.h>

#include "cmd/exit_codes.h"
#include "cmd/json_out.h"
#include "cmd/mpi/mpi_rank.h"
#include "transfer/xfer.h"
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

static void *session_main(void *arg)
{
	struct rank *r = arg;

	r->v = xfer_copy(&r->o, &r->st);
	/*
	 * A failure before the session (connect) is only in the log; a
	 * session's own is in st.error, and its files' are no session's.
	 */
	if (r->v != XFER_OK && !r->st.error[0] && !r->st.transport[0])
		snprintf(r->st.error, sizeof(r->st.error), "%s",
			 log_last_error());
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
