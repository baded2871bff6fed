/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi's setup before any rank runs (mpi_rank.h): the receivers taken
 * off DEST and each rank's address, the options it refuses, the key, and
 * the base directory the names the walk finds are beneath.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd/args.h"
#include "cmd/exit_codes.h"
#include "cmd/json_out.h"
#include "cmd/mpi/mpi_job.h"
#include "cmd/mpi/mpi_rank.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/hostlist.h"
#include "util/key.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

void mpi_usage_help(void)
{
	printf("Usage: mpirun -np N rdcp-mpi [OPTION...] SRC... "
	       "HOST[,HOST...]:DEST\n"
	       "   or: mpirun -np N rdcp-mpi [OPTION...] SRC... "
	       "HOST[,HOST...]::DEST\n"
	       "   or: mpirun -np N rdcp-mpi [OPTION...] SRC... "
	       "rdcp://HOST[:PORT][,HOST[:PORT]...]/DEST\n"
	       "Copy SRCs into the directory DEST on the receivers, N ranks at "
	       "once, rank i to\nreceiver i %% (number of receivers). "
	       "HOST:DEST: each rank starts rdcp there over\nssh, as rdcp "
	       "does; HOST::DEST and rdcp://: receivers already running "
	       "(rdcp\n--listen, rdcpd). HOST may be a list: "
	       "\"dst[01-16]\", \"a,b[1-3]\".\nMPI coordinates; "
	       "the data goes over each rank's own rdcp session.\n\n"
	       "      --split-size=SIZE  split files of at least SIZE "
	       "into ranges copied by\n"
	       "                         several ranks at once (default "
	       "1G; 0: never)\n\n"
	       "rdcp's copy options apply (rdcp --help), --delete and --retry "
	       "too: each rank\nretries its own session; rank 0 mirrors DEST "
	       "once every rank's copy is verified.\nNot --files-from, -H, "
	       "--manifest, a pull or a remote SRC. See rdcp-mpi(1).\n");
}

/* The rank as the launcher tells it, before MPI_Init (for messages). */
int mpi_env_rank(void)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					    "PMIX_RANK", NULL };

	for (int i = 0; vars[i]; i++)
		if (getenv(vars[i]))
			return atoi(getenv(vars[i]));
	return 0;
}

/*
 * Where DEST's host part ends: at "/" after "rdcp://", at "::", or, over
 * ssh, at the first ':' outside brackets that no '/' precedes. NULL: not
 * a remote DEST. *kind: 'u' rdcp://, 'd' HOST::, 's' HOST: (ssh).
 */
static const char *host_end(const char *s, char *kind)
{
	const char *url = "rdcp://";
	int depth = 0;

	if (!strncmp(s, url, strlen(url))) {
		*kind = 'u';
		return strchr(s + strlen(url), '/');
	}
	for (const char *p = s; *p && *p != '/'; p++) {
		depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
		if (*p != ':' || depth)
			continue;
		*kind = p[1] == ':' ? 'd' : 's';
		return p == s ? NULL : p;
	}
	return NULL;
}

/*
 * The receivers in DEST: "h1,h2::PATH", "rdcp://h1:p1,h2:p2/PATH", or
 * over ssh "h1,h2:PATH", each list a host list ("dst[01-16]", hostlist.h).
 * argv's DEST is rewritten to name the first, for args_parse to check.
 * 0, or -EINVAL (logged).
 */
int mpi_split_receivers(struct rank *r, int argc, char **argv, char **first)
{
	const char *end = NULL;
	char kind = 0, *list;
	const char *why;
	int at = -1, n;

	for (int i = argc - 1; i > 0 && at < 0; i--) {
		const char *s = argv[i], *h;

		if (s[0] == '-')
			continue;
		end = host_end(s, &kind);
		h = kind == 'u' ? s + strlen("rdcp://") : s;
		/* One plain receiver: args_parse reads it. */
		if (end && (memchr(h, ',', (size_t)(end - h)) ||
			    memchr(h + 1, '[', (size_t)(end - h - 1))))
			at = i;
	}
	if (at < 0)
		return 0;
	{
		const char *s = argv[at];
		const char *h = kind == 'u' ? s + strlen("rdcp://") : s;

		list = strndup(h, (size_t)(end - h));
		if (!list)
			return -ENOMEM;
		n = hostlist_expand(list, &r->receivers, &why);
		if (n < 0) {
			log_err("DEST: '%s': %s", list,
				n == -E2BIG    ? "more than 65536 receivers"
				: n == -EINVAL ? why
					       : strerror(-n));
			free(list);
			return -EINVAL;
		}
		free(list);
		r->nrecv = n;
		/* DEST for the parser: the first receiver's. */
		if (asprintf(first, "%s%s%s", kind == 'u' ? "rdcp://" : "",
			     r->receivers[0], end) < 0)
			return -ENOMEM;
		argv[at] = *first;
	}
	return 0;
}

/* host[:port] or [v6][:port] of receivers[i] into o->addr. */
int mpi_receiver_addr(struct rank *r, int i, struct xfer_opts *o)
{
	char *s = strdup(r->receivers[i]), *colon;

	if (!s)
		return -ENOMEM;
	r->addr_host = s; /* o->addr.host points into it */
	if (s[0] == '[') {
		char *close = strchr(s, ']');

		if (!close)
			return -EINVAL;
		*close = '\0';
		o->link.addr.host = s + 1;
		colon = close[1] == ':' ? close + 1 : NULL;
	} else {
		o->link.addr.host = s;
		colon = strchr(s, ':');
		if (colon)
			*colon = '\0';
	}
	if (colon) {
		char *e;
		unsigned long p = strtoul(colon + 1, &e, 10);

		if (!p || p > 65535 || *e)
			return -EINVAL;
		o->link.addr.port = (uint16_t)p;
	}
	return 0;
}

int mpi_take_split_size(struct rank *r, int *argc, char **argv)
{
	const char *v = NULL;
	int i, drop = 0;

	r->split = 1ull << 30;
	for (i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strncmp(argv[i], "--split-size=", 13)) {
			v = argv[i] + 13;
			drop = 1;
		} else if (!strcmp(argv[i], "--split-size") && i + 1 < *argc) {
			v = argv[i + 1];
			drop = 2;
		}
		if (drop)
			break;
	}
	if (!drop)
		return 0;
	if (units_parse_size(v, &r->split)) {
		log_err("--split-size: '%s' is not a size (e.g. 1G, 256M, 0)",
			v);
		return RDCP_EXIT_USAGE;
	}
	r->split_given = true;
	memmove(argv + i, argv + i + drop,
		(size_t)(*argc - i - drop + 1) * sizeof(*argv));
	*argc -= drop;
	return 0;
}

int mpi_fix_split_size(struct rank *r)
{
	uint64_t c = r->a.o.link.chunk_size;

	if (r->split && r->a.o.copy.csum != XFER_CSUM_CRC32) {
		if (r->split_given) {
			log_err("--split-size: byte ranges need --checksum "
				"crc32 (range CRCs combine into the file's; "
				"SHA-256 digests do not); use --split-size 0");
			return RDCP_EXIT_USAGE;
		}
		r->split = 0; /* the default: such a job splits nothing */
	}
	if (r->split && r->split % c)
		r->split += c - r->split % c;
	return 0;
}

/* The refusals args_parse does not know of. 0 or a message. */
const char *mpi_unsupported(const struct args *a)
{
	if (a->listen || a->server || a->check || a->keygen)
		return "rdcp-mpi copies: start receivers with rdcp --listen "
		       "or rdcpd";
	if (a->o.copy.pull)
		return "rdcp-mpi pushes: the SRCs are local, DEST names the "
		       "receivers";
	if (a->far)
		return "rdcp-mpi copies from the hosts of its ranks: SRC "
		       "cannot be remote";
	if (a->files_from)
		return "--files-from: rdcp-mpi walks the SRCs itself";
	if (a->manifest)
		return "--manifest: not with rdcp-mpi (yet)";
	if (a->o.copy.hard_links)
		return "-H: not with rdcp-mpi: each rank sends part of the "
		       "tree, so names of one file could not be linked";
	return NULL;
}

int mpi_load_key(struct rank *r)
{
	int rc;

	/* Over ssh each rank's remote rdcp makes a one-time key. */
	if (r->a.no_auth || r->a.o.ssh.rsh)
		return 0;
	rc = args_load_key(&r->a, r->key, r->key_name, "the receivers",
			   false);
	if (!rc) {
		r->o.link.key = r->key;
		r->o.link.client_name = r->key_name;
	}
	return rc;
}

/*
 * The SRCs as names beneath one base: their common parent, or a directory
 * of links to them when they have none. 0 or an exit code.
 */
int mpi_make_base(struct rank *r)
{
	size_t n = r->o.copy.nsrcs;
	char(*par)[PATH_MAX] = calloc(n, sizeof(*par));
	bool same = true;
	int rc = 0;

	r->tops = calloc(n + 1, sizeof(*r->tops));
	r->abs_srcs = calloc(n + 1, sizeof(*r->abs_srcs));
	if (!par || !r->tops || !r->abs_srcs) {
		free(par);
		return RDCP_EXIT_RESOURCE;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		char abs[PATH_MAX], cwd[PATH_MAX];
		const char *src = r->o.copy.srcs[i];
		char *slash;
		size_t len;

		if (src[0] == '/')
			snprintf(abs, sizeof(abs), "%s", src);
		else if (getcwd(cwd, sizeof(cwd)))
			snprintf(abs, sizeof(abs), "%s/%s", cwd, src);
		else
			rc = RDCP_EXIT_LOCAL_IO;
		len = strlen(abs);
		while (len > 1 && abs[len - 1] == '/')
			abs[--len] = '\0';
		slash = strrchr(abs, '/');
		if (!rc && (!strcmp(slash + 1, ".") ||
			    !strcmp(slash + 1, "..") || !slash[1])) {
			char real[PATH_MAX];

			if (!realpath(abs, real)) {
				log_err("cannot stat '%s': %s", src,
					strerror(errno));
				rc = RDCP_EXIT_LOCAL_IO;
				break;
			}
			snprintf(abs, sizeof(abs), "%s", real);
			slash = strrchr(abs, '/');
		}
		if (rc || !slash[1]) {
			log_err("'%s': cannot copy the root itself", src);
			rc = RDCP_EXIT_USAGE;
			break;
		}
		r->tops[i] = strdup(slash + 1);
		r->abs_srcs[i] = strdup(abs);
		if (!r->abs_srcs[i])
			rc = RDCP_EXIT_RESOURCE;
		*slash = '\0';
		snprintf(par[i], PATH_MAX, "%s", abs[0] ? abs : "/");
		for (size_t k = 0; k < i && r->tops[i]; k++)
			if (!strcmp(r->tops[k], r->tops[i])) {
				log_err("two SRCs named '%s': they would land "
					"on the same name",
					r->tops[i]);
				rc = RDCP_EXIT_USAGE;
			}
		same &= !strcmp(par[i], par[0]);
		if (!r->tops[i])
			rc = RDCP_EXIT_RESOURCE;
	}
	if (!rc && same) {
		snprintf(r->base, sizeof(r->base), "%s", par[0]);
	} else if (!rc) {
		const char *tmp = getenv("TMPDIR");

		snprintf(r->farm, sizeof(r->farm), "%s/rdcp-mpi.XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(r->farm)) {
			log_err("cannot make a directory in '%s': %s",
				tmp && *tmp ? tmp : "/tmp", strerror(errno));
			r->farm[0] = '\0';
			rc = RDCP_EXIT_LOCAL_IO;
		}
		for (size_t i = 0; i < n && !rc; i++) {
			char link[PATH_MAX * 2], to[PATH_MAX * 2];

			snprintf(link, sizeof(link), "%s/%s", r->farm,
				 r->tops[i]);
			snprintf(to, sizeof(to), "%s/%s", par[i], r->tops[i]);
			if (symlink(to, link)) {
				log_err("cannot make '%s': %s", link,
					strerror(errno));
				rc = RDCP_EXIT_LOCAL_IO;
			}
		}
		snprintf(r->base, sizeof(r->base), "%s", r->farm);
	}
	free(par);
	return rc;
}

void mpi_remove_farm(struct rank *r)
{
	if (!r->farm[0])
		return;
	for (size_t i = 0; r->tops && r->tops[i]; i++) {
		char link[PATH_MAX * 2];

		snprintf(link, sizeof(link), "%s/%s", r->farm, r->tops[i]);
		unlink(link);
	}
	rmdir(r->farm);
}
