/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --files-from on a pull, on the receiver that serves it: the client's
 * list comes in NAMES messages (HELLO flag LIST) and feeds the walk
 * (walk.h) a name at a time, as a push's walk reads its list from a file.
 *
 * What bounds the names held here is the window (wire_list.h): the client may
 * have names costing at most WIRE_NAMES_WINDOW here that this side has not
 * said it is through with, and a NAMES beyond that ends the session as a
 * protocol error, before anything of it is kept. This side is through
 * with a name once every entry the walk made of it has gone out (a FILE
 * sent, or the packed slot it is in written): then NAMES_ACK tells the
 * client, which forgets it and may send more. So the buffer of names not
 * yet walked, and the record of those walked whose entries are not all
 * out, never exceed the window, whatever the list's length; the walk takes
 * a name only when the plan wants entries, so a client can send no faster
 * than the copy goes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/source/source_int.h"

/* A name the walk took whose entries are not all out yet. */
struct src_taken {
	size_t first;  /* the walk's index of its first entry */
	uint32_t cost; /* wire_name_cost() */
};

struct src_names {
	char *buf; /* WIRE_NAMES_WINDOW bytes: names not yet taken */
	size_t head, tail;
	bool ended; /* NAMES with END came */
	/* names: received, taken by the walk, through with, told so */
	uint64_t got, taken, done, acked;
	uint64_t used;	/* cost of the names received and not done */
	uint64_t freed; /* cost of those done since the last NAMES_ACK */
	struct src_taken *ring; /* taken, not done: name i at i % cap */
	size_t cap;
};

/* The walk's feed (walk_feed_fn): the next name, in the order sent. */
static int feed(void *arg, const char **name, size_t *len)
{
	struct source *s = arg;
	struct src_names *l = s->names;
	struct src_taken *t;

	if (l->head == l->tail)
		return l->ended ? -1 : 0;
	*name = l->buf + l->head;
	*len = strlen(*name);
	t = &l->ring[l->taken++ % l->cap];
	t->first = s->walk.n;
	t->cost = wire_name_cost(*len);
	l->head += *len + 1;
	if (l->head == l->tail)
		l->head = l->tail = 0;
	return 1;
}

int src_names_init(struct source *s)
{
	struct src_names *l;

	if (!(s->cfg->p.flags & WIRE_HELLO_LIST))
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	s->names = l;
	/* Every name taken and not done is in the window too. */
	l->cap = WIRE_NAMES_WINDOW / wire_name_cost(1) + 1;
	l->buf = malloc(WIRE_NAMES_WINDOW);
	l->ring = calloc(l->cap, sizeof(*l->ring));
	if (!l->buf || !l->ring)
		return -ENOMEM;
	s->walk.feed = feed;
	s->walk.feed_arg = s;
	return 0;
}

void src_names_free(struct source *s)
{
	if (!s->names)
		return;
	free(s->names->buf);
	free(s->names->ring);
	free(s->names);
	s->names = NULL;
}

int src_names_on_msg(struct source *s, const struct wire_names *m)
{
	struct src_names *l = s->names;
	uint64_t cost = 0;
	const char *p;

	if (!l)
		return -EPROTO; /* not a --files-from session */
	if (l->ended)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent file names after the end of its "
				   "list: refused",
				   s->e->c->peer);
	for (p = m->names; p < m->names + m->len; p += strlen(p) + 1)
		cost += wire_name_cost(strlen(p));
	if (cost > WIRE_NAMES_WINDOW - l->used)
		return engine_fail(s->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent more file names than it was given "
				   "room for (%u bytes of them unanswered at "
				   "most): refused",
				   s->e->c->peer, WIRE_NAMES_WINDOW);
	/* Not taken: fewer bytes than their cost, so all of it fits. */
	if (m->len > WIRE_NAMES_WINDOW - l->tail) {
		memmove(l->buf, l->buf + l->head, l->tail - l->head);
		l->tail -= l->head;
		l->head = 0;
	}
	memcpy(l->buf + l->tail, m->names, m->len);
	l->tail += m->len;
	l->got += m->count;
	l->used += cost;
	l->ended = m->flags & WIRE_NAMES_END;
	return 0;
}

/*
 * The walk's index of the first entry not yet out: a FILE deferred behind
 * a pack, or a pack not yet written, or else the next to be planned.
 */
static size_t out_upto(struct source *s)
{
	for (unsigned int i = 0; s->held && i < s->fifo_len; i++) {
		const struct item *it = src_fifo_at(s, i);

		if (it->kind == IT_PACK)
			return it->job->first;
		if (it->kind == IT_FILE && it->f->deferred)
			return it->f->idx;
	}
	return s->next_file;
}

int src_names_pump(struct source *s)
{
	struct src_names *l = s->names;
	struct wire_msg m = { .type = WIRE_NAMES_ACK };
	uint64_t finished;
	size_t upto;

	if (!l || l->done == l->taken)
		goto ack;
	/* The walk may still be listing the tree of the last name taken. */
	finished = l->taken - (s->walk.depth > 0);
	upto = out_upto(s);
	while (l->done < finished) {
		const struct src_taken *t = &l->ring[l->done % l->cap];
		size_t end = l->done + 1 < l->taken
				     ? l->ring[(l->done + 1) % l->cap].first
				     : s->walk.n;

		if (end > upto)
			break;
		l->used -= t->cost;
		l->freed += t->cost;
		l->done++;
	}
ack:
	/* In batches, or at once when the walk waits for names. */
	if (!l || l->done == l->acked ||
	    (l->freed < WIRE_NAMES_WINDOW / 4 &&
	     (l->ended || l->head != l->tail)))
		return 0;
	m.u.names_ack.done = l->done;
	/* The packed slots it speaks of: none goes out while it waits. */
	m.u.names_ack.seq_end = s->tx.posted;
	l->acked = l->done;
	l->freed = 0;
	return engine_send(s->e, &m) ? 0 : 1;
}
