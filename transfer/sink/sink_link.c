/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * -H on the sink: a HARDLINK names a regular file the source sent before
 * with the LINKED flag, by its path beneath DEST. The sink remembers the
 * LINKED files' places (only those) and what became of each; a link
 * waits, in flight like a regular file and keeping its directory
 * unfinished, until its file is verified and under its final name (or
 * kept), then is made with linkat() beside it from the file's place
 * opened beneath DEST without crossing a symlink, and never to anything
 * but a regular file. A link to a file that failed fails with it (its
 * own FILE_RESULT says why); one to a name never sent LINKED, or outside
 * DEST, ends the session (exit 5). Engine thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/log.h"
#include "util/path.h"

/* A LINKED file's place beneath the target's dirfd (snk_names.rel). */
struct snk_tgt {
	struct snk_tgt *next;
	uint8_t state; /* enum sink_tgt_state */
	char rel[];
};

struct snk_links {
	struct snk_tgt **tab;
	size_t cap, n; /* cap a power of two */
};

static size_t hash(const struct snk_links *m, const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 32)) & (m->cap - 1);
}

static struct snk_tgt *find(const struct snk_links *m, const char *rel)
{
	struct snk_tgt *t;

	if (!m || !m->cap)
		return NULL;
	for (t = m->tab[hash(m, rel)]; t; t = t->next)
		if (!strcmp(t->rel, rel))
			return t;
	return NULL;
}

static int grow(struct snk_links *m)
{
	size_t cap = m->cap ? 2 * m->cap : 256;
	struct snk_tgt **tab = calloc(cap, sizeof(*tab)), *t, *next;
	struct snk_links b = { .tab = tab, .cap = cap, .n = m->n };

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		for (t = m->tab[i]; t; t = next) {
			size_t h = hash(&b, t->rel);

			next = t->next;
			t->next = tab[h];
			tab[h] = t;
		}
	}
	free(m->tab);
	*m = b;
	return 0;
}

bool sink_links_asked(const struct sink *k)
{
	return k->p->flags & WIRE_HELLO_HARD_LINKS;
}

int sink_link_noted(struct sink *k, struct snk_file *f)
{
	struct snk_links *m = k->links;
	struct snk_tgt *t;
	size_t len;

	if (!sink_links_asked(k))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a file with links, which -H did "
				   "not ask for: refused",
				   k->e->c->peer);
	if (!m) {
		m = k->links = calloc(1, sizeof(*m));
		if (!m)
			goto nomem;
	}
	t = find(m, f->n.rel);
	if (t) { /* sent again: its links wait for this one */
		t->state = SINK_TGT_PENDING;
		f->settle = &t->state;
		return 0;
	}
	if (2 * (m->n + 1) > m->cap && grow(m))
		goto nomem;
	len = strlen(f->n.rel);
	t = malloc(sizeof(*t) + len + 1);
	if (!t)
		goto nomem;
	memcpy(t->rel, f->n.rel, len + 1);
	t->state = SINK_TGT_PENDING;
	f->settle = &t->state; /* a node never moves: the table's links do */
	t->next = m->tab[hash(m, t->rel)];
	m->tab[hash(m, t->rel)] = t;
	m->n++;
	return 0;
nomem:
	return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM, "out of memory");
}

int sink_link_check(struct sink *k, struct snk_file *f, const char *target)
{
	struct snk_names tn;
	struct snk_tgt *t;

	if (!sink_links_asked(k) || !f->id)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a hard link%s: refused",
				   k->e->c->peer,
				   f->id ? ", which -H did not ask for"
					 : " as its first entry");
	if (sink_map_names(k, f->id, target, &tn))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPERM,
				   "%s sent a hard link to a name that is not "
				   "a path beneath DEST: refused",
				   k->e->c->peer);
	t = find(k->links, tn.rel);
	if (!t)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s linked '%s' to '%s', which it did not "
				   "send before as a file with links: refused",
				   k->e->c->peer, f->n.shown, tn.shown);
	f->target = strdup(tn.rel);
	if (!f->target)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	return 0;
}

/*
 * The regular file at rel (beneath DEST, no symlink crossed, never a
 * symlink itself): its directory in *pfd (the target's dirfd or one to
 * close), its name in *leaf (in buf), its stat in *st. 0 or -errno, *what
 * the step that failed.
 */
static int find_file(const struct sink *k, const char *rel, char *buf,
		     size_t bufsz, int *pfd, const char **leaf, struct stat *st,
		     const char **what)
{
	const char *slash = strrchr(rel, '/');

	*what = "find the file to link to";
	*pfd = k->t->dirfd;
	*leaf = rel;
	if (slash) {
		snprintf(buf, bufsz, "%.*s", (int)(slash - rel), rel);
		*leaf = slash + 1;
		*pfd = path_open_beneath(k->t->dirfd, buf, O_PATH | O_DIRECTORY,
					 0);
		if (*pfd < 0)
			return *pfd;
	}
	if (fstatat(*pfd, *leaf, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st->st_mode)) {
		*what = "link to something that is not a regular file at";
		return -EINVAL;
	}
	return 0;
}

static void put_dir(const struct sink *k, int pfd)
{
	if (pfd >= 0 && pfd != k->t->dirfd)
		close(pfd);
}

bool sink_link_same(struct sink *k, const struct snk_file *f)
{
	char buf[sizeof(((struct snk_names *)0)->rel)];
	const char *leaf, *what;
	struct stat tst, st;
	int pfd = -1;
	bool same;

	if (!f->target || f->dirfd < 0 || k->t->dirfd < 0 ||
	    find_file(k, f->target, buf, sizeof(buf), &pfd, &leaf, &tst,
		      &what)) {
		put_dir(k, pfd);
		return false;
	}
	same = fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_dev == tst.st_dev && st.st_ino == tst.st_ino;
	put_dir(k, pfd);
	return same;
}

/*
 * f's name made another name of the regular file at rel (find_file).
 * *same: the name was that file already. 0 or -errno, *what the step.
 */
static int link_to(struct sink *k, struct snk_file *f, const char *rel,
		   bool *same, const char **what)
{
	char buf[sizeof(((struct snk_names *)0)->rel)];
	const char *leaf;
	struct stat tst, st;
	int pfd = -1, rc;

	*same = false;
	rc = find_file(k, rel, buf, sizeof(buf), &pfd, &leaf, &tst, what);
	if (rc)
		goto out;
	if (fstatat(f->dirfd, f->n.name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (st.st_dev == tst.st_dev && st.st_ino == tst.st_ino) {
			*same = true;
			goto out;
		}
		if (k->p->flags & WIRE_HELLO_NO_CLOBBER) {
			f->skipped = true;
			goto out;
		}
		/* beside it, then over it: the name is never missing */
		*what = "link";
		(void)unlinkat(f->dirfd, f->n.tmp, 0);
		if (linkat(pfd, leaf, f->dirfd, f->n.tmp, 0) < 0) {
			rc = -errno;
			goto out;
		}
		*what = "rename the new link onto";
		if (renameat(f->dirfd, f->n.tmp, f->dirfd, f->n.name) < 0) {
			rc = -errno;
			(void)unlinkat(f->dirfd, f->n.tmp, 0);
		}
		goto out;
	}
	*what = "link";
	if (linkat(pfd, leaf, f->dirfd, f->n.name, 0) < 0)
		rc = -errno;
out:
	put_dir(k, pfd);
	return rc;
}

/* Waiting link f's file is settled: f made (or failed) and answered. */
static int make(struct sink *k, struct snk_file *f, uint8_t state)
{
	bool same;
	const char *what;
	int rc;

	f->waiting = false;
	if (f->err)
		return sink_send_result(k, f, NULL, 0);
	if (state == SINK_TGT_FAILED) {
		file_fail(f, -ENOENT,
			  "'%s' not linked: the file it is a name of was not "
			  "copied",
			  f->n.shown);
		return sink_send_result(k, f, NULL, 0);
	}
	rc = link_to(k, f, f->target, &same, &what);
	if (rc)
		file_fail(f, rc, "cannot %s '%s': %s", what, f->n.shown,
			  strerror(-rc));
	/* right already: kept where a skip was asked for (-n, -u, --sync) */
	if (!rc && same &&
	    ((k->p->flags & (WIRE_HELLO_NO_CLOBBER | WIRE_HELLO_UPDATE)) ||
	     k->p->sync != WIRE_SYNC_NONE)) {
		f->skipped = true;
		return sink_send_kept(k, f);
	}
	return sink_send_result(k, f, NULL, 0);
}

int sink_link_start(struct sink *k, struct snk_file *f)
{
	struct snk_tgt *t = find(k->links, f->target);

	if (!t || f->err) /* t: sink_link_check found it */
		return make(k, f, SINK_TGT_FAILED);
	if (t->state == SINK_TGT_PENDING) {
		f->waiting = true; /* until sink_links_pump */
		return 0;
	}
	return make(k, f, t->state);
}

int sink_links_pump(struct sink *k)
{
	int n = 0;

	if (!k->links_due)
		return 0;
	k->links_due = false;
	for (unsigned int i = 0; i < k->nlive;) {
		struct snk_file *f = k->live[i];
		struct snk_tgt *t;

		if (!f->waiting || !(t = find(k->links, f->target)) ||
		    t->state == SINK_TGT_PENDING) {
			i++;
			continue;
		}
		/* answered: f leaves live, the next one takes its place */
		if (make(k, f, t->state))
			return -1;
		n++;
	}
	return n;
}

void sink_links_free(struct sink *k)
{
	struct snk_links *m = k->links;
	struct snk_tgt *t, *next;

	if (!m)
		return;
	for (size_t i = 0; i < m->cap; i++)
		for (t = m->tab[i]; t; t = next) {
			next = t->next;
			free(t);
		}
	free(m->tab);
	free(m);
	k->links = NULL;
}
