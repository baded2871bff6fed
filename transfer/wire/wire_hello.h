/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Part of the wire format (wire.h includes it after its constants; include
 * wire.h): the handshake, a session's first messages. HELLO (client ->
 * server: who, what, where and how, with its flags, sync and limits),
 * WELCOME (accepted or why not, the lanes and rails), AUTH (the client's
 * proof), RING (the data sink's ring) and, with --streams, LANES.
 */
#ifndef RDCP_WIRE_HELLO_H
#define RDCP_WIRE_HELLO_H

#ifndef RDCP_WIRE_H
#error "include transfer/wire/wire.h, which includes this file"
#endif

enum wire_role {
	WIRE_PUSH = 1,
	WIRE_PULL = 2
};

enum wire_features {
	WIRE_FEAT_AUTH = 1 << 0, /* this side holds a key and will prove it */
	WIRE_FEAT_PACK = 1 << 1, /* this side takes packed slots as a sink */
	/*
	 * WELCOME of a push: this receiver, the sink, takes
	 * WIRE_INFLIGHT_ASK_MAX files in flight in a session that asks first
	 * (its descriptor budget covers them).
	 */
	WIRE_FEAT_WIDE = 1 << 2,
	/*
	 * HELLO: this client, WELCOME: this receiver (only when HELLO had
	 * it) releases and reuses ring slots in any order (WIRE_FREED):
	 * the session does when WELCOME has it.
	 */
	WIRE_FEAT_ANY_SLOT = 1 << 3,
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

/*
 * --streams, server -> client, once the receiver stopped taking joins
 * (doc/PROTOCOL.md "Lanes"): lanes 0..up-1 carry the slots' writes, the
 * slots of lanes up..streams-1 go on lane 0. 1..WIRE_STREAMS_MAX; the
 * client checks it against WELCOME's streams.
 */
struct wire_lanes {
	uint8_t up;
};

#endif
