// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* One session over a memconn pair, both ends in this process: sesspair.h. */
#include "sesspair.h"

#include "memconn.h"
#include "transfer/session/session.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct server_arg {
	const struct xfer_opts *o;
	int rootfd;
	struct cm_conn *c;
	enum xfer_fail v;
};

static void *server_main(void *p)
{
	struct server_arg *a = p;

	a->v = session_serve(a->o, a->rootfd, a->c);
	return NULL;
}

int sess_pair_run(const struct cm_geom *g, const struct xfer_opts *co,
		  const struct xfer_opts *so, const char *root,
		  unsigned int watchdog_s, struct sess_pair *out)
{
	struct server_arg sa = { .o = so, .rootfd = -1 };
	struct cm_conn *a = NULL, *b = NULL;
	char logpath[] = "/tmp/rdcp-plog.XXXXXX";
	int logfd = -1, saved = -1, rc = 0;
	pthread_t tid;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	out->vc = out->vs = XFER_FAIL_INTERNAL;
	sa.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	logfd = mkstemp(logpath);
	saved = dup(2);
	if (sa.rootfd < 0 || logfd < 0 || saved < 0) {
		rc = -errno;
		goto out;
	}
	rc = memconn_pair(g, NULL, &a, &b);
	if (rc)
		goto out;
	sa.c = b;
	fflush(stderr);
	dup2(logfd, 2);
	alarm(watchdog_s);
	rc = -pthread_create(&tid, NULL, server_main, &sa);
	if (!rc) {
		out->vc = session_client(co, a, &out->st);
		cm_conn_destroy(a);
		a = NULL;
		pthread_join(tid, NULL);
		out->vs = sa.v;
	}
	alarm(0);
	fflush(stderr);
	dup2(saved, 2);
out:
	if (a)
		cm_conn_destroy(a);
	if (b)
		cm_conn_destroy(b);
	if (saved >= 0)
		close(saved);
	if (sa.rootfd >= 0)
		close(sa.rootfd);
	if (logfd >= 0) {
		n = pread(logfd, out->log, sizeof(out->log) - 1, 0);
		out->log[n > 0 ? n : 0] = '\0';
		close(logfd);
		unlink(logpath);
	}
	return rc;
}
