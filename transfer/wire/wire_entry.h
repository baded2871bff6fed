/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Part of the wire format (wire.h includes it after its constants; include
 * wire.h): the messages of one entry, in the order of its life. FILE (its
 * kinds, flags, owner and range) and the XATTRS before it, source -> sink;
 * the sink's HAVE, and --resume's SUMS and MATCH; FILE_END with the digest;
 * the sink's FILE_RESULT, or KEPT and PACK_DONE for many entries at once.
 */
#ifndef RDCP_WIRE_ENTRY_H
#define RDCP_WIRE_ENTRY_H

#ifndef RDCP_WIRE_H
#error "include transfer/wire/wire.h, which includes this file"
#endif

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

#define WIRE_TOKEN_LEN 16u /* a split file's token (FILE with RANGE) */
#define WIRE_RANGES_MAX 65536u /* ranges of one split file */

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

enum wire_have_flags {
	WIRE_HAVE_SKIP = 1 << 1, /* send nothing: a result follows */
	WIRE_HAVE_SUMS = 1 << 2, /* --resume: send SUMS for every chunk */
};

/* The sink's one answer to a FILE when asked first (WIRE_HELLO_ASK). */
struct wire_have {
	uint32_t file_id;
	uint16_t flags; /* enum wire_have_flags */
	int32_t status; /* with SKIP: 0 (nothing to do) or -errno */
};

#define WIRE_SUMS_MAX 256u /* chunk digests per SUMS or bits per MATCH */
#define WIRE_SUM_LEN 16u   /* bytes of one chunk's resume digest */

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

enum wire_file_end_flags {
	WIRE_END_ABORT = 1 << 0, /* the source failed: discard the file */
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

#endif
