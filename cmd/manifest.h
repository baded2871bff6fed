/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --manifest FILE: one line per file copied, for a downstream job to check
 * without rdcp. With --checksum sha256 the lines are sha256sum's
 * ("HEX  NAME", so `sha256sum -c FILE` checks them), else BSD-tagged
 * CRC32 lines ("CRC32 (NAME) = HEX", zlib's CRC-32 of the whole file).
 *
 * The digests are of whole files, as those tools compute them, which is
 * not what rdcp's own file digest covers (a tree of chunk digests for
 * sha256, holes left out): so they are computed after the copy, from the
 * local side's bytes (a push's sources, a pull's placed files), never
 * during it, where hashing a large file would stall the engine thread.
 * During the copy only the names are noted, in an unlinked spool file, so
 * memory does not grow with the number of files. The manifest is written
 * beside FILE and renamed onto it when complete.
 */
#ifndef RDCP_MANIFEST_H
#define RDCP_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "transfer/xfer.h"

struct manifest {
	const char *path; /* FILE */
	bool sha256;	  /* else CRC32 */
	FILE *spool;	  /* "local\0name\0" per copied file */
	uint64_t n;	  /* files noted */
	int err;	  /* the first spool write error, -errno */
};

/* Starts a manifest for FILE. 0, or -errno (said). */
int manifest_open(struct manifest *m, const char *path, bool sha256)
	__attribute__((warn_unused_result));

/*
 * Notes r if it reports a regular file copied (done, ok, not skipped):
 * named as sent (r->name, beneath DEST) on a push, as placed (r->path) on
 * a pull.
 */
void manifest_note(struct manifest *m, const struct xfer_file_report *r);

/*
 * Digests every noted file and writes FILE. 0, or -errno: the first file
 * that could not be read or the manifest that could not be written, said
 * (the other lines are still written).
 */
int manifest_finish(struct manifest *m) __attribute__((warn_unused_result));

/* Frees what is left (after manifest_finish, or instead of it). */
void manifest_release(struct manifest *m);

#endif
