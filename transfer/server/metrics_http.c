/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --metrics: the receiver's counters (metrics.c) over a minimal HTTP/1.0,
 * GET (or HEAD) /metrics and nothing else, from one thread that polls
 * non-blocking sockets and so never waits on a client nor holds anything a
 * session needs. A client has HTTP_TIMEOUT_MS from its connect to the end
 * of the answer and HTTP_REQ_MAX bytes for its request; HTTP_CONNS are
 * served at once, more are answered 503 at once (never read) and closed.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transfer/server/metrics.h"
#include "util/clock.h"
#include "util/log.h"

#define HTTP_CONNS 4
#define HTTP_REQ_MAX 2048
#define HTTP_TIMEOUT_MS 2000
#define HTTP_POLL_MS 200 /* how soon a stop is seen */

struct hconn {
	int fd; /* -1: free */
	uint64_t deadline_ms;
	char req[HTTP_REQ_MAX + 1];
	size_t rlen;
	char *resp; /* the answer being sent, or NULL while reading */
	size_t rsz, roff;
};

struct metrics_http {
	struct metrics *m;
	int lfd;
	unsigned int port;
	atomic_bool stop;
	pthread_t tid;
	struct hconn c[HTTP_CONNS];
};

/* "PORT", "HOST:PORT", "[V6]:PORT" into host and port (NUL-terminated). */
static int split_addr(const char *addr, char *host, size_t hsz, char *port,
		      size_t psz)
{
	const char *colon = strrchr(addr, ':');
	size_t hl;

	if (!colon) {
		snprintf(host, hsz, "127.0.0.1");
		snprintf(port, psz, "%s", addr);
		return 0;
	}
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']')
		addr++, hl -= 2;
	if (hl >= hsz || strlen(colon + 1) >= psz)
		return -EINVAL;
	if (!hl)
		snprintf(host, hsz, "127.0.0.1");
	else
		snprintf(host, hsz, "%.*s", (int)hl, addr);
	snprintf(port, psz, "%s", colon + 1);
	return 0;
}

static int bind_addr(const char *addr, unsigned int *bound)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV },
			*res, *ai;
	char host[256], port[16];
	int fd = -1, rc, err = -EADDRNOTAVAIL;

	if (split_addr(addr, host, sizeof(host), port, sizeof(port))) {
		log_err("--metrics: cannot use '%s': not PORT, HOST:PORT or "
			"[ADDR]:PORT", addr);
		return -EINVAL;
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		log_err("--metrics: cannot resolve '%s': %s", addr,
			gai_strerror(rc));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;

		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 16))
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		log_err("--metrics: cannot listen on '%s': %s", addr,
			strerror(-err));
		return err;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		*bound = 0;
		if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
			*bound = ntohs(ss.ss_family == AF_INET6
					       ? ((struct sockaddr_in6 *)&ss)
							 ->sin6_port
					       : ((struct sockaddr_in *)&ss)
							 ->sin_port);
	}
	log_info("metrics on http://%s%s%s:%u/metrics",
		 strchr(host, ':') ? "[" : "", host,
		 strchr(host, ':') ? "]" : "", *bound);
	return fd;
}

static void conn_close(struct hconn *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->resp);
	c->resp = NULL;
	c->rlen = c->rsz = c->roff = 0;
}

/* Sets c's answer: status line, headers, and body unless head_only. */
static void answer(struct hconn *c, const char *status, const char *type,
		   const char *body, size_t blen, bool head_only)
{
	char hdr[256];
	int hl = snprintf(hdr, sizeof(hdr),
			  "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			  status, type, blen);

	c->resp = malloc((size_t)hl + blen);
	if (!c->resp) {
		conn_close(c);
		return;
	}
	memcpy(c->resp, hdr, (size_t)hl);
	if (!head_only)
		memcpy(c->resp + hl, body, blen);
	c->rsz = (size_t)hl + (head_only ? 0 : blen);
	c->roff = 0;
}

static void plain(struct hconn *c, const char *status, const char *text)
{
	answer(c, status, "text/plain; charset=utf-8", text, strlen(text),
	       false);
}

/* The request in c->req (complete, or cut at HTTP_REQ_MAX: too_long). */
static void handle(struct metrics_http *h, struct hconn *c, bool too_long)
{
	char method[8], target[64], version[16];
	char *body;
	size_t blen;
	bool head_only;

	if (too_long) {
		plain(c, "431 Request Header Fields Too Large",
		      "request too large\n");
		return;
	}
	c->req[c->rlen] = '\0';
	if (sscanf(c->req, "%7s %63s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		plain(c, "400 Bad Request", "bad request\n");
		return;
	}
	head_only = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head_only) {
		plain(c, "405 Method Not Allowed", "only GET /metrics\n");
		return;
	}
	if (strcmp(target, "/metrics")) {
		plain(c, "404 Not Found", "only GET /metrics\n");
		return;
	}
	if (metrics_render(h->m, &body, &blen)) {
		plain(c, "503 Service Unavailable", "out of memory\n");
		return;
	}
	metrics_add(&h->m->scrapes, 1);
	answer(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body,
	       blen, head_only);
	free(body);
}

static void on_readable(struct metrics_http *h, struct hconn *c)
{
	ssize_t n = recv(c->fd, c->req + c->rlen, HTTP_REQ_MAX - c->rlen,
			 MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* gone, or closed before a whole request */
		conn_close(c);
		return;
	}
	c->rlen += (size_t)n;
	c->req[c->rlen] = '\0';
	/* Headers end at an empty line: all of them read, none needed. */
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		handle(h, c, false);
	else if (c->rlen == HTTP_REQ_MAX)
		handle(h, c, true);
}

static void on_writable(struct hconn *c)
{
	ssize_t n = send(c->fd, c->resp + c->roff, c->rsz - c->roff,
			 MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->roff += (size_t)n;
	if (c->roff == c->rsz) {
		shutdown(c->fd, SHUT_WR);
		conn_close(c);
	}
}

static void on_accept(struct metrics_http *h)
{
	static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\n"
				   "Content-Length: 0\r\n"
				   "Connection: close\r\n\r\n";
	int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return; /* EAGAIN, or out of descriptors: next time */
	for (int i = 0; i < HTTP_CONNS; i++) {
		if (h->c[i].fd < 0) {
			h->c[i].fd = fd;
			h->c[i].deadline_ms =
				clock_now_ms() + HTTP_TIMEOUT_MS;
			return;
		}
	}
	metrics_add(&h->m->http_refused, 1);
	if (send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		(void)0; /* refused either way */
	close(fd);
}

static void *serve(void *arg)
{
	struct metrics_http *h = arg;

	while (!atomic_load(&h->stop)) {
		struct pollfd p[HTTP_CONNS + 1];
		int idx[HTTP_CONNS + 1];
		nfds_t n = 0;
		uint64_t now = clock_now_ms();

		for (int i = 0; i < HTTP_CONNS; i++) {
			struct hconn *c = &h->c[i];

			if (c->fd < 0)
				continue;
			if (now >= c->deadline_ms) { /* slow: cut off */
				conn_close(c);
				continue;
			}
			p[n].fd = c->fd;
			p[n].events = c->resp ? POLLOUT : POLLIN;
			idx[n++] = i;
		}
		p[n].fd = h->lfd;
		p[n].events = POLLIN;
		idx[n++] = -1;
		if (poll(p, n, HTTP_POLL_MS) <= 0)
			continue;
		for (nfds_t k = 0; k < n; k++) {
			struct hconn *c = idx[k] >= 0 ? &h->c[idx[k]] : NULL;

			if (!p[k].revents)
				continue;
			if (!c)
				on_accept(h);
			else if (c->fd >= 0 && c->resp)
				on_writable(c);
			else if (c->fd >= 0)
				on_readable(h, c);
		}
	}
	return NULL;
}

int metrics_http_start(struct metrics *m, const char *addr,
		       struct metrics_http **out)
{
	struct metrics_http *h = calloc(1, sizeof(*h));
	int rc;

	if (!h) {
		log_err("--metrics: out of memory");
		return -ENOMEM;
	}
	h->m = m;
	for (int i = 0; i < HTTP_CONNS; i++)
		h->c[i].fd = -1;
	h->lfd = bind_addr(addr, &h->port);
	if (h->lfd < 0) {
		rc = h->lfd;
		free(h);
		return rc;
	}
	rc = pthread_create(&h->tid, NULL, serve, h);
	if (rc) {
		log_err("--metrics: cannot start its thread: %s",
			strerror(rc));
		close(h->lfd);
		free(h);
		return -rc;
	}
	*out = h;
	return 0;
}

unsigned int metrics_http_port(const struct metrics_http *h)
{
	return h->port;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	atomic_store(&h->stop, true);
	pthread_join(h->tid, NULL);
	for (int i = 0; i < HTTP_CONNS; i++)
		if (h->c[i].fd >= 0)
			conn_close(&h->c[i]);
	close(h->lfd);
	free(h);
}
