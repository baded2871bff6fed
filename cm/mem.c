/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Where a connection's big buffers live: the ring and staging areas
 * (cm_area_alloc, in util/hugemem.c's pages) on the NUMA node of the
 * device that moves them (cm_numa_of_device, from sysfs through
 * util/numa.c), or with rails on devices of several nodes each slot on
 * the node of the rail that carries it (cm_area_plan). Every transport's
 * ring_create and stage_create come here. And how big they are when the
 * client leaves it to the link (cm_window_slots, the rule in cm.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

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

int cm_area_plan(const struct cm_geom *g, unsigned int n, unsigned int up,
		 const int *lane_node, size_t page, struct cm_run *run,
		 unsigned int max, unsigned int *misplaced)
{
	size_t chunk = g->chunk_size, unit = chunk > page ? chunk : page;
	size_t data = (size_t)g->slots * chunk;
	unsigned int per = (unsigned int)(unit / chunk), nr = 0, off = 0;
	bool several = false;

	if (misplaced)
		*misplaced = 0;
	if (n < 2 || !up || !chunk || !g->slots)
		return 0;
	for (unsigned int k = 0; k < up && k < n; k++) {
		if (lane_node[k] < 0)
			return 0; /* a device without a node: as today */
		several |= lane_node[k] != lane_node[0];
	}
	if (!several)
		return 0;
	for (size_t at = 0; at < data; at += unit) {
		int node[CM_LANES_MAX], best = 0;
		unsigned int count[CM_LANES_MAX] = { 0 }, nn = 0;

		/* The node most of the unit's slots want, the first on ties. */
		for (unsigned int i = 0; i < per && off + i < g->slots; i++) {
			int want = lane_node[cm_lane_carrier(off + i, n, up)];
			unsigned int j = 0;

			while (j < nn && node[j] != want)
				j++;
			if (j == nn)
				node[nn++] = want;
			if (++count[j] > count[best])
				best = (int)j;
		}
		if (misplaced)
			for (unsigned int i = 0; i < per && off + i < g->slots;
			     i++)
				*misplaced +=
					lane_node[cm_lane_carrier(
						off + i, n, up)] != node[best];
		off += per;
		if (nr && run[nr - 1].node == node[best]) {
			run[nr - 1].len += unit;
			continue;
		}
		if (nr == max)
			return -E2BIG;
		run[nr++] = (struct cm_run){
			.off = at,
			.len = unit,
			.node = node[best],
		};
	}
	return nr > 1 ? (int)nr : 0;
}

/*
 * Runs at most per area: each is a mapping of its own (a VMA) once its
 * policy differs from its neighbours', and a process may have
 * vm.max_map_count of them (65 530 by default) for every session it runs.
 */
#define PLAN_RUNS_MAX 512u

/*
 * Places the slots of the area at p (len bytes mapped, in pages of kind)
 * per rail, before anything touches them; says what it did in node (for
 * the -v line, n bytes). Nothing placed, and node left as it was, when
 * the plan is one node or cannot be had (logged at -v).
 */
static void place_rails(struct cm_conn *c, const char *what, uint8_t *p,
			enum hugemem_kind kind, const int *lane_node,
			char *node, size_t n)
{
	size_t page = kind == HUGEMEM_PLAIN ? 4096 : HUGEMEM_PAGE;
	struct cm_run run[PLAN_RUNS_MAX];
	size_t bytes[CM_LANES_MAX] = { 0 }, used;
	int nodes[CM_LANES_MAX], nn = 0, r;
	unsigned int misplaced;
	char sz[32];

	r = cm_area_plan(&c->geom, c->lanes, c->lanes_up ? c->lanes_up : 1,
			 lane_node, page, run, PLAN_RUNS_MAX, &misplaced);
	if (r == -E2BIG)
		log_info("%s: slots left on NUMA node %d: placing them by "
			 "rail would take more than %u mappings",
			 what, c->numa_node, PLAN_RUNS_MAX);
	for (int i = 0; i < r; i++) {
		int j = 0,
		    rc = numa_prefer(p + run[i].off, run[i].len, run[i].node);

		if (rc) {
			/* The runs placed stay so, the rest lane 0's. */
			log_info("%s: cannot place slots on NUMA node %d: %s",
				 what, run[i].node, strerror(-rc));
			return;
		}
		while (j < nn && nodes[j] != run[i].node)
			j++;
		if (j == nn)
			nodes[nn++] = run[i].node;
		bytes[j] += run[i].len;
	}
	if (r >= 0 && misplaced)
		log_info("%s: %u of %u slots on another rail's NUMA node: "
			 "slots of %s share %s (chunks of 2 MiB or more, or "
			 "--hugepages off, place every slot)",
			 what, misplaced, c->geom.slots,
			 units_format_size(c->geom.chunk_size, sz, sizeof(sz)),
			 hugemem_kind_name(kind));
	if (r <= 0)
		return;
	used = (size_t)snprintf(node, n, ", by rail: NUMA node");
	for (int j = 0; j < nn && used < n; j++)
		used += (size_t)snprintf(
			node + used, n - used, "%s %d (%s)", j ? "," : "",
			nodes[j], units_format_size(bytes[j], sz, sizeof(sz)));
}

int cm_area_alloc(struct cm_conn *c, const char *what, bool nic,
		  const int *lane_node, uint8_t **data, uint8_t **hdr)
{
	size_t len = cm_area_len(&c->geom);
	enum hugemem_kind kind;
	char sz[32], node[160] = "";
	void *p;
	int rc;

	rc = hugemem_alloc(what, len, nic, c->numa_node, &p, &kind);
	if (rc)
		return rc;
	c->pages = hugemem_kind_name(kind);
	if (c->numa_node >= 0)
		snprintf(node, sizeof(node), ", NUMA node %d", c->numa_node);
	if (lane_node && c->numa_node >= 0)
		place_rails(c, what, p, kind, lane_node, node, sizeof(node));
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
