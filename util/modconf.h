/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's modules file (--modules FILE, rdcp-modules.conf(5)):
 * rsyncd.conf's shape, a [NAME] line per module and "key = value" lines
 * beneath it, '#' and ';' comments. Parsed whole into a struct modconf,
 * every problem reported as "FILE:LINE: what" (rdcp --check lists them
 * all); a file with one problem is refused whole. Pure but for
 * modconf_load's read: what the rules mean is transfer/server/modules.c's.
 */
#ifndef RDCP_MODCONF_H
#define RDCP_MODCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/key.h"

#define MODCONF_NAME_MAX KEY_NAME_MAX /* module names: client names' rule */
#define MODCONF_LINE_MAX 4096	      /* bytes of one line */

/* An address block of hosts=: family 4 or 6, prefix bits. */
struct modconf_cidr {
	uint8_t family;
	uint8_t prefix;
	uint8_t addr[16]; /* IPv4 in the first 4 bytes */
};

/* A list of client names: "*" any client, "site-key" the site's key. */
struct modconf_names {
	char (*v)[KEY_NAME_MAX + 1];
	size_t n;
};

struct modconf_module {
	char name[MODCONF_NAME_MAX + 1];
	char *path;		    /* absolute, as written */
	struct modconf_names read;  /* who may pull from it */
	struct modconf_names write; /* who may push into it */
	struct modconf_cidr *hosts; /* from where; none: anywhere */
	size_t nhosts;
	unsigned int max_sessions; /* at once, 0: the receiver's limit */
	uint64_t quota;		   /* bytes the tree may hold, 0: no limit */
	uint64_t max_bytes; /* bytes one session may write, 0: no limit */
	bool require_encrypt;
	unsigned int line; /* of its [NAME] */
};

struct modconf {
	struct modconf_module *v;
	size_t n;
};

/*
 * Parses the len bytes of text (the file fname, for messages) into *out.
 * Each problem goes to on_err as one line "fname:LINE: what" (at most 50;
 * on_err may be NULL). Returns 0 (*out the caller's: modconf_release),
 * -EINVAL (a problem: *out empty) or -ENOMEM.
 */
int modconf_parse(const char *text, size_t len, const char *fname,
		  struct modconf *out,
		  void (*on_err)(void *arg, const char *line), void *arg)
	__attribute__((warn_unused_result));

/*
 * Reads path (a regular file, at most 1 MiB) and parses it as above;
 * a file that cannot be read is one problem too. Same returns, or the
 * read's -errno.
 */
int modconf_load(const char *path, struct modconf *out,
		 void (*on_err)(void *arg, const char *line), void *arg)
	__attribute__((warn_unused_result));

void modconf_release(struct modconf *c);

/* The module called name, or NULL. */
const struct modconf_module *modconf_find(const struct modconf *c,
					  const char *name);

/* Whether client is on the list (by name, or "*": any). */
bool modconf_names_has(const struct modconf_names *l, const char *client);

/*
 * Whether the peer's address (text: IPv4, IPv6, an IPv4-mapped IPv6)
 * is in one of m's hosts= blocks; true when m has none.
 */
bool modconf_host_allowed(const struct modconf_module *m, const char *addr);

/* Parses "ADDR/BITS" or a bare address (all bits) into *c. 0 or -EINVAL. */
int modconf_parse_cidr(const char *s, struct modconf_cidr *c);

#endif
