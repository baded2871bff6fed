/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp's command line: one parser case per option of the table in
 * cmd/options.c with its range check; at its end the operands sorted out
 * and the checks that options go together (args_check.c). Usage errors go
 * through argp_error(): message, usage line, exit RDCP_EXIT_USAGE.
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/args.h"
#include "cmd/args_int.h"
#include "cmd/exit_codes.h"
#include "cmd/far.h"
#include "cmd/options.h"
#include "cmd/retry.h"
#include "util/key.h"
#include "util/log.h"
#include "util/units.h"

const char *argp_program_version = "rdcp " RDCP_VERSION;
error_t argp_err_exit_status = RDCP_EXIT_USAGE;

/* Every usage error names the rdcp.conf line (args_check.c). */
#define argp_error args_opt_error

/* Options that add up instead of the last one winning. */
static bool adds_up(int key)
{
	return key == OPT_EXCLUDE || key == OPT_INCLUDE ||
	       key == OPT_EXCLUDE_FROM || key == OPT_INCLUDE_FROM || key == 'v';
}

static void add_rule_arg(struct args_state *ps, struct argp_state *state,
			 bool include, bool from_file, const char *arg)
{
	struct args_rule *v = realloc(ps->rules, (ps->nrules + 1) * sizeof(*v));

	if (!v)
		argp_failure(state, RDCP_EXIT_RESOURCE, ENOMEM, "rules");
	ps->rules = v;
	v[ps->nrules++] = (struct args_rule){ .include = include,
					      .from_file = from_file,
					      .arg = arg };
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

/* --sync's LEVEL: an enum xfer_sync, or -1. */
static int sync_level(const char *s)
{
	static const char *const names[] = {
		[XFER_SYNC_EXISTS] = "exists",
		[XFER_SYNC_SIZE] = "size",
		[XFER_SYNC_MTIME] = "mtime",
		[XFER_SYNC_CHECKSUM] = "checksum",
	};

	for (int i = XFER_SYNC_EXISTS; i <= XFER_SYNC_CHECKSUM; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct args_state *ps = state->input;
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
		o->serve.root = arg;
		break;
	case OPT_BIND:
		o->link.addr.host = arg;
		break;
	case OPT_ONCE:
		o->serve.once = true;
		break;
	case OPT_CLIENTS:
		o->serve.clients_dir = arg;
		break;
	case OPT_MODULES:
		o->serve.modules_file = arg;
		break;
	case OPT_MAX_SESSIONS:
		if (parse_uint(arg, 1, 1024, &v))
			argp_error(state, "--max-sessions: '%s' is not 1..1024",
				   arg);
		o->serve.max_sessions = (unsigned int)v;
		break;
	case OPT_AUDIT_LOG:
		o->serve.audit_log = arg;
		break;
	case OPT_METRICS: {
		const char *port = strrchr(arg, ':');

		if (parse_uint(port ? port + 1 : arg, 1, 65535, &v))
			argp_error(state,
				   "--metrics: '%s' is not [HOST:]PORT with "
				   "PORT 1..65535",
				   arg);
		o->serve.metrics_addr = arg;
		break;
	}
	case 'P':
		if (parse_uint(arg, 1, 65535, &v))
			argp_error(state, "--port: '%s' is not 1..65535", arg);
		o->link.addr.port = (uint16_t)v;
		if (!ps->from)
			ps->port_arg = arg;
		break;
	case OPT_TRANSPORT:
		if (!strcmp(arg, "auto"))
			o->link.addr.transport = CM_TRANSPORT_AUTO;
		else if (!strcmp(arg, "rdma"))
			o->link.addr.transport = CM_TRANSPORT_RDMA;
		else if (!strcmp(arg, "tcp"))
			o->link.addr.transport = CM_TRANSPORT_TCP;
		else
			argp_error(state,
				   "--transport: '%s' is not rdma, tcp or auto",
				   arg);
		break;
	case '4':
		o->link.addr.family = CM_AF_INET;
		break;
	case '6':
		o->link.addr.family = CM_AF_INET6;
		break;
	case OPT_CHUNK:
		if (units_parse_size(arg, &size) || size < 4096 ||
		    size > (64u << 20) || (size & (size - 1)))
			argp_error(state,
				   "--chunk-size: '%s' is not a power of two "
				   "from 4K to 64M",
				   arg);
		o->link.chunk_size = (uint32_t)size;
		break;
	case OPT_WINDOW:
		if (parse_uint(arg, 1, 4096, &v))
			argp_error(state, "--window: '%s' is not 1..4096", arg);
		o->link.window = (uint16_t)v;
		break;
	case OPT_CHECKSUM:
		if (!strcmp(arg, "crc32"))
			o->copy.csum = XFER_CSUM_CRC32;
		else if (!strcmp(arg, "sha256"))
			o->copy.csum = XFER_CSUM_SHA256;
		else if (!strcmp(arg, "none"))
			o->copy.csum = XFER_CSUM_NONE;
		else
			argp_error(state,
				   "--checksum: '%s' is not crc32, sha256 or "
				   "none",
				   arg);
		break;
	case OPT_FSYNC:
		o->copy.fsync = true;
		break;
	case OPT_DIRECT: /* the last of the two wins: over rdcp.conf */
		o->link.direct = XFER_DIRECT_ON;
		break;
	case OPT_NO_DIRECT:
		o->link.direct = XFER_DIRECT_OFF;
		break;
	case OPT_POLL:
		if (!strcmp(arg, "adaptive"))
			o->link.poll = XFER_POLL_ADAPTIVE;
		else if (!strcmp(arg, "busy"))
			o->link.poll = XFER_POLL_BUSY;
		else if (!strcmp(arg, "event"))
			o->link.poll = XFER_POLL_EVENT;
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
		o->link.timeout_ms = (int)v * 1000;
		break;
	case OPT_CONNECT_TIMEOUT:
		if (parse_uint(arg, 1, 3600, &v))
			argp_error(state,
				   "--connect-timeout: '%s' is not 1..3600",
				   arg);
		o->link.connect_timeout_ms = (int)v * 1000;
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
		o->link.workers = (unsigned int)v;
		break;
	case OPT_NUMA:
		if (!strcmp(arg, "auto")) {
			o->link.numa = XFER_NUMA_AUTO;
		} else if (!strcmp(arg, "off")) {
			o->link.numa = XFER_NUMA_OFF;
		} else if (!parse_uint(arg, 0, 4095, &v)) {
			o->link.numa = XFER_NUMA_NODE;
			o->link.numa_node = (int)v;
		} else {
			argp_error(state,
				   "--numa: '%s' is not auto, off or a node "
				   "number",
				   arg);
		}
		break;
	case OPT_IO_DEPTH:
		if (!strcmp(arg, "off"))
			o->link.io_depth = XFER_IO_DEPTH_OFF;
		else if (parse_uint(arg, 1, 4096, &v))
			argp_error(state,
				   "--io-depth: '%s' is not 1..4096 or off",
				   arg);
		else
			o->link.io_depth = (unsigned int)v;
		break;
	case OPT_HUGEPAGES:
		if (!strcmp(arg, "auto"))
			o->link.hugepages = HUGEMEM_AUTO;
		else if (!strcmp(arg, "on"))
			o->link.hugepages = HUGEMEM_ON;
		else if (!strcmp(arg, "off"))
			o->link.hugepages = HUGEMEM_OFF;
		else
			argp_error(state,
				   "--hugepages: '%s' is not auto, on or off",
				   arg);
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
		o->link.addr.device = arg;
		o->link.rail_devices = NULL;
		if (strchr(arg, ',')) { /* rails: lane 0's device first */
			size_t n = strcspn(arg, ",");
			unsigned int k = 1;

			for (const char *p = arg; (p = strchr(p, ',')); p++)
				k++;
			if (!n || strstr(arg, ",,") ||
			    arg[strlen(arg) - 1] == ',' || k > 16)
				argp_error(state,
					   "--device: '%s' is not a list of 1 "
					   "to 16 device names",
					   arg);
			o->link.addr.device = strndup(arg, n);
			if (!o->link.addr.device)
				argp_failure(state, 10, ENOMEM, "--device");
			o->link.rail_devices = arg;
		}
		break;
	case 'r':
		o->copy.recursive = true;
		break;
	case 'p':
		o->copy.preserve = true;
		break;
	case OPT_RESUME:
		o->copy.resume = true;
		break;
	case 'a': /* rsync's -a as far as rdcp goes (-rptgo) */
		o->copy.recursive = true;
		o->copy.preserve = true;
		o->copy.owner = true;
		o->copy.group = true;
		a->archive = true;
		break;
	case 'o':
		o->copy.owner = true;
		break;
	case 'g':
		o->copy.group = true;
		break;
	case OPT_NUMERIC_IDS:
		o->copy.numeric_ids = true;
		break;
	case 'X':
		o->copy.xattrs = true;
		break;
	case 'A':
		o->copy.acls = true;
		break;
	case 'H':
		o->copy.hard_links = true;
		break;
	case 'D': /* rsync's -D */
		o->copy.devices = true;
		o->copy.specials = true;
		break;
	case OPT_DEVICES:
		o->copy.devices = true;
		break;
	case OPT_SPECIALS:
		o->copy.specials = true;
		break;
	case OPT_ALLOW_OWNERS:
		o->serve.allow_owners = true;
		break;
	case OPT_ALLOW_DEVICES:
		o->serve.allow_devices = true;
		break;
	case OPT_SYNC:
		/* "--sync LEVEL" as well as "--sync=LEVEL"; bare: mtime */
		if (!arg && state->next < state->argc &&
		    sync_level(state->argv[state->next]) >= 0) {
			arg = state->argv[state->next++];
			ps->seen[ps->nseen - 1].arg = arg;
		}
		if (!arg) {
			o->copy.sync = XFER_SYNC_MTIME;
		} else if (sync_level(arg) >= 0) {
			o->copy.sync = (enum xfer_sync)sync_level(arg);
		} else {
			argp_error(state,
				   "--sync: '%s' is not a level (exists, "
				   "size, mtime or checksum)",
				   arg);
		}
		a->sync_set = true;
		break;
	case 'n':
		o->copy.no_clobber = true;
		break;
	case 'u':
		o->copy.update = true;
		break;
	case OPT_SPARSE:
		o->copy.sparse = true;
		break;
	case OPT_DRY_RUN:
		o->copy.dry_run = true;
		break;
	case OPT_DELETE:
		o->copy.delete_extra = true;
		break;
	case OPT_MAX_DELETE:
		if (parse_uint(arg, 0, ULONG_MAX - 1, &v))
			argp_error(state, "--max-delete: '%s' is not a count",
				   arg);
		o->copy.max_delete = v;
		break;
	case OPT_ENCRYPT:
		o->copy.encrypt = true;
		break;
	case OPT_COMPRESS:
		o->copy.compress = 1;
		if (arg && parse_uint(arg, 1, 9, &v))
			argp_error(state, "--compress: '%s' is not 1..9", arg);
		if (arg)
			o->copy.compress = (int)v;
		break;
	case OPT_BWLIMIT:
		if (units_parse_size(arg, &size) || !size)
			argp_error(state,
				   "--bwlimit: '%s' is not a rate in bytes "
				   "per second (500M, 2G, 1GB)",
				   arg);
		o->copy.bwlimit = size;
		break;
	case OPT_SPLIT:
		o->copy.split_auto = !strcmp(arg, "auto");
		if (!o->copy.split_auto &&
		    parse_uint(arg, 0, XFER_SPLIT_MAX, &v))
			argp_error(state, "--split: '%s' is not 0..%u or auto",
				   arg, XFER_SPLIT_MAX);
		o->copy.split = o->copy.split_auto ? 0 : (unsigned int)v;
		break;
	case OPT_SPLIT_SIZE:
		if (units_parse_size(arg, &size) || !size)
			argp_error(state,
				   "--split-size: '%s' is not a size of 1 "
				   "byte or more (256M, 1G)",
				   arg);
		o->copy.split_size = size;
		break;
	case OPT_GID_INDEX:
		if (parse_uint(arg, 0, 65535, &v))
			argp_error(state, "--gid-index: '%s' is not 0..65535",
				   arg);
		o->link.addr.gid_index = (int)v;
		break;
	case OPT_STREAMS:
		if (parse_uint(arg, 1, CM_LANES_MAX, &v))
			argp_error(state, "--streams: '%s' is not 1..%u", arg,
				   CM_LANES_MAX);
		o->link.streams = (unsigned int)v;
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
		a->o.copy.from0 = true;
		break;
	case 'e':
		if (!*arg)
			argp_error(state, "--rsh: an empty command");
		a->rsh = arg;
		break;
	case OPT_RDCP_PATH:
		if (!*arg)
			argp_error(state, "--rdcp-path: an empty name");
		o->ssh.rdcp_path = arg;
		break;
	case OPT_DAEMON:
		a->mode = REMOTE_DAEMON;
		break;
	case OPT_SSH:
		a->mode = REMOTE_SSH;
		break;
	case OPT_PORT_RANGE: {
		unsigned long lo, hi;
		char *dash = strchr(arg, '-'), first[8];

		if (!dash || (size_t)(dash - arg) >= sizeof(first))
			argp_error(state, "--port-range: '%s' is not LO-HI",
				   arg);
		snprintf(first, sizeof(first), "%.*s", (int)(dash - arg), arg);
		if (parse_uint(first, 1, 65535, &lo) ||
		    parse_uint(dash + 1, lo, 65535, &hi))
			argp_error(state,
				   "--port-range: '%s' is not LO-HI, 1 <= LO "
				   "<= HI <= 65535",
				   arg);
		o->ssh.port_lo = (uint16_t)lo;
		o->ssh.port_hi = (uint16_t)hi;
		break;
	}
	case OPT_RDMA_ADDR:
		o->ssh.rdma_addr = arg;
		break;
	case OPT_SERVER:
		a->server = true;
		break;
	case OPT_BOOT_STDIN:
		a->boot_host = arg;
		break;
	case OPT_KEYGEN:
		a->keygen = arg;
		break;
	case OPT_NAME:
		if (!key_name_valid(arg))
			argp_error(state,
				   "--name: '%s' is no client name (1 to %d "
				   "of A-Z a-z 0-9 . _ -, not \"site-key\")",
				   arg, KEY_NAME_MAX);
		a->keygen_name = arg;
		break;
	case OPT_KEY_FILE:
		a->key_file = arg;
		break;
	case OPT_NO_AUTH:
		a->no_auth = true;
		break;
	case OPT_REQUIRE_ENCRYPT:
		a->o.serve.require_encrypt = true;
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
		args_check(ps, state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/*
 * Options that are no defaults: they act or choose the role (a receiver,
 * the far end of a copy over ssh, the sending end of a copy between two
 * hosts, whose destination --boot-stdin takes from stdin), name this
 * run's files, or delete (--delete is asked for run by run). What a file
 * may set is otherwise what a user may type: its owner is checked
 * (config.c), not each value.
 */
static const char *const not_defaults[] = {
	"listen",     "keygen",	    "check",	"print-config",
	"no-config",  "files-from", "manifest", "server",
	"boot-stdin", "delete",	    "name", "clients", "modules", NULL,
};

void args_parse(struct args *a, int argc, char **argv)
{
	static const struct argp argp = {
		.options = rdcp_options,
		.parser = parse_opt,
		.args_doc = rdcp_args_doc,
		.doc = rdcp_doc,
	};
	struct args_state ps = { .a = a };
	int rc = 0;

	*a = (struct args){ .retry_wait_ms = RETRY_WAIT_DEFAULT_MS };
	xfer_opts_init(&a->o);
	a->rsh = getenv("RDCP_RSH") && *getenv("RDCP_RSH") ? getenv("RDCP_RSH")
							   : "ssh";
	a->o.ssh.rdcp_path = "rdcp";
	if (config_wanted(argc, argv))
		rc = config_load(&a->cfg, CONFIG_SYSTEM, rdcp_options, not_defaults);
	if (!rc)
		rc = config_argv(&a->cfg, argc, argv);
	if (rc)
		exit(rc == -ENOMEM ? RDCP_EXIT_RESOURCE : RDCP_EXIT_USAGE);
	argp_parse(&argp, a->cfg.argc, a->cfg.argv, 0, NULL, &ps);
	if (ps.print_config) {
		config_print(&a->cfg, ps.seen, ps.nseen, rdcp_options, adds_up);
		exit(RDCP_EXIT_OK);
	}
	if (a->split.dest_host &&
	    far_argv(ps.seen, ps.nseen, rdcp_options, &a->filter,
		     a->split.dest_host, a->o.copy.srcs, a->o.copy.nsrcs,
		     a->o.copy.dest, &a->far))
		exit(RDCP_EXIT_RESOURCE);
	free(ps.seen);
}

void args_release(struct args *a)
{
	filter_release(&a->filter);
	config_release(&a->cfg);
	free(a->dest_dir);
	a->dest_dir = NULL;
	a->o.copy.filter = NULL;
	operands_split_release(&a->split);
	far_release(a->far);
	a->far = NULL;
}

int args_load_key(const struct args *a, uint8_t key[KEY_LEN], char *name,
		  const char *peers, bool optional)
{
	char path[4096];

	if (a->key_file) {
		snprintf(path, sizeof(path), "%s", a->key_file);
	} else if (key_default_path(path, sizeof(path))) {
		if (optional)
			return -ENOENT;
		log_err("no key file (looked for '%s' and '/etc/rdcp/key'): "
			"create one with 'rdcp --keygen %s' and copy it to "
			"%s, or run both sides with --no-auth on an isolated "
			"fabric",
			path, path, peers);
		return RDCP_EXIT_AUTH;
	}
	if (key_load(path, key, name))
		return RDCP_EXIT_AUTH;
	log_debug("key from '%s'", path);
	return 0;
}
