/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Human units. Sizes parse as a decimal number with an optional fraction
 * and an optional suffix: K/M/G/T or KiB..TiB (powers of 1024, any case),
 * KB..TB (powers of 1000), B (bytes); fractions round down to whole bytes.
 * Sizes print 1024-based ("4.00 MiB"), rates SI ("29.3 MB/s").
 */
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Multiplier for a size suffix, or 0 if it is not one. */
static uint64_t units_mult(const char *s)
{
	static const char pfx[] = "kmgt";
	const char *c = *s ? strchr(pfx, tolower((unsigned char)*s)) : NULL;
	uint64_t bin = 1, si = 1;

	if (!*s || !strcasecmp(s, "b"))
		return 1;
	if (!c)
		return 0;
	for (const char *q = pfx; q <= c; q++) {
		bin *= 1024;
		si *= 1000;
	}
	s++;
	if (!*s || !strcasecmp(s, "ib"))
		return bin;
	if (!strcasecmp(s, "b"))
		return si;
	return 0;
}

int units_parse_size(const char *s, uint64_t *out)
{
	const char *ip = s, *fp = NULL, *p = s;
	uint64_t mult, v = 0, frac = 0;

	while (isdigit((unsigned char)*p))
		p++;
	if (p == ip)
		return -EINVAL;
	if (*p == '.') {
		fp = ++p;
		while (isdigit((unsigned char)*p))
			p++;
		if (p == fp)
			return -EINVAL;
	}
	mult = units_mult(p);
	if (!mult)
		return -EINVAL;

	for (; isdigit((unsigned char)*ip); ip++) {
		unsigned int d = (unsigned int)(*ip - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	v *= mult;

	/*
	 * floor(mult * 0.d1..dn) exactly, from the last digit backwards:
	 * floor((d * mult + floor(x)) / 10) == floor((d * mult + x) / 10).
	 */
	for (const char *q = fp ? p - 1 : NULL; q && q >= fp; q--)
		frac = ((uint64_t)(*q - '0') * mult + frac) / 10;
	if (frac > UINT64_MAX - v)
		return -ERANGE;
	*out = v + frac;
	return 0;
}

char *units_format_size(uint64_t bytes, char *buf, size_t bufsz)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes / 1024;
	size_t i = 0;

	if (bytes < 1024) {
		snprintf(buf, bufsz, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	/* promote where "%.2f" would round up to 1024.00 */
	while (v >= 1023.995 && i < sizeof(unit) / sizeof(unit[0]) - 1) {
		v /= 1024;
		i++;
	}
	snprintf(buf, bufsz, "%.2f %s", v, unit[i]);
	return buf;
}

char *units_format_rate(double bytes_per_s, char *buf, size_t bufsz)
{
	static const char *const unit[] = { "B/s", "kB/s", "MB/s", "GB/s",
					    "TB/s" };
	double v = bytes_per_s > 0 ? bytes_per_s : 0; /* NaN too */
	size_t i = 0;

	/* promote where "%.1f" would round up to 1000.0 */
	while (v >= 999.95 && i < sizeof(unit) / sizeof(unit[0]) - 1) {
		v /= 1000;
		i++;
	}
	snprintf(buf, bufsz, "%.1f %s", v, unit[i]);
	return buf;
}
