/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * JSON string escaping, shared by --json (cmd/json_out.c) and the
 * receiver's audit log (transfer/server/audit_log.c): quote, backslash and
 * control characters escaped as JSON requires; other bytes, such as the
 * UTF-8 of a file name, pass through unchanged.
 */
#ifndef RDCP_JSON_ESC_H
#define RDCP_JSON_ESC_H

#include <stddef.h>

/*
 * Escapes as much of s as fits in out (cap bytes with its NUL, at least 7:
 * the longest escape and the NUL), cut at a whole escape, with no quotes
 * around it; *len gets the length written. Returns where s was left: its
 * NUL when all of it went.
 */
const char *json_escape(char *out, size_t cap, const char *s, size_t *len);

#endif
