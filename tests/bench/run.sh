#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`: rdcp measured side by side with the tools it must beat, in
# one run, so only ratios are reported (never absolute numbers asserted in
# tests). Soft-RoCE part: boots the guest and runs rdma_guest.sh there
# (ib_write_bw, rdcp, rcopy and rdcp --streams 1, 2, 4 interleaved,
# then --streams 2 over one rail and two, BENCH_REPS times, median of
# each);
# prints a table of medians and ratios and writes the raw numbers as JSON
# to build/bench/rdma.json, a chart of the medians to build/bench/rdma.png
# (tests/bench/chart.sh).
#
#   tests/bench/run.sh BUILD_DIR
# Environment: BENCH_MIB (file size, default 256), BENCH_REPS (default 5),
# BENCH_BASE (another rdcp binary, e.g. main's build: run in every round
# beside rdcp, in ABBA order, as a baseline; the ratio is printed; it must
# take the same command line, HOST::PATH).
set -euo pipefail
BUILD=${1:-build}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
. "$HERE/bench_lib.sh"
OUT=$BUILD/bench
mkdir -p "$OUT"
log=$OUT/rdma-guest.log

"$HERE/../guest/guest.sh" prepare
base=()
[ -n "${BENCH_BASE:-}" ] && base=(--file "$BENCH_BASE:/usr/bin/rdcp_base")
"$HERE/../guest/guest.sh" run --timeout 3600 --mem 2048 --bin "$BUILD/rdcp" \
	"${base[@]}" "$HERE/rdma_guest.sh" "${BENCH_MIB:-256}" \
	"${BENCH_REPS:-5}" 1048576 ${BENCH_BASE:+rdcp_base} 2>&1 |
	tee "$log" | grep -E '^(BENCH|#)' || true
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || { echo "bench: the guest run failed ($status), see $log" >&2; exit 1; }
if grep -Eq '^# .*(failed|differs)' "$log"; then
	echo "bench: a copy failed or differs (see $log): no table" >&2
	exit 1
fi

awk -v json="$OUT/rdma.json" -v tsv="$OUT/rdma.tsv" -v mib="${BENCH_MIB:-256}" "$BENCH_MEDIAN_AWK"'
$1 == "BENCH" {
	n = ++cnt[$2]; val[$2, n] = $4
	if ($2 == "rdcp") { scpu[++ns] = $5; rcpu[ns] = $6 }
	if ($2 ~ /^rss_/) { rss[$2, "s"] = $7; rss[$2, "r"] = $8 }
	if ($2 == "rnr") rnr = $4
	raw = raw sprintf("%s{\"name\":\"%s\",\"rep\":%s,\"mbps\":%s}", raw == "" ? "" : ",", $2, $3, $4)
}
END {
	w64 = median("ib_write_bw_64k"); wch = median("ib_write_bw_chunk")
	ceil = w64 > wch ? w64 : wch
	r = median("rdcp"); c = median("rcopy"); b = median("rdcp_base")
	printf "\nSoft-RoCE guest (qemu TCG, emulated: ratios only), median of %d\n", cnt["rdcp"]
	printf "  %-28s %10s\n", "contender", "MB/s"
	printf "  %-28s %10.2f\n", "ib_write_bw 64 KiB", w64
	printf "  %-28s %10.2f\n", "ib_write_bw chunk size", wch
	printf "  %-28s %10.2f\n", "rcopy (rsockets, no checksum)", c
	printf "  %-28s %10.2f\n", "rdcp (crc32)", r
	printf "  rdcp / ib_write_bw best   = %.2f   (target >= 0.95)\n", ceil ? r / ceil : 0
	printf "  rdcp / rcopy              = %.2f   (target >= 1.10)\n", c ? r / c : 0
	for (k = 1; k <= 4; k *= 2) {
		m = median("rdcp_s" k)
		if (cnt["rdcp_s" k])
			printf "  rdcp --streams %d           %10.2f MB/s, / ib_write_bw best = %.2f, / rcopy = %.2f\n", k, m, ceil ? m / ceil : 0, c ? m / c : 0
	}
	o = median("rdcp_s2_1rail"); t2 = median("rdcp_s2_2rails")
	if (cnt["rdcp_s2_2rails"])
		printf "  rdcp --streams 2, 1 rail   %10.2f MB/s; 2 rails (rxe0, rxe1) %.2f MB/s: 2 rails / 1 = %.2f (one emulated host: the cost of a rail, not its bandwidth)\n", o, t2, o ? t2 / o : 0
	if (b) printf "  rdcp / rdcp_base          = %.2f   (baseline %.2f MB/s; baseline / ib_write_bw best = %.2f)\n", r / b, b, ceil ? b / ceil : 0
	for (i = 1; i <= ns; i++) { s += scpu[i]; t += rcpu[i] }
	if (ns) printf "  rdcp CPU s per GiB: sender %.2f, receiver %.2f (emulated)\n",
		s / ns * 1024 / mib, t / ns * 1024 / mib
	printf "  peak RSS KiB, 1 GiB file: sender %s receiver %s; 8 GiB: sender %s receiver %s\n",
		rss["rss_1g", "s"], rss["rss_1g", "r"], rss["rss_8g", "s"], rss["rss_8g", "r"]
	printf "  RNR errors during the bench: %s\n", rnr
	printf "contender\tMB/s\n" > tsv
	printf "ib_write_bw 64 KiB\t%.2f\nib_write_bw chunk size\t%.2f\nrcopy\t%.2f\nrdcp\t%.2f\n", w64, wch, c, r > tsv
	for (k = 1; k <= 4; k *= 2)
		if (cnt["rdcp_s" k]) printf "rdcp --streams %d\t%.2f\n", k, median("rdcp_s" k) > tsv
	if (cnt["rdcp_s2_2rails"])
		printf "rdcp --streams 2, 1 rail\t%.2f\nrdcp --streams 2, 2 rails\t%.2f\n", o, t2 > tsv
	if (b) printf "rdcp_base\t%.2f\n", b > tsv
	printf "{\"soft_roce\":{\"ib_write_bw_64k\":%s,\"ib_write_bw_chunk\":%s,\"rcopy\":%s,\"rdcp\":%s,\"raw\":[%s]}}\n",
		w64, wch, c, r, raw > json
}' "$log"
echo "raw numbers: $OUT/rdma.json"
"$HERE/chart.sh" "$OUT/rdma.png" "Soft-RoCE guest (emulated: ratios only), medians" \
	"MB/s" "$OUT/rdma.tsv"
