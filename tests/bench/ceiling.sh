#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`, network-free part (issue #14): the same engine file to
# file with no network (BUILD/tests/bench_ceiling: both ends in one
# process over the in-memory transport, tests/bench/ceiling.c) beside
# `cp` of the same file, in the same rounds, interleaved
# (the order rotates every round), medians. The source is in the page
# cache; the destination is tmpfs, then ext4 on a loop device (as root;
# skipped with a note when that cannot be made). Rows:
#   - 1 GiB of random data: cp; rdcp with 1, 2 (the default) and 4
#     workers; on tmpfs also --checksum none, 64 KiB chunks and, with a
#     window of 8 slots (too small to cover the stall, so that the row
#     shows whether the source waits behind one slow slot), plain and a
#     slow sink (one chunk write in 100 sleeps 5-20 ms first: -D); on ext4
#     also --no-direct (the default, auto, writes a file this large there
#     with O_DIRECT)
#   - 8 GiB sparse (1 MiB of data at the end): cp and rdcp both keep the
#     holes (rdcp plans around them with SEEK_DATA, cp --sparse=auto), so
#     this row shows that memory does not grow with the file's size, not
#     the pipeline's speed (that is the 1 GiB row)
#   - CPU seconds per GiB of each side's threads, peak RSS for 1 and 8 GiB
#   - per-core costs (CRC32, SHA-256, memcpy; bench_ceiling -m) and the
#     system calls per chunk of one 1 GiB copy (strace -f -c, untimed)
# Streams: memconn has no parallel lanes; the "delivered as N streams" rows
# shuffle its deliveries as N queue pairs would (the reorder window's cost).
#
#   tests/bench/ceiling.sh BUILD_DIR
# Environment: CEIL_REPS (5), CEIL_BIG_REPS (3), CEIL_MIB (1024),
# CEIL_BIG_MIB (8192), CEIL_DISK (1; 0: tmpfs only), CEIL_WORKERS
# ("1 2 4"). Raw lines go to BUILD/bench/ceiling-raw.txt, JSON to
# BUILD/bench/ceiling.json, a chart of the rdcp / cp column to
# BUILD/bench/ceiling.png (tests/bench/chart.sh); CEIL_REPORT=1 prints
# the tables (and draws the chart) again from the raw lines of the last
# run, measuring nothing.
set -euo pipefail
BUILD=${1:-build}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
. "$HERE/bench_lib.sh"
BIN=$(cd "$BUILD" && pwd)/tests/bench_ceiling
REPS=${CEIL_REPS:-5}
BIG_REPS=${CEIL_BIG_REPS:-3}
MIB=${CEIL_MIB:-1024}
BIG_MIB=${CEIL_BIG_MIB:-8192}
WORKERS=${CEIL_WORKERS:-1 2 4}
OUT=$BUILD/bench
mkdir -p "$OUT"
RAW=$OUT/ceiling-raw.txt
if [ "${CEIL_REPORT:-0}" != 1 ]; then
[ -x "$BIN" ] || { echo "ceiling: $BIN not built (make $BUILD/tests/bench_ceiling)" >&2; exit 1; }
command -v strace >/dev/null 2>&1 ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends strace >/dev/null || true

W=$(mktemp -d /var/tmp/rdcp-ceil.XXXXXX) # a disk file system: page cache
SHM=$(mktemp -d /dev/shm/rdcp-ceil.XXXXXX)
LOOP=
cleanup() {
	if [ -n "$LOOP" ]; then
		umount "$W/mnt" 2>/dev/null || true
		losetup -d "$LOOP" 2>/dev/null || true
	fi
	rm -rf "$W" "$SHM"
}
trap cleanup EXIT

dests=("tmpfs:$SHM")
disk_note=
if [ "${CEIL_DISK:-1}" = 1 ]; then
	mkdir -p "$W/mnt"
	truncate -s "$((BIG_MIB + MIB + 2048))M" "$W/ext4.img"
	if mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 \
		"$W/ext4.img" >/dev/null 2>&1 &&
		LOOP=$(losetup -f --show --direct-io=on "$W/ext4.img" 2>/dev/null) &&
		mount "$LOOP" "$W/mnt" 2>/dev/null; then
		dests+=("ext4:$W/mnt")
		disk_note="ext4 on $LOOP (loop, direct I/O to a file on $(findmnt -no FSTYPE,SOURCE -T "$W"))"
	else
		disk_note="no ext4 row: cannot make a loop device here (root needed)"
	fi
fi

src=$W/src.bin
head -c $((MIB * 1048576)) /dev/urandom >"$src"
cat "$src" >/dev/null # into the page cache
big=$W/sparse.bin
truncate -s "$((BIG_MIB - 1))M" "$big"
head -c 1048576 /dev/urandom >>"$big"

: >"$RAW"
rec() { echo "$*" >>"$RAW"; echo "# $*"; }
now() { date +%s.%N; }

# RUN NAME FS DIR FILE REP: one timed copy; rdcp rows are "rdcp_w2" (2
# workers), "rdcp_none" (--checksum none), "rdcp_c64k" (64 KiB chunks),
# "rdcp_nodirect" (--no-direct), "rdcp_lN" (memconn delivering as N streams),
# "rdcp_n8" (a window of 8 slots), "rdcp_slow" (the same, 1 chunk write
# in 100 slowed 5-20 ms).
run() {
	local name=$1 fs=$2 dir=$3 file=$4 rep=$5 t0 t1 line args=()
	local bytes size
	size=$(stat -c %s "$file")
	rm -f "$dir/out.bin"
	[ "$fs" = tmpfs ] || sync
	case $name in
	cp)
		t0=$(now); cp "$file" "$dir/out.bin"; t1=$(now)
		rec "$fs" "$size" cp "$rep" "$(awk -v a="$t0" -v z="$t1" 'BEGIN { printf "%.4f", z - a }')"
		;;
	rdcp_*)
		case $name in
		rdcp_w*) args=(-w "${name#rdcp_w}") ;;
		rdcp_none) args=(-k none) ;;
		rdcp_c64k) args=(-c 65536) ;;
		rdcp_nodirect) args=(-d off) ;;
		rdcp_l*) args=(-L "${name#rdcp_l}") ;;
		rdcp_n8) args=(-n 8) ;;
		rdcp_slow) args=(-n 8 -D 100:5-20) ;;
		esac
		t0=$(now)
		line=$("$BIN" "${args[@]}" "$file" "$dir" out.bin) ||
			{ echo "ceiling: $name failed: $line" >&2; exit 1; }
		t1=$(now)
		bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$line")
		[ "$bytes" = "$size" ] || { echo "ceiling: $name moved $bytes of $size bytes" >&2; exit 1; }
		if [ "$size" -le $((MIB * 1048576)) ]; then
			cmp -s "$file" "$dir/out.bin" || { echo "ceiling: $name copy differs" >&2; exit 1; }
		else # the data at the end; the rest was CRC-checked by rdcp
			cmp -s -i $((size - 1048576)) "$file" "$dir/out.bin" ||
				{ echo "ceiling: $name copy differs" >&2; exit 1; }
		fi
		rec "$fs" "$size" "$name" "$rep" \
			"$(awk -v a="$t0" -v z="$t1" 'BEGIN { printf "%.4f", z - a }')" \
			"${line#CEIL }"
		;;
	esac
	rm -f "$dir/out.bin"
}

echo "ceiling: load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $disk_note" >&2
echo "RUN date $(date -u +%Y-%m-%d) cores $(nproc) load0 $(cut -d' ' -f1 /proc/loadavg)" >>"$RAW"
"$BIN" -m 512 | tee -a "$RAW"

small=(cp)
for w in $WORKERS; do small+=("rdcp_w$w"); done
for rep in $(seq 1 "$REPS"); do
	for d in "${dests[@]}"; do
		fs=${d%%:*}
		names=("${small[@]}")
		[ "$fs" = tmpfs ] && names+=(rdcp_none rdcp_c64k rdcp_l2 rdcp_l4 rdcp_n8 rdcp_slow)
		[ "$fs" = tmpfs ] || names+=(rdcp_nodirect)
		n=${#names[@]}
		for i in $(seq 0 $((n - 1))); do # rotated: each leads in turn
			run "${names[$(((i + rep - 1) % n))]}" "$fs" "${d#*:}" "$src" "$rep"
		done
	done
done
for rep in $(seq 1 "$BIG_REPS"); do
	for d in "${dests[@]}"; do
		if [ $((rep % 2)) = 1 ]; then order=(rdcp_w2 cp); else order=(cp rdcp_w2); fi
		for name in "${order[@]}"; do run "$name" "${d%%:*}" "${d#*:}" "$big" "$rep"; done
	done
done
echo "RUN load1 $(cut -d' ' -f1 /proc/loadavg)" >>"$RAW"

# System calls per chunk (counts only; strace slows the copy down).
if command -v strace >/dev/null 2>&1; then
	strace -f -c -o "$W/strace.txt" "$BIN" "$src" "$SHM" out.bin >/dev/null
	rm -f "$SHM/out.bin"
	awk -v chunks="$MIB" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
		printf "SYSCALL %s %d %.2f\n", $NF, $4, $4 / chunks }' "$W/strace.txt" |
		sort -k3 -nr | head -12 >>"$RAW"
fi
fi # CEIL_REPORT

awk -v json="$OUT/ceiling.json" -v tsv="$OUT/ceiling.tsv" -v mib="$MIB" -v bigmib="$BIG_MIB" \
	-v reps="$REPS" -v bigreps="$BIG_REPS" -v workers="$WORKERS" "$BENCH_MEDIAN_AWK"'
function kv(s, key,   m) { return match(s, key "=[^ ]*") ? substr(s, RSTART + length(key) + 1, RLENGTH - length(key) - 1) : "" }
function add(k, v) { val[k, ++cnt[k]] = v }
$1 == "RUN" { for (i = 2; i < NF; i += 2) run[$i] = $(i + 1); next }
$1 == "MICRO" && $3 != "" && $4 == "GB/s" { micro[$2] = $3; mspg[$2] = $5 }
$1 == "MICRO" && $2 == "crc32_rdcp_is" { crcimpl = $3 }
$1 == "SYSCALL" { sc = sc sprintf("%s %s/chunk, ", $2, $4) }
$1 != "MICRO" && $1 != "SYSCALL" {
	k = $1 SUBSEP $2 SUBSEP $3
	add(k, $5); sizes[$2] = 1; fss[$1] = 1; names[$3] = 1
	if ($3 ~ /^rdcp/) {
		gib = $2 / 1073741824
		add(k SUBSEP "src", (kv($0, "src_user") + kv($0, "src_sys")) / gib)
		add(k SUBSEP "sink", (kv($0, "sink_user") + kv($0, "sink_sys")) / gib)
		add(k SUBSEP "srcsys", kv($0, "src_sys") / gib)
		add(k SUBSEP "sinksys", kv($0, "sink_sys") / gib)
		add(k SUBSEP "rss", kv($0, "maxrss_kib"))
	}
	raw = raw sprintf("%s{\"fs\":\"%s\",\"bytes\":%s,\"name\":\"%s\",\"rep\":%s,\"s\":%s}", raw == "" ? "" : ",", $1, $2, $3, $4, $5)
}
function row(fs, size, name, label,   k, t, c, mbs) {
	k = fs SUBSEP size SUBSEP name
	if (!cnt[k]) return
	t = median(k); c = median(fs SUBSEP size SUBSEP "cp")
	mbs = size / 1e6 / t
	if (name == "cp")
		printf "  %-34s %8.0f %6s %10s %10s %9s\n", label, mbs, "", "", "", ""
	else
		printf "  %-34s %8.0f %6.2f %10.2f %10.2f %9.0f\n", label, mbs, c ? c / t : 0,
			median(k SUBSEP "src"), median(k SUBSEP "sink"), median(k SUBSEP "rss") / 1024
	js = js sprintf("%s\"%s/%s/%s\":{\"mbps\":%.1f,\"vs_cp\":%.3f}", js == "" ? "" : ",", fs, size, name, mbs, c ? c / t : 0)
	if (name != "cp" && inchart) # the chart: rdcp / cp of the non-sparse rows
		printf "%s: %s\t%.3f\n", fs, label, (c ? c / t : 0) > tsv
}
END {
	printf "row\trdcp / cp\n" > tsv
	printf "\nNetwork-free ceiling (engine file to file over memconn, one memcpy per chunk; %s UTC, load %s -> %s, %s cores)\n", run["date"], run["load0"], run["load1"], run["cores"]
	printf "Per-core costs, 1 MiB buffers out of cache: CRC32 (%s) %.1f GB/s, zlib CRC32 %.1f GB/s, SHA-256 %.2f GB/s, memcpy %.1f GB/s (%.3f s/GiB)\n",
		crcimpl, micro["crc32_rdcp"], micro["crc32_zlib"], micro["sha256"], micro["memcpy"], mspg["memcpy"]
	n = split("tmpfs ext4", fsl, " ")
	for (i = 1; i <= n; i++) {
		fs = fsl[i]
		if (!fss[fs]) continue
		for (z = 1; z <= 2; z++) {
			s = sprintf("%.0f", (z == 1 ? mib : bigmib) * 1048576) # mawk: no %d past 2^31
			if (!cnt[fs SUBSEP s SUBSEP "cp"]) continue
			r = z == 2 ? bigreps : reps
			inchart = z == 1
			note = "rdcp / cp goal >= 1.0"
			if (z == 2) note = "both keep the holes: the time is the fixed cost of a session, the RSS must equal the row above"
			printf "\n %s, %.0f MiB%s, page cache -> %s, median of %d (MB/s; %s)\n",
				fs, s / 1048576, z == 2 ? " sparse" : "", fs, r, note
			printf "  %-34s %8s %6s %10s %10s %9s\n", "", "MB/s", "/cp", "src s/GiB", "sink s/GiB", "RSS MiB"
			row(fs, s, "cp", "cp")
			m = split(workers, wl, " ")
			for (j = 1; j <= m; j++)
				row(fs, s, "rdcp_w" wl[j], "rdcp, " wl[j] " worker" (wl[j] == 1 ? "" : "s") (wl[j] == 2 ? " (default)" : ""))
			row(fs, s, "rdcp_none", "rdcp, --checksum none")
			row(fs, s, "rdcp_c64k", "rdcp, 64 KiB chunks")
			row(fs, s, "rdcp_nodirect", "rdcp, --no-direct")
			row(fs, s, "rdcp_l2", "rdcp, delivered as 2 streams")
			row(fs, s, "rdcp_l4", "rdcp, delivered as 4 streams")
			row(fs, s, "rdcp_n8", "rdcp, window 8")
			row(fs, s, "rdcp_slow", "rdcp, window 8, 1 in 100 +5-20 ms")
		}
	}
	printf "\n  streams: memconn moves every chunk with one memcpy whatever the lanes; \"delivered as N streams\" shuffles its deliveries as N queue pairs would (slot s on lane s mod N), so those rows are the cost of the sink'"'"'s reorder window, not a parallel transport\n"
	if (sc != "") printf "  system calls per 1 MiB chunk, both sides, one 1 GiB copy to tmpfs: %s\n", substr(sc, 1, length(sc) - 2)
	printf "{\"ceiling\":{%s,\"micro\":{\"crc32\":%s,\"crc32_zlib\":%s,\"sha256\":%s,\"memcpy\":%s},\"raw\":[%s]}}\n",
		js, micro["crc32_rdcp"], micro["crc32_zlib"], micro["sha256"], micro["memcpy"], raw > json
}' "$RAW"
echo "raw numbers: $OUT/ceiling.json"
"$HERE/chart.sh" "$OUT/ceiling.png" \
	"Network-free ceiling, $MIB MiB, page cache to each file system: rdcp / cp (medians)" \
	"rdcp / cp" "$OUT/ceiling.tsv"
