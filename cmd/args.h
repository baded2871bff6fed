/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's command line: the argp option table and parser, and the checks
 * that options agree with each other. args_parse() turns argv into a
 * struct args that main.c only reads; a usage error never gets past it.
 */
#ifndef RDCP_ARGS_H
#define RDCP_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/config.h"
#include "cmd/operands.h"
#include "transfer/xfer.h"
#include "util/filter.h"
#include "util/key.h"

/* A receiver's client keys and modules when not named (the package's). */
#define CLIENTS_DEFAULT "/etc/rdcp/clients"
#define MODULES_DEFAULT "/etc/rdcp/modules.conf"

struct args {
	/*
	 * What the engine needs from the command line: for a copy also
	 * addr.host (the HOST of HOST:path), srcs, nsrcs, dest and pull.
	 * Key, callbacks and cancel flag are main.c's to add.
	 */
	struct xfer_opts o;
	bool listen;
	bool check;	      /* --check [HOST]: HOST in o.addr.host */
	const char *keygen;   /* --keygen FILE, else NULL */
	const char *key_file; /* --key-file FILE, else NULL */
	const char *keygen_name; /* --name NAME with --keygen, else NULL */
	bool no_auth;
	bool archive;  /* -a: -r -p and, without --sync, --sync mtime */
	bool sync_set; /* --sync was given */
	int verbose; /* number of -v */
	bool quiet;
	bool json;
	bool progress; /* --progress: show it even when not on a terminal */
	struct split split;    /* the operands: o.addr.host or o.rsh_host */
	enum remote_mode mode; /* --daemon, --ssh */
	const char *rsh;       /* -e: $RDCP_RSH, else "ssh" */
	bool server;	       /* --server: started over ssh by a client */
	const char *boot_host; /* --boot-stdin HOST: the far end of a copy
				* between two remote hosts (cmd/far.h) */
	char **far;	       /* such a copy: the far end's arguments */
	struct filter filter;	/* --include/--exclude, in order; o.filter */
	const char *files_from; /* --files-from FILE ("-": stdin), or NULL */
	char *dest_dir;	      /* --files-from: DEST with a '/', owned; o.dest */
	const char *manifest; /* --manifest FILE, or NULL */
	unsigned int retry;   /* --retry N: attempts after the first */
	unsigned int retry_wait_ms; /* --retry-wait: the first wait */
	struct config cfg; /* the defaults files; its argv is what was parsed */
};

/*
 * Parses argv into *a (xfer_opts_init defaults for what is not given),
 * after the defaults files (config.h) unless --no-config or --listen.
 * Returns only when the command line is valid: --help, --version and
 * --print-config exit 0, a usage error prints it and exits
 * RDCP_EXIT_USAGE. Strings in *a point into argv or a->cfg (args_release
 * frees what is not argv's).
 */
void args_parse(struct args *a, int argc, char **argv);

/* Frees what args_parse allocated. */
void args_release(struct args *a);

/*
 * Loads the key of --key-file, else the default key file (key.h), into
 * key, and the client's name a named key has into name (KEY_NAME_MAX + 1
 * bytes, "" for none; NULL: not wanted). peers names whom the key must be
 * copied to, for the message when there is none. Returns 0,
 * RDCP_EXIT_AUTH (logged), or with optional -ENOENT when there is no key
 * file at all (nothing said: the caller goes on without one).
 */
int args_load_key(const struct args *a, uint8_t key[KEY_LEN], char *name,
		  const char *peers, bool optional)
	__attribute__((warn_unused_result));

#endif
