/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's exit codes: stable, for scripts. Listed in --help and the man
 * page (doc/rdcp.1, EXIT STATUS); never renumber one, only add.
 */
#ifndef RDCP_EXIT_CODES_H
#define RDCP_EXIT_CODES_H

enum rdcp_exit {
	RDCP_EXIT_OK = 0,	  /* everything copied and verified */
	RDCP_EXIT_INTERNAL = 1,	  /* a bug: please report it */
	RDCP_EXIT_USAGE = 2,	  /* bad command line */
	RDCP_EXIT_CONNECT = 3,	  /* could not connect or listen */
	RDCP_EXIT_AUTH = 4,	  /* authentication failed (reserved) */
	RDCP_EXIT_PROTOCOL = 5,	  /* peer spoke another protocol or broke it */
	RDCP_EXIT_LOCAL_IO = 6,	  /* a local file could not be read/written */
	RDCP_EXIT_REMOTE_IO = 7,  /* the peer could not write/read a file */
	RDCP_EXIT_VERIFY = 8,	  /* a checksum did not match: not placed */
	RDCP_EXIT_PARTIAL = 9,	  /* some files copied, some failed */
	RDCP_EXIT_RESOURCE = 10,  /* memory, memlock limit, RDMA resources */
	RDCP_EXIT_PEER_LOST = 11, /* the peer or the link went away */
	RDCP_EXIT_REMOTE_START = 12, /* ssh failed; no usable rdcp there */
	/* --max-delete: more would have been deleted, so nothing was */
	RDCP_EXIT_MAX_DELETE = 13,
	RDCP_EXIT_CANCELED = 130, /* SIGINT or SIGTERM */
};

#include "transfer/xfer.h"

/* The exit code of an engine verdict (rdcp and rdcp-mpi alike). */
static inline int rdcp_exit_code(enum xfer_fail f)
{
	static const int codes[] = {
		[XFER_OK] = RDCP_EXIT_OK,
		[XFER_FAIL_INTERNAL] = RDCP_EXIT_INTERNAL,
		[XFER_FAIL_USAGE] = RDCP_EXIT_USAGE,
		[XFER_FAIL_CONNECT] = RDCP_EXIT_CONNECT,
		[XFER_FAIL_AUTH] = RDCP_EXIT_AUTH,
		[XFER_FAIL_PROTOCOL] = RDCP_EXIT_PROTOCOL,
		[XFER_FAIL_LOCAL_IO] = RDCP_EXIT_LOCAL_IO,
		[XFER_FAIL_REMOTE_IO] = RDCP_EXIT_REMOTE_IO,
		[XFER_FAIL_VERIFY] = RDCP_EXIT_VERIFY,
		[XFER_FAIL_PARTIAL] = RDCP_EXIT_PARTIAL,
		[XFER_FAIL_RESOURCE] = RDCP_EXIT_RESOURCE,
		[XFER_FAIL_PEER_LOST] = RDCP_EXIT_PEER_LOST,
		[XFER_FAIL_CANCELED] = RDCP_EXIT_CANCELED,
		[XFER_FAIL_REMOTE_START] = RDCP_EXIT_REMOTE_START,
		[XFER_FAIL_MAX_DELETE] = RDCP_EXIT_MAX_DELETE,
	};

	if ((unsigned int)f >= sizeof(codes) / sizeof(codes[0]))
		return RDCP_EXIT_INTERNAL;
	return codes[f];
}

#endif
