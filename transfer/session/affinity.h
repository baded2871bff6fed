/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Where one session runs: its ring or staging memory on the NUMA node of
 * the device (cm/mem.c takes it from conn->numa_node), the thread that
 * runs its engine and the workers it starts on that node's CPUs, and how
 * many workers it gets by default.
 */
#ifndef RDCP_AFFINITY_H
#define RDCP_AFFINITY_H

#include "cm/cm.h"
#include "transfer/xfer.h"

/*
 * Called in the engine's thread before its workers start and before any
 * ring or staging exists. Sets the process's huge-page mode from
 * o->hugepages (hugemem_set_mode: every session of a process has the
 * same) and c->numa_node from o->numa (auto keeps the
 * device's, off clears it, a node replaces it; only auto keeps
 * c->numa_rails, the slots of each rail on its own device's node: cm/mem.c
 * cm_area_plan); when that node is known
 * and this process may run on some of its CPUs, pins the calling thread
 * to them (the workers it starts inherit that); returns the worker count:
 * o->workers, or when 0 numa_workers_for() those CPUs (every allowed CPU
 * when no node is known). Says what it chose at -v. Never fails: a
 * placement that cannot be had is logged and left out.
 */
unsigned int affinity_apply(struct cm_conn *c, const struct xfer_opts *o);

#endif
