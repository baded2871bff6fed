/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to the TCP transport: the connection object that cm/tcp.c (the
 * threads and the cm_ops) and cm/tcp_conn.c (connect, listen, accept and
 * the handshake) share. Calls go one way: tcp_conn.c makes a connection
 * with the two functions below and frees it with cm_conn_destroy();
 * tcp.c never calls into tcp_conn.c.
 */
#ifndef RDCP_TCP_INT_H
#define RDCP_TCP_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/cm.h"

/* A posted send work request. */
struct twr {
	uint8_t op;
	bool signaled;
	unsigned int buf; /* tx buffer (SEND) or staging buffer (WRITE) */
	uint32_t len;
	uint32_t imm;
	unsigned int slot;
	uint64_t wr_id;
};

struct tconn {
	struct cm_conn base;
	int fd;
	int evfd; /* readable while the completion queue is not empty */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; send queue, thread states */
	bool sync_init;
	pthread_t tx_thr, rx_thr;
	bool tx_started, rx_started;
	unsigned int depth; /* send queue entries: slots + cm_ntx() */
	/* Under lock from here on. */
	struct twr *sq; /* posted, not yet written; depth entries */
	unsigned int sq_head, sq_len;
	/* WRs holding a send queue entry: queued, being written, or done and
	 * their completion not yet polled (as on a verbs SQ). */
	unsigned int sq_used;
	bool tx_writing;  /* the send thread is writing a frame */
	unsigned int *rq; /* posted receives, oldest first; nrx entries */
	unsigned int rq_head, rq_len;
	struct cm_event *cq; /* completions; cq_cap entries */
	unsigned int cq_cap, cq_head, cq_len;
	bool dead;     /* failed or closed: nothing more goes out */
	int close_err; /* the status CLOSED will carry */
	bool closed_queued;
	bool stopping;	 /* destroy() runs: errors are expected */
	bool rx_done;	 /* the receive thread has ended */
	bool err_logged; /* the root cause was logged once */
};

/*
 * A connection around the connected socket fd (taken over in every case:
 * closed on failure or by teardown) with geometry g, control buffers,
 * queues and every rx buffer posted; no threads yet. Returns 0 or -errno:
 * -ENOMEM unlogged with *out untouched when the connection itself cannot
 * be allocated; otherwise logged, with *out a partly built connection the
 * caller frees with cm_conn_destroy().
 */
int tconn_create(int fd, const struct cm_geom *g, const char *peer,
		 struct tconn **out) __attribute__((warn_unused_result));

/*
 * Tunes the socket, switches it to blocking I/O and starts the send and
 * receive threads (with every signal blocked in them). Returns 0 or
 * -errno, logged; on failure the caller frees t with cm_conn_destroy().
 */
int tconn_start(struct tconn *t, int connect_ms)
	__attribute__((warn_unused_result));

#endif
