/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to main.c, output.c and check.c: one run of rdcp, the parsed
 * command line and what main() adds to it, and what main() calls of the
 * other two.
 */
#ifndef RDCP_RUN_H
#define RDCP_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cmd/args.h"
#include "cmd/manifest.h"
#include "cmd/retry.h"
#include "transfer/xfer.h"
#include "util/key.h"

/* One run: the parsed command line and what main() adds to it. */
struct run {
	const struct args *a;
	struct xfer_opts o;  /* a->o plus the key, callbacks, cancel flag */
	bool progress;	     /* show the progress line */
	bool progress_shown; /* a progress line is on screen now */
	bool progress_tty;   /* stderr is a terminal: one line redrawn */
	double progress_t0;
	double progress_next; /* not a terminal: the next plain line's time */
	uint8_t key[KEY_LEN];
	char key_name[KEY_NAME_MAX + 1]; /* a named key's client, or "" */
	struct manifest man; /* --manifest, when man.spool */
	struct retry retry;  /* --retry: the attempts so far */
	FILE *list_file;     /* --files-from's stream */
	struct retry_list list; /* with --retry: list_file for each attempt */
};

/*
 * ---- what the run tells the user (output.c) ----
 *
 * output_progress and output_file are the copy's on_progress and on_file
 * (xfer.h), arg the struct run: the progress line; a file's line, its
 * note for --manifest and across --retry's attempts. output_clear wipes
 * the progress line so that a normal line can be printed. output_summary
 * is the copy's last line on stderr (unless -q), output_usage what this
 * process cost (-v).
 */
void output_progress(void *arg, uint64_t done, uint64_t total,
		     const char *path);
void output_file(void *arg, const struct xfer_file_report *r);
void output_clear(struct run *run);
void output_summary(const struct xfer_stats *st, bool dry_run, bool deleting,
		    unsigned int retries);
void output_usage(void);

/*
 * rdcp --check [HOST] (check.c): this host, then its receiver's modules
 * and client keys or the receiver at HOST over ssh. RDCP_EXIT_OK when
 * nothing is wrong, else RDCP_EXIT_RESOURCE.
 */
int check_run(struct run *run);

#endif
