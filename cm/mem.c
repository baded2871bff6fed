/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Where a connection's big buffers live: the ring and staging areas
 * (cm_area_alloc, in util/hugemem.c's pages) on the NUMA node of the
 * device that moves them (cm_numa_of_device, from sysfs through
 * util/numa.c). Every transport's ring_create and stage_create come here.
 * And how big they are when the client leaves it to the link
 * (cm_window_slots, the rule in cm.h).
 */
#include <stdio.h>

#include "cm/cm_int.h"
#include "util/hugemem.h"
#include "util/log.h"
#include "util/numa.h"
#include "util/units.h"

int cm_numa_of_device(const char *dev)
{
	return numa_dev_node(numa_sysfs_root(), dev);
}

static size_t area_hdr_off(const struct cm_geom *g)
{
	return (size_t)g->slots * g->chunk_size;
}

unsigned int cm_window_slots(unsigned int gbps, uint32_t chunk_size,
			     uint64_t budget)
{
	uint64_t slots = CM_WINDOW_FALLBACK, cap;

	if (!chunk_size)
		return 1;
	if (!budget || budget > CM_WINDOW_MAX_BYTES)
		budget = CM_WINDOW_MAX_BYTES;
	if (gbps && gbps <= CM_WINDOW_MAX_GBPS) {
		/* bytes the link moves in CM_WINDOW_COVER_MS, rounded up */
		uint64_t bytes = (uint64_t)gbps * 1000000000ull / 8 *
				 CM_WINDOW_COVER_MS / 1000;

		slots = (bytes + chunk_size - 1) / chunk_size;
		if (slots < CM_WINDOW_FALLBACK)
			slots = CM_WINDOW_FALLBACK;
	}
	cap = budget / chunk_size;
	if (cap > CM_WINDOW_MAX_SLOTS)
		cap = CM_WINDOW_MAX_SLOTS;
	if (slots > cap)
		slots = cap;
	return slots ? (unsigned int)slots : 1;
}

size_t cm_area_len(const struct cm_geom *g)
{
	size_t hdrs = (size_t)g->slots * CM_SLOT_HDR;

	return area_hdr_off(g) + ((hdrs + 4095) & ~(size_t)4095);
}

uint64_t cm_pinned_bytes(const struct cm_geom *g)
{
	uint64_t bufs = (uint64_t)cm_ntx(g) + cm_rq_depth(g);

	return cm_area_len(g) + bufs * g->ctrl_size;
}

int cm_area_alloc(struct cm_conn *c, const char *what, bool nic, uint8_t **data,
		  uint8_t **hdr)
{
	size_t len = cm_area_len(&c->geom);
	enum hugemem_kind kind;
	char sz[32], node[24] = "";
	void *p;
	int rc;

	rc = hugemem_alloc(what, len, nic, c->numa_node, &p, &kind);
	if (rc)
		return rc;
	c->pages = hugemem_kind_name(kind);
	if (c->numa_node >= 0)
		snprintf(node, sizeof(node), ", NUMA node %d", c->numa_node);
	log_info("%s: %s in %s%s", what, units_format_size(len, sz, sizeof(sz)),
		 c->pages, node);
	*data = p;
	*hdr = *data + area_hdr_off(&c->geom);
	return 0;
}

void cm_area_free(uint8_t **data, const struct cm_geom *g)
{
	hugemem_free(*data, cm_area_len(g));
	*data = NULL;
}
