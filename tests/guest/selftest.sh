#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Self-test of the Soft-RoCE guest harness (tests/guest/guest.sh): proves
# that RDMA really runs in the guest (ib_write_bw and rping over rxe0 in one
# guest, ib_write_bw between two guests), that the RDCP-GUEST-KILL-OTHER
# hook kills the peer without waiting for it, and that exit statuses,
# --bin/--file/arguments and the timeout are passed through.  Prints
# "N passed, N failed" and exits non-zero if anything failed; a missing
# qemu or kernel is a failure, never a skip.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
G=$HERE/guest.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "selftest: PASS: $*"; }
ko() { fail=$((fail + 1)); echo "selftest: FAIL: $*"; }

if ! "$G" prepare; then
	ko "guest.sh prepare"
	echo "$pass passed, $fail failed"
	exit 1
fi

# 1. Single guest: ib_write_bw and rping on rxe0 over dummy0, counters.
cat >"$T/single.sh" <<'EOF'
set -e
timeout 60 ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 >/tmp/srv.log 2>&1 &
srv=$!
sleep 1
timeout 60 ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 "$RDCP_GUEST_ADDR"
wait $srv || { echo "ib_write_bw server failed"; cat /tmp/srv.log; exit 1; }
timeout 30 rping -s -a "$RDCP_GUEST_ADDR" -C 3 >/tmp/rping-srv.log 2>&1 &
srv=$!
sleep 1
timeout 30 rping -c -a "$RDCP_GUEST_ADDR" -C 3 -v
wait $srv || { echo "rping server failed"; cat /tmp/rping-srv.log; exit 1; }
echo "hw_counters:"
cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . *
EOF
start=$SECONDS
if "$G" run --timeout 180 "$T/single.sh" >"$T/single.out" 2>&1; then
	bw=$(awk '$1 == 65536 && $2 == 200 {print $4; exit}' "$T/single.out")
	ok "single guest ib_write_bw + rping ($((SECONDS - start))s, ib_write_bw ${bw:-?} MB/s)"
else
	cat "$T/single.out"; ko "single guest ib_write_bw + rping (status $?)"
fi

# 2. Pair: B serves ib_write_bw, A is the client against B.
cat >"$T/pair.sh" <<'EOF'
set -e
case "$RDCP_GUEST_ROLE" in
b)
	timeout 90 ib_write_bw -d rxe0 -x 1 -s 65536 -n 200
	;;
a)
	i=0
	until ping -c 1 -W 1 "$RDCP_PEER_ADDR" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 30 ] || { echo "peer unreachable"; exit 1; }
	done
	sleep 1
	timeout 90 ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 "$RDCP_PEER_ADDR"
	;;
esac
grep -H . /sys/class/infiniband/rxe0/ports/1/hw_counters/*retry* \
	/sys/class/infiniband/rxe0/ports/1/hw_counters/*rnr* 2>/dev/null || true
EOF
start=$SECONDS
if "$G" run --pair --timeout 180 "$T/pair.sh" >"$T/pair.out" 2>&1; then
	bw=$(awk '$1 == "[a]" && $2 == 65536 && $3 == 200 {print $5; exit}' "$T/pair.out")
	ok "pair ib_write_bw a -> b ($((SECONDS - start))s, ${bw:-?} MB/s)"
else
	cat "$T/pair.out"; ko "pair ib_write_bw a -> b"
fi

# 3. Kill hook: A asks the host to kill B (which would otherwise sleep past
#    the timeout); the run must end quickly with A's status 0.
cat >"$T/kill.sh" <<'EOF'
case "$RDCP_GUEST_ROLE" in
a)
	sleep 1
	echo RDCP-GUEST-KILL-OTHER
	sleep 1
	if ping -c 2 -W 1 "$RDCP_PEER_ADDR" >/dev/null 2>&1; then
		echo "peer still answers"; exit 1
	fi
	exit 0
	;;
b)
	sleep 300; exit 5
	;;
esac
EOF
start=$SECONDS
if "$G" run --pair --timeout 90 "$T/kill.sh" >"$T/kill.out" 2>&1; then
	el=$((SECONDS - start))
	if [ "$el" -lt 60 ]; then ok "kill hook (${el}s)"
	else cat "$T/kill.out"; ko "kill hook took ${el}s"; fi
else
	cat "$T/kill.out"; ko "kill hook"
fi

# 4. Exit status, arguments, --bin and --file reach the guest.
echo "payload-$$" >"$T/payload"
cat >"$T/status.sh" <<'EOF'
[ "$#" = 2 ] && [ "$1" = "two words" ] && [ "$2" = x ] || { echo "bad args: $*"; exit 1; }
grep -q '^payload-' /srv/payload || { echo "--file missing"; exit 1; }
timeout 30 ibv_rc_pingpong -d rxe0 -g 1 -n 5 >/tmp/pp.log 2>&1 &
sleep 1
timeout 30 ibv_rc_pingpong -d rxe0 -g 1 -n 5 "$RDCP_GUEST_ADDR" || { echo "--bin ibv_rc_pingpong failed"; cat /tmp/pp.log; exit 1; }
exit 42
EOF
set +e
"$G" run --timeout 60 --bin /usr/bin/ibv_rc_pingpong --file "$T/payload:/srv/payload" \
	"$T/status.sh" "two words" x >"$T/status.out" 2>&1
st=$?
set -e
if [ "$st" = 42 ]; then ok "exit status, args, --bin, --file"
else cat "$T/status.out"; ko "exit status, args, --bin, --file (status $st, want 42)"; fi

# 5. Timeout: a hanging script yields 124 and the console tail.
echo 'echo hanging; sleep 600' >"$T/hang.sh"
set +e
"$G" run --timeout 12 "$T/hang.sh" >"$T/hang.out" 2>&1
st=$?
set -e
if [ "$st" = 124 ] && grep -q 'timed out' "$T/hang.out"; then ok "timeout gives 124"
else cat "$T/hang.out"; ko "timeout (status $st, want 124)"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
