/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's counters for --metrics, and their rendering in the
 * Prometheus text exposition format (metrics.c); the HTTP listener that
 * serves them is metrics_http.c. Session threads count with relaxed
 * atomics, per session and per file (never per chunk); a session finds its
 * label sets (client and module, device) once, under the lock, and keeps
 * the pointers. Label sets are only ever appended, their names written
 * before the count that shows them is released, so a scrape reads them
 * without the lock. Never a path or a key: client, module, device and
 * transport names are the only label values taken from outside.
 */
#ifndef RDCP_METRICS_H
#define RDCP_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_PAIRS 64   /* (client, module) label sets; then "(other)" */
#define METRICS_DEVICES 16 /* device label sets; then "(other)" */
#define METRICS_REASONS 16 /* refusal reasons (server_int.h enum refusal) */
#define METRICS_CLASSES 16 /* enum xfer_fail verdicts */
#define METRICS_MODULES 64 /* modules with byte limits; then "(other)" */

/* Index of the per-direction counters: in is a push, out a pull. */
enum metrics_dir { METRICS_IN, METRICS_OUT };

struct metrics_pair {
	char client[64], module[64];
	atomic_uint_fast64_t sessions;
	atomic_uint_fast64_t bytes[2];	/* file bytes placed / sent */
	atomic_uint_fast64_t files[2];	/* files placed or kept / sent */
	atomic_uint_fast64_t failed[2]; /* files that failed */
};

struct metrics_dev {
	char device[64];   /* "mlx5_0", "rxe0"; "tcp" over TCP */
	char transport[8]; /* "rdma" or "tcp" */
	atomic_uint_fast64_t bytes[2];
};

/* What a module's byte limits see (transfer/server/quota.c). */
enum metrics_rule {
	METRICS_RULE_QUOTA,
	METRICS_RULE_MAX_BYTES,
	METRICS_RULES
};

struct metrics_module {
	char module[64];
	atomic_bool known;	    /* used measured once (quota=) */
	atomic_int_fast64_t used;   /* bytes its tree holds */
	atomic_uint_fast64_t quota; /* its quota=, 0: none */
	atomic_uint_fast64_t refused[METRICS_RULES]; /* files refused */
};

struct metrics {
	pthread_mutex_t lock; /* adding label sets */
	atomic_uint npairs, ndevs, nmods;
	struct metrics_module mod[METRICS_MODULES + 1];
	struct metrics_pair pair[METRICS_PAIRS + 1];
	struct metrics_dev dev[METRICS_DEVICES + 1];
	atomic_int_fast64_t active;	/* sessions running */
	atomic_uint_fast64_t refused[METRICS_REASONS];
	atomic_uint_fast64_t verdicts[METRICS_CLASSES]; /* sessions ended */
	atomic_uint_fast64_t resumed; /* sessions whose client asked --resume */
	atomic_uint_fast64_t kept;    /* files kept as they were (skipped) */
	atomic_int_fast64_t ring_slots, ring_bytes; /* running sessions' rings */
	atomic_uint_fast64_t scrapes;		    /* GET /metrics answered */
	atomic_uint_fast64_t http_refused; /* connections over the limit */
	/*
	 * Ring slots the running sessions' sinks hold (data arrived, not yet
	 * handed back), each sink adding what changed as it turns.
	 */
	atomic_int_fast64_t ring_held;
	/* The sysfs of the devices' counters; NULL: cm_hw_counters' default */
	const char *sysfs;
};

void metrics_init(struct metrics *m);
void metrics_release(struct metrics *m);

/*
 * The label set of client and module (found or added; past METRICS_PAIRS
 * the shared "(other)" one): never NULL, lives as long as m.
 */
struct metrics_pair *metrics_pair(struct metrics *m, const char *client,
				  const char *module);
/* The same for a module with byte limits. */
struct metrics_module *metrics_module(struct metrics *m, const char *module);
/* The same for a device and its transport. */
struct metrics_dev *metrics_dev(struct metrics *m, const char *device,
				const char *transport);

static inline void metrics_add(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline void metrics_gauge(atomic_int_fast64_t *g, int64_t n)
{
	atomic_fetch_add_explicit(g, n, memory_order_relaxed);
}

/*
 * m in the text exposition format (version 0.0.4), in a buffer of the
 * caller's (free()) in *out, its length in *len. 0 or -ENOMEM.
 */
int metrics_render(struct metrics *m, char **out, size_t *len)
	__attribute__((warn_unused_result));

/*
 * v escaped as a label value (backslash, double quote and line feed, as
 * the format requires) into out (cap bytes with its NUL, cut at a whole
 * escape). Returns the length written.
 */
size_t metrics_label_escape(char *out, size_t cap, const char *v);

/*
 * ---- metrics_http.c: GET /metrics over HTTP/1.0 ----
 *
 * metrics_http_start listens on addr ("PORT", "HOST:PORT", "[V6]:PORT";
 * HOST defaults to 127.0.0.1) and serves m from a thread of its own until
 * metrics_http_stop. 0, or -errno with the reason logged.
 */
struct metrics_http;
int metrics_http_start(struct metrics *m, const char *addr,
		       struct metrics_http **out)
	__attribute__((warn_unused_result));
void metrics_http_stop(struct metrics_http *h);

/* The port metrics_http_start bound (useful with port 0). */
unsigned int metrics_http_port(const struct metrics_http *h);

#endif
