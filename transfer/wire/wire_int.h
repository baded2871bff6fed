/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to wire.c and wire_fields.c: the decoders of the variable-length
 * fields that wire.c's message decoder calls. Each reads its field at r's
 * cursor into the message and sets r->err on anything malformed (a count
 * that does not match the bytes, a name too long or empty, a length past
 * its bound); it never reads past r's end.
 */
#ifndef RDCP_WIRE_INT_H
#define RDCP_WIRE_INT_H

#include "transfer/wire/wire.h"
#include "util/be_codec.h"

/* XATTRS: file id, count, len and the entries filling len exactly. */
void wire_dec_xattrs(struct be_get *r, struct wire_xattrs *x);
/* HELLO's npaths, paths_len and the NUL-terminated paths. */
void wire_dec_paths(struct be_get *r, struct wire_hello *h);
/* HELLO's nfilters, filters_len and the '+'/'-' rules. */
void wire_dec_filters(struct be_get *r, struct wire_hello *h);
/* NAMES: flags, count, len and the names; none only with END. */
void wire_dec_names(struct be_get *r, struct wire_names *n);

#endif
