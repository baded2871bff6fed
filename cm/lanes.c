/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Write order across lanes (cm_int.h struct cm_wfifo): every data write of
 * a connection with several lanes is recorded here in posting order and
 * signalled on its lane; the caller gets the completions it asked for in
 * posting order, each once every earlier write completed, as one QP would
 * give them. Shared by the RDMA (verbs_lane.c) and TCP (tcp_lane.c) lanes,
 * as is the lanes' count they set and keep (rdma_lane.c, tcp_lane.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm_int.h"

int cm_lanes_set(struct cm_conn *c, unsigned int *nlanes, struct cm_wfifo *wf,
		 unsigned int n)
{
	int rc;

	if (n < 1 || n > CM_LANES_MAX)
		return -EINVAL;
	if (*nlanes || c->ring || c->stage)
		return -EBUSY;
	if (n > 1) {
		rc = cm_wfifo_init(wf, c->geom.slots);
		if (rc)
			return rc;
	}
	*nlanes = n;
	c->lanes = n;
	c->lanes_up = n;
	return 0;
}

int cm_lanes_keep(struct cm_conn *c, unsigned int nlanes, unsigned int up,
		  unsigned int joined)
{
	if (nlanes <= 1 || up < 1 || up > nlanes || c->ring || c->stage)
		return -EINVAL;
	if (joined < up)
		return -ENOTCONN;
	c->lanes_up = up;
	return 0;
}

int cm_wfifo_init(struct cm_wfifo *f, unsigned int cap)
{
	memset(f, 0, sizeof(*f));
	f->e = calloc(cap ? cap : 1, sizeof(*f->e));
	if (!f->e)
		return -ENOMEM;
	f->cap = cap ? cap : 1;
	return 0;
}

void cm_wfifo_free(struct cm_wfifo *f)
{
	free(f->e);
	memset(f, 0, sizeof(*f));
}

int cm_wfifo_push(struct cm_wfifo *f, uint64_t wr_id, bool sig, uint64_t *pos)
{
	unsigned int i;

	if (f->len >= f->cap)
		return -ENOSPC;
	i = (f->head + f->len++) % f->cap;
	f->e[i] = (struct cm_wfent){ .wr_id = wr_id, .sig = sig };
	*pos = CM_WF_TAG | i;
	return 0;
}

int cm_wfifo_done(struct cm_wfifo *f, uint64_t pos)
{
	unsigned int i = (unsigned int)(pos & ~CM_WF_TAG);

	if (!cm_wf_is(pos) || i >= f->cap ||
	    (i + f->cap - f->head) % f->cap >= f->len || f->e[i].done)
		return -EPROTO;
	f->e[i].done = true;
	return 0;
}

int cm_wfifo_emit(struct cm_wfifo *f, struct cm_event *ev, int max)
{
	int n = 0;

	while (f->len && f->e[f->head].done && n < max) {
		struct cm_wfent *e = &f->e[f->head];

		if (e->sig) {
			memset(&ev[n], 0, sizeof(ev[n]));
			ev[n].type = CM_EV_SEND_DONE;
			ev[n].id = e->wr_id;
			n++;
		}
		f->head = (f->head + 1) % f->cap;
		f->len--;
	}
	return n;
}
