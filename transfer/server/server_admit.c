/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Who the receiver lets in (server_int.h): addresses that keep failing
 * authentication are held off, doubling up to PENALTY_MAX_MS; connections
 * still authenticating have a budget of their own (PREAUTH_PER_ADDR per
 * address, PREAUTH_MAX in all) outside the --max-sessions slots, which a
 * connection takes only once it proved the key. All under srv->lock; the
 * listener's thread only counts and hands out, refusals never wait.
 */
#include <stdio.h>
#include <string.h>

#include "cm/cm.h"
#include "transfer/server/server_int.h"
#include "util/clock.h"

static void peer_host(const char *peer, char *out, size_t n)
{
	const char *colon = strrchr(peer, ':');

	snprintf(out, n, "%.*s",
		 colon ? (int)(colon - peer) : (int)strlen(peer), peer);
}

static struct penalty *penalty_find(struct server *srv, const char *host,
				    bool add)
{
	struct penalty *oldest = &srv->pen[0];

	for (int i = 0; i < PENALTY_SLOTS; i++) {
		if (!strcmp(srv->pen[i].addr, host))
			return &srv->pen[i];
		if (srv->pen[i].until_ms < oldest->until_ms)
			oldest = &srv->pen[i];
	}
	if (!add)
		return NULL;
	memset(oldest, 0, sizeof(*oldest));
	snprintf(oldest->addr, sizeof(oldest->addr), "%s", host);
	return oldest;
}

void server_penalty_add(struct server *srv, const char *peer)
{
	char host[64];
	struct penalty *p;

	metrics_add(&srv->metrics.refused[REFUSED_AUTH], 1);
	peer_host(peer, host, sizeof(host));
	pthread_mutex_lock(&srv->lock);
	p = penalty_find(srv, host, true);
	if (++p->fails > PENALTY_FREE) {
		uint64_t ms = PENALTY_MS;

		for (unsigned int i = PENALTY_FREE + 1;
		     i < p->fails && ms < PENALTY_MAX_MS; i++)
			ms *= 2;
		p->until_ms = clock_now_ms() +
			      (ms < PENALTY_MAX_MS ? ms : PENALTY_MAX_MS);
	}
	pthread_mutex_unlock(&srv->lock);
}

bool server_penalty_holds(struct server *srv, const char *peer)
{
	char host[64];
	struct penalty *p;
	bool held;

	peer_host(peer, host, sizeof(host));
	pthread_mutex_lock(&srv->lock);
	p = penalty_find(srv, host, false);
	held = p && p->until_ms > clock_now_ms();
	pthread_mutex_unlock(&srv->lock);
	return held;
}

bool server_promote(struct server *srv, int pa)
{
	bool ok;

	if (pa < 0)
		return true;
	pthread_mutex_lock(&srv->lock);
	ok = srv->sessions < srv->max_sessions;
	if (ok) {
		srv->preauth_addr[pa][0] = '\0';
		srv->preauth--;
		srv->sessions++;
		srv->started = true;
	}
	pthread_mutex_unlock(&srv->lock);
	return ok;
}

int server_admit(struct server *srv, const char *peer, enum refusal *why)
{
	char host[64];
	unsigned int same = 0;
	int pa = -1;

	peer_host(peer, host, sizeof(host));
	if (server_penalty_holds(srv, peer)) {
		*why = REFUSED_HELD_OFF;
		return -1;
	}
	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < PREAUTH_MAX; i++) {
		if (!srv->preauth_addr[i][0])
			pa = pa < 0 ? i : pa;
		else if (!strcmp(srv->preauth_addr[i], host))
			same++;
	}
	/* Real sessions fill every slot: this one could not have one. */
	if (srv->sessions >= srv->max_sessions) {
		*why = REFUSED_BUSY;
		pa = -1;
	} else if (same >= PREAUTH_PER_ADDR) {
		*why = REFUSED_ADDR;
		pa = -1;
	} else if (pa < 0) {
		*why = REFUSED_PREAUTH;
	} else {
		snprintf(srv->preauth_addr[pa], sizeof(srv->preauth_addr[pa]),
			 "%s", host);
		srv->preauth++;
	}
	pthread_mutex_unlock(&srv->lock);
	return pa;
}

void server_refuse(struct server *srv, struct cm_request *req, enum refusal why)
{
	unsigned int held;

	if (log_every_due(&srv->refused[why], clock_now_ms(), 10000, &held)) {
		char more[64] = "";

		if (held)
			snprintf(more, sizeof(more),
				 " (and %u more like it since last said)",
				 held);
		switch (why) {
		case REFUSED_HELD_OFF:
			log_warn("refused %s: too many failed "
				 "authentications, held off for now%s",
				 cm_request_peer(req), more);
			break;
		case REFUSED_ADDR:
			log_warn("refused %s: %u connections from its address "
				 "are still authenticating%s",
				 cm_request_peer(req), PREAUTH_PER_ADDR, more);
			break;
		case REFUSED_PREAUTH:
			log_warn("refused %s: %u connections are still "
				 "authenticating%s",
				 cm_request_peer(req), PREAUTH_MAX, more);
			break;
		case REFUSED_STOPPING:
			log_warn("refused %s: shutting down%s",
				 cm_request_peer(req), more);
			break;
		default:
			log_warn("refused %s: %u sessions already running%s",
				 cm_request_peer(req), srv->max_sessions, more);
			break;
		}
	}
	metrics_add(&srv->metrics.refused[why], 1);
	cm_reject(req);
}
