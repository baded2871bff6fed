#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make demo`: one real RDMA copy, shown to a person. On a host with an
# active RDMA device (a RoCE/InfiniBand NIC, or Soft-RoCE already set up)
# it copies over that device; otherwise it boots the Soft-RoCE qemu guest
# (tests/guest/) and copies there. Either way it prints what it copied,
# how fast, ib_write_bw on the same link for reference, and whether the
# SHA-256 of the copy matches the source.
#
#   tests/demo.sh BUILD_DIR
# The copy itself is tests/demo_copy.sh (POSIX sh: it also runs in the
# guest's busybox).
set -euo pipefail

BUILD=${1:-build}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -x "$BUILD/rdcp" ] || { echo "demo: $BUILD/rdcp missing: run make" >&2; exit 1; }

# A host RDMA device with an active port and an IPv4 address?
if command -v rdma >/dev/null 2>&1; then
	while read -r _ link _ state _ _ netdev _; do
		[ "$state" = ACTIVE ] || continue
		addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null |
			awk '{ sub("/.*", "", $4); print $4; exit }')
		[ -n "$addr" ] || continue
		echo "demo: using this host's RDMA device ${link%/*} ($netdev, $addr)"
		sh "$HERE/demo_copy.sh" "$BUILD/rdcp" "$addr"
		exit $?
	done < <(rdma link show 2>/dev/null | awk '{ print $1, $2, $3, $4, $5, $6, $8, $9 }')
fi

echo "demo: no active RDMA device on this host: booting the Soft-RoCE guest"
"$HERE/guest/guest.sh" prepare
"$HERE/guest/guest.sh" run --timeout 300 --bin "$BUILD/rdcp" \
	--file "$HERE/demo_copy.sh:/usr/bin/rdcp-demo" \
	"$HERE/guest/demo_inside.sh"
