/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * NUMA placement of a session's threads and memory (affinity.h).
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "transfer/session/affinity.h"
#include "util/hugemem.h"
#include "util/log.h"
#include "util/numa.h"

unsigned int affinity_apply(struct cm_conn *c, const struct xfer_opts *o)
{
	char list[256] = "";
	cpu_set_t set;
	int n = -1, rc;
	unsigned int workers;

	hugemem_set_mode(o->link.hugepages);
	if (o->link.numa == XFER_NUMA_OFF)
		c->numa_node = -1;
	else if (o->link.numa == XFER_NUMA_NODE)
		c->numa_node = o->link.numa_node;
	/* Slots follow their rails' nodes only where --numa leaves it to us. */
	if (o->link.numa != XFER_NUMA_AUTO)
		c->numa_rails = false;
	if (c->numa_node >= 0) {
		n = numa_node_cpus(numa_sysfs_root(), c->numa_node, &set);
		if (n < 0)
			log_warn("NUMA node %d: cannot read its CPUs: %s",
				 c->numa_node, strerror(-n));
		else if (n == 0)
			log_info("NUMA node %d: none of its CPUs is allowed "
				 "here: threads not pinned",
				 c->numa_node);
	}
	if (n > 0) {
		rc = numa_pin_self(&set);
		if (rc) {
			log_warn("cannot pin threads to NUMA node %d: %s",
				 c->numa_node, strerror(-rc));
			n = -1;
		}
	}
	if (n <= 0 && !sched_getaffinity(0, sizeof(set), &set))
		n = CPU_COUNT(&set);
	workers = o->link.workers ? o->link.workers : numa_workers_for(n);
	if (log_enabled(LOG_INFO)) {
		numa_cpulist_format(&set, list, sizeof(list));
		if (c->numa_node >= 0)
			log_info("%s: NUMA node %d, CPUs %s, %u workers",
				 c->dev, c->numa_node, list, workers);
		else
			log_info("%s: NUMA node unknown, CPUs %s, %u workers",
				 c->dev, list, workers);
	}
	return workers;
}
