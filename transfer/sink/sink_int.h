/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to the sink's files: sink.c (the protocol role: FILE, FILE_END,
 * results), sink_names.c (where an announced name lands), sink_chunk.c
 * (chunks: checked, written, folded, released), sink_dir.c (the
 * directories it creates and finishes), sink_final.c (verify and place a
 * whole file), sink_resume.c (what this side already has: the resume scan
 * and HAVE), sink_pack.c (packed slots of small files), sink_range.c (byte
 * ranges of a split file), sink_want.c (what a pull asked for),
 * sink_dry.c (--dry-run's answers), sink_list.c (a pull's --files-from),
 * sink_delete.c (--delete), sink_link.c (-H's hard links) and
 * sink_special.c (-D's device nodes, FIFOs and sockets).
 * Everything here runs in the engine thread unless it says "worker".
 */
#ifndef RDCP_SINK_INT_H
#define RDCP_SINK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "transfer/fs/direct.h"
#include "transfer/session/payload.h"
#include "transfer/fs/prune.h"
#include "transfer/session/report.h"
#include "transfer/session/role.h"
#include "util/checksum.h"
#include "util/hset.h"
#include "util/path.h"

/* Where an announced path lands, and how it is shown. */
struct snk_names {
	char name[PATH_NAME_MAX + 1]; /* last component */
	char tmp[PATH_NAME_MAX + 1];  /* its temporary, beside it */
	char rel[PATH_PEER_MAX + PATH_NAME_MAX + 2]; /* beneath t->dirfd */
	char shown[4400];
};

/* -o/-g: the ids an entry is to get on this side (sink_owner.c). */
struct snk_owner {
	uid_t uid;
	gid_t gid;
	bool set_uid, set_gid;
};

/* What the sink says once a session (sink_owner.c): its kinds. */
enum {
	SINK_NOTE_SERVICE, /* a receiver without --allow-owners */
	SINK_NOTE_OWNER,   /* owners could not be set */
	SINK_NOTE_GROUP,   /* some groups could not be set */
	SINK_NOTE_XATTR,   /* extended attributes could not be set */
	SINK_NOTE_XATTR_PRIV, /* trusted.*, security.*: not here */
	SINK_NOTE_DEVICES,    /* device nodes (-D) could not be made */
	SINK_NOTES
};

struct sink;
struct snk_dir;
struct snk_file;
struct snk_want;
struct snk_list;
struct snk_range;

/* A file's own work in a worker: resume compares, then its finalize. */
struct snk_work {
	struct workq_item item;
	struct sink *k;
	struct snk_file *f;
	uint8_t digest[WIRE_DIGEST_MAX]; /* finalize: what this side computed */
	uint8_t dlen;
	int err;		       /* a compare's failure, for the engine */
	char errmsg[WIRE_MSG_MAX + 1]; /* thread to record */
};

struct snk_file {
	uint32_t id;
	uint8_t kind;
	int fd;
	struct direct_fd dio; /* its O_DIRECT twin: full chunks (direct.h) */
	int dirfd;	      /* the parent: the target's, or parent's fd */
	struct snk_parent *parent; /* a reference, or NULL (the target's) */
	/* A regular file's directory, kept unfinished while it flies. */
	struct snk_dir *dir;
	int cand;	 /* resume: what an earlier attempt left (or -1) */
	bool cand_final; /* ... and that is the file under its final name */
	/*
	 * --resume (sink_resume.c): the source sends the digests of its
	 * chunks in order (SUMS), a worker compares them with this side's
	 * chunks [match_next, cmp_to) and the answer (MATCH) is one bit a
	 * chunk. The digests wait in sums, a ring of sums_cap (at most the
	 * ring's slots) indexed by chunk index; bits holds one compare's.
	 */
	bool cmp, comparing;
	bool found;	    /* an earlier attempt's temporary or old file */
	bool keeping;	    /* the old file may stay as it is: all matched */
	uint64_t cand_size; /* its size when found */
	uint64_t sums_next, match_next, cmp_to;
	uint32_t sums_cap;
	uint8_t (*sums)[WIRE_SUM_LEN];
	uint8_t *bits;
	struct snk_names n;
	uint64_t size, nslots, received, sent;
	uint32_t mode;
	struct timespec times[2]; /* atime, mtime */
	struct snk_owner owner;	  /* -o/-g: what it gets */
	struct wire_xattrs *xattrs; /* -X/-A: its own, or NULL */
	/*
	 * Chunks are taken in increasing offset order (posted in order, and
	 * taken in seq order whatever order they arrive in): next_idx is the
	 * lowest index still allowed. Their digests are folded into crc/tree in
	 * that order as workers finish: head..tail link the fold records of
	 * its chunks not yet folded (-1: none), so nothing here grows with the
	 * size the source claims.
	 */
	uint64_t next_idx;
	uint64_t first_idx; /* a range's first chunk (0: a whole file) */
	uint64_t crc_at;    /* a range: crc covers [its offset, crc_at) */
	struct snk_range *rg; /* a byte range of a split file, or NULL */
	/*
	 * -n/-u kept a split file's final name: each range is answered
	 * skipped, and range 0's answer (FINAL) alone reports and counts it.
	 */
	bool kept_range, kept_final;
	int head, tail;
	uint32_t crc;
	struct ck_sha256 *tree;
	unsigned int inflight;
	bool ended, finalizing, skipped;
	/* --dry-run: would be made; the name is taken now */
	bool dry, exists;
	bool holes_ok; /* chunks may be left out: sparse, --sparse, resume */
	struct wire_file_end end;
	/*
	 * The receiver's byte limits (sink_charge): what was taken for it
	 * (given back unless placed), and the rule that refused it.
	 */
	bool charged, placed;
	uint64_t charged_size, charged_old;
	const char *rule;
	int err;
	bool err_remote; /* the source's failure, not ours */
	char errmsg[WIRE_MSG_MAX + 1];
	double t0;
	struct snk_work work; /* at most one at a time: scan, then finalize */
	/*
	 * -H: a LINKED file's state in sink_link.c's table of places (set as
	 * it is answered, enum sink_tgt_state; NULL: not LINKED); a
	 * HARDLINK's file's place (malloc'd), and whether it waits for it.
	 */
	uint8_t *settle;
	bool waiting;
	char *target;
	uint64_t rdev; /* -D: a device's number (WIRE_RDEV) */
};

/* What became of one file of a pack, for the engine thread to report. */
struct snk_packed {
	char *shown; /* NULL: the pack failed before it was read */
	uint64_t size;
	int status;
	bool remote; /* the source's own failure (an aborting record) */
	char *msg;   /* with status; NULL if it could not be kept */
	const char *rule; /* a receiver's rule that refused it, or NULL */
	uint8_t dlen;
	uint8_t digest[WIRE_DIGEST_MAX];
	uint64_t key; /* --delete: its name (sink_delete_key), 0: unread */
};

struct snk_job {
	struct workq_item item;
	struct sink *k;
	unsigned int slot;
	struct wire_slot_hdr h;
	struct snk_file *f;	   /* NULL for a pack */
	struct snk_packed *packed; /* a pack: one per file */
	uint32_t npacked;
	double t0; /* when the pack came */
	uint64_t index;
	struct payload pl; /* inflated payload, GCM context */
	int status;
	/* A chunk: its digests (worker), then into its fold record. */
	uint32_t crc;
	uint8_t sha[CK_SHA256_LEN];
	unsigned int fold; /* its record in sink.folds */
	/* A pack: the directory the walk was in, kept unfinished meanwhile. */
	struct snk_dir *dir;
	/* a pack with a name the pull did not ask for: it, and why */
	char *refused;
	const char *refused_why;
	/* a pull's --files-from: where its names' check starts */
	uint64_t list_lo;
};

/*
 * A chunk taken and not yet folded into its file's digests, apart from
 * its slot so that the slot can go back (any slot: as soon as its worker
 * is through) while an earlier chunk of the file is still being written.
 * One per seq % nfolds: the seqs not folded are within the credit window
 * (credit.h: the span, or N with slots released in order).
 */
struct snk_fold {
	uint64_t offset;
	uint32_t raw_len;
	uint32_t crc;
	uint8_t sha[CK_SHA256_LEN];
	int next;  /* the record of the file's next chunk, or -1 */
	bool done; /* its worker is through with it */
};

struct snk_dir; /* a directory made and not yet finished (sink_dir.c) */

/* --delete (sink_delete.c). */
struct snk_del {
	struct hset names; /* every entry announced: sink_delete_key */
	bool whole;	   /* DONE: every entry beneath the SRCs was sent */
	uint64_t max;	   /* entries that may go, WIRE_DELETE_ANY: any */
	int phase;	   /* sink_delete.c's DEL_* */
	struct prune *pr;  /* the walk of DEST, counting or removing */
	uint64_t would;	   /* counted: entries that would go */
	uint64_t gone;	   /* removed (a dry run: listed) */
};

struct sink {
	struct engine *e;
	const struct sink_target *t;
	const struct session_params *p;
	struct xfer_stats *st;
	uint32_t chunk_size; /* payload bytes per slot */
	struct credit_rx rx;
	int64_t held_shown;   /* slots held as last added to e->ring_held */
	struct snk_job *jobs; /* one per slot */
	struct snk_fold *folds; /* chunks not folded yet, by seq % nfolds */
	unsigned int nfolds;
	uint64_t freed_posted; /* any slot: slots named by FREEDs posted */
	uint32_t nfiles;      /* ids announced so far (= next id) */
	/* Regular files in flight (session_inflight_max), in id order. */
	struct snk_file *live[WIRE_INFLIGHT_ASK_MAX + 1]; /* + a dir or link */
	unsigned int nlive;
	unsigned int active;	     /* announced, result not yet sent */
	char top[PATH_NAME_MAX + 1]; /* first component, DEST not a dir */
	/* Directories: the deepest the walk is in, and how many are kept. */
	struct snk_dir *cwd;
	size_t ndirs;
	/* The O_PATH fd of the last parent a FILE opened, kept while the
	 * walk stays in that directory (sink_names.c), or NULL. */
	struct snk_parent *parent;
	bool dirs_dropped; /* torn down: kept ones go unfinished */
	/* Names already answered when asked first: each at most once. */
	struct hset asked;
	/* Kept entries not yet told (KEPT): ids [kept_first, +kept_count) */
	uint32_t kept_first, kept_count;
	uint8_t resume_key[32];
	struct snk_want *want; /* a pull: the names asked for, sorted */
	size_t nwant;
	bool want_check; /* a pull: take only what was asked for */
	struct snk_list *list; /* a pull's --files-from, else NULL */
	struct snk_del del;
	uint64_t bytes_in, next_progress_ms;
	/*
	 * The sizes of the regular files announced so far, and of the packed
	 * slots as they come: a pull's total for its progress, as far as
	 * known (it grows while the source lists a tree).
	 */
	uint64_t bytes_told;
	bool done, bye_sent;
	bool direct_told; /* --direct could not be had: said once */
	/* -X/-A: the XATTRS of the next FILE, until it comes (or NULL) */
	struct wire_xattrs *xpending;
	/* -o/-g (sink_owner.c): a chown refused once is not tried again */
	bool owner_denied;
	/* what was said once (bits of SINK_NOTE_*), and sent to the client */
	unsigned int notes_said, notes_sent;
	char notes[SINK_NOTES][WIRE_MSG_MAX + 1];
	/* -H (sink_link.c): the LINKED files' places; a link may be made */
	struct snk_links *links;
	bool links_due;
};

/* f's first failure: errno and one line for the user. */
#define file_fail(f, ...)                                                      \
	report_fail(&(f)->err, (f)->errmsg, sizeof((f)->errmsg), __VA_ARGS__)

/* ---- sink_meta.c: what the session asked of placed entries ---- */

bool sink_resuming(const struct sink *k);
bool sink_preserving(const struct sink *k);
mode_t sink_final_mode(const struct sink *k, uint32_t mode);
/*
 * Worker: the final mode (unless the file was made with it, have_mode)
 * and, with -p, the times onto fd. 0, or -errno and *what.
 */
int sink_apply_meta(struct sink *k, int fd, uint32_t mode, bool have_mode,
		    const struct timespec times[2], const struct snk_owner *ow,
		    const struct wire_xattrs *x, const char **what);

/* ---- sink_owner.c: -o/-g ---- */

/* Whether the session keeps owners or groups (HELLO OWNER, GROUP). */
bool sink_owners_asked(const struct sink *k);
/* The ids o (the source's) is given here: a known name's, else its own. */
void sink_owner_map(const struct sink *k, const struct wire_owner *o,
		    struct snk_owner *out);
/*
 * Worker or engine thread: gives (dirfd, name; "": dirfd itself, never
 * through a symlink) ow's ids where this side may, saying once a session
 * what it may not (never a failure). Returns the setuid/setgid bits its
 * mode may keep: S_ISUID with the owner set, S_ISGID with the group. Call
 * before the mode is set (a chown clears those bits).
 */
mode_t sink_owner_apply(struct sink *k, int dirfd, const char *name,
			const struct snk_owner *ow);
/*
 * Says fmt once a session for kind (SINK_NOTE_*): logged, and on a push
 * told to the client (sink_notes_flush). Worker or engine thread.
 */
void sink_note(struct sink *k, unsigned int kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- sink_xattr.c: -X/-A ---- */

/* Whether the session keeps xattrs or ACLs (HELLO XATTRS, ACLS). */
bool sink_xattrs_asked(const struct sink *k);
/* An XATTRS came: held for the next FILE. 0 or the engine's error. */
int sink_on_xattrs(struct sink *k, const struct wire_xattrs *x);
/*
 * FILE wf came: the attributes held for it (NULL: none), the caller's to
 * free. 0, or the engine's error (a flag without them, or them without
 * the flag).
 */
int sink_xattrs_take(struct sink *k, const struct wire_file *wf,
		     struct wire_xattrs **out);
/*
 * Worker or engine thread: x (NULL: none) onto fd, an entry not yet
 * under its final name (or a kept one): set where they differ, the
 * session's namespaces' others removed. Never a failure: said once.
 */
void sink_xattrs_apply(struct sink *k, int fd, const struct wire_xattrs *x,
		       bool dir);

/*
 * Whether st's owner and group are what ow would give it (or this side
 * would set none of them): an old file may then stay as it is.
 */
bool sink_owner_matches(const struct sink *k, const struct snk_owner *ow,
			const struct stat *st);
/*
 * Engine thread, a receiver's sink (a push): the next notice not yet
 * sent to the client, as NOTICE. 1 sent, 0 none due, -1 engine's error.
 */
int sink_notes_flush(struct sink *k);

/* ---- sink_link.c: -H ---- */

/* What became of a LINKED file: its links wait, are made, or fail. */
enum sink_tgt_state {
	SINK_TGT_PENDING,
	SINK_TGT_PLACED,
	SINK_TGT_FAILED,
};

/* Whether the session keeps hard links (HELLO HARD_LINKS). */
bool sink_links_asked(const struct sink *k);
/*
 * f (mapped) came with the LINKED flag: its place is remembered, its
 * links wait for its result (sink_file.c sets *f->settle as it answers
 * f, and links_due: the pump makes them). 0 or the engine's error.
 */
int sink_link_noted(struct sink *k, struct snk_file *f);
/*
 * HARDLINK f (mapped) names target: beneath DEST and a file sent LINKED
 * before, else the session ends. 0 or the engine's error.
 */
int sink_link_check(struct sink *k, struct snk_file *f, const char *target);
/*
 * Whether HARDLINK f's name is already its file (--dry-run: kept where a
 * skip is asked for).
 */
bool sink_link_same(struct sink *k, const struct snk_file *f);
/* f is made now, or waits for its file. 0 or the engine's error. */
int sink_link_start(struct sink *k, struct snk_file *f);
/* The links whose files were settled, made. How many, -1 on an error. */
int sink_links_pump(struct sink *k);
void sink_links_free(struct sink *k);

/* ---- sink_special.c: -D ---- */

/* A SPECIAL came: one the session asked for? 0 or the engine's error. */
int sink_special_check(struct sink *k, const struct wire_file *wf);
/* Whether SPECIAL f's name holds one of its type (and numbers) already. */
bool sink_special_same(const struct snk_file *f);
/* SPECIAL f made (or kept, or left out) and answered. 0 or the error. */
int sink_make_special(struct sink *k, struct snk_file *f);

/* ---- sink_file.c: a file in flight, FILE to FILE_RESULT ---- */

/* The file in flight with id, or NULL. */
struct snk_file *sink_live_find(const struct sink *k, uint32_t id);
/* f (a new id, larger than any before) is in flight. */
void sink_live_add(struct sink *k, struct snk_file *f);
/* Frees f: its temporary discarded, its directory released. f may be NULL. */
void sink_file_free(struct sink *k, struct snk_file *f);
/* Closes f's temporary; removes it unless --resume may reuse it. */
void sink_discard(struct sink *k, struct snk_file *f);
/*
 * Opens f's temporary (keep: reuse what it holds). 0, or -1 with f failed.
 */
int sink_open_tmp(struct sink *k, struct snk_file *f, bool keep);
/* Fails f when need more bytes cannot fit where it goes. */
void sink_check_space(struct snk_file *f, uint64_t need);
/*
 * The bytes allocated to the regular file name in dirfd (st_blocks), 0
 * for none or another kind: what placing a file there replaces.
 */
uint64_t sink_old_bytes(int dirfd, const char *name);
/*
 * Takes size bytes of the receiver's byte limits for f (k->t->budget;
 * replaces: f's name may hold a file it replaces): f fails with the
 * rule's message when they refuse it. Given back by sink_file_free
 * unless f->placed (or keep: a split file's range, never given back).
 */
void sink_charge(struct sink *k, struct snk_file *f, uint64_t size,
		 bool replaces, bool keep);
/* Fails f: need bytes do not fit, avail are free. */
void sink_no_space(struct snk_file *f, uint64_t need, uint64_t avail);
/* Hands f to a worker for fn; after runs in the engine thread. */
void sink_start_work(struct sink *k, struct snk_file *f,
		     void (*fn)(struct workq_item *),
		     void (*after)(struct workq_item *));
/*
 * The source is told to send nothing of f, then f's result follows: kept
 * as it was (skipped), or failed before any data (f->err). Frees f.
 */
int sink_skip_file(struct sink *k, struct snk_file *f);
/* f's FILE_RESULT, counted and reported. Frees f. */
int sink_send_result(struct sink *k, struct snk_file *f, const uint8_t *digest,
		     unsigned int dlen);
/* The client's user sees r, with the digest (dlen bytes) in hex. */
void sink_user_report(struct sink *k, struct xfer_file_report *r,
		      const uint8_t *digest, unsigned int dlen);
/* f started (done false) or finished, told to the client's user. */
void sink_file_report(struct sink *k, struct snk_file *f, bool done,
		      const uint8_t *digest, unsigned int dlen);
/*
 * Counts a file's outcome and logs it. msg NULL: the failure was logged
 * already.
 */
void sink_tally(struct sink *k, const char *shown, uint64_t size, int err,
		bool remote, const char *msg, bool skipped);

/* ---- sink_slot.c: what chunk and packed slots share ---- */

/* Counts len bytes in and calls the user's progress, paced. */
void sink_progress(struct sink *k, const char *shown, uint32_t len);
/* Whether a slot's flags are what was agreed in the handshake. */
bool sink_flags_ok(const struct sink *k, uint16_t flags);
/* Worker: job j's payload as the source read it (opened, inflated). */
int sink_open_payload(struct sink *k, struct snk_job *j, const uint8_t **raw);

/* ---- sink_names.c ---- */

/*
 * Whether an announced path may land beneath the target: 0, -EPERM or
 * -EPROTO (see sink_names.c). Where it lands, in n: sink_map_names.
 */
int sink_check_path(struct sink *k, uint32_t id, const char *path);
int sink_map_names(struct sink *k, uint32_t id, const char *path,
		   struct snk_names *n);
/* The directory n goes into: the target's own dirfd or a new fd. */
int sink_open_parent(const struct sink *k, struct snk_names *n);
/*
 * The engine thread's parent cache (sink_parent.c): one directory's
 * O_PATH fd kept for the files that follow in it. sink_parent_cached: 1
 * when the cache holds rel (len bytes); sink_parent_cache puts fd there
 * for rel (taken over, closed on failure): fd or -ENOMEM;
 * sink_parent_get hands out a reference to the cached one in *ref and
 * returns its fd; sink_parent_put drops a reference (a file's, when it
 * is freed), closing the fd with the last; sink_parent_forget drops the
 * cache's own, as the walk leaves or enters a directory and when the
 * session ends.
 */
bool sink_parent_cached(const struct sink *k, const char *rel, size_t len);
int sink_parent_cache(struct sink *k, int fd, const char *rel, size_t len);
int sink_parent_get(struct sink *k, struct snk_parent **ref);
void sink_parent_put(struct snk_parent *p);
void sink_parent_forget(struct sink *k);
/*
 * Where f lands, in f->n and f->dirfd, checked (beneath DEST; on a pull,
 * asked for) before anything is opened. 0 (f may have failed alone: its
 * err set), or the engine's error: the session ends.
 */
int sink_map_path(struct sink *k, struct snk_file *f, const char *path);

/*
 * --dry-run: answers f's FILE (path as sent, link a symlink's target)
 * with what a copy would do
 * (sink_dry.c). 0 or the engine's error.
 */
int sink_dry_answer(struct sink *k, struct snk_file *f, const char *path,
		    const char *link);

/*
 * f, a regular file or symlink kept as it is (skipped, no failure),
 * counted and reported; the source learns it with the next KEPT, for a
 * run of consecutive ids in one message. Frees f. 0 or the engine's error.
 */
int sink_send_kept(struct sink *k, struct snk_file *f);
/* The run of kept ids waiting, sent as one KEPT. 0 or the engine's error. */
int sink_kept_flush(struct sink *k);

/* ---- sink_chunk.c ---- */

/*
 * f's new temporary (open, empty) made ready for its chunks: its space
 * reserved up front unless it may have holes (sparse: the source's, or
 * --sparse), sized, and given its O_DIRECT twin when it goes direct. f is
 * failed when the space is not there.
 */
void sink_size_file(struct sink *k, struct snk_file *f, bool sparse);
/* The slots' jobs, n of them. 0 or -errno (the caller frees k->jobs). */
int sink_jobs_init(struct sink *k, unsigned int n);
/*
 * The engine role's on_data: a slot was written, in any order within the
 * window (credit.h). Takes what arrived in seq order (sink_take_data). 0
 * or the engine's error (a protocol violation).
 */
int sink_on_data(struct engine *e, const struct cm_event *ev);
/*
 * Takes the slots that arrived, in seq order, as far as they go: a chunk
 * of a file not announced yet (or a pack whose first file is not next)
 * parks the cursor, its slot and credit held, until the FILE before it
 * comes. 0 or the engine's error.
 */
int sink_take_data(struct sink *k);
/* Whether the cursor is parked: a slot arrived that waits for a FILE. */
bool sink_parked(const struct sink *k);

/* ---- sink_dir.c ---- */

/* Why an entry out of the walk's order is refused (sink_want_refuse). */
#define SINK_DIR_NOT_NOW                                                       \
	"beneath a directory it is not sending now (left already, or never "   \
	"announced)"

/*
 * Entry path (checked beneath DEST) comes next: closes the directories
 * the walk has left, finishing those with nothing in flight. 0 when its
 * parent is the deepest directory still open (or it is a top entry), else
 * -EPROTO: beneath a directory already left, or never announced.
 */
int sink_dir_enter(struct sink *k, const char *path);
/*
 * Directory f (sent as path, entered) is made (f->err on failure) and is
 * now the deepest open one, failed or not. 0, or -ENOMEM.
 */
int sink_make_dir(struct sink *k, struct snk_file *f, const char *path);
/*
 * An entry in flight in the deepest open directory keeps it (and its
 * parents) unfinished: the directory, NULL for DEST itself, to release.
 */
struct snk_dir *sink_dir_hold(struct sink *k);
/* What held d is done; finishes what nothing keeps any more. d may be NULL. */
void sink_dir_release(struct sink *k, struct snk_dir *d);
/*
 * Worker or engine thread: whether path's parent is d or one of its
 * parents (or path is a top entry), d held by the caller.
 */
bool sink_dir_holds(const struct snk_dir *d, const char *path);
/* DONE and every result sent: closes and finishes every directory. */
void sink_finish_dirs(struct sink *k);
/*
 * A session torn down: directories are freed unfinished as their entries
 * are freed. Call before freeing files and packs.
 */
void sink_dirs_drop(struct sink *k);

/* ---- sink_final.c ---- */

/*
 * f is whole: verify, place and report it (a worker, then the engine
 * thread sends its FILE_RESULT).
 */
void sink_finalize(struct sink *k, struct snk_file *f);
/* Finalizes f if it is ended and nothing of it is in flight. */
void sink_maybe_finalize(struct sink *k, struct snk_file *f);
/*
 * Worker, at finalize: f's digest read back from fd (the whole file: the
 * chunks that matched and the ones that came). 0 or -errno, f failed.
 */
int sink_resume_digest(struct snk_work *fin, int fd);

/* ---- sink_range.c ---- */

/* What every range of one split agrees on (the state file's header). */
struct rng_key {
	uint8_t token[WIRE_TOKEN_LEN];
	uint64_t size; /* the whole file's, bytes */
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t count; /* ranges, 1..WIRE_RANGES_MAX */
};

enum rng_state {
	RNG_MISSING = 0,
	RNG_VERIFIED = 1,
	RNG_FAILED = 2
};

/* One range's record in the state file. */
struct rng_rec {
	uint64_t off, len; /* bytes */
	uint8_t state;	   /* enum rng_state */
	bool seen;	   /* joined in the job of the state's token */
	uint32_t crc;	   /* verified: the range's CRC32 */
};

#define RNG_HDR_LEN 48u
#define RNG_REC_LEN 24u
#define RNG_LOCK_MS 30000 /* the longest wait for a state's lock */

/*
 * The state file's exclusive OFD lock, waited for (-ETIMEDOUT after
 * RNG_LOCK_MS: another process holds it); and its release.
 */
int sink_rng_lock(int state_fd) __attribute__((warn_unused_result));
void sink_rng_unlock(int state_fd);
/* Record idx of a state file: 0, -EIO for a torn one, or -errno. */
int sink_rng_read(int state_fd, uint32_t idx, struct rng_rec *r);
int sink_rng_write(int state_fd, uint32_t idx, const struct rng_rec *r);
/*
 * Under the lock: range idx (off, len) of key joins the state in
 * state_fd, beside the temporary part_fd (fresh: this session just made
 * it). An empty or unreadable state is made anew, and the temporary
 * emptied (what it holds was never recorded). One of another token is an
 * earlier job's, taken over when no session holds a byte of part_fd (else
 * -ESTALE): with resume, the same size, mtime and count and a temporary
 * that is not fresh its verified ranges stay, else it starts over (the
 * temporary emptied). The same token with another size, mtime or count,
 * or idx recorded with other bytes, is -ESTALE; so is a fresh temporary
 * beside a state of the same token with a verified range (the bytes it
 * recorded are gone). *state: the record's (with resume a failed one
 * reads missing; without, RNG_FAILED when any range of the file failed).
 * 0 or -errno.
 */
int sink_rng_join(int state_fd, int part_fd, bool fresh,
		  const struct rng_key *key, uint32_t idx, uint64_t off,
		  uint64_t len, bool resume, uint8_t *state)
	__attribute__((warn_unused_result));
/*
 * Under the lock: marks record idx (state, crc) and makes it durable.
 * With RNG_VERIFIED, *all tells whether every range is, each having
 * joined in this job (a range verified by an earlier one waits for its
 * own session: one that came after the file was placed would find
 * nothing to join, and start it over), and then *whole
 * is the file's CRC32 combined from theirs in offset order; -EBADMSG when
 * they do not tile [0, size). -ESTALE when the state is no longer key's.
 */
int sink_rng_mark(int state_fd, const struct rng_key *key, uint32_t idx,
		  uint8_t state, uint32_t crc, bool *all, uint32_t *whole)
	__attribute__((warn_unused_result));
/* Under the lock: every range seen (none missing) and one failed. */
bool sink_rng_abandoned(int state_fd, uint32_t count);

/*
 * A FILE with the range flag: checks where its chunks may fall (a bad
 * range ends the session, exit 5), then opens the shared temporary and
 * the state, locks its bytes and joins (f failed when that fails).
 * *verified: with --resume, the range is verified already (HAVE SKIP).
 * 0 or the engine's error.
 */
int sink_range_open(struct sink *k, struct snk_file *f,
		    const struct wire_file *wf, bool *verified);
/*
 * Worker, f's range verified against the source's CRC (or skipped as
 * verified before): its record made durable, and if it was the last the
 * file placed (fin's digest then the whole file's). 0, or -1 with f
 * failed.
 */
int sink_range_done(struct snk_work *fin);
/*
 * A range's CRC32 covers all its bytes: the chunks that did not come
 * before end (holes; UINT64_MAX: the range's end) fold in as zeros, as
 * the source folds them. Nothing for a whole file.
 */
void sink_range_fold_holes(struct sink *k, struct snk_file *f, uint64_t end);
/* The bytes f's range holds (a whole file: its size). */
uint64_t sink_range_len(const struct snk_file *f);
/* Whether f's session placed its split file. */
bool sink_range_final(const struct snk_file *f);
/*
 * f is let go: a failed range's record marked failed (and without
 * --resume, once no range is missing, the split's files removed), the
 * locks dropped, the descriptors closed.
 */
void sink_range_release(struct sink *k, struct snk_file *f);

/* ---- sink_resume.c ---- */

/*
 * Whether f's name may be answered now when asked first (--resume,
 * --no-clobber, --update): 0 the first time in the session, -EEXIST
 * after, -ENOMEM.
 */
int sink_ask_once(struct sink *k, const struct snk_file *f);
/*
 * --resume: f's temporary, sized, with what an earlier attempt left in
 * it or in the old file, then HAVE asking the source for its digests.
 * 0 or the engine's error.
 */
int sink_resume_open(struct sink *k, struct snk_file *f, bool sparse);
/* A SUMS came. 0 or the engine's error (a protocol violation). */
int sink_on_sums(struct sink *k, const struct wire_sums *m);

/* ---- sink_sync.c ---- */

enum sink_sync_verdict {
	SINK_SYNC_SEND,	   /* nothing like it here: the data is sent */
	SINK_SYNC_KEEP,	   /* what is here passes the check: kept */
	SINK_SYNC_COMPARE, /* checksum: a regular file of the same size */
};

/*
 * --sync: what f's name holds against the check HELLO asked for (link:
 * a symlink's target as sent). Kept without dry, f gets the source's mode
 * and times with -p (f failed if that fails). Always SEND without --sync,
 * for a directory, or a failed f.
 */
enum sink_sync_verdict sink_sync_check(struct sink *k, struct snk_file *f,
				       const char *link, bool dry);

/* ---- sink_want.c ---- */

/* A pull: the names asked for, from k->t->want. 0 or -ENOMEM. */
int sink_want_init(struct sink *k);
void sink_want_free(struct sink *k);
/*
 * A pull: whether entry id (kind, path, already checked to lie beneath
 * DEST) is one an honest receiver sends for the SRCs asked for (with a
 * file list, its names: sink_list_check with list_pos). NULL when it is
 * (always on a push), else why not, for the user. Counts the top names
 * and remembers directories: call it once per entry, before the entry
 * touches anything. Engine thread, or a pack's worker.
 */
const char *sink_want_check(struct sink *k, uint32_t id, uint8_t kind,
			    const char *path, uint64_t *list_pos);
/* Ends the session: the peer sent path, refused for why. The error. */
int sink_want_refuse(struct sink *k, const char *path, const char *why);

/* ---- sink_list.c ---- */

/* A pull with --files-from: the list's state. 0 or -ENOMEM. */
int sink_list_init(struct sink *k);
void sink_list_free(struct sink *k);
/*
 * The engine role's pump: reads the list's next names and sends them, as
 * far as the receiver's window allows. Messages queued (0, 1); the engine
 * is failed when the list cannot be read.
 */
int sink_list_send(struct sink *k);
/* A NAMES_ACK came. 0 or the engine's error (a protocol violation). */
int sink_list_on_ack(struct sink *k, const struct wire_names_ack *a);
/* Where the engine thread's check of entries stands, for a pack. */
uint64_t sink_list_pos(const struct sink *k);
/*
 * Engine thread or a pack's worker: whether entry (kind, path, beneath
 * DEST) is one an honest walk sends for the names of the list, at *pos or
 * after (then moved to the name it matched; pos NULL: the engine thread's
 * own, from entry to entry). NULL or why not.
 */
const char *sink_list_check(struct sink *k, uint64_t *pos, uint8_t kind,
			    const char *path);

/* ---- sink_delete.c ---- */

/* Whether the session has --delete (HELLO flag DELETE). */
bool sink_deleting(const struct sink *k);
/* Worker or engine thread: the key an announced path is remembered by. */
uint64_t sink_delete_key(const char *path, size_t len, bool dir);
/* An entry was announced (key: sink_delete_key). 0 or the engine's error. */
int sink_delete_note(struct sink *k, uint64_t key);
/* DONE came: whether the source's list was whole, the --max-delete. */
void sink_delete_done(struct sink *k, const struct wire_done *d);
/* DONE came and every result is sent: whether deleting is still to do. */
bool sink_delete_pending(const struct sink *k);
/*
 * One step of it (the engine role's pump): how much was done; the engine
 * is failed on an error.
 */
int sink_delete_step(struct sink *k);
/* Frees what deleting holds (also a session that ended early). */
void sink_delete_release(struct sink *k);

/* ---- sink_pack.c ---- */

/* A packed slot came: reserve its ids, unpack it in a worker. */
int sink_pack_arrived(struct sink *k, const struct wire_slot_hdr *h,
		      unsigned int slot);
/* Frees what a pack's job still holds (a session that ended early). */
void sink_pack_free(struct snk_job *j);

#endif
