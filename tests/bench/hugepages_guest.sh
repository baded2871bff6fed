#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# In the Soft-RoCE guest (tests/bench/hugepages.sh boots it with
# HP_GUEST=1): one receiver and one sender on rxe0 (10.77.0.1) copy a
# file from tmpfs to tmpfs with their ring and staging in hugetlb pages
# (the pool sized for both, --hugepages on), transparent huge pages (the
# pool emptied, auto) or 4 KiB pages (--hugepages off), interleaved, the
# order rotating each round. Prints "HPG ARM ROUND SECONDS" lines, the
# copy checked byte for byte.
#   hugepages_guest.sh MIB ROUNDS
MIB=${1:-64}
ROUNDS=${2:-5}
W=/tmp/hpg
NR=/proc/sys/vm/nr_hugepages
rm -rf "$W"
mkdir -p "$W/rx" || exit 1
head -c $((MIB * 1048576)) /dev/urandom >"$W/src"
P=7700
fail=0
run() { # ARM ROUND
	case $1 in
	hugetlb) echo 80 >$NR; opt="--hugepages on" ;;
	thp) echo 0 >$NR; opt="--hugepages auto" ;;
	4k) echo 0 >$NR; opt="--hugepages off" ;;
	esac
	P=$((P + 1))
	rm -f "$W/rx/out"
	# shellcheck disable=SC2086 # opt is two words
	rdcp --listen --once --no-auth --root "$W/rx" --port $P $opt >"$W/rx.log" 2>&1 &
	rx=$!
	usleep 300000
	t0=$(cut -d' ' -f1 /proc/uptime)
	# shellcheck disable=SC2086
	timeout -s KILL 300 rdcp --no-auth -v --port $P $opt "$W/src" "10.77.0.1::out" >"$W/tx.log" 2>&1
	rc=$?
	t1=$(cut -d' ' -f1 /proc/uptime)
	wait $rx
	if [ "$rc" != 0 ] || ! cmp -s "$W/src" "$W/rx/out"; then
		echo "# $1: exit $rc or the copy differs"
		tail -5 "$W/tx.log" | sed 's/^/# /'
		fail=1
	fi
	grep -q "staging buffers: .* in $2" "$W/tx.log" || {
		echo "# $1: $(grep 'staging buffers:' "$W/tx.log")"
		fail=1
	}
	echo "HPG $1 $3 $(awk -v a="$t0" -v z="$t1" 'BEGIN { printf "%.2f", z - a }')"
}
for r in $(seq 1 "$ROUNDS"); do
	for i in 0 1 2; do
		case $(((i + r) % 3)) in
		0) run hugetlb "2 MiB huge pages" "$r" ;;
		1) run thp "transparent huge pages" "$r" ;;
		2) run 4k "4 KiB pages" "$r" ;;
		esac
	done
done
exit $fail
