/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * TCP transport tests (cm/tcp_conn.c, cm/tcp.c), over 127.0.0.1 only, on
 * ports the kernel picks. First the transport alone: the handshake and its
 * geometry clamping, refusals (version, geometry, busy) seen from both
 * sides by raw-socket peers, a closed port, the ops (SEND, WRITE_WITH_IMM,
 * queue depth, CLOSED). Then whole push sessions, session_client() against
 * session_serve() in a thread, each file compared byte for byte. Then peer
 * death, through a relay that resets or black-holes the connection
 * mid-transfer. Last, the throughput of a 512 MiB copy, printed as a TAP
 * comment and not asserted.
 */
#include "cmpoll.h"
#include "tap.h"
#include "testfs.h"

#include "cm/cm_tcp.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/clock.h"
#include "util/log.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK 4096u
#define WATCHDOG_S 180 /* a hung test kills the binary: a failure */
#define LOOPBACK "127.0.0.1"

__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getenv("RDCP_TEST_DEBUG"))
		log_set_level(LOG_DEBUG);
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	if (getsockname(fd, (struct sockaddr *)&sa, &len))
		return 0;
	return ntohs(sa.sin_port);
}

/* A listener on 127.0.0.1 and a port the kernel picked. */
static struct cm_tcp_listener *listen_lo(uint16_t *port)
{
	struct cm_addr a = { .host = LOOPBACK, .port = 0 };
	struct cm_tcp_listener *l = NULL;

	CHECK_EQ(cm_tcp_listen(&a, false, &l), 0);
	*port = l ? port_of(cm_tcp_listener_fd(l)) : 0;
	CHECK(*port != 0);
	return l;
}

static bool readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms) == 1;
}

/* A plain socket connected to 127.0.0.1:port (blocking). */
static int raw_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, LOOPBACK, &sa.sin_addr);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The 24-byte private data of cm/rdma_cm.c, built independently here. */
static void pd_build(uint8_t *p, uint32_t magic, uint16_t version,
		     uint16_t status, const struct cm_geom *g)
{
	uint32_t v32;
	uint16_t v16;

	memset(p, 0, 24);
	v32 = htobe32(magic);
	memcpy(p, &v32, 4);
	v16 = htobe16(version);
	memcpy(p + 4, &v16, 2);
	v16 = htobe16(status);
	memcpy(p + 6, &v16, 2);
	if (!g)
		return;
	v32 = htobe32(g->ctrl_size);
	memcpy(p + 8, &v32, 4);
	v16 = htobe16(g->ctrl_credits);
	memcpy(p + 12, &v16, 2);
	v16 = htobe16(g->slots);
	memcpy(p + 14, &v16, 2);
	v32 = htobe32(g->chunk_size);
	memcpy(p + 16, &v32, 4);
}

static uint16_t pd_u16(const uint8_t *p, size_t off)
{
	uint16_t v;

	memcpy(&v, p + off, 2);
	return be16toh(v);
}

static const struct cm_timeouts TO = { .resolve_ms = 2000,
				       .connect_ms = 3000 };

static struct cm_geom geom_of(uint16_t slots, uint32_t chunk)
{
	struct cm_geom g = {
		.ctrl_size = WIRE_CTRL_SIZE,
		.ctrl_credits = WIRE_CTRL_CREDITS,
		.slots = slots,
		.chunk_size = chunk,
	};

	return g;
}

/* cm_tcp_connect in a thread, so the test can play the server. */
struct connector {
	pthread_t tid;
	struct cm_addr addr;
	struct cm_geom want;
	struct cm_conn *c;
	int rc;
	double seconds;
};

static void *connector_main(void *p)
{
	struct connector *k = p;
	double t0 = clock_now_s();

	k->rc = cm_tcp_connect(&k->addr, &k->want, &TO, &k->c);
	k->seconds = clock_now_s() - t0;
	return NULL;
}

static void connector_start(struct connector *k, uint16_t port,
			    const struct cm_geom *want)
{
	memset(k, 0, sizeof(*k));
	k->addr.host = LOOPBACK;
	k->addr.port = port;
	k->want = *want;
	CHECK_EQ(pthread_create(&k->tid, NULL, connector_main, k), 0);
}

static void connector_join(struct connector *k)
{
	pthread_join(k->tid, NULL);
}

/* ---- the transport alone ---- */

static void test_handshake_and_ops(void)
{
	struct cm_limits lim = { .max_chunk_size = 65536, .max_slots = 8 };
	struct cm_geom want = geom_of(64, 1u << 20);
	struct cm_tcp_listener *l;
	struct cm_conn *s = NULL, *c;
	struct connector k;
	struct cm_ring_desc desc = { .addr = 1, .hdr_addr = 1, .rkey = 1 };
	struct cm_event ev[8 + WIRE_CTRL_CREDITS + 8];
	uint16_t port;
	int fds = tf_count_fds(), n, i;

	l = listen_lo(&port);
	if (!l)
		return;
	/* Nobody there yet: accept does not block. */
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), -EAGAIN);
	connector_start(&k, port, &want);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), 0);
	connector_join(&k);
	CHECK_EQ(k.rc, 0);
	c = k.c;
	if (!s || !c)
		goto out;
	/* Both sides agree on the clamped geometry. */
	CHECK_EQ(s->geom.slots, 8);
	CHECK_EQ(s->geom.chunk_size, 65536);
	CHECK_EQ(s->geom.ctrl_size, WIRE_CTRL_SIZE);
	CHECK_EQ(s->geom.ctrl_credits, WIRE_CTRL_CREDITS);
	CHECK(!memcmp(&s->geom, &c->geom, sizeof(c->geom)));
	CHECK_EQ(c->ntx, WIRE_CTRL_CREDITS + 1);
	CHECK_EQ(c->nrx, 8 + WIRE_CTRL_CREDITS);
	CHECK(!strcmp(c->dev, "tcp") && !strcmp(s->dev, "tcp"));
	CHECK(!strncmp(c->peer, "127.0.0.1:", 10));
	CHECK(!strncmp(s->peer, "127.0.0.1:", 10));
	printf("#   client sees %s, server sees %s\n", c->peer, s->peer);
	CHECK_EQ(c->ops->arm(c), 0);

	/* SEND: lands in the oldest posted rx buffer, always signalled. */
	memcpy(cm_tx(c, 3), "hello", 5);
	CHECK_EQ(c->ops->post_send(c, 3, 5, 77), 0);
	CHECK_EQ(tc_poll_n(s, ev, 1), 1);
	CHECK_EQ(ev[0].type, CM_EV_RECV);
	CHECK_EQ(ev[0].status, 0);
	CHECK_EQ(ev[0].len, 5);
	CHECK_EQ(ev[0].id, 0);
	CHECK(!memcmp(cm_rx(s, 0), "hello", 5));
	CHECK_EQ(tc_poll_n(c, ev, 1), 1);
	CHECK_EQ(ev[0].type, CM_EV_SEND_DONE);
	CHECK_EQ(ev[0].id, 77);
	CHECK_EQ(s->ops->post_recv(s, 0), 0);
	/* Too long for a control buffer, bad indexes: refused locally. */
	CHECK_EQ(c->ops->post_send(c, 0, WIRE_CTRL_SIZE + 1, 1), -EINVAL);
	CHECK_EQ(c->ops->post_send(c, c->ntx, 1, 1), -EINVAL);
	CHECK_EQ(c->ops->post_write(c, 0, 1, 0, 0, true, 1), -EINVAL);

	/*
	 * A write: payload into a slot, header into the slot's header, in
	 * one frame; the unsignalled one completes quietly.
	 */
	CHECK_EQ(s->ops->ring_create(s, &desc), 0);
	CHECK(desc.addr == 0 && desc.hdr_addr == 0 && desc.rkey == 0 &&
	      s->ring);
	CHECK_EQ(c->ops->stage_create(c, &desc), 0);
	CHECK(c->stage != NULL);
	for (i = 0; i < 3; i++) {
		memset(cm_stage(c, (unsigned int)i), 'a' + i, 1000);
		memset(cm_stage_hdr(c, (unsigned int)i), 'A' + i, CM_SLOT_HDR);
		CHECK((uintptr_t)cm_stage(c, (unsigned int)i) % 4096 == 0);
	}
	CHECK_EQ(c->ops->post_write(c, 0, 1000, 5, 0xdeadbeef, false, 10), 0);
	CHECK_EQ(c->ops->post_write(c, 1, 0, 6, 42, false, 11), 0);
	CHECK_EQ(c->ops->post_write(c, 2, s->geom.chunk_size, 7, 43, true, 12),
		 0);
	CHECK_EQ(c->ops->post_write(c, 0, 1, 8, 0, true, 1), -EINVAL);
	n = tc_poll_n(s, ev, 3);
	CHECK_EQ(n, 3);
	CHECK_EQ(ev[0].type, CM_EV_DATA);
	CHECK_EQ(ev[0].imm, 0xdeadbeef);
	CHECK_EQ(ev[0].len, CM_SLOT_HDR); /* the header's */
	CHECK_EQ(ev[0].id, 1); /* rx buffers are taken oldest first */
	CHECK_EQ(ev[1].imm, 42);
	CHECK_EQ(ev[2].len, CM_SLOT_HDR);
	CHECK(cm_slot(s, 5)[0] == 'a' && cm_slot(s, 5)[999] == 'a');
	CHECK(cm_slot(s, 5)[1000] == 0);
	CHECK(cm_slot_hdr(s, 5)[0] == 'A' &&
	      cm_slot_hdr(s, 5)[CM_SLOT_HDR - 1] == 'A');
	CHECK(cm_slot_hdr(s, 6)[0] == 'B'); /* a header without payload */
	CHECK(cm_slot(s, 7)[0] == 'c' &&
	      cm_slot(s, 7)[s->geom.chunk_size - 1] == 0);
	CHECK(cm_slot_hdr(s, 7)[0] == 'C');
	CHECK((uintptr_t)cm_slot(s, 7) % 4096 == 0);
	for (i = 0; i < n; i++)
		CHECK_EQ(s->ops->post_recv(s, (unsigned int)ev[i].id), 0);
	CHECK_EQ(tc_poll_n(c, ev, 1), 1);
	CHECK_EQ(ev[0].type, CM_EV_SEND_DONE);
	CHECK_EQ(ev[0].id, 12);
	CHECK_EQ(c->ops->poll(c, ev, 4), 0);

	/*
	 * The send queue holds slots + ctrl_credits + 1 WRs until polled
	 * (cm_sq_depth: a write per staging buffer, a SEND per tx buffer):
	 * the peer's receives bound it at slots + ctrl_credits in flight,
	 * so it consumes one and reposts it before the last goes out.
	 */
	for (i = 0; i < 8 + (int)WIRE_CTRL_CREDITS; i++)
		CHECK_EQ(s->ops->post_send(s, 0, 16, (uint64_t)i), 0);
	CHECK_EQ(tc_poll_n(c, ev, 1), 1);
	CHECK_EQ(c->ops->post_recv(c, (unsigned int)ev[0].id), 0);
	CHECK_EQ(s->ops->post_send(s, 0, 16, 98), 0);
	CHECK_EQ(s->ops->post_send(s, 0, 16, 99), -ENOMEM);
	CHECK_EQ(tc_poll_n(s, ev, 9 + WIRE_CTRL_CREDITS), 9 + WIRE_CTRL_CREDITS);
	CHECK_EQ(tc_poll_n(c, ev, 8 + WIRE_CTRL_CREDITS), 8 + WIRE_CTRL_CREDITS);
	for (i = 0; i < 8 + (int)WIRE_CTRL_CREDITS; i++)
		CHECK_EQ(c->ops->post_recv(c, (unsigned int)ev[i].id), 0);

	/*
	 * Frames queued together go out together and are read through the
	 * receive buffer (cm/tcp_hca.c): SENDs between writes whose payload
	 * (30 000 bytes: read through the buffer, across its refills) and
	 * whose full chunk (read straight into the slot) each land whole
	 * and in order.
	 */
	for (i = 0; i < 4; i++) {
		memset(cm_stage(c, (unsigned int)i), 'k' + i,
		       i == 3 ? s->geom.chunk_size : 30000);
		memset(cm_stage_hdr(c, (unsigned int)i), 'K' + i, CM_SLOT_HDR);
		snprintf((char *)cm_tx(c, (unsigned int)i), 8, "msg %d", i);
		CHECK_EQ(c->ops->post_send(c, (unsigned int)i, 6, 200u + i), 0);
		CHECK_EQ(c->ops->post_write(c, (unsigned int)i,
					    i == 3 ? s->geom.chunk_size : 30000,
					    (unsigned int)i, 300u + i, true,
					    400u + i),
			 0);
	}
	CHECK_EQ(tc_poll_n(s, ev, 8), 8);
	for (i = 0; i < 8; i++) {
		unsigned int q = (unsigned int)i / 2;
		uint32_t len = q == 3 ? s->geom.chunk_size : 30000;

		if (i % 2 == 0) {
			char exp[8];

			snprintf(exp, sizeof(exp), "msg %u", q);
			CHECK_EQ(ev[i].type, CM_EV_RECV);
			CHECK_EQ(ev[i].len, 6);
			CHECK(!memcmp(cm_rx(s, (unsigned int)ev[i].id), exp,
				      6));
		} else {
			CHECK_EQ(ev[i].type, CM_EV_DATA);
			CHECK_EQ(ev[i].imm, 300u + q);
			CHECK(cm_slot(s, q)[0] == 'k' + q &&
			      cm_slot(s, q)[len - 1] == 'k' + q);
			CHECK(cm_slot_hdr(s, q)[0] == 'K' + q &&
			      cm_slot_hdr(s, q)[CM_SLOT_HDR - 1] == 'K' + q);
		}
	}
	for (i = 0; i < 8; i++)
		CHECK_EQ(s->ops->post_recv(s, (unsigned int)ev[i].id), 0);
	CHECK_EQ(tc_poll_n(c, ev, 8), 8);
	for (i = 0; i < 8; i++)
		CHECK_EQ(ev[i].type, CM_EV_SEND_DONE);

	/*
	 * A vanished peer: CLOSED once; later sends are flushed with an
	 * error, as on a verbs QP in the error state.
	 */
	cm_conn_destroy(c);
	CHECK_EQ(tc_poll_n(s, ev, 1), 1);
	CHECK_EQ(ev[0].type, CM_EV_CLOSED);
	CHECK_EQ(ev[0].status, -ECONNRESET);
	CHECK_EQ(s->ops->poll(s, ev, 4), 0);
	CHECK_EQ(s->ops->post_send(s, 0, 16, 1234), 0);
	CHECK_EQ(s->ops->post_write(s, 0, 16, 0, 0, false, 1), -EINVAL);
	CHECK_EQ(s->ops->poll(s, ev, 4), 1);
	CHECK_EQ(ev[0].type, CM_EV_SEND_DONE);
	CHECK_EQ(ev[0].status, -ECONNRESET);
	CHECK_EQ(ev[0].id, 1234);
	CHECK_EQ(s->ops->poll(s, ev, 4), 0);
	/* wait() is bounded and sees the extra fd. */
	{
		double t0 = clock_now_s();
		int p[2];

		CHECK_EQ(s->ops->wait(s, -1, 100), 0);
		CHECK(clock_now_s() - t0 < 1.0);
		CHECK_EQ(pipe(p), 0);
		CHECK_EQ(write(p[1], "x", 1), 1);
		t0 = clock_now_s();
		CHECK_EQ(s->ops->wait(s, p[0], 5000), 0);
		CHECK(clock_now_s() - t0 < 1.0);
		close(p[0]);
		close(p[1]);
	}
out:
	cm_conn_destroy(s);
	cm_tcp_listener_destroy(l);
	CHECK_EQ(tf_count_fds(), fds);
}

/* A client of another version (or bad geometry) is told why. */
static void test_refusals(void)
{
	struct cm_limits lim = { .max_chunk_size = 1u << 20, .max_slots = 64 };
	struct cm_geom want = geom_of(4, CHUNK), bad = want;
	struct cm_tcp_listener *l;
	struct cm_conn *s = NULL;
	struct connector k;
	uint8_t pd[24];
	uint16_t port;
	int fds = tf_count_fds(), fd;

	l = listen_lo(&port);
	if (!l)
		return;
	/* Version mismatch. */
	fd = raw_connect(port);
	CHECK(fd >= 0);
	pd_build(pd, CM_MAGIC, CM_VERSION + 1, 0, &want);
	CHECK_EQ(write(fd, pd, sizeof(pd)), 24);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), -EPROTO);
	CHECK(s == NULL);
	memset(pd, 0, sizeof(pd));
	CHECK_EQ(read_all(fd, pd, sizeof(pd)), 0);
	CHECK_EQ(pd_u16(pd, 4), CM_VERSION);
	CHECK_EQ(pd_u16(pd, 6), 1); /* PD_ST_VERSION */
	CHECK_EQ(read(fd, pd, 1), 0); /* then closed */
	close(fd);

	/* Geometry out of range. */
	fd = raw_connect(port);
	bad.ctrl_credits = 1;
	pd_build(pd, CM_MAGIC, CM_VERSION, 0, &bad);
	CHECK_EQ(write(fd, pd, sizeof(pd)), 24);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), -EPROTO);
	CHECK_EQ(read_all(fd, pd, sizeof(pd)), 0);
	CHECK_EQ(pd_u16(pd, 6), 2); /* PD_ST_PARAMS */
	close(fd);

	/*
	 * The control geometry is the protocol's, not a range: buffers of
	 * 64 KiB or 256 credits would size what an unauthenticated client
	 * makes the receiver allocate (issue #16 item 8).
	 */
	for (int i = 0; i < 3; i++) {
		bad = want;
		bad.ctrl_size = i != 1 ? 65536 : WIRE_CTRL_SIZE;
		bad.ctrl_credits = i != 0 ? 256 : WIRE_CTRL_CREDITS;
		fd = raw_connect(port);
		pd_build(pd, CM_MAGIC, CM_VERSION, 0, &bad);
		CHECK_EQ(write(fd, pd, sizeof(pd)), 24);
		CHECK(readable(cm_tcp_listener_fd(l), 3000));
		CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), -EPROTO);
		CHECK(s == NULL);
		CHECK_EQ(read_all(fd, pd, sizeof(pd)), 0);
		CHECK_EQ(pd_u16(pd, 6), 2); /* PD_ST_PARAMS */
		close(fd);
	}

	/* Not an rdcp client at all. */
	fd = raw_connect(port);
	CHECK_EQ(write(fd, "GET / HTTP/1.0\r\nHost: x\r\n\r\n", 24), 24);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), -EPROTO);
	close(fd);

	/* Busy: the client gets -EBUSY. */
	connector_start(&k, port, &want);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_reject(l, &TO), 0);
	connector_join(&k);
	CHECK_EQ(k.rc, -EBUSY);
	CHECK(k.c == NULL);
	CHECK_EQ(cm_tcp_reject(l, &TO), -EAGAIN);

	/* A silent client is dropped after connect_ms. */
	{
		struct cm_timeouts quick = { .resolve_ms = 100,
					     .connect_ms = 200 };
		double t0;

		fd = raw_connect(port);
		CHECK(readable(cm_tcp_listener_fd(l), 3000));
		t0 = clock_now_s();
		CHECK_EQ(cm_tcp_accept(l, &lim, &quick, &s), -ETIMEDOUT);
		CHECK(clock_now_s() - t0 < 1.0);
		close(fd);
	}
	cm_tcp_listener_destroy(l);
	CHECK_EQ(tf_count_fds(), fds);
}

/* Runs the listener's refusals for about ms milliseconds. */
static void prepare_for(struct cm_tcp_listener *l, int ms)
{
	uint64_t end = clock_now_ms() + (uint64_t)ms;

	while (clock_now_ms() < end) {
		int t = 50, fd = cm_tcp_listener_prepare(l, &t);
		struct pollfd p = { .fd = fd, .events = 0 };

		poll(&p, 1, t);
	}
}

/*
 * cm_tcp_refuse never waits on the client (issue #16 item 4): 30 silent
 * clients are refused in well under their 1 s each, then told "busy" by
 * cm_tcp_listener_prepare; one that spoke is answered at once, a client
 * of another version with that.
 */
static void test_refuse_never_waits(void)
{
	struct cm_geom want = geom_of(4, CHUNK);
	struct cm_tcp_listener *l;
	int fds = tf_count_fds(), fd[30], v;
	char peer[64];
	uint8_t pd[24];
	uint16_t port;
	double t0;

	l = listen_lo(&port);
	if (!l)
		return;
	for (int i = 0; i < 30; i++)
		fd[i] = raw_connect(port);
	t0 = clock_now_s();
	for (int i = 0; i < 30; i++) {
		int s;

		CHECK(readable(cm_tcp_listener_fd(l), 3000));
		CHECK_EQ(cm_tcp_take(l, peer, sizeof(peer), &s), 0);
		cm_tcp_refuse(l, s, peer);
	}
	printf("#   30 silent clients refused in %.3f s\n", clock_now_s() - t0);
	CHECK(clock_now_s() - t0 < 0.5);
	/* The first 16 wait for their connect data; the rest are told now. */
	prepare_for(l, 1300);
	for (int i = 0; i < 30; i++) {
		CHECK_EQ(read_all(fd[i], pd, sizeof(pd)), 0);
		CHECK_EQ(pd_u16(pd, 6), 3); /* PD_ST_BUSY */
		close(fd[i]);
	}

	/* Spoke first: answered at once; another version: told that. */
	for (int i = 0; i < 2; i++) {
		int s;

		v = raw_connect(port);
		pd_build(pd, CM_MAGIC, CM_VERSION + (unsigned int)i, 0, &want);
		CHECK_EQ(write(v, pd, sizeof(pd)), 24);
		CHECK(readable(cm_tcp_listener_fd(l), 3000));
		CHECK_EQ(cm_tcp_take(l, peer, sizeof(peer), &s), 0);
		usleep(50000);
		cm_tcp_refuse(l, s, peer);
		CHECK(readable(v, 0));
		CHECK_EQ(read_all(v, pd, sizeof(pd)), 0);
		CHECK_EQ(pd_u16(pd, 6), i ? 1 : 3);
		CHECK_EQ(read(v, pd, 1), 0);
		close(v);
	}
	cm_tcp_listener_destroy(l);
	CHECK_EQ(tf_count_fds(), fds);
}

/*
 * Out of descriptors, accept() fails with EMFILE: the listener goes on
 * (issue #16 item 2). A client is told "busy" through the descriptor held
 * in reserve, and once descriptors are free again the next is taken.
 */
static void test_take_out_of_fds(void)
{
	struct cm_tcp_listener *l;
	struct rlimit old, low;
	int fd[2], s = -1, rc, lowest;
	char peer[64];
	uint8_t pd[24];
	uint16_t port;

	l = listen_lo(&port);
	if (!l)
		return;
	fd[0] = raw_connect(port);
	fd[1] = raw_connect(port);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	lowest = dup(0);
	close(lowest);
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)lowest; /* every fd below is taken */
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	rc = cm_tcp_take(l, peer, sizeof(peer), &s);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	CHECK_EQ(rc, -EAGAIN);
	/* The first client was taken with the reserve and told why. */
	CHECK_EQ(read_all(fd[0], pd, sizeof(pd)), 0);
	CHECK_EQ(pd_u16(pd, 6), 3); /* PD_ST_BUSY */
	/* Then the listener takes the next one as usual. */
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_take(l, peer, sizeof(peer), &s), 0);
	if (s >= 0)
		close(s);
	close(fd[0]);
	close(fd[1]);
	cm_tcp_listener_destroy(l);
}

/* The client's side of refusals, from raw servers. */
static void test_client_side(void)
{
	struct cm_geom want = geom_of(4, 4 * CHUNK), g;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct connector k;
	uint8_t pd[24];
	int fds = tf_count_fds(), lfd, fd, i;
	uint16_t port;
	double t0;

	inet_pton(AF_INET, LOOPBACK, &sa.sin_addr);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	port = port_of(lfd);

	/* Bound but not listening: refused at once. */
	{
		struct cm_addr a = { .host = LOOPBACK, .port = port };
		struct cm_conn *c = NULL;

		t0 = clock_now_s();
		CHECK_EQ(cm_tcp_connect(&a, &want, &TO, &c), -ECONNREFUSED);
		CHECK(clock_now_s() - t0 < 0.5);
		CHECK(c == NULL);
		a.host = "no-such-host.invalid";
		CHECK(cm_tcp_connect(&a, &want, &TO, &c) < 0);
		a.host = LOOPBACK;
		g = want;
		g.chunk_size = 100;
		CHECK_EQ(cm_tcp_connect(&a, &g, &TO, &c), -EINVAL);
	}
	CHECK_EQ(listen(lfd, 8), 0);
	/*
	 * 0: a receiver of another version, 1: one that lowers nothing but
	 * changes ctrl_size, 2: one that closes at once, 3: one that grows
	 * the ring, 4: one that says nothing (timeout), 5: one that lowers
	 * the slot size to 12 KiB: page sized, but no power of two, so its
	 * slots would not stay aligned.
	 */
	for (i = 0; i < 6; i++) {
		static const int want_rc[] = { -EPROTO,	      -EPROTO,
					       -ECONNREFUSED, -EPROTO,
					       -ETIMEDOUT,    -EPROTO };
		connector_start(&k, port, &want);
		fd = accept(lfd, NULL, NULL);
		CHECK(fd >= 0);
		CHECK_EQ(read_all(fd, pd, sizeof(pd)), 0);
		CHECK_EQ(pd_u16(pd, 4), CM_VERSION);
		g = want;
		if (i == 0) {
			pd_build(pd, CM_MAGIC, CM_VERSION + 1, 1, NULL);
		} else if (i == 1) {
			g.ctrl_size *= 2;
			pd_build(pd, CM_MAGIC, CM_VERSION, 0, &g);
		} else if (i == 3) {
			g.slots *= 2;
			pd_build(pd, CM_MAGIC, CM_VERSION, 0, &g);
		} else if (i == 5) {
			g.chunk_size = 3 * CHUNK;
			pd_build(pd, CM_MAGIC, CM_VERSION, 0, &g);
		}
		if (i == 0 || i == 1 || i == 3 || i == 5)
			CHECK_EQ(write(fd, pd, sizeof(pd)), 24);
		if (i != 4)
			close(fd);
		connector_join(&k);
		if (i == 4) {
			/* TO.connect_ms bounds it. */
			CHECK(k.seconds < TO.connect_ms / 1000.0 + 1);
			close(fd);
		}
		CHECK_EQ(k.rc, want_rc[i]);
		CHECK(k.c == NULL);
	}
	close(lfd);
	CHECK_EQ(tf_count_fds(), fds);
}

/* Names and families: "localhost" as IPv4, "::1" as IPv6. */
static void test_names_and_families(void)
{
	struct cm_limits lim = { .max_chunk_size = 1u << 20, .max_slots = 64 };
	struct cm_geom want = geom_of(4, CHUNK);
	struct cm_addr a6 = { .host = "::1", .family = CM_AF_INET6 };
	struct cm_tcp_listener *l;
	struct cm_conn *s = NULL;
	struct connector k;
	struct sockaddr_in6 sa;
	socklen_t len = sizeof(sa);
	uint16_t port;
	int fds = tf_count_fds(), rc;

	l = listen_lo(&port);
	if (!l)
		return;
	memset(&k, 0, sizeof(k));
	k.addr.host = "localhost";
	k.addr.port = port;
	k.addr.family = CM_AF_INET;
	k.want = want;
	CHECK_EQ(pthread_create(&k.tid, NULL, connector_main, &k), 0);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), 0);
	connector_join(&k);
	CHECK_EQ(k.rc, 0);
	if (k.c)
		CHECK(!strncmp(k.c->peer, "127.0.0.1:", 10));
	cm_conn_destroy(k.c);
	cm_conn_destroy(s);
	cm_tcp_listener_destroy(l);

	rc = cm_tcp_listen(&a6, false, &l);
	if (rc) {
		printf("#   skip IPv6: cannot listen on [::1]: %s\n",
		       strerror(-rc));
		CHECK_EQ(tf_count_fds(), fds);
		return;
	}
	CHECK_EQ(getsockname(cm_tcp_listener_fd(l), (struct sockaddr *)&sa,
			     &len),
		 0);
	memset(&k, 0, sizeof(k));
	k.addr.host = "::1";
	k.addr.port = ntohs(sa.sin6_port);
	k.addr.family = CM_AF_INET6;
	k.want = want;
	s = NULL;
	CHECK_EQ(pthread_create(&k.tid, NULL, connector_main, &k), 0);
	CHECK(readable(cm_tcp_listener_fd(l), 3000));
	CHECK_EQ(cm_tcp_accept(l, &lim, &TO, &s), 0);
	connector_join(&k);
	CHECK_EQ(k.rc, 0);
	if (k.c && s) {
		CHECK(!strncmp(k.c->peer, "[::1]:", 6));
		CHECK(!strncmp(s->peer, "[::1]:", 6));
	}
	cm_conn_destroy(k.c);
	cm_conn_destroy(s);
	cm_tcp_listener_destroy(l);
	CHECK_EQ(tf_count_fds(), fds);
}

/* ---- whole sessions ---- */

enum relay_mode { RELAY_NONE, RELAY_RESET, RELAY_BLACKHOLE };

/* Forwards 127.0.0.1 traffic; after `after` client bytes, breaks it. */
struct relay {
	pthread_t tid;
	int lfd;
	uint16_t port, to_port;
	enum relay_mode mode;
	uint64_t after;
	atomic_bool stop;
	atomic_bool broke;
};

static void *relay_main(void *p)
{
	struct relay *r = p;
	static __thread uint8_t buf[1 << 16];
	uint64_t fwd = 0;
	int a, b;

	if (!readable(r->lfd, 10000))
		return NULL;
	a = accept(r->lfd, NULL, NULL);
	b = raw_connect(r->to_port);
	if (a < 0 || b < 0)
		goto out;
	while (!atomic_load(&r->stop)) {
		struct pollfd pfd[2] = { { .fd = a, .events = POLLIN },
					 { .fd = b, .events = POLLIN } };
		ssize_t n;

		if (poll(pfd, 2, 100) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			int from = i ? b : a, to = i ? a : b;

			if (!pfd[i].revents)
				continue;
			n = read(from, buf, sizeof(buf));
			if (n <= 0)
				goto out;
			if (write(to, buf, (size_t)n) != n)
				goto out;
			if (!i)
				fwd += (uint64_t)n;
		}
		if (fwd >= r->after && r->mode == RELAY_RESET) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			/* Both ends see a reset, as when a host dies. */
			setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			atomic_store(&r->broke, true);
			break;
		}
		if (fwd >= r->after && r->mode == RELAY_BLACKHOLE) {
			/* Cable cut: nothing moves, nothing closes. */
			atomic_store(&r->broke, true);
			while (!atomic_load(&r->stop))
				usleep(10000);
			break;
		}
	}
out:
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return NULL;
}

static void relay_start(struct relay *r, uint16_t to_port,
			enum relay_mode mode, uint64_t after)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	r->to_port = to_port;
	r->mode = mode;
	r->after = after;
	atomic_init(&r->stop, false);
	atomic_init(&r->broke, false);
	inet_pton(AF_INET, LOOPBACK, &sa.sin_addr);
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_EQ(bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(listen(r->lfd, 4), 0);
	r->port = port_of(r->lfd);
	CHECK_EQ(pthread_create(&r->tid, NULL, relay_main, r), 0);
}

static void relay_stop(struct relay *r)
{
	atomic_store(&r->stop, true);
	pthread_join(r->tid, NULL);
	close(r->lfd);
}

struct sess {
	/* in */
	uint16_t window;
	uint32_t chunk;
	int timeout_ms;
	enum xfer_poll poll;
	const char *dest;
	const char *srcs[16];
	size_t nsrcs;
	enum relay_mode relay;
	uint64_t relay_after;
	const char *base; /* "/tmp" or "/dev/shm" */
	/* out */
	enum xfer_fail vc, vs;
	struct xfer_stats st;
	double seconds, server_seconds;
	/* private */
	char srcdir[64], root[64];
	int fds_before;
};

struct server_arg {
	struct cm_tcp_listener *l;
	const struct xfer_opts *o;
	int rootfd;
	enum xfer_fail v;
	int accept_rc;
	double seconds;
};

static void *server_main(void *p)
{
	struct server_arg *a = p;
	struct cm_limits lim = {
		.max_chunk_size = a->o->link.chunk_size,
		.max_slots = a->o->link.window,
	};
	struct cm_conn *c = NULL;

	a->v = XFER_FAIL_CONNECT;
	if (!readable(cm_tcp_listener_fd(a->l), 10000)) {
		a->accept_rc = -ETIMEDOUT;
		return NULL;
	}
	a->accept_rc = cm_tcp_accept(a->l, &lim, &TO, &c);
	if (a->accept_rc)
		return NULL;
	double t0 = clock_now_s();

	a->v = session_serve(a->o, a->rootfd, c);
	cm_conn_destroy(c);
	a->seconds = clock_now_s() - t0;
	return NULL;
}

static void sess_init(struct sess *s, uint16_t window, const char *base)
{
	memset(s, 0, sizeof(*s));
	s->window = window;
	s->chunk = CHUNK;
	s->timeout_ms = 5000;
	s->poll = XFER_POLL_ADAPTIVE;
	s->dest = "in/";
	s->base = base;
	s->fds_before = tf_count_fds();
	snprintf(s->srcdir, sizeof(s->srcdir), "%s/rdcp-tcp-src.XXXXXX", base);
	snprintf(s->root, sizeof(s->root), "%s/rdcp-tcp-root.XXXXXX", base);
	CHECK(mkdtemp(s->srcdir) != NULL);
	CHECK(mkdtemp(s->root) != NULL);
}

static const char *sess_add(struct sess *s, const char *name, size_t size,
			    uint64_t seed)
{
	char *path = malloc(strlen(s->srcdir) + strlen(name) + 2);

	if (!path)
		abort();
	sprintf(path, "%s/%s", s->srcdir, name);
	CHECK_EQ(tf_make_file(path, size, seed), 0);
	s->srcs[s->nsrcs++] = path;
	return path;
}

static void sess_run(struct sess *s)
{
	struct cm_geom g = geom_of(s->window, s->chunk);
	struct xfer_opts co, so;
	struct server_arg sa = { .o = &so };
	struct cm_addr addr = { .host = LOOPBACK };
	struct relay r;
	struct cm_conn *c = NULL;
	pthread_t tid;
	uint16_t port;
	double t0;
	int rc;

	xfer_opts_init(&co);
	co.link.chunk_size = s->chunk;
	co.link.window = s->window;
	co.link.workers = 2;
	co.link.poll = s->poll;
	co.link.timeout_ms = s->timeout_ms;
	co.link.connect_timeout_ms = TO.connect_ms;
	co.copy.dest = s->dest;
	co.copy.srcs = s->srcs;
	co.copy.nsrcs = s->nsrcs;
	so = co;
	so.copy.srcs = NULL;
	so.copy.nsrcs = 0;
	so.copy.dest = NULL;
	so.serve.root = s->root;

	s->vc = s->vs = XFER_FAIL_INTERNAL;
	sa.l = listen_lo(&port);
	sa.rootfd = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(sa.rootfd >= 0);
	if (!sa.l || sa.rootfd < 0)
		return;
	addr.port = port;
	if (s->relay != RELAY_NONE) {
		relay_start(&r, port, s->relay, s->relay_after);
		addr.port = r.port;
	}
	alarm(WATCHDOG_S);
	CHECK_EQ(pthread_create(&tid, NULL, server_main, &sa), 0);
	t0 = clock_now_s();
	rc = cm_tcp_connect(&addr, &g, &TO, &c);
	CHECK_EQ(rc, 0);
	if (!rc) {
		memset(&s->st, 0, sizeof(s->st));
		s->vc = session_client(&co, c, &s->st);
		s->seconds = clock_now_s() - t0;
		cm_conn_destroy(c);
	}
	pthread_join(tid, NULL);
	alarm(0);
	if (s->relay != RELAY_NONE)
		relay_stop(&r);
	CHECK_EQ(sa.accept_rc, 0);
	s->vs = sa.v;
	s->server_seconds = sa.seconds;
	close(sa.rootfd);
	cm_tcp_listener_destroy(sa.l);
}

static void check_placed(const struct sess *s, size_t i)
{
	const char *base = strrchr(s->srcs[i], '/') + 1;
	char d[4200];

	snprintf(d, sizeof(d), "%s/%s%s", s->root, s->dest, base);
	if (tf_same_file(s->srcs[i], d) != 1) {
		printf("#   %s did not arrive as %s\n", s->srcs[i], d);
		CHECK(0);
	}
}

static void sess_done(struct sess *s)
{
	for (size_t i = 0; i < s->nsrcs; i++)
		free((void *)s->srcs[i]);
	CHECK_EQ(tf_rm_tree(s->srcdir), 0);
	CHECK_EQ(tf_rm_tree(s->root), 0);
	CHECK_EQ(tf_count_fds(), s->fds_before);
}

static void sizes_session(uint16_t window, enum xfer_poll poll)
{
	static const size_t sizes[] = { 0, 1, CHUNK - 1, CHUNK, CHUNK + 1,
					3 * CHUNK + 17 };
	struct sess s;
	char name[32];

	/* One file per session, then all at once. */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		sess_init(&s, window, "/tmp");
		s.poll = poll;
		snprintf(name, sizeof(name), "f%zu", sizes[i]);
		sess_add(&s, name, sizes[i], i + 1);
		sess_run(&s);
		CHECK_EQ(s.vc, XFER_OK);
		CHECK_EQ(s.vs, XFER_OK);
		CHECK_EQ(s.st.files_ok, 1);
		check_placed(&s, 0);
		sess_done(&s);
	}
	sess_init(&s, window, "/tmp");
	s.poll = poll;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(name, sizeof(name), "g%zu", sizes[i]);
		sess_add(&s, name, sizes[i], 100 + i);
	}
	sess_add(&s, "big", (5u << 20) + 3, 7);
	sess_add(&s, "big2", 3u << 20, 8);
	sess_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.vs, XFER_OK);
	CHECK_EQ(s.st.files_ok, s.nsrcs);
	for (size_t i = 0; i < s.nsrcs; i++)
		check_placed(&s, i);
	sess_done(&s);
}

static void test_session_window1(void)
{
	sizes_session(1, XFER_POLL_ADAPTIVE);
}

static void test_session_window4(void)
{
	sizes_session(4, XFER_POLL_EVENT);
}

/* Default geometry (1 MiB chunks, 64 slots), busy polling. */
static void test_session_big_chunks(void)
{
	struct sess s;

	sess_init(&s, 64, "/tmp");
	s.chunk = 1u << 20;
	s.poll = XFER_POLL_BUSY;
	sess_add(&s, "a", (9u << 20) + 1, 11);
	sess_add(&s, "b", (1u << 20) - 1, 12);
	sess_add(&s, "c", 0, 13);
	sess_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.vs, XFER_OK);
	for (size_t i = 0; i < s.nsrcs; i++)
		check_placed(&s, i);
	sess_done(&s);
}

/* ---- peer death ---- */

static void test_peer_reset(void)
{
	struct sess s;

	sess_init(&s, 4, "/tmp");
	s.timeout_ms = 3000;
	s.relay = RELAY_RESET;
	s.relay_after = 2u << 20;
	sess_add(&s, "big", 16u << 20, 21);
	sess_run(&s);
	CHECK_EQ(s.vc, XFER_FAIL_PEER_LOST);
	CHECK_EQ(s.vs, XFER_FAIL_PEER_LOST);
	/* A reset is seen at once, not at the silence timeout. */
	CHECK(s.seconds < 2.5);
	printf("#   reset: client gave up after %.2f s, server after %.2f s\n",
	       s.seconds, s.server_seconds);
	sess_done(&s);
}

static void test_peer_vanishes(void)
{
	struct sess s;

	sess_init(&s, 4, "/tmp");
	s.timeout_ms = 2000;
	s.relay = RELAY_BLACKHOLE;
	s.relay_after = 2u << 20;
	sess_add(&s, "big", 16u << 20, 22);
	sess_run(&s);
	CHECK_EQ(s.vc, XFER_FAIL_PEER_LOST);
	CHECK_EQ(s.vs, XFER_FAIL_PEER_LOST);
	/* The silence timeout, plus destroy's bounded linger. */
	CHECK(s.seconds < s.timeout_ms / 1000.0 + 3);
	CHECK(s.server_seconds < s.timeout_ms / 1000.0 + 3);
	printf("#   vanished: client gave up after %.2f s, server after "
	       "%.2f s\n",
	       s.seconds, s.server_seconds);
	sess_done(&s);
}

/* ---- lanes: a join that comes after the receiver's deadline ---- */

/* The client's join of lane late_lane waits late_ms first (cm_ops.join). */
static unsigned int late_lane;
static int late_ms;
static int (*real_join)(struct cm_conn *c, const struct cm_join *j,
			const struct cm_timeouts *to);

static int late_join(struct cm_conn *c, const struct cm_join *j,
		     const struct cm_timeouts *to)
{
	if (j->lane == late_lane)
		usleep((useconds_t)late_ms * 1000);
	return real_join(c, j, to);
}

struct serve_arg {
	struct xfer_opts o;
	enum xfer_fail v;
};

static void *serve_main(void *p)
{
	struct serve_arg *a = p;

	a->v = xfer_serve(&a->o);
	return NULL;
}

/* A port on 127.0.0.1 nobody listens on (the kernel's pick, let go). */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint16_t port = 0;

	inet_pton(AF_INET, LOOPBACK, &sa.sin_addr);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		port = port_of(fd);
	if (fd >= 0)
		close(fd);
	return port;
}

/*
 * A push (or pull) with --streams 4 against `rdcp --listen --once` (its
 * connect timeout 1 s) whose lane `late` joins 1.5 s after the others:
 * the receiver goes on with lanes 0..late-1 at its deadline, says so in
 * LANES, and the client, whose late join is refused or times out, goes on
 * with them too; the copy is whole on both sides.
 */
static void lanes_late(unsigned int late, bool pull)
{
	struct serve_arg sa;
	struct xfer_opts co;
	struct cm_addr addr = { .host = LOOPBACK,
				.transport = CM_TRANSPORT_TCP };
	struct cm_ops ops;
	struct cm_conn *c = NULL;
	struct sess s;
	const char *dsts[1];
	char got[200], want[200];
	pthread_t tid;
	int rc = -1;

	sess_init(&s, 8, "/tmp");
	sess_add(&s, "lf", 3u << 20, 41);
	xfer_opts_init(&co);
	co.link.chunk_size = CHUNK;
	co.link.window = 8;
	co.link.workers = 2;
	co.link.timeout_ms = 10000;
	co.link.connect_timeout_ms = 3000;
	co.link.streams = 4;
	sa.o = co;
	sa.o.serve.root = s.root;
	sa.o.serve.once = true;
	sa.o.link.connect_timeout_ms = 1000;
	sa.o.link.addr = addr;
	sa.o.link.addr.port = free_port();
	sa.v = XFER_FAIL_INTERNAL;
	if (pull) {
		/* The file is the receiver's; the client's DEST is srcdir. */
		snprintf(want, sizeof(want), "%s/lf", s.root);
		CHECK_EQ(rename(s.srcs[0], want), 0);
		dsts[0] = "lf";
		co.copy.pull = true;
		co.copy.srcs = dsts;
		co.copy.nsrcs = 1;
		snprintf(got, sizeof(got), "%s/got", s.srcdir);
		co.copy.dest = got;
	} else {
		co.copy.srcs = s.srcs;
		co.copy.nsrcs = s.nsrcs;
		co.copy.dest = "got";
		snprintf(want, sizeof(want), "%s", s.srcs[0]);
		snprintf(got, sizeof(got), "%s/got", s.root);
	}
	addr.port = sa.o.link.addr.port;
	CHECK(addr.port != 0);
	alarm(WATCHDOG_S);
	CHECK_EQ(pthread_create(&tid, NULL, serve_main, &sa), 0);
	/* Until it listens. */
	for (int i = 0; i < 100 && rc; i++) {
		struct cm_geom g = geom_of(8, CHUNK);

		c = NULL;
		rc = cm_tcp_connect(&addr, &g, &TO, &c);
		if (rc)
			usleep(50000);
	}
	CHECK_EQ(rc, 0);
	if (!rc) {
		ops = *c->ops;
		real_join = ops.join;
		ops.join = late_join;
		c->ops = &ops;
		late_lane = late;
		late_ms = 1500;
		memset(&s.st, 0, sizeof(s.st));
		s.vc = session_client(&co, c, &s.st);
		cm_conn_destroy(c);
	}
	pthread_join(tid, NULL);
	alarm(0);
	late_lane = 0;
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(sa.v, XFER_OK);
	CHECK_EQ(s.st.streams, late);
	if (tf_same_file(want, got) != 1) {
		printf("#   %s did not arrive as %s\n", want, got);
		CHECK(0);
	}
	sess_done(&s);
}

/* Lane 2 of 4 late: lanes 0 and 1 carry the copy. */
static void test_lanes_late_push(void)
{
	lanes_late(2, false);
}

/* Lane 1 of 4 late: lane 0 alone; the client is the sink. */
static void test_lanes_late_pull(void)
{
	lanes_late(1, true);
}

/* ---- throughput (reported, not asserted) ---- */

static void test_throughput(void)
{
	size_t size = (size_t)512 << 20;
	struct sess s;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	if (getenv("RDCP_TCP_BENCH_MB"))
		size = (size_t)atoi(getenv("RDCP_TCP_BENCH_MB")) << 20;
	sess_init(&s, 64, base);
	s.chunk = 1u << 20;
	sess_add(&s, "big", size, 31);
	sess_run(&s);
	CHECK_EQ(s.vc, XFER_OK);
	CHECK_EQ(s.vs, XFER_OK);
	check_placed(&s, 0);
	printf("# tcp loopback: %zu MiB in %.2f s = %.0f MB/s (1 MiB chunks, "
	       "64 slots, crc32, 2 workers)\n",
	       size >> 20, s.seconds, (double)size / s.seconds / 1e6);
	sess_done(&s);
}

TAP_RUN(TAP_TEST(test_handshake_and_ops), TAP_TEST(test_refusals),
	TAP_TEST(test_refuse_never_waits), TAP_TEST(test_take_out_of_fds),
	TAP_TEST(test_client_side), TAP_TEST(test_names_and_families),
	TAP_TEST(test_session_window1), TAP_TEST(test_session_window4),
	TAP_TEST(test_session_big_chunks), TAP_TEST(test_peer_reset),
	TAP_TEST(test_peer_vanishes), TAP_TEST(test_lanes_late_push),
	TAP_TEST(test_lanes_late_pull), TAP_TEST(test_throughput))
