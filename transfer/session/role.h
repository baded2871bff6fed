/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the two data roles that run on an engine once a
 * handshake (client.c, server_hello.c) has agreed who sends and where to,
 * and the parameters they take. The roles know nothing of who started
 * them.
 */
#ifndef RDCP_ROLE_H
#define RDCP_ROLE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "transfer/session/engine.h"

/* What both data roles agreed on in the handshake. */
struct session_params {
	uint32_t flags; /* enum wire_hello_flags */
	enum xfer_csum csum;
	int level;		 /* zlib level for chunks, 0: never compress */
	const uint8_t *data_key; /* AES-256-GCM key with ENCRYPT, else NULL */
	bool server;		 /* this side is the receiver daemon */
	bool pack; /* the sink takes packed slots (WIRE_FEAT_PACK) */
	bool wide; /* a push whose sink offered WIRE_FEAT_WIDE */
	/* slots released and reused in any order (WIRE_FEAT_ANY_SLOT) */
	bool any_slot;
	uint8_t sync; /* enum wire_sync: HELLO's */
	/*
	 * The sink may give entries other owners (-o/-g) and keep
	 * setuid/setgid bits: a client (a pull), rdcp --server (the ssh
	 * user's rights), a --listen receiver only with --allow-owners.
	 */
	bool owners_ok;
	/*
	 * The sink may make device nodes (--devices), where its user can: a
	 * client (a pull), rdcp --server, a --listen receiver only with
	 * --allow-devices.
	 */
	bool devices_ok;
};

/* Whether the sink answers each FILE with HAVE before its data. */
static inline bool session_asks(const struct session_params *p)
{
	return (p->flags & WIRE_HELLO_ASK) || p->sync != WIRE_SYNC_NONE;
}

/* Regular files announced and not yet answered, at most (wire.h). */
static inline unsigned int session_inflight_max(const struct session_params *p)
{
	return p->wide && session_asks(p) ? WIRE_INFLIGHT_ASK_MAX
					  : WIRE_INFLIGHT_MAX;
}

/*
 * Whether chunks are compared through SUMS/MATCH (--resume, or --sync
 * checksum): the source describes every chunk the sink asks about.
 */
static inline bool session_compares(const struct session_params *p)
{
	return (p->flags & WIRE_HELLO_RESUME) || p->sync == WIRE_SYNC_CHECKSUM;
}

/*
 * A receiver's byte limits on what the sink places (the module's quota=
 * and max-bytes=, transfer/server/quota.c); the sink calls them from
 * its engine thread and its workers alike, so they are thread-safe.
 * take: a regular file of size bytes is to be written where old bytes
 * are allocated now (0: a new name). 0, or -EDQUOT with *rule ("quota",
 * "max-bytes") and msg (one line for the client: never a path, never
 * another module's figures). give_back: a file take allowed was not
 * placed (its size and old as given to take). freed: an entry that held
 * bytes was removed (--delete).
 */
struct sink_budget {
	int (*take)(void *arg, uint64_t size, uint64_t old, const char **rule,
		    char *msg, size_t msgsz);
	void (*give_back)(void *arg, uint64_t size, uint64_t old);
	void (*freed)(void *arg, uint64_t bytes);
	void *arg;
};

/* Where the sink puts files: decided from DEST during the handshake. */
struct sink_target {
	int dirfd;	  /* O_PATH directory: DEST, or DEST's parent */
	bool is_dir;	  /* DEST is a directory: files go inside */
	char name[256];	  /* DEST's last component when !is_dir */
	char shown[4200]; /* DEST as logged */
	mode_t umask;
	/*
	 * A pull: the SRCs the client asked for, as typed. The sink takes
	 * only the entries an honest receiver sends for them (sink_want.c).
	 * NULL on a push, whose client names what it sends itself.
	 */
	const char *const *want;
	size_t nwant;
	/*
	 * A pull's --files-from (HELLO flag LIST): the names read from list
	 * (each ending in list_sep) go to the receiver, which walks them
	 * beneath the one SRC, list_base as typed; only the entries an honest
	 * walk sends for them are taken (sink_list.c). want is NULL then.
	 */
	FILE *list;
	char list_sep;
	const char *list_base;
	/* --delete: entries these rules exclude are kept; NULL: none */
	const struct filter *filter;
	/* a receiver's byte limits, or NULL: none */
	const struct sink_budget *budget;
	struct session_params p;
};

/* What the source sends. */
struct source_cfg {
	const char *const *srcs;
	size_t nsrcs;
	int rootfd;	  /* -1: local paths; else the receiver's root (pull) */
	uint64_t bwlimit; /* bytes per second, 0: no limit */
	const struct filter *filter; /* NULL: every entry walked */
	FILE *list;		     /* names beneath srcs[0], or NULL */
	char list_sep;		     /* '\n' or '\0' */
	bool list_tree;		     /* xfer_opts.files_from_tree */
	/* the one SRC (a regular file) sent as this range of it, or NULL */
	const struct xfer_range *range;
	struct session_params p;
};

/* Source: send cfg's SRCs; fills st. Returns 0 or the engine's error. */
int src_run(struct engine *e, const struct source_cfg *cfg,
	    struct xfer_stats *st);

/* Sink: receive into t. Returns 0 or the engine's error. */
int sink_run(struct engine *e, const struct sink_target *t,
	     struct xfer_stats *st);

#endif
