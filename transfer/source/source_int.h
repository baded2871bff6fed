/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to the source's files: source.c (the protocol role: results,
 * HAVE, the workers that read chunks, the session), source_plan.c (the
 * walk turned into an ordered plan of FILE, CHUNK, FILE_END and PACK
 * items), source_pack.c (packs of small files) and source_post.c (posting
 * planned items as credits allow, in order). All of it runs in the engine
 * thread unless it says "worker".
 *
 * An entry's state lives from the walk's listing of it until it is
 * finished: reported, out of the plan and, packed, its pack answered.
 * Then nothing may name it again (a peer's message that does is a
 * protocol error), and once every entry of its block of WALK_BLOCK is
 * finished the block goes, with the walk's entries (src_retire): the
 * source holds the files in flight and those listed around them, not the
 * session's.
 */
#ifndef RDCP_SOURCE_INT_H
#define RDCP_SOURCE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "transfer/fs/direct.h"
#include "transfer/session/engine.h"
#include "transfer/session/payload.h"
#include "transfer/session/report.h"
#include "transfer/session/role.h"
#include "transfer/walk/walk.h"
#include "util/checksum.h"
#include "util/ratelimit.h"

enum item_kind {
	IT_FILE,
	IT_CHUNK,
	IT_END,
	IT_PACK,
	IT_DONE
};

#define PACK_FILE_MAX (64u << 10) /* bytes: larger files go alone */
#define PACK_ABORT_ROOM 200u	  /* bytes kept for a record's abort text */
enum job_state {
	JOB_FREE,
	JOB_WAITING, /* planned; read once the sink's HAVE wants the data */
	JOB_READING,
	JOB_READY,
	JOB_POSTED
};

struct src_file {
	struct walk_entry *w;
	size_t idx;	  /* in the walk, = in files */
	const char *path; /* as the user (or the walk) named it */
	int fd;
	struct direct_fd dio; /* its O_DIRECT twin: full chunks (direct.h) */
	struct stat st;
	uint64_t nchunks;  /* chunks posted (holes and matches are not) */
	uint64_t matched;  /* chunks the sink already had */
	uint64_t next_off; /* planning cursor */
	uint32_t crc;	   /* CRC32 of the file, combined in post order */
	uint64_t crc_at;   /* a range: crc covers [range off, crc_at) */
	struct ck_sha256 *tree;
	int err;
	char errmsg[300];
	bool announced;	     /* has a wire id: a FILE_RESULT will come */
	bool in_flight;	     /* counted in source.inflight until then */
	bool deferred;	     /* its FILE waits in the fifo behind a pack */
	bool packed, posted; /* in a pack; that pack is in the ring */
	uint32_t pack_len;   /* a pack's first file: files in it, else 0 */
	bool pack_done;	     /* packed: its pack's PACK_DONE came */
	unsigned int items;  /* items of it in the plan (the fifo) */
	bool finished;	     /* counted done in its block (src_retire) */
	bool end_sent;	     /* FILE_END went: its verdict may come */
	uint32_t wire_id; /* file id on the wire: announced files, in order */
	/* the digest sent with it (FILE_END, its record): what is reported */
	uint8_t digest[WIRE_DIGEST_MAX];
	uint8_t dlen;
	bool result, skipped;
	bool final; /* a range's result with WIRE_RESULT_FINAL */
	/* --dry-run: the verdict's DRY and EXISTS flags */
	uint32_t dry;
	uint64_t sent; /* payload bytes posted (compressed, raw if packed) */
	double t0;
	/* the sink's answer (HAVE) when it is asked first */
	bool asking, have_done, skip;
	/*
	 * Asked first: announced from the walk's stat, opened only when the
	 * HAVE wants its data (src_open_late), so a kept file costs no open.
	 */
	bool lazy;
	int skip_status;
	/*
	 * Asked and lazy, it waits out of the plan for its HAVE (awaiting),
	 * then, wanted, in the source's ready queue until planned.
	 */
	bool awaiting;
	struct src_file *ready_next;
	/*
	 * --resume: the sink asked for the chunks' digests (SUMS); chunks
	 * [0, sums_next) were described, [0, match_next) answered (MATCH).
	 */
	bool cmp;
	uint64_t sums_next, match_next;
	bool linked; /* -H: announced LINKED, later names link to it */
	/* -X/-A: 1 it has attributes to send, -1 none, 0 not looked yet */
	int8_t has_xattrs;
};

/* Where f's bytes end: its range's end, or its size (walk_range). */
static inline uint64_t src_file_end(const struct src_file *f)
{
	return f->w->range ? f->w->range->off + f->w->range->len
			   : (uint64_t)f->st.st_size;
}

/* The bytes f sends: its range's, or the whole file's. */
static inline uint64_t src_file_bytes(const struct src_file *f)
{
	return f->w->range ? f->w->range->len : (uint64_t)f->st.st_size;
}

/*
 * Whether f is announced sparse (WIRE_FILE_SPARSE): fewer blocks than its
 * size. Only such a file may leave chunks out for its holes; the sink
 * wants every chunk of any other (without --sparse or --resume).
 */
static inline bool src_file_sparse(const struct src_file *f)
{
	return (uint64_t)f->st.st_blocks * 512 < (uint64_t)f->st.st_size;
}

struct src_job {
	struct workq_item item;
	struct source *s;
	unsigned int idx; /* staging buffer index */
	enum job_state state;
	struct src_file *f; /* NULL for a pack */
	size_t first;	    /* a pack: files[first, first + nfiles) */
	unsigned int nfiles;
	uint64_t offset;
	uint32_t len;	   /* raw bytes */
	uint32_t wire_len; /* payload bytes after compression */
	uint16_t flags;	   /* enum wire_slot_flags */
	bool zero;	   /* all zero (checked with --sparse) */
	uint32_t crc;
	uint8_t sha[CK_SHA256_LEN];
	/* --resume: its digest for the sink; sent, answered, the answer */
	uint8_t sum[WIRE_SUM_LEN];
	bool summed, answered, matched;
	uint8_t tag[AEAD_TAG_LEN];
	struct payload pl; /* compression scratch, GCM context */
	int status;
};

struct src_names; /* source_names.c */
struct src_link;  /* source_links.c */

/* -H: (st_dev, st_ino) -> first name, files with st_nlink > 1 only. */
struct src_links {
	struct src_link *v; /* open addressing, at most half full */
	size_t n, cap;	    /* cap a power of two, or 0 */
};

struct item {
	enum item_kind kind;
	struct src_file *f;
	struct src_job *job;
};

struct source {
	struct engine *e;
	const struct xfer_opts *o;
	const struct source_cfg *cfg;
	struct xfer_stats *st;
	/*
	 * The client's last failed directory (malloc'd path, or NULL) and the
	 * failures beneath it not printed one by one: a DEST that cannot be
	 * made says so once, not once per entry (--json still has each).
	 */
	char *failed_dir;
	uint64_t failed_beneath;
	uint32_t chunk_size; /* payload bytes per slot */
	struct credit_tx tx;
	/*
	 * Data ready and no credit: since when (ns, 0: not waiting) and for
	 * how long in all (ns), xfer_stats window_wait_s.
	 */
	uint64_t wait_since_ns, wait_ns;
	struct walk walk;
	/*
	 * One block per WALK_BLOCK entries of the walk, NULL before it is
	 * listed and once all its entries are finished (fdone counts them).
	 * Workers reach files through it, so it is sized once for a whole
	 * session and never moves.
	 */
	struct src_file **fblk;
	uint16_t *fdone;
	size_t nfblk;		  /* blocks made so far */
	size_t nfiles, next_file; /* listed by the walk so far; planned */
	/*
	 * Wire ids [wire_base, nwire) -> index in files: by_wire[wire_head]
	 * is wire_base's; ids below, all of finished files, are gone.
	 */
	uint32_t *by_wire;
	size_t wire_head, wire_cap;
	uint32_t wire_base, nwire;
	unsigned int inflight; /* announced regular files without a result */
	unsigned int inflight_max; /* session_inflight_max() */
	struct src_file *cur;  /* being planned */
	/*
	 * Files asked first wait for their HAVE out of the plan, so that as
	 * many as the window allows are asked at once, not as many as
	 * there are staging buffers (src_plan); those the sink wants are
	 * planned from here, in the order their answers came.
	 */
	unsigned int awaiting;
	struct src_file *ready_head, *ready_tail;
	struct src_job *jobs;
	unsigned int njobs, free_jobs;
	struct item *fifo; /* planned, not yet posted */
	unsigned int fifo_cap, fifo_head, fifo_len;
	unsigned int *posted; /* job indices in post order, unreclaimed */
	unsigned int posted_head, posted_len;
	unsigned int held;	 /* packs and deferred FILEs in the fifo */
	unsigned int pack_ahead; /* staging buffers packs may hold at once */
	uint32_t pack_max;	 /* files up to this size are packed, 0: none */
	uint8_t dlen;		 /* digest bytes of csum */
	unsigned int sig_every, unsignaled;
	bool done_planned, done_sent, bye;
	bool ask, resume; /* HAVE before data; --resume */
	bool compare;	  /* chunks may match: --resume, --sync checksum */
	bool direct_told; /* --direct could not be had: said once */
	unsigned int notices; /* NOTICEs taken (WIRE_NOTICES_MAX logged) */
	uint8_t resume_key[32];
	struct ratelimit rl;
	uint64_t bytes_posted, bytes_total; /* for on_progress */
	uint64_t next_progress_ms;
	uint64_t results;
	uint64_t corrupt_seq; /* test hook: flip a byte of this chunk */
	/* --delete on a push: DELETED with status 0; DELETE_END came */
	uint64_t deleted_ok;
	bool delete_ended;
	/* --files-from on a pull: the client's names, NULL without */
	struct src_names *names;
	struct src_links links; /* -H */
};

#define WALK_STEP 512 /* entries listed at a time, in the engine thread */

/* File i < nfiles, not finished: as the walk listed it. */
static inline struct src_file *src_file_at(const struct source *s, size_t i)
{
	return &s->fblk[i / WALK_BLOCK][i % WALK_BLOCK];
}

/* f's first failure: errno and one line for the user. */
#define file_fail(f, ...)                                                      \
	report_fail(&(f)->err, (f)->errmsg, sizeof((f)->errmsg), __VA_ARGS__)

/* ---- source_queue.c: the plan's fifo and the files' wire ids ---- */

/* The file wire id names, or NULL: never announced, or finished. */
struct src_file *src_by_wire(const struct source *s, uint32_t id);

/*
 * Counts f finished if it is (reported, out of the plan, its pack
 * answered) and frees its block once every entry in it is: f and its
 * block's files and walk entries may be gone on return.
 */
void src_retire(struct source *s, struct src_file *f);

/* Lists more of the walk and makes their files. 0 or the engine's error. */
int src_more_files(struct source *s);
/* The plan's item i, counted from its head. */
struct item *src_fifo_at(struct source *s, unsigned int i);
/* Drops the plan's head item. */
void src_fifo_pop(struct source *s);
/* Appends an item to the plan. */
void src_fifo_push(struct source *s, enum item_kind k, struct src_file *f,
		   struct src_job *j);
/* Sends f's FILE now, or defers it behind a pack not yet posted. */
void src_announce(struct source *s, struct src_file *f);
/* The user's "file started" event. */
void src_started(struct source *s, struct src_file *f);
/* f's FILE message goes out now. 0 or -ENOMEM. */
int src_send_file(struct source *s, struct src_file *f);
/* f failed before its data: FILE_END with ABORT and the reason. */
int src_send_failure(struct source *s, struct src_file *f);
/* A free staging buffer's job, or NULL. */
struct src_job *src_take_job(struct source *s);

/* ---- source_plan.c ---- */

/* Plans what can be planned now. How many items, or -1 on a failure. */
int src_plan(struct source *s);
/* f's HAVE came (f->skip: kept): planned next if it waited and is wanted. */
void src_ask_answered(struct source *s, struct src_file *f);

/* ---- source_pack.c ---- */

/* Whether f goes into a pack (small, regular, no holes, not id 0). */
bool src_packable(struct source *s, struct src_file *f);
/*
 * Whether the session keeps owners or groups (-o/-g); then *o is st's,
 * with names unless --numeric-ids. Engine thread or worker.
 */
bool src_owner(const struct source *s, const struct stat *st,
	       struct wire_owner *o);

/* ---- source_xattr.c: -X/-A ---- */

/* Whether the session keeps xattrs or ACLs. */
bool src_xattrs_asked(const struct source *s);
/*
 * f's attributes of the namespaces asked for, in x (count 0: none, or
 * not asked, or a symlink). Warns for what does not fit; 0.
 */
int src_xattrs(struct source *s, struct src_file *f, struct wire_xattrs *x);
/*
 * Whether f has an attribute of the namespaces asked for (a small file
 * without one may be packed), looked at once through its descriptor; one
 * that cannot be opened counts as having none (its open fails it).
 */
bool src_has_xattrs(struct source *s, struct src_file *f);
/* Plans one pack of small files. 1, 0 (no job free), -1 on a failure. */
int src_plan_pack(struct source *s);

/* ---- source_post.c ---- */

/* Posts planned items in order. How many, or -1 on a failure. */
int src_post(struct source *s);
/* j's staging buffer is free again. */
void src_free_job(struct source *s, struct src_job *j);

/* ---- source_delete.c ---- */

/* DONE's body: whether the list was whole, the --max-delete. */
void src_fill_done(struct source *s, struct wire_done *d);
/* --delete on a push: the sink removed an entry, or not. 0 or the error. */
int src_on_deleted(struct source *s, const struct wire_deleted *d);
/* ... and said how it ended. 0 or the engine's error. */
int src_on_delete_end(struct source *s, const struct wire_delete_end *d);
/* Whether BYE may come now: DONE sent, every result (and deletion) in. */
bool src_bye_due(const struct source *s);

/* ---- source_links.c: -H ---- */

/* Whether the session keeps hard links (HELLO HARD_LINKS). */
bool src_links_asked(const struct source *s);
/* Whether f may be one name of several: -H, a whole regular file, nlink > 1. */
bool src_links_may(const struct source *s, const struct src_file *f);
/*
 * Before f is opened: 1 when an earlier name of its file was sent (f is
 * now a HARDLINK to it, f->w->link), 0 when not, -ENOMEM.
 */
int src_links_find(struct source *s, struct src_file *f);
/* f (opened, to be announced) is a first name: LINKED. 0 or -ENOMEM. */
int src_links_add(struct source *s, struct src_file *f);
void src_links_free(struct source *s);

/* ---- source_names.c ---- */

/*
 * With HELLO's LIST (a pull's --files-from), the walk is fed the names
 * that come in NAMES. 0, or -ENOMEM (src_names_free frees what was made).
 */
int src_names_init(struct source *s);
void src_names_free(struct source *s);
/* A NAMES came. 0, -EPROTO when none was due, or the engine's error. */
int src_names_on_msg(struct source *s, const struct wire_names *m);
/* Tells the client the names it is through with. Messages sent (0, 1). */
int src_names_pump(struct source *s);

/* ---- source_file.c: a file's reads on the source ---- */

/*
 * A lazy file (f->lazy) the sink wants: opened and checked to be what was
 * announced; f failed (and no fd) if not.
 */
void src_open_late(struct source *s, struct src_file *f);

/*
 * Whether fd, f's file opened again, is still the regular file the walk
 * saw (same size and modification time); f failed if not. Its stat in
 * *now.
 */
void src_check_unchanged(struct src_file *f, int fd, struct stat *now);

/*
 * f (open, a regular file) gets its O_DIRECT twin when it goes direct:
 * with --direct, or on auto when it is large and not in the page cache
 * already (then it is read from memory, buffered).
 */
void src_open_direct(struct source *s, struct src_file *f);
/* Closes f's descriptors. */
void src_close_file(struct src_file *f);
/* Worker: read a chunk, checksum, maybe compress, maybe seal. */
void src_read_chunk(struct workq_item *item);
/*
 * The engine thread: hands j (a CHUNK's job, JOB_READING after) to the
 * workers; a read that goes wholly direct goes through the pool's
 * io_uring when it has one (workq_push_read), the workers then only
 * checksum and seal.
 */
void src_push_chunk(struct source *s, struct src_job *j);
/* The user's report of f's outcome; counts it in the stats. */
void src_report(struct source *s, struct src_file *f, int status,
		const char *msg, const uint8_t *digest, unsigned int dlen);

/*
 * Worker: compresses and seals j's payload (raw, j->len bytes) into data,
 * with the IV (id, index) and the AAD of (id, offset). 0 or -errno.
 */
int src_seal(struct source *s, struct src_job *j, const uint8_t *raw,
	     uint8_t *data, uint32_t id, uint64_t offset, uint64_t index);

#endif
