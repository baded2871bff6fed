/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A lane's join refused, on whichever transport it came (cm_reject_join,
 * cm.h): for the receiver's engine and for both transports' lanes
 * (cm/tcp_lane.c, cm/rdma_lane.c), which meet a join they cannot take
 * below cm/transport.c. It calls only the two handshakes' refusals.
 */
#include "cm/cm.h"
#include "cm/cm_int.h"

void cm_reject_join(struct cm_request *req)
{
	if (req->tcp)
		cm_tcp_reject_join(req);
	else
		cm_rdma_reject_join(req);
}
