/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The protocol engine's public face, the only transfer/ header cmd/ uses.
 * cmd/ fills a const struct xfer_opts from argv; the engine never sees
 * argv, never exits and never prints anything but log lines. Each entry
 * point returns an enum xfer_fail verdict that cmd/ maps to an exit code.
 */
#ifndef RDCP_XFER_H
#define RDCP_XFER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm/cm.h"
#include "util/hugemem.h"

struct filter; /* util/filter.h */

/* What went wrong, coarsely: one exit code each (cmd/exit_codes.h). */
enum xfer_fail {
	XFER_OK = 0,
	XFER_FAIL_INTERNAL,  /* a bug or an impossible state */
	XFER_FAIL_USAGE,     /* bad arguments found late (e.g. DEST) */
	XFER_FAIL_CONNECT,   /* could not connect */
	XFER_FAIL_AUTH,	     /* reserved: authentication failed */
	XFER_FAIL_PROTOCOL,  /* peer broke the protocol or version */
	XFER_FAIL_LOCAL_IO,  /* a local file could not be read/written */
	XFER_FAIL_REMOTE_IO, /* the peer could not write/read a file */
	XFER_FAIL_VERIFY,    /* a checksum did not match */
	XFER_FAIL_PARTIAL,   /* some files copied, some failed */
	XFER_FAIL_RESOURCE,  /* memory, memlock, RDMA device resources */
	XFER_FAIL_PEER_LOST, /* the peer or the link went away mid-session */
	XFER_FAIL_CANCELED,  /* SIGINT/SIGTERM */
	XFER_FAIL_REMOTE_START, /* ssh failed, or no usable rdcp there */
	/* --max-delete: more entries would have been deleted, none was */
	XFER_FAIL_MAX_DELETE,
};

enum xfer_csum {
	XFER_CSUM_CRC32 = 1,
	XFER_CSUM_SHA256 = 2,
	XFER_CSUM_NONE = 0
};
/*
 * --sync LEVEL: which files already at DEST are kept as they are (the
 * values of wire_hello.h's enum wire_sync, which travels in HELLO).
 */
enum xfer_sync {
	XFER_SYNC_NONE = 0,	/* copy everything */
	XFER_SYNC_EXISTS = 1,	/* keep what exists (Globus "exists") */
	XFER_SYNC_SIZE = 2,	/* ... with the same size */
	XFER_SYNC_MTIME = 3,	/* ... and mtime: rsync's quick check */
	XFER_SYNC_CHECKSUM = 4, /* ... whose every chunk matches */
};
enum xfer_poll {
	XFER_POLL_ADAPTIVE = 0,
	XFER_POLL_BUSY,
	XFER_POLL_EVENT
};
/* O_DIRECT for file data: large files where it works, always, never. */
enum xfer_direct {
	XFER_DIRECT_AUTO = 0,
	XFER_DIRECT_ON,
	XFER_DIRECT_OFF
};

/* Where a session's memory and threads go (--numa). */
enum xfer_numa {
	XFER_NUMA_AUTO = 0, /* the NUMA node of the device, when known */
	XFER_NUMA_OFF,	    /* nowhere in particular, threads not pinned */
	XFER_NUMA_NODE,	    /* xfer_opts.numa_node */
};

/* One file started (done = false) or finished, for machine output. */
struct xfer_file_report {
	bool done;
	const char *path; /* local path: the source, or where it landed */
	const char *name; /* a push: the name sent (beneath DEST), else NULL */
	const char *kind; /* "file", "dir" or "symlink" */
	uint64_t bytes;	  /* the file's size */
	uint64_t sent;	  /* bytes that crossed the link (done only) */
	double seconds;
	int status;	       /* 0 or negative errno */
	enum xfer_fail klass;  /* the verdict on this file */
	const char *message;   /* why it failed, or NULL */
	/* a receiver's rule that refused it ("quota", "max-bytes"), or NULL */
	const char *rule;
	bool skipped;	       /* not copied: --no-clobber, --update, resume */
	/*
	 * With skipped: the check that keeps files, of those the run asked
	 * for: "no-clobber", else --sync's level ("exists", "size", "mtime",
	 * "checksum"), else "update", else "resume".
	 */
	const char *reason;
	bool dry;	       /* --dry-run: would be copied (not skipped) */
	bool exists;	       /* --dry-run: DEST has that name already */
	const char *digest;    /* hex of the verified digest, or "" */
	const char *algorithm; /* "crc32", "sha256" or "none" */
	/*
	 * --delete: an entry of DEST the source did not have, removed (or
	 * with dry, would be); path: where it was (a push: beneath DEST).
	 */
	bool deleted;
	/*
	 * A byte range of a split file (rdcp-mpi): range_idx of range_count
	 * (0: the whole file), range_len bytes (bytes: the same, but for the
	 * final one, whose session placed the file: the file's size, and
	 * digest the whole file's).
	 */
	uint32_t range_count, range_idx;
	uint64_t range_len;
	bool final;
};

/*
 * A byte range of a regular file (rdcp-mpi's split): [off, off + len),
 * range idx of count, all ranges of one split sharing token.
 */
struct xfer_range {
	uint64_t off, len; /* bytes */
	uint32_t idx, count;
	uint8_t token[16];
};

/*
 * A files_from_tree list's range record, made in out: "R", then offset,
 * length, index, count (decimal) and the token (32 hex digits), each
 * followed by one space, then the name (a name's record is "N" and the
 * name). Returns its length (without a NUL), or -ENAMETOOLONG when it
 * does not fit in cap.
 */
int xfer_list_range(char *out, size_t cap, const struct xfer_range *r,
		    const char *name) __attribute__((warn_unused_result));

/* The link, both sides: the address, the ring's geometry, the resources. */
#define XFER_IO_DEPTH_OFF 0xffffffffu

struct xfer_link_opts {
	struct cm_addr addr;  /* connect to / listen on */
	/*
	 * --device a,b (rails, doc/PROTOCOL.md "Rails"): the whole list (addr.device
	 * is its first name, lane 0's on a client); NULL with one device.
	 */
	const char *rail_devices;
	uint32_t chunk_size;  /* payload bytes per slot (power of two) */
	uint16_t window;      /* ring slots, 0: sized to the link */
	/*
	 * --streams: lanes (RC QPs or TCP connections) per session, 0 the
	 * default (session_streams()); a receiver's is its limit (0: 16).
	 */
	unsigned int streams;
	unsigned int workers; /* checksum/disk threads, 0: from the node's
			       * CPUs (numa_workers_for) */
	/*
	 * --io-depth: the sink's O_DIRECT writes in flight per session
	 * through an io_uring (util/workq.h), at most the window's slots;
	 * 0: as many as it has slots; XFER_IO_DEPTH_OFF: none, each worker
	 * writes its own chunk (at most --workers in flight).
	 */
	unsigned int io_depth;
	enum xfer_numa numa;  /* ring, staging and threads: on which node */
	int numa_node;	      /* with XFER_NUMA_NODE */
	/*
	 * Ring and staging pages (util/hugemem.h), process-wide: the first
	 * session sets it for every later one (cmd/ gives all the same).
	 */
	enum hugemem_mode hugepages;
	enum xfer_poll poll;
	/*
	 * O_DIRECT for file data (transfer/fs/direct.h). A client's travels in
	 * HELLO to the other side; a receiver's own applies to sessions
	 * whose client left it on auto.
	 */
	enum xfer_direct direct;
	int timeout_ms;			     /* peer silence before giving up */
	int connect_timeout_ms;		     /* resolve + connect */
	const volatile sig_atomic_t *cancel; /* set by a signal handler */
	/*
	 * Pre-shared key (32 bytes) for mutual HMAC-SHA256 authentication,
	 * or NULL: a receiver without one lets anybody in (cmd/ allows that
	 * only with --no-auth); a sender without one talks only to such a
	 * receiver, and a sender with one never does.
	 */
	const uint8_t *key;
	/*
	 * The name of key's client (util/key.h: a named key's second line),
	 * sent in HELLO for the receiver to pick that client's key; NULL or
	 * "" for the site's one key.
	 */
	const char *client_name;
};

/* The copy a client asks for: what, where, how files are checked and kept. */
struct xfer_copy_opts {
	bool pull; /* srcs are on the receiver, dest is local */
	enum xfer_csum csum;
	bool fsync;
	bool recursive;	  /* -r: directory trees */
	bool preserve;	  /* -p: exact mode, atime and mtime */
	bool owner;	  /* -o: keep owners (by name, else the number) */
	bool group;	  /* -g: keep groups */
	bool numeric_ids; /* --numeric-ids: owners by number only */
	bool xattrs;	  /* -X: extended attributes */
	bool acls;	  /* -A: POSIX ACLs */
	bool hard_links;  /* -H: hard links within the copy kept */
	bool devices;	  /* --devices (-D): device nodes re-created */
	bool specials;	  /* --specials (-D): FIFOs and sockets */
	bool resume;	  /* reuse what a verified earlier attempt left */
	bool no_clobber;  /* never replace an existing file */
	bool update;	  /* replace only files older than the source */
	enum xfer_sync sync; /* --sync, -a: keep files that pass the check */
	bool sparse;	  /* all-zero chunks become holes */
	bool dry_run;	  /* ask the receiver, report, write nothing */
	bool encrypt;	  /* AES-256-GCM per chunk (needs key) */
	int compress;	  /* zlib level 1-9, 0: off */
	uint64_t bwlimit; /* bytes per second the data source sends, 0: any;
			   * a receiver's caps the pulls it serves too */
	const char *dest; /* push: relative to the receiver's root */
	const char *const *srcs; /* pull: relative to the receiver's root */
	size_t nsrcs;
	/*
	 * DEST is the copy of the one SRC even when a directory is there
	 * now: an earlier attempt made it so (xfer_stats.dest_named; --retry
	 * sets it, so that every attempt lands where the first did).
	 */
	bool dest_named;
	/*
	 * --include/--exclude rules, or NULL: applied by the side that walks
	 * (this one on a push, the receiver on a pull, sent in the HELLO).
	 */
	const struct filter *filter;
	/*
	 * --files-from, push only: names read from this stream as the copy
	 * goes, each beneath srcs[0] (nsrcs is 1), separated by '\0' with
	 * from0, else by '\n'. NULL: the SRCs are srcs. A stream whose fd is
	 * non-blocking may have nothing to read for a while: the session
	 * waits (keeping the peer's timeout at bay) and reads again; its
	 * writer writes whole names, at most PIPE_BUF bytes a write.
	 */
	FILE *files_from;
	bool from0;
	/*
	 * files_from names entries of a tree another walk listed (rdcp-mpi's
	 * distributed walk): a name with a '/' is taken as -r takes what it
	 * finds inside a tree (a symlink copied as a link, a device or FIFO
	 * skipped with a warning); a name without one is a SRC as named.
	 * Each record starts with its kind: 'N' a name, 'R' a byte range of
	 * one (xfer_list_range).
	 */
	bool files_from_tree;
	/*
	 * --delete (with recursive): once all is verified, remove from the
	 * directories sent what the source did not have; --max-delete: if
	 * more than max_delete entries would go, none (UINT64_MAX: any).
	 */
	bool delete_extra;
	uint64_t max_delete;
	/*
	 * --split: a push of one regular file of at least split_size bytes
	 * to a running receiver goes as split byte ranges (doc/PROTOCOL.md,
	 * Ranges), one session each, in threads of this process
	 * (transfer/client/split.c); split: that many sessions (2 to
	 * XFER_SPLIT_MAX; 0 or 1: one session, as ever), or with split_auto
	 * as many as the first session's rails.
	 */
	bool split_auto;
	unsigned int split;
	uint64_t split_size; /* bytes */
	void (*on_file)(void *arg, const struct xfer_file_report *r);
	void *on_file_arg;
	/*
	 * Called from the engine thread at most every 250 ms while data
	 * moves: bytes handed to the transport so far, of the sources' total
	 * size (holes included), and the file being sent.
	 */
	void (*on_progress)(void *arg, uint64_t done, uint64_t total,
			    const char *path);
};

/* --split: the most sessions one file is split over. */
#define XFER_SPLIT_MAX 16u
/* --split-size's default: 1 GiB (rdcp(1), "--split"). */
#define XFER_SPLIT_SIZE (1ull << 30)

/* A receiver: its root, its limits, how it stops. */
struct xfer_serve_opts {
	/*
	 * Receiver: set by a signal handler (SIGTERM) to take no new
	 * sessions and let the running ones finish; cmd/ sets *cancel when
	 * they may run no longer (XFER_STOP_GRACE_S later). A session a
	 * receiver's cancel ends tells its client the receiver is going
	 * away (-ESHUTDOWN): the client's --retry tries again.
	 */
	const volatile sig_atomic_t *stop;
	/*
	 * Receiver: refuse sessions without encrypt (XFER_FAIL_AUTH). The
	 * client's is checked by cmd/: it must set encrypt too.
	 */
	bool require_encrypt;
	const char *root;
	/*
	 * --allow-owners: a --listen receiver lets -o/-g give files other
	 * owners (and keep setuid/setgid bits); without it they stay its
	 * own. rdcp --server (over ssh) has the ssh user's rights: always.
	 */
	bool allow_owners;
	/*
	 * --allow-devices: a --listen receiver makes the device nodes a
	 * client's --devices sends (where it runs as root); without it
	 * none. rdcp --server has the ssh user's rights: always.
	 */
	bool allow_devices;
	bool once;
	unsigned int max_sessions;
	/*
	 * --audit-log: JSON lines appended here (NULL: none), reopened when
	 * *hup (counted by cmd/'s SIGHUP handler; NULL: never) changes.
	 * --metrics: "PORT", "HOST:PORT" or "[V6]:PORT" to serve GET
	 * /metrics on (NULL: off).
	 */
	const char *audit_log;
	/* --json with --listen: the audit log's JSON lines on stdout too */
	bool json_events;
	const volatile sig_atomic_t *hup;
	const char *metrics_addr;
	/*
	 * --clients DIR: one key file per named client (NAME.key, util/
	 * key_dir.h); --modules FILE: the modules (util/modconf.h), each
	 * path with who may read, write, from where. NULL: none (the site's
	 * key, every path beneath root). Both read at the start and again
	 * whenever *reload is set (SIGHUP), which the receiver clears.
	 */
	const char *clients_dir;
	const char *modules_file;
	volatile sig_atomic_t *reload;
};

/* ssh mode: the remote shell that starts rdcp --server, and its bootstrap. */
struct xfer_ssh_opts {
	/*
	 * Client over ssh (transfer/client/remote.c): the remote shell command
	 * ("ssh -p 2222"; NULL: addr names a receiver already running), run
	 * with rsh_host ("user@host") and the remote program rdcp_path
	 * ("rdcp"); it starts rdcp --server there, whose bootstrap line says
	 * where to connect and the one-time key. batch: BatchMode (no
	 * prompt). rdma_addr: connect there, not where the line says.
	 * boot_line: such a line got another way (the local end of a remote
	 * to remote copy passes it on): no remote shell then.
	 */
	const char *rsh;
	const char *rsh_host;
	const char *rdcp_path;
	bool batch;
	const char *rdma_addr;
	const char *boot_line;
	/*
	 * rdcp --server, started over ssh: a one-time key made here, a port
	 * of port_lo..port_hi (0: 49152..65535), the bootstrap line handed
	 * to on_boot once listening (via: the address ssh reached this host
	 * by, for it); one authenticated session, then the end (connections
	 * that fail to authenticate do not count); paths as the user typed
	 * them, relative to the current directory or absolute, no root.
	 */
	bool ssh_server;
	uint16_t port_lo, port_hi;
	const char *via;
	void (*on_boot)(void *arg, const char *line);
	void *on_boot_arg;
};

/*
 * What a copy or a receiver is told, in the parts that travel together: each
 * part goes to the code that needs it (the link to cm/ and the session, the
 * copy to the source and the sink, serve to the listener, ssh to remote.c).
 */
struct xfer_opts {
	struct xfer_link_opts link;
	struct xfer_copy_opts copy;
	struct xfer_serve_opts serve;
	struct xfer_ssh_opts ssh;
};
;

/* How long a stopping receiver lets its running sessions go on (s). */
#define XFER_STOP_GRACE_S 20

struct xfer_stats {
	uint64_t files_ok;
	uint64_t files_failed;
	uint64_t files_skipped; /* counted in files_ok too */
	uint64_t files_packed;	/* files_ok that travelled in packed slots */
	uint64_t bytes;
	uint64_t deleted;    /* --delete: entries removed (dry run: would be) */
	bool max_delete_hit; /* --max-delete stopped every deletion */
	double seconds;
	/*
	 * The source's time with a chunk ready and no ring slot to put it
	 * in: the sink's window held it back (s; 0 on the sink's side).
	 */
	double window_wait_s;
	enum xfer_fail first_fail; /* verdict on the first failed file */
	char transport[16];	   /* "rdma" or "tcp" */
	unsigned int streams;	   /* lanes the session ran on */
	unsigned int sessions;	   /* --split: sessions the copy ran on */
	char device[64];
	int numa_node;		/* where the session ran, -1: anywhere */
	unsigned int workers;	/* its worker threads */
	char pages[32];		/* its ring's or staging's pages, or "" */
	char peer[64];
	char error[600]; /* the session's failure in one line, or "" */
	int cause;	 /* its -errno (ENODEV: the RDMA device went), or 0 */
	/*
	 * XFER_FAIL_REMOTE_START that another attempt may get past: ssh
	 * could not reach the host (rebooting, sshd restarting), or the
	 * remote rdcp did not answer in time.
	 */
	bool start_may_heal;
	/*
	 * The sink took DEST as the new name of the one top entry (cp -r's
	 * "DEST does not exist": DEST is the copy), not as a directory to
	 * put it in (RING's target on a push).
	 */
	bool dest_named;
};

/* Defaults for every field (the CLI starts from these). */
void xfer_opts_init(struct xfer_opts *o);

/*
 * Client: copy o->srcs into o->dest, to the receiver at o->addr (push) or
 * from it (o->pull).
 */
enum xfer_fail xfer_copy(const struct xfer_opts *o, struct xfer_stats *st);

/*
 * A copy between two other hosts, both ends started over o->rsh: rdcp
 * --server on dest_host, then on o->rsh_host the rdcp command far_argv
 * (its arguments: --boot-stdin and the copy's), given the first's
 * bootstrap line on its stdin, so that the data goes from one to the
 * other directly. Its stdout and stderr are relayed here as they come.
 * Returns its exit status, -1 (logged) when an end could not be
 * started, or -2 (said: "interrupted") when *o->cancel ended it: a
 * Ctrl-C on a terminal reaches ssh too, whose end is then no failure to
 * explain.
 */
int xfer_copy_between(const struct xfer_opts *o, const char *dest_host,
		      const char *const *far_argv);

/* Bytes a session with o's window and chunk size pins (cm_pinned_bytes). */
uint64_t xfer_pinned_bytes(const struct xfer_opts *o);

/*
 * rdcp --check HOST over ssh: starts rdcp --server on o->rsh_host as a
 * copy would, and tells out which of its addresses the data would go to
 * and why. Returns the number of problems found.
 */
int xfer_check_remote(const struct xfer_opts *o,
		      void (*out)(void *arg, enum cm_check_kind kind,
				  const char *text),
		      void *arg);

/* Receiver: serve sessions until cancelled (or one, with o->once). */
enum xfer_fail xfer_serve(const struct xfer_opts *o);

/* Short English name of a verdict, for messages and JSON. */
const char *xfer_fail_name(enum xfer_fail f);

#endif
