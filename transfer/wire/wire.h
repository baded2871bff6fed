/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The rdcp wire format: the 64-byte header of every ring slot (in the
 * ring's header area, beside the page-aligned payloads), the 32-bit
 * immediate that comes with it, and the control messages. Everything is
 * big-endian and encoded field by field; no struct is ever cast onto a buffer.
 * Decoders check every length and range they can know and return -EPROTO on
 * anything malformed.
 *
 * This header holds what every part shares: the limits, the control
 * messages' types, struct wire_msg that carries any of them, and the codec
 * (encode, decode, acks, tags). Each message's body, flags and limits stand
 * in the header of what it is about, which this one includes (include this
 * one): wire_hello.h the handshake, wire_entry.h one entry's messages,
 * wire_list.h the list of entries as a whole, wire_slot.h the ring slots
 * and packed records; NOTICE and ERROR, from either side, are below.
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
 * ... and in a push that asks first (-n, -u, --resume, --sync) to a
 * receiver whose WELCOME has WIRE_FEAT_WIDE: the sink answers each FILE as
 * it comes and forgets a file it keeps, so a re-run's questions are not
 * bound by round trips (doc/PROTOCOL.md, "Entries").
 */
#define WIRE_INFLIGHT_ASK_MAX 1024u

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
	WIRE_FREED,	  /* sink -> source: slots released, any order */
	WIRE_TYPE_MAX,
};

enum wire_csum {
	WIRE_CSUM_NONE = 0,
	WIRE_CSUM_CRC32 = 1,  /* crc32_combine of the chunk CRCs */
	WIRE_CSUM_SHA256 = 2, /* SHA-256 over the chunks' SHA-256s */
};

#include "transfer/wire/wire_entry.h"
#include "transfer/wire/wire_hello.h"
#include "transfer/wire/wire_list.h"
#include "transfer/wire/wire_slot.h"

/* Either side, at any time: CREDIT has no body; NOTICE and ERROR text. */

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

/* Every control message: header plus one body (of the headers above). */
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
		struct wire_freed freed;
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

#endif
