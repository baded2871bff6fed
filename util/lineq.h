/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A stream's records (names, one per separator) read ahead by a thread of
 * their own and taken without ever blocking: for a --files-from list from
 * a pipe, a terminal or a socket, whose writer (`find` on a slow file
 * system) may stay silent for longer than a session may go unanswered. An
 * engine thread asks for the next record and, when none has come yet,
 * looks again after it served its connection.
 *
 * The reader holds at most LINEQ_MAX bytes it was not asked for, so a fast
 * writer is paced by the taker; a record longer than that is an error
 * (-ENAMETOOLONG), never cut in two. The last record needs no separator.
 */
#ifndef RDCP_LINEQ_H
#define RDCP_LINEQ_H

#include <stdbool.h>
#include <stddef.h>

#define LINEQ_MAX (1u << 20)

struct lineq;

/*
 * Whether a list on fd is worth a reader of its own: a stream that can
 * stay silent (pipe, terminal, socket) and blocks (an O_NONBLOCK one is
 * already read without blocking). A regular file always has its bytes.
 */
bool lineq_wanted(int fd);

/*
 * Starts a reader of fd (not taken over: the caller closes it after
 * lineq_stop) splitting at sep. 0 with *out set, or -errno.
 */
int lineq_start(struct lineq **out, int fd, char sep);

/*
 * The next record: 1 with *rec (NUL-terminated, *len bytes without the
 * separator, valid until the next call), 0 when none has come yet, -1 at
 * the stream's end, or -errno when it could not be read (-ENAMETOOLONG: a
 * record over LINEQ_MAX bytes).
 */
int lineq_next(struct lineq *q, const char **rec, size_t *len);

/* Stops the reader (even one waiting on a silent writer) and frees q. */
void lineq_stop(struct lineq *q);

#endif
