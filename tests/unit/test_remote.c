/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests for copies over ssh: the bootstrap line (transfer/wire/boot.c)
 * written and read back, and refused when malformed or carrying too much;
 * the operands (cmd/operands.c): HOST:PATH, HOST::PATH, rdcp://, user@,
 * [v6], local paths with ':' in them, and the refusals (a host starting
 * with '-', user@ for a receiver, mixed ways, remote to remote); the
 * bootstrap line read from the remote shell (transfer/client/rsh.c) refused
 * whole when longer than its limit.
 */
#include "tap.h"

#include "cmd/operands.h"
#include "transfer/wire/boot.h"
#include "transfer/client/rsh.h"
#include "util/clock.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_STR(a, b) CHECK(!strcmp((a), (b)))

static void test_boot_round_trip(void)
{
	struct boot b = { .proto = 3, .port = 50123, .rdma = true, .tcp = true,
			  .nrdma = 2, .ntcp = 1 };
	struct boot r;
	char line[BOOT_LINE_MAX], why[200];

	snprintf(b.version, sizeof(b.version), "1.2.3");
	snprintf(b.via, sizeof(b.via), "10.0.0.2");
	snprintf(b.rdma_addrs[0], CM_ADDRSTR_LEN, "10.0.0.2");
	snprintf(b.rdma_addrs[1], CM_ADDRSTR_LEN, "fd00::2");
	snprintf(b.tcp_addrs[0], CM_ADDRSTR_LEN, "192.168.1.2");
	for (int i = 0; i < KEY_LEN; i++)
		b.key[i] = (uint8_t)(i * 7 + 1);
	boot_format(&b, line);
	CHECK(boot_is_line(line));
	CHECK(line[strlen(line) - 1] == '\n');
	CHECK_EQ(boot_parse(line, &r, why, sizeof(why)), 0);
	CHECK_EQ(r.proto, 3);
	CHECK_STR(r.version, "1.2.3");
	CHECK_EQ(r.port, 50123);
	CHECK(r.rdma && r.tcp);
	CHECK_STR(r.via, "10.0.0.2");
	CHECK_EQ(r.nrdma, 2);
	CHECK_STR(r.rdma_addrs[1], "fd00::2");
	CHECK_EQ(r.ntcp, 1);
	CHECK_STR(r.tcp_addrs[0], "192.168.1.2");
	CHECK(!memcmp(r.key, b.key, KEY_LEN));
	/* Nothing to list: "-", read back as none. */
	b.nrdma = b.ntcp = 0;
	b.rdma = false;
	b.via[0] = '\0';
	boot_format(&b, line);
	CHECK(strstr(line, " rdma=- tcp=- ") != NULL);
	CHECK_EQ(boot_parse(line, &r, why, sizeof(why)), 0);
	CHECK(!r.rdma && r.tcp && !r.nrdma && !r.ntcp && !r.via[0]);
}

static void test_boot_refusals(void)
{
	static const char *const bad[] = {
		"", "hello", "RDCP-BOOTX 3 1 port=1 listen=tcp key=00",
		"RDCP-BOOT x 1", "RDCP-BOOT 3 1 listen=tcp", /* no port */
		"RDCP-BOOT 3 1 port=0 listen=tcp",
		"RDCP-BOOT 3 1 port=70000 listen=tcp",
		"RDCP-BOOT 3 1 port=7 listen=tcp key=0011", /* short key */
		"RDCP-BOOT 3 1 port=7 key=" /* no listener, no key */,
		"RDCP-BOOT 3 1 port=7 listen=tcp tcp=a,,b key=00",
	};
	char line[BOOT_LINE_MAX], why[200];
	struct boot r;
	int n;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = boot_parse(bad[i], &r, why, sizeof(why));

		if (rc != -EINVAL)
			printf("#   '%s': %d\n", bad[i], rc);
		CHECK_EQ(rc, -EINVAL);
	}
	/* More addresses than a line carries: refused, not overrun. */
	n = snprintf(line, sizeof(line), "RDCP-BOOT 3 1 port=7 listen=tcp tcp=");
	for (int i = 0; i <= BOOT_ADDRS; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s10.0.0.%d",
			      i ? "," : "", i);
	snprintf(line + n, sizeof(line) - (size_t)n, " key=%064d", 0);
	CHECK_EQ(boot_parse(line, &r, why, sizeof(why)), -EINVAL);
	/* Unknown fields are skipped (a newer release may add some). */
	snprintf(line, sizeof(line),
		 "RDCP-BOOT 3 1 port=7 listen=tcp new=thing key=%064d", 0);
	CHECK_EQ(boot_parse(line, &r, why, sizeof(why)), 0);
}

static void one(const char *arg, int rc, bool remote, const char *host,
		const char *path, bool daemon, unsigned int port)
{
	struct operand op;
	char why[200];
	int got = operand_parse(arg, &op, why, sizeof(why));

	if (got != rc)
		printf("#   '%s': %d, want %d (%s)\n", arg, got, rc, why);
	CHECK_EQ(got, rc);
	if (!got && got == rc) {
		CHECK_EQ(op.remote, remote);
		if (remote) {
			CHECK_STR(op.host, host);
			CHECK_STR(op.path, path);
			CHECK_EQ(op.daemon, daemon);
			CHECK_EQ(op.port, port);
		}
	}
	operand_release(&op);
}

static void test_operands(void)
{
	one("file", 0, false, NULL, NULL, false, 0);
	one("./a:b", 0, false, NULL, NULL, false, 0);
	one("/x/y:z", 0, false, NULL, NULL, false, 0);
	one("node2:", 0, true, "node2", "", false, 0);
	one("node2:/scratch/", 0, true, "node2", "/scratch/", false, 0);
	one("ana@node2:runs/42", 0, true, "ana@node2", "runs/42", false, 0);
	one("[fe80::1]:dir/", 0, true, "fe80::1", "dir/", false, 0);
	one("ana@[fd00::2]:x", 0, true, "ana@fd00::2", "x", false, 0);
	one("node2::in/", 0, true, "node2", "in/", true, 0);
	one("[fd00::2]::in", 0, true, "fd00::2", "in", true, 0);
	one("rdcp://node2/in/x", 0, true, "node2", "in/x", true, 0);
	one("rdcp://node2:7000/in", 0, true, "node2", "in", true, 7000);
	one("rdcp://[fd00::2]:7000/", 0, true, "fd00::2", "", true, 7000);
	one("rdcp://node2", 0, true, "node2", "", true, 0);
	one("-oProxyCommand=x:y", -EINVAL, true, NULL, NULL, false, 0);
	one("ana@-o:y", -EINVAL, true, NULL, NULL, false, 0);
	one("ana@node2::x", -EINVAL, true, NULL, NULL, true, 0);
	one("rdcp://node2:0/x", -EINVAL, true, NULL, NULL, true, 0);
	one("rdcp://node2:99999/x", -EINVAL, true, NULL, NULL, true, 0);
	one("@:x", -EINVAL, true, NULL, NULL, false, 0);
}

static void test_split(void)
{
	const char *push[] = { "a", "b", "node2:in/" };
	const char *pull[] = { "node2:a", "node2:b", "." };
	const char *r2r[] = { "h1:src", "h2:dst/" };
	const char *mixed[] = { "h1:a", "h1::b", "." };
	const char *two[] = { "h1:a", "h2:b", "." };
	const char *r2rd[] = { "h1::src", "h2:dst/" };
	struct split sp;
	char why[300];

	CHECK_EQ(operands_split(push, 3, REMOTE_DEFAULT, &sp, why, sizeof(why)),
		 0);
	CHECK(!sp.pull && !sp.daemon && !strcmp(sp.host, "node2") &&
	      !strcmp(sp.dest, "in/") && sp.nsrcs == 2);
	operands_split_release(&sp);
	CHECK_EQ(operands_split(push, 3, REMOTE_DAEMON, &sp, why, sizeof(why)),
		 0);
	CHECK(sp.daemon);
	operands_split_release(&sp);
	CHECK_EQ(operands_split(pull, 3, REMOTE_DEFAULT, &sp, why, sizeof(why)),
		 0);
	CHECK(sp.pull && !strcmp(pull[0], "a") && !strcmp(pull[1], "b") &&
	      !strcmp(sp.dest, "."));
	operands_split_release(&sp);
	CHECK_EQ(operands_split(r2r, 2, REMOTE_DEFAULT, &sp, why, sizeof(why)),
		 0);
	CHECK(sp.pull && sp.dest_host && !strcmp(sp.dest_host, "h2") &&
	      !strcmp(sp.host, "h1") && !strcmp(sp.dest, "dst/"));
	operands_split_release(&sp);
	CHECK_EQ(operands_split(mixed, 3, REMOTE_DEFAULT, &sp, why,
				sizeof(why)),
		 -EINVAL);
	operands_split_release(&sp);
	CHECK_EQ(operands_split(two, 3, REMOTE_DEFAULT, &sp, why, sizeof(why)),
		 -EINVAL);
	operands_split_release(&sp);
	CHECK_EQ(operands_split(r2rd, 2, REMOTE_DEFAULT, &sp, why, sizeof(why)),
		 -EINVAL);
	operands_split_release(&sp);
	const char *forced[] = { "a", "node2::x" };
	CHECK_EQ(operands_split(forced, 2, REMOTE_SSH, &sp, why, sizeof(why)),
		 -EINVAL);
	operands_split_release(&sp);
}

/* What the remote shell wrote, read back by rsh_read_line() into len. */
static int read_back(const char *text, size_t len, char *line)
{
	struct rsh r = { .pid = -1, .status = -1, .in = -1, .err = -1 };
	int fd[2], rc;

	if (pipe(fd))
		return -errno;
	/* Written from a child: more than a pipe holds must not block us. */
	if (!fork()) {
		close(fd[0]);
		(void)!write(fd[1], text, strlen(text));
		_exit(0);
	}
	close(fd[1]);
	r.out = fd[0];
	snprintf(r.host, sizeof(r.host), "test");
	rc = rsh_read_line(&r, clock_now_ms() + 5000, boot_is_line, line, len);
	close(fd[0]);
	wait(NULL);
	return rc;
}

/*
 * A bootstrap line longer than the limit is refused, not cut to fit (cut,
 * the key and port before the padding would still parse); chatter of any
 * length before it is skipped.
 */
static void test_boot_line_limit(void)
{
	static char text[3 * 4096], line[BOOT_LINE_MAX];
	const char *head = "RDCP-BOOT 3 1 port=7 listen=tcp key=";
	size_t n;

	n = (size_t)snprintf(text, sizeof(text), "%s%064d\n", head, 0);
	CHECK_EQ(read_back(text, sizeof(line), line), 0);
	CHECK_EQ(strlen(line), n - 1);
	/* chatter longer than the read-ahead buffer, then the line */
	memset(text, 'x', 5000);
	snprintf(text + 5000, sizeof(text) - 5000, "\n%s%064d\n", head, 0);
	CHECK_EQ(read_back(text, sizeof(line), line), 0);
	CHECK(boot_is_line(line));
	/* exactly at the limit, its newline included: taken */
	n = (size_t)snprintf(text, sizeof(text), "%s%064d pad=", head, 0);
	memset(text + n, 'a', BOOT_LINE_MAX - 1 - n);
	snprintf(text + BOOT_LINE_MAX - 1, 2, "\n");
	CHECK_EQ(read_back(text, sizeof(line), line), 0);
	CHECK_EQ(strlen(line), BOOT_LINE_MAX - 1);
	/* one byte more: refused */
	memset(text + n, 'a', BOOT_LINE_MAX - n);
	snprintf(text + BOOT_LINE_MAX, 2, "\n");
	CHECK_EQ(read_back(text, sizeof(line), line), -EMSGSIZE);
	/* longer than the read-ahead buffer: refused too */
	memset(text + n, 'a', 5000);
	snprintf(text + n + 5000, 2, "\n");
	CHECK_EQ(read_back(text, sizeof(line), line), -EMSGSIZE);
}

TAP_RUN(TAP_TEST(test_boot_round_trip), TAP_TEST(test_boot_refusals),
	TAP_TEST(test_boot_line_limit), TAP_TEST(test_operands),
	TAP_TEST(test_split))
