/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Helpers both transports share (cm_int.h): the connection private data,
 * geometry limits, address formatting and resolution.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm_int.h"
#include "util/be_codec.h"
#include "util/log.h"
#include "util/units.h"

uint16_t cm_version(void)
{
#ifdef RDCP_TEST_HOOKS
	const char *v = getenv("RDCP_TEST_PROTO_VERSION");

	if (v)
		return (uint16_t)strtoul(v, NULL, 0);
#endif
	return CM_VERSION;
}

/* ---- private data ---- */

void cm_pd_encode(uint8_t *p, uint16_t status, const struct cm_geom *g)
{
	struct be_put w = be_put_init(p, PD_LEN);

	be_put_u32(&w, CM_MAGIC);
	be_put_u16(&w, cm_version());
	be_put_u16(&w, status);
	if (!g) {
		be_put_zeros(&w, PD_LEN - w.off);
		return;
	}
	be_put_u32(&w, g->ctrl_size);
	be_put_u16(&w, g->ctrl_credits);
	be_put_u16(&w, g->slots);
	be_put_u32(&w, g->chunk_size);
	be_put_zeros(&w, PD_LEN - w.off);
}

int cm_pd_decode(const void *data, size_t len, uint16_t *version,
		 uint16_t *status, struct cm_geom *g)
{
	struct be_get r = be_get_init(data, PD_LEN);

	if (!data || len < PD_LEN)
		return -EPROTO;
	if (be_get_u32(&r) != CM_MAGIC)
		return -EPROTO;
	*version = be_get_u16(&r);
	*status = be_get_u16(&r);
	g->ctrl_size = be_get_u32(&r);
	g->ctrl_credits = be_get_u16(&r);
	g->slots = be_get_u16(&r);
	g->chunk_size = be_get_u32(&r);
	if (*version != cm_version())
		return -EPROTONOSUPPORT;
	return 0;
}

void cm_pd_encode_join(uint8_t *p, const struct cm_geom *g,
		       const struct cm_join *j)
{
	struct be_put w = be_put_init(p + PD_LEN, PD_JOIN_LEN - PD_LEN);

	cm_pd_encode(p, PD_ST_JOIN, g);
	be_put_bytes(&w, j->token, CM_TOKEN_LEN);
	be_put_u16(&w, j->lane);
	be_put_u8(&w, j->fallback ? 1 : 0);
	be_put_zeros(&w, 1);
	be_put_bytes(&w, j->proof, CM_PROOF_LEN);
	be_put_zeros(&w, PD_JOIN_LEN - PD_LEN - w.off);
}

bool cm_pd_decode_join(const void *data, size_t len, struct cm_join *j)
{
	struct be_get r;
	uint8_t flags;
	bool pad_ok;

	if (!data || len < PD_JOIN_LEN)
		return false;
	r = be_get_init((const uint8_t *)data + PD_LEN, PD_JOIN_LEN - PD_LEN);
	be_get_bytes(&r, j->token, CM_TOKEN_LEN);
	j->lane = be_get_u16(&r);
	flags = be_get_u8(&r);
	j->fallback = flags == 1;
	pad_ok = flags <= 1 && be_get_zeros(&r, 1);
	be_get_bytes(&r, j->proof, CM_PROOF_LEN);
	return pad_ok && !r.err && j->lane >= 1 && j->lane < CM_LANES_MAX;
}

const char *cm_pd_status_str(uint16_t st)
{
	switch (st) {
	case PD_ST_REFUSED:
		return "lane join refused (unknown session, bad proof, lane "
		       "taken, or the session already started)";
	case PD_ST_VERSION:
		return "protocol version not supported";
	case PD_ST_PARAMS:
		return "connect geometry refused (control buffers, credits or "
		       "ring slots not those of this protocol version)";
	case PD_ST_BUSY:
		return "receiver is at its session limit, try again later";
	default:
		return "rejected";
	}
}

bool cm_geom_check(const struct cm_geom *g, char *why, size_t n)
{
	if (g->ctrl_size != CM_CTRL_SIZE)
		snprintf(why, n,
			 "control buffers of %u bytes (the protocol's are %u)",
			 g->ctrl_size, CM_CTRL_SIZE);
	else if (g->ctrl_credits != CM_CTRL_CREDITS)
		snprintf(why, n, "%u control credits (the protocol has %u)",
			 g->ctrl_credits, CM_CTRL_CREDITS);
	else if (!g->slots || g->chunk_size < SLOT_SIZE_MIN ||
		 g->chunk_size > SLOT_SIZE_MAX ||
		 (g->chunk_size & (g->chunk_size - 1)))
		snprintf(why, n,
			 "%u ring slots of %u bytes (at least 1, of a power "
			 "of two from %u to %u)",
			 g->slots, g->chunk_size, SLOT_SIZE_MIN, SLOT_SIZE_MAX);
	else
		return true;
	return false;
}

bool cm_geom_valid(const struct cm_geom *g)
{
	char why[100];

	return cm_geom_check(g, why, sizeof(why));
}

/* ---- small helpers ---- */

void cm_sockaddr_str(const struct sockaddr *sa, char *buf, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, n, "%s:%u", host, ntohs(s4->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			/* An IPv4 client of a "::" listener. */
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host,
				  sizeof(host));
			snprintf(buf, n, "%s:%u", host, ntohs(s6->sin6_port));
			return;
		}
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, n, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		snprintf(buf, n, "?");
	}
}

int cm_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int cm_lookup(const struct cm_addr *a, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = { 0 };
	char port[8];

	hints.ai_family = a->family == CM_AF_INET    ? AF_INET
			  : a->family == CM_AF_INET6 ? AF_INET6
						     : AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	snprintf(port, sizeof(port), "%u", a->port);
	return getaddrinfo(a->host, port, &hints, res);
}

int cm_resolve(const struct cm_addr *a, bool passive, struct addrinfo **res)
{
	int rc = cm_lookup(a, passive, res);

	if (rc) {
		log_err("cannot resolve '%s': %s", a->host ? a->host : "*",
			gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	}
	return 0;
}
