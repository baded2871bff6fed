/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The end of rdcp's command line (args.c parses it an option at a time):
 * the checks that options go together, for each mode (--check, --keygen,
 * a receiver, a copy), a copy's operands sorted out (a push, a pull, over
 * ssh or to a receiver: cmd/operands.c), the receiver's default clients
 * and modules, the --include/--exclude rules compiled in order. Usage
 * errors go through args_opt_error(): message, usage line, exit
 * RDCP_EXIT_USAGE.
 */
#include <argp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/args.h"
#include "cmd/args_int.h"
#include "cmd/exit_codes.h"
#include "cmd/rules.h"

/*
 * argp_error(), naming the rdcp.conf line when the option came from one:
 * every usage error below goes through here.
 */
void args_opt_error(const struct argp_state *state, const char *fmt, ...)
{
	const struct args_state *ps = state->input;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ps->from)
		(argp_error)(state, "%s:%u: %s", ps->from->file, ps->from->line,
			     msg);
	else
		(argp_error)(state, "%s", msg);
}

#define argp_error args_opt_error

/* Whether path is a directory. */
static bool dir_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The rules of the command line, in order, files read. */
static void compile_rules(struct args_state *ps, struct argp_state *state)
{
	bool stdin_used = ps->a->files_from && !strcmp(ps->a->files_from, "-");

	for (size_t i = 0; i < ps->nrules; i++) {
		const struct args_rule *r = &ps->rules[i];
		int rc;

		if (r->from_file && !strcmp(r->arg, "-")) {
			if (stdin_used)
				argp_error(state, "only one of --files-from, "
						  "--exclude-from and "
						  "--include-from can read "
						  "stdin");
			stdin_used = true;
		}
		rc = r->from_file
			     ? rules_read(&ps->a->filter, r->include, r->arg,
					  ps->from0)
			     : rules_add(&ps->a->filter, r->include, r->arg);
		if (rc == -ENOMEM)
			exit(RDCP_EXIT_RESOURCE);
		if (rc && r->from_file && rc != -EINVAL && rc != -ENAMETOOLONG)
			exit(RDCP_EXIT_LOCAL_IO);
		if (rc)
			argp_error(state, "bad %s rule",
				   r->include ? "--include" : "--exclude");
	}
	free(ps->rules);
	ps->rules = NULL;
	ps->a->o.copy.filter = ps->a->filter.n ? &ps->a->filter : NULL;
}

/*
 * SRC... HOST:DEST pushes, HOST:SRC... DEST pulls (cmd/operands.c says
 * which, and how HOST is reached): into a->o and a->split.
 */
static void split_args(struct args_state *ps, struct argp_state *state)
{
	struct args *a = ps->a;
	struct split *sp = &a->split;
	char why[600];
	int rc;

	rc = operands_split(ps->srcs, ps->nsrcs, a->mode, sp, why, sizeof(why));
	if (rc == -ENOMEM)
		exit(RDCP_EXIT_RESOURCE);
	if (rc)
		argp_error(state, "%s", why);
	ps->nsrcs = sp->nsrcs;
	a->o.copy.pull = sp->pull;
	a->o.copy.dest = sp->dest;
	if (sp->daemon) {
		a->o.link.addr.host = sp->host;
		if (sp->port)
			a->o.link.addr.port = sp->port;
		return;
	}
	a->o.ssh.rsh = a->rsh;
	a->o.ssh.rsh_host = sp->host;
	if (sp->dest_host && (a->manifest || a->files_from))
		argp_error(state,
			   "--%s names a local file: not for a copy "
			   "between two remote hosts",
			   a->manifest ? "manifest" : "files-from");
}

void args_check(struct args_state *ps, struct argp_state *state)
{
	struct args *a = ps->a;

	if (ps->print_config)
		return;
	if (a->check) {
		if (ps->nsrcs > 1 || a->listen || a->keygen)
			argp_error(state, "--check takes at most one "
					  "HOST");
		/* Over ssh unless --daemon: as a copy's HOST:PATH. */
		if (ps->nsrcs && a->mode == REMOTE_DAEMON) {
			a->o.link.addr.host = ps->srcs[0];
		} else if (ps->nsrcs) {
			a->o.ssh.rsh = a->rsh;
			a->o.ssh.rsh_host = ps->srcs[0];
		}
		return;
	}
	/* --keygen --name NAME FILE: argp gave --keygen "--name" */
	if (a->keygen && !strncmp(a->keygen, "--name", 6) &&
	    (!a->keygen[6] || a->keygen[6] == '=')) {
		const char *name = a->keygen[6] ? a->keygen + 7 : NULL;

		if (!name && ps->nsrcs)
			name = ps->srcs[0], ps->srcs++, ps->nsrcs--;
		if (!name || ps->nsrcs != 1 || a->keygen_name)
			argp_error(state, "--keygen --name NAME FILE");
		if (!key_name_valid(name))
			argp_error(state,
				   "--name: '%s' is no client name (1 "
				   "to %d of A-Z a-z 0-9 . _ -, not "
				   "\"site-key\")",
				   name, KEY_NAME_MAX);
		a->keygen_name = name;
		a->keygen = ps->srcs[0];
		ps->nsrcs = 0;
	}
	if (a->keygen) {
		if (ps->nsrcs || a->listen)
			argp_error(state, "--keygen takes no other "
					  "arguments");
		return;
	}
	if (a->keygen_name)
		argp_error(state, "--name names the client of a new "
				  "key: it goes with --keygen");
	if ((a->o.serve.clients_dir || a->o.serve.modules_file) && !a->listen)
		argp_error(state,
			   "--%s is a receiver's: it goes with "
			   "--listen (or --check)",
			   a->o.serve.clients_dir ? "clients" : "modules");
	if (a->listen) {
		/* The service's, when the package's paths exist. */
		if (!a->o.serve.clients_dir && dir_exists(CLIENTS_DEFAULT))
			a->o.serve.clients_dir = CLIENTS_DEFAULT;
		if (!a->o.serve.modules_file &&
		    access(MODULES_DEFAULT, F_OK) == 0)
			a->o.serve.modules_file = MODULES_DEFAULT;
	}
	if (a->o.link.addr.gid_index >= 0 && !a->o.link.addr.device)
		argp_error(state, "--gid-index needs --device: a GID "
				  "index is per device");
	if (a->no_auth && a->key_file)
		argp_error(state, "--no-auth and --key-file exclude "
				  "each other");
	if (a->o.serve.require_encrypt && a->no_auth)
		argp_error(state, "--require-encrypt needs the "
				  "pre-shared key: it cannot go with "
				  "--no-auth");
	if ((a->o.serve.audit_log || a->o.serve.metrics_addr) && !a->listen)
		argp_error(state, "--%s is for a receiver (--listen)",
			   a->o.serve.audit_log ? "audit-log" : "metrics");
	if (a->listen || a->server) {
		if (ps->nsrcs)
			argp_error(state, "--%s takes no SRC or DEST",
				   a->listen ? "listen" : "server");
		if (a->listen && a->server)
			argp_error(state, "--server is started by a "
					  "client over ssh: not with "
					  "--listen");
		a->o.ssh.ssh_server = a->server;
		/* --server's stdout is its client's ssh channel */
		a->o.serve.json_events = a->json && a->listen;
		return;
	}
	if (ps->nsrcs < 2)
		argp_error(state, "need at least one SRC and a DEST, "
				  "one side of them HOST:path");
	if (a->boot_host) { /* the far end: SRC... DEST, DEST there */
		ps->nsrcs--;
		a->o.copy.dest = ps->srcs[ps->nsrcs];
		a->o.ssh.rsh_host = a->boot_host;
	} else {
		split_args(ps, state);
	}
	/* ssh's port is ssh's: never silently not used */
	if (a->o.ssh.rsh && ps->port_arg)
		argp_error(state,
			   "--port %s is a receiver's port "
			   "(HOST::PATH); over ssh give ssh's "
			   "own: -e 'ssh -p %s'",
			   ps->port_arg, ps->port_arg);
	if (a->o.ssh.rsh && a->no_auth)
		argp_error(state, "--no-auth: a copy over ssh always "
				  "authenticates, with a one-time key");
	if (a->o.ssh.rdma_addr && !a->o.ssh.rsh && !a->boot_host)
		argp_error(state, "--rdma-addr is for HOST:PATH over "
				  "ssh; a receiver's address is its "
				  "HOST");
	if (a->o.copy.encrypt && a->no_auth)
		argp_error(state, "--encrypt needs the pre-shared key: "
				  "it cannot go with --no-auth");
	if (a->o.serve.require_encrypt && !a->o.copy.encrypt)
		argp_error(state, "--require-encrypt: this copy would "
				  "run unencrypted (add --encrypt)");
	if (a->o.copy.no_clobber && a->o.copy.update)
		argp_error(state, "--no-clobber and --update exclude "
				  "each other");
	if (a->retry && a->split.dest_host)
		argp_error(state, "--retry: not for a copy between two "
				  "remote hosts (yet)");
	/* The far end's one bootstrap line serves one session. */
	if (a->boot_host)
		a->retry = 0;
	/* -a: rsync's quick check, unless --sync said otherwise. */
	if (a->archive && !a->sync_set)
		a->o.copy.sync = XFER_SYNC_MTIME;
	/* Each attempt keeps what it verified for the next. */
	a->o.copy.resume |= a->retry > 0;
	a->o.copy.srcs = ps->srcs;
	a->o.copy.nsrcs = ps->nsrcs;
	if (!a->o.copy.split_auto && a->o.copy.split > 1 &&
	    a->o.copy.csum != XFER_CSUM_CRC32)
		argp_error(state, "--split: byte ranges need --checksum crc32 "
				  "(range CRCs combine into the file's; "
				  "SHA-256 digests do not)");
	if (a->manifest && a->o.copy.csum == XFER_CSUM_NONE)
		argp_error(state, "--manifest needs a digest: not with "
				  "--checksum none");
	if (a->manifest && a->o.copy.dry_run)
		argp_error(state, "--manifest lists what was copied: "
				  "not with --dry-run, which copies "
				  "nothing");
	if (a->o.copy.delete_extra && (!a->o.copy.recursive || a->files_from))
		argp_error(state, "--delete mirrors whole directories: "
				  "it needs -r, and not --files-from");
	if (a->o.copy.max_delete != UINT64_MAX && !a->o.copy.delete_extra)
		argp_error(state, "--max-delete needs --delete");
	if (a->files_from && ps->nsrcs != 1)
		argp_error(state, "--files-from takes one SRC: the "
				  "directory the listed paths are in");
	/* The names land beneath DEST, made if missing, as rsync. */
	if (a->files_from &&
	    (!*a->o.copy.dest ||
	     a->o.copy.dest[strlen(a->o.copy.dest) - 1] != '/')) {
		if (asprintf(&a->dest_dir, "%s/", a->o.copy.dest) < 0)
			exit(RDCP_EXIT_RESOURCE);
		a->o.copy.dest = a->dest_dir;
	}
	compile_rules(ps, state);
}
