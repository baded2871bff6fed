/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to cm/: the RDMA devices of this host, their ports and GID
 * tables (cm/device.c). One walk over them serves the doctor (rdcp
 * --check lists them) and the connection setup of cm/rdma_cm.c, which
 * turns --device and --gid-index into the source address that makes
 * rdma_cm use that device and GID.
 */
#ifndef RDCP_DEVICE_H
#define RDCP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cm/cm.h"

struct ibv_context;
struct ibv_port_attr;

/* What cm_device_walk() visits and whom it tells. */
struct cm_port_walk {
	const char *only; /* this device alone; NULL: every device */
	/* A device that would not open (err: its errno). May be NULL. */
	void (*unopened)(void *arg, const char *dev, int err);
	/*
	 * Each port of each device opened, with the device open in ctx;
	 * attr is NULL when ibv_query_port() failed. True ends the walk.
	 */
	bool (*port)(void *arg, struct ibv_context *ctx, const char *dev,
		     uint8_t port, const struct ibv_port_attr *attr);
	void *arg;
	char *names;   /* if not NULL: every device's name, ", " between */
	size_t namesz; /* bytes at names, > 0 */
};

/*
 * Opens the RDMA devices (or the one named w->only) in turn and calls
 * w->port for each of their ports, 1 to phys_port_cnt (none when
 * ibv_query_device() fails). Returns the number of devices opened, or
 * -ENODEV when the host has no RDMA device at all.
 */
int cm_device_walk(const struct cm_port_walk *w);

/* "Ethernet (RoCE)" or "InfiniBand", for an ibv_port_attr link_layer. */
const char *cm_link_layer_str(uint8_t link_layer);

/*
 * The source address that pins addr->device (and addr->gid_index, when
 * >= 0) for rdma_cm, of family (AF_UNSPEC: any), port 0, in *out; with a
 * GID index, that GID's raw bytes in gid. Returns 0, or -ENODEV (no such
 * device, or no address or GID there) or -EAFNOSUPPORT (the GID holds
 * the other family) with the reason in why; nothing is logged.
 */
int cm_device_pinned_addr(const struct cm_addr *addr, int family,
			  struct sockaddr_storage *out, uint8_t gid[16],
			  char *why, size_t whysz);

#endif
