/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Monotonic time for timeouts and rates (CLOCK_MONOTONIC). */
#ifndef RDCP_CLOCK_H
#define RDCP_CLOCK_H

#include <stdint.h>

uint64_t clock_now_ns(void);
uint64_t clock_now_ms(void);
double clock_now_s(void);

#endif
