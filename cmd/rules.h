/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --include/--exclude rules from the command line and from files
 * (--include-from/--exclude-from), added to a util/filter.h filter with
 * a message on stderr for the ones it refuses.
 */
#ifndef RDCP_RULES_H
#define RDCP_RULES_H

#include <stdbool.h>

#include "util/filter.h"

/* Adds one rule. 0, or -errno said on stderr (-EINVAL, -ENAMETOOLONG). */
int rules_add(struct filter *f, bool include, const char *text)
	__attribute__((warn_unused_result));

/*
 * Reads rules from file ("-": stdin) into f, one per line (NUL-separated
 * with from0), as rsync reads --exclude-from: blank lines and lines that
 * begin with '#' or ';' are skipped, a CR before the newline dropped. 0,
 * or -errno said on stderr: -EINVAL/-ENAMETOOLONG for a rule, others for
 * the file.
 */
int rules_read(struct filter *f, bool include, const char *file, bool from0)
	__attribute__((warn_unused_result));

#endif
