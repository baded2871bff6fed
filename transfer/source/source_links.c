/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -H on the source: the regular files with more than one name, by
 * (st_dev, st_ino), within one session. The first name sent is the file
 * (FILE with the LINKED flag); each later one becomes a HARDLINK naming
 * the first's wire path. The map holds only files with st_nlink > 1, and
 * each only until as many names as its link count were seen: a tree whose
 * links all lie inside it ends with an empty map. Engine thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "transfer/source/source_int.h"

struct src_link {
	dev_t dev;
	ino_t ino;
	nlink_t left; /* names still to come at most; 0: a free entry */
	char *name;   /* the first name's wire path */
};

static size_t slot_of(const struct src_links *m, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)ino * 0xc2b2ae3d27d4eb4full);

	return (size_t)(h ^ (h >> 29)) & (m->cap - 1);
}

static struct src_link *find(const struct src_links *m, dev_t dev, ino_t ino)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = slot_of(m, dev, ino); m->v[i].left; i = (i + 1) & (m->cap - 1))
		if (m->v[i].dev == dev && m->v[i].ino == ino)
			return &m->v[i];
	return NULL;
}

/* Removes entry e, shifting back the run after it (linear probing). */
static void drop(struct src_links *m, struct src_link *e)
{
	size_t i = (size_t)(e - m->v), j = i, k;

	free(e->name);
	for (;;) {
		m->v[i].left = 0;
		do {
			j = (j + 1) & (m->cap - 1);
			if (!m->v[j].left) {
				m->n--;
				return;
			}
			k = slot_of(m, m->v[j].dev, m->v[j].ino);
		} while (i <= j ? (i < k && k <= j) : (i < k || k <= j));
		m->v[i] = m->v[j];
		i = j;
	}
}

static int grow(struct src_links *m)
{
	struct src_links b = { .cap = m->cap ? 2 * m->cap : 64 };

	b.v = calloc(b.cap, sizeof(*b.v));
	if (!b.v)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->v[i].left)
			continue;
		for (j = slot_of(&b, m->v[i].dev, m->v[i].ino); b.v[j].left;
		     j = (j + 1) & (b.cap - 1))
			;
		b.v[j] = m->v[i];
	}
	b.n = m->n;
	free(m->v);
	*m = b;
	return 0;
}

bool src_links_asked(const struct source *s)
{
	return s->cfg->p.flags & WIRE_HELLO_HARD_LINKS;
}

bool src_links_may(const struct source *s, const struct src_file *f)
{
	const struct walk_entry *w = f->w;

	return src_links_asked(s) && !w->err && w->kind == WIRE_KIND_FILE &&
	       !w->range && w->st.st_nlink > 1;
}

int src_links_find(struct source *s, struct src_file *f)
{
	struct src_link *e;

	if (!src_links_may(s, f))
		return 0;
	e = find(&s->links, f->w->st.st_dev, f->w->st.st_ino);
	if (!e)
		return 0;
	f->w->link = strdup(e->name);
	if (!f->w->link)
		return -ENOMEM;
	f->w->kind = WIRE_KIND_HARDLINK;
	/* its bytes cross once, with its first name: progress's total */
	s->walk.bytes -= (uint64_t)f->w->st.st_size;
	if (s->walk.done)
		s->bytes_total = s->walk.bytes;
	if (--e->left == 0)
		drop(&s->links, e);
	return 1;
}

int src_links_add(struct source *s, struct src_file *f)
{
	struct src_links *m = &s->links;
	const struct stat *st = &f->w->st;
	size_t i;
	char *name;

	if (!src_links_may(s, f))
		return 0;
	if (2 * (m->n + 1) > m->cap && grow(m))
		return -ENOMEM;
	name = strdup(f->w->wire);
	if (!name)
		return -ENOMEM;
	for (i = slot_of(m, st->st_dev, st->st_ino); m->v[i].left;
	     i = (i + 1) & (m->cap - 1))
		;
	m->v[i].dev = st->st_dev;
	m->v[i].ino = st->st_ino;
	m->v[i].left = st->st_nlink - 1;
	m->v[i].name = name;
	m->n++;
	f->linked = true;
	return 0;
}

void src_links_free(struct source *s)
{
	for (size_t i = 0; i < s->links.cap; i++)
		if (s->links.v[i].left)
			free(s->links.v[i].name);
	free(s->links.v);
	memset(&s->links, 0, sizeof(s->links));
}
