/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* JSON string escaping (json_esc.h). */
#include <stdio.h>

#include "util/json_esc.h"

const char *json_escape(char *out, size_t cap, const char *s, size_t *len)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = 0;

	for (; *p; p++) {
		char e[7];
		size_t el;

		if (*p == '"' || *p == '\\')
			el = (size_t)snprintf(e, sizeof(e), "\\%c", *p);
		else if (*p == '\n')
			el = (size_t)snprintf(e, sizeof(e), "\\n");
		else if (*p < 0x20)
			el = (size_t)snprintf(e, sizeof(e), "\\u%04x", *p);
		else
			e[0] = (char)*p, e[1] = '\0', el = 1;
		if (n + el >= cap)
			break;
		for (size_t i = 0; i < el; i++)
			out[n++] = e[i];
	}
	if (cap)
		out[n] = '\0';
	*len = n;
	return (const char *)p;
}
