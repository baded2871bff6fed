/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's parent cache (sink_int.h): the directory the last FILE went
 * into, its O_PATH fd kept with a reference per file that uses it, until
 * the walk leaves or enters a directory (sink_dir.c forgets it then). It
 * names the directory itself, not its path: a symlink or another
 * directory put in its place later is never followed, and nothing lands
 * anywhere the checked open (sink_names.c: RESOLVE_BENEATH, no symlinks)
 * did not reach. A leaf: it calls nothing else of the sink.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/sink/sink_int.h"

struct snk_parent {
	int fd;		   /* O_PATH | O_DIRECTORY, beneath the target */
	unsigned int refs; /* the cache's own and each file's */
	size_t len;	   /* of rel */
	char rel[];	   /* the directory's path beneath the target */
};

bool sink_parent_cached(const struct sink *k, const char *rel, size_t len)
{
	const struct snk_parent *p = k->parent;

	return p && p->len == len && !memcmp(p->rel, rel, len);
}

int sink_parent_cache(struct sink *k, int fd, const char *rel, size_t len)
{
	struct snk_parent *p = malloc(sizeof(*p) + len + 1);

	if (!p) {
		close(fd);
		return -ENOMEM;
	}
	sink_parent_forget(k);
	p->fd = fd;
	p->refs = 1;
	p->len = len;
	memcpy(p->rel, rel, len);
	p->rel[len] = '\0';
	k->parent = p;
	return fd;
}

int sink_parent_get(struct sink *k, struct snk_parent **ref)
{
	k->parent->refs++;
	*ref = k->parent;
	return k->parent->fd;
}

void sink_parent_put(struct snk_parent *p)
{
	if (p && !--p->refs) {
		close(p->fd);
		free(p);
	}
}

void sink_parent_forget(struct sink *k)
{
	sink_parent_put(k->parent);
	k->parent = NULL;
}
