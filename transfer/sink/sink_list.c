/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --files-from on a pull, on the client (the sink): the list is read here,
 * a name at a time, and its names go to the receiver in NAMES messages
 * (HELLO flag LIST) as the receiver's walk takes them; the receiver walks
 * each beneath the one SRC directory and sends its entries, in the list's
 * order. Names that are not paths beneath it ("..") are refused here, as a
 * push's walk refuses them: that entry fails, the copy goes on.
 *
 * Memory stays bounded whatever the list's length. The receiver holds at
 * most WIRE_NAMES_WINDOW of names it has not said it is through with
 * (NAMES_ACK), so no more are sent; this side keeps the names sent until
 * the receiver is through with them and nothing still to be checked may
 * name them, and never more than twice the window.
 *
 * What a pull asked for (sink_want.c, the scp CVE-2019-6111 class): the
 * entries a receiver sends must be the names of the list, the directories
 * each implies, and with -r what lies beneath a listed name. An honest
 * walk sends them in the list's order, so each entry is matched against
 * the names kept, from the one the previous entry matched on: an entry
 * that matches none (.bashrc, a name not yet sent, one the receiver said
 * it was through with) ends the session, exit 5, before it touches the
 * disk. A packed slot's records are checked in a worker, from where the
 * engine thread's check stood when the slot came; the names they may need
 * are kept until it is done (the lock guards the names against the engine
 * thread adding and dropping them meanwhile).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/sink/sink_int.h"
#include "transfer/walk/walk.h"
#include "util/clock.h"
#include "util/lineq.h"

/* Names kept here at most: sent, and maybe still to be matched. */
#define KEEP_MAX (2 * (uint64_t)WIRE_NAMES_WINDOW)

struct snk_list {
	FILE *in;
	char sep;
	/* a list from a pipe, terminal or socket: read by a thread of its
	 * own (util/lineq.h), so a silent writer never blocks the engine */
	struct lineq *lq;
	char *line; /* the name read last */
	size_t line_cap, len;
	bool pending; /* line holds a name not yet sent */
	bool end_sent;
	struct wire_msg *m; /* the NAMES being filled */
	pthread_mutex_t lock;
	/* name i, lo <= i < sent, at names[i % cap] */
	char **names;
	size_t cap;
	uint64_t lo, sent, done;
	uint64_t cur;  /* where the last FILE matched */
	uint64_t used; /* cost of names [done, sent): the receiver's */
	uint64_t kept; /* cost of names [lo, sent) */
};

int sink_list_init(struct sink *k)
{
	struct snk_list *l;

	if (!k->t->list)
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	k->list = l;
	k->want_check = true; /* a pull: see sink_dir.c too */
	pthread_mutex_init(&l->lock, NULL);
	l->in = k->t->list;
	l->sep = k->t->list_sep;
	if (fileno(l->in) >= 0 && lineq_wanted(fileno(l->in))) {
		int rc = lineq_start(&l->lq, fileno(l->in), l->sep);

		if (rc)
			return rc;
	}
	l->cap = KEEP_MAX / wire_name_cost(1) + 1;
	l->names = calloc(l->cap, sizeof(*l->names));
	l->m = calloc(1, sizeof(*l->m));
	return l->names && l->m ? 0 : -ENOMEM;
}

void sink_list_free(struct sink *k)
{
	struct snk_list *l = k->list;

	if (!l)
		return;
	for (uint64_t i = l->lo; l->names && i < l->sent; i++)
		free(l->names[i % l->cap]);
	free(l->names);
	free(l->m);
	lineq_stop(l->lq);
	free(l->line);
	pthread_mutex_destroy(&l->lock);
	free(l);
	k->list = NULL;
}

/* A name of the list refused here: it fails, as on a push. */
static void refuse(struct sink *k, const char *name)
{
	char msg[WIRE_MSG_MAX + 1];
	struct xfer_file_report r = {
		.done = true,
		.path = name,
		.kind = "file",
		.status = -EPERM,
		.klass = engine_klass_of(-EPERM, false),
		.message = msg,
	};

	snprintf(msg, sizeof(msg),
		 "'%.200s' in the file list: not a path beneath '%.200s'", name,
		 k->t->list_base);
	sink_user_report(k, &r, NULL, 0);
	sink_tally(k, name, 0, -EPERM, false, msg, false);
}

/*
 * The next record of a list read by a thread (util/lineq.h) into l->line
 * as getdelim(3) would leave it: its length, -1 at the end with errno 0,
 * -2 when none has come yet, or -1 with errno set.
 */
static ssize_t take_record(struct snk_list *l)
{
	const char *rec;
	size_t len;
	int rc = lineq_next(l->lq, &rec, &len);

	errno = 0;
	if (!rc)
		return -2;
	if (rc < 0) {
		if (rc < -1)
			errno = -rc;
		return -1;
	}
	if (len + 1 > l->line_cap) {
		char *p = realloc(l->line, len + 1);

		if (!p) {
			errno = ENOMEM;
			return -1;
		}
		l->line = p;
		l->line_cap = len + 1;
	}
	memcpy(l->line, rec, len + 1);
	return (ssize_t)len;
}

/*
 * Reads the list's next name to send into l->line: 1, 0 at its end, 2
 * when a list read by a thread has none yet, or -1 with the engine
 * failed.
 */
static int read_name(struct sink *k)
{
	struct snk_list *l = k->list;
	ssize_t n;
	int rc;

	for (;;) {
		errno = 0;
		n = l->lq ? take_record(l)
			  : getdelim(&l->line, &l->line_cap, l->sep, l->in);
		if (n == -2)
			return 2;
		if (n < 0 && !l->lq && errno == EAGAIN && ferror(l->in)) {
			clearerr(l->in); /* none yet: --retry's spool (cmd) */
			return 2;
		}
		if (n < 0 && errno == ENOMEM) {
			engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				    "out of memory");
			return -1;
		}
		if (n < 0 && (l->lq ? errno != 0 : ferror(l->in))) {
			rc = errno ? -errno : -EIO;
			engine_fail(k->e, XFER_FAIL_LOCAL_IO, rc,
				    "cannot read the file list: %s",
				    strerror(-rc));
			return -1;
		}
		if (n < 0)
			return 0;
		if (n && l->line[n - 1] == l->sep)
			l->line[--n] = '\0';
		rc = walk_list_name(l->line, (size_t)n);
		if (!rc)
			break;
		if (rc < 0)
			refuse(k, l->line);
	}
	l->len = strlen(l->line);
	return 1;
}

/*
 * Drops the names the receiver is through with, but those a packed slot
 * still to be checked may name (from where the check stood when it came).
 */
static void prune(struct sink *k)
{
	struct snk_list *l = k->list;
	uint64_t to = l->done;

	for (unsigned int i = 0; i < k->e->c->geom.slots; i++)
		if (k->jobs[i].packed && k->jobs[i].list_lo < to)
			to = k->jobs[i].list_lo;
	pthread_mutex_lock(&l->lock);
	for (; l->lo < to; l->lo++) {
		char **p = &l->names[l->lo % l->cap];

		l->kept -= wire_name_cost(strlen(*p));
		free(*p);
		*p = NULL;
	}
	pthread_mutex_unlock(&l->lock);
}

/* Keeps l->line as name l->sent, put in l->m. 0 or -ENOMEM. */
static int keep_line(struct snk_list *l)
{
	char *copy = strdup(l->line);
	uint32_t cost = wire_name_cost(l->len);

	if (!copy)
		return -ENOMEM;
	if (wire_names_add(&l->m->u.names, l->line, l->len)) {
		free(copy);
		return -ENOSPC;
	}
	pthread_mutex_lock(&l->lock);
	l->names[l->sent % l->cap] = copy;
	l->sent++;
	pthread_mutex_unlock(&l->lock);
	l->used += cost;
	l->kept += cost;
	l->pending = false;
	return 0;
}

int sink_list_send(struct sink *k)
{
	struct snk_list *l = k->list;
	struct wire_names *n;
	bool end = false;
	int rc;

	if (!l || l->end_sent || k->e->fail)
		return 0;
	k->e->nap_ms = 0;
	prune(k);
	n = &l->m->u.names;
	memset(l->m, 0, sizeof(*l->m));
	l->m->type = WIRE_NAMES;
	for (;;) {
		if (!l->pending) {
			rc = read_name(k);
			if (rc < 0)
				return 0;
			if (rc == 2) {
				/* nothing the engine waits on: look again soon */
				k->e->nap_ms = 1;
				break;
			}
			if (!rc) {
				end = true;
				break;
			}
			l->pending = true;
		}
		if (l->used + wire_name_cost(l->len) > WIRE_NAMES_WINDOW ||
		    l->kept + wire_name_cost(l->len) > KEEP_MAX ||
		    l->sent - l->lo == l->cap)
			break; /* until the receiver is through with some */
		rc = keep_line(l);
		if (rc == -ENOSPC)
			break; /* the message is full */
		if (rc) {
			engine_fail(k->e, XFER_FAIL_RESOURCE, rc,
				    "out of memory");
			return 0;
		}
	}
	if (!n->count && !end)
		return 0;
	if (end) {
		n->flags = WIRE_NAMES_END;
		l->end_sent = true;
	}
	return engine_send(k->e, l->m) ? 0 : 1;
}

int sink_list_on_ack(struct sink *k, const struct wire_names_ack *a)
{
	struct snk_list *l = k->list;

	if (!l || a->done < l->done || a->done > l->sent)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s answered for file names it was never "
				   "sent: refused",
				   k->e->c->peer);
	/* Not dropped yet: [lo, done) is all that may have gone. */
	for (; l->done < a->done; l->done++)
		l->used -= wire_name_cost(strlen(l->names[l->done % l->cap]));
	if (l->cur < l->done)
		l->cur = l->done; /* none of them is sent again */
	prune(k);
	return 0;
}

uint64_t sink_list_pos(const struct sink *k)
{
	return k->list ? k->list->cur : 0;
}

/*
 * How path relates to name, a listed name: 0 none, 1 the name itself, 2
 * a directory it implies, 3 beneath it.
 */
static int relation(const char *path, size_t plen, const char *name)
{
	size_t nlen = strlen(name);

	if (plen == nlen)
		return memcmp(path, name, plen) ? 0 : 1;
	if (plen < nlen)
		return name[plen] == '/' && !memcmp(path, name, plen) ? 2 : 0;
	return path[nlen] == '/' && !memcmp(path, name, nlen) ? 3 : 0;
}

const char *sink_list_check(struct sink *k, uint64_t *pos, uint8_t kind,
			    const char *path)
{
	struct snk_list *l = k->list;
	bool recursive = k->p->flags & WIRE_HELLO_RECURSIVE;
	size_t plen = strlen(path);
	const char *why = "which the pull's file list did not name";

	if (!pos)
		pos = &l->cur; /* the engine thread's */
	pthread_mutex_lock(&l->lock);
	for (uint64_t i = *pos > l->lo ? *pos : l->lo; i < l->sent; i++) {
		int rel = relation(path, plen, l->names[i % l->cap]);

		/*
		 * A listed name comes as a file or a directory (a failure as
		 * a file): never as a symlink; the directories it implies
		 * too; what lies beneath only with -r.
		 */
		if ((rel == 1 || rel == 2) && kind == WIRE_KIND_SYMLINK)
			why = "a symlink where the file list named a file or "
			      "directory";
		else if (rel == 3 && !recursive)
			why = "beneath a name of the file list, without -r";
		else if (rel) {
			*pos = i;
			why = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return why;
}
