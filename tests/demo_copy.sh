#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The copy `make demo` shows (tests/demo.sh): a receiver and a sender on
# this RDMA host, a random file of $RDCP_DEMO_MIB MiB (default 64), the
# rate, ib_write_bw on the same link for reference, and the SHA-256 of
# source and copy. POSIX sh: it runs in the Soft-RoCE guest's busybox too.
#
#   demo_copy.sh RDCP ADDR
set -eu
SIZE_MIB=${RDCP_DEMO_MIB:-64}
rdcp=$1
addr=$2
dir=$(mktemp -d /tmp/rdcp-demo.XXXXXX)
src=$dir/src.bin
mkdir -p "$dir/root"
head -c $((SIZE_MIB * 1048576)) /dev/urandom >"$src"
echo "demo: receiver: $rdcp --listen --root $dir/root --once --port 7480"
"$rdcp" --listen --root "$dir/root" --once --port 7480 &
srv=$!
sleep 1
echo "demo: sender:   $rdcp -v --port 7480 $src $addr:incoming/"
t0=$(date +%s.%N)
rc=0
"$rdcp" -v --port 7480 "$src" "$addr:incoming/" || rc=$?
t1=$(date +%s.%N)
wait "$srv" || true
if [ "$rc" -ne 0 ]; then
	echo "demo: FAILED: rdcp exited $rc"
	exit "$rc"
fi
awk -v s="$SIZE_MIB" -v a="$t0" -v b="$t1" 'BEGIN {
	printf "demo: copied %d MiB in %.2f s = %.1f MB/s (whole command, incl. connect)\n",
		s, b - a, s * 1.048576 / (b - a) }'
h1=$(sha256sum <"$src" | cut -d' ' -f1)
h2=$(sha256sum <"$dir/root/incoming/src.bin" | cut -d' ' -f1)
echo "demo: sha256 source $h1"
echo "demo: sha256 copy   $h2"
if [ "$h1" != "$h2" ]; then
	echo "demo: FAILED: digests differ"
	exit 8
fi
echo "demo: verified: the copy is byte-identical"
if command -v ib_write_bw >/dev/null 2>&1; then
	dev=$(ls /sys/class/infiniband | head -n1)
	ib_write_bw -d "$dev" -x 1 -s 1048576 -n 100 -F >/dev/null 2>&1 &
	sleep 1
	echo "demo: reference, ib_write_bw on the same link (1 MiB writes):"
	ib_write_bw -d "$dev" -x 1 -s 1048576 -n 100 -F "$addr" 2>&1 |
		awk '/^ *1048576/ { printf "demo:   %s MB/s average\n", $4 * 1.048576 }' || true
	wait || true
fi
rm -rf "$dir"
