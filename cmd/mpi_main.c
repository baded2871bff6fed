/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi's main(): `mpirun -np N rdcp-mpi [rdcp options] SRC... DEST`,
 * DEST naming one or more receivers already running. Every rank parses
 * the same command line (cmd/args.c, as rdcp does), runs one ordinary
 * rdcp session (xfer_copy) to receiver rank % nreceivers in a thread of
 * its own, and in the main thread walks its share of the tree and feeds
 * the session names through a pipe (xfer_opts.files_from). Rank 0 is
 * the coordinator too (mpi_coord.c). Only this thread calls MPI
 * (MPI_THREAD_FUNNELED), and only point to point, non-blocking.
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
#include "cmd/mpi_job.h"
#include "util/clock.h"
#include "util/filter.h"
#include "util/key.h"
#include "util/log.h"
#include "util/path.h"

static volatile sig_atomic_t cancel;

static void on_signal(int sig)
{
	cancel = sig;
}

/* What the session thread shares with the main one. */
struct shared {
	pthread_mutex_t mu;
	uint64_t bytes;	  /* moved so far (on_progress, not the last) */
	uint64_t files;	  /* entries finished */
	uint64_t fbytes;  /* the sizes of the regular files finished */
	struct mbuf text; /* for rank 0's stdout */
	bool json, dry_run;
};

/* One rank. */
struct rank {
	int id, n;
	struct args a;
	struct xfer_opts o;
	uint8_t key[KEY_LEN];
	char base[PATH_MAX]; /* the names are beneath it */
	char farm[PATH_MAX]; /* a directory of links made for base, or "" */
	const char *srcv[1]; /* base, as the session's one SRC */
	char *dest;	     /* DEST with a '/': a directory */
	char *addr_host;     /* o.addr.host's string */
	char **tops;	     /* the SRCs' names beneath base */
	char **receivers;    /* "host:port" */
	int nrecv;
	struct mj_walk *walk;
	/* the session */
	pthread_t th;
	atomic_bool session_over;
	enum xfer_fail v;
	struct xfer_stats st;
	struct shared sh;
	int pipe_w;	    /* the session's list, or -1 once closed */
	struct mbuf feed;   /* names to write to it */
	uint64_t fed_files; /* names fed (regular files or not) */
	uint64_t fed_bytes; /* their regular files' sizes */
	uint64_t seen_bytes, seen_files; /* the session's, last seen */
	uint64_t seen_ms;		 /* when they last changed */
	double rate;			 /* the session's, bytes/s (EWMA) */
	uint64_t rate_bytes, rate_ms;	 /* its last sample */
	bool end_seen;			 /* MSG_END: close the list once fed */
	bool done_sent;			 /* MSG_DONE went up */
	uint8_t want_sent;		 /* the last REQ's, 0 after a GIVE */
	uint32_t gives;			 /* GIVE messages seen */
	uint64_t heard_ms;		 /* the coordinator was last heard */
	uint64_t stat_ms;		 /* the last MSG_STAT */
	struct mbuf up;			 /* items found, to send up */
	uint32_t nup;
	int exit_code;		/* -1 until MSG_EXIT */
	struct mj_coord *coord; /* rank 0 */
};

static void usage_help(void)
{
	printf("Usage: mpirun -np N rdcp-mpi [OPTION...] SRC... "
	       "HOST[,HOST...]::DEST\n"
	       "   or: mpirun -np N rdcp-mpi [OPTION...] SRC... "
	       "rdcp://HOST[:PORT][,HOST[:PORT]...]/DEST\n"
	       "Copy SRCs into the directory DEST on receivers already "
	       "running (rdcp --listen,\nrdcpd), N ranks at once, rank i "
	       "to receiver i %% (number of receivers).\nMPI coordinates; "
	       "the data goes over each rank's own rdcp session.\n\n"
	       "rdcp's copy options apply (rdcp --help); not --files-from, "
	       "--manifest, --retry,\n--delete, a pull or a copy over ssh. "
	       "See rdcp-mpi(1).\n");
}

/* The rank as the launcher tells it, before MPI_Init (for messages). */
static int env_rank(void)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					    "PMIX_RANK", NULL };

	for (int i = 0; vars[i]; i++)
		if (getenv(vars[i]))
			return atoi(getenv(vars[i]));
	return 0;
}

/*
 * The receivers in DEST: "h1,h2::PATH" or "rdcp://h1:p1,h2:p2/PATH".
 * argv's DEST is rewritten to name the first, for args_parse to check.
 * 0, or -EINVAL (logged).
 */
static int split_receivers(struct rank *r, int argc, char **argv, char **first)
{
	const char *url = "rdcp://";
	int at = -1;

	for (int i = argc - 1; i > 0 && at < 0; i--) {
		const char *s = argv[i], *end;

		if (!strncmp(s, url, strlen(url)))
			end = strchr(s + strlen(url), '/');
		else
			end = strstr(s, "::");
		if (end && memchr(s, ',', (size_t)(end - s)))
			at = i;
	}
	if (at < 0)
		return 0; /* one receiver: args_parse reads it */
	{
		const char *s = argv[at];
		bool is_url = !strncmp(s, url, strlen(url));
		const char *h = is_url ? s + strlen(url) : s;
		const char *end = is_url ? strchr(h, '/') : strstr(h, "::");
		char *list = strndup(h, (size_t)(end - h)), *save = NULL;

		if (!list)
			return -ENOMEM;
		for (char *t = strtok_r(list, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			char **v = realloc(r->receivers,
					   (size_t)(r->nrecv + 1) * sizeof(*v));

			if (!v || !(v[r->nrecv] = strdup(t))) {
				free(list);
				return -ENOMEM;
			}
			r->receivers = v;
			r->nrecv++;
		}
		free(list);
		if (!r->nrecv)
			return -EINVAL;
		/* DEST for the parser: the first receiver's. */
		if (asprintf(first, "%s%s%s", is_url ? url : "",
			     r->receivers[0], end) < 0)
			return -ENOMEM;
		argv[at] = *first;
	}
	return 0;
}

/* host[:port] or [v6][:port] of receivers[i] into o->addr. */
static int receiver_addr(struct rank *r, int i, struct xfer_opts *o)
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
		o->addr.host = s + 1;
		colon = close[1] == ':' ? close + 1 : NULL;
	} else {
		o->addr.host = s;
		colon = strchr(s, ':');
		if (colon)
			*colon = '\0';
	}
	if (colon) {
		char *e;
		unsigned long p = strtoul(colon + 1, &e, 10);

		if (!p || p > 65535 || *e)
			return -EINVAL;
		o->addr.port = (uint16_t)p;
	}
	return 0;
}

/* The refusals args_parse does not know of. 0 or a message. */
static const char *unsupported(const struct args *a)
{
	if (a->listen || a->server || a->check || a->keygen)
		return "rdcp-mpi copies: start receivers with rdcp --listen "
		       "or rdcpd";
	if (a->o.pull)
		return "rdcp-mpi pushes: the SRCs are local, DEST names the "
		       "receivers";
	if (a->o.rsh || a->far)
		return "rdcp-mpi copies to receivers already running "
		       "(HOST::PATH or rdcp://), not over ssh";
	if (a->files_from)
		return "--files-from: rdcp-mpi walks the SRCs itself";
	if (a->manifest)
		return "--manifest: not with rdcp-mpi (yet)";
	if (a->o.delete_extra)
		return "--delete: not with rdcp-mpi (yet): each rank sees only "
		       "part of a directory";
	if (a->retry)
		return "--retry: not with rdcp-mpi (yet); run it again with "
		       "--resume";
	return NULL;
}

static int load_key(struct rank *r)
{
	char path[4096];

	if (r->a.no_auth)
		return 0;
	if (r->a.key_file) {
		snprintf(path, sizeof(path), "%s", r->a.key_file);
	} else if (key_default_path(path, sizeof(path))) {
		log_err("no key file (looked for '%s' and '/etc/rdcp/key'): "
			"create one with 'rdcp --keygen %s' and copy it to "
			"the receivers, or run both sides with --no-auth on "
			"an isolated fabric",
			path, path);
		return RDCP_EXIT_AUTH;
	}
	if (key_load(path, r->key))
		return RDCP_EXIT_AUTH;
	r->o.key = r->key;
	return 0;
}

/*
 * The SRCs as names beneath one base: their common parent, or a directory
 * of links to them when they have none. 0 or an exit code.
 */
static int make_base(struct rank *r)
{
	size_t n = r->o.nsrcs;
	char(*par)[PATH_MAX] = calloc(n, sizeof(*par));
	bool same = true;
	int rc = 0;

	r->tops = calloc(n + 1, sizeof(*r->tops));
	if (!par || !r->tops) {
		free(par);
		return RDCP_EXIT_RESOURCE;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		char abs[PATH_MAX], cwd[PATH_MAX];
		const char *src = r->o.srcs[i];
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

static void remove_farm(struct rank *r)
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

/* --- the session thread and what it shares --- */

static void on_progress(void *arg, uint64_t done, uint64_t total,
			const char *path)
{
	struct shared *sh = arg;

	(void)total;
	(void)path;
	pthread_mutex_lock(&sh->mu);
	sh->bytes = done;
	pthread_mutex_unlock(&sh->mu);
}

static void on_file(void *arg, const struct xfer_file_report *r)
{
	struct shared *sh = arg;
	const char *kind = r->kind ? r->kind : "file";
	char *line = NULL;
	size_t len = 0;
	FILE *f = NULL;

	if (!r->done)
		return;
	if (sh->json || sh->dry_run)
		f = open_memstream(&line, &len);
	if (f && sh->json) {
		json_file(f, r);
	} else if (f) {
		char name[4 * 4096];
		const char *verb = r->status		 ? "failed"
				   : r->skipped		 ? "keep"
				   : !r->exists		 ? "new"
				   : strcmp(kind, "dir") ? "replace"
							 : "exists";

		log_escape(name, sizeof(name), r->name ? r->name : r->path);
		fprintf(f, "%-8s %s%s\n", verb, name,
			strcmp(kind, "dir") ? "" : "/");
	}
	if (f)
		fclose(f);
	pthread_mutex_lock(&sh->mu);
	sh->files++;
	if (!strcmp(kind, "file"))
		sh->fbytes += r->bytes;
	if (line)
		mbuf_bytes(&sh->text, line, len);
	pthread_mutex_unlock(&sh->mu);
	free(line);
	if (!sh->json && !sh->dry_run && !r->status && log_enabled(LOG_INFO))
		log_info("%s '%s': digest %s", r->skipped ? "kept" : "sent",
			 r->path, r->digest[0] ? r->digest : "none");
}

static void *session_main(void *arg)
{
	struct rank *r = arg;

	r->v = xfer_copy(&r->o, &r->st);
	/*
	 * A failure before the session (connect) is only in the log; a
	 * session's own is in st.error, and its files' are no session's.
	 */
	if (r->v != XFER_OK && !r->st.error[0] && !r->st.transport[0])
		snprintf(r->st.error, sizeof(r->st.error), "%s",
			 log_last_error());
	atomic_store(&r->session_over, true);
	return NULL;
}

static int start_session(struct rank *r)
{
	int fds[2];
	FILE *list;
	int rc;

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK)) {
		log_err("cannot make a pipe: %s", strerror(errno));
		return RDCP_EXIT_RESOURCE;
	}
	fcntl(fds[1], F_SETPIPE_SZ, 1 << 20); /* a bigger one if allowed */
	list = fdopen(fds[0], "r");
	if (!list) {
		close(fds[0]);
		close(fds[1]);
		return RDCP_EXIT_RESOURCE;
	}
	r->pipe_w = fds[1];
	r->o.files_from = list;
	r->o.files_from_tree = true;
	/* The walk is ours: a directory listed is sent as itself only. */
	r->o.recursive = false;
	r->o.from0 = true;
	r->srcv[0] = r->base;
	r->o.srcs = r->srcv;
	r->o.nsrcs = 1;
	r->o.cancel = &cancel;
	r->o.on_file = on_file;
	r->o.on_progress = on_progress;
	r->o.on_file_arg = &r->sh;
	rc = pthread_create(&r->th, NULL, session_main, r);
	if (rc) {
		log_err("cannot start a thread: %s", strerror(rc));
		return RDCP_EXIT_RESOURCE;
	}
	return 0;
}

/* --- the rank's turn --- */

static void post_up(struct rank *r, struct mbuf *b)
{
	mj_post(0, TAG_UP, b);
	(void)r;
}

static void take_give(struct rank *r, struct mbuf *b)
{
	char name[8192];
	uint32_t n = mbuf_get_u32(b);

	r->gives++;
	r->want_sent = 0;
	for (uint32_t i = 0; i < n && !b->bad; i++) {
		uint8_t kind = mbuf_get_u8(b);
		uint64_t bytes = mbuf_get_u64(b);
		uint32_t count = mbuf_get_u32(b);

		for (uint32_t k = 0; k < count && !b->bad; k++) {
			mbuf_get_str(b, name, sizeof(name));
			if (b->bad)
				break;
			if (kind == ITEM_DIR) {
				if (mj_walk_add_dir(r->walk, name))
					b->bad = true;
				continue;
			}
			mbuf_bytes(&r->feed, name, strlen(name) + 1);
			r->fed_files++;
		}
		if (kind == ITEM_NAMES)
			r->fed_bytes += bytes;
	}
	if (b->bad || r->feed.bad) {
		log_err("a malformed work message, or out of memory");
		cancel = SIGTERM;
	}
}

/* Stops feeding the session: its list ends (EOF) once fed. */
static void close_list(struct rank *r)
{
	if (r->pipe_w >= 0)
		close(r->pipe_w);
	r->pipe_w = -1;
}

static void on_down(struct rank *r, struct mbuf *b)
{
	uint8_t type = mbuf_get_u8(b);

	r->heard_ms = clock_now_ms();
	switch (type) {
	case MSG_GIVE:
		take_give(r, b);
		break;
	case MSG_END:
		r->end_seen = true;
		break;
	case MSG_CANCEL:
		/*
		 * Rank 0 has said why the job ends: each session's
		 * "interrupted" would only repeat it, once a rank.
		 */
		if (r->id)
			log_set_level(LOG_QUIET);
		r->end_seen = true;
		r->feed.len = r->feed.off = 0;
		cancel = SIGTERM;
		close_list(r);
		break;
	case MSG_EXIT:
		r->exit_code = (int)mbuf_get_u32(b);
		break;
	case MSG_STEAL: {
		struct mbuf m = { 0 };
		uint32_t n = 0;

		mbuf_u8(&m, MSG_WORK);
		mbuf_u32(&m, 0);
		if (mj_walk_give(r->walk, &m, &n) == 0 && !m.bad) {
			uint32_t be = htobe32(n);

			memcpy(m.p + 1, &be, sizeof(be));
		}
		post_up(r, &m);
		break;
	}
	default:
		break;
	}
}

/* Writes whole names to the session's list, PIPE_BUF at most a write. */
static bool feed(struct rank *r)
{
	bool moved = false;

	while (r->pipe_w >= 0 && r->feed.off < r->feed.len) {
		size_t n = 0, left = r->feed.len - r->feed.off;
		const uint8_t *p = r->feed.p + r->feed.off;
		ssize_t w;

		/* whole names only: the session never reads half of one */
		while (n < left) {
			const uint8_t *z = memchr(p + n, '\0', left - n);
			size_t one = (size_t)(z - (p + n)) + 1;

			if (n + one > PIPE_BUF)
				break;
			n += one;
		}
		w = write(r->pipe_w, p, n);
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) {
			close_list(r); /* the session is gone: it says why */
			break;
		}
		r->feed.off += (size_t)w;
		moved = true;
	}
	if (r->feed.off == r->feed.len)
		r->feed.off = r->feed.len = 0;
	return moved;
}

/*
 * What the session moved: progress comes every 250 ms at most while data
 * moves, so the last of it comes with the files' reports. Under sh->mu.
 */
static uint64_t moved(const struct shared *sh)
{
	return sh->bytes > sh->fbytes ? sh->bytes : sh->fbytes;
}

/*
 * Bytes queued in the session below which it asks for more: half a
 * second of its rate, so that it never runs dry while a GIVE is on its
 * way, and no more, so that the job's last seconds are shared out.
 */
static uint64_t low_water(struct rank *r)
{
	uint64_t now = clock_now_ms(), bytes;
	double low;

	pthread_mutex_lock(&r->sh.mu);
	bytes = moved(&r->sh);
	pthread_mutex_unlock(&r->sh.mu);
	if (!r->rate_ms) {
		r->rate_ms = now;
	} else if (now - r->rate_ms >= 200) {
		double s =
			(bytes - r->rate_bytes) * 1000.0 / (now - r->rate_ms);

		r->rate = r->rate ? 0.7 * r->rate + 0.3 * s : s;
		r->rate_bytes = bytes;
		r->rate_ms = now;
	}
	low = r->rate / 2;
	return low < MJ_LOW_BYTES	 ? MJ_LOW_BYTES
	       : low > 32 * MJ_LOW_BYTES ? 32 * MJ_LOW_BYTES
					 : (uint64_t)low;
}

static uint8_t wants(struct rank *r)
{
	uint64_t bytes, files, ob, of;
	uint8_t want = 0;

	if (r->end_seen || atomic_load(&r->session_over))
		return 0;
	pthread_mutex_lock(&r->sh.mu);
	bytes = moved(&r->sh);
	files = r->sh.files;
	pthread_mutex_unlock(&r->sh.mu);
	ob = r->fed_bytes > bytes ? r->fed_bytes - bytes : 0;
	of = r->fed_files > files ? r->fed_files - files : 0;
	if (bytes != r->seen_bytes || files != r->seen_files) {
		r->seen_bytes = bytes;
		r->seen_files = files;
		r->seen_ms = clock_now_ms();
	}
	if (!mj_walk_busy(r->walk))
		want |= WANT_DIR;
	if (ob < low_water(r) && of < MJ_LOW_FILES)
		want |= WANT_NAMES;
	/*
	 * Names that never get a report (a device skipped, an entry the
	 * filter drops) must not keep it from asking forever: a session
	 * that has everything fed and moved nothing for a second asks too.
	 */
	if (!r->feed.len && clock_now_ms() - r->seen_ms > 1000)
		want |= WANT_NAMES;
	return want;
}

static void send_stat(struct rank *r, uint64_t now)
{
	struct mbuf b = { 0 };

	if (now - r->stat_ms < 200)
		return;
	r->stat_ms = now;
	pthread_mutex_lock(&r->sh.mu);
	mbuf_u8(&b, MSG_STAT);
	mbuf_u64(&b, moved(&r->sh));
	mbuf_u64(&b, r->sh.files);
	mbuf_u32(&b, (uint32_t)mj_walk_queued(r->walk));
	if (r->sh.text.len) {
		struct mbuf t = { 0 };

		mbuf_u8(&t, MSG_EVENTS);
		mbuf_bytes(&t, r->sh.text.p, r->sh.text.len);
		r->sh.text.len = 0;
		post_up(r, &t);
	}
	pthread_mutex_unlock(&r->sh.mu);
	post_up(r, &b);
}

static void send_done(struct rank *r)
{
	struct mj_result res = { .v = r->v, .st = r->st };
	struct mbuf b = { 0 };
	uint64_t failed = mj_walk_failed(r->walk);

	pthread_join(r->th, NULL);
	res.early = r->pipe_w >= 0; /* it ended before its list did */
	close_list(r);
	if (failed) {
		res.st.files_failed += failed;
		if (!res.st.first_fail)
			res.st.first_fail = XFER_FAIL_LOCAL_IO;
		if (res.v == XFER_OK)
			res.v = res.st.files_ok ? XFER_FAIL_PARTIAL
						: XFER_FAIL_LOCAL_IO;
	}
	r->stat_ms = 0;
	send_stat(r, clock_now_ms()); /* its last events first */
	mbuf_u8(&b, MSG_DONE);
	mj_result_put(&b, &res);
	post_up(r, &b);
	r->done_sent = true;
}

/* One turn of the rank. Whether it did anything. */
static bool rank_step(struct rank *r)
{
	uint64_t now = clock_now_ms();
	bool busy = false;
	uint8_t want;

	if (!r->end_seen && mj_walk_busy(r->walk)) {
		if (mj_walk_step(r->walk, 256, &r->up, &r->nup)) {
			log_err("out of memory walking the sources");
			cancel = SIGTERM;
		}
		busy = true;
	}
	if (r->nup) {
		struct mbuf b = { 0 };

		mbuf_u8(&b, MSG_WORK);
		mbuf_u32(&b, r->nup);
		mbuf_bytes(&b, r->up.p, r->up.len);
		post_up(r, &b);
		r->up.len = 0;
		r->nup = 0;
	}
	busy |= feed(r);
	if (r->end_seen && !r->feed.len)
		close_list(r);
	want = wants(r);
	if (want && want != r->want_sent) {
		struct mbuf b = { 0 };

		mbuf_u8(&b, MSG_REQ);
		mbuf_u8(&b, want);
		mbuf_u32(&b, r->gives);
		post_up(r, &b);
		r->want_sent = want;
	}
	send_stat(r, now);
	if (!r->done_sent && atomic_load(&r->session_over))
		send_done(r);
	return busy;
}

/* --- the job --- */

/* The SRCs, as the first work: their directories and their names. */
static int seed(struct rank *r)
{
	struct mbuf items = { 0 }, names = { 0 };
	uint32_t n = 0, nnames = 0;
	uint64_t bytes = 0;

	for (size_t i = 0; r->tops[i]; i++) {
		char path[PATH_MAX * 2];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", r->base, r->tops[i]);
		if (stat(path, &st))
			st.st_mode = 0;
		/* as rdcp's walk: a SRC the rules exclude is left out */
		if (filter_excludes(r->o.filter, r->tops[i],
				    S_ISDIR(st.st_mode)))
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (!r->o.recursive) {
				log_err("cannot send '%s': it is a directory "
					"(use -r)",
					r->o.srcs[i]);
				mbuf_release(&items);
				mbuf_release(&names);
				return RDCP_EXIT_USAGE;
			}
			mbuf_u8(&items, ITEM_DIR);
			mbuf_u64(&items, 0);
			mbuf_u32(&items, 1);
			mbuf_str(&items, r->tops[i]);
			n++;
			continue;
		}
		/* a file, or what the session will report as failed */
		mbuf_str(&names, r->tops[i]);
		nnames++;
		if (S_ISREG(st.st_mode))
			bytes += (uint64_t)st.st_size;
	}
	if (nnames) {
		mbuf_u8(&items, ITEM_NAMES);
		mbuf_u64(&items, bytes);
		mbuf_u32(&items, nnames);
		mbuf_bytes(&items, names.p, names.len);
		n++;
	}
	mbuf_release(&names);
	if (items.bad)
		return RDCP_EXIT_RESOURCE;
	mj_coord_seed(r->coord, &items, n);
	mbuf_release(&items);
	return 0;
}

/* Everything up to the copy that can fail: 0 or an exit code. */
static int prepare(struct rank *r)
{
	struct mj_coord_cfg cfg = { 0 };
	int rc;

	rc = load_key(r);
	if (!rc)
		rc = make_base(r);
	if (rc)
		return rc;
	if (receiver_addr(r, r->id % r->nrecv, &r->o)) {
		log_err("'%s': not HOST[:PORT]",
			r->receivers[r->id % r->nrecv]);
		return RDCP_EXIT_USAGE;
	}
	if (asprintf(&r->dest, "%s%s", r->a.o.dest,
		     *r->a.o.dest && r->a.o.dest[strlen(r->a.o.dest) - 1] == '/'
			     ? ""
			     : "/") < 0)
		return RDCP_EXIT_RESOURCE;
	r->o.dest = r->dest;
	if (mj_walk_create(r->base, r->o.filter, &r->walk))
		return RDCP_EXIT_RESOURCE;
	if (r->id)
		return 0;
	cfg.nranks = r->n;
	cfg.receivers = (const char *const *)r->receivers;
	cfg.nrecv = r->nrecv;
	cfg.json = r->a.json;
	cfg.quiet = r->a.quiet;
	cfg.dry_run = r->o.dry_run;
	cfg.progress = !r->a.quiet && !r->o.dry_run && !r->a.json &&
		       (r->a.progress || isatty(STDERR_FILENO));
	cfg.lost_ms = r->o.timeout_ms;
	if (mj_coord_create(&cfg, &r->coord))
		return RDCP_EXIT_RESOURCE;
	return seed(r);
}

/* Until the coordinator says the exit code (or is lost). */
static int run(struct rank *r)
{
	struct timespec nap = { 0 };
	unsigned int idle = 0;
	bool abort = false;
	int code = -1;

	r->heard_ms = r->seen_ms = clock_now_ms();
	while (code < 0) {
		struct mbuf b;
		int src, tag, got;
		bool busy = false;

		while ((got = mj_poll(&b, &src, &tag)) == 1) {
			if (tag == TAG_UP && r->coord)
				mj_coord_message(r->coord, src, &b);
			else if (tag == TAG_DOWN && src == 0)
				on_down(r, &b);
			mbuf_release(&b);
			busy = true;
		}
		if (got < 0)
			cancel = SIGTERM;
		busy |= rank_step(r);
		mj_sends_progress();
		if (r->coord && mj_coord_step(r->coord, cancel, &code, &abort))
			break;
		if (r->exit_code >= 0 && r->done_sent)
			code = r->exit_code;
		if (!r->coord && clock_now_ms() - r->heard_ms >
					 (uint64_t)r->o.timeout_ms + 2000) {
			log_err("no word from rank 0 (the coordinator) for %d "
				"s: ending",
				r->o.timeout_ms / 1000 + 2);
			cancel = SIGTERM;
			if (r->done_sent || atomic_load(&r->session_over)) {
				code = RDCP_EXIT_PEER_LOST;
				abort = true;
			}
		}
		/* Sleep only when there is nothing to do, and briefly. */
		idle = busy ? 0 : idle + 1;
		nap.tv_nsec = idle < 10 ? 200000 : 2000000;
		if (!busy)
			nanosleep(&nap, NULL);
	}
	if (!r->done_sent) {
		cancel = SIGTERM;
		close_list(r);
		pthread_join(r->th, NULL);
	}
	return abort ? -code : code;
}

int main(int argc, char **argv)
{
	static char prefix[32];
	struct rank r = { .pipe_w = -1, .exit_code = -1 };
	char *first = NULL;
	int provided, rc, saved = -1;
	const char *why;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-?")) {
			usage_help();
			return RDCP_EXIT_OK;
		}
		if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			printf("rdcp-mpi %s\n", RDCP_VERSION);
			return RDCP_EXIT_OK;
		}
	}
	r.id = env_rank();
	if (r.id) { /* one copy of a usage error, from rank 0 */
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		saved = dup(STDERR_FILENO);
		if (null >= 0) {
			dup2(null, STDERR_FILENO);
			close(null);
		}
	}
	rc = split_receivers(&r, argc, argv, &first);
	if (rc) {
		log_err("DEST: no receiver named");
		return RDCP_EXIT_USAGE;
	}
	args_parse(&r.a, argc, argv);
	why = unsupported(&r.a);
	if (why) {
		log_err("%s", why);
		return RDCP_EXIT_USAGE;
	}
	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	r.o = r.a.o;
	if (!r.nrecv) {
		const char *h = r.o.addr.host;
		char one[300];

		snprintf(one, sizeof(one), strchr(h, ':') ? "[%s]:%u" : "%s:%u",
			 h, r.o.addr.port);
		r.receivers = calloc(1, sizeof(*r.receivers));
		if (!r.receivers || !(r.receivers[0] = strdup(one)))
			return RDCP_EXIT_RESOURCE;
		r.nrecv = 1;
	}
	log_set_level(r.a.quiet		 ? LOG_ERR
		      : r.a.verbose >= 2 ? LOG_DEBUG
		      : r.a.verbose	 ? LOG_INFO
					 : LOG_WARN);
	r.sh.json = r.a.json;
	r.sh.dry_run = r.o.dry_run;
	pthread_mutex_init(&r.sh.mu, NULL);

	if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) !=
	    MPI_SUCCESS) {
		log_err("cannot start MPI (run rdcp-mpi under mpirun)");
		return RDCP_EXIT_RESOURCE;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &r.id);
	MPI_Comm_size(MPI_COMM_WORLD, &r.n);
	snprintf(prefix, sizeof(prefix), r.id ? "rdcp-mpi[%d]" : "rdcp-mpi",
		 r.id);
	log_set_prefix(prefix);
	{
		struct sigaction sa = { .sa_handler = on_signal };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
	}
	rc = prepare(&r);
	if (!rc)
		rc = start_session(&r);
	if (rc) {
		/* The same on every rank, most likely: one message is enough.
		 */
		remove_farm(&r);
		MPI_Abort(MPI_COMM_WORLD, rc);
		return rc;
	}
	{
		struct mbuf b = { 0 };
		char host[64] = "?";

		gethostname(host, sizeof(host));
		host[sizeof(host) - 1] = '\0';
		mbuf_u8(&b, MSG_HELLO);
		mbuf_str(&b, host);
		mbuf_u32(&b, (uint32_t)getpid());
		post_up(&r, &b);
	}
	rc = run(&r);
	remove_farm(&r);
	mj_sends_drain(rc < 0 ? 200 : 2000);
	if (rc < 0) { /* a rank is lost: MPI_Finalize would wait for it */
		MPI_Abort(MPI_COMM_WORLD, -rc);
		return -rc;
	}
	MPI_Finalize();
	return rc;
}
