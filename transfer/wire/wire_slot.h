/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Part of the wire format (wire.h includes it after its constants; include
 * wire.h): what travels in ring slots rather than control messages. The
 * 64-byte slot header (in the ring's header area, beside the page-aligned
 * payloads), the 32-bit immediate that comes with it, a sealed chunk's
 * associated data, and the records of a packed slot (wire_slot.c).
 */
#ifndef RDCP_WIRE_SLOT_H
#define RDCP_WIRE_SLOT_H

#ifndef RDCP_WIRE_H
#error "include transfer/wire/wire.h, which includes this file"
#endif

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

/*
 * sink -> source, only when both offered WIRE_FEAT_ANY_SLOT: slots the
 * sink released, in any order (each one drained: its worker is through
 * with it), count of them (1..WIRE_FREED_MAX) by index. Every message's
 * slot_ack is then the count of slots named by the FREEDs posted up to
 * it, itself included. doc/PROTOCOL.md, "Credits".
 */
#define WIRE_FREED_MAX 1024u

struct wire_freed {
	uint16_t count;
	uint16_t slot[WIRE_FREED_MAX];
};

/* The count of an encoded FREED (its type checked by the caller). */
unsigned int wire_freed_count(const uint8_t *buf);

/*
 * With WIRE_FEAT_ANY_SLOT the source never posts a seq wire_seq_span()
 * or more past its oldest chunk not released: 64 rings of slots, at most
 * 2^15, so the immediate's 16 bits of seq name one seq of the window and
 * what the sink keeps per seq stays small (credit.h).
 */
#define WIRE_SEQ_SPAN_MAX (1u << 15)

static inline unsigned int wire_seq_span(unsigned int slots)
{
	return slots < WIRE_SEQ_SPAN_MAX / 64 ? slots * 64 : WIRE_SEQ_SPAN_MAX;
}

static inline unsigned int wire_imm_slot(uint32_t imm)
{
	return imm & 0xffffu;
}

static inline uint16_t wire_imm_seq16(uint32_t imm)
{
	return (uint16_t)(imm >> 16);
}

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

#endif
