/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The shared pull-test peers of pullpeer.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pullpeer.h"
#include "transfer/session/auth.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"

int pp_welcome(struct engine *e, const uint8_t *key, struct wire_hello *h,
	       uint8_t data_key[AEAD_KEY_LEN])
{
	struct wire_msg *m = calloc(1, sizeof(*m));
	uint8_t nonce[WIRE_NONCE_LEN];
	int rc;

	if (!m)
		return -ENOMEM;
	memset(nonce, 0x6e, sizeof(nonce));
	rc = engine_expect(e, WIRE_HELLO, m, 5000);
	if (!rc) {
		*h = m->u.hello;
		memset(m, 0, sizeof(*m));
		m->type = WIRE_WELCOME;
		m->u.welcome.features =
			WIRE_FEAT_PACK | (key ? WIRE_FEAT_AUTH : 0);
		memcpy(m->u.welcome.nonce, nonce, sizeof(nonce));
		if (key)
			rc = auth_mac(key, AUTH_SERVER, h, &m->u.welcome,
				      m->u.welcome.mac);
	}
	if (!rc && key) {
		/* protocol 3: tagged after WELCOME, as server_hello.c does */
		uint8_t ck[AUTH_CTRL_KEY_LEN];

		rc = auth_ctrl_key(key, h, nonce, ck);
		if (!rc) {
			engine_mac_key(e, ck, true);
			rc = engine_send_last_plain(e, m);
		}
	} else if (!rc) {
		rc = engine_send(e, m);
	}
	if (!rc && key)
		rc = engine_expect(e, WIRE_AUTH, m, 5000);
	if (!rc && key)
		engine_mac_rx_start(e);
	if (!rc && key)
		rc = auth_data_key(key, h, nonce, data_key);
	free(m);
	return rc;
}

enum xfer_fail pp_run_client(const struct xfer_opts *co,
			     const struct cm_geom *g,
			     const struct memconn_faults *faults,
			     struct cm_conn **b, void *(*peer)(void *),
			     void *arg, unsigned int watchdog_s,
			     struct xfer_stats *st)
{
	struct cm_conn *a = NULL;
	enum xfer_fail vc;
	pthread_t tid;

	*b = NULL;
	if (memconn_pair(g, faults, &a, b) || !a || !*b) {
		printf("#   cannot make a memconn pair\n");
		return XFER_FAIL_INTERNAL;
	}
	alarm(watchdog_s);
	if (pthread_create(&tid, NULL, peer, arg)) {
		printf("#   cannot start the peer's thread\n");
		alarm(0);
		cm_conn_destroy(a);
		cm_conn_destroy(*b);
		return XFER_FAIL_INTERNAL;
	}
	vc = session_client(co, a, st);
	cm_conn_destroy(a);
	pthread_join(tid, NULL);
	alarm(0);
	cm_conn_destroy(*b);
	if (vc != XFER_OK)
		printf("#   client: %s\n", st->error);
	return vc;
}

bool pp_refused(enum xfer_fail vc, const struct xfer_stats *st,
		const char *name)
{
	if (vc != XFER_FAIL_PROTOCOL) {
		printf("#   verdict %d, want a protocol error (%d)\n", (int)vc,
		       (int)XFER_FAIL_PROTOCOL);
		return false;
	}
	if (!strstr(st->error, name)) {
		printf("#   '%s' not named in: %s\n", name, st->error);
		return false;
	}
	return true;
}
