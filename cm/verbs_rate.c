/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A port's link rate in Gb/s (active speed x width), the figure rails are
 * compared by (rails.c) and a connection reports (verbs.c). A bottom file of
 * the RDMA transport: it calls nothing else in cm/.
 */
#include <stdint.h>

#include <infiniband/verbs.h>

#include "cm/verbs_int.h"

unsigned int vconn_rate_gbps(uint32_t speed, uint8_t width)
{
	static const struct {
		unsigned int speed; /* ibv_port_attr active_speed(_ex) */
		unsigned int mbps;  /* per lane of the link */
	} sp[] = { { 1, 2500 },	  { 2, 5000 },	   { 4, 10000 },
		   { 8, 10000 },  { 16, 14000 },   { 32, 25000 },
		   { 64, 50000 }, { 128, 100000 }, { 256, 200000 } };
	static const struct {
		unsigned int width;
		unsigned int x;
	} wd[] = { { 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 } };
	unsigned int mbps = 0, x = 0;

	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++)
		if (sp[i].speed == speed)
			mbps = sp[i].mbps;
	for (size_t i = 0; i < sizeof(wd) / sizeof(wd[0]); i++)
		if (wd[i].width == width)
			x = wd[i].x;
	return mbps * x / 1000;
}

unsigned int vconn_link_gbps(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr pa;

	if (!ctx || ibv_query_port(ctx, port, &pa))
		return 0;
#ifdef RDCP_HAVE_SPEED_EX
	/* XDR (0x100) and later: active_speed cannot hold them. */
	if (pa.active_speed_ex)
		return vconn_rate_gbps(pa.active_speed_ex, pa.active_width);
#endif
	return vconn_rate_gbps(pa.active_speed, pa.active_width);
}
