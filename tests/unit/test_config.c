/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for cmd/config.c, the rdcp.conf reader: the line forms, the
 * order (system, user, command line), comments, and every refusal with
 * its file and line.
 */
#include "tap.h"
#include "testfs.h"

#include "cmd/config.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct argp_option opts[] = {
	{ NULL, 0, NULL, 0, "Group:", 1 },
	{ "port", 'P', "PORT", 0, "p", 1 },
	{ "recursive", 'r', NULL, 0, "r", 1 },
	{ "compress", 300, "LEVEL", OPTION_ARG_OPTIONAL, "c", 1 },
	{ "exclude", 301, "PATTERN", 0, "e", 1 },
	{ "listen", 'l', NULL, 0, "l", 1 },
	{ 0 }
};
static const char *const refused[] = { "listen", NULL };

static char dir[64], sys_conf[128], user_dir[128];


/* A fresh pair of files: the system's and the user's (NULL: absent). */
static int load(struct config *c, const char *sys, const char *user)
{
	char path[256];

	snprintf(dir, sizeof(dir), "/tmp/rdcp-test-config.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(sys_conf, sizeof(sys_conf), "%s/sys.conf", dir);
	snprintf(user_dir, sizeof(user_dir), "%s/rdcp", dir);
	CHECK_EQ(mkdir(user_dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/rdcp.conf", user_dir);
	if (sys)
		CHECK(!tf_write_text(sys_conf, sys, 0644));
	if (user)
		CHECK(!tf_write_text(path, user, 0644));
	setenv("XDG_CONFIG_HOME", dir, 1);
	*c = (struct config){ 0 };
	return config_load(c, sys_conf, opts, refused);
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

static void test_forms_and_order(void)
{
	struct config c;
	/* argv as main gets it: writable strings */
	char a0[] = "rdcp", a1[] = "--port=9", a2[] = "a", a3[] = "h:";
	char *argv[] = { a0, a1, a2, a3, NULL };

	CHECK_EQ(load(&c, "port 1\n# comment\n\n  recursive  \n",
		      "--port=2\nport = 3\ncompress\ncompress=6\n"
		      "exclude = a b.o \nexclude\t#x\n"),
		 0);
	CHECK(c.found[0] && c.found[1]);
	CHECK_EQ(c.n, 8);
	if (c.n == 8) {
		CHECK(!strcmp(c.v[0].opt->name, "port"));
		CHECK(!strcmp(c.v[0].value, "1"));
		CHECK_EQ(c.v[0].line, 1);
		CHECK(c.v[0].file == c.files[0]);
		CHECK(!strcmp(c.v[1].opt->name, "recursive"));
		CHECK(c.v[1].value == NULL);
		CHECK_EQ(c.v[1].line, 4);
		CHECK(!strcmp(c.v[2].value, "2"));
		CHECK(c.v[2].file == c.files[1]);
		CHECK(!strcmp(c.v[3].value, "3"));
		CHECK(c.v[4].value == NULL); /* optional value: absent */
		CHECK(!strcmp(c.v[5].value, "6"));
		CHECK(!strcmp(c.v[6].value, "a b.o")); /* inner space kept */
		CHECK(!strcmp(c.v[7].value, "#x")); /* '#' only starts lines */
	}
	CHECK_EQ(config_argv(&c, 4, argv), 0);
	CHECK_EQ(c.argc, 12);
	if (c.argc == 12) {
		CHECK(!strcmp(c.argv[0], "rdcp"));
		CHECK(!strcmp(c.argv[1], "--port=1"));
		CHECK(!strcmp(c.argv[2], "--recursive"));
		CHECK(!strcmp(c.argv[5], "--compress"));
		CHECK(!strcmp(c.argv[7], "--exclude=a b.o"));
		CHECK(!strcmp(c.argv[9],
			      "--port=9")); /* the command line last */
		CHECK(!strcmp(c.argv[11], "h:"));
		CHECK(c.argv[12] == NULL);
	}
	CHECK(config_origin(&c, 0) == NULL);
	CHECK(config_origin(&c, 1) == &c.v[0]);
	CHECK(config_origin(&c, 8) == &c.v[7]);
	CHECK(config_origin(&c, 9) == NULL);
	config_release(&c);
	cleanup();
}

static void test_missing_files(void)
{
	struct config c;

	CHECK_EQ(load(&c, NULL, NULL), 0);
	CHECK(!c.found[0] && !c.found[1]);
	CHECK_EQ(c.n, 0);
	config_release(&c);
	cleanup();
}

static void test_refusals(void)
{
	static const char *const bad[] = {
		"prot 1\n",	   /* unknown */
		"listen\n",	   /* not a default */
		"port\n",	   /* needs a value */
		"recursive yes\n", /* takes none */
		"--\n",		   /* no name */
		"p 1\n",	   /* short names are not names here */
	};
	struct config c;
	char big[CONFIG_LINE_MAX + 100];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = load(&c, NULL, bad[i]);

		if (rc != -EINVAL)
			printf("#   '%s': %d\n", bad[i], rc);
		CHECK_EQ(rc, -EINVAL);
		config_release(&c);
		cleanup();
	}
	/* the system file is read first: its error stops the user's */
	CHECK_EQ(load(&c, "port 1\nbogus\n", "port 2\n"), -EINVAL);
	CHECK_EQ(c.n, 1);
	config_release(&c);
	cleanup();
	memset(big, 'x', sizeof(big) - 2);
	memcpy(big, "exclude ", 8);
	big[sizeof(big) - 2] = '\n';
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ(load(&c, NULL, big), -E2BIG);
	config_release(&c);
	cleanup();
}

TAP_RUN(TAP_TEST(test_forms_and_order), TAP_TEST(test_missing_files),
	TAP_TEST(test_refusals))
