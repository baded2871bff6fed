/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The bootstrap line (boot.h): written by an rdcp --server started over
 * ssh, read by the rdcp that started it. Text, so that a human reading
 * the ssh channel can tell what it is; the secret in it is as sensitive as
 * a key file and travels only inside ssh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/wire/boot.h"

static size_t put_list(char *p, size_t left, const char *name,
		       char (*addrs)[CM_ADDRSTR_LEN], int n)
{
	size_t used = (size_t)snprintf(p, left, " %s=", name);

	if (used >= left)
		return left;
	if (!n)
		used += (size_t)snprintf(p + used, left - used, "-");
	for (int i = 0; i < n && used < left; i++)
		used += (size_t)snprintf(p + used, left - used, "%s%s",
					 i ? "," : "", addrs[i]);
	return used < left ? used : left;
}

void boot_format(const struct boot *b, char *line)
{
	size_t left = BOOT_LINE_MAX, used;
	struct boot c = *b; /* put_list's arrays are not const */

	used = (size_t)snprintf(line, left, "%s %u %s port=%u listen=%s%s%s",
				BOOT_TAG, b->proto, b->version, b->port,
				b->rdma ? "rdma" : "",
				b->rdma && b->tcp ? "," : "",
				b->tcp ? "tcp" : "");
	used += (size_t)snprintf(line + used, left - used, " via=%s",
				 b->via[0] ? b->via : "-");
	used += put_list(line + used, left - used, "rdma", c.rdma_addrs,
			 c.nrdma);
	used += put_list(line + used, left - used, "tcp", c.tcp_addrs,
			 c.ntcp);
	used += (size_t)snprintf(line + used, left - used, " key=");
	for (int i = 0; i < KEY_LEN && used + 3 < left; i++)
		used += (size_t)snprintf(line + used, left - used, "%02x",
					 b->key[i]);
	snprintf(line + used, left - used, "\n");
}

bool boot_is_line(const char *line)
{
	size_t n = strlen(BOOT_TAG);

	return !strncmp(line, BOOT_TAG, n) && line[n] == ' ';
}

/* "a,b,c" (or "-") into addrs; -EINVAL on an address too long or too many. */
static int get_list(const char *v, size_t len, char (*addrs)[CM_ADDRSTR_LEN],
		    int *n)
{
	*n = 0;
	if (len == 1 && v[0] == '-')
		return 0;
	while (len) {
		const char *comma = memchr(v, ',', len);
		size_t one = comma ? (size_t)(comma - v) : len;

		if (!one || one >= CM_ADDRSTR_LEN || *n >= BOOT_ADDRS)
			return -EINVAL;
		memcpy(addrs[*n], v, one);
		addrs[(*n)++][one] = '\0';
		v += one + (comma ? 1 : 0);
		len -= one + (comma ? 1 : 0);
	}
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
				      : -1;
}

static int get_key(const char *v, size_t len, uint8_t key[KEY_LEN])
{
	if (len != 2 * KEY_LEN)
		return -EINVAL;
	for (int i = 0; i < KEY_LEN; i++) {
		int hi = hexval(v[2 * i]), lo = hexval(v[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* One "name=value" field into b; unknown names are skipped. */
static int get_field(const char *f, size_t len, struct boot *b, bool *have_key,
		     bool *have_port)
{
	const char *eq = memchr(f, '=', len);
	size_t nlen, vlen;
	const char *v;

	if (!eq)
		return 0;
	nlen = (size_t)(eq - f);
	v = eq + 1;
	vlen = len - nlen - 1;
#define IS(name) (nlen == strlen(name) && !strncmp(f, name, nlen))
	if (IS("port")) {
		char num[8];
		unsigned long p;
		char *end;

		if (!vlen || vlen >= sizeof(num))
			return -EINVAL;
		memcpy(num, v, vlen);
		num[vlen] = '\0';
		p = strtoul(num, &end, 10);
		if (*end || !p || p > 65535)
			return -EINVAL;
		b->port = (uint16_t)p;
		*have_port = true;
	} else if (IS("listen")) {
		b->rdma = vlen >= 4 && !strncmp(v, "rdma", 4);
		b->tcp = (vlen >= 3 && !strncmp(v + vlen - 3, "tcp", 3));
	} else if (IS("via")) {
		if (vlen >= CM_ADDRSTR_LEN)
			return -EINVAL;
		snprintf(b->via, sizeof(b->via), "%.*s",
			 vlen == 1 && v[0] == '-' ? 0 : (int)vlen, v);
	} else if (IS("rdma")) {
		return get_list(v, vlen, b->rdma_addrs, &b->nrdma);
	} else if (IS("tcp")) {
		return get_list(v, vlen, b->tcp_addrs, &b->ntcp);
	} else if (IS("key")) {
		*have_key = true;
		return get_key(v, vlen, b->key);
	}
#undef IS
	return 0;
}

int boot_parse(const char *line, struct boot *b, char *why, size_t whysz)
{
	bool have_key = false, have_port = false;
	const char *p = line + strlen(BOOT_TAG);
	char *end;
	size_t n;

	memset(b, 0, sizeof(*b));
	if (!boot_is_line(line)) {
		snprintf(why, whysz, "no %s line", BOOT_TAG);
		return -EINVAL;
	}
	b->proto = (unsigned int)strtoul(p + 1, &end, 10);
	if (end == p + 1 || *end != ' ') {
		snprintf(why, whysz, "no protocol version");
		return -EINVAL;
	}
	p = end + 1;
	n = strcspn(p, " \n");
	snprintf(b->version, sizeof(b->version), "%.*s", (int)n, p);
	p += n;
	while (*p == ' ') {
		p++;
		n = strcspn(p, " \n");
		if (get_field(p, n, b, &have_key, &have_port)) {
			/* Its name only: the value may be the key. */
			size_t name = strcspn(p, "= \n");

			snprintf(why, whysz, "malformed field '%.*s'",
				 name > 40 ? 40 : (int)name, p);
			return -EINVAL;
		}
		p += n;
	}
	if (!have_port || !have_key || !(b->rdma || b->tcp)) {
		snprintf(why, whysz, "no %s", !have_port ? "port"
					      : !have_key ? "key"
							  : "listener");
		return -EINVAL;
	}
	return 0;
}
