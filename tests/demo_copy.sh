#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The copy `make demo` shows (tests/demo.sh): a receiver and a sender on
# this RDMA host, a random file of $RDCP_DEMO_MIB MiB (default 64), and
# three checks printed as TAP lines for tests/demo.sh to count:
#   1 the copy: rdcp over RDMA, its rate in MB/s
#   2 verified: the SHA-256 of the copy equals the source's
#   3 the reference: ib_write_bw on the same device, and rdcp's ratio to it
# Both sides use a throwaway key made here (rdcp authenticates by default);
# nothing under /etc/rdcp or ~/.config is read or written. POSIX sh: it
# runs in the Soft-RoCE guest's busybox too. Exits non-zero when a check
# failed.
#
#   demo_copy.sh RDCP ADDR DEVICE
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
set -u
SIZE_MIB=${RDCP_DEMO_MIB:-64}
PORT=${RDCP_DEMO_PORT:-7480}
rdcp=$1
addr=$2
dev=$3

n=0
failed=0
ok() { n=$((n + 1)) && echo "ok $n - $*"; }
not_ok() { n=$((n + 1)) && failed=$((failed + 1)) && echo "not ok $n - $*"; }
# last FILE: the last line a command printed, to say why it failed.
last() { tail -n 1 "$1" 2>/dev/null; }

dir=$(mktemp -d /tmp/rdcp-demo.XXXXXX) || {
	not_ok "copy: cannot create a temporary directory under /tmp"
	exit 1
}
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rc=0
"$rdcp" --keygen "$dir/key" 2>"$dir/keygen.err" || rc=$?
if [ "$rc" -ne 0 ]; then
	not_ok "copy: rdcp --keygen exited $rc: $(last "$dir/keygen.err")"
	exit "$rc"
fi
mkdir -p "$dir/root"
head -c $((SIZE_MIB * 1048576)) /dev/urandom >"$dir/src.bin"

"$rdcp" --listen --key-file "$dir/key" --root "$dir/root" --once \
	--port "$PORT" 2>"$dir/receiver.err" &
srv=$!
pids=$srv
# The sender retries while the receiver is still starting (exit 3: cannot
# connect), which under qemu can take more than a second.
try=0
while :; do
	sleep 1
	rc=0
	"$rdcp" --json --transport rdma --key-file "$dir/key" --port "$PORT" \
		"$dir/src.bin" "$addr::incoming/" >"$dir/sender.json" \
		2>"$dir/sender.err" || rc=$?
	try=$((try + 1))
	[ "$rc" -eq 3 ] && [ "$try" -lt 10 ] && kill -0 "$srv" 2>/dev/null ||
		break
done
# A receiver the sender never reached waits for ever: give it 10 s.
i=0
while kill -0 "$srv" 2>/dev/null && [ "$i" -lt 20 ]; do
	sleep 0.5
	i=$((i + 1))
done
srv_rc=0
if kill "$srv" 2>/dev/null; then
	wait "$srv"
else
	wait "$srv" || srv_rc=$?
fi
pids=
if [ "$rc" -ne 0 ]; then
	not_ok "copy: rdcp (sender) exited $rc: $(last "$dir/sender.err")"
	[ "$srv_rc" -eq 0 ] ||
		echo "# rdcp (receiver) exited $srv_rc: $(last "$dir/receiver.err")"
	exit "$rc"
fi
summary=$(grep '"event":"summary"' "$dir/sender.json")
field() { # NAME: a number or a string of the JSON summary
	echo "$summary" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}
rate=$(field bytes_per_second | awk '{ printf "%.1f", $1 / 1e6 }')
ok "copy: $SIZE_MIB MiB file src.bin sent over $(field transport)" \
	"($(field device)) in $(field seconds | awk '{ printf "%.2f", $1 }') s:" \
	"rdcp $rate MB/s"

h1=$(sha256sum <"$dir/src.bin" | cut -d' ' -f1)
h2=$(sha256sum <"$dir/root/incoming/src.bin" | cut -d' ' -f1)
if [ "$h1" = "$h2" ]; then
	ok "verified: sha256 of the copy = sha256 of the source = $h1"
else
	not_ok "verified: sha256 differs: source $h1, copy $h2"
fi

# The ceiling on the same link: plain RDMA WRITEs of rdcp's default chunk
# size (1 MiB), as many as the file has, connected through rdma_cm.
# perftest's MB/sec are MiB/s.
bw=
if command -v ib_write_bw >/dev/null 2>&1; then
	ib_write_bw -R -d "$dev" -s 1048576 -n "$SIZE_MIB" -F \
		-p $((PORT + 1)) >/dev/null 2>&1 &
	pids=$!
	sleep 1
	bw=$(ib_write_bw -R -d "$dev" -s 1048576 -n "$SIZE_MIB" -F \
		-p $((PORT + 1)) "$addr" 2>"$dir/bw.err" |
		awk '$1 == 1048576 { printf "%.1f", $4 * 1.048576 }')
	wait "$pids" 2>/dev/null
	pids=
fi
if [ -n "$bw" ]; then
	ok "reference: ib_write_bw $bw MB/s on the same device;" \
		"rdcp/ib_write_bw = $(awk -v r="$rate" -v b="$bw" \
			'BEGIN { printf "%.2f", (b > 0 ? r / b : 0) }')"
elif command -v ib_write_bw >/dev/null 2>&1; then
	not_ok "reference: ib_write_bw measured nothing: $(last "$dir/bw.err")"
else
	not_ok "reference: ib_write_bw not found (package perftest)"
fi
[ "$failed" -eq 0 ]
