#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make demo`: one real RDMA copy, shown to a person. On a host with an
# active RDMA device (a RoCE/InfiniBand NIC, or Soft-RoCE already set up)
# it copies over that device; otherwise it boots the Soft-RoCE qemu guest
# (tests/guest/) and copies there. Either way it prints what it copied,
# how fast, ib_write_bw on the same link for reference, and whether the
# SHA-256 of the copy matches the source: TAP lines (tests/demo_copy.sh)
# and a closing "N passed, N failed" that CI (.ci/run) counts. Exits
# non-zero when a check failed. The whole output goes to BUILD_DIR/demo.log.
#
#   tests/demo.sh BUILD_DIR
# RDCP_DEMO_MIB sets the file size (default 64 MiB).
set -uo pipefail

BUILD=${1:-build}
MIB=${RDCP_DEMO_MIB:-64}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG=$BUILD/demo.log
mkdir -p "$BUILD"
: >"$LOG"

# finish RC: count the TAP lines of the log; a run that failed without a
# "not ok" (a guest that did not boot, a crash) counts as one failure and
# shows the end of the log.
finish() {
	local rc=$1 p f
	p=$(grep -c '^ok ' "$LOG")
	f=$(grep -c '^not ok ' "$LOG")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		tail -n 20 "$LOG" | sed 's/^/# /'
		echo "not ok - demo: stopped with status $rc before its checks ran (log: $LOG)"
		f=1
	elif [ "$f" -ne 0 ]; then
		echo "# demo: FAILED (log: $LOG)"
	fi
	echo "$p passed, $f failed"
	[ "$f" -eq 0 ] || exit 1
	exit 0
}

if [ ! -x "$BUILD/rdcp" ]; then
	echo "not ok - demo: $BUILD/rdcp missing: run make"
	echo "0 passed, 1 failed"
	exit 1
fi

# A host RDMA device with an active port and an IPv4 address?
if command -v rdma >/dev/null 2>&1; then
	while read -r _ link _ state _ _ netdev _; do
		[ "$state" = ACTIVE ] || continue
		addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null |
			awk '{ sub("/.*", "", $4); print $4; exit }')
		[ -n "$addr" ] || continue
		echo "demo: this host's RDMA device ${link%/*} ($netdev, $addr)" | tee -a "$LOG"
		RDCP_DEMO_MIB=$MIB sh "$HERE/demo_copy.sh" "$BUILD/rdcp" "$addr" \
			"${link%/*}" 2>&1 | tee -a "$LOG"
		finish "${PIPESTATUS[0]}"
	done < <(rdma link show 2>/dev/null | awk '{ print $1, $2, $3, $4, $5, $6, $8, $9 }')
fi

echo "demo: no active RDMA device on this host: Soft-RoCE in a qemu guest" |
	tee -a "$LOG"
if ! "$HERE/guest/guest.sh" prepare 2>&1 | tee -a "$LOG"; then
	echo "not ok - demo: cannot prepare the Soft-RoCE guest (see above)"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "demo: booting the guest and copying (a minute or two)" | tee -a "$LOG"
# The console goes to the log; a person sees the demo's own lines.
"$HERE/guest/guest.sh" run --timeout 600 --bin "$BUILD/rdcp" \
	--file "$HERE/demo_copy.sh:/usr/bin/rdcp-demo" \
	"$HERE/guest/demo_inside.sh" "$MIB" 2>&1 | tee -a "$LOG" |
	grep --line-buffered -E '^(demo:|ok |not ok |# )'
finish "${PIPESTATUS[0]}"
