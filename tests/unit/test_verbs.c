/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDMA transport's judgements that need no device: what a failed
 * work completion becomes (cm/verbs_poll.c), fed through a CQ whose
 * poll_cq is ours (ibv_poll_cq is an inline that calls the context's op),
 * and a port's rate from its speed and width values (cm/verbs_lane.c),
 * XDR's included, and the rule that picks rails (cm/rails.c).
 */
#include "tap.h"

#include "cm/verbs_int.h"

#include <errno.h>
#include <string.h>

static struct ibv_wc fake_wc;

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	if (n < 1 || !fake_wc.wr_id)
		return 0;
	wc[0] = fake_wc;
	fake_wc.wr_id = 0; /* once */
	return 1;
}

/*
 * One failed completion of status st on the send CQ (recv false) or the
 * receive CQ of a fresh connection: its event's status, the words logged
 * in why (whysz bytes). opcode is what the device left there, undefined on
 * an error completion.
 */
static int one_wc(enum ibv_wc_status st, bool recv, enum ibv_wc_opcode opcode,
		  char *why, size_t whysz)
{
	static struct ibv_context ctx;
	static struct ibv_cq scq, rcq;
	static struct vconn v;
	struct cm_event ev[4];
	int n;

	memset(&v, 0, sizeof(v));
	ctx.ops.poll_cq = fake_poll_cq;
	scq.context = rcq.context = &ctx;
	v.scq = &scq;
	v.rcq = &rcq;
	snprintf(v.base.peer, sizeof(v.base.peer), "peer");
	fake_wc = (struct ibv_wc){ .wr_id = 7, .status = st, .opcode = opcode };
	n = vconn_poll_cq(&v, &v, recv ? v.rcq : v.scq, ev, 4);
	snprintf(why, whysz, "%s", v.base.err);
	if (n != 1)
		return 1000 + n;
	return ev[0].status;
}

static void test_wc_local_faults(void)
{
	static const enum ibv_wc_status local[] = {
		IBV_WC_LOC_PROT_ERR,	 IBV_WC_LOC_QP_OP_ERR,
		IBV_WC_LOC_EEC_OP_ERR,	 IBV_WC_LOC_ACCESS_ERR,
		IBV_WC_LOC_RDD_VIOL_ERR, IBV_WC_MW_BIND_ERR,
	};
	char why[256];

	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
		int rc = one_wc(local[i], false, IBV_WC_RDMA_WRITE, why,
				sizeof(why));

		if (rc != -EFAULT)
			printf("#   status %d: %d (%s)\n", local[i], rc, why);
		CHECK_EQ(rc, -EFAULT);
		CHECK(strstr(why, "local fault") != NULL);
	}
	/* A local length error is ours on a send, the peer's on a receive. */
	CHECK_EQ(one_wc(IBV_WC_LOC_LEN_ERR, false, IBV_WC_SEND, why,
			sizeof(why)),
		 -EFAULT);
	CHECK_EQ(
		one_wc(IBV_WC_LOC_LEN_ERR, true, IBV_WC_RECV, why, sizeof(why)),
		-EPROTO);
	/* The peer's faults stay the peer's. */
	CHECK_EQ(one_wc(IBV_WC_RETRY_EXC_ERR, false, IBV_WC_RDMA_WRITE, why,
			sizeof(why)),
		 -EHOSTUNREACH);
	CHECK_EQ(one_wc(IBV_WC_REM_ACCESS_ERR, false, IBV_WC_RDMA_WRITE, why,
			sizeof(why)),
		 -ECONNABORTED);
	CHECK_EQ(one_wc(IBV_WC_WR_FLUSH_ERR, true, IBV_WC_RECV, why,
			sizeof(why)),
		 -ECONNRESET);
}

/*
 * The opcode of an error completion is undefined: the queue it failed on
 * is named from the CQ, whatever the opcode field holds.
 */
static void test_wc_error_words(void)
{
	char why[256];

	CHECK_EQ(one_wc(IBV_WC_RETRY_EXC_ERR, false, IBV_WC_RECV, why,
			sizeof(why)),
		 -EHOSTUNREACH);
	if (!strstr(why, "RDMA send or write to peer failed"))
		printf("#   %s\n", why);
	CHECK(strstr(why, "RDMA send or write to peer failed") != NULL);
	CHECK_EQ(one_wc(IBV_WC_RNR_RETRY_EXC_ERR, true, IBV_WC_RDMA_WRITE, why,
			sizeof(why)),
		 -EPROTO);
	CHECK(strstr(why, "RDMA receive from peer failed") != NULL);
}

static void test_rate(void)
{
	/* Values as ibv_port_attr gives them (verbs.h ibv_port_speed). */
	uint32_t sdr = 1, edr = 32, hdr = 64, ndr = 128, xdr = 256;

	CHECK_EQ(vconn_rate_gbps(sdr, 1), 2);
	CHECK_EQ(vconn_rate_gbps(edr, 2), 100);
	CHECK_EQ(vconn_rate_gbps(hdr, 2), 200);
	CHECK_EQ(vconn_rate_gbps(ndr, 2), 400);
	CHECK_EQ(vconn_rate_gbps(xdr, 2), 800);
	CHECK_EQ(vconn_rate_gbps(ndr, 16), 200); /* 2x */
	CHECK_EQ(vconn_rate_gbps(3, 2), 0);	 /* unknown */
	CHECK_EQ(vconn_rate_gbps(xdr, 3), 0);
}

/*
 * Which devices are rails (cm/rails.c vrail_select), over made-up device
 * lists: lane 0's device first, then the host's addresses in order.
 */
static void test_rails_rate(void)
{
	int d[4];
	/* A 400 Gb/s port beside a spare 25 Gb/s one and another 400. */
	struct vrail_cand c[] = {
		{ "mlx5_0", &d[0], 400, true },
		{ "mlx5_1", &d[1], 25, true },
		{ "mlx5_2", &d[2], 400, true },
	};
	enum vrail_why why[3];
	unsigned int out[3];

	CHECK_EQ(vrail_select(c, 3, 16, why, out), 2);
	CHECK_EQ(out[0], 0);
	CHECK_EQ(out[1], 2);
	CHECK_EQ(why[1], VRAIL_RATE);
	CHECK_EQ(why[2], VRAIL_TAKEN);
	/* Lane 0 on the slow port: the fast ones are left out instead. */
	c[0].dev = &d[1];
	c[0].gbps = 25;
	c[1].dev = &d[0];
	c[1].gbps = 400;
	CHECK_EQ(vrail_select(c, 3, 16, why, out), 1);
	CHECK_EQ(why[1], VRAIL_RATE);
	CHECK_EQ(why[2], VRAIL_RATE);
	/* Unknown rates (0) match each other only. */
	c[0].gbps = 0;
	c[1].gbps = 0;
	CHECK_EQ(vrail_select(c, 3, 16, why, out), 2);
	CHECK_EQ(why[1], VRAIL_TAKEN);
	CHECK_EQ(why[2], VRAIL_RATE);
}

static void test_rails_other_rules(void)
{
	int d[4];
	struct vrail_cand c[] = {
		{ "rxe0", &d[0], 2, true },
		{ "rxe0", &d[0], 2, true },  /* lane 0's device again */
		{ "rxe1", &d[1], 2, false }, /* not named by --device */
		{ "rxe2", &d[2], 2, true },
		{ "rxe2", &d[2], 2, true }, /* a second address */
		{ "rxe3", &d[3], 2, true },
	};
	enum vrail_why why[6];
	unsigned int out[6];

	CHECK_EQ(vrail_select(c, 6, 16, why, out), 3);
	CHECK_EQ(why[0], VRAIL_TAKEN);
	CHECK_EQ(why[1], VRAIL_SEEN);
	CHECK_EQ(why[2], VRAIL_UNLISTED);
	CHECK_EQ(why[3], VRAIL_TAKEN);
	CHECK_EQ(why[4], VRAIL_SEEN);
	CHECK_EQ(out[1], 3);
	CHECK_EQ(out[2], 5);
	/* At most max (the lanes): the rest are left out. */
	CHECK_EQ(vrail_select(c, 6, 2, why, out), 2);
	CHECK_EQ(why[5], VRAIL_FULL);
	/* One device: one rail. */
	CHECK_EQ(vrail_select(c, 1, 16, why, out), 1);
}

TAP_RUN(TAP_TEST(test_wc_local_faults), TAP_TEST(test_wc_error_words),
	TAP_TEST(test_rate), TAP_TEST(test_rails_rate),
	TAP_TEST(test_rails_other_rules))
