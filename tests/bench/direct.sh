#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# O_DIRECT on a real file system (issue #14): one large file copied within
# an ext4 file system on a loop device, over TCP loopback, by
#   rdcp --direct, rdcp --no-direct, rdcp (auto: the default) and cp,
# interleaved (each round starts with the next contender), REPS rounds,
# medians. Each copy starts from a cold page cache (sync, drop_caches),
# or with BENCH_DIRECT_HOT=1 with the source read into it first. Two
# times per copy: until the command returns, and until a sync after it
# returns (the data on the device: buffered writes leave it dirty in the
# page cache). Also each side's CPU seconds (getrusage, rdcp -v) and how
# much of the copy the page cache holds afterwards (what the copy pushed
# out of it). Root only (losetup, mount, drop_caches; skipped with a note
# otherwise); nothing asserted: it prints tables. `make bench` runs it.
#
#   tests/bench/direct.sh BUILD_DIR
# Then the experiment behind the choices (tests/bench/dio_probe.c, built
# here, with liburing when pkg-config finds it): the same file written and
# read in 1 MiB chunks from a 64-slot ring, buffered or O_DIRECT from 1 to
# 8 threads, or O_DIRECT through one io_uring at queue depth 1 to 8,
# BENCH_PROBE_REPS rounds (3), medians; BENCH_PROBE_REPS=0 skips it.
# Environment: BENCH_DIRECT_MIB (file size, 1024), BENCH_REPS (5),
# BENCH_DIRECT_DIR (where the image file goes: a disk file system, default
# BUILD_DIR/bench), BENCH_DIRECT_HOT, BENCH_DIRECT_HOT_PCT (with HOT:
# only the first PCT % of the source read into the cache, as a copy cut
# short leaves it; default 100), BENCH_DIRECT_ARGS (more rdcp arguments for
# both sides: --workers 4, ...), BENCH_DIRECT_WHO (the contenders, default
# "direct nodirect auto cp"; "base" is auto with the rdcp at
# BENCH_DIRECT_BASE, another build, as the sender: before/after rows).
# Run it in a network namespace of its own:
#   unshare -n sh -c 'ip link set lo up && tests/bench/direct.sh build'
set -euo pipefail
BUILD=${1:-build}
RDCP=$(cd "$BUILD" && pwd)/rdcp
MIB=${BENCH_DIRECT_MIB:-1024}
REPS=${BENCH_REPS:-5}
OUT=$BUILD/bench
mkdir -p "$OUT"
DIR=${BENCH_DIRECT_DIR:-$OUT}
HOT=${BENCH_DIRECT_HOT:-}
HOT_PCT=${BENCH_DIRECT_HOT_PCT:-100}
BASE=${BENCH_DIRECT_BASE:-}
read -r -a EXTRA <<<"${BENCH_DIRECT_ARGS:-}"
read -r -a WHO <<<"${BENCH_DIRECT_WHO:-direct nodirect auto cp}"
if [ "$(id -u)" != 0 ]; then
	echo "direct.sh: not root: no O_DIRECT bench (it needs losetup and mount)" >&2
	exit 0
fi

W=$(mktemp -d /tmp/rdcp-direct.XXXXXX)
IMG=$DIR/direct-bench.$$.img
MNT=$W/mnt
LOOP=
RX=
# Every step on its own: a failed one (under set -e) must not skip the
# rest, or the loop device and its mount outlive the run.
cleanup() {
	if [ -n "$RX" ]; then
		kill "$RX" 2>/dev/null || true
		wait "$RX" 2>/dev/null || true
	fi
	if mountpoint -q "$MNT" 2>/dev/null; then umount "$MNT" || true; fi
	if [ -n "$LOOP" ]; then losetup -d "$LOOP" || true; fi
	rm -rf "$W" "$IMG"
}
trap cleanup EXIT

truncate -s $((MIB * 3 + 512))M "$IMG"
mkfs.ext4 -q -F "$IMG"
# The loop device reads and writes its file with O_DIRECT where it can, so
# the "disk" is the host's disk, not a second page cache.
LOOP=$(losetup -f --show --direct-io=on "$IMG" 2>/dev/null) ||
	LOOP=$(losetup -f --show "$IMG")
mkdir -p "$MNT"
mount "$LOOP" "$MNT"
mkdir -p "$MNT/rx"
SRC=$MNT/src.bin
head -c $((MIB * 1048576)) /dev/urandom >"$SRC"
sync
BYTES=$((MIB * 1048576))
PORT=$((20000 + $$ % 20000))
"$RDCP" --listen --no-auth -q --transport tcp --root "$MNT/rx" \
	--port "$PORT" "${EXTRA[@]}" &
RX=$!
sleep 0.5
TCK=$(getconf CLK_TCK)

now() { date +%s.%N; }
rx_cpu() { awk -v hz="$TCK" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$RX/stat"; }
cached_mib() { # FILE: MiB of it in the page cache
	fincore -b -n -o RES "$1" 2>/dev/null | awk '{ printf "%d", $1 / 1048576 }'
}

RAW=$OUT/direct-raw.txt
: >"$RAW"
copy() { # WHO REP
	local who=$1 dst=$MNT/rx/out.bin t0 t1 t2 c0 c1 scpu=0
	sync
	echo 3 >/proc/sys/vm/drop_caches
	[ -n "$HOT" ] && head -c $((BYTES * HOT_PCT / 100)) "$SRC" >/dev/null
	c0=$(rx_cpu)
	t0=$(now)
	case $who in
	cp)
		/usr/bin/time -f "%U %S" -o "$W/cp.time" cp "$SRC" "$dst"
		scpu=$(awk '{ printf "%.3f", $1 + $2 }' "$W/cp.time")
		;;
	*)
		local mode=() bin=$RDCP
		[ "$who" = direct ] && mode=(--direct)
		[ "$who" = nodirect ] && mode=(--no-direct)
		[ "$who" = base ] && bin=$BASE
		"$bin" -v --no-auth --transport tcp --port "$PORT" "${EXTRA[@]}" \
			"${mode[@]}" "$SRC" "127.0.0.1::out.bin" 2>"$W/tx.log" ||
			{ cat "$W/tx.log" >&2; echo "direct.sh: $who failed" >&2; exit 1; }
		scpu=$(awk '/resources:/ { printf "%.3f", $4 + $7 }' "$W/tx.log")
		;;
	esac
	t1=$(now)
	sync
	t2=$(now)
	c1=$(rx_cpu)
	local res
	res=$(cached_mib "$dst")
	cmp -s "$SRC" "$dst" || { echo "direct.sh: $who: the copy differs" >&2; exit 1; }
	[ "$(stat -c %s "$dst")" = "$BYTES" ] || { echo "direct.sh: $who: wrong size" >&2; exit 1; }
	rm -f "$dst"
	echo "$who $2 $(awk -v b="$BYTES" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.1f", b / 1e6 / (z - a) }') \
$(awk -v b="$BYTES" -v a="$t0" -v z="$t2" 'BEGIN { printf "%.1f", b / 1e6 / (z - a) }') \
$scpu $(awk -v a="$c0" -v z="$c1" 'BEGIN { printf "%.3f", z - a }') $res" | tee -a "$RAW"
}

n=${#WHO[@]}
for rep in $(seq 1 "$REPS"); do
	for i in $(seq 0 $((n - 1))); do
		copy "${WHO[$(((rep + i) % n))]}" "$rep"
	done
done

awk -v mib="$MIB" -v reps="$REPS" -v hot="${HOT:+hot ($HOT_PCT %)}" -v args="${EXTRA[*]}" '
function median(k, name,   n, i, j, t, a) {
	n = cnt[name]
	for (i = 1; i <= n; i++) a[i] = val[k, name, i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	if (!cnt[$1]++) order[++no] = $1
	for (k = 3; k <= 7; k++) val[k, $1, cnt[$1]] = $k
}
END {
	printf "\n%d MiB file, ext4 on a loop device, TCP loopback, %s source page cache%s, median of %d\n",
		mib, hot ? hot : "cold", args ? ", rdcp " args : "", reps
	printf "  %-10s %12s %12s %10s %10s %10s\n", "", "MB/s ret", "MB/s synced", "tx cpu s", "rx cpu s", "cached MiB"
	for (i = 1; i <= no; i++) {
		w = order[i]
		printf "  %-10s %12.1f %12.1f %10.2f %10.2f %10d\n", w, median(3, w),
			median(4, w), median(5, w), median(6, w), median(7, w)
	}
	if (cnt["cp"]) for (i = 1; i <= no; i++) if (order[i] != "cp")
		printf "  %s / cp = %.2f returned, %.2f synced\n", order[i],
			median(3, order[i]) / median(3, "cp"), median(4, order[i]) / median(4, "cp")
}' "$RAW"

# ---- the probe: threads against io_uring, buffered against direct ----
PREPS=${BENCH_PROBE_REPS:-3}
[ "$PREPS" -gt 0 ] || exit 0
kill "$RX" 2>/dev/null
wait "$RX" 2>/dev/null || true
RX=
rm -f "$SRC"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
uring=()
if pkg-config --exists liburing 2>/dev/null; then
	# shellcheck disable=SC2207 # compiler flags: words
	uring=(-DHAVE_URING $(pkg-config --cflags --libs liburing))
fi
${CC:-cc} -O2 -std=c11 -Wall -o "$W/dio_probe" "$HERE/dio_probe.c" \
	"${uring[@]}" -pthread
PRAW=$OUT/direct-probe-raw.txt
: >"$PRAW"
for rep in $(seq 1 "$PREPS"); do
	"$W/dio_probe" "$MNT/probe.bin" "$MIB" >>"$PRAW"
done
awk -v mib="$MIB" -v reps="$PREPS" -v uring="${uring[*]:+yes}" '
function median(k, v,   n, i, j, t, a) {
	n = cnt[k]
	for (i = 1; i <= n; i++) a[i] = val[k, v, i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == "PROBE" {
	k = $2 " " $3; if (!seen[k]++) order[++no] = k
	kk = k " " $4; n = ++cnt[kk]; val[kk, "mbs", n] = $5; val[kk, "cpu", n] = $6
}
END {
	printf "\nThe same file written (then fdatasync) and read cold, 1 MiB chunks, median of %d%s\n",
		reps, uring ? "" : " (no liburing: no io_uring rows)"
	printf "  %-14s %11s %11s %11s %11s\n", "", "write MB/s", "cpu s", "read MB/s", "cpu s"
	for (i = 1; i <= no; i++) {
		k = order[i]; split(k, p, " ")
		printf "  %-14s %11.0f %11.3f %11.0f %11.3f\n", p[1] (p[1] == "uring" ? " qd " : " x") p[2],
			median(k " write", "mbs"), median(k " write", "cpu"),
			median(k " read", "mbs"), median(k " read", "cpu")
	}
}' "$PRAW"
