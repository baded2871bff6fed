#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# --split (issue #25): one file of BENCH_SPLIT_MIB MiB (default 1024) from
# the page cache to tmpfs over TCP on loopback, pushed by one rdcp in 1, 2
# and 4 sessions (--split 0, 2, 4) to one receiver, interleaved: each round
# runs the three in another order (rotated), BENCH_REPS rounds (default
# 5), the median time and rate of each, and its ratio to one session.
# Run it in a network namespace of its own:
#
#   unshare -n bash -c 'ip link set lo up && tests/bench/split.sh build'
set -euo pipefail
BUILD=${1:-build}
RDCP=$(cd "$BUILD" && pwd)/rdcp
REPS=${BENCH_REPS:-5}
MIB=${BENCH_SPLIT_MIB:-1024}
W=$(mktemp -d /tmp/rdcp-bench-split.XXXXXX)
SHM=$(mktemp -d /dev/shm/rdcp-bench-split.XXXXXX)
RX=
cleanup() {
	[ -z "$RX" ] || kill "$RX" 2>/dev/null || true
	rm -rf "$W" "$SHM"
}
trap cleanup EXIT
PORT=$((20000 + $$ % 20000))

head -c $((MIB * 1048576)) /dev/urandom >"$W/src.bin"
cat "$W/src.bin" >/dev/null # into the page cache
mkdir -p "$SHM/rx"
"$RDCP" --listen --no-auth --transport tcp --root "$SHM/rx" --port "$PORT" \
	>"$W/rx.log" 2>&1 &
RX=$!
for _ in $(seq 50); do
	grep -q listening "$W/rx.log" 2>/dev/null && break
	sleep 0.1
done

# copy N: one push with --split N; its seconds (the --json summary's).
copy() {
	"$RDCP" --no-auth --transport tcp --port "$PORT" --split "$1" \
		--split-size 1M --json -q "$W/src.bin" "127.0.0.1::out" \
		>"$W/tx.json" 2>"$W/tx.err" ||
		{ echo "bench: --split $1 failed: $(cat "$W/tx.err")" >&2; exit 1; }
	grep -q "\"sessions\":$([ "$1" -gt 1 ] && echo "$1" || echo 1)," "$W/tx.json" ||
		{ echo "bench: --split $1 did not run its sessions" >&2; exit 1; }
	sed -n 's/.*"event":"summary".*"seconds":\([0-9.]*\),.*/\1/p' "$W/tx.json"
	rm -f "$SHM/rx/out"
}

MODES=(0 2 4)
declare -A T
for r in $(seq "$REPS"); do
	for i in 0 1 2; do
		m=${MODES[$(((i + r) % 3))]}
		T[$m]="${T[$m]:-} $(copy "$m")"
	done
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=$(echo "${T[0]}" | median)
printf '%-10s %10s %12s %8s   %s\n' sessions median_s MB/s ratio rounds
for m in "${MODES[@]}"; do
	med=$(echo "${T[$m]}" | median)
	printf '%-10s %10.3f %12.1f %8.2f  %s\n' "$([ "$m" = 0 ] && echo 1 || echo "$m")" \
		"$med" "$(echo "$MIB $med" | awk '{ print $1 * 1.048576 / $2 }')" \
		"$(echo "$base $med" | awk '{ print $1 / $2 }')" "${T[$m]}"
done
echo "# $MIB MiB, $REPS rounds interleaved, $(nproc) CPUs, $(uname -r)"
