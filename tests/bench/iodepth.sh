#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`: does the sink's I/O depth follow the device, not its
# threads (issue #25 item 2)? The network-free ceiling
# (BUILD/tests/bench_ceiling) writes with O_DIRECT, its sink's chunk
# writes made by its worker threads (-U off: one write in flight per
# worker, as before) or through its io_uring (-U 0: as many as the
# window has slots; since issue #25 the source's O_DIRECT reads too),
# interleaved, medians, at per-write latencies of 0,
# 100 and 1000 µs:
#   host   into ext4 on this host's disk (BENCH dir), the latency added to
#          every write by the bench (-D 1:MS-MS: the worker sleeps first,
#          or the io_uring holds the write that long behind a linked
#          timeout): an emulation, the same for both arms. Only whole
#          milliseconds can be added: 0 and 1000 µs. Then the same with
#          the latency added to every O_DIRECT read of the source (-R MS),
#          whose reads go through its io_uring too (-U 0) or not (-U off).
#   guest  in the Soft-RoCE guest's kernel (qemu TCG), into ext4 on a
#          null_blk device whose every request completes LAT µs after it
#          was queued (tests/bench/iodepth_guest.sh): a real block device
#          with a real latency. The guest's CPU is slow (qemu TCG: 15-20
#          MB/s for 64 KiB chunks with CRC32 on this VM, where 2 workers
#          at 1 ms would allow 131), so the guest runs 16 KiB chunks, one
#          worker and no checksum: the threads' bound, WORKERS x CHUNK /
#          latency, is 16 MB/s at 1 ms, below what the CPU moves.
# Nothing is asserted: it prints tables (MB/s, median) of each arm and
# the new / old ratio, and the most writes in flight the io_uring had.
#
#   tests/bench/iodepth.sh BUILD_DIR [host|guest|all]
# Environment: IOD_REPS (host 5, guest 3), IOD_MIB (host 256, guest 64),
# IOD_CHUNK (host 65536, guest 16384), IOD_WORKERS (host 2, guest 1),
# IOD_ARGS (more bench_ceiling options; guest default "-k none"), IOD_DIR
# (host: where the file goes, a disk file system; default BUILD_DIR/bench),
# IOD_LAT_US (guest: "0 100 1000"). Raw lines go to
# BUILD/bench/iodepth-raw.txt (host) and iodepth-guest.log.
set -euo pipefail
BUILD=${1:-build}
WHAT=${2:-all}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$(cd "$BUILD" && pwd)/tests/bench_ceiling
OUT=$BUILD/bench
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "iodepth: $BIN not built (make $BUILD/tests/bench_ceiling)" >&2; exit 1; }

# report RAW: "IOD LAT ARM ROUND key=value ..." lines to a table.
report() {
	awk -v mib="$1" '
	function med(k,   n, i, j, t, a) {
		n = cnt[k]
		for (i = 1; i <= n; i++) a[i] = v[k, i]
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	/^IOD / {
		lat = $2; arm = $3
		for (f = 5; f <= NF; f++) { split($f, kv, "="); x[kv[1]] = kv[2] }
		k = lat SUBSEP arm
		v[k, ++cnt[k]] = mib * 1048576 / x["secs"] / 1e6
		cpu[k, cnt[k]] = (x["sink_user"] + x["sink_sys"]) * 1024 / mib
		if (x["iodepth"] > peak[lat]) peak[lat] = x["iodepth"]
		if (!(lat in seen)) { seen[lat] = 1; order[++n] = lat }
	}
	END {
		printf "%-10s %14s %14s %8s %10s\n", "latency", "threads MB/s", "io_uring MB/s", "ratio", "in flight"
		for (i = 1; i <= n; i++) {
			l = order[i]; a = med(l SUBSEP "threads"); b = med(l SUBSEP "uring")
			printf "%-10s %14.1f %14.1f %8.2f %10d\n", l " us", a, b, a ? b / a : 0, peak[l]
		}
	}' "$2"
}

if [ "$WHAT" = host ] || [ "$WHAT" = all ]; then
	REPS=${IOD_REPS:-5}
	MIB=${IOD_MIB:-256}
	CHUNK=${IOD_CHUNK:-65536}
	WORKERS=${IOD_WORKERS:-2}
	read -r -a args <<<"${IOD_ARGS:-}"
	DIR=$(mktemp -d "${IOD_DIR:-$OUT}/iodepth.XXXXXX")
	trap 'rm -rf "$DIR"' EXIT
	RAW=$OUT/iodepth-raw.txt
	head -c $((MIB * 1048576)) /dev/urandom >"$DIR/src"
	echo "iodepth: host, $MIB MiB page cache -> $(df -T "$DIR" | awk 'NR == 2 { print $2 }') with O_DIRECT, chunk $CHUNK, $WORKERS workers, $REPS rounds, latency added by the bench, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)" >&2
	# host_arms RAW FLAG: FLAG -D (every write) or -R (every read) slowed.
	host_arms() {
		for lat in 0 1000; do
			slow=()
			if [ "$lat" != 0 ] && [ "$2" = -D ]; then
				slow=(-D "1:$((lat / 1000))-$((lat / 1000))")
			elif [ "$lat" != 0 ]; then
				slow=(-R "$((lat / 1000))")
			fi
			for r in $(seq 1 "$REPS"); do
				if [ $((r % 2)) = 1 ]; then arms="threads uring"; else arms="uring threads"; fi
				for arm in $arms; do
					u=off
					[ "$arm" = uring ] && u=0
					rm -f "$DIR/out"
					line=$("$BIN" -w "$WORKERS" -c "$CHUNK" -n 64 -d on -U "$u" "${slow[@]}" "${args[@]}" \
						"$DIR/src" "$DIR" out 2>/dev/null) ||
						{ echo "iodepth: $arm at $lat us failed: $line" >&2; exit 1; }
					cmp -s "$DIR/src" "$DIR/out" || { echo "iodepth: $arm copy differs" >&2; exit 1; }
					echo "IOD $lat $arm $r ${line#CEIL }" >>"$1"
				done
			done
		done
	}
	: >"$RAW"
	host_arms "$RAW" -D
	echo "Writes (the latency added to every write of the sink):"
	report "$MIB" "$RAW"
	RAWR=$OUT/iodepth-read-raw.txt
	: >"$RAWR"
	host_arms "$RAWR" -R
	echo "Reads (the latency added to every O_DIRECT read of the source; the same file read back):"
	report "$MIB" "$RAWR"
fi

if [ "$WHAT" = guest ] || [ "$WHAT" = all ]; then
	MIB=${IOD_MIB:-64}
	CHUNK=${IOD_CHUNK:-16384}
	WORKERS=${IOD_WORKERS:-1}
	gargs=${IOD_ARGS--k none}
	glog=$OUT/iodepth-guest.log
	read -r -a lats <<<"${IOD_LAT_US:-0 100 1000}"
	"$HERE/../guest/guest.sh" prepare
	"$HERE/../guest/guest.sh" run --timeout 3000 --mem 1536 --bin "$BIN" \
		"$HERE/iodepth_guest.sh" "$MIB" "${IOD_REPS:-3}" "$CHUNK" "$WORKERS" \
		"$gargs" "${lats[@]}" >"$glog" 2>&1 ||
		{ echo "iodepth: the guest run failed, see $glog" >&2; exit 1; }
	echo "Soft-RoCE guest (qemu TCG), ext4 on null_blk with that completion time, $MIB MiB, chunk $CHUNK, $WORKERS workers, $gargs, median of ${IOD_REPS:-3}:"
	grep '^# kernel' "$glog" || true
	report "$MIB" "$glog"
fi
