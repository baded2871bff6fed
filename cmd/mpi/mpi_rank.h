/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to rdcp-mpi's main (cmd/mpi/mpi_main.c, the rank's loop), its
 * session thread (cmd/mpi/mpi_session.c) and its setup (cmd/mpi/mpi_setup.c:
 * receivers, key, the base the names are beneath): one rank's state.
 */
#ifndef RDCP_MPI_RANK_H
#define RDCP_MPI_RANK_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/args.h"
#include "cmd/mpi/mpi_job.h"
#include "cmd/retry.h"
#include "util/hset.h"
#include "util/key.h"

/* What the session thread shares with the main one. */
struct shared {
	pthread_mutex_t mu;
	uint64_t bytes;	  /* moved so far (on_progress, not the last) */
	uint64_t files;	  /* entries finished */
	uint64_t fbytes;  /* the sizes of the regular files finished */
	struct mbuf text; /* for rank 0's stdout */
	struct mbuf split; /* MSG_SPLIT bodies, for rank 0 */
	uint64_t range_failed; /* failed ranges: rank 0 counts their files */
	struct mbuf attempts;  /* MSG_ATTEMPT bodies, for rank 0 */
	struct retry *rt;      /* --retry: the session's attempts, or NULL */
	/*
	 * --retry: the list's regular files and ranges done (ok or kept),
	 * by their record's key, left out when the list is replayed
	 */
	struct hset done;
	const char *base; /* the names are beneath it */
	bool json, dry_run;
};

/* One rank. */
struct rank {
	int id, n;
	struct args a;
	struct xfer_opts o;
	uint8_t key[KEY_LEN];
	char key_name[KEY_NAME_MAX + 1]; /* a named key's client, or "" */
	char base[PATH_MAX]; /* the names are beneath it */
	char farm[PATH_MAX]; /* a directory of links made for base, or "" */
	const char *srcv[1]; /* base, as the session's one SRC */
	char *dest;	     /* DEST with a '/': a directory */
	char *addr_host;     /* o.addr.host's string */
	char **tops;	     /* the SRCs' names beneath base */
	char **receivers;    /* "host:port", or over ssh "[user@]host" */
	int nrecv;
	struct mj_walk *walk;
	/* the session */
	pthread_t th;
	atomic_bool session_over;
	enum xfer_fail v;
	struct xfer_stats st;
	struct shared sh;
	int pipe_w;	    /* the session's list, or -1 once closed */
	struct mbuf feed;   /* names to write to it */
	uint64_t fed_files; /* names fed (regular files or not) */
	uint64_t fed_bytes; /* their regular files' sizes */
	uint64_t seen_bytes, seen_files; /* the session's, last seen */
	uint64_t seen_ms;		 /* when they last changed */
	double rate;			 /* the session's, bytes/s (EWMA) */
	uint64_t rate_bytes, rate_ms;	 /* its last sample */
	bool end_seen;			 /* MSG_END: close the list once fed */
	bool done_sent;			 /* MSG_DONE went up */
	uint8_t want_sent;		 /* the last REQ's, 0 after a GIVE */
	uint32_t gives;			 /* GIVE messages seen */
	uint64_t heard_ms;		 /* the coordinator was last heard */
	uint64_t stat_ms;		 /* the last MSG_STAT */
	/* --retry: the attempts, the list replayed from its start */
	struct retry rt;
	struct retry_list list;
	atomic_bool waiting; /* between two attempts: ask for no names */
	volatile sig_atomic_t *cancel;
	/* --delete, rank 0: the session that mirrors, once the copy is done */
	pthread_t del_th;
	atomic_bool del_over;
	bool del_started;
	struct xfer_opts del_o;
	char **abs_srcs; /* each SRC as base/top resolved: the mirror's SRCs */
	enum xfer_fail del_v;
	struct xfer_stats del_st;
	struct mbuf up;			 /* items found, to send up */
	uint32_t nup;
	uint64_t split;		/* --split-size in bytes, 0: never */
	bool split_given;	/* on the command line */
	int exit_code;		/* -1 until MSG_EXIT */
	struct mj_coord *coord; /* rank 0 */
};

/*
 * mpi_session.c: starts r's session thread over a new pipe (r->pipe_w,
 * the list's write end), stopped early by *cancel. 0 or an exit code.
 */
int mpi_start_session(struct rank *r, volatile sig_atomic_t *cancel);

/*
 * mpi_session.c, rank 0 with --delete: starts the one session that
 * mirrors DEST (sink_delete.c) once every rank's copy is verified, in a
 * thread of its own (r->del_over when it ends). 0 or an exit code.
 */
int mpi_start_delete(struct rank *r);

/*
 * --split-size SIZE (or =SIZE) taken out of argv (*argc shrinks) into
 * r->split. 0, or an exit code (logged).
 */
int mpi_take_split_size(struct rank *r, int *argc, char **argv);
/* The split size made a multiple of the chunk size; 0 or an exit code. */
int mpi_fix_split_size(struct rank *r);

/* rdcp-mpi --help's text. */
void mpi_usage_help(void);

/* The rank as the launcher tells it, before MPI_Init (for messages). */
int mpi_env_rank(void);

/*
 * The receivers in DEST: "h1,h2::PATH", "rdcp://h1:p1,h2:p2/PATH" or over
 * ssh "h1,h2:PATH", each list a host list ("dst[01-16]": util/hostlist.h),
 * into r->receivers; argv's DEST is rewritten to name the first (*first),
 * for args_parse to check. 0, -EINVAL (logged) or -ENOMEM.
 */
int mpi_split_receivers(struct rank *r, int argc, char **argv, char **first);

/* host[:port] or [v6][:port] of receivers[i] into o->addr: 0, -EINVAL or
 * -ENOMEM. */
int mpi_receiver_addr(struct rank *r, int i, struct xfer_opts *o);

/* The refusals args_parse does not know of: NULL, or a message. */
const char *mpi_unsupported(const struct args *a);

/* The key file, as rdcp loads it (none with --no-auth): 0 or
 * RDCP_EXIT_AUTH. */
int mpi_load_key(struct rank *r);

/*
 * The SRCs as names beneath one base (r->base, r->tops): their common
 * parent, or a directory of links to them (r->farm) when they have none.
 * 0 or an exit code.
 */
int mpi_make_base(struct rank *r);

/* Removes the farm mpi_make_base made, if any. */
void mpi_remove_farm(struct rank *r);

#endif
