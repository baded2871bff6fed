/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* --include/--exclude(-from) rules into a filter (rules.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/rules.h"

int rules_add(struct filter *f, bool include, const char *text)
{
	int rc = filter_add(f, include, text);

	if (rc == -EINVAL)
		fprintf(stderr, "rdcp: --%s: '%s' has no pattern\n",
			include ? "include" : "exclude", text);
	else if (rc == -ENAMETOOLONG)
		fprintf(stderr,
			"rdcp: --%s: '%.40s...' is longer than %u bytes\n",
			include ? "include" : "exclude", text,
			FILTER_PATTERN_MAX);
	return rc;
}

int rules_read(struct filter *f, bool include, const char *file, bool from0)
{
	FILE *in = strcmp(file, "-") ? fopen(file, "re") : stdin;
	int sep = from0 ? '\0' : '\n';
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (!in) {
		rc = -errno;
		fprintf(stderr, "rdcp: cannot open '%s': %s\n", file,
			strerror(-rc));
		return rc;
	}
	while (!rc && (n = getdelim(&line, &cap, sep, in)) >= 0) {
		if (n && line[n - 1] == sep)
			line[--n] = '\0';
		if (!from0 && n && line[n - 1] == '\r')
			line[--n] = '\0';
		if (!n || line[0] == '#' || line[0] == ';')
			continue;
		rc = rules_add(f, include, line);
	}
	if (!rc && ferror(in)) {
		rc = -EIO;
		fprintf(stderr, "rdcp: cannot read '%s'\n", file);
	}
	free(line);
	if (in != stdin)
		fclose(in);
	return rc;
}
