#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`, rdcp-mpi part: the aggregate rate of 1, 2 and 4 ranks on
# the same data (BENCH_MPI_FILES files of BENCH_MPI_MB MB each in tmpfs,
# and 2000 files of 4 KiB), to two receivers on 127.0.0.1 sharing a tmpfs
# root, median of BENCH_REPS runs. Two rows per rank count:
#   - unlimited: what this host gives; on a 2-core VM the ranks and the
#     receivers share the same two cores, so this shows the overhead of
#     coordination more than scaling
#   - --bwlimit BENCH_MPI_LIMIT per rank: each rank's session held to a
#     "node link" of that rate, as on a cluster where each node has its
#     own NIC: the ideal is N times one rank
# Prints a table; raw numbers go to BUILD/bench/mpi.json. Not a test:
# nothing is asserted. Runs in a network namespace of its own when it can.
#
#   tests/bench/mpi.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
if [ -z "${RDCP_MPI_NETNS:-}" ] && [ "$(id -u)" = 0 ] &&
	unshare -n true 2>/dev/null; then
	# shellcheck disable=SC2016 # expanded by the inner bash
	exec unshare -n env RDCP_MPI_NETNS=1 bash -c \
		'ip link set lo up && exec bash "$0" "$1"' "${BASH_SOURCE[0]}" "$BUILD"
fi
REPS=${BENCH_REPS:-3}
NFILES=${BENCH_MPI_FILES:-32}
MB=${BENCH_MPI_MB:-16}
LIMIT=${BENCH_MPI_LIMIT:-40M}
OUT=$BUILD/bench
mkdir -p "$OUT"
for b in rdcp rdcp-mpi; do
	[ -x "$BUILD/$b" ] || { echo "bench mpi: $BUILD/$b missing (make all mpi)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "bench mpi: no mpirun (openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
W=$(mktemp -d /dev/shm/rdcp-bench-mpi.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT

mkdir -p "$W/src/big" "$W/src/small" "$W/dst"
for i in $(seq 1 "$NFILES"); do head -c $((MB * 1000000)) /dev/urandom >"$W/src/big/f$i"; done
for i in $(seq 1 2000); do head -c 4096 /dev/urandom >"$W/src/small/f$i"; done
TOTAL=$(du -sb "$W/src" | cut -f1)
"$BUILD/rdcp" --keygen "$W/key" >/dev/null 2>&1
for p in 7901 7902; do
	"$BUILD/rdcp" --listen -q --transport tcp -P "$p" --root "$W/dst" \
		--key-file "$W/key" &
	PIDS+=($!)
done
sleep 0.5

# one NP [ARGS...]: seconds of one job (the --json summary's).
one() {
	local np=$1 s
	shift
	rm -rf "$W/dst/run"
	s=$(mpirun --oversubscribe -np "$np" "$BUILD/rdcp-mpi" --transport tcp \
		--key-file "$W/key" --json -q "$@" -r "$W/src" \
		rdcp://127.0.0.1:7901,127.0.0.1:7902/run |
		sed -n 's/.*"event":"summary".*"seconds":\([0-9.]*\).*/\1/p')
	echo "${s:-0}"
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

printf '# rdcp-mpi: %s MB in %s files + 2000 x 4 KiB, 2 receivers, TCP loopback, %s cores\n' \
	$((TOTAL / 1000000)) "$NFILES" "$(nproc)"
printf '%-22s %6s %10s %10s\n' "run" "ranks" "seconds" "MB/s"
json="["
for mode in unlimited limited; do
	base=
	for np in 1 2 4; do
		args=()
		[ "$mode" = unlimited ] || args=(--bwlimit "$LIMIT")
		s=$(for _ in $(seq 1 "$REPS"); do one "$np" "${args[@]}"; done | median)
		rate=$(awk -v b="$TOTAL" -v s="$s" 'BEGIN {printf "%.1f", (s > 0) ? b / s / 1e6 : 0}')
		[ -n "$base" ] || base=$rate
		label=$mode
		[ "$mode" = unlimited ] || label="--bwlimit $LIMIT/rank"
		printf '%-22s %6d %10.2f %10s  (x%s)\n' "$label" "$np" "$s" "$rate" \
			"$(awk -v a="$rate" -v b="$base" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')"
		json="$json{\"mode\":\"$mode\",\"ranks\":$np,\"seconds\":$s,\"mb_per_s\":$rate},"
	done
done
json="${json%,}]"
echo "$json" >"$OUT/mpi.json"
echo "# raw: $OUT/mpi.json"
