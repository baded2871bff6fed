/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What a pull asked for. The client names its SRCs; an honest receiver
 * sends, for each, one top entry named after the SRC's last component (as
 * its walk names it, walk.c) and, with -r and only beneath a directory,
 * that directory's tree. Nothing else. A receiver holds the key but is not
 * trusted with the user's home: a name nobody asked for (.bashrc,
 * .ssh/authorized_keys), a tree or a symlink where a file was asked for,
 * or a name sent more often than it was asked for, is a protocol
 * violation, refused before anything of it touches the disk (the scp
 * CVE-2019-6111 class).
 *
 * The rules an honest walk follows, and so the only ones accepted:
 * - a top entry (no '/') is one of the names asked for, at most as often
 *   as it was asked for, and a regular file (a SRC that cannot be sent is
 *   announced as a failed file) or, with -r, a directory: a symlink as a
 *   SRC is never sent, beneath the receiver's root nothing is followed;
 * - an entry beneath a top name needs -r and that name announced as a
 *   directory earlier in the session.
 *
 * Checked in the engine thread for FILE and in a worker for packed
 * records: the counts and the directories' ids are atomics, and each
 * directory's id is written once, so a check never depends on the race.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/sink/sink_int.h"
#include "util/path.h"

struct snk_want {
	char name[PATH_NAME_MAX + 1];
	unsigned int asked;	 /* times the client named it */
	atomic_uint seen;	 /* top entries announced with this name */
	_Atomic uint32_t dir_id; /* first id announced as a directory */
};

static int cmp_want(const void *a, const void *b)
{
	return strcmp(((const struct snk_want *)a)->name,
		      ((const struct snk_want *)b)->name);
}

/*
 * The name an honest receiver's walk gives SRC src: the receiver drops
 * "." and empty components and a leading '/' (path_normalize_peer), its
 * walk then takes the last component. Returns false for a SRC it refuses
 * (nothing left, "..").
 */
static bool top_name_of(const char *src, char *out, size_t outsz)
{
	char buf[PATH_PEER_MAX + 1];
	const char *base;
	size_t len = strlen(src);
	bool dir;

	if (len > PATH_PEER_MAX)
		return false;
	memcpy(buf, src, len + 1);
	path_normalize_peer(buf, &dir);
	len = strlen(buf);
	if (!len || path_check_relative(buf, len, false))
		return false;
	base = path_basename(buf);
	if (strlen(base) >= outsz)
		return false;
	strcpy(out, base);
	return true;
}

int sink_want_init(struct sink *k)
{
	const struct sink_target *t = k->t;
	size_t n = 0;

	if (!t->want)
		return 0;
	k->want = calloc(t->nwant ? t->nwant : 1, sizeof(*k->want));
	if (!k->want)
		return -ENOMEM;
	for (size_t i = 0; i < t->nwant; i++)
		if (top_name_of(t->want[i], k->want[n].name,
				sizeof(k->want[n].name)))
			n++;
	qsort(k->want, n, sizeof(*k->want), cmp_want);
	k->nwant = 0;
	for (size_t i = 0; i < n; i++) {
		struct snk_want *w = &k->want[k->nwant];

		if (k->nwant && !strcmp(w[-1].name, k->want[i].name)) {
			w[-1].asked++;
			continue;
		}
		if (w != &k->want[i])
			memcpy(w->name, k->want[i].name, sizeof(w->name));
		w->asked = 1;
		atomic_init(&w->seen, 0);
		atomic_init(&w->dir_id, UINT32_MAX);
		k->nwant++;
	}
	k->want_check = true;
	return 0;
}

void sink_want_free(struct sink *k)
{
	free(k->want);
	k->want = NULL;
	k->nwant = 0;
}

/* The name asked for that path's first component (len bytes) is, or NULL. */
static struct snk_want *find(const struct sink *k, const char *path, size_t len)
{
	size_t lo = 0, hi = k->nwant;

	if (len > PATH_NAME_MAX)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct snk_want *w = &k->want[mid];
		int c = strncmp(path, w->name, len);

		if (!c && w->name[len])
			c = -1; /* path's component is a prefix of the name */
		if (!c)
			return w;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const char *sink_want_check(struct sink *k, uint32_t id, uint8_t kind,
			    const char *path, uint64_t *list_pos)
{
	const char *slash = strchr(path, '/');
	size_t first = slash ? (size_t)(slash - path) : strlen(path);
	bool recursive = k->p->flags & WIRE_HELLO_RECURSIVE;
	struct snk_want *w;
	uint32_t dir_id;

	if (k->list)
		return sink_list_check(k, list_pos, kind, path);
	if (!k->want_check)
		return NULL;
	w = find(k, path, first);
	if (!w)
		return "which the pull did not ask for";
	if (slash) {
		if (!recursive)
			return "beneath a name, without -r";
		dir_id = atomic_load_explicit(&w->dir_id, memory_order_relaxed);
		return dir_id < id ? NULL
				   : "beneath a name it did not send as a "
				     "directory";
	}
	if (kind == WIRE_KIND_SYMLINK)
		return "a symlink where a file or directory was asked for";
	if (kind == WIRE_KIND_DIR && !recursive)
		return "a directory, without -r";
	if (atomic_fetch_add_explicit(&w->seen, 1, memory_order_relaxed) >=
	    w->asked)
		return "more often than the pull asked for it";
	if (kind == WIRE_KIND_DIR) {
		dir_id = UINT32_MAX;
		atomic_compare_exchange_strong_explicit(&w->dir_id, &dir_id, id,
							memory_order_relaxed,
							memory_order_relaxed);
	}
	return NULL;
}

int sink_want_refuse(struct sink *k, const char *path, const char *why)
{
	return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
			   "%s sent '%s', %s: refused", k->e->c->peer, path,
			   why);
}
