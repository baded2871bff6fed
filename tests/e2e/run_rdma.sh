#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Host-side driver of rdcp's Soft-RoCE end-to-end tests.  Builds nothing:
# expects build/rdcp (make WERROR=1) and build/hooks/rdcp (make hooks).
# Runs `tests/guest/guest.sh prepare` (a failure is a test failure, never a
# skip), then boots one guest for tests/e2e/scenarios.sh and one guest
# pair per peer-loss scenario of tests/e2e/rdma_pair.sh (rxhost, txhost,
# linkcut, retry; rxhost's boot runs the pair's ssh checks first); both find their harness tests/e2e/lib.sh beside them, as
# /test/lib.sh in the guest.  The guests' TAP lines are relayed
# renumbered, with "#" diagnostics; the full consoles go to
# build/e2e/<run>.log and their tail is shown when a run fails.  A guest that crashes, times out or stops
# before its plan counts as a failed test.  Ends with "N passed, N failed"
# and a non-zero status if anything failed.
#
#   tests/e2e/run_rdma.sh [--build DIR] [single[:NAME,...]|rxhost|txhost|linkcut|retry|ssh|numa|benchhw]...
#       DIR (default build/) holds rdcp and hooks/rdcp; logs go to DIR/e2e/.
#       Without scenario names, the first five run (a few minutes); ssh
#       boots a pair for rdma_pair.sh's ssh checks alone.
#       Every guest runs OpenSSH's sshd (port 22; root's keys, made here
#       per run, in /root/.ssh: any guest may `ssh 10.77.1.2 CMD`).
#       single:NAME,... runs only those scenarios of scenarios.sh in the
#       single guest (`tests/e2e/run_tcp.sh --list` names them), e.g.
#       single:tree,pull. numa boots a guest with two NUMA nodes, its
#       NIC on node 1 and a second on node 0, for tests/e2e/numa.sh
#       (placement, huge pages, rails on two nodes).
#       benchhw boots a pair for the hardware qualification kit
#       (tests/bench/hw.sh, make bench-hw) run from a against a and b,
#       each with a second NIC on a second link (rxe1: the rails row).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GUEST=$REPO/tests/guest/guest.sh
BUILD=$REPO/build
while [ $# -gt 0 ]; do
	case "$1" in
	--build) [ $# -ge 2 ] || { echo "run_rdma.sh: --build wants a directory" >&2; exit 2; }
		BUILD=$2; shift 2 ;;
	-h|--help) sed -n '3,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) break ;;
	esac
done
case "$BUILD" in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
OUT=$BUILD/e2e
RDCP=$BUILD/rdcp
HOOKS=$BUILD/hooks/rdcp

pass=0 fail=0 n=0
ok() { n=$((n + 1)); pass=$((pass + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $*"; }
finish() {
	echo "1..$n"
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ] && [ "$n" -gt 0 ]
	exit
}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$OUT"

missing=
[ -x "$RDCP" ] || missing="$missing $RDCP (make WERROR=1)"
[ -x "$HOOKS" ] || missing="$missing $HOOKS (make hooks)"
if [ -n "$missing" ]; then
	echo "run_rdma.sh: missing:$missing" >&2
	notok "binaries present:$missing"
	finish
fi

start=$SECONDS
if ! "$GUEST" prepare >"$T/prepare.log" 2>&1; then
	notok "tests/guest/guest.sh prepare"
	tail -n 20 "$T/prepare.log" | sed 's/^/# /'
	finish
fi

# The same binaries for every run, even if build/ changes meanwhile.
cp "$RDCP" "$T/rdcp"
cp "$HOOKS" "$T/rdcp-hooks"
common=(--bin "$T/rdcp" --bin "$T/rdcp-hooks")
# One pre-shared key for every guest (rdcp authenticates by default).
if ! "$T/rdcp" --keygen "$T/key" >/dev/null 2>&1; then
	notok "rdcp --keygen"
	finish
fi
common+=(--file "$T/key:/etc/rdcp/key")
# OpenSSH in every guest (tests/guest/init.sh starts sshd on port 22 when
# the host key is there): one throwaway host key and one key pair for
# root per run, root's known_hosts naming every guest address, so that any
# guest can `ssh 10.77.1.2 CMD` (or itself: 10.77.0.1, 127.0.0.1) in
# BatchMode with the host key checked.
mkdir -p "$T/ssh/dot"
if ! ssh-keygen -q -t ed25519 -N '' -C rdcp-guest-host -f "$T/ssh/host" </dev/null >/dev/null 2>&1 ||
	! ssh-keygen -q -t ed25519 -N '' -C rdcp-guest-root -f "$T/ssh/dot/id_ed25519" </dev/null >/dev/null 2>&1; then
	notok "ssh-keygen (package openssh-client)"
	finish
fi
cp "$T/ssh/dot/id_ed25519.pub" "$T/ssh/dot/authorized_keys"
echo "10.77.0.1,127.0.0.1,localhost,guest,10.77.1.1,guest-a,10.77.1.2,guest-b $(cut -d' ' -f1,2 "$T/ssh/host.pub")" \
	>"$T/ssh/dot/known_hosts"
common+=(--file "$T/ssh/host:/etc/ssh/ssh_host_ed25519_key" --file "$T/ssh/dot:/root/.ssh")
# The scripts' shared harness, beside them as /test/script.sh is.
common+=(--file "$HERE/lib.sh:/test/lib.sh")

label() { if [ "$1" = s ]; then echo single; else echo "pair/$1"; fi; }

# run_guest NAME "EXPECTED_GUESTS" GUEST_SH_ARGS...: boot, relay TAP,
# account for crashes/timeouts.  EXPECTED_GUESTS: the guests that must
# print a complete TAP stream ("s" for the single guest, "a", "b").
run_guest() {
	local name=$1 expect=$2 log=$OUT/$1.log
	shift 2
	local -A plan=() seen=()
	local line g rest rc=1 t0=$SECONDS failed_before=$fail why=()
	: >"$log"
	while IFS= read -r line; do
		line=${line%$'\r'}
		[[ "$line" == RUN-STATUS=* ]] || printf '%s\n' "$line" >>"$log"
		g=s rest=$line
		if [[ "$line" =~ ^\[([ab])\]\ (.*)$ ]]; then
			g=${BASH_REMATCH[1]} rest=${BASH_REMATCH[2]}
		elif [ "$expect" != s ] && [[ "$line" != RUN-STATUS=* ]]; then
			# A pair's guests are all prefixed: this line is
			# guest.sh's own, e.g. the tail of a guest's console
			# after a timeout, whose TAP lines were already counted.
			# The log keeps it.
			continue
		fi
		if [[ "$rest" =~ ^RUN-STATUS=([0-9]+)$ ]]; then
			rc=${BASH_REMATCH[1]}
		elif [[ "$rest" =~ ^ok\ [0-9]+\ -\ (.*)$ ]]; then
			seen[$g]=$((${seen[$g]:-0} + 1))
			ok "$(label "$g"): ${BASH_REMATCH[1]}"
		elif [[ "$rest" =~ ^not\ ok\ [0-9]+\ -\ (.*)$ ]]; then
			seen[$g]=$((${seen[$g]:-0} + 1))
			notok "$(label "$g"): ${BASH_REMATCH[1]}"
		elif [[ "$rest" =~ ^1\.\.([0-9]+)$ ]]; then
			plan[$g]=${BASH_REMATCH[1]}
		elif [[ "$rest" =~ ^#\  ]]; then
			if [ "$g" = s ]; then echo "$rest"; else echo "# [$g] ${rest#\# }"; fi
		fi
	done < <("$GUEST" run "$@" 2>&1; echo "RUN-STATUS=$?")
	local el=$((SECONDS - t0))
	for g in $expect; do
		if [ -z "${plan[$g]:-}" ]; then
			why+=("guest $g stopped before printing its plan (${seen[$g]:-0} results)")
		elif [ "${plan[$g]}" != "${seen[$g]:-0}" ]; then
			why+=("guest $g printed ${seen[$g]:-0} results for a plan of ${plan[$g]}")
		fi
	done
	case "$rc" in
	0) ;;
	124) why+=("timed out (guest.sh status 124)") ;;
	125) why+=("guest died without a status: crash, panic or qemu failure (125)") ;;
	*) [ "$fail" != "$failed_before" ] || why+=("guest.sh status $rc with no failed test") ;;
	esac
	if [ ${#why[@]} -gt 0 ]; then
		local IFS=';'
		notok "$name: guest run completed (${why[*]})"
	fi
	echo "# $name: ${el}s (guest.sh status $rc)"
	if [ "$fail" != "$failed_before" ]; then
		echo "# ---- $name: last 40 console lines ($log)"
		tail -n 40 "$log" | sed 's/^/#   /'
	fi
}

[ $# -gt 0 ] || set -- single ssh rxhost txhost linkcut retry numa
for sc in "$@"; do
	case "$sc" in
	single | single:*)
		names=${sc#single}
		names=${names#:}
		# 1500 s: the guest shares the CPUs with run_tests.sh's other lanes;
		# a clean-clone CI took 884 s for 164 results (2026-11-28), and
		# 900 s timed out the run before on a loaded machine. A bound for
		# a hang, not the expected time; past ~1000 s, split the list
		# into two boots.
		# shellcheck disable=SC2086 # a word list
		run_guest single s --timeout 1500 --mem 1536 "${common[@]}" \
			"$HERE/scenarios.sh" ${names//,/ } ;;
	rxhost)
		run_guest pair-rxhost a --pair --timeout 300 "${common[@]}" "$HERE/rdma_pair.sh" rxhost ;;
	ssh)
		# A boot of its own: a slow sshd must not fail rxhost's checks.
		run_guest pair-ssh a --pair --timeout 360 "${common[@]}" "$HERE/rdma_pair.sh" ssh ;;
	txhost)
		run_guest pair-txhost b --pair --timeout 420 "${common[@]}" "$HERE/rdma_pair.sh" txhost ;;
	linkcut)
		run_guest pair-linkcut "a b" --pair --timeout 320 "${common[@]}" "$HERE/rdma_pair.sh" linkcut ;;
	retry)
		run_guest pair-retry "a b" --pair --timeout 320 "${common[@]}" "$HERE/rdma_pair.sh" retry ;;
	benchhw)
		# The hardware qualification kit run from a against the pair
		# (rdma_pair.sh benchhw): the kit, its chart helper, the bench
		# scripts' shared lib.sh and bash (the guests' sh is busybox's),
		# and bench_ceiling when built (make build/tests/bench_ceiling;
		# else the kit's note is checked).
		hw=(--bin "$BASH" --file "$REPO/tests/bench/hw.sh:/test/hw.sh"
			--file "$REPO/tests/bench/chart.sh:/test/chart.sh"
			--file "$REPO/tests/bench/bench_lib.sh:/test/bench_lib.sh")
		if [ -x "$BUILD/tests/bench_ceiling" ]; then
			hw+=(--bin "$BUILD/tests/bench_ceiling")
		else
			echo "# benchhw: no $BUILD/tests/bench_ceiling: the kit runs without its ceiling row"
		fi
		# --rails: a second link and NIC in each guest (rxe1 on it,
		# rdma_pair.sh), so the kit's rails row runs.
		run_guest pair-benchhw a --pair --rails --timeout 900 "${common[@]}" "${hw[@]}" \
			"$HERE/rdma_pair.sh" benchhw ;;
	numa)
		# A boot of its own: two NUMA nodes, a NIC on each (eth0 on
		# node 1), and test_numa when built (its per-rail placement
		# case needs the two nodes; numa.sh runs it).
		nb=()
		[ -x "$BUILD/tests/test_numa" ] && nb=(--bin "$BUILD/tests/test_numa")
		run_guest numa s --numa --timeout 500 --mem 1024 "${common[@]}" "${nb[@]}" "$HERE/numa.sh" ;;
	*)
		notok "unknown scenario $sc (single[:NAME,...] rxhost txhost linkcut retry ssh numa benchhw)" ;;
	esac
done
echo "# total: $((SECONDS - start))s"
finish
