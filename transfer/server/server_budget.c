/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The listener's budgets. Descriptors: how many open files one session
 * may hold at most, the soft limit raised to the hard one, and how many
 * sessions fit in it (server_fit_sessions), so that a key holder cannot
 * take the descriptors other sessions need. Memory: the largest window a
 * session is granted (server_max_window).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "transfer/server/server_int.h"
#include "transfer/walk/walk.h"
#include "transfer/wire/wire.h"
#include "util/log.h"
#include "util/numa.h"

/*
 * Open files: what one session may hold at most, so that --max-sessions of
 * them always fit (a key holder cannot take the descriptors other sessions
 * need). A push holds per file in flight its temporary, its parent
 * directory and with --resume the old file (3); a pack being unpacked two
 * per worker. A pull holds a directory per level being listed and a file
 * per file in flight, within the same. CONN_FDS: the connection's own
 * (socket or RDMA channels, eventfds, the target directory); 3 measured
 * over TCP. LANE_FDS: each lane past the first (--streams; a TCP lane
 * measured 2: its socket and its eventfd). The listener keeps FDS_RESERVE,
 * and CONN_FDS per connection still authenticating with one for each lane
 * join it may be owed waiting for it (server_join.c queues no more).
 */
#define CONN_FDS 8
#define LANE_FDS 2
#define FDS_RESERVE 64
#define NOFILE_MAX (1u << 20) /* raise the soft limit at most to this */
/* The sessions' rings together pin at most 1/SERVER_PIN_SHARE of RAM. */
#define SERVER_PIN_SHARE 8u
_Static_assert(WALK_MAX_DEPTH + WIRE_INFLIGHT_MAX <= 3 * WIRE_INFLIGHT_MAX,
	       "a pull's walk must fit in a push's budget");

uint16_t server_window_for(const struct xfer_opts *o, unsigned int sessions,
			   uint64_t lock_limit)
{
	uint64_t budget = CM_WINDOW_MAX_BYTES, share;
	unsigned int slots;

	if (o->link.window)
		return o->link.window;
	/*
	 * Each session pins its ring: sessions of them must fit in the
	 * memlock limit when there is one. Never below the window every
	 * client got before (CM_WINDOW_FALLBACK): a limit too low for that
	 * fails at registration as before, with its hint (cm/verbs.c).
	 */
	share = lock_limit / (sessions ? sessions : 1);
	if (share < budget)
		budget = share;
	slots = cm_window_slots(CM_WINDOW_MAX_GBPS, o->link.chunk_size, budget);
	if (slots < CM_WINDOW_FALLBACK)
		slots = CM_WINDOW_FALLBACK;
	return (uint16_t)slots;
}

/* Whether this process may pin memory past RLIMIT_MEMLOCK: CAP_IPC_LOCK. */
static bool can_lock_past_limit(void)
{
	char line[128];
	bool cap = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "CapEff:", 7)) {
			cap = strtoull(line + 7, NULL, 16) & (1ull << 14);
			break;
		}
	}
	fclose(f);
	return cap;
}

uint16_t server_max_window(const struct xfer_opts *o, unsigned int sessions)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t limit = UINT64_MAX;
	struct rlimit rl;

	if (o->link.window)
		return o->link.window;
	if (!can_lock_past_limit() && !getrlimit(RLIMIT_MEMLOCK, &rl) &&
	    rl.rlim_cur != RLIM_INFINITY)
		limit = rl.rlim_cur;
	/* Pinned memory cannot be swapped: rings take at most an eighth. */
	if (pages > 0 && psize > 0 &&
	    (uint64_t)pages * (uint64_t)psize / SERVER_PIN_SHARE < limit)
		limit = (uint64_t)pages * (uint64_t)psize / SERVER_PIN_SHARE;
	return server_window_for(o, sessions, limit);
}

/* One connection's own, its lanes' too (see CONN_FDS). */
static rlim_t conn_fds(unsigned int max_streams)
{
	return CONN_FDS + LANE_FDS * (rlim_t)(max_streams - 1);
}

/*
 * Open files one session may hold at most (see CONN_FDS), with inflight
 * regular files in flight.
 */
static rlim_t session_fds(const struct xfer_opts *o, unsigned int max_streams,
			  unsigned int inflight)
{
	return 3 * (rlim_t)inflight +
	       2 * (rlim_t)(o->link.workers ? o->link.workers
					    : NUMA_WORKERS_MAX) +
	       conn_fds(max_streams);
}

/*
 * Raises the soft limit on open files to the hard one (at most NOFILE_MAX)
 * and returns how many sessions fit in it: --max-sessions, or fewer (at
 * least 1) when it is too low, said once.
 */
unsigned int server_fit_sessions(const struct xfer_opts *o,
				 unsigned int max_sessions,
				 unsigned int max_streams, bool *wide)
{
	rlim_t need1 = session_fds(o, max_streams, WIRE_INFLIGHT_MAX);
	rlim_t wide1 = session_fds(o, max_streams, WIRE_INFLIGHT_ASK_MAX);
	rlim_t reserve, want, fit;
	struct rlimit rl;

	*wide = false;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return max_sessions;
	want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > NOFILE_MAX
		       ? NOFILE_MAX
		       : rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > want)
		want = rl.rlim_cur;
	if (want > rl.rlim_cur) {
		struct rlimit up = { .rlim_cur = want,
				     .rlim_max = rl.rlim_max };

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = want;
	}
	/* A join waiting for its session holds one: its socket or cm_id. */
	reserve = FDS_RESERVE +
		  PREAUTH_MAX * (CONN_FDS + (rlim_t)(max_streams - 1));
	/* Wide if every session fits it: else the bound of before for all. */
	*wide = rl.rlim_cur > reserve &&
		(rl.rlim_cur - reserve) / wide1 >= max_sessions;
	if (*wide)
		need1 = wide1;
	fit = rl.rlim_cur > reserve ? (rl.rlim_cur - reserve) / need1 : 0;
	log_info("open files: limit %llu (hard %llu), room for %llu sessions "
		 "of %llu (%u files in flight asked first)",
		 (unsigned long long)rl.rlim_cur,
		 (unsigned long long)rl.rlim_max, (unsigned long long)fit,
		 (unsigned long long)need1,
		 *wide ? WIRE_INFLIGHT_ASK_MAX : WIRE_INFLIGHT_MAX);
	if (fit >= max_sessions || max_sessions == 1)
		return max_sessions; /* one session is served whatever */
	fit = fit ? fit : 1;
	log_warn("open files: --max-sessions %u needs %llu but the limit is "
		 "%llu: serving at most %llu sessions at once; raise it "
		 "(ulimit -n, LimitNOFILE= in the service) or lower "
		 "--max-sessions",
		 max_sessions,
		 (unsigned long long)(max_sessions * need1 + reserve),
		 (unsigned long long)rl.rlim_cur, (unsigned long long)fit);
	return (unsigned int)fit;
}
