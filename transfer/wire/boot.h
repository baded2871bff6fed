/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Private to transfer/: the bootstrap line, what an rdcp started over ssh
 * (rdcp --server) tells the rdcp that started it on the ssh channel once it
 * listens: where to connect for data and the one-time secret the session
 * authenticates with, as the pre-shared key would be.
 *
 *   RDCP-BOOT PROTO VERSION port=N listen=rdma,tcp via=ADDR
 *             rdma=ADDR,... tcp=ADDR,... key=HEX64
 *
 * one line, fields separated by one space; PROTO is the wire protocol
 * version (CM_VERSION), VERSION the release; via the address ssh reached
 * the host by (SSH_CONNECTION), "-" for an empty field. A reader skips
 * lines before it (a login shell's chatter) and fields it does not know.
 */
#ifndef RDCP_BOOT_H
#define RDCP_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/cm.h"
#include "util/key.h"

#define BOOT_TAG "RDCP-BOOT"
#define BOOT_ADDRS 16	  /* addresses of each kind a line carries */
#define BOOT_LINE_MAX 2048 /* bytes, the newline included */

struct boot {
	unsigned int proto; /* the remote's CM_VERSION */
	char version[32];   /* its release */
	uint16_t port;
	bool rdma, tcp; /* what it listens for */
	char via[CM_ADDRSTR_LEN];
	int nrdma, ntcp;
	char rdma_addrs[BOOT_ADDRS][CM_ADDRSTR_LEN];
	char tcp_addrs[BOOT_ADDRS][CM_ADDRSTR_LEN];
	uint8_t key[KEY_LEN];
};

/* b as one line with its newline into line (BOOT_LINE_MAX bytes). */
void boot_format(const struct boot *b, char *line);

/*
 * Whether line is a bootstrap line (starts with BOOT_TAG and a space):
 * other lines before it are someone else's.
 */
bool boot_is_line(const char *line);

/*
 * Parses a bootstrap line into *b. 0, or -EINVAL with why (whysz bytes)
 * naming what is missing or malformed.
 */
int boot_parse(const char *line, struct boot *b, char *why, size_t whysz)
	__attribute__((warn_unused_result));

#endif
