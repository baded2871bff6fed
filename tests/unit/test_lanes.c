/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Lanes (--streams; cm.h "Lanes"): the per-lane queue depths against every
 * slot count and lane count, the write order across lanes (struct
 * cm_wfifo), the join's private data, the lane proof, and the TCP
 * transport's lanes end to end on loopback at the cm/ layer: a client
 * joins lanes 1..3, a join for a lane already taken is refused, writes of
 * slot s arrive on lane s % 4 into the one ring, and the writer's
 * completions come in posting order whatever order the lanes finish in.
 */
#include "cmpoll.h"
#include "tap.h"

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "transfer/session/auth.h"
#include "transfer/wire/wire.h"
#include "util/clock.h"
#include "util/key.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* ---- geometry ---- */

static void test_lane_depths(void)
{
	for (unsigned int slots = 1; slots <= 130; slots++) {
		struct cm_geom g = { .ctrl_size = CM_CTRL_SIZE,
				     .ctrl_credits = CM_CTRL_CREDITS,
				     .slots = (uint16_t)slots,
				     .chunk_size = 65536 };

		/* One lane is exactly the single-QP geometry. */
		CHECK_EQ(cm_lane_rq_depth(&g, 1, 0), cm_rq_depth(&g));
		CHECK_EQ(cm_lane_sq_depth(&g, 0), cm_sq_depth(&g));
		for (unsigned int n = 1; n <= CM_LANES_MAX; n++) {
			unsigned int per[CM_LANES_MAX] = { 0 }, most = 0;

			for (unsigned int s = 0; s < slots; s++) {
				unsigned int k = cm_lane_of(s, n);

				CHECK(k < n);
				per[k]++;
			}
			for (unsigned int k = 0; k < n; k++)
				most = per[k] > most ? per[k] : most;
			for (unsigned int k = 0; k < n; k++) {
				unsigned int rq = cm_lane_rq_depth(&g, n, k);
				unsigned int extra = k ? 0 : CM_CTRL_CREDITS;

				/* Room for every write of its slots... */
				CHECK(rq >= per[k] + extra);
				/* ...and exactly the largest share. */
				CHECK_EQ(rq, most + extra);
				CHECK_EQ(cm_lane_sq_depth(&g, k),
					 2 * slots + (k ? 0 : cm_ntx(&g)));
			}
			/*
			 * Lanes 0..up-1 joined: lane 0 takes the slots of the
			 * rest, and keeps exactly their receives posted.
			 */
			for (unsigned int up = 1; up <= n; up++) {
				unsigned int on0 = 0;

				for (unsigned int s = 0; s < slots; s++) {
					unsigned int k =
						cm_lane_carrier(s, n, up);

					CHECK(k < up);
					CHECK(k == cm_lane_of(s, n) || !k);
					on0 += !k;
				}
				CHECK_EQ(cm_lane0_rq_depth(&g, n, up),
					 (n > 1 ? on0 : slots) +
						 CM_CTRL_CREDITS);
			}
			CHECK_EQ(cm_lane0_rq_depth(&g, n, 1), cm_rq_depth(&g));
		}
	}
}

/* ---- write order ---- */

static void test_wfifo_order(void)
{
	struct cm_wfifo f;
	struct cm_event ev[8];
	uint64_t pos[5];
	/* wr_id 10..14, the caller signals the 2nd and the 4th and 5th */
	const bool sig[5] = { false, true, false, true, true };

	CHECK_EQ(cm_wfifo_init(&f, 4), 0);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(cm_wfifo_push(&f, 10 + i, sig[i], &pos[i]), 0);
		CHECK(cm_wf_is(pos[i]));
	}
	/* Never more writes than staging buffers. */
	CHECK_EQ(cm_wfifo_push(&f, 14, true, &pos[4]), -ENOSPC);
	/* Lanes finish out of order: 3 first, then 1: nothing is due. */
	CHECK_EQ(cm_wfifo_done(&f, pos[3]), 0);
	CHECK_EQ(cm_wfifo_emit(&f, ev, 8), 0);
	CHECK_EQ(cm_wfifo_done(&f, pos[1]), 0);
	CHECK_EQ(cm_wfifo_emit(&f, ev, 8), 0);
	/* A completion twice, or of a write never posted: refused. */
	CHECK_EQ(cm_wfifo_done(&f, pos[1]), -EPROTO);
	CHECK_EQ(cm_wfifo_done(&f, 12), -EPROTO);
	/* 0 done: 0 and 1 retire, the caller hears of 1 only. */
	CHECK_EQ(cm_wfifo_done(&f, pos[0]), 0);
	CHECK_EQ(cm_wfifo_emit(&f, ev, 8), 1);
	CHECK_EQ(ev[0].type, CM_EV_SEND_DONE);
	CHECK_EQ(ev[0].id, 11);
	CHECK_EQ(ev[0].status, 0);
	/* Room again; 2 done: 2 and 3 retire, 3 told; 4 still out. */
	CHECK_EQ(cm_wfifo_push(&f, 14, sig[4], &pos[4]), 0);
	CHECK_EQ(cm_wfifo_done(&f, pos[2]), 0);
	CHECK_EQ(cm_wfifo_emit(&f, ev, 8), 1);
	CHECK_EQ(ev[0].id, 13);
	/* A budget of 0 leaves what is due for the next poll. */
	CHECK_EQ(cm_wfifo_done(&f, pos[4]), 0);
	CHECK_EQ(cm_wfifo_emit(&f, ev, 0), 0);
	CHECK_EQ(cm_wfifo_emit(&f, ev, 8), 1);
	CHECK_EQ(ev[0].id, 14);
	CHECK_EQ(f.len, 0);
	cm_wfifo_free(&f);
}

/* ---- the join's private data and proof ---- */

static void test_join_pd(void)
{
	struct cm_geom g = { .ctrl_size = CM_CTRL_SIZE,
			     .ctrl_credits = CM_CTRL_CREDITS,
			     .slots = 64,
			     .chunk_size = 1u << 20 };
	struct cm_join j = { .token = { 1, 2, 3, 4, 5, 6, 7, 8 }, .lane = 3 };
	struct cm_join out;
	struct cm_geom g2;
	uint8_t pd[56] = { 0 };
	uint16_t ver, st;

	memset(j.proof, 0xa5, sizeof(j.proof));
	cm_pd_encode_join(pd, &g, &j);
	CHECK_EQ(cm_pd_decode(pd, PD_JOIN_LEN, &ver, &st, &g2), 0);
	CHECK_EQ(st, PD_ST_JOIN);
	CHECK_EQ(g2.slots, 64);
	CHECK(cm_pd_decode_join(pd, sizeof(pd), &out));
	CHECK(!memcmp(out.token, j.token, CM_TOKEN_LEN));
	CHECK_EQ(out.lane, 3);
	CHECK(!memcmp(out.proof, j.proof, CM_PROOF_LEN));
	CHECK(!out.fallback);
	/* A fallback join (its rail dropped) says so in its flags byte. */
	j.fallback = true;
	cm_pd_encode_join(pd, &g, &j);
	CHECK_EQ(pd[PD_LEN + 10], 1);
	CHECK(cm_pd_decode_join(pd, sizeof(pd), &out));
	CHECK(out.fallback);
	pd[PD_LEN + 10] = 2; /* flags other than the one known: refused */
	CHECK(!cm_pd_decode_join(pd, sizeof(pd), &out));
	j.fallback = false;
	/* Short, lane 0, lane out of range, padding not zero: refused. */
	CHECK(!cm_pd_decode_join(pd, PD_JOIN_LEN - 1, &out));
	j.lane = 0;
	cm_pd_encode_join(pd, &g, &j);
	CHECK(!cm_pd_decode_join(pd, sizeof(pd), &out));
	j.lane = CM_LANES_MAX;
	cm_pd_encode_join(pd, &g, &j);
	CHECK(!cm_pd_decode_join(pd, sizeof(pd), &out));
	j.lane = 1;
	cm_pd_encode_join(pd, &g, &j);
	pd[PD_LEN + 11] = 1;
	CHECK(!cm_pd_decode_join(pd, sizeof(pd), &out));
}

static void test_lane_proof(void)
{
	uint8_t key[KEY_LEN], other[KEY_LEN], nonce_s[WIRE_NONCE_LEN];
	uint8_t tok[CM_TOKEN_LEN] = { 9, 9, 9, 9, 9, 9, 9, 9 };
	uint8_t p[CM_PROOF_LEN], q[CM_PROOF_LEN], zero[CM_PROOF_LEN] = { 0 };
	struct wire_hello h;

	memset(&h, 0, sizeof(h));
	memset(key, 1, sizeof(key));
	memset(other, 2, sizeof(other));
	memset(h.nonce, 3, sizeof(h.nonce));
	memset(nonce_s, 4, sizeof(nonce_s));
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 1, 4, false, p), 0);
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 1, 4, false, q), 0);
	CHECK(auth_proof_equal(p, q));
	/* Another key, lane, lane count, token or nonce: another proof. */
	CHECK_EQ(auth_lane_proof(other, &h, nonce_s, tok, 1, 4, false, q), 0);
	CHECK(!auth_proof_equal(p, q));
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 2, 4, false, q), 0);
	CHECK(!auth_proof_equal(p, q));
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 1, 3, false, q), 0);
	CHECK(!auth_proof_equal(p, q));
	/* A fallback join's proof is not the first attempt's. */
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 1, 4, true, q), 0);
	CHECK(!auth_proof_equal(p, q));
	tok[0] ^= 1;
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 1, 4, false, q), 0);
	CHECK(!auth_proof_equal(p, q));
	tok[0] ^= 1;
	nonce_s[5] ^= 1;
	CHECK_EQ(auth_lane_proof(key, &h, nonce_s, tok, 1, 4, false, q), 0);
	CHECK(!auth_proof_equal(p, q));
	/* Without a key: zero, the token alone names the session. */
	CHECK_EQ(auth_lane_proof(NULL, &h, nonce_s, tok, 1, 4, false, q), 0);
	CHECK(auth_proof_equal(zero, q));
}

/* ---- TCP lanes at the cm/ layer ---- */

static const struct cm_timeouts TO = { .resolve_ms = 2000, .connect_ms = 3000 };

struct client {
	pthread_t tid;
	uint16_t port;
	struct cm_geom want;
	struct cm_conn *c;
	int rc, dup_rc;
};

static const uint8_t TOKEN[CM_TOKEN_LEN] = { 'l', 'a', 'n', 'e', 's', 0, 1, 2 };

/* The client's lane 0 over TCP, then its lane 1 joined. */
static void *client_one_main(void *p)
{
	struct client *k = p;
	struct cm_addr a = { .host = "127.0.0.1",
			     .port = k->port,
			     .transport = CM_TRANSPORT_TCP };
	struct cm_join j = { .lane = 1 };

	memcpy(j.token, TOKEN, CM_TOKEN_LEN);
	k->rc = cm_connect(&a, &k->want, &TO, &k->c);
	if (!k->rc)
		k->rc = cm_set_lanes(k->c, 4);
	if (!k->rc)
		k->rc = cm_join(k->c, &j, &TO);
	return NULL;
}

/* client_one_main, then lane 1 again (refused), then lanes 2 and 3. */
static void *client_main(void *p)
{
	struct client *k = p;
	struct cm_join j = { .lane = 2 };

	client_one_main(k);
	memcpy(j.token, TOKEN, CM_TOKEN_LEN);
	/* The receiver takes this one for lane 1 again: refused. */
	if (!k->rc)
		k->dup_rc = cm_join(k->c, &j, &TO);
	for (unsigned int l = 2; !k->rc && l < 4; l++) {
		j.lane = (uint16_t)l;
		k->rc = cm_join(k->c, &j, &TO);
	}
	return NULL;
}

static struct cm_request *next_req(struct cm_listener *l)
{
	uint64_t end = clock_now_ms() + 5000;
	struct cm_request *req = NULL;

	while (clock_now_ms() < end)
		if (cm_listener_get(l, 200, &req) == 0)
			return cm_request_read(req, 3000) ? NULL : req;
	return NULL;
}

/*
 * A TCP listener on loopback, a client thread running fn(k) against it
 * (8 slots of 64 KiB), and lane 0's connection accepted into *s: 0, or
 * -1 with nothing left to clean up (the failure checked).
 */
static int lanes_pair(struct client *k, void *(*fn)(void *),
		      struct cm_listener **l, struct cm_conn **s)
{
	struct cm_addr la = { .host = "127.0.0.1",
			      .transport = CM_TRANSPORT_TCP };
	struct cm_limits lim = { .max_chunk_size = 65536, .max_slots = 8 };
	struct cm_request *req;

	k->want = (struct cm_geom){ .ctrl_size = CM_CTRL_SIZE,
				    .ctrl_credits = CM_CTRL_CREDITS,
				    .slots = 8,
				    .chunk_size = 65536 };
	CHECK_EQ(cm_listen_range(&la, 20000, 60000, l, &k->port), 0);
	if (!*l)
		return -1;
	CHECK_EQ(pthread_create(&k->tid, NULL, fn, k), 0);
	req = next_req(*l);
	CHECK(req && !cm_request_join(req, NULL));
	if (!req || cm_accept(req, &lim, &TO, s)) {
		pthread_join(k->tid, NULL);
		cm_listener_destroy(*l);
		return -1;
	}
	return 0;
}

static void test_tcp_lanes(void)
{
	struct cm_listener *l = NULL;
	struct cm_request *req;
	struct cm_conn *s = NULL;
	struct cm_ring_desc desc;
	struct cm_event ev[32];
	struct client k = { 0 };
	struct cm_join j;
	unsigned int lanes_seen = 0;
	int n;

	if (lanes_pair(&k, client_main, &l, &s))
		return;
	CHECK_EQ(cm_set_lanes(s, 4), 0);
	CHECK_EQ(s->ops->set_lanes(s, 4), -EBUSY); /* said once */
	/* Lane 1, then a join taken for lane 1 again, then lanes 2, 3. */
	for (int i = 0; i < 4; i++) {
		req = next_req(l);
		CHECK(req && cm_request_join(req, &j));
		if (!req)
			break;
		CHECK(!memcmp(j.token, TOKEN, CM_TOKEN_LEN));
		if (i == 1) {
			CHECK_EQ(s->ops->accept_lane(s, req, 1, &TO), -EPROTO);
			continue;
		}
		CHECK_EQ(s->ops->accept_lane(s, req, j.lane, &TO), 0);
	}
	pthread_join(k.tid, NULL);
	CHECK_EQ(k.rc, 0);
	CHECK_EQ(k.dup_rc, -EACCES);
	if (k.rc)
		goto out;
	CHECK_EQ(s->lanes, 4);
	CHECK_EQ(s->ops->ring_create(s, &desc), 0);
	CHECK_EQ(k.c->ops->stage_create(k.c, &desc), 0);
	/* Two rounds over every slot: receives come back, credits hold. */
	for (int round = 0; round < 2; round++) {
		for (unsigned int slot = 0; slot < 8; slot++) {
			memset(cm_stage(k.c, slot), (int)(round * 8 + slot),
			       4096);
			memset(cm_stage_hdr(k.c, slot), (int)slot, CM_SLOT_HDR);
			/* the caller signals slots 3 and 7 alone */
			CHECK_EQ(k.c->ops->post_write(k.c, slot, 4096, slot,
						      slot, slot % 4 == 3,
						      100 + slot),
				 0);
		}
		n = tc_poll_n(s, ev, 8);
		CHECK_EQ(n, 8);
		for (int i = 0; i < n; i++) {
			unsigned int slot = ev[i].imm;
			unsigned int lane = slot % 4;

			CHECK_EQ(ev[i].type, CM_EV_DATA);
			CHECK_EQ(ev[i].status, 0);
			/* lane 0: an rx buffer; lane k: id nrx + k - 1 */
			if (lane)
				CHECK_EQ(ev[i].id, s->nrx + lane - 1);
			else
				CHECK(ev[i].id < s->nrx);
			lanes_seen |= 1u << lane;
			CHECK_EQ(cm_slot(s, slot)[4095], round * 8 + slot);
			CHECK_EQ(cm_slot_hdr(s, slot)[0], slot);
			CHECK_EQ(s->ops->post_recv(s, (unsigned int)ev[i].id),
				 0);
		}
		/* The writer hears of 3, then 7, in posting order. */
		n = tc_poll_n(k.c, ev, 2);
		CHECK_EQ(n, 2);
		CHECK_EQ(ev[0].type, CM_EV_SEND_DONE);
		CHECK_EQ(ev[0].id, 103);
		CHECK_EQ(ev[1].id, 107);
		CHECK_EQ(k.c->ops->poll(k.c, ev, 8), 0);
	}
	CHECK_EQ(lanes_seen, 0xf);
out:
	cm_conn_destroy(k.c);
	cm_conn_destroy(s);
	cm_listener_destroy(l);
}

/*
 * Lanes 2 and 3 of 4 never joined: with keep_lanes(2) on both sides the
 * writes of their slots go on lane 0, whose receives cover them, and every
 * write lands; keep_lanes(3) is refused (lane 2 is missing).
 */
static void test_tcp_lanes_kept(void)
{
	struct cm_listener *l = NULL;
	struct cm_request *req;
	struct cm_conn *s = NULL;
	struct cm_ring_desc desc = { 0 };
	struct cm_event ev[32];
	struct client k = { 0 };
	struct cm_join j;
	unsigned int lanes_seen = 0;
	int n;

	if (lanes_pair(&k, client_one_main, &l, &s))
		return;
	CHECK_EQ(cm_set_lanes(s, 4), 0);
	req = next_req(l);
	CHECK(req && cm_request_join(req, &j));
	if (req)
		CHECK_EQ(s->ops->accept_lane(s, req, j.lane, &TO), 0);
	pthread_join(k.tid, NULL);
	CHECK_EQ(k.rc, 0);
	if (k.rc)
		goto out;
	CHECK_EQ(cm_keep_lanes(s, 3), -ENOTCONN);
	CHECK_EQ(cm_keep_lanes(k.c, 0), -EINVAL);
	CHECK_EQ(cm_keep_lanes(s, 2), 0);
	CHECK_EQ(cm_keep_lanes(k.c, 2), 0);
	CHECK_EQ(s->lanes_up, 2);
	CHECK_EQ(s->ops->ring_create(s, &desc), 0);
	CHECK_EQ(k.c->ops->stage_create(k.c, &desc), 0);
	CHECK_EQ(cm_keep_lanes(s, 1), -EINVAL); /* after the ring: too late */
	for (int round = 0; round < 3; round++) {
		for (unsigned int slot = 0; slot < 8; slot++) {
			memset(cm_stage(k.c, slot), (int)(round * 8 + slot),
			       4096);
			CHECK_EQ(k.c->ops->post_write(k.c, slot, 4096, slot,
						      slot, slot == 7,
						      100 + slot),
				 0);
		}
		n = tc_poll_n(s, ev, 8);
		CHECK_EQ(n, 8);
		for (int i = 0; i < n; i++) {
			unsigned int slot = ev[i].imm;
			unsigned int lane = cm_lane_carrier(slot, 4, 2);

			CHECK_EQ(ev[i].type, CM_EV_DATA);
			CHECK_EQ(ev[i].status, 0);
			if (lane)
				CHECK_EQ(ev[i].id, s->nrx + lane - 1);
			else
				CHECK(ev[i].id < s->nrx);
			lanes_seen |= 1u << lane;
			CHECK_EQ(cm_slot(s, slot)[4095], round * 8 + slot);
			CHECK_EQ(s->ops->post_recv(s, (unsigned int)ev[i].id),
				 0);
		}
		n = tc_poll_n(k.c, ev, 1);
		CHECK_EQ(n, 1);
		CHECK_EQ(ev[0].id, 107);
	}
	CHECK_EQ(lanes_seen, 0x3);
out:
	cm_conn_destroy(k.c);
	cm_conn_destroy(s);
	cm_listener_destroy(l);
}

TAP_RUN(TAP_TEST(test_lane_depths), TAP_TEST(test_wfifo_order),
	TAP_TEST(test_join_pd), TAP_TEST(test_lane_proof),
	TAP_TEST(test_tcp_lanes), TAP_TEST(test_tcp_lanes_kept))
