#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`: does --hugepages pay for itself? The network-free ceiling
# (BUILD/tests/bench_ceiling, tests/bench/ceiling.c: both engines in one
# process over the in-memory transport, whose ring and staging come from
# the same allocator as a real session's) copies a file from the page
# cache to tmpfs with the ring and staging in
#   hugetlb  2 MiB pages of the hugetlb pool (-H on; the pool is raised
#            to what two areas take for the run, as root, and put back)
#   thp      transparent huge pages (auto with an empty pool: a fake
#            sysfs root, RDCP_SYSFS_ROOT, says none is free)
#   4k       ordinary pages (-H off)
# in interleaved rounds (the order rotates), medians of wall time and of
# each side's CPU. Every session maps its areas anew, so the page faults
# (or their absence) are paid per copy, as on a receiver.
#
# With HP_GUEST=1, then the same three arms over Soft-RoCE in the guest
# (tests/bench/hugepages_guest.sh: rdcp to itself on rxe0, both sides
# with the arm's pages), HP_GUEST_MIB (64) per copy, HP_GUEST_REPS (5).
#
#   tests/bench/hugepages.sh BUILD_DIR
# Environment: HP_REPS (7), HP_MIB (1024), HP_CHUNK (1048576), HP_WINDOW
# (64). Raw lines go to BUILD/bench/hugepages-raw.txt (and
# hugepages-guest.log).
set -euo pipefail
BUILD=${1:-build}
BIN=$(cd "$BUILD" && pwd)/tests/bench_ceiling
REPS=${HP_REPS:-7}
MIB=${HP_MIB:-1024}
CHUNK=${HP_CHUNK:-1048576}
WINDOW=${HP_WINDOW:-64}
OUT=$BUILD/bench
mkdir -p "$OUT"
RAW=$OUT/hugepages-raw.txt
[ -x "$BIN" ] || { echo "hugepages: $BIN not built (make $BUILD/tests/bench_ceiling)" >&2; exit 1; }

W=$(mktemp -d /var/tmp/rdcp-hp.XXXXXX)
SHM=$(mktemp -d /dev/shm/rdcp-hp.XXXXXX)
NR=/proc/sys/vm/nr_hugepages
old_nr=$(cat "$NR")
cleanup() {
	echo "$old_nr" >"$NR" 2>/dev/null || true
	rm -rf "$W" "$SHM"
}
trap cleanup EXIT

# The fake sysfs of the thp arm: no free hugetlb page, THP on madvise.
mkdir -p "$W/sys/kernel/mm/hugepages/hugepages-2048kB" "$W/sys/kernel/mm/transparent_hugepage"
echo 0 >"$W/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
echo 0 >"$W/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages"
echo "always [madvise] never" >"$W/sys/kernel/mm/transparent_hugepage/enabled"

# Two areas (ring, staging) of WINDOW x CHUNK + a page of headers each.
need=$((2 * ((WINDOW * CHUNK + 4096 + 2097151) / 2097152)))
arms=(thp 4k)
if echo $((old_nr + need)) >"$NR" 2>/dev/null &&
	[ "$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)" -ge "$need" ]; then
	arms=(hugetlb thp 4k)
else
	echo "hugepages: cannot reserve $need huge pages (root needed): hugetlb arm left out" >&2
fi

src=$W/src.bin
head -c $((MIB * 1048576)) /dev/urandom >"$src"
cat "$src" >/dev/null

: >"$RAW"
run() { # ARM ROUND
	local arm=$1 line t0 t1 env=() args=(-c "$CHUNK" -n "$WINDOW")
	case $arm in
	hugetlb) args+=(-H on) ;;
	thp) env=(RDCP_SYSFS_ROOT="$W/sys") ;;
	4k) args+=(-H off) ;;
	esac
	rm -f "$SHM/out.bin"
	t0=$(date +%s.%N)
	line=$(env "${env[@]}" "$BIN" "${args[@]}" "$src" "$SHM" out.bin) ||
		{ echo "hugepages: $arm failed: $line" >&2; exit 1; }
	t1=$(date +%s.%N)
	cmp -s "$src" "$SHM/out.bin" || { echo "hugepages: $arm copy differs" >&2; exit 1; }
	grep -q " pages=$arm\$" <<<"$line" || { echo "hugepages: $arm did not get its pages: $line" >&2; exit 1; }
	echo "$arm $2 $(awk -v a="$t0" -v z="$t1" 'BEGIN { printf "%.4f", z - a }') ${line#CEIL }" >>"$RAW"
}

echo "hugepages: $MIB MiB page cache -> tmpfs, chunk $CHUNK, window $WINDOW, $REPS rounds, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)" >&2
n=${#arms[@]}
for r in $(seq 1 "$REPS"); do
	for i in $(seq 0 $((n - 1))); do
		run "${arms[$(((i + r) % n))]}" "$r"
	done
done

# Medians per arm: wall, GB/s, CPU s/GiB per side (user + sys).
awk -v mib="$MIB" '
function med(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	arm = $1; k = ++cnt[arm]
	for (f = 4; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
	wall[arm, k] = $3
	src[arm, k] = (v["src_user"] + v["src_sys"]) * 1024 / mib
	snk[arm, k] = (v["sink_user"] + v["sink_sys"]) * 1024 / mib
	sys[arm, k] = (v["src_sys"] + v["sink_sys"]) * 1024 / mib
	if (!(arm in seen)) { seen[arm] = 1; order[++na] = arm }
}
END {
	printf "%-8s %8s %8s %12s %12s %12s\n", "pages", "wall s", "GB/s", "src CPU/GiB", "sink CPU/GiB", "sys CPU/GiB"
	for (i = 1; i <= na; i++) {
		arm = order[i]; n = cnt[arm]
		for (k = 1; k <= n; k++) { a[k] = wall[arm, k]; b[k] = src[arm, k]; c[k] = snk[arm, k]; d[k] = sys[arm, k] }
		w = med(a, n)
		printf "%-8s %8.3f %8.2f %12.3f %12.3f %12.3f\n", arm, w, mib * 1048576 / w / 1e9, med(b, n), med(c, n), med(d, n)
	}
}' "$RAW"

[ "${HP_GUEST:-0}" = 1 ] || exit 0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
glog=$OUT/hugepages-guest.log
"$HERE/../guest/guest.sh" prepare
"$HERE/../guest/guest.sh" run --timeout 3000 --mem 1536 --bin "$BUILD/rdcp" \
	"$HERE/hugepages_guest.sh" "${HP_GUEST_MIB:-64}" "${HP_GUEST_REPS:-5}" >"$glog" 2>&1 ||
	{ echo "hugepages: the guest run failed, see $glog" >&2; exit 1; }
echo "Soft-RoCE guest (qemu TCG: ratios only), ${HP_GUEST_MIB:-64} MiB, median of ${HP_GUEST_REPS:-5}:"
awk '/^HPG / { k = ++cnt[$2]; t[$2, k] = $4; if (!($2 in seen)) { seen[$2] = 1; o[++n] = $2 } }
END {
	for (i = 1; i <= n; i++) {
		a = o[i]; m = cnt[a]
		for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++)
			if (t[a, y] < t[a, x]) { z = t[a, x]; t[a, x] = t[a, y]; t[a, y] = z }
		med = m % 2 ? t[a, (m + 1) / 2] : (t[a, m / 2] + t[a, m / 2 + 1]) / 2
		printf "%-8s %8.2f s\n", a, med
	}
}' "$glog"
