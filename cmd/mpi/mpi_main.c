/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi's main(): `mpirun -np N rdcp-mpi [rdcp options] SRC... DEST`,
 * DEST naming one or more receivers, running or started over ssh by each
 * rank (HOST:PATH, transfer/client/remote.c). Every rank parses
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
#include "cmd/mpi/mpi_job.h"
#include "cmd/mpi/mpi_rank.h"
#include "transfer/xfer.h"
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
		struct xfer_range rg;

		if (kind == ITEM_RANGE) {
			rg.off = mbuf_get_u64(b);
			rg.len = mbuf_get_u64(b);
			rg.idx = mbuf_get_u32(b);
			rg.count = mbuf_get_u32(b);
			for (size_t k = 0; k < sizeof(rg.token); k++)
				rg.token[k] = mbuf_get_u8(b);
		}
		for (uint32_t k = 0; k < count && !b->bad; k++) {
			char rec[PIPE_BUF + 1];
			int len;

			mbuf_get_str(b, name, sizeof(name));
			if (b->bad)
				break;
			if (kind == ITEM_DIR) {
				if (mj_walk_add_dir(r->walk, name))
					b->bad = true;
				continue;
			}
			/* a record of the session's list (walk.h, list_tree) */
			len = kind == ITEM_RANGE
				      ? xfer_list_range(rec, sizeof(rec), &rg,
							name)
				      : snprintf(rec, sizeof(rec), "N%s", name);
			if (len < 0 || len >= PIPE_BUF) {
				log_err("'%s': path too long for the list",
					name);
				continue;
			}
			mbuf_bytes(&r->feed, rec, (size_t)len + 1);
			r->fed_files++;
		}
		if (kind == ITEM_NAMES || kind == ITEM_RANGE)
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
	/* Between two attempts (--retry): names go to the ranks that copy. */
	if (atomic_load(&r->waiting))
		return mj_walk_busy(r->walk) ? 0 : WANT_DIR;
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
	if (r->sh.attempts.len) {
		struct mbuf t = { 0 };

		mbuf_u8(&t, MSG_ATTEMPT);
		mbuf_bytes(&t, r->sh.attempts.p, r->sh.attempts.len);
		r->sh.attempts.len = 0;
		post_up(r, &t);
	}
	if (r->sh.split.len) {
		struct mbuf t = { 0 };

		mbuf_u8(&t, MSG_SPLIT);
		mbuf_bytes(&t, r->sh.split.p, r->sh.split.len);
		r->sh.split.len = 0;
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
	/* Failed ranges: rank 0 counts each split file once (MSG_SPLIT). */
	res.st.files_failed -= r->sh.range_failed < res.st.files_failed
				       ? r->sh.range_failed
				       : res.st.files_failed;
	if (!res.st.files_failed && r->sh.range_failed && !res.st.error[0])
		res.v = XFER_OK;
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
		if (filter_excludes(r->o.copy.filter, r->tops[i],
				    S_ISDIR(st.st_mode)))
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (!r->o.copy.recursive) {
				log_err("cannot send '%s': it is a directory "
					"(use -r)",
					r->o.copy.srcs[i]);
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
		if (S_ISREG(st.st_mode) && r->split &&
		    (uint64_t)st.st_size >= r->split) {
			mbuf_u8(&items, ITEM_BIG); /* rank 0 splits it */
			mbuf_u64(&items, (uint64_t)st.st_size);
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

	rc = mpi_load_key(r);
	if (!rc)
		rc = mpi_make_base(r);
	if (rc)
		return rc;
	if (r->o.ssh.rsh) {
		/* Over ssh: this rank starts its own rdcp --server there. */
		r->o.ssh.rsh_host = r->receivers[r->id % r->nrecv];
	} else if (mpi_receiver_addr(r, r->id % r->nrecv, &r->o)) {
		log_err("'%s': not HOST[:PORT]",
			r->receivers[r->id % r->nrecv]);
		return RDCP_EXIT_USAGE;
	}
	if (asprintf(&r->dest, "%s%s", r->a.o.copy.dest,
		     *r->a.o.copy.dest &&
				     r->a.o.copy.dest[strlen(r->a.o.copy.dest) -
						      1] == '/'
			     ? ""
			     : "/") < 0)
		return RDCP_EXIT_RESOURCE;
	r->o.copy.dest = r->dest;
	if (mj_walk_create(r->base, r->o.copy.filter, &r->walk))
		return RDCP_EXIT_RESOURCE;
	mj_walk_split(r->walk, r->split);
	if (r->id)
		return 0;
	cfg.nranks = r->n;
	cfg.receivers = (const char *const *)r->receivers;
	cfg.nrecv = r->nrecv;
	cfg.json = r->a.json;
	cfg.quiet = r->a.quiet;
	cfg.dry_run = r->o.copy.dry_run;
	cfg.progress = !r->a.quiet && !r->o.copy.dry_run && !r->a.json &&
		       (r->a.progress || isatty(STDERR_FILENO));
	cfg.lost_ms = r->o.link.timeout_ms;
	cfg.split = r->split;
	cfg.mirror = r->o.copy.delete_extra;
	cfg.retry = r->a.retry;
	if (mj_coord_create(&cfg, &r->coord))
		return RDCP_EXIT_RESOURCE;
	return seed(r);
}

/*
 * Rank 0 with --delete: the mirror's session starts once the coordinator
 * says every rank's copy is verified, and its verdict goes back to it.
 */
static void mirror_step(struct rank *r)
{
	if (mj_coord_mirror_due(r->coord) && mpi_start_delete(r)) {
		struct xfer_stats st = { 0 };

		snprintf(st.error, sizeof(st.error), "cannot start deleting");
		mj_coord_mirror_over(r->coord, XFER_FAIL_RESOURCE, &st);
		return;
	}
	if (r->del_started && atomic_load(&r->del_over)) {
		pthread_join(r->del_th, NULL);
		r->del_started = false;
		mj_coord_mirror_over(r->coord, r->del_v, &r->del_st);
	}
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
		if (r->coord)
			mirror_step(r);
		if (r->coord && mj_coord_step(r->coord, cancel, &code, &abort))
			break;
		if (r->exit_code >= 0 && r->done_sent)
			code = r->exit_code;
		if (!r->coord &&
		    clock_now_ms() - r->heard_ms >
			    (uint64_t)r->o.link.timeout_ms + 2000) {
			log_err("no word from rank 0 (the coordinator) for %d "
				"s: ending",
				r->o.link.timeout_ms / 1000 + 2);
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

static bool mpi_started;

/*
 * A rank other than 0 that fails before MPI starts (a usage error, argp's
 * own exit) keeps quiet and waits: mpirun aborts the job at the first rank
 * to exit non-zero, and rank 0, which says why, may not have said it yet.
 * Rank 0's exit ends this wait; the bound covers a rank 0 that did not fail.
 */
static void wait_for_rank0(void)
{
	struct timespec t = { .tv_sec = 10 };

	if (!mpi_started)
		while (nanosleep(&t, &t) && errno == EINTR)
			;
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
			mpi_usage_help();
			return RDCP_EXIT_OK;
		}
		if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			printf("rdcp-mpi %s\n", RDCP_VERSION);
			return RDCP_EXIT_OK;
		}
	}
	r.id = mpi_env_rank();
	if (r.id) { /* one copy of a usage error, from rank 0 */
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		atexit(wait_for_rank0);
		saved = dup(STDERR_FILENO);
		if (null >= 0) {
			dup2(null, STDERR_FILENO);
			close(null);
		}
	}
	rc = mpi_take_split_size(&r, &argc, argv);
	if (rc)
		return rc;
	rc = mpi_split_receivers(&r, argc, argv, &first);
	if (rc) {
		if (rc == -ENOMEM)
			log_err("out of memory");
		return rc == -ENOMEM ? RDCP_EXIT_RESOURCE : RDCP_EXIT_USAGE;
	}
	args_parse(&r.a, argc, argv);
	why = mpi_unsupported(&r.a);
	if (why) {
		log_err("%s", why);
		return RDCP_EXIT_USAGE;
	}
	rc = mpi_fix_split_size(&r);
	if (rc)
		return rc;
	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	r.o = r.a.o;
	if (!r.nrecv) {
		const char *h = r.o.link.addr.host;
		char one[300];

		if (r.o.ssh.rsh)
			snprintf(one, sizeof(one), "%s", r.o.ssh.rsh_host);
		else
			snprintf(one, sizeof(one),
				 strchr(h, ':') ? "[%s]:%u" : "%s:%u", h,
				 r.o.link.addr.port);
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
	r.sh.dry_run = r.o.copy.dry_run;
	pthread_mutex_init(&r.sh.mu, NULL);

	mpi_started = true;
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
		rc = mpi_start_session(&r, &cancel);
	if (rc) {
		/* The same on every rank, most likely: one message is enough.
		 */
		mpi_remove_farm(&r);
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
	mpi_remove_farm(&r);
	mj_sends_drain(rc < 0 ? 200 : 2000);
	if (rc < 0) { /* a rank is lost: MPI_Finalize would wait for it */
		MPI_Abort(MPI_COMM_WORLD, -rc);
		return -rc;
	}
	MPI_Finalize();
	return rc;
}
