/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for the receiver's metrics exposition (transfer/server/
 * metrics.c) and the shared JSON escaper (util/json_esc.c): label values
 * escaped as the text format requires (backslash, quote, line feed), every
 * sample preceded by its metric's HELP and TYPE lines, each metric named
 * once, counters and label sets as counted, "(other)" past the table.
 */
#include "tap.h"

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

TAP_RUN(TAP_TEST(test_label_escape), TAP_TEST(test_json_escape),
	TAP_TEST(test_render), TAP_TEST(test_overflow))
