/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's command line: the argp option table (--help is made from it and
 * tests/e2e/help.golden pins it), one parser case per option with its
 * range check, the split of SRC... HOST:DEST into a push or a pull, and
 * the checks that options go together. Usage errors go through
 * argp_error(): message, usage line, exit RDCP_EXIT_USAGE.
 */
#include <argp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/args.h"
#include "cmd/exit_codes.h"
#include "cmd/retry.h"
#include "cmd/rules.h"
#include "util/units.h"

const char *argp_program_version = "rdcp " RDCP_VERSION;
error_t argp_err_exit_status = RDCP_EXIT_USAGE;

static const char doc[] =
	"rdcp -- copy files between hosts over RDMA (rdma_cm + verbs), or "
	"TCP where there is no RDMA; every chunk and every file verified.\n\n"
	"  rdcp [OPTION...] SRC... HOST:DEST     send files to a receiver\n"
	"  rdcp [OPTION...] HOST:SRC... DEST     fetch files from it\n"
	"  rdcp --listen --root DIR [OPTION...]  run a receiver\n"
	"  rdcp --keygen FILE                    make a pre-shared key\n"
	"  rdcp --check [HOST]                   diagnose RDMA and the way "
	"to HOST\n\n"
	"Remote paths are relative to the receiver's --root. A DEST ending "
	"in '/' or naming a directory receives into it (created if it ends "
	"in '/'); several SRCs need a directory. IPv6 addresses go in "
	"brackets: [fe80::1]:dir/."
	"\v"
	"Exit status:\n"
	"  0   all files copied and verified\n"
	"  1   internal error (a bug)\n"
	"  2   usage error\n"
	"  3   cannot connect or listen\n"
	"  4   authentication failed, or no usable key file\n"
	"  5   protocol error or version mismatch\n"
	"  6   local I/O error (a source unreadable, ...)\n"
	"  7   remote I/O error (the receiver could not write)\n"
	"  8   verification failed (file not placed)\n"
	"  9   partial: some files copied, some failed\n"
	"  10  resources: memory, memlock limit, RDMA device\n"
	"  11  peer lost: host down, link cut, or process killed\n"
	"  130 interrupted\n\n"
	"Sizes and rates take K/M/G/T (powers of 1024) or KB/MB/GB/TB (powers "
	"of 1000).";

static const char args_doc[] = "SRC... HOST:DEST\nHOST:SRC... DEST\n--listen\n"
			       "--keygen FILE\n--check [HOST]";

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
	OPT_RETRY,
	OPT_RETRY_WAIT,
};

static const struct argp_option options[] = {
	{ NULL, 0, NULL, 0, "Receiver:", 1 },
	{ "listen", 'l', NULL, 0, "Run as a receiver", 1 },
	{ "root", OPT_ROOT, "DIR", 0,
	  "Directory that DEST paths are confined to (default: .)", 1 },
	{ "bind", OPT_BIND, "ADDR", 0,
	  "Listen on this address only (default: every IPv6 and IPv4 address)",
	  1 },
	{ "once", OPT_ONCE, NULL, 0, "Serve one session, exit with its status",
	  1 },
	{ "max-sessions", OPT_MAX_SESSIONS, "N", 0,
	  "Concurrent sessions (default 16)", 1 },
	{ NULL, 0, NULL, 0, "Copying:", 2 },
	{ "recursive", 'r', NULL, 0,
	  "Copy directories: their trees, with empty directories and "
	  "symlinks (copied as links, never followed); hard links become "
	  "separate files",
	  2 },
	{ "preserve", 'p', NULL, 0,
	  "Keep mode, access and modification times (else: mode less the "
	  "umask, new times)",
	  2 },
	{ "resume", OPT_RESUME, NULL, 0,
	  "Finish an interrupted copy: what is already at DEST is checked "
	  "chunk by chunk against the source's chunk digests and only what "
	  "differs is sent; partial files are kept on failure for the next "
	  "try",
	  2 },
	{ "no-clobber", 'n', NULL, 0, "Never replace an existing file", 2 },
	{ "update", 'u', NULL, 0,
	  "Replace only files older than the source (modification time)", 2 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0,
	  "Ask the receiving side what it has and print what a copy would "
	  "do to each entry (new, replace, exists, keep); write nothing, "
	  "send no file data",
	  2 },
	{ "sparse", OPT_SPARSE, NULL, 0,
	  "Also turn all-zero chunks into holes (holes in the source are "
	  "always kept)",
	  2 },
	{ "compress", OPT_COMPRESS, "LEVEL", OPTION_ARG_OPTIONAL,
	  "zlib per chunk, level 1-9 (default 1); chunks that do not shrink "
	  "go raw",
	  2 },
	{ "encrypt", OPT_ENCRYPT, NULL, 0,
	  "Encrypt file data with AES-256-GCM under a per-session key "
	  "derived from the pre-shared key",
	  2 },
	{ "bwlimit", OPT_BWLIMIT, "RATE", 0,
	  "Send at most RATE bytes per second (500M, 2G, 1GB)", 2 },
	{ NULL, 0, NULL, 0, "Transfer:", 3 },
	{ "transport", OPT_TRANSPORT, "T", 0,
	  "rdma, tcp, or auto (default): RDMA when rdma_cm resolves the peer "
	  "to an RDMA device, else TCP; a receiver serves both",
	  3 },
	{ "device", OPT_DEVICE, "NAME", 0,
	  "Use this RDMA device (mlx5_0, rxe0, ...) when a host has several: "
	  "RDMA is then required, and a receiver without --bind listens on "
	  "the device's address",
	  3 },
	{ "gid-index", OPT_GID_INDEX, "N", 0,
	  "RoCE: use the address of GID N of the device (see rdcp --check): "
	  "with --device, pins the GID the connection uses",
	  3 },
	{ "streams", OPT_STREAMS, "N", 0,
	  "Queue pairs per session; only 1 is implemented so far", 3 },
	{ "port", 'P', "PORT", 0, "Port (default 7471)", 3 },
	{ "ipv4", '4', NULL, 0, "Use IPv4 only", 3 },
	{ "ipv6", '6', NULL, 0, "Use IPv6 only", 3 },
	{ "chunk-size", OPT_CHUNK, "SIZE", 0,
	  "Bytes per ring slot, a power of two, 4K..64M (default 1M); the "
	  "receiver's value is the maximum",
	  3 },
	{ "window", OPT_WINDOW, "N", 0,
	  "Ring slots = writes in flight, 1..4096 (default 64); the "
	  "receiver's value is the maximum",
	  3 },
	{ "checksum", OPT_CHECKSUM, "ALG", 0,
	  "File digest: crc32 (default), sha256, or none (no chunk CRC "
	  "either)",
	  3 },
	{ "fsync", OPT_FSYNC, NULL, 0,
	  "Receiver fsyncs each file before giving it its name", 3 },
	{ "poll", OPT_POLL, "MODE", 0,
	  "Completions: adaptive (default), busy, event", 3 },
	{ "timeout", OPT_TIMEOUT, "SECONDS", 0,
	  "Give up when the peer is silent this long (default 10)", 3 },
	{ "connect-timeout", OPT_CONNECT_TIMEOUT, "SECONDS", 0,
	  "Bound on resolving and connecting (default 10)", 3 },
	{ "retry", OPT_RETRY, "N", 0,
	  "Sender: when the peer is lost or cannot be reached, connect again "
	  "up to N times and go on where it stopped (implies --resume)",
	  3 },
	{ "retry-wait", OPT_RETRY_WAIT, "SECONDS", 0,
	  "First wait before a retry (default 5), doubling up to 60, +-20 %",
	  3 },
	{ "workers", OPT_WORKERS, "N", 0,
	  "Threads for disk I/O and checksums (default 2)", 3 },
	{ "check", OPT_CHECK, NULL, 0,
	  "Check this host's RDMA setup and, with a HOST argument, the way "
	  "to a receiver there; print the fix for each problem (exit 0: none "
	  "found, 10: some)",
	  1 },
	{ NULL, 0, NULL, 0, "Authentication:", 4 },
	{ "keygen", OPT_KEYGEN, "FILE", 0,
	  "Write a new random key to FILE (mode 0600) and exit", 4 },
	{ "key-file", OPT_KEY_FILE, "FILE", 0,
	  "Pre-shared key (default: $XDG_CONFIG_HOME/rdcp/key, then "
	  "/etc/rdcp/key); both sides need the same",
	  4 },
	{ "no-auth", OPT_NO_AUTH, NULL, 0,
	  "Run without authentication: anybody who reaches the port may "
	  "write into the root. Isolated fabrics only",
	  4 },
	{ "require-encrypt", OPT_REQUIRE_ENCRYPT, NULL, 0,
	  "Receiver: refuse sessions without --encrypt. Sender: refuse to "
	  "copy without --encrypt",
	  4 },
	{ NULL, 0, NULL, 0, "Output:", 5 },
	{ "json", OPT_JSON, NULL, 0,
	  "Sender: newline-delimited JSON events on stdout (file_start, "
	  "file_done, attempt, error, summary)",
	  5 },
	{ "progress", OPT_PROGRESS, NULL, 0,
	  "Sender: show progress even when stderr is not a terminal (it is "
	  "shown by default on a terminal)",
	  5 },
	{ "manifest", OPT_MANIFEST, "FILE", 0,
	  "Write FILE: a line per file copied, its whole-file digest: "
	  "sha256sum's format with --checksum sha256 (sha256sum -c FILE "
	  "checks them), else \"CRC32 (NAME) = HEX\"",
	  5 },
	{ "print-config", OPT_PRINT_CONFIG, NULL, 0,
	  "Print the options in effect and where each comes from: "
	  "/etc/rdcp/rdcp.conf, then ~/.config/rdcp/rdcp.conf (long option "
	  "names, one a line), then the command line, which wins",
	  5 },
	{ "no-config", OPT_NO_CONFIG, NULL, 0,
	  "Read no rdcp.conf (a receiver never reads them)", 5 },
	{ "quiet", 'q', NULL, 0, "Print nothing but errors", 5 },
	{ "verbose", 'v', NULL, 0, "More detail; twice for debug", 5 },
	{ NULL, 0, NULL, 0, "Selecting files:", 6 },
	{ "exclude", OPT_EXCLUDE, "PATTERN", 0,
	  "Leave out what PATTERN matches (rsync's rules: *, **, ?, [...], "
	  "a trailing / for directories, a leading / anchors at the top); "
	  "the first --include/--exclude that matches decides",
	  6 },
	{ "include", OPT_INCLUDE, "PATTERN", 0,
	  "Keep what PATTERN matches, even if a later --exclude matches", 6 },
	{ "exclude-from", OPT_EXCLUDE_FROM, "FILE", 0,
	  "--exclude each pattern in FILE (- for stdin), one a line; blank "
	  "lines and lines starting with # or ; are skipped",
	  6 },
	{ "include-from", OPT_INCLUDE_FROM, "FILE", 0,
	  "--include each pattern in FILE, as --exclude-from", 6 },
	{ "files-from", OPT_FILES_FROM, "FILE", 0,
	  "Send the paths listed in FILE (- for stdin), one a line, each "
	  "relative to the one SRC directory and kept as it is beneath DEST "
	  "(rsync's --files-from); push only",
	  6 },
	{ "from0", '0', NULL, 0,
	  "Names in --files-from and rules in --*-from files end in a NUL "
	  "(find -print0), not a newline",
	  6 },
	{ 0 }
};

/* One --include/--exclude(-from), kept in order until -0 is known. */
struct rule_arg {
	bool include, from_file;
	const char *arg;
};

/* argp's input: the result, and the operands while they are sorted out. */
struct parse {
	struct args *a;
	const char **srcs; /* operands; a copy's SRCs once DEST is split off */
	size_t nsrcs;
	struct rule_arg *rules;
	size_t nrules;
	bool from0;
	bool print_config;
	struct config_seen *seen; /* every option, in order: --print-config */
	size_t nseen;
	const struct config_entry *from; /* the option being parsed's */
};

/*
 * argp_error(), naming the rdcp.conf line when the option came from one:
 * every usage error below goes through here.
 */
static void opt_error(const struct argp_state *state, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void opt_error(const struct argp_state *state, const char *fmt, ...)
{
	const struct parse *ps = state->input;
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

#define argp_error opt_error

/* Options that add up instead of the last one winning. */
static bool adds_up(int key)
{
	return key == OPT_EXCLUDE || key == OPT_INCLUDE ||
	       key == OPT_EXCLUDE_FROM || key == OPT_INCLUDE_FROM || key == 'v';
}

static void add_rule_arg(struct parse *ps, struct argp_state *state,
			 bool include, bool from_file, const char *arg)
{
	struct rule_arg *v = realloc(ps->rules, (ps->nrules + 1) * sizeof(*v));

	if (!v)
		argp_failure(state, RDCP_EXIT_RESOURCE, ENOMEM, "rules");
	ps->rules = v;
	v[ps->nrules++] = (struct rule_arg){ .include = include,
					     .from_file = from_file,
					     .arg = arg };
}

/* The rules of the command line, in order, files read. */
static void compile_rules(struct parse *ps, struct argp_state *state)
{
	bool stdin_used = ps->a->files_from && !strcmp(ps->a->files_from, "-");

	for (size_t i = 0; i < ps->nrules; i++) {
		const struct rule_arg *r = &ps->rules[i];
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
	ps->a->o.filter = ps->a->filter.n ? &ps->a->filter : NULL;
}

static int parse_uint(const char *s, unsigned long min, unsigned long max,
		      unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "host:path", "[v6]:path"; a ':' after a '/' is part of a local path. */
static int split_remote(const char *arg, char **host, const char **path)
{
	const char *colon;

	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		*host = strndup(arg + 1, (size_t)(close - arg - 1));
		*path = close + 2;
		return *host ? 0 : -ENOMEM;
	}
	colon = strchr(arg, ':');
	if (!colon || colon == arg ||
	    (strchr(arg, '/') && strchr(arg, '/') < colon))
		return -EINVAL;
	*host = strndup(arg, (size_t)(colon - arg));
	*path = colon + 1;
	return *host ? 0 : -ENOMEM;
}

/*
 * SRC... HOST:DEST pushes, HOST:SRC... DEST pulls; all remote arguments
 * name the same host, and local and remote SRCs do not mix.
 */
static void split_args(struct parse *ps, struct argp_state *state)
{
	struct args *a = ps->a;
	size_t last = ps->nsrcs - 1;
	const char *path;
	char *host = NULL;
	bool pull = split_remote(ps->srcs[last], &a->target, &path) != 0;

	if (!pull) {
		a->o.dest = path;
	} else {
		if (split_remote(ps->srcs[0], &a->target, &path))
			argp_error(state,
				   "'%s' is not HOST:path: one side of a copy "
				   "names the receiver",
				   ps->srcs[last]);
		a->o.pull = true;
		a->o.dest = ps->srcs[last];
	}
	ps->nsrcs--;
	for (size_t i = 0; i < ps->nsrcs; i++) {
		bool remote = split_remote(ps->srcs[i], &host, &path) == 0;

		if (remote != pull)
			argp_error(
				state,
				pull ? "'%s': all SRCs of a pull are on the "
				       "remote host (HOST:SRC)"
				     : "'%s': SRCs of a push are local files; "
				       "copying between two remote hosts is "
				       "not supported",
				ps->srcs[i]);
		if (remote && strcmp(host, a->target))
			argp_error(state,
				   "'%s': all SRCs must come from one host",
				   ps->srcs[i]);
		if (remote)
			ps->srcs[i] = path;
		free(host);
		host = NULL;
	}
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct parse *ps = state->input;
	struct args *a = ps->a;
	struct xfer_opts *o = &a->o;
	unsigned long v;
	uint64_t size;

	ps->from = NULL;
	if (key > 0 && key < 0x1000000) { /* an option, not argp's events */
		struct config_seen *sv =
			realloc(ps->seen, (ps->nseen + 1) * sizeof(*sv));

		if (!sv)
			argp_failure(state, RDCP_EXIT_RESOURCE, ENOMEM, "argv");
		ps->seen = sv;
		sv[ps->nseen++] = (struct config_seen){
			.key = key,
			.arg = arg,
			.from = config_origin(&a->cfg, state->next - 1),
		};
		ps->from = sv[ps->nseen - 1].from;
	}
	switch (key) {
	case 'l':
		a->listen = true;
		break;
	case OPT_ROOT:
		o->root = arg;
		break;
	case OPT_BIND:
		o->addr.host = arg;
		break;
	case OPT_ONCE:
		o->once = true;
		break;
	case OPT_MAX_SESSIONS:
		if (parse_uint(arg, 1, 1024, &v))
			argp_error(state, "--max-sessions: '%s' is not 1..1024",
				   arg);
		o->max_sessions = (unsigned int)v;
		break;
	case 'P':
		if (parse_uint(arg, 1, 65535, &v))
			argp_error(state, "--port: '%s' is not 1..65535", arg);
		o->addr.port = (uint16_t)v;
		break;
	case OPT_TRANSPORT:
		if (!strcmp(arg, "auto"))
			o->addr.transport = CM_TRANSPORT_AUTO;
		else if (!strcmp(arg, "rdma"))
			o->addr.transport = CM_TRANSPORT_RDMA;
		else if (!strcmp(arg, "tcp"))
			o->addr.transport = CM_TRANSPORT_TCP;
		else
			argp_error(state,
				   "--transport: '%s' is not rdma, tcp or auto",
				   arg);
		break;
	case '4':
		o->addr.family = CM_AF_INET;
		break;
	case '6':
		o->addr.family = CM_AF_INET6;
		break;
	case OPT_CHUNK:
		if (units_parse_size(arg, &size) || size < 4096 ||
		    size > (64u << 20) || (size & (size - 1)))
			argp_error(state,
				   "--chunk-size: '%s' is not a power of two "
				   "from 4K to 64M",
				   arg);
		o->chunk_size = (uint32_t)size;
		break;
	case OPT_WINDOW:
		if (parse_uint(arg, 1, 4096, &v))
			argp_error(state, "--window: '%s' is not 1..4096", arg);
		o->window = (uint16_t)v;
		break;
	case OPT_CHECKSUM:
		if (!strcmp(arg, "crc32"))
			o->csum = XFER_CSUM_CRC32;
		else if (!strcmp(arg, "sha256"))
			o->csum = XFER_CSUM_SHA256;
		else if (!strcmp(arg, "none"))
			o->csum = XFER_CSUM_NONE;
		else
			argp_error(state,
				   "--checksum: '%s' is not crc32, sha256 or "
				   "none",
				   arg);
		break;
	case OPT_FSYNC:
		o->fsync = true;
		break;
	case OPT_POLL:
		if (!strcmp(arg, "adaptive"))
			o->poll = XFER_POLL_ADAPTIVE;
		else if (!strcmp(arg, "busy"))
			o->poll = XFER_POLL_BUSY;
		else if (!strcmp(arg, "event"))
			o->poll = XFER_POLL_EVENT;
		else
			argp_error(state,
				   "--poll: '%s' is not adaptive, busy or "
				   "event",
				   arg);
		break;
	case OPT_TIMEOUT:
		if (parse_uint(arg, 1, 86400, &v))
			argp_error(state, "--timeout: '%s' is not 1..86400",
				   arg);
		o->timeout_ms = (int)v * 1000;
		break;
	case OPT_CONNECT_TIMEOUT:
		if (parse_uint(arg, 1, 3600, &v))
			argp_error(state,
				   "--connect-timeout: '%s' is not 1..3600",
				   arg);
		o->connect_timeout_ms = (int)v * 1000;
		break;
	case OPT_RETRY:
		if (parse_uint(arg, 0, RETRY_MAX, &v))
			argp_error(state, "--retry: '%s' is not 0..%d", arg,
				   RETRY_MAX);
		a->retry = (unsigned int)v;
		break;
	case OPT_RETRY_WAIT:
		if (retry_parse_wait(arg, &a->retry_wait_ms))
			argp_error(state,
				   "--retry-wait: '%s' is not 0..%u seconds",
				   arg, RETRY_WAIT_MAX_MS / 1000);
		break;
	case OPT_WORKERS:
		if (parse_uint(arg, 1, 256, &v))
			argp_error(state, "--workers: '%s' is not 1..256", arg);
		o->workers = (unsigned int)v;
		break;
	case OPT_JSON:
		a->json = true;
		break;
	case OPT_PROGRESS:
		a->progress = true;
		break;
	case OPT_CHECK:
		a->check = true;
		break;
	case OPT_DEVICE:
		o->addr.device = arg;
		break;
	case 'r':
		o->recursive = true;
		break;
	case 'p':
		o->preserve = true;
		break;
	case OPT_RESUME:
		o->resume = true;
		break;
	case 'n':
		o->no_clobber = true;
		break;
	case 'u':
		o->update = true;
		break;
	case OPT_SPARSE:
		o->sparse = true;
		break;
	case OPT_DRY_RUN:
		o->dry_run = true;
		break;
	case OPT_ENCRYPT:
		o->encrypt = true;
		break;
	case OPT_COMPRESS:
		o->compress = 1;
		if (arg && parse_uint(arg, 1, 9, &v))
			argp_error(state, "--compress: '%s' is not 1..9", arg);
		if (arg)
			o->compress = (int)v;
		break;
	case OPT_BWLIMIT:
		if (units_parse_size(arg, &size) || !size)
			argp_error(state,
				   "--bwlimit: '%s' is not a rate in bytes "
				   "per second (500M, 2G, 1GB)",
				   arg);
		o->bwlimit = size;
		break;
	case OPT_GID_INDEX:
		if (parse_uint(arg, 0, 65535, &v))
			argp_error(state, "--gid-index: '%s' is not 0..65535",
				   arg);
		o->addr.gid_index = (int)v;
		break;
	case OPT_STREAMS:
		if (parse_uint(arg, 1, 64, &v))
			argp_error(state, "--streams: '%s' is not 1..64", arg);
		if (v != 1)
			argp_error(state,
				   "--streams %lu: only one stream per session "
				   "is implemented so far",
				   v);
		break;
	case OPT_EXCLUDE:
	case OPT_INCLUDE:
	case OPT_EXCLUDE_FROM:
	case OPT_INCLUDE_FROM:
		add_rule_arg(ps, state,
			     key == OPT_INCLUDE || key == OPT_INCLUDE_FROM,
			     key == OPT_EXCLUDE_FROM || key == OPT_INCLUDE_FROM,
			     arg);
		break;
	case OPT_FILES_FROM:
		a->files_from = arg;
		break;
	case OPT_MANIFEST:
		a->manifest = arg;
		break;
	case OPT_PRINT_CONFIG:
		ps->print_config = true;
		break;
	case OPT_NO_CONFIG:
		break; /* seen by args_parse before parsing */
	case '0':
		ps->from0 = true;
		a->o.from0 = true;
		break;
	case OPT_KEYGEN:
		a->keygen = arg;
		break;
	case OPT_KEY_FILE:
		a->key_file = arg;
		break;
	case OPT_NO_AUTH:
		a->no_auth = true;
		break;
	case OPT_REQUIRE_ENCRYPT:
		a->o.require_encrypt = true;
		break;
	case 'q':
		a->quiet = true;
		break;
	case 'v':
		a->verbose++;
		break;
	case ARGP_KEY_ARGS:
		ps->srcs = (const char **)(state->argv + state->next);
		ps->nsrcs = (size_t)(state->argc - state->next);
		break;
	case ARGP_KEY_END:
		if (ps->print_config)
			break;
		if (a->check) {
			if (ps->nsrcs > 1 || a->listen || a->keygen)
				argp_error(state, "--check takes at most one "
						  "HOST");
			if (ps->nsrcs)
				a->o.addr.host = ps->srcs[0];
			break;
		}
		if (a->keygen) {
			if (ps->nsrcs || a->listen)
				argp_error(state, "--keygen takes no other "
						  "arguments");
			break;
		}
		if (a->o.addr.gid_index >= 0 && !a->o.addr.device)
			argp_error(state, "--gid-index needs --device: a GID "
					  "index is per device");
		if (a->no_auth && a->key_file)
			argp_error(state, "--no-auth and --key-file exclude "
					  "each other");
		if (a->o.require_encrypt && a->no_auth)
			argp_error(state, "--require-encrypt needs the "
					  "pre-shared key: it cannot go with "
					  "--no-auth");
		if (a->listen) {
			if (ps->nsrcs)
				argp_error(state,
					   "--listen takes no SRC or DEST");
			break;
		}
		if (ps->nsrcs < 2)
			argp_error(state, "need at least one SRC and a DEST, "
					  "one side of them HOST:path");
		split_args(ps, state);
		if (a->o.encrypt && a->no_auth)
			argp_error(state, "--encrypt needs the pre-shared key: "
					  "it cannot go with --no-auth");
		if (a->o.require_encrypt && !a->o.encrypt)
			argp_error(state, "--require-encrypt: this copy would "
					  "run unencrypted (add --encrypt)");
		if (a->o.no_clobber && a->o.update)
			argp_error(state, "--no-clobber and --update exclude "
					  "each other");
		/* Each attempt keeps what it verified for the next. */
		a->o.resume |= a->retry > 0;
		a->o.addr.host = a->target;
		a->o.srcs = ps->srcs;
		a->o.nsrcs = ps->nsrcs;
		if (a->manifest && a->o.csum == XFER_CSUM_NONE)
			argp_error(state, "--manifest needs a digest: not with "
					  "--checksum none");
		if (a->manifest && a->o.dry_run)
			argp_error(state, "--manifest lists what was copied: "
					  "not with --dry-run, which copies "
					  "nothing");
		if (a->files_from && a->o.pull)
			argp_error(state, "--files-from works on a push only: "
					  "the list names local files");
		if (a->files_from && ps->nsrcs != 1)
			argp_error(state, "--files-from takes one SRC: the "
					  "directory the listed paths are in");
		/* The names land beneath DEST, made if missing, as rsync. */
		if (a->files_from &&
		    (!*a->o.dest || a->o.dest[strlen(a->o.dest) - 1] != '/')) {
			if (asprintf(&a->dest_dir, "%s/", a->o.dest) < 0)
				exit(RDCP_EXIT_RESOURCE);
			a->o.dest = a->dest_dir;
		}
		compile_rules(ps, state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* Options that are no defaults: they act, or name this run's files. */
static const char *const not_defaults[] = {
	"listen",    "keygen",	   "check",    "print-config",
	"no-config", "files-from", "manifest", NULL,
};

void args_parse(struct args *a, int argc, char **argv)
{
	static const struct argp argp = {
		.options = options,
		.parser = parse_opt,
		.args_doc = args_doc,
		.doc = doc,
	};
	struct parse ps = { .a = a };
	int rc = 0;

	*a = (struct args){ .retry_wait_ms = RETRY_WAIT_DEFAULT_MS };
	xfer_opts_init(&a->o);
	if (config_wanted(argc, argv))
		rc = config_load(&a->cfg, CONFIG_SYSTEM, options, not_defaults);
	if (!rc)
		rc = config_argv(&a->cfg, argc, argv);
	if (rc)
		exit(rc == -ENOMEM ? RDCP_EXIT_RESOURCE : RDCP_EXIT_USAGE);
	argp_parse(&argp, a->cfg.argc, a->cfg.argv, 0, NULL, &ps);
	if (ps.print_config) {
		config_print(&a->cfg, ps.seen, ps.nseen, options, adds_up);
		exit(RDCP_EXIT_OK);
	}
	free(ps.seen);
}

void args_release(struct args *a)
{
	filter_release(&a->filter);
	config_release(&a->cfg);
	free(a->dest_dir);
	a->dest_dir = NULL;
	a->o.filter = NULL;
	free(a->target);
	a->target = NULL;
}
