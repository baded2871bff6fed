/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The one entry point every fuzz target defines, libFuzzer style. The same
 * target source links either with libFuzzer (clang, tests/fuzz/run.sh) or
 * with replay.c (gcc, make tests), which runs it over a committed corpus.
 * A target reports a broken invariant by calling abort().
 */
#ifndef RDCP_FUZZ_H
#define RDCP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
