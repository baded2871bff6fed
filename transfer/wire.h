/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The rdcp wire format: the 64-byte header at the start of every ring slot,
 * the 32-bit immediate of each RDMA WRITE WITH IMMEDIATE, and the control
 * messages. Everything is big-endian and encoded field by field; no struct
 * is ever cast onto a buffer. Decoders check every length and range they
 * can know and return -EPROTO on anything malformed.
 *
 * README.md "Wire protocol" describes the same layout for humans.
 */
#ifndef RDCP_WIRE_H
#define RDCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_SLOT_HDR 64u    /* bytes before the payload in every slot */
#define WIRE_CTRL_HDR 16u    /* bytes of every control message header */
#define WIRE_CTRL_SIZE 8192u /* control buffer size: header + body */
#define WIRE_CTRL_CREDITS 64u
#define WIRE_DIGEST_MAX 32u
#define WIRE_NONCE_LEN 32u
#define WIRE_MAC_LEN 32u
#define WIRE_MSG_MAX 512u /* human-readable text in a message */

/* ---- ring slots ---- */

enum wire_slot_flags {
	WIRE_SLOT_PACKED = 1 << 0,     /* reserved: several small files */
	WIRE_SLOT_COMPRESSED = 1 << 1, /* reserved: zlib payload */
	WIRE_SLOT_ENCRYPTED = 1 << 2,  /* reserved: AES-256-GCM, tag below */
};

struct wire_slot_hdr {
	uint64_t seq;	  /* chunk sequence number in the session, from 0 */
	uint32_t file_id; /* as announced by WIRE_FILE */
	uint32_t len;	  /* payload bytes after the header */
	uint64_t offset;  /* byte offset of the payload in the file */
	uint32_t crc;	  /* CRC32 of the payload (0 with checksum none) */
	uint16_t flags;	  /* enum wire_slot_flags */
	uint32_t raw_len; /* payload bytes before compression (= len) */
	uint8_t tag[16];  /* GCM tag when encrypted, else zero */
};

/* Writes the 64-byte header, including its own CRC, into p. */
void wire_slot_encode(uint8_t *p, const struct wire_slot_hdr *h);
/* Decodes and checks the header CRC; -EPROTO (or -EBADMSG: CRC) on error. */
int wire_slot_decode(const uint8_t *p, struct wire_slot_hdr *h)
	__attribute__((warn_unused_result));

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
};

enum wire_hello_flags {
	WIRE_HELLO_FSYNC = 1 << 0,
	WIRE_HELLO_DEST_DIR = 1 << 1, /* DEST must be a directory */
};

enum wire_file_flags {
	WIRE_FILE_SPARSE = 1
			   << 0, /* has holes: its size says little of space */
};

enum wire_file_end_flags {
	WIRE_END_ABORT = 1 << 0, /* the source failed: discard the file */
};

struct wire_hello {
	uint16_t role;	   /* enum wire_role */
	uint8_t csum;	   /* enum wire_csum */
	uint8_t flags;	   /* enum wire_hello_flags */
	uint32_t features; /* reserved, 0 */
	uint32_t chunk_size;
	uint8_t nonce[WIRE_NONCE_LEN];
	char path[4096]; /* DEST for push, relative to the server's root */
};

struct wire_welcome {
	int32_t status; /* 0 or a negative errno */
	uint32_t features;
	uint8_t nonce[WIRE_NONCE_LEN];
	uint8_t mac[WIRE_MAC_LEN]; /* server's proof, zero without auth */
	char msg[WIRE_MSG_MAX + 1];
};

struct wire_auth {
	uint8_t mac[WIRE_MAC_LEN]; /* client's proof */
};

struct wire_ring {
	uint64_t addr;
	uint32_t rkey;
	uint16_t slots;
	uint32_t slot_size;
};

struct wire_file {
	uint32_t file_id;
	uint32_t flags; /* enum wire_file_flags */
	uint64_t size;
	uint32_t mode;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	char path[4096]; /* relative name (basename for a single file) */
};

struct wire_file_end {
	uint32_t file_id;
	uint32_t flags; /* enum wire_file_end_flags */
	uint64_t nchunks;
	uint8_t csum; /* enum wire_csum */
	uint8_t digest_len;
	uint8_t digest[WIRE_DIGEST_MAX];
};

struct wire_file_result {
	uint32_t file_id;
	int32_t status; /* 0, or a negative errno (-EBADMSG: verify) */
	uint8_t digest_len;
	uint8_t digest[WIRE_DIGEST_MAX];
	char msg[WIRE_MSG_MAX + 1];
};

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

/* Every control message: header plus one of the bodies above. */
struct wire_msg {
	uint8_t type;
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
	} u;
};

/*
 * Encodes m into buf (cap bytes). Returns the length, or -EMSGSIZE.
 * Strings are taken up to their NUL.
 */
int wire_encode(const struct wire_msg *m, uint8_t *buf, size_t cap)
	__attribute__((warn_unused_result));

/*
 * Decodes len bytes. Returns 0 or -EPROTO for anything malformed: unknown
 * type, short or trailing bytes, lengths past the end, strings with NUL
 * bytes inside or over their limit. Paths are NOT checked for escapes
 * here: that is path_check_relative()'s job where they are used.
 */
int wire_decode(const uint8_t *buf, size_t len, struct wire_msg *m)
	__attribute__((warn_unused_result));

const char *wire_type_name(unsigned int type);

#endif
