/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to the TCP transport: the connection object that its files
 * share. Calls go one way (tests/layers/layers.py checks it): tcp_conn.c
 * (connect, listen, accept) -> tcp.c (the cm_ops) -> tcp_lane.c (its
 * lanes) -> tcp_res.c (a connection made, started, torn down) ->
 * tcp_hca.c (queues, frames, threads); tcp_handshake.c (the handshake's
 * steps) below tcp_conn.c and tcp_lane.c. tcp_conn.c makes a connection
 * with tconn_create() and tconn_start() and frees it with
 * cm_conn_destroy().
 */
#ifndef RDCP_TCP_INT_H
#define RDCP_TCP_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/cm.h"
#include "cm/cm_int.h"
#include "util/log.h"

/* Frames (cm/tcp_hca.c): the header's size and the two ops. */
enum {
	FR_HDR = 16,
	FR_SEND = 1,
	FR_WRITE = 2
};

/* The receive thread's buffer (cm/tcp_hca.c), bytes. */
#define TCP_RX_BUF (64u * 1024)

/* How long a refused client may take to speak before it is answered. */
#define TCP_REFUSAL_MS 1000

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
	/* The receive thread's alone: what it read ahead of the frame it is
	 * at, rxb_len bytes from rxb_off; TCP_RX_BUF bytes. */
	uint8_t *rxb;
	size_t rxb_off, rxb_len;
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
	/*
	 * Lanes (--streams; cm.h): lane 0 (this tconn) owns the buffers, the
	 * ring and staging; lane[1..nlanes-1], once joined, are tconns of
	 * their own socket, threads and completion queue that only carry
	 * writes into lane 0's ring (borrowed), with parent and idx set.
	 */
	unsigned int idx;
	unsigned int nlanes; /* 0 or 1: lane 0 only */
	struct tconn *lane[CM_LANES_MAX];
	struct tconn *parent;
	bool borrowed;
	struct cm_wfifo wf;
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
		 unsigned int lane, unsigned int nlanes,
		 const struct cm_ops *ops, struct tconn **out)
	__attribute__((warn_unused_result));
/*
 * (ops: lane 0's, tcp.c's tconn_ops, given by tcp_conn.c. lane > 0: a
 * lane of nlanes, ops NULL (freed with tconn_teardown() and free()), with
 * no control buffers, cm_lane_rq_depth receives and a send queue for
 * writes alone.)
 */

/*
 * cm/tcp_hca.c: one tconn's queues, for the ops and the lanes: poll its
 * own completion queue, post a receive on it, queue a work request on it
 * (what names it in the log: -ENOMEM, logged, when the queue is full);
 * and the thread bodies that tcp_res.c starts.
 */
int tconn_poll_raw(struct tconn *t, struct cm_event *ev, int max);
int tconn_post_recv_raw(struct tconn *t, unsigned int rxbuf);
int tconn_sq_post(struct tconn *t, const struct twr *wr, const char *what);
void *tconn_tx_main(void *arg);
void *tconn_rx_main(void *arg);
/* cm/tcp.c's ops, for tcp_conn.c to give tconn_create(). */
extern const struct cm_ops tconn_ops;
/* cm/tcp_res.c: stops the threads and frees all t holds, lanes first. */
void tconn_teardown(struct tconn *t);

/*
 * cm/tcp_lane.c: the lane calls of tcp.c's struct cm_ops (cm.h), and the
 * lanes' share of poll, wait, post_write and the ring: tlane_pick the
 * tconn that carries slot's write (t itself for lane 0); tlane_poll and
 * tlane_wait as the ops; tlane_keep the keep_lanes op; tlane_share gives
 * every lane that carries writes (0..lanes_up-1) the ring or staging
 * (after checking they joined: -ENOTCONN, logged) and trims lane 0's
 * receives to cm_lane0_rq_depth.
 */
int tlane_set(struct cm_conn *c, unsigned int n);
int tlane_keep(struct cm_conn *c, unsigned int up);
int tlane_join(struct cm_conn *c, const struct cm_join *j,
	       const struct cm_timeouts *to);
int tlane_accept(struct cm_conn *c, struct cm_request *req, unsigned int lane,
		 const struct cm_timeouts *to);
struct tconn *tlane_pick(struct tconn *t, unsigned int slot);
int tlane_poll(struct tconn *t, struct cm_event *ev, int max);
int tlane_wait(struct tconn *t, int extra_fd, int timeout_ms);
int tlane_share(struct tconn *t);

/*
 * cm/tcp_handshake.c: the handshake's steps, for tcp_conn.c and the lanes
 * (cm_tcp.h's terms); tcp_refuse sends status st and closes.
 */
int tcp_io_deadline(int fd, void *buf, size_t len, bool out,
		    uint64_t deadline_ms);
void tcp_close_gently(int fd);
int tcp_client_answer(int fd, const char *peer, const struct cm_geom *want,
		      uint64_t deadline_ms, int connect_ms, enum log_level lvl,
		      struct cm_geom *out);
void tcp_refuse(int fd, uint16_t st, uint64_t deadline_ms);

/*
 * Tunes the socket, switches it to blocking I/O and starts the send and
 * receive threads (with every signal blocked in them). Returns 0 or
 * -errno, logged; on failure the caller frees t with cm_conn_destroy().
 */
int tconn_start(struct tconn *t, int connect_ms)
	__attribute__((warn_unused_result));

#endif
