/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's options as argp sees them: the table --help is made from
 * (tests/e2e/help.golden pins it) and the text around it, with the exit
 * codes. cmd/args.c parses them; cmd/config.c and cmd/far.c name them.
 */
#ifndef RDCP_OPTIONS_H
#define RDCP_OPTIONS_H

#include <argp.h>

/* Keys of the options without a short one. */
enum {
	OPT_ROOT = 256,
	OPT_BIND,
	OPT_ONCE,
	OPT_CHUNK,
	OPT_WINDOW,
	OPT_CHECKSUM,
	OPT_FSYNC,
	OPT_POLL,
	OPT_TIMEOUT,
	OPT_CONNECT_TIMEOUT,
	OPT_WORKERS,
	OPT_MAX_SESSIONS,
	OPT_KEYGEN,
	OPT_KEY_FILE,
	OPT_NO_AUTH,
	OPT_TRANSPORT,
	OPT_JSON,
	OPT_PROGRESS,
	OPT_CHECK,
	OPT_DEVICE,
	OPT_RESUME,
	OPT_SPARSE,
	OPT_ENCRYPT,
	OPT_COMPRESS,
	OPT_BWLIMIT,
	OPT_GID_INDEX,
	OPT_STREAMS,
	OPT_EXCLUDE,
	OPT_INCLUDE,
	OPT_EXCLUDE_FROM,
	OPT_INCLUDE_FROM,
	OPT_FILES_FROM,
	OPT_MANIFEST,
	OPT_PRINT_CONFIG,
	OPT_NO_CONFIG,
	OPT_REQUIRE_ENCRYPT,
	OPT_DRY_RUN,
	OPT_RDCP_PATH,
	OPT_DAEMON,
	OPT_SSH,
	OPT_PORT_RANGE,
	OPT_RDMA_ADDR,
	OPT_SERVER,
	OPT_BOOT_STDIN,
	OPT_RETRY,
	OPT_RETRY_WAIT,
	OPT_DELETE,
	OPT_MAX_DELETE,
	OPT_DIRECT,
	OPT_NO_DIRECT,
	OPT_NUMA,
	OPT_HUGEPAGES,
	OPT_IO_DEPTH,
	OPT_SYNC,
	OPT_NUMERIC_IDS,
	OPT_ALLOW_OWNERS,
	OPT_ALLOW_DEVICES,
	OPT_DEVICES,
	OPT_SPECIALS,
	OPT_NAME,
	OPT_CLIENTS,
	OPT_MODULES,
	OPT_AUDIT_LOG,
	OPT_METRICS,
	OPT_SPLIT,
	OPT_SPLIT_SIZE,
};

extern const struct argp_option rdcp_options[];
extern const char rdcp_doc[];
extern const char rdcp_args_doc[];

#endif
