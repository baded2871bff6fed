/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * File helpers the session tests share (test_engine over the in-memory
 * transport, test_tcp over loopback, test_list and test_trust):
 * reproducible random files, byte comparison, tree removal, open-fd
 * counting for leak checks, what lies beneath a directory, small text
 * files (test_access, test_config).
 */
#ifndef RDCP_TESTFS_H
#define RDCP_TESTFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Open file descriptors of this process (for leak checks). */
int tf_count_fds(void);
/* rm -rf dir; 0, or -1 if anything is left. */
int tf_rm_tree(const char *dir);
/* xorshift64*: the next value of a reproducible sequence. */
uint64_t tf_rng_next(uint64_t *s);
/* Writes size pseudo-random bytes (from seed) to path; 0 or -1. */
int tf_make_file(const char *path, size_t size, uint64_t seed);
/* 1: same bytes, 0: different, -1: one of them cannot be read. */
int tf_same_file(const char *a, const char *b);
/* Whether dir/rel exists (not following a last symlink). */
bool tf_exists_in(const char *dir, const char *rel);
/* Whether a/ra and b/rb hold the same bytes. */
bool tf_same_in(const char *a, const char *ra, const char *b, const char *rb);
/* Writes text to path (created or emptied) with mode (chmod'ed); 0 or -1. */
int tf_write_text(const char *path, const char *text, unsigned int mode);
/* Entries beneath dir whose name contains what ("": all, hidden too). */
int tf_count_named(const char *dir, const char *what);

#endif
