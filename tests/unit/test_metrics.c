/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for the receiver's metrics exposition (transfer/server/
 * metrics.c) and the shared JSON escaper (util/json_esc.c): label values
 * escaped as the text format requires (backslash, quote, line feed), every
 * sample preceded by its metric's HELP and TYPE lines, each metric named
 * once, counters and label sets as counted, "(other)" past the table;
 * the devices' own counters read from a made-up sysfs (an rxe port, two
 * mlx5 ports, a port with no counters) at render time, only those whose
 * file exists, and the ring slots held.
 */
#include "tap.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cm/cm.h"
#include "testfs.h"
#include "transfer/server/metrics.h"
#include "util/json_esc.h"

/* The sample line that starts with prefix, or NULL. */
static const char *sample(const char *text, const char *prefix)
{
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, prefix, strlen(prefix)))
			return p;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return NULL;
}

static void test_label_escape(void)
{
	char out[64];

	CHECK_EQ(metrics_label_escape(out, sizeof(out), "a\"b\\c\nd"), 10);
	CHECK(!strcmp(out, "a\\\"b\\\\c\\nd"));
	CHECK_EQ(metrics_label_escape(out, sizeof(out), "plain-name_1"), 12);
	CHECK(!strcmp(out, "plain-name_1"));
	/* cut at a whole escape, never half of one */
	CHECK_EQ(metrics_label_escape(out, 4, "ab\"c"), 2);
	CHECK(!strcmp(out, "ab"));
}

static void test_json_escape(void)
{
	char out[64];
	const char *rest;
	size_t n;

	rest = json_escape(out, sizeof(out), "q\"b\\n\nt\x01\xc3\xa9", &n);
	CHECK(!*rest);
	CHECK(!strcmp(out, "q\\\"b\\\\n\\nt\\u0001\xc3\xa9"));
	CHECK_EQ(n, strlen(out));
	/* a part: stops before an escape that does not fit, resumes there */
	rest = json_escape(out, 4, "ab\x02z", &n);
	CHECK(!strcmp(out, "ab"));
	CHECK_EQ(*rest, 2);
	rest = json_escape(out, 8, rest, &n);
	CHECK(!strcmp(out, "\\u0002z"));
	CHECK(!*rest);
}

/*
 * Every sample's metric has HELP and TYPE lines before it, each metric
 * once, and every line is a comment or "name{labels} value".
 */
static void check_format(const char *text)
{
	char seen[64][64];
	int nseen = 0;
	const char *p = text;

	CHECK(text[strlen(text) - 1] == '\n');
	while (*p) {
		const char *end = strchr(p, '\n');
		char line[512], name[64];
		int len = (int)(end - p);

		snprintf(line, sizeof(line), "%.*s", len, p);
		if (!strncmp(line, "# HELP ", 7)) {
			char type[96];

			CHECK(sscanf(line + 7, "%63s", name) == 1);
			for (int i = 0; i < nseen; i++)
				CHECK(strcmp(seen[i], name)); /* once */
			snprintf(seen[nseen++], 64, "%s", name);
			snprintf(type, sizeof(type), "# TYPE %s ", name);
			CHECK(!strncmp(end + 1, type, strlen(type)));
		} else if (line[0] != '#') {
			size_t nl = strcspn(line, "{ ");

			snprintf(name, sizeof(name), "%.*s", (int)nl, line);
			CHECK(nseen > 0 && !strcmp(seen[nseen - 1], name));
			CHECK(strrchr(line, ' ') && strrchr(line, ' ')[1]);
		}
		p = end + 1;
	}
	CHECK(nseen >= 12);
}

static void test_render(void)
{
	struct metrics m;
	struct metrics_pair *a, *b;
	struct metrics_dev *d;
	char *text;
	size_t len;

	metrics_init(&m);
	a = metrics_pair(&m, "site-key", "-");
	b = metrics_pair(&m, "ev\"il\\na\nme", "mod");
	CHECK(a != b);
	CHECK(metrics_pair(&m, "site-key", "-") == a);
	d = metrics_dev(&m, "rxe0", "rdma");
	metrics_add(&a->sessions, 2);
	metrics_add(&a->bytes[METRICS_IN], 3000000);
	metrics_add(&a->files[METRICS_OUT], 7);
	metrics_add(&b->failed[METRICS_IN], 1);
	metrics_add(&d->bytes[METRICS_IN], 42);
	metrics_add(&m.refused[0], 5);
	metrics_gauge(&m.active, 1);
	CHECK_EQ(metrics_render(&m, &text, &len), 0);
	CHECK_EQ(len, strlen(text));
	printf("# %zu bytes\n", len);
	check_format(text);
	CHECK(sample(text, "rdcp_sessions_active 1\n"));
	CHECK(sample(text, "rdcp_sessions_total{client=\"site-key\","
			   "module=\"-\"} 2\n"));
	CHECK(sample(text, "rdcp_bytes_total{client=\"site-key\",module=\"-\","
			   "direction=\"in\"} 3000000\n"));
	CHECK(sample(text, "rdcp_files_total{client=\"site-key\",module=\"-\","
			   "direction=\"out\"} 7\n"));
	CHECK(sample(text, "rdcp_files_failed_total{client=\"ev\\\"il\\\\na\\n"
			   "me\",module=\"mod\",direction=\"in\"} 1\n"));
	CHECK(sample(text, "rdcp_device_bytes_total{device=\"rxe0\","
			   "transport=\"rdma\",direction=\"in\"} 42\n"));
	CHECK(sample(text, "rdcp_sessions_refused_total{reason=\"held-off\"} "
			   "5\n"));
	CHECK(sample(text, "rdcp_session_errors_total{class=\"verify\"} 0\n"));
	CHECK(!sample(text, "rdcp_sessions_total{client=\"(other)\""));
	free(text);
	metrics_release(&m);
}

/* Past METRICS_PAIRS label sets, the rest share "(other)". */
static void test_overflow(void)
{
	struct metrics m;
	struct metrics_pair *p = NULL;
	char name[32], *text;
	size_t len;

	metrics_init(&m);
	for (int i = 0; i <= METRICS_PAIRS; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		p = metrics_pair(&m, name, "-");
		metrics_add(&p->sessions, 1);
	}
	CHECK(p == metrics_pair(&m, "another", "-"));
	CHECK(!strcmp(p->client, "(other)"));
	CHECK_EQ(metrics_render(&m, &text, &len), 0);
	check_format(text);
	CHECK(sample(text, "rdcp_sessions_total{client=\"(other)\","
			   "module=\"(other)\"} 1\n"));
	CHECK(sample(text, "rdcp_sessions_total{client=\"c63\""));
	free(text);
	metrics_release(&m);
}

/* Writes text to root/rel, making its directories. */
static void put_file(const char *root, const char *rel, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	CHECK_EQ(tf_write_text(path, text, 0644), 0);
}

/*
 * The made-up sysfs: rxe0 as the kernel has it (a link to the device's
 * directory; hw_counters only), mlx5_0 with hw_counters and the IB port
 * counters on port 1 and nothing on port 2, a bad value.
 */
static void fake_sysfs(const char *root)
{
	static const char *const rxe[][2] = {
		{ "rcvd_rnr_err", "3\n" },
		{ "send_rnr_err", "4\n" },
		{ "retry_exceeded_err", "0\n" },
		{ "retry_rnr_exceeded_err", "1\n" },
		{ "duplicate_request", "5\n" },
		{ "out_of_seq_request", "6\n" },
		{ "sent_pkts", "100\n" },
		{ "rcvd_pkts", "200\n" },
		{ "ack_deferred", "9\n" },
	};
	char rel[256], link[512];

	for (size_t i = 0; i < sizeof(rxe) / sizeof(rxe[0]); i++) {
		snprintf(rel, sizeof(rel),
			 "devices/virtual/infiniband/rxe0/ports/1/hw_counters/"
			 "%s",
			 rxe[i][0]);
		put_file(root, rel, rxe[i][1]);
	}
	put_file(root, "devices/virtual/infiniband/rxe0/ports/bogus/x", "1\n");
	put_file(root,
		 "class/infiniband/mlx5_0/ports/1/hw_counters/"
		 "rnr_nak_retry_err",
		 "7\n");
	put_file(root,
		 "class/infiniband/mlx5_0/ports/1/hw_counters/"
		 "local_ack_timeout_err",
		 "8\n");
	put_file(root,
		 "class/infiniband/mlx5_0/ports/1/hw_counters/"
		 "out_of_sequence",
		 "9\n");
	put_file(root,
		 "class/infiniband/mlx5_0/ports/1/hw_counters/"
		 "duplicate_request",
		 "not a number\n");
	put_file(root, "class/infiniband/mlx5_0/ports/1/counters/link_downed",
		 "2\n");
	put_file(root,
		 "class/infiniband/mlx5_0/ports/1/counters/"
		 "port_xmit_packets",
		 "11\n");
	put_file(root,
		 "class/infiniband/mlx5_0/ports/1/counters/"
		 "port_rcv_packets",
		 "18446744073709551615\n");
	/* a file rdcp does not know: port 2 has none of its counters */
	put_file(root,
		 "class/infiniband/mlx5_0/ports/2/counters/"
		 "port_rcv_remote_physical_errors",
		 "1\n");
	snprintf(link, sizeof(link), "%s/class/infiniband/rxe0", root);
	CHECK_EQ(symlink("../../devices/virtual/infiniband/rxe0", link), 0);
}

static void test_hw_counters(void)
{
	char root[] = "/tmp/rdcp-test-sysfs.XXXXXX";
	struct cm_hw_port port[4];
	struct metrics m;
	char *text;
	size_t n, len;

	CHECK(mkdtemp(root) != NULL);
	fake_sysfs(root);
	CHECK_EQ(cm_hw_counters(root, port, 4, &n), 0);
	CHECK_EQ(n, 3);
	CHECK(!strcmp(port[0].device, "mlx5_0") && port[0].port == 1);
	CHECK(!strcmp(port[1].device, "mlx5_0") && port[1].port == 2);
	CHECK(!strcmp(port[2].device, "rxe0") && port[2].port == 1);
	CHECK_EQ(port[1].have, 0);
	CHECK(!(port[0].have & (1u << CM_HW_DUPLICATE))); /* not a number */
	CHECK_EQ(port[0].v[CM_HW_RNR_RETRY_EXCEEDED], 7);
	CHECK_EQ(port[2].v[CM_HW_RNR_NAK_SENT], 4);
	/* at most cap ports; no device at all is none */
	CHECK_EQ(cm_hw_counters(root, port, 1, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(cm_hw_counters("/nonexistent", port, 4, &n), 0);
	CHECK_EQ(n, 0);

	metrics_init(&m);
	m.sysfs = root;
	metrics_gauge(&m.ring_held, 12);
	metrics_gauge(&m.ring_held, -5);
	CHECK_EQ(metrics_render(&m, &text, &len), 0);
	check_format(text);
	CHECK(sample(text, "rdcp_ring_slots_held 7\n"));
	CHECK(sample(text,
		     "rdcp_rdma_rnr_naks_total{device=\"rxe0\",port=\"1\","
		     "direction=\"in\"} 3\n"));
	CHECK(sample(text,
		     "rdcp_rdma_rnr_naks_total{device=\"rxe0\",port=\"1\","
		     "direction=\"out\"} 4\n"));
	CHECK(sample(text, "rdcp_rdma_retries_exhausted_total{device=\"rxe0\","
			   "port=\"1\",kind=\"transport\"} 0\n"));
	CHECK(sample(text, "rdcp_rdma_retries_exhausted_total{device=\"rxe0\","
			   "port=\"1\",kind=\"rnr\"} 1\n"));
	CHECK(sample(text,
		     "rdcp_rdma_retries_exhausted_total{device=\"mlx5_0\","
		     "port=\"1\",kind=\"rnr\"} 7\n"));
	CHECK(!sample(text,
		      "rdcp_rdma_retries_exhausted_total{device=\"mlx5_0\","
		      "port=\"1\",kind=\"transport\"}"));
	CHECK(sample(text, "rdcp_rdma_ack_timeouts_total{device=\"mlx5_0\","
			   "port=\"1\"} 8\n"));
	CHECK(!sample(text, "rdcp_rdma_ack_timeouts_total{device=\"rxe0\""));
	CHECK(sample(text, "rdcp_rdma_duplicate_requests_total{device=\"rxe0\","
			   "port=\"1\"} 5\n"));
	CHECK(!sample(text,
		      "rdcp_rdma_duplicate_requests_total{device=\"mlx5_0\""));
	CHECK(sample(text, "rdcp_rdma_out_of_sequence_total{device=\"rxe0\","
			   "port=\"1\"} 6\n"));
	CHECK(sample(text, "rdcp_rdma_out_of_sequence_total{device=\"mlx5_0\","
			   "port=\"1\"} 9\n"));
	CHECK(sample(text, "rdcp_rdma_link_downed_total{device=\"mlx5_0\","
			   "port=\"1\"} 2\n"));
	CHECK(sample(text, "rdcp_rdma_packets_total{device=\"rxe0\",port=\"1\","
			   "direction=\"out\"} 100\n"));
	CHECK(sample(text,
		     "rdcp_rdma_packets_total{device=\"mlx5_0\",port=\"1\","
		     "direction=\"in\"} 18446744073709551615\n"));
	CHECK(!sample(text, "rdcp_rdma_packets_total{device=\"mlx5_0\","
			    "port=\"2\""));
	CHECK(!strstr(text, "bogus"));
	free(text);
	metrics_release(&m);
	CHECK_EQ(tf_rm_tree(root), 0);
}

TAP_RUN(TAP_TEST(test_label_escape), TAP_TEST(test_json_escape),
	TAP_TEST(test_render), TAP_TEST(test_overflow),
	TAP_TEST(test_hw_counters))
