#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Runs the fault scenarios of tests/e2e/faults.sh on this host over TCP on
# loopback (127.0.0.1): copies the binaries into a scratch directory under
# /tmp, makes a key, runs the scenarios (bounded as a whole), then kills
# whatever they left running (by pid), unmounts their tmpfs and removes the
# scratch directory. Prints the TAP lines and a closing "N passed, N
# failed"; exits non-zero if anything failed. Needs root (tmpfs mount) and
# python3 (the misbehaving peers of faults_peer.py).
#
#   tests/e2e/run_faults.sh [--build DIR] [SCENARIO...]
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
need_built "make all hooks" "$BUILD/rdcp" "$BUILD/hooks/rdcp"
for t in python3 openssl timeout; do
	command -v "$t" >/dev/null 2>&1 ||
		{ echo "not ok 1 - $t missing"; echo "0 passed, 1 failed"; exit 1; }
done

T=$(mktemp -d /tmp/rdcp-e2e-faults.XXXXXX)
cleanup() {
	local p
	# Only the processes the scenarios started, by pid, if still rdcp or
	# python (not a recycled pid).
	if [ -f "$T/pids" ]; then
		while read -r p; do
			[ -n "$p" ] || continue
			[ -r "/proc/$p/cmdline" ] || continue
			tr '\0' ' ' <"/proc/$p/cmdline" | grep -Eq 'rdcp|faults_peer' &&
				kill -9 "$p" 2>/dev/null
		done <"$T/pids"
	fi
	mountpoint -q "$T/work/fs" 2>/dev/null && umount "$T/work/fs"
	mountpoint -q "$T/work" 2>/dev/null && umount "$T/work"
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/bin" "$T/work"
# The 1 GiB files live in memory: a disk's writeback would make the
# timing of the mid-file tests (and the suite's runtime) vary.
[ "$(id -u)" != 0 ] || mount -t tmpfs -o size=6g tmpfs "$T/work" ||
	echo "# cannot mount a tmpfs on $T/work: using the disk"
cp "$BUILD/rdcp" "$T/bin/rdcp"
cp "$BUILD/hooks/rdcp" "$T/bin/rdcp-hooks"
"$T/bin/rdcp" --keygen "$T/key" >/dev/null 2>&1 ||
	{ echo "not ok 1 - rdcp --keygen failed"; echo "0 passed, 1 failed"; exit 1; }

start=$(date +%s)
RDCP_BIN=$T/bin/rdcp RDCP_HOOKS_BIN=$T/bin/rdcp-hooks RDCP_KEY=$T/key \
	RDCP_FAULTS_DIR=$T/work RDCP_FAULTS_PIDS=$T/pids \
	timeout -s KILL 600 bash "$HERE/faults.sh" "$@" 2>&1 | tee "$T/tap"
rc=${PIPESTATUS[0]}
p=$(grep -c '^ok ' "$T/tap")
f=$(grep -c '^not ok ' "$T/tap")
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
	echo "not ok $((p + 1)) - faults.sh exited with status $rc"
	f=1
fi
echo "# run_faults: $(($(date +%s) - start)) s"
echo "$p passed, $f failed"
[ "$f" -eq 0 ] && [ "$rc" -eq 0 ]
