/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the two data roles that run on an engine once the
 * handshake in session.c has agreed who sends and where to.
 */
#ifndef RDCP_SESSION_H
#define RDCP_SESSION_H

#include <stdbool.h>
#include <sys/types.h>

#include "transfer/engine.h"

/* Where the sink puts files: decided from DEST during the handshake. */
struct sink_target {
	int dirfd;	  /* O_PATH directory beneath the root */
	bool is_dir;	  /* DEST is a directory: files go inside */
	char name[256];	  /* DEST's last component when !is_dir */
	char shown[4200]; /* DEST as logged */
	enum xfer_csum csum;
	bool fsync;
	mode_t umask;
};

/* Source: send o->srcs; fills st. Returns 0 or the engine's error. */
int source_run(struct engine *e, struct xfer_stats *st);

/* Sink: receive into t. Returns 0 or the engine's error. */
int sink_run(struct engine *e, const struct sink_target *t,
	     struct xfer_stats *st);

/*
 * One session on an established connection of any transport (the verbs one
 * from cm/, or an in-memory pair in tests). The caller keeps c.
 */
enum xfer_fail session_push(const struct xfer_opts *o, struct cm_conn *c,
			    struct xfer_stats *st);
enum xfer_fail session_serve(const struct xfer_opts *o, int rootfd,
			     struct cm_conn *c);

#endif
