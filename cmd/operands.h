/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A copy's operands: which of SRC... DEST name another host, and how that
 * host is reached. The forms, as scp and rsync write them:
 *   HOST:PATH                over ssh (rdcp --server started there), or
 *                            to a receiver already running with --daemon
 *   HOST::PATH               to a receiver already running (rdcpd)
 *   rdcp://HOST[:PORT]/PATH  the same, with its port
 * HOST may be user@host for ssh, [v6addr] in brackets. An operand with a
 * '/' before its first ':' is a local path ("./a:b").
 */
#ifndef RDCP_OPERANDS_H
#define RDCP_OPERANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct operand {
	bool remote;
	char *host;	  /* owned: "host", "user@host", "v6addr" */
	const char *path; /* into the argument */
	bool daemon;	  /* HOST:: or rdcp:// */
	uint16_t port;	  /* rdcp://HOST:PORT/, else 0 */
};

/*
 * Parses one operand into *op. 0 (op->remote false for a local path),
 * -EINVAL with why (whysz bytes) for a malformed remote one, -ENOMEM.
 */
int operand_parse(const char *arg, struct operand *op, char *why,
		  size_t whysz);

/* Frees what operand_parse allocated. */
void operand_release(struct operand *op);

/* --daemon, --ssh, or neither (HOST:PATH goes over ssh). */
enum remote_mode {
	REMOTE_DEFAULT = 0,
	REMOTE_DAEMON,
	REMOTE_SSH,
};

/* A copy's operands sorted out. */
struct split {
	bool pull;	  /* the SRCs are remote, DEST is local */
	bool daemon;	  /* the remote is a receiver already running */
	char *host;	  /* owned: the remote (the SRCs' host, remote to remote) */
	char *dest_host;  /* owned: remote to remote, DEST's host; else NULL */
	uint16_t port;	  /* rdcp://HOST:PORT/, else 0 */
	const char *dest; /* DEST's path */
	size_t nsrcs;	  /* ops[0..nsrcs-1] are now the SRCs' paths */
};

/*
 * Sorts out n >= 2 operands, the last the DEST: a push (SRCs local, DEST
 * remote), a pull (SRCs on one host, DEST local) or, over ssh only, a
 * copy between two remote hosts. Rewrites ops[i] of remote SRCs to their
 * paths. 0, or -EINVAL with why (whysz bytes) for a usage error,
 * -ENOMEM. operands_split_release() in every case.
 */
int operands_split(const char **ops, size_t n, enum remote_mode mode,
		   struct split *sp, char *why, size_t whysz);

void operands_split_release(struct split *sp);

#endif
