#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`, host part: rdcp over TCP on loopback beside the tools a
# user would otherwise reach for, measured in the same run, interleaved,
# median of REPS. Every server it needs (iperf3, nc, sshd, rsync daemon)
# is started here on 127.0.0.1 only and stopped at the end.
#   - 1 GiB file from page cache to tmpfs: rdcp (default crc32), iperf3
#     single stream (memory to memory: the ceiling), nc, scp, rsync
#   - 10 000 x 4 KiB files: rdcp vs tar | nc
#   - CPU seconds per GiB and peak RSS of each side for 1 GiB and 8 GiB
#     (sparse) files, from the "resources:" line (getrusage) that -v ends
#     with: those copies go to a receiver of their own (--once)
# Prints a table; raw numbers go to BUILD/bench/tcp.json, a chart to
# BUILD/bench/tcp.png (tests/bench/chart.sh). With BENCH_BASE
# set to another rdcp binary (say main's build), that one copies the 1 GiB
# file too in every round, to a receiver of its own, after rdcp in odd
# rounds and before it in even ones (ABBA: neither always follows
# iperf3): an interleaved A/B, its ratio printed. It must take the same
# command line (HOST::PATH for the daemon: builds since the ssh bootstrap).
#
#   tests/bench/tcp.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
. "$HERE/bench_lib.sh"
RDCP=$(cd "$BUILD" && pwd)/rdcp
REPS=${BENCH_REPS:-5}
MIB=${BENCH_TCP_MIB:-1024}
NSMALL=${BENCH_SMALL_FILES:-10000}
OUT=$BUILD/bench
mkdir -p "$OUT"
W=$(mktemp -d /tmp/rdcp-bench.XXXXXX)
SHM=$(mktemp -d /dev/shm/rdcp-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$W" "$SHM"
}
trap cleanup EXIT
PORT=$((20000 + $$ % 20000))
port() { PORT=$((PORT + 1)); } # sets PORT (no subshell: it must count)

need=()
for t in iperf3:iperf3 nc:netcat-openbsd scp:openssh-client \
	/usr/sbin/sshd:openssh-server rsync:rsync ss:iproute2; do
	command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
	echo "bench: installing ${need[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${need[@]}" >/dev/null
fi

src=$W/src.bin
head -c $((MIB * 1048576)) /dev/urandom >"$src"
cat "$src" >/dev/null # into the page cache
mkdir -p "$W/small"
for i in $(seq 1 "$NSMALL"); do
	head -c 4096 /dev/urandom >"$W/small/f$i"
done 2>/dev/null
BYTES=$((MIB * 1048576))

now() { date +%s.%N; }
mbps() { awk -v b="$1" -v a="$2" -v z="$3" 'BEGIN { printf "%.1f", b / 1e6 / (z - a) }'; }
RAW=$OUT/tcp-raw.txt
: >"$RAW"
rec() { echo "$*" >>"$RAW"; echo "# $*"; }

# sshd and rsync daemon on 127.0.0.1, with throwaway keys and configs.
ssh-keygen -q -t ed25519 -N '' -f "$W/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$W/userkey"
mkdir -p /root/.ssh && chmod 700 /root/.ssh
touch /root/.ssh/authorized_keys
cp /root/.ssh/authorized_keys "$W/authorized_keys.saved"
cat "$W/userkey.pub" >>/root/.ssh/authorized_keys
trap 'cp "$W/authorized_keys.saved" /root/.ssh/authorized_keys; cleanup' EXIT
port; SSHPORT=$PORT
mkdir -p /run/sshd
/usr/sbin/sshd -D -f /dev/null -h "$W/hostkey" -p "$SSHPORT" \
	-o ListenAddress=127.0.0.1 -o PermitRootLogin=yes \
	-o PasswordAuthentication=no -o UsePAM=no \
	-o "Subsystem=sftp internal-sftp" &
PIDS+=($!)
port; RSPORT=$PORT
bench_rsyncd "$RSPORT" "$SHM" "$W/rsyncd.conf"
port; RDPORT=$PORT
mkdir -p "$SHM/rdcp"
"$RDCP" --listen --no-auth -q --transport tcp --root "$SHM/rdcp" \
	--port "$RDPORT" &
RXPID=$!
PIDS+=("$RXPID")
BASE=${BENCH_BASE:-}
if [ -n "$BASE" ]; then
	port; BPORT=$PORT
	mkdir -p "$SHM/base"
	"$BASE" --listen --no-auth -q --transport tcp --root "$SHM/base" \
		--port "$BPORT" &
	PIDS+=($!)
fi
sleep 1
SSHOPTS=(-P "$SSHPORT" -i "$W/userkey" -o StrictHostKeyChecking=no
	-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)

rdcp_send() { # extra args...
	"$RDCP" --no-auth -q --transport tcp --port "$RDPORT" "$@"
}

# rdcp -v ends with "rdcp: resources: user U s, system S s, peak RSS N MiB".
cpu() { awk '/resources:/ { printf "%.3f", $4 + $7 }' "$1"; }
maxrss() { # in KiB
	awk '/resources:/ { m = $12 == "GiB" ? 1048576 : $12 == "MiB" ? 1024 : $12 == "B" ? 1 / 1024 : 1
		printf "%d", $11 * m }' "$1"
}
wait_listen() { # PORT: until something listens there (5 s at most)
	for _ in $(seq 1 50); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}
# SRC NAME: one push to a receiver of its own (--once), both with -v;
# sets ONCE_T0/ONCE_T1 and leaves their logs in W/tx.log and W/rx.log.
rdcp_once() {
	port
	"$RDCP" -v --listen --once --no-auth --transport tcp \
		--root "$SHM/rdcp" --port "$PORT" 2>"$W/rx.log" &
	local rx=$!
	wait_listen "$PORT" || { echo "bench: the receiver did not start" >&2; exit 1; }
	ONCE_T0=$(now)
	"$RDCP" -v --no-auth --transport tcp --port "$PORT" "$1" \
		"127.0.0.1::$2" 2>"$W/tx.log"
	ONCE_T1=$(now)
	wait "$rx"
}

base_send() { # REP: the baseline build's copy of the same file
	local t0 t1
	t0=$(now)
	"$BASE" --no-auth -q --transport tcp --port "$BPORT" "$src" \
		"127.0.0.1::big.bin"
	t1=$(now)
	cmp -s "$src" "$SHM/base/big.bin" || { echo "bench: base copy differs" >&2; exit 1; }
	rec rdcp_base "$1" "$(mbps "$BYTES" "$t0" "$t1")"
	rm -f "$SHM/base/big.bin"
}

for rep in $(seq 1 "$REPS"); do
	port; p=$PORT
	iperf3 -s -1 -B 127.0.0.1 -p "$p" >/dev/null 2>&1 &
	sleep 0.5
	bps=$(iperf3 -c 127.0.0.1 -p "$p" -n "$BYTES" -J 2>/dev/null |
		awk -F'[:,]' '/"bits_per_second"/ { v = $2 } END { print v }')
	wait $! 2>/dev/null || true
	rec iperf3 "$rep" "$(awk -v b="$bps" 'BEGIN { printf "%.1f", b / 8e6 }')"

	[ -n "$BASE" ] && [ $((rep % 2)) -eq 0 ] && base_send "$rep"
	rdcp_once "$src" big.bin
	cmp -s "$src" "$SHM/rdcp/big.bin" || { echo "bench: rdcp copy differs" >&2; exit 1; }
	rec rdcp "$rep" "$(mbps "$BYTES" "$ONCE_T0" "$ONCE_T1")" \
		"$(cpu "$W/tx.log")" "$(cpu "$W/rx.log")"
	rm -f "$SHM/rdcp/big.bin"
	[ -n "$BASE" ] && [ $((rep % 2)) -eq 1 ] && base_send "$rep"

	port; p=$PORT
	nc -l 127.0.0.1 "$p" >"$SHM/nc.bin" &
	sleep 0.3
	t0=$(now); nc -N 127.0.0.1 "$p" <"$src"; wait $!; t1=$(now)
	rec nc "$rep" "$(mbps "$BYTES" "$t0" "$t1")"
	rm -f "$SHM/nc.bin"

	t0=$(now); scp -q "${SSHOPTS[@]}" "$src" "root@127.0.0.1:$SHM/scp.bin"; t1=$(now)
	rec scp "$rep" "$(mbps "$BYTES" "$t0" "$t1")"
	rm -f "$SHM/scp.bin"

	t0=$(now); rsync -q "$src" "rsync://127.0.0.1:$RSPORT/b/rsync.bin"; t1=$(now)
	rec rsync "$rep" "$(mbps "$BYTES" "$t0" "$t1")"
	rm -f "$SHM/rsync.bin"

	# The tree as tar sees it: one directory, walked by the tool.
	t0=$(now); (cd "$W" && rdcp_send -r small "127.0.0.1::"); t1=$(now)
	diff -rq "$W/small" "$SHM/rdcp/small" >/dev/null ||
		{ echo "bench: rdcp small-file copy differs" >&2; exit 1; }
	rec rdcp_small "$rep" "$(mbps $((NSMALL * 4096)) "$t0" "$t1")"
	rm -rf "$SHM/rdcp/small"

	port; p=$PORT
	mkdir -p "$SHM/tar"
	(nc -l 127.0.0.1 "$p" | tar -x -C "$SHM/tar") &
	sleep 0.3
	t0=$(now); tar -C "$W/small" -cf - . | nc -N 127.0.0.1 "$p"; wait $!; t1=$(now)
	rec tar_nc "$rep" "$(mbps $((NSMALL * 4096)) "$t0" "$t1")"
	rm -rf "$SHM/tar"
done

for g in 1 8; do
	truncate -s "$((g * 1024 - 1))M" "$W/sparse.bin"
	head -c 1048576 /dev/urandom >>"$W/sparse.bin"
	rdcp_once "$W/sparse.bin" sparse.bin
	rec "rss_${g}g" 1 0 0 0 "$(maxrss "$W/tx.log")" "$(maxrss "$W/rx.log")"
	rm -f "$W/sparse.bin" "$SHM/rdcp/sparse.bin"
done
kill "$RXPID"; wait "$RXPID" 2>/dev/null || true

awk -v json="$OUT/tcp.json" -v tsv="$OUT/tcp.tsv" -v mib="$MIB" -v reps="$REPS" "$BENCH_MEDIAN_AWK"'
{
	n = ++cnt[$1]; val[$1, n] = $3
	if ($1 == "rdcp") { val["tx", n] = $4; val["rx", n] = $5; cnt["tx"] = cnt["rx"] = n }
	if ($1 ~ /^rss_/) { rss[$1] = $6; rssr[$1] = $7 }
	raw = raw sprintf("%s{\"name\":\"%s\",\"rep\":%s,\"mbps\":%s}", raw == "" ? "" : ",", $1, $2, $3)
}
END {
	i3 = median("iperf3"); r = median("rdcp"); n = median("nc")
	s = median("scp"); y = median("rsync"); rs_ = median("rdcp_small"); tn = median("tar_nc")
	printf "\nTCP on loopback, %d MiB file page cache -> tmpfs, median of %d (MB/s)\n", mib, reps
	printf "  iperf3 single stream %8.1f\n  nc                   %8.1f\n  scp                  %8.1f\n  rsync (daemon)       %8.1f\n  rdcp --transport tcp %8.1f\n", i3, n, s, y, r
	printf "  rdcp / iperf3 = %.2f (target >= 0.60)   rdcp / scp = %.2f (target >= 3)\n", i3 ? r / i3 : 0, s ? r / s : 0
	printf "  rdcp / nc = %.2f   rdcp / rsync = %.2f\n", n ? r / n : 0, y ? r / y : 0
	b = median("rdcp_base")
	if (b) printf "  rdcp / rdcp_base = %.2f (baseline %.1f MB/s, baseline / nc = %.2f)\n", r / b, b, n ? b / n : 0
	printf "  %d x 4 KiB files: rdcp %.1f MB/s, tar | nc %.1f MB/s, ratio %.2f (target >= 1)\n", '"$NSMALL"', rs_, tn, tn ? rs_ / tn : 0
	printf "  rdcp CPU s per GiB (median): sender %.2f, receiver %.2f\n", median("tx") * 1024 / mib, median("rx") * 1024 / mib
	printf "  peak RSS KiB, 1 GiB file: sender %s receiver %s; 8 GiB sparse: sender %s receiver %s\n", rss["rss_1g"], rssr["rss_1g"], rss["rss_8g"], rssr["rss_8g"]
	printf "contender\tMB/s\niperf3 single stream\t%.1f\nnc\t%.1f\nscp\t%.1f\nrsync (daemon)\t%.1f\nrdcp --transport tcp\t%.1f\n", i3, n, s, y, r > tsv
	printf "%d x 4 KiB files: rdcp\t%.1f\n%d x 4 KiB files: tar | nc\t%.1f\n", '"$NSMALL"', rs_, '"$NSMALL"', tn > tsv
	printf "{\"tcp\":{\"iperf3\":%s,\"rdcp\":%s,\"nc\":%s,\"scp\":%s,\"rsync\":%s,\"rdcp_small\":%s,\"tar_nc\":%s,\"raw\":[%s]}}\n",
		i3, r, n, s, y, rs_, tn, raw > json
}' "$RAW"
echo "raw numbers: $OUT/tcp.json"
"$HERE/chart.sh" "$OUT/tcp.png" \
	"TCP on loopback, $MIB MiB file, medians" "MB/s" "$OUT/tcp.tsv"
