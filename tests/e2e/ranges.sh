#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Byte ranges of a split file (rdcp-mpi's, doc/PROTOCOL.md: Ranges)
# sent to a real `rdcp --listen` by peer.py clients, honest and not:
# ranges in any order and over several sessions, one sent twice, the
# final flag and the whole file's CRC32, --resume of a split; a range
# outside the file, unaligned, or a chunk outside its range (exit 5);
# another token or size at once (-ESTALE), overlapping ranges, a bad CRC
# (the file fails, nothing placed). The scenarios are in ranges_peer.py.
# Runs in a network namespace of its own when it can (root).
#
#   tests/e2e/ranges.sh [--build DIR] [SCENARIO...]
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
own_netns RDCP_RANGES_NETNS "$@"
need_built "make all" "$BUILD/rdcp"
T=$(mktemp -d /tmp/rdcp-e2e-ranges.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BUILD/rdcp" --keygen "$T/key" >/dev/null 2>&1 ||
	{ echo "not ok 1 - rdcp --keygen failed"; exit 1; }
timeout -s KILL 300 python3 "$HERE/ranges_peer.py" "$BUILD/rdcp" 7960 \
	"$T/key" "$T/w" "$@"
