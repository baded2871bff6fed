/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The operands of a copy (operands.h): local path, HOST:PATH, HOST::PATH
 * or rdcp://HOST[:PORT]/PATH.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/operands.h"

#define URL "rdcp://"

static int bad(char *why, size_t whysz, const char *arg, const char *what)
{
	snprintf(why, whysz, "'%s': %s", arg, what);
	return -EINVAL;
}

/* rdcp://HOST[:PORT]/PATH; HOST may be [v6]. */
static int parse_url(const char *arg, struct operand *op, char *why,
		     size_t whysz)
{
	const char *h = arg + strlen(URL), *end, *slash;
	unsigned long port = 0;

	if (*h == '[') {
		end = strchr(h, ']');
		if (!end)
			return bad(why, whysz, arg, "no ']' after the address");
		op->host = strndup(h + 1, (size_t)(end - h - 1));
		end++;
	} else {
		end = h + strcspn(h, ":/");
		op->host = strndup(h, (size_t)(end - h));
	}
	if (!op->host)
		return -ENOMEM;
	if (*end == ':') {
		char *e;

		port = strtoul(end + 1, &e, 10);
		if (e == end + 1 || !port || port > 65535 || *e != '/')
			return bad(why, whysz, arg, "the port is not 1..65535");
		end = e;
	}
	if (*end && *end != '/')
		return bad(why, whysz, arg, "not rdcp://HOST[:PORT]/PATH");
	slash = *end ? end + 1 : end;
	op->path = slash;
	op->port = (uint16_t)port;
	op->daemon = true;
	return 0;
}

int operand_parse(const char *arg, struct operand *op, char *why,
		  size_t whysz)
{
	const char *colon, *slash, *at;
	size_t hlen;
	int rc;

	*op = (struct operand){ 0 };
	if (!strncmp(arg, URL, strlen(URL))) {
		op->remote = true;
		rc = parse_url(arg, op, why, whysz);
	} else {
		/* user@[v6]:path and [v6]:path: the ':' after the ']'. */
		const char *br = strchr(arg, '[');

		slash = strchr(arg, '/');
		colon = strchr(arg, ':');
		if (br && (!slash || br < slash) && (!colon || br < colon)) {
			const char *close = strchr(br, ']');

			if (!close || close[1] != ':')
				return 0; /* a local name with a '[' */
			colon = close + 1;
		}
		if (!colon || colon == arg || (slash && slash < colon))
			return 0;
		op->remote = true;
		op->daemon = colon[1] == ':';
		op->path = colon + (op->daemon ? 2 : 1);
		hlen = (size_t)(colon - arg);
		op->host = malloc(hlen + 1);
		if (!op->host)
			return -ENOMEM;
		/* Drop the brackets: ssh and getaddrinfo want the address. */
		{
			size_t n = 0;

			for (size_t i = 0; i < hlen; i++)
				if (arg[i] != '[' && arg[i] != ']')
					op->host[n++] = arg[i];
			op->host[n] = '\0';
		}
		rc = 0;
	}
	if (rc)
		return rc;
	at = strrchr(op->host, '@');
	if (!op->host[0] || (at && !at[1]))
		return bad(why, whysz, arg, "no host name");
	/* ssh would read "-oProxyCommand=..." as an option. */
	if (op->host[0] == '-' || (at && at[1] == '-'))
		return bad(why, whysz, arg, "a host name cannot start with '-'");
	if (op->daemon && at)
		return bad(why, whysz, arg,
			   "user@ is for ssh (HOST:PATH); a receiver "
			   "(HOST::PATH) has no users");
	return 0;
}

void operand_release(struct operand *op)
{
	free(op->host);
	op->host = NULL;
}

/* Whether op goes to a running receiver under mode; -EINVAL if it cannot. */
static int op_daemon(const struct operand *op, enum remote_mode mode,
		     const char *arg, char *why, size_t whysz)
{
	if (op->daemon && mode == REMOTE_SSH)
		return bad(why, whysz, arg,
			   "--ssh, but HOST::PATH and rdcp:// name a running "
			   "receiver");
	return op->daemon || mode == REMOTE_DAEMON;
}

int operands_split(const char **ops, size_t n, enum remote_mode mode,
		   struct split *sp, char *why, size_t whysz)
{
	struct operand dst, op;
	int rc, d, dd = 0;

	*sp = (struct split){ 0 };
	rc = operand_parse(ops[n - 1], &dst, why, whysz);
	if (!rc && dst.remote) {
		dd = op_daemon(&dst, mode, ops[n - 1], why, whysz);
		rc = dd < 0 ? dd : 0;
	}
	if (rc) {
		operand_release(&dst);
		return rc;
	}
	sp->dest = dst.remote ? dst.path : ops[n - 1];
	sp->nsrcs = n - 1;
	for (size_t i = 0; i < sp->nsrcs && !rc; i++) {
		rc = operand_parse(ops[i], &op, why, whysz);
		if (rc)
			break;
		if (i == 0 && !op.remote && !dst.remote)
			rc = bad(why, whysz, ops[n - 1],
				 "not HOST:PATH: one side of a copy names "
				 "another host");
		else if (i == 0) {
			sp->pull = op.remote;
			sp->host = op.remote ? op.host : NULL;
			sp->port = op.remote ? op.port : dst.port;
			op.host = NULL;
		} else if (op.remote != sp->pull) {
			rc = bad(why, whysz, ops[i],
				 sp->pull ? "all SRCs of a pull are on the "
					    "remote host (HOST:SRC)"
					  : "SRCs of a push are local files");
		} else if (op.remote && strcmp(op.host, sp->host)) {
			rc = bad(why, whysz, ops[i],
				 "all SRCs must come from one host");
		}
		if (!rc && op.remote) {
			d = op_daemon(&op, mode, ops[i], why, whysz);
			if (d < 0)
				rc = d;
			else if (i == 0)
				sp->daemon = d;
			else if (d != sp->daemon)
				rc = bad(why, whysz, ops[i],
					 "all SRCs go the same way (HOST:PATH "
					 "over ssh, HOST::PATH to a receiver)");
			ops[i] = op.path;
		}
		operand_release(&op);
	}
	if (!rc && !sp->pull) {
		sp->host = dst.host;
		sp->daemon = dd;
		dst.host = NULL;
	} else if (!rc && dst.remote) {
		/* Both remote: over ssh, the data from one to the other. */
		if (sp->daemon || dd)
			rc = bad(why, whysz, ops[n - 1],
				 "a copy between two remote hosts starts both "
				 "ends over ssh: use HOST:PATH on both sides");
		sp->dest_host = dst.host;
		dst.host = NULL;
	}
	operand_release(&dst);
	return rc;
}

void operands_split_release(struct split *sp)
{
	free(sp->host);
	free(sp->dest_host);
	sp->host = sp->dest_host = NULL;
}
