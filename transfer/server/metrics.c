/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's counters and their Prometheus text exposition
 * (metrics.h). Every metric has its HELP and TYPE lines, also while it
 * has no sample yet; the label sets of reasons and classes are all shown
 * from the start (0), so that a rate() has a series to start from.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm.h"
#include "transfer/server/metrics.h"
#include "transfer/server/server_int.h"
#include "transfer/xfer.h"

_Static_assert(REFUSED_MAX <= METRICS_REASONS, "a reason without a counter");
_Static_assert(XFER_FAIL_MAX_DELETE < METRICS_CLASSES,
	       "a verdict without a counter");

/* The reason label of each enum refusal (doc/rdcp.1, METRICS). */
static const char *const reason_name[REFUSED_MAX] = {
	[REFUSED_HELD_OFF] = "held-off", [REFUSED_ADDR] = "addr-preauth",
	[REFUSED_PREAUTH] = "preauth",	 [REFUSED_BUSY] = "busy",
	[REFUSED_JOIN] = "join",	 [REFUSED_REPLAY] = "replay",
	[REFUSED_STOPPING] = "stopping", [REFUSED_AUTH] = "auth",
};

void metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	snprintf(m->pair[METRICS_PAIRS].client, 64, "(other)");
	snprintf(m->pair[METRICS_PAIRS].module, 64, "(other)");
	snprintf(m->dev[METRICS_DEVICES].device, 64, "(other)");
	snprintf(m->mod[METRICS_MODULES].module, 64, "(other)");
	snprintf(m->dev[METRICS_DEVICES].transport, 8, "?");
}

void metrics_release(struct metrics *m)
{
	pthread_mutex_destroy(&m->lock);
}

struct metrics_pair *metrics_pair(struct metrics *m, const char *client,
				  const char *module)
{
	struct metrics_pair *p = &m->pair[METRICS_PAIRS];
	unsigned int n;

	pthread_mutex_lock(&m->lock);
	n = atomic_load_explicit(&m->npairs, memory_order_relaxed);
	for (unsigned int i = 0; i < n; i++) {
		if (!strcmp(m->pair[i].client, client) &&
		    !strcmp(m->pair[i].module, module)) {
			p = &m->pair[i];
			goto out;
		}
	}
	if (n < METRICS_PAIRS) {
		p = &m->pair[n];
		snprintf(p->client, sizeof(p->client), "%s", client);
		snprintf(p->module, sizeof(p->module), "%s", module);
		/* the names before the count that shows them */
		atomic_store_explicit(&m->npairs, n + 1, memory_order_release);
	}
out:
	pthread_mutex_unlock(&m->lock);
	return p;
}

struct metrics_module *metrics_module(struct metrics *m, const char *module)
{
	struct metrics_module *d = &m->mod[METRICS_MODULES];
	unsigned int n;

	pthread_mutex_lock(&m->lock);
	n = atomic_load_explicit(&m->nmods, memory_order_relaxed);
	for (unsigned int i = 0; i < n; i++) {
		if (!strcmp(m->mod[i].module, module)) {
			d = &m->mod[i];
			goto out;
		}
	}
	if (n < METRICS_MODULES) {
		d = &m->mod[n];
		snprintf(d->module, sizeof(d->module), "%s", module);
		atomic_store_explicit(&m->nmods, n + 1, memory_order_release);
	}
out:
	pthread_mutex_unlock(&m->lock);
	return d;
}

struct metrics_dev *metrics_dev(struct metrics *m, const char *device,
				const char *transport)
{
	struct metrics_dev *d = &m->dev[METRICS_DEVICES];
	unsigned int n;

	pthread_mutex_lock(&m->lock);
	n = atomic_load_explicit(&m->ndevs, memory_order_relaxed);
	for (unsigned int i = 0; i < n; i++) {
		if (!strcmp(m->dev[i].device, device) &&
		    !strcmp(m->dev[i].transport, transport)) {
			d = &m->dev[i];
			goto out;
		}
	}
	if (n < METRICS_DEVICES) {
		d = &m->dev[n];
		snprintf(d->device, sizeof(d->device), "%s", device);
		snprintf(d->transport, sizeof(d->transport), "%s", transport);
		atomic_store_explicit(&m->ndevs, n + 1, memory_order_release);
	}
out:
	pthread_mutex_unlock(&m->lock);
	return d;
}

size_t metrics_label_escape(char *out, size_t cap, const char *v)
{
	size_t n = 0;

	for (; *v; v++) {
		const char *e = *v == '\\'  ? "\\\\"
				: *v == '"' ? "\\\""
				: *v == '\n' ? "\\n"
					     : NULL;
		size_t el = e ? 2 : 1;

		if (n + el >= cap)
			break;
		if (e)
			out[n++] = e[0], out[n++] = e[1];
		else
			out[n++] = *v;
	}
	if (cap)
		out[n] = '\0';
	return n;
}

/* A growing text; err sticks at the first allocation that failed. */
struct text {
	char *buf;
	size_t len, cap;
	int err;
};

static void put(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->err = -EINVAL;
			return;
		}
		if ((size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = 2 * t->cap + (size_t)n;
		char *b = realloc(t->buf, cap);

		if (!b) {
			t->err = -ENOMEM;
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
}

static void head(struct text *t, const char *name, const char *type,
		 const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint64_t get(atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static int64_t gget(atomic_int_fast64_t *g)
{
	return atomic_load_explicit(g, memory_order_relaxed);
}

/* A label value escaped, in one of a few rotating buffers. */
static const char *esc(const char *v)
{
	static _Thread_local char buf[4][4 * 64 + 1];
	static _Thread_local unsigned int i;
	char *b = buf[i++ % 4];

	metrics_label_escape(b, sizeof(buf[0]), v);
	return b;
}

static const char *const dir_name[2] = { "in", "out" };

/* One counter of every (client, module) pair, in each direction. */
static void pairs(struct text *t, struct metrics *m, unsigned int np,
		  const char *name, const char *help, size_t off, bool dirs)
{
	head(t, name, "counter", help);
	for (unsigned int i = 0; i <= np; i++) {
		struct metrics_pair *p =
			&m->pair[i < np ? i : METRICS_PAIRS];
		atomic_uint_fast64_t *c =
			(atomic_uint_fast64_t *)((char *)p + off);

		if (i == np && !get(&p->sessions))
			break; /* "(other)": only once something went there */
		for (int d = 0; d < (dirs ? 2 : 1); d++) {
			put(t, "%s{client=\"%s\",module=\"%s\"", name,
			    esc(p->client), esc(p->module));
			if (dirs)
				put(t, ",direction=\"%s\"", dir_name[d]);
			put(t, "} %llu\n", (unsigned long long)get(&c[d]));
		}
	}
}

/* ---- ring occupancy and the devices' own counters (cm_hw_counters) ---- */

/* A metric from one or two device counters, their label value each. */
static const struct {
	const char *name, *help, *label;
	enum cm_hw_counter c[2];
	const char *value[2]; /* label values; NULL: one counter, no label */
} hw_metrics[] = {
	{ "rdcp_rdma_rnr_naks_total",
	  "RNR NAKs (receiver not ready) by device port: received (in, the "
	  "peer had no receive posted) or sent (out).",
	  "direction",
	  { CM_HW_RNR_NAK_RCVD, CM_HW_RNR_NAK_SENT },
	  { "in", "out" } },
	{ "rdcp_rdma_retries_exhausted_total",
	  "Retries that ran out (a queue pair in error): transport (no ACK) "
	  "or rnr (RNR NAKs), by device port.",
	  "kind",
	  { CM_HW_RETRY_EXCEEDED, CM_HW_RNR_RETRY_EXCEEDED },
	  { "transport", "rnr" } },
	{ "rdcp_rdma_ack_timeouts_total",
	  "Local ACK timeouts (each a retransmission), by device port.",
	  NULL,
	  { CM_HW_ACK_TIMEOUT },
	  { NULL } },
	{ "rdcp_rdma_duplicate_requests_total",
	  "Duplicate requests received (the peer retransmitted), by device "
	  "port.",
	  NULL,
	  { CM_HW_DUPLICATE },
	  { NULL } },
	{ "rdcp_rdma_out_of_sequence_total",
	  "Out-of-sequence requests received (lost packets), by device port.",
	  NULL,
	  { CM_HW_OUT_OF_SEQ },
	  { NULL } },
	{ "rdcp_rdma_link_downed_total",
	  "Times the port's link went down.",
	  NULL,
	  { CM_HW_LINK_DOWNED },
	  { NULL } },
	{ "rdcp_rdma_packets_total",
	  "Packets by device port, received (in) or sent (out), all users'.",
	  "direction",
	  { CM_HW_PKTS_RCVD, CM_HW_PKTS_SENT },
	  { "in", "out" } },
};

static void ring_and_devices(struct text *t, struct metrics *m)
{
	struct cm_hw_port port[METRICS_DEVICES];
	size_t np = 0;

	head(t, "rdcp_ring_slots_held", "gauge",
	     "Ring slots the running pushes' receivers hold now (data "
	     "arrived, not yet handed back to the sender).");
	put(t, "rdcp_ring_slots_held %lld\n", (long long)gget(&m->ring_held));
	if (cm_hw_counters(m->sysfs, port, METRICS_DEVICES, &np))
		np = 0; /* out of memory: the samples are left out */
	for (size_t k = 0; k < sizeof(hw_metrics) / sizeof(hw_metrics[0]);
	     k++) {
		head(t, hw_metrics[k].name, "counter", hw_metrics[k].help);
		for (size_t i = 0; i < np; i++) {
			for (int j = 0; j < (hw_metrics[k].label ? 2 : 1);
			     j++) {
				enum cm_hw_counter c = hw_metrics[k].c[j];

				if (!(port[i].have & (1u << c)))
					continue;
				put(t, "%s{device=\"%s\",port=\"%u\"",
				    hw_metrics[k].name, esc(port[i].device),
				    port[i].port);
				if (hw_metrics[k].label)
					put(t, ",%s=\"%s\"",
					    hw_metrics[k].label,
					    hw_metrics[k].value[j]);
				put(t, "} %llu\n",
				    (unsigned long long)port[i].v[c]);
			}
		}
	}
}

static const char *const rule_name[METRICS_RULES] = {
	[METRICS_RULE_QUOTA] = "quota",
	[METRICS_RULE_MAX_BYTES] = "max-bytes",
};

/* The modules with byte limits: usage, quota, files refused. */
static void modules(struct text *t, struct metrics *m)
{
	unsigned int n = atomic_load_explicit(&m->nmods, memory_order_acquire);

	head(t, "rdcp_module_bytes_used", "gauge",
	     "Bytes a module's tree holds (its regular files' allocated "
	     "blocks): walked, and kept current with what sessions place "
	     "and delete; modules with quota= once measured.");
	for (unsigned int i = 0; i < n; i++)
		if (atomic_load_explicit(&m->mod[i].known,
					 memory_order_acquire))
			put(t, "rdcp_module_bytes_used{module=\"%s\"} %lld\n",
			    esc(m->mod[i].module),
			    (long long)gget(&m->mod[i].used));
	head(t, "rdcp_module_quota_bytes", "gauge",
	     "A module's quota= (bytes its tree may hold).");
	for (unsigned int i = 0; i < n; i++)
		if (get(&m->mod[i].quota))
			put(t, "rdcp_module_quota_bytes{module=\"%s\"} %llu\n",
			    esc(m->mod[i].module),
			    (unsigned long long)get(&m->mod[i].quota));
	head(t, "rdcp_files_refused_total", "counter",
	     "Files a module's byte limit refused, by module and rule "
	     "(quota, max-bytes).");
	for (unsigned int i = 0; i <= n; i++) {
		struct metrics_module *d = &m->mod[i < n ? i : METRICS_MODULES];

		if (i == n && !get(&d->refused[0]) && !get(&d->refused[1]))
			break;
		for (int r = 0; r < METRICS_RULES; r++)
			put(t,
			    "rdcp_files_refused_total{module=\"%s\",reason="
			    "\"%s\"} %llu\n",
			    esc(d->module), rule_name[r],
			    (unsigned long long)get(&d->refused[r]));
	}
}

int metrics_render(struct metrics *m, char **out, size_t *len)
{
	struct text t = { .cap = 4096 };
	unsigned int np = atomic_load_explicit(&m->npairs, memory_order_acquire);
	unsigned int nd = atomic_load_explicit(&m->ndevs, memory_order_acquire);

	t.buf = malloc(t.cap);
	if (!t.buf)
		return -ENOMEM;
	head(&t, "rdcp_sessions_active", "gauge",
	     "Sessions running now (authenticated, in a session slot).");
	put(&t, "rdcp_sessions_active %lld\n", (long long)gget(&m->active));
	pairs(&t, m, np, "rdcp_sessions_total",
	      "Sessions authenticated, by client and module.",
	      offsetof(struct metrics_pair, sessions), false);
	head(&t, "rdcp_sessions_refused_total", "counter",
	     "Connections or sessions refused, by reason.");
	for (int r = 0; r < REFUSED_MAX; r++)
		put(&t, "rdcp_sessions_refused_total{reason=\"%s\"} %llu\n",
		    reason_name[r], (unsigned long long)get(&m->refused[r]));
	head(&t, "rdcp_session_errors_total", "counter",
	     "Sessions that ended in an error, by class (the exit code's).");
	for (int c = XFER_FAIL_INTERNAL; c <= XFER_FAIL_MAX_DELETE; c++)
		put(&t, "rdcp_session_errors_total{class=\"%s\"} %llu\n",
		    xfer_fail_name((enum xfer_fail)c),
		    (unsigned long long)get(&m->verdicts[c]));
	pairs(&t, m, np, "rdcp_bytes_total",
	      "File bytes received (in, a push) or sent (out, a pull), "
	      "counted per file done.",
	      offsetof(struct metrics_pair, bytes), true);
	pairs(&t, m, np, "rdcp_files_total",
	      "Files received or kept (in) or sent (out).",
	      offsetof(struct metrics_pair, files), true);
	pairs(&t, m, np, "rdcp_files_failed_total",
	      "Files that failed, by direction.",
	      offsetof(struct metrics_pair, failed), true);
	modules(&t, m);
	head(&t, "rdcp_files_kept_total", "counter",
	     "Files kept as they were (--sync, --no-clobber, --update, "
	     "--resume).");
	put(&t, "rdcp_files_kept_total %llu\n",
	    (unsigned long long)get(&m->kept));
	head(&t, "rdcp_resume_sessions_total", "counter",
	     "Sessions whose client asked to resume (--resume; --retry "
	     "attempts are new sessions).");
	put(&t, "rdcp_resume_sessions_total %llu\n",
	    (unsigned long long)get(&m->resumed));
	head(&t, "rdcp_ring_slots", "gauge",
	     "Ring slots of the running sessions.");
	put(&t, "rdcp_ring_slots %lld\n", (long long)gget(&m->ring_slots));
	head(&t, "rdcp_ring_bytes", "gauge",
	     "Ring bytes of the running sessions.");
	put(&t, "rdcp_ring_bytes %lld\n", (long long)gget(&m->ring_bytes));
	head(&t, "rdcp_device_bytes_total", "counter",
	     "File bytes by device and direction, counted per file done.");
	for (unsigned int i = 0; i <= nd; i++) {
		struct metrics_dev *d = &m->dev[i < nd ? i : METRICS_DEVICES];

		if (i == nd && !get(&d->bytes[0]) && !get(&d->bytes[1]))
			break;
		for (int k = 0; k < 2; k++)
			put(&t,
			    "rdcp_device_bytes_total{device=\"%s\",transport="
			    "\"%s\",direction=\"%s\"} %llu\n",
			    esc(d->device), esc(d->transport), dir_name[k],
			    (unsigned long long)get(&d->bytes[k]));
	}
	ring_and_devices(&t, m);
	head(&t, "rdcp_metrics_scrapes_total", "counter",
	     "Requests for /metrics answered.");
	put(&t, "rdcp_metrics_scrapes_total %llu\n",
	    (unsigned long long)get(&m->scrapes));
	head(&t, "rdcp_metrics_refused_total", "counter",
	     "Connections to the metrics endpoint refused (over its limit).");
	put(&t, "rdcp_metrics_refused_total %llu\n",
	    (unsigned long long)get(&m->http_refused));
	if (t.err) {
		free(t.buf);
		return t.err;
	}
	*out = t.buf;
	*len = t.len;
	return 0;
}
