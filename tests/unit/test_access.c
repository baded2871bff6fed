// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A receiver's access configuration: the modules file's parser
 * (util/modconf.c: malformed lines, unknown keys, duplicate modules, bad
 * address blocks, each problem with its line), the named keys' files and
 * names (util/key.c, util/key_dir.c), and HELLO's client name on the wire
 * and under the MACs (transfer/wire/wire.c, transfer/session/auth.c).
 */
#include "tap.h"
#include "testfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/session/auth.h"
#include "transfer/wire/wire.h"
#include "util/key.h"
#include "util/key_dir.h"
#include "util/log.h"
#include "util/modconf.h"
#include "transfer/server/server_int.h"

/* The problems a parse reported, one line each. */
struct errs {
	unsigned int n;
	char all[4096];
};

static void on_err(void *arg, const char *line)
{
	struct errs *e = arg;
	size_t l = strlen(e->all);

	e->n++;
	snprintf(e->all + l, sizeof(e->all) - l, "%s\n", line);
}

static int parse(const char *text, struct modconf *c, struct errs *e)
{
	memset(e, 0, sizeof(*e));
	return modconf_parse(text, strlen(text), "m.conf", c, on_err, e);
}

static void test_modconf_good(void)
{
	struct modconf c;
	struct errs e;
	const struct modconf_module *m;

	CHECK_EQ(parse("# modules\n; too\n\n[scratch]\n  path = /srv/s\n"
		       "read = alice, bob analysis\nwrite=alice\n"
		       "require-encrypt\n[archive]\npath=/srv/a\nread=*\n"
		       "hosts = 10.1.2.0/24, 2001:db8::/32 192.0.2.7\n"
		       "max-sessions = 4\nrequire-encrypt = no\n",
		       &c, &e),
		 0);
	CHECK_EQ(e.n, 0);
	CHECK_EQ(c.n, 2);
	m = modconf_find(&c, "scratch");
	CHECK(m && !strcmp(m->path, "/srv/s") && m->require_encrypt);
	CHECK(m && m->line == 4 && m->read.n == 3 && m->write.n == 1);
	CHECK(m && modconf_names_has(&m->read, "bob"));
	CHECK(m && !modconf_names_has(&m->write, "bob"));
	CHECK(m && !modconf_names_has(&m->read, "site-key"));
	CHECK(m && modconf_host_allowed(m, "203.0.113.9")); /* no hosts= */
	m = modconf_find(&c, "archive");
	CHECK(m && m->max_sessions == 4 && !m->require_encrypt);
	CHECK(m && modconf_names_has(&m->read, "anyone"));
	CHECK(m && m->write.n == 0 && !modconf_names_has(&m->write, "x"));
	CHECK(m && modconf_host_allowed(m, "10.1.2.200"));
	CHECK(m && modconf_host_allowed(m, "::ffff:10.1.2.3"));
	CHECK(m && !modconf_host_allowed(m, "10.1.3.1"));
	CHECK(m && modconf_host_allowed(m, "2001:db8:1::5"));
	CHECK(m && !modconf_host_allowed(m, "2001:db9::5"));
	CHECK(m && modconf_host_allowed(m, "192.0.2.7"));
	CHECK(m && !modconf_host_allowed(m, "192.0.2.8"));
	CHECK(m && !modconf_host_allowed(m, "not-an-address"));
	CHECK(!modconf_find(&c, "nosuch"));
	CHECK(m && !m->quota && !m->max_bytes); /* none: no limit */
	modconf_release(&c);
	CHECK_EQ(parse("[big]\npath=/b\nquota = 20T\nmax-bytes=500G\n"
		       "[small]\npath=/s\nquota=1048576\nmax-bytes=1.5K\n"
		       "[si]\npath=/i\nquota=2TB\n",
		       &c, &e),
		 0);
	m = modconf_find(&c, "big");
	CHECK(m && m->quota == 20ull << 40 && m->max_bytes == 500ull << 30);
	m = modconf_find(&c, "small");
	CHECK(m && m->quota == 1048576 && m->max_bytes == 1536);
	m = modconf_find(&c, "si");
	CHECK(m && m->quota == 2000000000000ull && !m->max_bytes);
	modconf_release(&c);
	CHECK_EQ(parse("", &c, &e), 0); /* no modules: as without a file */
	CHECK_EQ(c.n, 0);
}

/* text refused, with exactly one problem whose line contains want. */
static void refused(const char *text, const char *want)
{
	struct modconf c;
	struct errs e;
	int rc = parse(text, &c, &e);

	CHECK_EQ(rc, -EINVAL);
	CHECK_EQ(c.n, 0);
	CHECK_EQ(e.n, 1);
	if (!strstr(e.all, want) || e.n != 1)
		printf("#   want '%s' in: %s", want, e.all);
	CHECK(strstr(e.all, want) != NULL);
}

static void test_modconf_refused(void)
{
	refused("[a]\npath=/x\nsize-limit=20T\n",
		"m.conf:3: unknown setting 'size-limit'");
	refused("[a]\npath=/x\nquota=0\n", "m.conf:3: quota '0' is not a size");
	refused("[a]\npath=/x\nquota=-1T\n", "m.conf:3: quota '-1T'");
	refused("[a]\npath=/x\nquota=20X\n", "m.conf:3: quota '20X'");
	refused("[a]\npath=/x\nquota=lots\n", "m.conf:3: quota 'lots'");
	refused("[a]\npath=/x\nquota=99999999999T\n", "m.conf:3: quota");
	refused("[a]\npath=/x\nquota\n", "m.conf:3: quota needs a value");
	refused("[a]\npath=/x\nquota=1T\nquota=2T\n",
		"m.conf:4: quota again in module a");
	refused("[a]\npath=/x\nmax-bytes=0\n", "m.conf:3: max-bytes '0'");
	refused("[a]\npath=/x\nmax-bytes= 1 G\n", "m.conf:3: max-bytes");
	refused("[a]\npath=/x\n[b]\npath=/y\n[a]\npath=/z\n",
		"m.conf:5: module a again (first on line 1)");
	refused("[a]\npath=/x\nhosts=10.1.2.0/33\n", "m.conf:3: hosts:");
	refused("[a]\npath=/x\nhosts=10.1.2.1/24\n", "m.conf:3: hosts:");
	refused("[a]\npath=/x\nhosts=10.1.2.0/\n", "m.conf:3: hosts:");
	refused("[a]\npath=/x\nhosts=example.org\n", "m.conf:3: hosts:");
	refused("[a]\npath=/x\nhosts=\n", "m.conf:3: hosts names no address");
	refused("path=/x\n", "m.conf:1: 'path' outside a module");
	refused("[a\npath=/x\n", "m.conf:1: a module line is [NAME]");
	refused("[a] x\n", "m.conf:1: a module line is [NAME]");
	refused("[a/b]\npath=/x\n", "m.conf:1: '[a/b]'");
	refused("[]\n", "m.conf:1: '[]'");
	refused("[a]\nread=alice\n", "m.conf:1: module a has no path");
	refused("[a]\npath=x/y\n", "m.conf:2: path 'x/y' is not absolute");
	refused("[a]\npath\n", "m.conf:2: path needs a value");
	refused("[a]\npath=/x\npath=/y\n", "m.conf:3: path again in module a");
	refused("[a]\npath=/x\nread=alice,b@d\n", "m.conf:3: read: 'b@d'");
	refused("[a]\npath=/x\nmax-sessions=0\n", "m.conf:3: max-sessions");
	refused("[a]\npath=/x\nmax-sessions=-1\n", "m.conf:3: max-sessions");
	refused("[a]\npath=/x\nmax-sessions=4x\n", "m.conf:3: max-sessions");
	refused("[a]\npath=/x\nrequire-encrypt=maybe\n",
		"m.conf:3: require-encrypt 'maybe'");
	refused("[a]\npath=/x\njust words\n", "m.conf:3: unknown setting");
	{
		/* every problem, each with its line */
		struct modconf c;
		struct errs e;

		CHECK_EQ(parse("[a]\nbogus=1\n[a]\n[b]\npath=rel\n", &c, &e),
			 -EINVAL);
		CHECK_EQ(e.n, 4);
		CHECK(strstr(e.all, "m.conf:2: unknown setting 'bogus'"));
		CHECK(strstr(e.all, "m.conf:1: module a has no path"));
		CHECK(strstr(e.all, "m.conf:3: module a again"));
		CHECK(strstr(e.all, "m.conf:5: path 'rel'"));
	}
	{
		/* a NUL byte, an over-long line */
		struct modconf c;
		struct errs e = { 0 };
		static char big[MODCONF_LINE_MAX + 20];

		CHECK_EQ(modconf_parse("[a]\0\n", 5, "m.conf", &c, on_err, &e),
			 -EINVAL);
		CHECK(strstr(e.all, "m.conf:1: a NUL byte"));
		memset(big, '#', sizeof(big) - 1);
		memset(&e, 0, sizeof(e));
		CHECK_EQ(parse(big, &c, &e), -EINVAL);
		CHECK(strstr(e.all, "m.conf:1: line longer"));
	}
}

static void test_key_names(void)
{
	CHECK(key_name_valid("alice"));
	CHECK(key_name_valid("mic-1.lab_2"));
	CHECK(key_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			     "aaaaaaaaaaaaaaa"));
	CHECK(!key_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			      "aaaaaaaaaaaaaaaaa"));
	CHECK(!key_name_valid(""));
	CHECK(!key_name_valid("."));
	CHECK(!key_name_valid(".."));
	CHECK(!key_name_valid("site-key"));
	CHECK(!key_name_valid("a b"));
	CHECK(!key_name_valid("a/b"));
	CHECK(!key_name_valid("al\xc3\xa9"));
}


static void test_key_dir(void)
{
	char dir[] = "/tmp/rdcp-keys.XXXXXX", p[256], name[KEY_NAME_MAX + 1];
	uint8_t k[KEY_LEN];
	struct key_dir d;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(p, sizeof(p), "%s/alice.key", dir);
	CHECK_EQ(key_generate(p, "alice"), 0);
	CHECK_EQ(key_load(p, k, name), 0);
	CHECK(!strcmp(name, "alice"));
	snprintf(p, sizeof(p), "%s/bob.key", dir);
	CHECK_EQ(key_generate(p, "bob"), 0);
	CHECK(key_generate(p, "site-key") != 0);
	snprintf(p, sizeof(p), "%s/README", dir); /* not NAME.key: left */
	CHECK(!tf_write_text(p, "the keys\n", 0600));
	CHECK_EQ(key_dir_load(dir, &d), 0);
	CHECK_EQ(d.n, 2);
	CHECK(key_dir_find(&d, "alice") &&
	      !memcmp(key_dir_find(&d, "alice"), k, KEY_LEN));
	CHECK(key_dir_find(&d, "bob") != NULL);
	CHECK(key_dir_find(&d, "carol") == NULL);
	key_dir_release(&d);
	/* a file whose name line is another client's: the whole dir refused */
	snprintf(p, sizeof(p), "%s/carol.key", dir);
	CHECK(!tf_write_text(p, "000102030405060708090a0b0c0d0e0f"
		      "101112131415161718191a1b1c1d1e1f\nname alice\n", 0600));
	CHECK_EQ(key_dir_load(dir, &d), -EINVAL);
	CHECK_EQ(d.n, 0);
	/* a site key (no name line) among the clients: refused too */
	CHECK(!tf_write_text(p, "000102030405060708090a0b0c0d0e0f"
		      "101112131415161718191a1b1c1d1e1f\n", 0600));
	CHECK_EQ(key_load(p, k, name), 0);
	CHECK(!name[0]);
	CHECK_EQ(key_dir_load(dir, &d), -EINVAL);
	/* what may follow a key: nothing else */
	CHECK(!tf_write_text(p, "000102030405060708090a0b0c0d0e0f"
		      "101112131415161718191a1b1c1d1e1f\ngarbage\n", 0600));
	CHECK_EQ(key_load(p, k, name), -EINVAL);
	CHECK(!tf_write_text(p, "000102030405060708090a0b0c0d0e0f"
		      "101112131415161718191a1b1c1d1e1f\nname a b\n", 0600));
	CHECK_EQ(key_load(p, k, name), -EINVAL);
	CHECK(!tf_write_text(p, "000102030405060708090a0b0c0d0e0f"
		      "101112131415161718191a1b1c1d1e1f\nname carol\n", 0600));
	CHECK_EQ(key_dir_load(dir, &d), 0);
	CHECK_EQ(d.n, 3);
	key_dir_release(&d);
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	CHECK_EQ(system(p), 0);
}

/* HELLO's client name: after sync, only when set, and under both MACs. */
static void test_hello_client(void)
{
	struct wire_msg m = { .type = WIRE_HELLO }, d;
	struct wire_welcome w = { .streams = 1 };
	uint8_t buf[WIRE_CTRL_SIZE], key[KEY_LEN] = { 1 };
	uint8_t mac0[WIRE_MAC_LEN], mac1[WIRE_MAC_LEN], mac2[WIRE_MAC_LEN];
	int n0, n1;

	m.u.hello.role = WIRE_PUSH;
	m.u.hello.chunk_size = 1 << 20;
	CHECK_EQ(wire_hello_add_path(&m.u.hello, "scratch/x"), 0);
	n0 = wire_encode(&m, buf, sizeof(buf));
	CHECK(n0 > 0);
	CHECK_EQ(wire_decode(buf, (size_t)n0, &d), 0);
	CHECK(!d.u.hello.client[0]);
	CHECK_EQ(auth_mac(key, AUTH_CLIENT, &m.u.hello, &w, mac0), 0);
	snprintf(m.u.hello.client, sizeof(m.u.hello.client), "alice");
	n1 = wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(n1, n0 + 6);
	CHECK_EQ(wire_decode(buf, (size_t)n1, &d), 0);
	CHECK(!strcmp(d.u.hello.client, "alice"));
	CHECK_EQ(auth_mac(key, AUTH_CLIENT, &m.u.hello, &w, mac1), 0);
	CHECK(memcmp(mac0, mac1, WIRE_MAC_LEN));
	snprintf(m.u.hello.client, sizeof(m.u.hello.client), "alicf");
	CHECK_EQ(auth_mac(key, AUTH_CLIENT, &m.u.hello, &w, mac2), 0);
	CHECK(memcmp(mac1, mac2, WIRE_MAC_LEN));
	/* a name byte that is not a name's, a zero length: refused */
	snprintf(m.u.hello.client, sizeof(m.u.hello.client), "alice");
	n1 = wire_encode(&m, buf, sizeof(buf));
	buf[n1 - 1] = '/';
	CHECK_EQ(wire_decode(buf, (size_t)n1, &d), -EPROTO);
	buf[n1 - 1] = 'e';
	buf[n1 - 6] = 0;
	CHECK_EQ(wire_decode(buf, (size_t)n1, &d), -EPROTO);
	buf[n1 - 6] = 6; /* longer than what is there */
	CHECK_EQ(wire_decode(buf, (size_t)n1, &d), -EPROTO);
}

/* A budget's take with its message and rule (0 or -EDQUOT). */
static int take(const struct sink_budget *b, uint64_t size, uint64_t old,
		const char **rule, char *msg)
{
	*rule = NULL;
	msg[0] = '\0';
	return b->take(b->arg, size, old, rule, msg, 256);
}

/*
 * The byte limits' accounting (transfer/server/quota.c): nothing taken
 * before the first walk, max-bytes per session, quota across sessions,
 * a replaced file's bytes credited, give-backs and deletions, the
 * refusals counted by rule, and a message that names no figure but the
 * limit.
 */
static void test_quota_take(void)
{
	struct server srv = { 0 };
	struct quota_session q = { 0 }, q2 = { 0 };
	const struct sink_budget *b, *b2;
	struct modconf c;
	struct errs e;
	const char *rule;
	char msg[256];

	metrics_init(&srv.metrics);
	pthread_mutex_init(&srv.lock, NULL);
	CHECK_EQ(parse("[a]\npath=/x\nquota=1M\nmax-bytes=600K\n"
		       "[b]\npath=/y\n[c]\npath=/z\nmax-bytes=1K\n",
		       &c, &e),
		 0);
	CHECK(!server_quota_session(&srv, &q, modconf_find(&c, "b")));
	b = server_quota_session(&srv, &q, modconf_find(&c, "a"));
	CHECK(b && q.u && !q.u->known);
	if (!b || !q.u)
		return;
	/* fails closed until the first walk's sum */
	CHECK_EQ(take(b, 10, 0, &rule, msg), -EDQUOT);
	CHECK(rule && !strcmp(rule, "quota"));
	CHECK(strstr(msg, "module a is still measuring") != NULL);
	q.u->known = true;
	q.u->used = 512 * 1024;
	CHECK_EQ(take(b, 400 * 1024, 0, &rule, msg), 0);
	CHECK_EQ(q.u->used, 912 * 1024);
	/* 400K + 300K > max-bytes 600K: refused, nothing taken */
	CHECK_EQ(take(b, 300 * 1024, 0, &rule, msg), -EDQUOT);
	CHECK(rule && !strcmp(rule, "max-bytes"));
	CHECK(strstr(msg, "module a takes at most 600.00 KiB from one session "
			  "(max-bytes)") != NULL);
	CHECK_EQ(q.u->used, 912 * 1024);
	/* another session: its own max-bytes, the module's quota */
	b2 = server_quota_session(&srv, &q2, modconf_find(&c, "a"));
	CHECK(b2 && q2.u == q.u);
	if (!b2)
		return;
	CHECK_EQ(take(b2, 200 * 1024, 0, &rule, msg), -EDQUOT);
	CHECK(rule && !strcmp(rule, "quota"));
	CHECK(strstr(msg, "module a would go over its quota of 1.00 MiB") !=
	      NULL);
	CHECK(!strstr(msg, "912") && !strchr(msg, '/')); /* no usage, path */
	/* the same size in place of a file of 200K: it fits */
	CHECK_EQ(take(b2, 200 * 1024, 200 * 1024, &rule, msg), 0);
	CHECK_EQ(q.u->used, 912 * 1024);
	CHECK_EQ(q2.written, 200 * 1024);
	/* not placed: given back, the old file still there */
	b2->give_back(b2->arg, 200 * 1024, 200 * 1024);
	CHECK_EQ(q.u->used, 912 * 1024);
	CHECK_EQ(q2.written, 0);
	b->give_back(b->arg, 400 * 1024, 0);
	CHECK_EQ(q.u->used, 512 * 1024);
	b->freed(b->arg, 12 * 1024);
	CHECK_EQ(q.u->used, 500 * 1024);
	b->freed(b->arg, 1u << 30); /* never below 0 */
	CHECK_EQ(q.u->used, 0);
	CHECK_EQ(atomic_load(&q.refused), 2);
	CHECK_EQ(atomic_load(&q2.refused), 1);
	CHECK_EQ(atomic_load(&q.mm->refused[METRICS_RULE_QUOTA]), 2);
	CHECK_EQ(atomic_load(&q.mm->refused[METRICS_RULE_MAX_BYTES]), 1);
	/* max-bytes alone: no usage kept */
	b = server_quota_session(&srv, &q, modconf_find(&c, "c"));
	CHECK(b && !q.u);
	if (b) {
		CHECK_EQ(take(b, 1024, 0, &rule, msg), 0);
		CHECK_EQ(take(b, 1, 0, &rule, msg), -EDQUOT);
		CHECK(rule && !strcmp(rule, "max-bytes"));
		CHECK_EQ(take(b, UINT64_MAX, 0, &rule, msg), -EDQUOT);
	}
	server_quota_stop(&srv); /* never started: frees the usage */
	CHECK(!srv.usage);
	modconf_release(&c);
	pthread_mutex_destroy(&srv.lock);
	metrics_release(&srv.metrics);
}

/*
 * The walker: a module's tree measured (its regular files' blocks, in
 * subdirectories too) in its own thread, published in the metrics.
 */
static void test_quota_walk(void)
{
	char dir[] = "/tmp/rdcp-quota-XXXXXX", path[128], conf[512];
	char deep[64];
	struct server srv = { 0 };
	struct access_cfg *cfg = calloc(1, sizeof(*cfg));
	struct module_usage *u = NULL;
	uint64_t want = 0;
	struct errs e;
	struct stat st;
	char *text = NULL;
	size_t len;

	CHECK(mkdtemp(dir) != NULL && cfg);
	if (!cfg)
		return;
	snprintf(path, sizeof(path), "%s/sub", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/f1", dir);
	CHECK_EQ(tf_make_file(path, 100000, 1), 0);
	CHECK_EQ(stat(path, &st), 0);
	want += (uint64_t)st.st_blocks * 512;
	snprintf(path, sizeof(path), "%s/sub/f2", dir);
	CHECK_EQ(tf_make_file(path, 300000, 2), 0);
	CHECK_EQ(stat(path, &st), 0);
	want += (uint64_t)st.st_blocks * 512;
	/* a tree deeper than a walk goes: not measured, never undercounted */
	snprintf(deep, sizeof(deep), "%s-deep", dir); /* beside it */
	CHECK_EQ(mkdir(deep, 0755), 0);
	{
		int fd = open(deep, O_RDONLY | O_DIRECTORY);

		for (int i = 0; fd >= 0 && i < 260; i++) {
			int c;

			CHECK_EQ(mkdirat(fd, "d", 0755), 0);
			c = openat(fd, "d", O_RDONLY | O_DIRECTORY);
			close(fd);
			fd = c;
		}
		CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
	}
	snprintf(conf, sizeof(conf),
		 "[deep]\npath=%s\nquota=1G\n[w]\npath=%s\nquota=1G\n"
		 "[n]\npath=/\n",
		 deep, dir);
	CHECK_EQ(parse(conf, &cfg->mods, &e), 0);
	cfg->refs = 1;
	srv.cfg = cfg;
	metrics_init(&srv.metrics);
	pthread_mutex_init(&srv.lock, NULL);
	CHECK_EQ(server_quota_start(&srv), 0);
	for (int i = 0; i < 500; i++) {
		bool known;

		pthread_mutex_lock(&srv.lock);
		u = srv.usage; /* the last made first: w after deep */
		known = u && !strcmp(u->name, "w") && u->known;
		pthread_mutex_unlock(&srv.lock);
		if (known)
			break;
		usleep(10000);
	}
	CHECK(u && u->known && u->next && !u->next->next); /* quota= only */
	if (u) {
		CHECK(!strcmp(u->name, "w"));
		CHECK_EQ(u->used, want); /* deep's directories hold no file */
	}
	if (u && u->next) {
		CHECK(!strcmp(u->next->name, "deep"));
		CHECK(!u->next->known); /* too deep: its files refused */
	}
	CHECK_EQ(metrics_render(&srv.metrics, &text, &len), 0);
	snprintf(path, sizeof(path),
		 "rdcp_module_bytes_used{module=\"w\"} %llu\n",
		 (unsigned long long)want);
	CHECK(text && strstr(text, path));
	CHECK(text && strstr(text, "rdcp_module_quota_bytes{module=\"w\"} "
				   "1073741824\n"));
	CHECK(text && strstr(text, "rdcp_files_refused_total{module=\"w\","
				   "reason=\"quota\"} 0\n"));
	CHECK(text && strstr(text, "# TYPE rdcp_module_bytes_used gauge\n"));
	CHECK(text && !strstr(text, "module=\"n\""));
	CHECK(text && !strstr(text, "rdcp_module_bytes_used{module=\"deep\""));
	free(text);
	server_quota_rewalk(&srv);
	server_quota_stop(&srv);
	CHECK(!srv.usage);
	modconf_release(&cfg->mods);
	free(cfg);
	pthread_mutex_destroy(&srv.lock);
	metrics_release(&srv.metrics);
	CHECK_EQ(tf_rm_tree(dir), 0);
	CHECK_EQ(tf_rm_tree(deep), 0);
}

TAP_RUN(TAP_TEST(test_modconf_good), TAP_TEST(test_modconf_refused),
	TAP_TEST(test_quota_take), TAP_TEST(test_quota_walk),
	TAP_TEST(test_key_names), TAP_TEST(test_key_dir),
	TAP_TEST(test_hello_client))
