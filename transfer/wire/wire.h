/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The rdcp wire format: the 64-byte header of every ring slot (in the
 * ring's header area, beside the page-aligned payloads), the 32-bit
 * immediate that comes with it, and the control messages. Everything is
 * big-endian and encoded field by field; no struct is ever cast onto a buffer.
 * Decoders check every length and range they can know and return -EPROTO on
 * anything malformed.
 *
 * doc/PROTOCOL.md describes the same layout for humans.
 */
#ifndef RDCP_WIRE_H
#define RDCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_SLOT_HDR 64u    /* bytes of a slot's header (cm.h CM_SLOT_HDR) */
#define WIRE_CTRL_HDR 16u    /* bytes of every control message header */
#define WIRE_CTRL_SIZE 8192u /* control buffer size: header + body */
#define WIRE_CTRL_CREDITS 64u
#define WIRE_TAG_LEN 16u /* control message tag, after the handshake */
#define WIRE_DIGEST_MAX 32u
#define WIRE_NONCE_LEN 32u
#define WIRE_MAC_LEN 32u
#define WIRE_MSG_MAX 512u	  /* human-readable text in a message */
#define WIRE_FILES_MAX (1u << 24) /* entries (file ids) in one session */
/*
 * Files in flight: regular files (a FILE of kind FILE) a source has
 * announced and not yet had the FILE_RESULT of. The sink holds a locked
 * temporary and per-file state for each, so a source never has more, and
 * the sink refuses a FILE beyond them as a protocol error. Packed files,
 * directories and symlinks do not count.
 */
#define WIRE_INFLIGHT_MAX 128u
/*
 * ... and in a session that asks first (-n, -u, --sync), where the sink
 * answers each FILE as it comes and forgets a file it keeps: a re-run's
 * window of questions (doc/PROTOCOL.md, "Entries").
 */
#define WIRE_INFLIGHT_ASK_MAX 1024u

/* ---- ring slots ---- */

enum wire_slot_flags {
	WIRE_SLOT_PACKED = 1 << 0,     /* small files: records, see below */
	WIRE_SLOT_COMPRESSED = 1 << 1, /* zlib payload, raw_len bytes raw */
	WIRE_SLOT_ENCRYPTED = 1 << 2,  /* AES-256-GCM payload, tag below */
};

struct wire_slot_hdr {
	uint64_t seq;	  /* chunk sequence number in the session, from 0 */
	uint32_t file_id; /* as announced by WIRE_FILE */
	uint32_t len;	  /* payload bytes after the header */
	uint64_t offset;  /* byte offset of the payload in the file;
			   * PACKED: how many files (records) it holds */
	uint32_t crc;	  /* CRC32 of the raw payload (0: none, encrypted) */
	uint16_t flags;	  /* enum wire_slot_flags */
	uint32_t raw_len; /* payload bytes before compression (= len) */
	uint8_t tag[16];  /* GCM tag when encrypted, else zero */
};

/* Writes the 64-byte header, including its own CRC, into p. */
void wire_slot_encode(uint8_t *p, const struct wire_slot_hdr *h);
/* Decodes and checks the header CRC; -EPROTO (or -EBADMSG: CRC) on error. */
int wire_slot_decode(const uint8_t *p, struct wire_slot_hdr *h)
	__attribute__((warn_unused_result));

#define WIRE_AAD_LEN 24u

/*
 * The additional authenticated data of a sealed chunk (AES-256-GCM): the
 * header fields that say what the payload is, so a chunk cannot be moved
 * to another file or offset: file_id u32, offset u64, raw_len u32, flags
 * u16 and 6 zero bytes, big-endian.
 */
void wire_chunk_aad(uint8_t aad[WIRE_AAD_LEN], uint32_t file_id,
		    uint64_t offset, uint32_t raw_len, uint16_t flags);

/* Immediate: the low 16 bits of seq above the slot index. */
static inline uint32_t wire_imm(uint64_t seq, unsigned int slot)
{
	return (uint32_t)(seq & 0xffffu) << 16 | (slot & 0xffffu);
}

static inline unsigned int wire_imm_slot(uint32_t imm)
{
	return imm & 0xffffu;
}

static inline uint16_t wire_imm_seq16(uint32_t imm)
{
	return (uint16_t)(imm >> 16);
}

/* ---- control messages ---- */

enum wire_type {
	WIRE_HELLO = 1,	  /* client -> server: who, what, where */
	WIRE_WELCOME,	  /* server -> client: accepted or why not */
	WIRE_RING,	  /* data sink -> source: the ring's address/rkey */
	WIRE_FILE,	  /* source -> sink: a file follows */
	WIRE_FILE_END,	  /* source -> sink: all chunks posted, digest */
	WIRE_FILE_RESULT, /* sink -> source: verified and placed, or not */
	WIRE_DONE,	  /* source -> sink: no more files */
	WIRE_BYE,	  /* sink -> source: every result sent */
	WIRE_ERROR,	  /* either: fatal session error */
	WIRE_CREDIT,	  /* either: acks only (also the keepalive) */
	WIRE_AUTH,	  /* client -> server: challenge response */
	WIRE_HAVE,	  /* sink -> source: what of a file is there */
	WIRE_PACK_DONE,	  /* sink -> source: a packed slot's files placed */
	WIRE_SUMS,	  /* source -> sink: --resume: its chunks' digests */
	WIRE_MATCH,	  /* sink -> source: --resume: which of them match */
	WIRE_DELETED,	  /* sink -> source: --delete: an entry removed */
	WIRE_DELETE_END,  /* sink -> source: --delete: the last DELETED */
	WIRE_NAMES,	  /* client -> server: --files-from on a pull */
	WIRE_NAMES_ACK,	  /* server -> client: names it is through with */
	WIRE_KEPT,	  /* sink -> source: --sync etc.: files kept as is */
	WIRE_NOTICE,	  /* sink -> source: a warning for the user */
	WIRE_XATTRS,	  /* source -> sink: -X/-A: the next FILE's xattrs */
	WIRE_LANES,	  /* server -> client: the lanes that joined */
	WIRE_BATCH,	  /* either: several entry messages in one */
	WIRE_TYPE_MAX,
};

enum wire_role {
	WIRE_PUSH = 1,
	WIRE_PULL = 2
};

enum wire_csum {
	WIRE_CSUM_NONE = 0,
	WIRE_CSUM_CRC32 = 1,  /* crc32_combine of the chunk CRCs */
	WIRE_CSUM_SHA256 = 2, /* SHA-256 over the chunks' SHA-256s */
};

enum wire_features {
	WIRE_FEAT_AUTH = 1 << 0, /* this side holds a key and will prove it */
	WIRE_FEAT_PACK = 1 << 1, /* this side takes packed slots as a sink */
};

enum wire_hello_flags {
	WIRE_HELLO_FSYNC = 1 << 0,
	WIRE_HELLO_DEST_DIR = 1 << 1,	/* DEST must be a directory */
	WIRE_HELLO_RECURSIVE = 1 << 2,	/* pull: walk directory sources */
	WIRE_HELLO_PRESERVE = 1 << 3,	/* exact mode, atime and mtime */
	WIRE_HELLO_RESUME = 1 << 4,	/* reuse verified parts; keep temps */
	WIRE_HELLO_NO_CLOBBER = 1 << 5, /* never replace an existing file */
	WIRE_HELLO_UPDATE = 1 << 6,	/* replace only older files */
	WIRE_HELLO_ENCRYPT = 1 << 7,	/* AES-256-GCM chunks (needs a key) */
	WIRE_HELLO_COMPRESS = 1 << 8,	/* chunks may come zlib-compressed */
	WIRE_HELLO_SPARSE = 1 << 9,	/* zero chunks become holes */
	WIRE_HELLO_DRY_RUN = 1 << 10,	/* say what would be done, do none */
	WIRE_HELLO_DELETE = 1 << 11,	/* then remove what was not sent */
	WIRE_HELLO_LIST = 1 << 12,	/* pull: NAMES beneath the one path */
	WIRE_HELLO_DIRECT = 1 << 13,	/* O_DIRECT for every file it fits */
	WIRE_HELLO_NO_DIRECT = 1 << 14, /* never O_DIRECT (not with DIRECT) */
	WIRE_HELLO_OWNER = 1 << 15,	/* -o: keep owners (FILE's OWNER) */
	WIRE_HELLO_GROUP = 1 << 16,	/* -g: keep groups */
	WIRE_HELLO_NUMERIC_IDS = 1 << 17, /* --numeric-ids: no names */
	WIRE_HELLO_XATTRS = 1 << 18,	  /* -X: extended attributes */
	WIRE_HELLO_ACLS = 1 << 19,	  /* -A: POSIX ACLs (as xattrs) */
	WIRE_HELLO_DEST_NAMED = 1 << 20, /* DEST is the one SRC's copy */
	WIRE_HELLO_HARD_LINKS = 1 << 21, /* -H: hard links kept (HARDLINK) */
	WIRE_HELLO_DEVICES = 1 << 22,	 /* --devices: device nodes (SPECIAL) */
	WIRE_HELLO_SPECIALS = 1 << 23,	 /* --specials: FIFOs, sockets */
};

#define WIRE_HELLO_OWNERS (WIRE_HELLO_OWNER | WIRE_HELLO_GROUP)

/* Whether the sink answers each FILE with HAVE before the data flows. */
#define WIRE_HELLO_ASK                                                         \
	(WIRE_HELLO_RESUME | WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE |       \
	 WIRE_HELLO_DRY_RUN)

enum wire_file_kind {
	WIRE_KIND_FILE = 0,
	WIRE_KIND_DIR = 1,
	WIRE_KIND_SYMLINK = 2,
	WIRE_KIND_OTHER = 3, /* DELETED only: a FIFO, socket or device */
	/*
	 * -H: another name of a regular file sent before with the LINKED
	 * flag; link holds that file's path (as FILE names entries).
	 */
	WIRE_KIND_HARDLINK = 4,
	/*
	 * -D: a device node (--devices), FIFO or socket (--specials); mode
	 * carries the type bits (S_IFMT) too, size a device's number.
	 */
	WIRE_KIND_SPECIAL = 5,
	WIRE_KIND_MAX = WIRE_KIND_SPECIAL,
};

/* A SPECIAL's device number in FILE's size field: major << 32 | minor. */
#define WIRE_RDEV(major, minor) ((uint64_t)(major) << 32 | (uint32_t)(minor))
#define WIRE_RDEV_MAJOR(v) ((uint32_t)((v) >> 32))
#define WIRE_RDEV_MINOR(v) ((uint32_t)(v))

enum wire_file_flags {
	WIRE_FILE_SPARSE = 1 << 0, /* has holes: size says little of space */
	WIRE_FILE_RANGE = 1 << 1,  /* a byte range of it (rdcp-mpi): below */
	WIRE_FILE_OWNER = 1 << 2,  /* owner and group follow (HELLO OWNERS) */
	WIRE_FILE_XATTRS = 1 << 3, /* an XATTRS for it came right before */
	WIRE_FILE_LINKED = 1 << 4, /* -H: HARDLINKs may name it later */
};

#define WIRE_OWNER_NAME_MAX 255u /* bytes of a user or group name */

/*
 * An entry's owner and group (-o/-g), with their names on the source's
 * side ("" when it has none, or with --numeric-ids): the sink maps a name
 * to its own id and falls back to the number. On the wire: uid u32, gid
 * u32, then each name as a length u8 and its bytes (no NUL inside).
 */
struct wire_owner {
	uint32_t uid, gid;
	char user[WIRE_OWNER_NAME_MAX + 1];
	char group[WIRE_OWNER_NAME_MAX + 1];
};

/* Bytes o takes on the wire. */
size_t wire_owner_len(const struct wire_owner *o);

struct be_put; /* util/be_codec.h */
struct be_get;
/* Encodes o; decodes one (a NUL inside a name sets r's error). */
void wire_owner_put(struct be_put *w, const struct wire_owner *o);
void wire_owner_get(struct be_get *r, struct wire_owner *o);

/*
 * HELLO's sync: which existing files the sink keeps as they are (--sync,
 * -a). A file that passes the check is answered HAVE SKIP and kept; one
 * that fails is sent whole, or with CHECKSUM chunk by chunk through
 * SUMS/MATCH as --resume does (only the chunks that differ cross).
 */
enum wire_sync {
	WIRE_SYNC_NONE = 0,	/* copy everything (scp, cp) */
	WIRE_SYNC_EXISTS = 1,	/* the name exists as the same kind */
	WIRE_SYNC_SIZE = 2,	/* ... and a regular file has the same size */
	WIRE_SYNC_MTIME = 3,	/* ... and the same mtime (rsync's check) */
	WIRE_SYNC_CHECKSUM = 4, /* every chunk's digest matches */
	WIRE_SYNC_MAX = WIRE_SYNC_CHECKSUM,
};

#define WIRE_TOKEN_LEN 16u /* a split file's token (FILE with RANGE) */
#define WIRE_RANGES_MAX 65536u /* ranges of one split file */

enum wire_have_flags {
	WIRE_HAVE_SKIP = 1 << 1, /* send nothing: a result follows */
	WIRE_HAVE_SUMS = 1 << 2, /* --resume: send SUMS for every chunk */
};

#define WIRE_SUMS_MAX 256u /* chunk digests per SUMS or bits per MATCH */
#define WIRE_SUM_LEN 16u   /* bytes of one chunk's resume digest */

enum wire_file_end_flags {
	WIRE_END_ABORT = 1 << 0, /* the source failed: discard the file */
};

#define WIRE_PATHS_MAX 4096u   /* bytes of HELLO paths, NULs included */
#define WIRE_CLIENT_MAX 64u    /* bytes of HELLO's client name (KEY_NAME_MAX) */
#define WIRE_FILTERS_MAX 2048u /* bytes of HELLO filter rules, NULs too */

struct wire_hello {
	uint16_t role;	   /* enum wire_role */
	uint8_t csum;	   /* enum wire_csum */
	uint8_t level;	   /* zlib level with WIRE_HELLO_COMPRESS, else 0 */
	uint32_t flags;	   /* enum wire_hello_flags */
	uint32_t features; /* enum wire_features */
	uint32_t chunk_size;
	uint64_t bwlimit; /* bytes/s the data source may send, 0: no limit */
	uint8_t nonce[WIRE_NONCE_LEN];
	/*
	 * Paths relative to the server's root, each NUL-terminated, back to
	 * back: push sends one (DEST), pull the SRCs. paths_len counts every
	 * byte including the NULs.
	 */
	uint16_t npaths;
	uint16_t paths_len;
	char paths[WIRE_PATHS_MAX];
	/*
	 * A pull's --include/--exclude rules, for the server's walk, in
	 * order, each NUL-terminated: '+' (include) or '-' (exclude), then
	 * the pattern as the user gave it (util/filter.h). A push has none:
	 * its client walks.
	 */
	uint16_t nfilters;
	uint16_t filters_len;
	char filters[WIRE_FILTERS_MAX];
	/* Lanes (--streams) the client wants, 1..WIRE_STREAMS_MAX (0: 1). */
	uint8_t streams;
	/*
	 * enum wire_sync (0..WIRE_SYNC_MAX), the byte after streams; non-zero
	 * makes the sink answer each FILE with HAVE, as WIRE_HELLO_ASK does.
	 */
	uint8_t sync;
	/*
	 * The client's name (a named key, rdcp --keygen --name): after sync,
	 * a u8 length (1..WIRE_CLIENT_MAX) and the bytes, only when the name
	 * is not empty; "" sends neither (the site's key, or none).
	 */
	char client[WIRE_CLIENT_MAX + 1];
};

#define WIRE_STREAMS_MAX 16u
#define WIRE_LANE_TOKEN_LEN 8u /* WELCOME's token for lanes to join */

struct wire_welcome {
	int32_t status; /* 0 or a negative errno */
	uint32_t features;
	uint8_t nonce[WIRE_NONCE_LEN];
	uint8_t mac[WIRE_MAC_LEN]; /* server's proof, zero without auth */
	char msg[WIRE_MSG_MAX + 1];
	/*
	 * The lanes agreed (min of HELLO's and the receiver's limit, 1..16;
	 * 0 means 1) and the token lanes 1..streams-1 join with (zero with
	 * one lane).
	 */
	uint8_t streams;
	uint8_t token[WIRE_LANE_TOKEN_LEN];
	/*
	 * Rails (doc/PROTOCOL.md: Rails): 0 or 1, one (the address
	 * connected to); else 2..streams, and rail[1..rails-1] the addresses
	 * lanes k with k % rails == r join (rail[0] unused: lane 0's).
	 */
	uint8_t rails;
	struct wire_rail {
		uint8_t family;	  /* 4 or 6 */
		uint8_t addr[16]; /* IPv4 in the first 4 bytes, rest zero */
	} rail[WIRE_STREAMS_MAX];
};

struct wire_auth {
	uint8_t mac[WIRE_MAC_LEN]; /* client's proof */
};

struct wire_ring {
	uint64_t addr; /* slot 0's payload */
	uint32_t rkey;
	uint16_t slots;
	uint32_t chunk_size; /* payload bytes per slot: the chunk size */
	uint64_t hdr_addr;  /* slot 0's header */
	uint8_t target;	    /* enum wire_ring_target: where DEST put it */
	/*
	 * The rails of WELCOME (0 or 1: one) and the rkey of rail r for the
	 * writes of lanes k with k % rails == r (rail 0's: rkey; rkeys[0]
	 * unused).
	 */
	uint8_t rails;
	uint32_t rkeys[WIRE_STREAMS_MAX];
};

/*
 * RING's target: what the sink made of DEST. The client of a push keeps
 * NAMED for its next attempt (HELLO flag DEST_NAMED), so that a retry puts
 * the copy where the first attempt did, not inside it.
 */
enum wire_ring_target {
	WIRE_TARGET_INSIDE = 0, /* a directory: entries go inside */
	WIRE_TARGET_NAMED = 1,	/* the new name of the one top entry */
};

struct wire_file {
	uint32_t file_id;
	uint8_t kind;	/* enum wire_file_kind */
	uint32_t flags; /* enum wire_file_flags */
	uint64_t size;	/* 0 unless a regular file (a device: WIRE_RDEV) */
	uint32_t mode;	/* permissions; a SPECIAL's with its type bits */
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	int64_t atime_sec;
	uint32_t atime_nsec;
	char path[4096]; /* relative name: basename, or beneath one */
	char link[4096]; /* symlink target, copied as is; a HARDLINK's
			  * file's path; else "" */
	/*
	 * With WIRE_FILE_RANGE only (a regular file, after link): this FILE
	 * sends bytes [range_off, range_off + range_len) of the file, range
	 * range_idx of range_count, all of one split sharing token; size,
	 * mode and times stay the whole file's.
	 */
	uint64_t range_off, range_len; /* bytes */
	uint32_t range_idx, range_count;
	uint8_t token[WIRE_TOKEN_LEN];
	/* With WIRE_FILE_OWNER (after the range's fields, if any). */
	struct wire_owner owner;
};

/* The sink's one answer to a FILE when asked first (WIRE_HELLO_ASK). */
struct wire_have {
	uint32_t file_id;
	uint16_t flags; /* enum wire_have_flags */
	int32_t status; /* with SKIP: 0 (nothing to do) or -errno */
};

/*
 * --resume, source -> sink: the resume digests of chunks [first, first +
 * count) of a file, in order, each chunk's once (see transfer/session/payload.h).
 */
struct wire_sums {
	uint32_t file_id;
	uint64_t first;
	uint16_t count; /* 1..WIRE_SUMS_MAX */
	uint8_t sums[WIRE_SUMS_MAX][WIRE_SUM_LEN];
};

/*
 * --resume, sink -> source: for chunks [first, first + count), in order,
 * whether the sink's chunk has the digest the source sent: bit i & 7 of
 * byte i / 8 for chunk first + i. Nothing else of the sink's content.
 */
struct wire_match {
	uint32_t file_id;
	uint64_t first;
	uint16_t count; /* 1..WIRE_SUMS_MAX */
	uint8_t bits[WIRE_SUMS_MAX / 8];
};

/*
 * seq_end (FILE_END, DONE, NAMES_ACK): the source's chunk seq after the
 * last slot it wrote before sending the message. The ring's writes may
 * arrive in any order and overtake or trail control messages (several
 * queue pairs), so the sink acts on such a message only once it has taken
 * every slot before seq_end; one beyond what its credits allowed is a
 * protocol error.
 */
struct wire_file_end {
	uint32_t file_id;
	uint32_t flags; /* enum wire_file_end_flags */
	uint64_t nchunks;
	uint64_t seq_end; /* slots written before it (see above) */
	uint8_t csum; /* enum wire_csum */
	uint8_t digest_len;
	uint8_t digest[WIRE_DIGEST_MAX];
	int32_t status;		    /* with ABORT: why, a negative errno */
	char msg[WIRE_MSG_MAX + 1]; /* with ABORT: why, for the user */
};

enum wire_result_flags {
	WIRE_RESULT_SKIPPED = 1 << 0, /* left as it was (no-clobber etc.) */
	WIRE_RESULT_DRY = 1 << 1,     /* --dry-run: would be made, was not */
	WIRE_RESULT_EXISTS = 1 << 2,  /* --dry-run: the name is taken now */
	WIRE_RESULT_FINAL = 1 << 3,   /* a range's: the file is whole and
				       * placed; digest: the whole file's */
};

struct wire_file_result {
	uint32_t file_id;
	int32_t status; /* 0, or a negative errno (-EBADMSG: verify) */
	uint32_t flags; /* enum wire_result_flags */
	uint64_t sent;	/* payload bytes that came over the link */
	uint8_t digest_len;
	uint8_t digest[WIRE_DIGEST_MAX];
	char msg[WIRE_MSG_MAX + 1];
};

/*
 * Asked first (WIRE_HELLO_ASK, HELLO sync), sink -> source: every entry
 * in [first_id, first_id + count) is kept as it is, as a HAVE with SKIP
 * and status 0 then a FILE_RESULT with SKIPPED would say for a regular
 * file (a FILE_RESULT with SKIPPED for a symlink), in one message: a
 * re-run of an unchanged tree costs the sink no message per file. Each
 * id is one the source announced and has no answer for yet.
 */
#define WIRE_KEPT_MAX 4096u /* entries in one KEPT */

struct wire_kept {
	uint32_t first_id;
	uint32_t count; /* 1..WIRE_KEPT_MAX */
};

/*
 * Every file in [first_id, first_id + count) of a packed slot that had no
 * FILE_RESULT of its own (those, failures, come first) is verified and in
 * place under its final name.
 */
struct wire_pack_done {
	uint32_t first_id;
	uint32_t count;
};

enum wire_done_flags {
	/*
	 * Every entry beneath the SRCs was announced: none failed, none
	 * was skipped (a FIFO, a directory made after the copy began, ...).
	 * Without it a --delete sink deletes nothing.
	 */
	WIRE_DONE_WHOLE = 1 << 0,
};

#define WIRE_DELETE_ANY UINT64_MAX /* DONE's max_delete: no limit */

struct wire_done {
	uint32_t flags;	     /* enum wire_done_flags */
	uint64_t max_delete; /* --delete: entries the sink may remove */
	uint64_t seq_end;    /* slots written before it (wire_file_end) */
};

enum wire_deleted_flags {
	WIRE_DELETED_DRY = 1 << 0, /* --dry-run: would be removed, was not */
};

/*
 * --delete, sink -> source (a push): an entry of DEST the source did not
 * send, removed (status 0) or not (-errno, msg says why).
 */
struct wire_deleted {
	uint8_t kind;	 /* enum wire_file_kind, WIRE_KIND_OTHER too */
	uint8_t flags;	 /* enum wire_deleted_flags */
	int32_t status;	 /* 0 or a negative errno */
	char path[4096]; /* beneath DEST, as FILE names entries; with a
			  * status, "": DEST itself could not be looked at */
	char msg[WIRE_MSG_MAX + 1];
};

/*
 * --delete, sink -> source (a push), after the last DELETED, before BYE:
 * status 0 and how many entries were removed (or, dry run, would be);
 * -E2BIG: none was, count (more than max_delete) would have been;
 * -ECANCELED: none was looked at (a failure, a list not whole).
 */
struct wire_delete_end {
	int32_t status;
	uint64_t count;
	char msg[WIRE_MSG_MAX + 1];
};

/*
 * --files-from on a pull (HELLO flag LIST), client -> server: the next
 * names of the list, each beneath the HELLO's one path, in the list's
 * order. The server holds at most WIRE_NAMES_WINDOW of them (each costs
 * wire_name_cost()) that it has not said it is through with (NAMES_ACK):
 * the client sends no more until it does, the server refuses more as a
 * protocol error. END: the list ends with these (count may then be 0).
 */
enum wire_names_flags {
	WIRE_NAMES_END = 1 << 0,
};

#define WIRE_NAMES_WINDOW (256u << 10) /* cost of unanswered names */
#define WIRE_NAME_OVERHEAD 32u	       /* cost of a name beyond its bytes */
#define WIRE_NAME_MAX 4095u	       /* bytes of one name, without its NUL */
/* bytes of names (NULs included) in one NAMES, with header and tag */
#define WIRE_NAMES_BYTES (WIRE_CTRL_SIZE - WIRE_CTRL_HDR - 6u - WIRE_TAG_LEN)

/* What a name of len bytes (no NUL) counts against WIRE_NAMES_WINDOW. */
static inline uint32_t wire_name_cost(size_t len)
{
	return (uint32_t)len + 1 + WIRE_NAME_OVERHEAD;
}

struct wire_names {
	uint16_t flags; /* enum wire_names_flags */
	uint16_t count; /* names in names[] */
	uint16_t len;	/* bytes of names[], NULs included */
	/* count names, 1..WIRE_NAME_MAX bytes, NUL-terminated, back to back */
	char names[WIRE_NAMES_BYTES];
};

/*
 * server -> client: every entry of the list's first done names (counted
 * from the first NAMES of the session) went out before this message (a
 * FILE sent, or the packed slot it is in written): the client may forget
 * them, and send names costing as much as they did.
 */
struct wire_names_ack {
	uint64_t done;
	uint64_t seq_end; /* slots written before it (wire_file_end) */
};

/* Appends name (1..WIRE_NAME_MAX bytes) to n. 0, or -ENOSPC: no room. */
int wire_names_add(struct wire_names *n, const char *name, size_t len)
	__attribute__((warn_unused_result));

/*
 * sink -> source on a push: a warning for the user on the client's side
 * (what the receiver could not keep, once per kind and session: -o's
 * owners, -g's groups). A source takes at most WIRE_NOTICES_MAX a
 * session and ignores the rest.
 */
#define WIRE_NOTICES_MAX 16u

struct wire_notice {
	char msg[WIRE_MSG_MAX + 1];
};

/*
 * --streams, server -> client, once the receiver stopped taking joins
 * (doc/PROTOCOL.md "Lanes"): lanes 0..up-1 carry the slots' writes, the
 * slots of lanes up..streams-1 go on lane 0. 1..WIRE_STREAMS_MAX; the
 * client checks it against WELCOME's streams.
 */
struct wire_lanes {
	uint8_t up;
};

/*
 * Either way, in a session that asks first (-n, -u, --sync): count (at
 * least 2) entry messages (wire_batch_may) back to back, each encoded as
 * it would travel alone but untagged and with zero acks; the BATCH's own
 * header carries the acks and its tag covers them all. One control
 * credit for all of them: a re-run announces hundreds of files per
 * message instead of one (doc/PROTOCOL.md, "Batches"). Decoded, the
 * inner messages are at [off, off + len) of the received buffer;
 * wire_batch_next() takes them one by one.
 */
struct wire_batch {
	uint16_t count;
	uint32_t off, len;
};

/*
 * -X/-A, source -> sink, right before the FILE (flag XATTRS) of file_id:
 * its extended attributes, count entries back to back in data (len
 * bytes): name length u8 (1..255), value length u16, the name (no NUL),
 * the value. The whole fits one control message: a file's attributes
 * are at most WIRE_XATTRS_BYTES, so a peer can make the sink hold no
 * more than that per file in flight.
 */
#define WIRE_XATTRS_BYTES (WIRE_CTRL_SIZE - WIRE_CTRL_HDR - 8u - WIRE_TAG_LEN)
#define WIRE_XATTR_NAME_MAX 255u
/*
 * -A without --numeric-ids: an entry of this name (never a real attribute:
 * Linux has no such namespace, and a sink sets none of it) carries the
 * names of the users and groups the ACLs name, records of u8 tag (2 user,
 * 8 group: the ACL's own), u32 id, u8 name length (1..255), the name.
 */
#define WIRE_XATTR_ACL_NAMES "rdcp.acl_names"

struct wire_xattrs {
	uint32_t file_id;
	uint16_t count;
	uint16_t len; /* bytes of data */
	uint8_t data[WIRE_XATTRS_BYTES];
};

/* Appends an attribute. 0, -EINVAL (a bad name) or -ENOSPC (no room). */
int wire_xattrs_add(struct wire_xattrs *x, const char *name,
		    const void *value, size_t vlen)
	__attribute__((warn_unused_result));
/*
 * The attribute at *pos of a checked (decoded or built) x, and *pos moved
 * past it: true, or false at the end. name is nlen bytes, not NUL-ended.
 */
bool wire_xattrs_next(const struct wire_xattrs *x, size_t *pos,
		      const char **name, size_t *nlen, const uint8_t **value,
		      size_t *vlen);

struct wire_bye {
	uint64_t files_ok;
	uint64_t files_failed;
	uint64_t bytes;
};

struct wire_error {
	int32_t status; /* negative errno */
	uint32_t klass; /* enum xfer_fail of the sender's verdict */
	char msg[WIRE_MSG_MAX + 1];
};

/*
 * Header byte 1 of a control message: its last WIRE_TAG_LEN bytes are a
 * tag, counted in its total length (see wire_tag_append()).
 */
#define WIRE_CTRL_TAGGED 1u

/* Every control message: header plus one of the bodies above. */
struct wire_msg {
	uint8_t type;
	bool tagged;	   /* decoded: it carried a tag (not checked here) */
	uint32_t ctrl_ack; /* cumulative control messages consumed */
	uint32_t slot_ack; /* cumulative ring slots released (sink) */
	union {
		struct wire_hello hello;
		struct wire_welcome welcome;
		struct wire_ring ring;
		struct wire_file file;
		struct wire_file_end end;
		struct wire_file_result result;
		struct wire_bye bye;
		struct wire_error error;
		struct wire_auth auth;
		struct wire_have have;
		struct wire_sums sums;
		struct wire_match match;
		struct wire_pack_done pack_done;
		struct wire_kept kept;
		struct wire_done done;
		struct wire_deleted deleted;
		struct wire_delete_end delete_end;
		struct wire_names names;
		struct wire_names_ack names_ack;
		struct wire_notice notice;
		struct wire_xattrs xattrs;
		struct wire_lanes lanes;
		struct wire_batch batch;
	} u;
};

/*
 * Encodes m into buf (cap bytes), untagged. Returns the length, or
 * -EMSGSIZE. Strings are taken up to their NUL. A message that will be
 * tagged must leave WIRE_TAG_LEN bytes of its buffer free.
 */
int wire_encode(const struct wire_msg *m, uint8_t *buf, size_t cap)
	__attribute__((warn_unused_result));

/*
 * Decodes len bytes. Returns 0 or -EPROTO for anything malformed: unknown
 * type or header flags, short or trailing bytes, lengths past the end,
 * strings with NUL bytes inside or over their limit. A tagged message's
 * body ends before its tag and m->tagged is set; the tag itself is the
 * caller's to check (wire_tag_split()). Paths are NOT checked for escapes
 * here: that is path_check_relative()'s job where they are used.
 */
int wire_decode(const uint8_t *buf, size_t len, struct wire_msg *m)
	__attribute__((warn_unused_result));

/* Whether a message of type may travel inside a BATCH. */
bool wire_batch_may(unsigned int type);
/* Starts a BATCH at buf (at least WIRE_CTRL_HDR + 2 bytes); its length. */
size_t wire_batch_start(uint8_t *buf);
/*
 * Appends the encoded message msg (mlen bytes, untagged) to the BATCH of
 * *len bytes at buf if it fits in cap; false (nothing changed) if not.
 */
bool wire_batch_add(uint8_t *buf, size_t *len, size_t cap, const uint8_t *msg,
		    size_t mlen);
/*
 * Decodes the inner message of batch b (decoded from buf) at *pos (0:
 * the first) into m and moves *pos past it. 0, 1 past the last, or
 * -EPROTO (wire_decode checked them all, so only a changed buffer).
 */
int wire_batch_next(const uint8_t *buf, const struct wire_batch *b,
		    uint32_t *pos, struct wire_msg *m);

/*
 * Rewrites the acks of a control message already encoded in buf (at least
 * WIRE_CTRL_HDR bytes): the engine fills them in when the message is
 * posted, not when it is queued.
 */
void wire_set_acks(uint8_t *buf, uint32_t ctrl_ack, uint32_t slot_ack);

const char *wire_type_name(unsigned int type);

/*
 * ---- control message tags (protocol 3) ----
 *
 * After the handshake every control message ends in a 16-byte tag: the
 * header's byte 1 has WIRE_CTRL_TAGGED and its total length counts the
 * tag. The tag authenticates everything before it, header included, so
 * the acks must be in place before it is computed. What the tag is (an
 * HMAC under the session's control key) is auth.c's business.
 */

/*
 * Makes the len-byte message in buf (cap bytes) a tagged one: sets the
 * flag and the total length to len + WIRE_TAG_LEN. The caller then writes
 * the tag of buf[0, len) at buf + len. Returns the new length, or
 * -EMSGSIZE when the tag does not fit.
 */
int wire_tag_append(uint8_t *buf, size_t len, size_t cap)
	__attribute__((warn_unused_result));

/*
 * Whether the len bytes received in buf are a tagged message: its flag is
 * set and it is long enough to hold a header and a tag. *covered is then
 * the length the tag covers; the tag is at buf + *covered.
 */
bool wire_tag_split(const uint8_t *buf, size_t len, size_t *covered);

/*
 * ---- packed slots ----
 *
 * Small regular files travel several to a slot (WIRE_SLOT_PACKED), each a
 * record that carries its own announcement, digest and data, so a file
 * costs no control message of its own. The slot header's file_id is the
 * first record's id, offset the number of records; records follow back to
 * back with consecutive ids. The slot CRC covers every record's header,
 * digest and path (whatever the checksum), each file's data its digest;
 * a sealed slot's GCM tag covers everything. A record is a 44-byte header
 * then, with WIRE_PACK_OWNER, the owner (struct wire_owner's bytes), then
 * digest, path and data:
 *
 *   u32 file_id, u8 flags, u8 digest_len, u16 path_len, u32 mode,
 *   i64 mtime_sec, u32 mtime_nsec, i64 atime_sec, u32 atime_nsec,
 *   u32 size, i32 status
 *
 * With WIRE_PACK_ABORT the source could not read the file: status says
 * why and the data is the message for the user, not file content.
 */
#define WIRE_PACK_REC_HDR 44u
#define WIRE_PACK_MAX_FILES 1024u /* records in one slot */

enum wire_pack_flags {
	WIRE_PACK_ABORT = 1 << 0,
	WIRE_PACK_OWNER = 1 << 1, /* the owner (wire_owner) follows the header */
};

struct wire_pack_rec {
	uint32_t file_id;
	uint8_t flags; /* enum wire_pack_flags */
	uint8_t digest_len;
	uint16_t path_len; /* 1 .. 4095; no NUL */
	uint32_t mode;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	int64_t atime_sec;
	uint32_t atime_nsec;
	uint32_t size;	/* data bytes; with ABORT the message's */
	int32_t status; /* 0, or with ABORT a negative errno */
	uint8_t digest[WIRE_DIGEST_MAX]; /* the file's, as in FILE_END */
	struct wire_owner owner;	 /* with WIRE_PACK_OWNER */
	const char *path;		 /* path_len bytes into the slot */
	const uint8_t *data;		 /* size bytes into the slot */
};

/* Bytes the record takes in a slot, without its owner (below). */
static inline size_t wire_pack_rec_len(size_t path_len, size_t digest_len,
				       size_t size)
{
	return WIRE_PACK_REC_HDR + digest_len + path_len + size;
}

/* Bytes r's owner adds to its record: 0 without WIRE_PACK_OWNER. */
size_t wire_pack_owner_len(const struct wire_pack_rec *r);

/*
 * Writes r's header, owner (with WIRE_PACK_OWNER), digest and path at p;
 * the caller puts r->size bytes of data right after them, at the returned
 * offset.
 */
size_t wire_pack_put(uint8_t *p, const struct wire_pack_rec *r);

/*
 * The digest (enum wire_csum) a record carries: what FILE_END would for
 * the same file sent as one chunk (or none, when empty). Returns its
 * length, or -errno.
 */
int wire_pack_digest(uint8_t csum, const uint8_t *data, uint32_t len,
		     uint8_t out[WIRE_DIGEST_MAX])
	__attribute__((warn_unused_result));

/*
 * Decodes the record at *pos of a packed payload of len bytes and moves
 * *pos past it. 0, or -EPROTO when it is malformed or runs past the end.
 */
int wire_pack_next(const uint8_t *p, size_t len, size_t *pos,
		   struct wire_pack_rec *r) __attribute__((warn_unused_result));

/*
 * "file", "dir", "symlink", "other", "hardlink" or "special": an enum
 * wire_file_kind (JSON, logs).
 */
const char *wire_kind_name(unsigned int kind);
/*
 * Whether a SPECIAL's mode (type bits and permissions) and size (a
 * device's number, else 0) are one: a character or block device, a FIFO
 * or a socket, with S_IFMT's Linux values (0020000, 0060000, 0010000,
 * 0140000).
 */
bool wire_special_ok(uint32_t mode, uint64_t size);

/* Appends a path to h->paths. 0 or -ENAMETOOLONG when they are full. */
int wire_hello_add_path(struct wire_hello *h, const char *path)
	__attribute__((warn_unused_result));

/* The i-th path of a decoded (or built) HELLO; "" past the end. */
const char *wire_hello_path(const struct wire_hello *h, unsigned int i);

/*
 * Appends a filter rule to h->filters. 0, -EINVAL for an empty pattern,
 * or -ENAMETOOLONG when they are full.
 */
int wire_hello_add_filter(struct wire_hello *h, bool include,
			  const char *pattern)
	__attribute__((warn_unused_result));

/*
 * The i-th filter rule of a decoded (or built) HELLO, '+' or '-' first;
 * "" past the end.
 */
const char *wire_hello_filter(const struct wire_hello *h, unsigned int i);

#endif
