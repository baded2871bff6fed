/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's command line: argp into a const struct xfer_opts, validation,
 * signals, and the mapping of the engine's verdict to an exit code. The
 * only code that touches argv, prints usage or calls exit().
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/exit_codes.h"
#include "cmd/json_out.h"
#include "transfer/xfer.h"
#include "util/key.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/path.h"
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
	  "chunk by chunk against the source by CRC32 and only what "
	  "differs is sent; partial files are kept on failure for the next "
	  "try",
	  2 },
	{ "no-clobber", 'n', NULL, 0, "Never replace an existing file", 2 },
	{ "update", 'u', NULL, 0,
	  "Replace only files older than the source (modification time)", 2 },
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
	{ NULL, 0, NULL, 0, "Output:", 5 },
	{ "json", OPT_JSON, NULL, 0,
	  "Sender: newline-delimited JSON events on stdout (file_start, "
	  "file_done, error, summary)",
	  5 },
	{ "progress", OPT_PROGRESS, NULL, 0,
	  "Sender: show progress even when stderr is not a terminal (it is "
	  "shown by default on a terminal)",
	  5 },
	{ "quiet", 'q', NULL, 0, "Print nothing but errors", 5 },
	{ "verbose", 'v', NULL, 0, "More detail; twice for debug", 5 },
	{ 0 }
};

struct cli {
	struct xfer_opts o;
	bool listen;
	int verbose;
	bool quiet;
	bool json;
	bool check;
	bool progress;	     /* show the progress line */
	bool progress_shown; /* a progress line is on screen now */
	double progress_t0;
	const char *keygen;
	const char *key_file;
	bool no_auth;
	uint8_t key[KEY_LEN];
	char *target; /* HOST part, owned */
	const char **srcs;
	size_t nsrcs;
};

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
static void split_args(struct cli *cli, struct argp_state *state)
{
	size_t last = cli->nsrcs - 1;
	const char *path;
	char *host = NULL;
	bool pull = split_remote(cli->srcs[last], &cli->target, &path) != 0;

	if (!pull) {
		cli->o.dest = path;
	} else {
		if (split_remote(cli->srcs[0], &cli->target, &path))
			argp_error(state,
				   "'%s' is not HOST:path: one side of a copy "
				   "names the receiver",
				   cli->srcs[last]);
		cli->o.pull = true;
		cli->o.dest = cli->srcs[last];
	}
	cli->nsrcs--;
	for (size_t i = 0; i < cli->nsrcs; i++) {
		bool remote = split_remote(cli->srcs[i], &host, &path) == 0;

		if (remote != pull)
			argp_error(
				state,
				pull ? "'%s': all SRCs of a pull are on the "
				       "remote host (HOST:SRC)"
				     : "'%s': SRCs of a push are local files; "
				       "copying between two remote hosts is "
				       "not supported",
				cli->srcs[i]);
		if (remote && strcmp(host, cli->target))
			argp_error(state,
				   "'%s': all SRCs must come from one host",
				   cli->srcs[i]);
		if (remote)
			cli->srcs[i] = path;
		free(host);
		host = NULL;
	}
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct cli *cli = state->input;
	struct xfer_opts *o = &cli->o;
	unsigned long v;
	uint64_t size;

	switch (key) {
	case 'l':
		cli->listen = true;
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
	case OPT_WORKERS:
		if (parse_uint(arg, 1, 256, &v))
			argp_error(state, "--workers: '%s' is not 1..256", arg);
		o->workers = (unsigned int)v;
		break;
	case OPT_JSON:
		cli->json = true;
		break;
	case OPT_PROGRESS:
		cli->progress = true;
		break;
	case OPT_CHECK:
		cli->check = true;
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
	case OPT_KEYGEN:
		cli->keygen = arg;
		break;
	case OPT_KEY_FILE:
		cli->key_file = arg;
		break;
	case OPT_NO_AUTH:
		cli->no_auth = true;
		break;
	case 'q':
		cli->quiet = true;
		break;
	case 'v':
		cli->verbose++;
		break;
	case ARGP_KEY_ARGS:
		cli->srcs = (const char **)(state->argv + state->next);
		cli->nsrcs = (size_t)(state->argc - state->next);
		break;
	case ARGP_KEY_END:
		if (cli->check) {
			if (cli->nsrcs > 1 || cli->listen || cli->keygen)
				argp_error(state, "--check takes at most one "
						  "HOST");
			if (cli->nsrcs)
				cli->o.addr.host = cli->srcs[0];
			break;
		}
		if (cli->keygen) {
			if (cli->nsrcs || cli->listen)
				argp_error(state, "--keygen takes no other "
						  "arguments");
			break;
		}
		if (cli->o.addr.gid_index >= 0 && !cli->o.addr.device)
			argp_error(state, "--gid-index needs --device: a GID "
					  "index is per device");
		if (cli->no_auth && cli->key_file)
			argp_error(state, "--no-auth and --key-file exclude "
					  "each other");
		if (cli->listen) {
			if (cli->nsrcs)
				argp_error(state,
					   "--listen takes no SRC or DEST");
			break;
		}
		if (cli->nsrcs < 2)
			argp_error(state, "need at least one SRC and a DEST, "
					  "one side of them HOST:path");
		split_args(cli, state);
		if (cli->o.encrypt && cli->no_auth)
			argp_error(state, "--encrypt needs the pre-shared key: "
					  "it cannot go with --no-auth");
		if (cli->o.no_clobber && cli->o.update)
			argp_error(state, "--no-clobber and --update exclude "
					  "each other");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static volatile sig_atomic_t cancel;

static void on_signal(int sig)
{
	cancel = sig;
}

static void set_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int exit_code(enum xfer_fail f)
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
	};

	if ((unsigned int)f >= sizeof(codes) / sizeof(codes[0]))
		return RDCP_EXIT_INTERNAL;
	return codes[f];
}

/* Wipes the progress line so that a normal line can be printed. */
static void progress_clear(struct cli *cli)
{
	if (cli->progress_shown)
		fputs("\r\033[K", stderr);
	cli->progress_shown = false;
}

/* "name  12.00 MiB / 1.00 GiB  812.3 MB/s  ETA 0:01", redrawn in place. */
static void on_progress(void *arg, uint64_t done, uint64_t total,
			const char *path)
{
	struct cli *cli = arg;
	char d[32], t[32], r[32];
	double now = clock_now_s(), rate;
	uint64_t eta;

	if (!cli->progress)
		return;
	if (!cli->progress_t0)
		cli->progress_t0 = now;
	rate = now > cli->progress_t0 ? done / (now - cli->progress_t0) : 0;
	eta = rate > 0 && total > done ? (uint64_t)((total - done) / rate) : 0;
	if (!total) /* a pull, or sources still being listed: no total */
		fprintf(stderr, "\r\033[K%-30.30s %s  %s", path_basename(path),
			units_format_size(done, d, sizeof(d)),
			units_format_rate(rate, r, sizeof(r)));
	else
		fprintf(stderr, "\r\033[K%-30.30s %s / %s  %s  ETA %llu:%02llu",
			path_basename(path),
			units_format_size(done, d, sizeof(d)),
			units_format_size(total, t, sizeof(t)),
			units_format_rate(rate, r, sizeof(r)),
			(unsigned long long)(eta / 60),
			(unsigned long long)(eta % 60));
	fflush(stderr);
	cli->progress_shown = true;
}

static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct cli *cli = arg;
	char sz[32], rate[32];

	if (cli->json) {
		json_file(stdout, r);
		return;
	}
	if (cli->progress && r->done) {
		/* One line per file above the progress line. */
		progress_clear(cli);
		fprintf(stderr, "%-40s %12s  %s\n", r->path,
			units_format_size(r->bytes, sz, sizeof(sz)),
			r->status    ? "FAILED"
			: r->skipped ? "skipped"
				     : "ok");
		return;
	}
	if (!r->done || r->status || !log_enabled(LOG_INFO))
		return;
	log_info("%s '%s': %s in %.2f s (%s), digest %s",
		 r->skipped    ? "kept"
		 : cli->o.pull ? "received"
			       : "sent",
		 r->path, units_format_size(r->bytes, sz, sizeof(sz)),
		 r->seconds,
		 units_format_rate(r->seconds > 0 ? r->bytes / r->seconds : 0,
				   rate, sizeof(rate)),
		 r->digest[0] ? r->digest : "none");
}

/* Creates FILE's directories if missing (0700), then the key. */
static int keygen(const char *path)
{
	char dir[4096];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		/* mkdir -p, 0700: ~/.config/rdcp may not exist yet */
		for (char *p = dir + 1; *p; p++) {
			if (*p == '/') {
				*p = '\0';
				mkdir(dir, 0700);
				*p = '/';
			}
		}
		mkdir(dir, 0700);
	}
	if (key_generate(path))
		return RDCP_EXIT_LOCAL_IO;
	fprintf(stderr,
		"rdcp: wrote a new key to '%s'; copy it (mode 0600) to the "
		"peer, e.g. as /etc/rdcp/key\n",
		path);
	return RDCP_EXIT_OK;
}

/* Loads the key, or explains why there is none. 0 or an exit code. */
static int load_key(struct cli *cli)
{
	char path[4096];

	if (cli->no_auth) {
		if (cli->listen)
			log_warn("authentication is OFF (--no-auth): any host "
				 "that reaches port %u may write into '%s'; "
				 "use this on isolated fabrics only",
				 cli->o.addr.port,
				 cli->o.root ? cli->o.root : ".");
		return 0;
	}
	if (cli->key_file) {
		snprintf(path, sizeof(path), "%s", cli->key_file);
	} else if (key_default_path(path, sizeof(path))) {
		log_err("no key file (looked for '%s' and '/etc/rdcp/key'): "
			"create one with 'rdcp --keygen %s' and copy it to "
			"the peer, or run both sides with --no-auth on an "
			"isolated fabric",
			path, path);
		return RDCP_EXIT_AUTH;
	}
	if (key_load(path, cli->key))
		return RDCP_EXIT_AUTH;
	cli->o.key = cli->key;
	log_debug("key from '%s'", path);
	return 0;
}

/* -v: what this process cost, from getrusage (also read by make bench). */
static void report_usage(void)
{
	struct rusage ru;
	char rss[32];

	if (!log_enabled(LOG_INFO) || getrusage(RUSAGE_SELF, &ru))
		return;
	log_info("resources: user %.2f s, system %.2f s, peak RSS %s",
		 ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		 ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
		 units_format_size((uint64_t)ru.ru_maxrss * 1024, rss,
				   sizeof(rss)));
}

static void check_line(void *arg, enum cm_check_kind kind, const char *text)
{
	static const char *const tag[] = {
		[CM_CHECK_OK] = "ok      ",
		[CM_CHECK_INFO] = "        ",
		[CM_CHECK_PROBLEM] = "PROBLEM ",
	};

	printf("%s%s\n", tag[kind], text);
}

/* rdcp --check [HOST]: exit 0 when nothing is wrong. */
static int check(struct cli *cli)
{
	uint64_t pinned =
		2 * (uint64_t)cli->o.window * (cli->o.chunk_size + 64) +
		(1u << 20);
	int problems = cm_check(&cli->o.addr, pinned, check_line, NULL);

	printf("%d problem%s found\n", problems, problems == 1 ? "" : "s");
	return problems ? RDCP_EXIT_RESOURCE : RDCP_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct argp argp = {
		.options = options,
		.parser = parse_opt,
		.args_doc = args_doc,
		.doc = doc,
	};
	struct cli cli = { 0 };
	enum xfer_fail v;

	xfer_opts_init(&cli.o);
	argp_parse(&argp, argc, argv, 0, NULL, &cli);
	log_set_level(cli.quiet		 ? LOG_ERR
		      : cli.verbose >= 2 ? LOG_DEBUG
		      : cli.verbose	 ? LOG_INFO
					 : LOG_WARN);
	if (cli.keygen)
		return keygen(cli.keygen);
	if (cli.check)
		return check(&cli);
	{
		int rc = load_key(&cli);

		if (rc)
			return rc;
	}
	set_signals();
	cli.o.cancel = &cancel;
	if (cli.listen) {
		v = xfer_serve(&cli.o);
	} else {
		struct xfer_stats st;
		char sz[32], rate[32];

		cli.o.addr.host = cli.target;
		cli.o.srcs = cli.srcs;
		cli.o.nsrcs = cli.nsrcs;
		cli.o.on_file = on_file;
		cli.o.on_file_arg = &cli;
		if (!cli.progress)
			cli.progress = isatty(STDERR_FILENO) && !cli.json &&
				       log_get_level() < LOG_INFO;
		if (cli.quiet)
			cli.progress = false;
		cli.o.on_progress = on_progress;
		v = xfer_copy(&cli.o, &st);
		progress_clear(&cli);
		if (cli.progress && v == XFER_OK)
			fprintf(stderr,
				"%llu files, %s in %.2f s (%s) over %s\n",
				(unsigned long long)st.files_ok,
				units_format_size(st.bytes, sz, sizeof(sz)),
				st.seconds,
				units_format_rate(
					st.seconds > 0 ? st.bytes / st.seconds
						       : 0,
					rate, sizeof(rate)),
				st.transport);
		if (cli.json) {
			/* A session failure (not one of its files). */
			if (v != XFER_OK && !(st.files_failed && !st.error[0]))
				json_error(stdout, v, exit_code(v),
					   st.error[0] ? st.error
						       : log_last_error());
			json_summary(stdout, &st, v, exit_code(v));
		}
		if (v == XFER_OK)
			log_info("%llu files, %s in %.2f s (%s) over %s%s%s",
				 (unsigned long long)st.files_ok,
				 units_format_size(st.bytes, sz, sizeof(sz)),
				 st.seconds,
				 units_format_rate(
					 st.seconds > 0 ? st.bytes / st.seconds
							: 0,
					 rate, sizeof(rate)),
				 st.transport,
				 strcmp(st.transport, st.device) ? " on " : "",
				 strcmp(st.transport, st.device) ? st.device
								 : "");
		free(cli.target);
	}
	report_usage();
	return exit_code(v);
}
