/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Part of the wire format (wire.h includes it after its constants; include
 * wire.h): the messages about the list of entries as a whole rather than
 * one entry. A pull's --files-from list coming in (NAMES, NAMES_ACK), its
 * end (DONE), what DEST holds beyond it (--delete: DELETED, DELETE_END),
 * and every entry answered (BYE).
 */
#ifndef RDCP_WIRE_LIST_H
#define RDCP_WIRE_LIST_H

#ifndef RDCP_WIRE_H
#error "include transfer/wire/wire.h, which includes this file"
#endif

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

struct wire_bye {
	uint64_t files_ok;
	uint64_t files_failed;
	uint64_t bytes;
};

#endif
