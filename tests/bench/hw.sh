#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench-hw HOSTS=a,b`: the hardware qualification kit (issue #25).
# Given two hosts reachable over ssh (BatchMode: keys, no prompt; HOST
# may be user@host), it measures, side by side in interleaved rounds (the
# order rotates every round, medians of BENCH_REPS):
#   - ib_write_bw (perftest, over rdma_cm: -R), 1 MiB writes, 1 and 4
#     queue pairs, a to b: the fabric's rate as these hosts see it, the
#     reference of the "/ ib_write_bw" column (the better of the two)
#   - the network-free ceiling on b: bench_ceiling (tests/bench/ceiling.c,
#     make bench's first part: rdcp's engine file to file in one process,
#     no network) from a file in b's work dir into TARGET_DIR
#   - rdcp from a to a receiver on b (`rdcp --listen --once`, started over
#     ssh, pinned to the RDMA device of b's address; --transport rdma, so
#     a fall back to TCP fails the row instead of measuring TCP): one big
#     file with --streams 1, 2 and 4; the same with --encrypt and with
#     --checksum sha256 (rdcp's default streams); many small files (-r);
#     and, when b has several active RDMA devices, --streams 4 over every
#     rail (the receiver not pinned). Every rdcp row is one session
#     (--split 0): a --once receiver answers one, and --split is a row
#     of its own to compare on two real hosts, not measured by this kit
# and prints ONE Markdown block (the table of rates and ratios, the host
# facts: NICs, link rates, NUMA, CPUs, kernel, the target file system and
# its free space) to paste into an issue, written to OUT/bench-hw.md, with
# a chart of the same ratios beside it (OUT/bench-hw.png, tests/bench/
# chart.sh: gnuplot; one line says so when there is none). Raw lines go
# to OUT/bench-hw-raw.txt; BENCH_HW_REPORT=1 prints the block and draws
# the chart again from them, measuring nothing.
#
#   tests/bench/hw.sh [BUILD_DIR]        (OUT: BUILD_DIR/bench)
# Environment:
#   HOSTS=a,b        the sender and the receiver (required)
#   RDCP=PATH        rdcp on both hosts (default: rdcp in their PATH)
#   TARGET_DIR=DIR   on b, where the copies and the ceiling write (a
#                    directory made in it and removed at the end); default
#                    a temporary directory in b's /dev/shm (tmpfs: memory,
#                    so the rows show the network and rdcp, not a disk)
#   SOURCE_DIR=DIR   on a, where the files sent are made (default /dev/shm)
#   RDMA_ADDR=ADDR   b's address on the RDMA fabric (default: b's ssh
#                    address if an active RDMA device has it, else the
#                    first IPv4 address of b's first active device)
#   CEILING=PATH     bench_ceiling here, copied to b (default
#                    BUILD_DIR/tests/bench_ceiling; `make bench-hw`
#                    builds it); missing: no ceiling row, said once
#   BENCH_REPS (5), BENCH_HW_MIB (16384: the big file, MiB),
#   BENCH_HW_FILES (100000), BENCH_HW_FILE_SIZE (16384 bytes),
#   BENCH_HW_CEIL_MIB (4096), BENCH_HW_BW_SECS (5: each ib_write_bw run),
#   BENCH_HW_PORT (17471: ib_write_bw's and the receiver's ports on b are
#   it and the 99 after it, a new one each run),
#   BENCH_HW_TIMEOUT (1800: bound on every remote command, seconds),
#   BENCH_HW_SSH ("ssh -o BatchMode=yes -o ConnectTimeout=30", words)
# Exit 0 when the report was printed (failed rows are in it, marked);
# 1 when the hosts cannot be used (ssh, rdcp, space), with one line why.
# shellcheck disable=SC2016 # the single-quoted scripts run on the hosts, their $ expanded there
set -euo pipefail
BUILD=${1:-build}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
. "$HERE/bench_lib.sh"
OUT=${BENCH_HW_OUT:-$BUILD/bench}
RAW=$OUT/bench-hw-raw.txt
MD=$OUT/bench-hw.md
PNG=$OUT/bench-hw.png
REPS=${BENCH_REPS:-5}
BIG_MIB=${BENCH_HW_MIB:-16384}
NSMALL=${BENCH_HW_FILES:-100000}
SMALL_SIZE=${BENCH_HW_FILE_SIZE:-16384}
CEIL_MIB=${BENCH_HW_CEIL_MIB:-4096}
BW_SECS=${BENCH_HW_BW_SECS:-5}
PORT=${BENCH_HW_PORT:-17471}
LIMIT=${BENCH_HW_TIMEOUT:-1800}
RDCP=${RDCP:-rdcp}
CEILING=${CEILING:-$BUILD/tests/bench_ceiling}
read -r -a SSH <<<"${BENCH_HW_SSH:-ssh -o BatchMode=yes -o ConnectTimeout=30}"
[ ${#SSH[@]} -gt 0 ] || { echo "bench-hw: BENCH_HW_SSH is empty" >&2; exit 1; }
mkdir -p "$OUT"

die() { echo "bench-hw: $*" >&2; exit 1; }
note() { echo "bench-hw: $*" >&2; }

# ------------------------------------------------------------- the report

# report: the Markdown block from $RAW to stdout and $MD, the chart's
# data to $OUT/bench-hw.tsv; then the chart.
report() {
	awk -v tsv="$OUT/bench-hw.tsv" "$BENCH_MEDIAN_AWK"'
	function lo(k,   i, m) { m = val[k, 1]; for (i = 2; i <= cnt[k]; i++) if (val[k, i] < m) m = val[k, i]; return m }
	function hi(k,   i, m) { m = val[k, 1]; for (i = 2; i <= cnt[k]; i++) if (val[k, i] > m) m = val[k, i]; return m }
	function rest(n,   s, i) { s = $n; for (i = n + 1; i <= NF; i++) s = s " " $i; return s }
	function ratio(x, ref) { return ref > 0 && x > 0 ? sprintf("%.2f", x / ref) : "-" }
	function g(x) { return x >= 100 ? sprintf("%.0f", x) : x >= 1 ? sprintf("%.2f", x) : sprintf("%.3g", x) }
	BEGIN { FS = "\t" }
	$1 == "ROW" { order[++nrows] = $2; label[$2] = $3; next }
	$1 == "RUN" { run[$2] = $3; next }
	$1 == "FACT" { fact[$2, $3] = $4; next }
	$1 == "DEV" { devs[$2] = devs[$2] (devs[$2] == "" ? "" : "<br>") $3; next }
	$1 == "HW" { k = $2; val[k, ++cnt[k]] = $4 + 0; if ($5 != "") val[k "_per_s", ++cnt[k "_per_s"]] = $5 + 0; next }
	$1 == "HWFAIL" { nfail[$2]++; why[$2] = $4; next }
	$1 == "NOTE" { notes = notes "- " $2 "\n"; next }
	END {
		ibw = median("ibw1"); if (median("ibw4") > ibw) ibw = median("ibw4")
		ceil = median("ceil")
		printf "### rdcp hardware qualification: %s -> %s\n\n", run["a"], run["b"]
		printf "%s UTC, %s, %s, medians; rates in Gb/s (10^9 bit/s) of file data\n\n", run["date"], fact["a", "rdcp"],
			run["reps"] == 1 ? "1 round" : run["reps"] " rounds interleaved (the order rotates each round)"
		printf "| row | Gb/s | min-max | / ib_write_bw | / ceiling | rounds |\n"
		printf "| --- | ---: | ---: | ---: | ---: | --- |\n"
		printf "row\t/ ib_write_bw\t/ ceiling\n" > tsv
		for (i = 1; i <= nrows; i++) {
			k = order[i]
			if (!cnt[k] && !nfail[k]) continue
			m = median(k)
			rounds = cnt[k] "/" (cnt[k] + nfail[k])
			if (nfail[k]) rounds = rounds " (failed: " why[k] ")"
			if (!cnt[k]) {
				printf "| %s | - | - | - | - | %s |\n", label[k], rounds
				continue
			}
			x = ""
			if (k == "small" && cnt[k "_per_s"])
				x = sprintf(" (%.0f files/s)", median(k "_per_s"))
			printf "| %s | %s%s | %s-%s | %s | %s | %s |\n", label[k], g(m), x, g(lo(k)), g(hi(k)),
				ratio(m, ibw), ratio(m, ceil), rounds
			printf "%s\t%s\t%s\n", label[k], ratio(m, ibw), (k == "ceil" ? "-" : ratio(m, ceil)) > tsv
		}
		printf "\n/ ib_write_bw: against the better of the two ib_write_bw rows (%s Gb/s); / ceiling: against the network-free ceiling on b (%s)\n", g(ibw), ceil ? g(ceil) " Gb/s" : "not measured"
		if (notes != "") printf "\n%s", notes
		printf "\n| host | a: %s | b: %s |\n| --- | --- | --- |\n", run["a"], run["b"]
		n = split("kernel cpu cpus numa_nodes mem rdcp perftest", f, " ")
		split("kernel|CPU|CPUs|NUMA nodes|memory|rdcp|ib_write_bw", fl, "|")
		for (i = 1; i <= n; i++)
			printf "| %s | %s | %s |\n", fl[i], fact["a", f[i]], fact["b", f[i]]
		printf "| RDMA devices (state, rate, link layer, NUMA node, driver, model, firmware, netdevs, addresses) | %s | %s |\n", devs["a"], devs["b"]
		printf "| used | %s | %s |\n", fact["a", "used"], fact["b", "used"]
		printf "| files (file system, source, free) | source: %s | target: %s |\n", fact["a", "fs"], fact["b", "fs"]
	}' "$RAW" | tee "$MD"
	echo
	note "this block is $MD; the raw lines $RAW"
	if [ "$(wc -l <"$OUT/bench-hw.tsv")" -gt 1 ]; then
		"$HERE/chart.sh" "$PNG" "rdcp hardware qualification: ratios (medians)" \
			"ratio" "$OUT/bench-hw.tsv" || true
	fi
}

if [ "${BENCH_HW_REPORT:-0}" = 1 ]; then
	[ -s "$RAW" ] || die "no raw lines to report ($RAW)"
	report
	exit 0
fi

# ------------------------------------------------------------- the hosts

[ -n "${HOSTS:-}" ] || die "HOSTS=a,b names the sender and the receiver (ssh, BatchMode; user@host allowed)"
IFS=, read -r A B extra <<<"$HOSTS"
if [ -z "$A" ] || [ -z "$B" ] || [ -n "${extra:-}" ]; then
	die "HOSTS=a,b: two hosts, got '$HOSTS'"
fi
safe() { [[ "$1" =~ ^[A-Za-z0-9._/:@%+=,-]+$ ]] || die "$2 '$1': only letters, digits and ._/:@%+=,- here"; }
safe "$A" "host"; safe "$B" "host"; safe "$RDCP" "RDCP"
[ -z "${TARGET_DIR:-}" ] || safe "$TARGET_DIR" "TARGET_DIR"
[ -z "${SOURCE_DIR:-}" ] || safe "$SOURCE_DIR" "SOURCE_DIR"
[ -z "${RDMA_ADDR:-}" ] || safe "$RDMA_ADDR" "RDMA_ADDR"
for v in BENCH_REPS:REPS BENCH_HW_MIB:BIG_MIB BENCH_HW_FILES:NSMALL \
	BENCH_HW_FILE_SIZE:SMALL_SIZE BENCH_HW_CEIL_MIB:CEIL_MIB \
	BENCH_HW_BW_SECS:BW_SECS BENCH_HW_PORT:PORT BENCH_HW_TIMEOUT:LIMIT; do
	x=${v#*:}
	[[ "${!x}" =~ ^[1-9][0-9]*$ ]] || die "${v%%:*} wants a positive number, got '${!x}'"
done
[ $((PORT + 99)) -le 65535 ] || die "BENCH_HW_PORT: $PORT and the 99 after it must be ports"
# Every ssh bounded too: a host that stops answering mid-command (a hung
# file system under df) cannot hold the kit.
SSH=(timeout "$LIMIT" "${SSH[@]}")

# rsc HOST SCRIPT ARGS...: SCRIPT run by sh on HOST (given on its stdin,
# so the remote login shell does not matter), ARGS as its "$@".
rsc() {
	local h=$1 s=$2
	shift 2
	"${SSH[@]}" "$h" sh -s -- "$@" <<<"$s"
}

for h in "$A" "$B"; do
	rsc "$h" 'echo ok' 2>/dev/null | grep -qx ok ||
		die "cannot run a command on $h over ssh (${SSH[*]:2} $h true; keys, not passwords)"
	rsc "$h" 'command -v "$1" >/dev/null 2>&1' "$RDCP" ||
		die "$RDCP not found on $h (RDCP=path of rdcp there)"
done

# Work directories: on a for the files sent, on b for the key, the
# ceiling's binary and source; the target on b.
MKWORK='d=${1:-/dev/shm}; [ -d "$d" ] || d=/tmp; mktemp -d "$d/rdcp-hw.XXXXXX"'
WA=$(rsc "$A" "$MKWORK" "${SOURCE_DIR:-}") || die "cannot make a work directory on $A"
WB=$(rsc "$B" "$MKWORK" "") || die "cannot make a work directory on $B"
if [ -n "${TARGET_DIR:-}" ]; then
	TB=$(rsc "$B" 'mktemp -d "$1/rdcp-hw.XXXXXX"' "$TARGET_DIR") ||
		die "cannot make a directory in TARGET_DIR=$TARGET_DIR on $B"
else
	TB=$WB/target
	rsc "$B" 'mkdir "$1"' "$TB" || die "cannot make $TB on $B"
fi
LPIDS=()
cleanup() {
	local p
	for p in "${LPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	rsc "$A" 'rm -rf "$1"' "$WA" </dev/null >/dev/null 2>&1 || true
	rsc "$B" 'rm -rf "$1" "$2"' "$WB" "$TB" </dev/null >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The facts of a host: "key<TAB>value" lines, "dev<TAB>..." per RDMA
# device. $1: rdcp, $2: the directory whose file system counts.
FACTS='R=$1 d=$2
t=$(printf "\t")
echo "kernel${t}$(uname -sr)"
echo "cpu${t}$(sed -n "s/^model name[[:space:]]*: //p" /proc/cpuinfo | head -n 1)"
echo "cpus${t}$(grep -c ^processor /proc/cpuinfo)"
echo "mem${t}$(awk "/^MemTotal/ { printf \"%.1f GiB\", \$2 / 1048576 }" /proc/meminfo)"
n=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
[ "${n:-0}" -gt 0 ] || n=1 # a kernel without NUMA: one node
echo "numa_nodes${t}$n"
echo "rdcp${t}$("$R" --version 2>&1 | head -n 1)"
echo "perftest${t}$(command -v ib_write_bw || echo "not installed (perftest)")"
fs=$(stat -f -c %T "$d" 2>/dev/null)
src=$(df -Pk "$d" | awk "NR == 2 { print \$1 }")
free=$(df -Pk "$d" | awk "NR == 2 { print \$4 }")
echo "free_kib${t}$free"
echo "fs${t}$d: ${fs:-?} on $src, $(awk -v k="$free" "BEGIN { printf \"%.1f GiB\", k / 1048576 }") free"
for p in /sys/class/infiniband/*; do
	[ -d "$p" ] || continue
	dev=${p##*/}
	st=$(sed "s/^[0-9]*: *//" "$p/ports/1/state" 2>/dev/null)
	rate=$(cat "$p/ports/1/rate" 2>/dev/null)
	ll=$(cat "$p/ports/1/link_layer" 2>/dev/null)
	numa=$(cat "$p/device/numa_node" 2>/dev/null)
	drv=$(readlink "$p/device/driver" 2>/dev/null)
	drv=${drv##*/}
	[ -n "$drv" ] || case $dev in rxe*) drv="rdma_rxe (Soft-RoCE)" ;; siw*) drv="siw (soft iWARP)" ;; esac
	model=$(cat "$p/hca_type" 2>/dev/null || cat "$p/board_id" 2>/dev/null)
	slot=$(readlink -f "$p/device" 2>/dev/null)
	slot=${slot##*/}
	if [ -n "$slot" ] && command -v lspci >/dev/null 2>&1; then
		m=$(lspci -s "$slot" 2>/dev/null | cut -d: -f3- | sed "s/^ *//")
		[ -z "$m" ] || model="$m${model:+ ($model)}"
	fi
	fw=$(cat "$p/fw_ver" 2>/dev/null)
	mtu=$(ibv_devinfo -d "$dev" 2>/dev/null | awk "/active_mtu/ { print \$2; exit }")
	nd=$( { ls "$p/device/net" 2>/dev/null; cat "$p"/ports/1/gid_attrs/ndevs/* 2>/dev/null; cat "$p/parent" 2>/dev/null; } | sort -u | tr "\n" " ")
	ad=
	for x in $nd; do
		ad="$ad $(ip -4 -o addr show dev "$x" 2>/dev/null | awk "{ sub(\"/.*\", \"\", \$4); printf \"%s \", \$4 }")"
	done
	echo "dev${t}$dev${t}${st:--}${t}${rate:--}${t}${ll:--}${t}${numa:--}${t}${drv:--}${t}${model:--}${t}${fw:--}${t}${mtu:--}${t}$(echo $nd)${t}$(echo $ad)"
done'

: >"$RAW"
rec() { # fields, tab-joined, to the raw lines
	local IFS=$'\t'
	echo "$*" >>"$RAW"
}
rec RUN date "$(date -u '+%Y-%m-%d %H:%M')"
rec RUN a "$A"
rec RUN b "$B"
rec RUN reps "$REPS"
rsc "$A" "$FACTS" "$RDCP" "$WA" >"$OUT/bench-hw-facts-a.txt" 2>/dev/null ||
	die "cannot read the host facts of $A"
rsc "$B" "$FACTS" "$RDCP" "$TB" >"$OUT/bench-hw-facts-b.txt" 2>/dev/null ||
	die "cannot read the host facts of $B"

fact() { awk -F'\t' -v k="$2" '$1 == k { print $2; exit }' "$OUT/bench-hw-facts-$1.txt"; }
for s in a b; do
	while IFS=$'\t' read -r k v rest; do
		if [ "$k" = dev ]; then
			IFS=$'\t' read -r st rate ll numa drv model fw mtu nd ad <<<"$rest"
			rec DEV "$s" "$v: $st, $rate, $ll, MTU $mtu, NUMA node $numa, $drv, $model, fw $fw, netdevs ${nd:--}, ${ad:-no IPv4 address}"
		else
			rec FACT "$s" "$k" "$v"
		fi
	done <"$OUT/bench-hw-facts-$s.txt"
done

# The address rdcp and ib_write_bw connect to, and b's device behind it.
bhost=${B##*@}
devline() { # SIDE ADDR: the first active device's line (with ADDR, if given)
	awk -F'\t' -v a="$2" '$1 == "dev" && $3 == "ACTIVE" {
		if (a == "") { print; exit }
		n = split($12, x, " "); for (i = 1; i <= n; i++) if (x[i] == a) { print; exit } }' \
		"$OUT/bench-hw-facts-$1.txt"
}
if [ -n "${RDMA_ADDR:-}" ]; then
	ADDR=$RDMA_ADDR
elif [ -n "$(devline b "$bhost")" ]; then
	ADDR=$bhost
else
	ADDR=$(devline b "" | awk -F'\t' '{ split($12, x, " "); print x[1] }')
	[ -n "$ADDR" ] || die "$B has no active RDMA device with an IPv4 address (RDMA_ADDR=its address on the fabric)"
	note "$B's ssh address is not on an RDMA device: the copies go to $ADDR (RDMA_ADDR to choose)"
fi
DEV_B=$(devline b "$ADDR" | cut -f2)
[ -n "$DEV_B" ] || DEV_B=$(devline b "" | cut -f2)
[ -n "$DEV_B" ] || die "$B has no active RDMA device (ibv_devinfo there)"
NDEV_B=$(awk -F'\t' '$1 == "dev" && $3 == "ACTIVE" && $12 != ""' "$OUT/bench-hw-facts-b.txt" | wc -l)
devnode=$(devline b "$ADDR" | cut -f6)
rec FACT b used "$DEV_B at $ADDR (NUMA node ${devnode:--}); receiver and target $TB"
rec FACT a used "source $WA"

# Room: a holds the big file and the small ones; b one row's copy at a
# time and the ceiling's source and copy.
blocks=$(((SMALL_SIZE + 4095) / 4096)) # 4 KiB each, at least one a file
small_kib=$((NSMALL * blocks * 4))
need_a=$((BIG_MIB * 1024 + small_kib))
big_b=$((BIG_MIB * 1024)); [ "$small_kib" -le "$big_b" ] || big_b=$small_kib
[ $((CEIL_MIB * 1024)) -le "$big_b" ] || big_b=$((CEIL_MIB * 1024))
need_b=$((big_b + CEIL_MIB * 1024))
free_a=$(fact a free_kib); free_b=$(fact b free_kib)
[ "${free_a:-0}" -ge "$need_a" ] ||
	die "$A: $((need_a / 1024)) MiB needed in $WA, $((${free_a:-0} / 1024)) free (SOURCE_DIR, BENCH_HW_MIB, BENCH_HW_FILES)"
[ "${free_b:-0}" -ge "$need_b" ] ||
	die "$B: $((need_b / 1024)) MiB needed in $TB, $((${free_b:-0} / 1024)) free (TARGET_DIR, BENCH_HW_MIB, BENCH_HW_CEIL_MIB)"

# ------------------------------------------------------------- the files

note "making the files: $BIG_MIB MiB and $NSMALL x $SMALL_SIZE bytes on $A ($WA)"
rsc "$A" 'W=$1 mib=$2 n=$3 size=$4 R=$5
head -c $((mib * 1048576)) /dev/urandom >"$W/big.bin" || exit 1
mkdir "$W/small" || exit 1
i=0
while [ $i -lt "$n" ]; do
	c=$((n - i)); [ $c -le 1000 ] || c=1000
	d=$W/small/d$(printf %04d $((i / 1000)))
	mkdir "$d" || exit 1
	if command -v split >/dev/null 2>&1; then # one process a directory
		head -c $((c * size)) /dev/urandom >"$W/blob" &&
			(cd "$d" && split -b "$size" -a 4 "$W/blob" f) || exit 1
	else # busybox has no split: one a file
		j=0
		while [ $j -lt $c ]; do
			head -c "$size" /dev/urandom >"$d/f$j" || exit 1
			j=$((j + 1))
		done
	fi
	i=$((i + c))
done
rm -f "$W/blob"
"$R" --keygen "$W/key" >/dev/null' "$WA" "$BIG_MIB" "$NSMALL" "$SMALL_SIZE" "$RDCP" ||
	die "cannot make the files on $A"
# The receiver's key: the same pre-shared key (rdcp authenticates, as
# deployed; --encrypt derives its session key from it).
"${SSH[@]}" "$A" "cat $WA/key" </dev/null | "${SSH[@]}" "$B" "umask 077 && cat >$WB/key" ||
	die "cannot copy the key to $B"

CEIL_OK=
if [ -x "$CEILING" ]; then
	if "${SSH[@]}" "$B" "cat >$WB/bench_ceiling && chmod 755 $WB/bench_ceiling" <"$CEILING" &&
		rsc "$B" 'head -c $(($2 * 1048576)) /dev/urandom >"$1/ceil.bin"' "$WB" "$CEIL_MIB" </dev/null; then
		CEIL_OK=1
	else
		rec NOTE "no ceiling row: cannot copy $CEILING to $B"
	fi
else
	rec NOTE "no ceiling row: $CEILING not built (make build/tests/bench_ceiling, or CEILING=path)"
fi
PERF_OK=1
for h in "$A" "$B"; do
	rsc "$h" 'command -v ib_write_bw >/dev/null' </dev/null ||
		{ PERF_OK=; rec NOTE "no ib_write_bw rows: perftest not installed on $h"; }
done

# ------------------------------------------------------------- the rows

# wait_log PID LOG WORD SECS: until LOG has WORD (0), PID ends or SECS pass.
wait_log() {
	local i=0
	while [ $i -lt $(($4 * 5)) ]; do
		grep -q "$3" "$2" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.2
		i=$((i + 1))
	done
	return 1
}
# wait_bounded PID SECS: the background ssh ends, or is killed after SECS.
wait_bounded() {
	local i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt $(($2 * 5)) ]; do sleep 0.2; i=$((i + 1)); done
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
fail() { # NAME REP WHY
	rec HWFAIL "$1" "$2" "$(echo "$3" | tr '\t\n|' '  /' | cut -c1-160)"
	echo "# $1 round $2 failed: $3" >&2
}

# A port of its own for each run (BENCH_HW_PORT and the 99 after it): a
# server left behind by a failed run never holds the next run's.
RUNS=0
next_port() { RUNS=$((RUNS + 1)); P=$((PORT + RUNS % 100)); }

# ib_write_bw Q REP: the server on b started over ssh (its "waiting"
# line may sit in its stdout's buffer: not waited for), the client on a
# tried again while the server is not listening yet.
ibw() {
	local q=$1 rep=$2 log=$OUT/bench-hw-srv.log out gbps try=0 P
	next_port
	"${SSH[@]}" "$B" "exec timeout $LIMIT ib_write_bw -R -q $q -s 1048576 -D $BW_SECS -F --report_gbits -p $P" \
		</dev/null >"$log" 2>&1 &
	local srv=$!
	LPIDS=("$srv")
	sleep 1
	while :; do
		out=$("${SSH[@]}" "$A" "timeout $LIMIT ib_write_bw -R -q $q -s 1048576 -D $BW_SECS -F --report_gbits -p $P $ADDR" </dev/null 2>&1) || true
		gbps=$(awk '$1 == 1048576 && $4 + 0 > 0 { print $4; exit }' <<<"$out")
		if [ -n "$gbps" ] || ! kill -0 "$srv" 2>/dev/null || [ $try -ge 10 ]; then
			break
		fi
		try=$((try + 1))
		sleep 1
	done
	wait_bounded "$srv" 30
	if [ -n "$gbps" ]; then
		rec HW "ibw$q" "$rep" "$gbps"
	else
		fail "ibw$q" "$rep" "ib_write_bw: $(tail -n 2 <<<"$out") / server: $(tail -n 1 "$log")"
	fi
}

# The network-free ceiling on b: REP
ceiling() {
	local out secs bytes
	if out=$(rsc "$B" 'timeout "$3" "$1/bench_ceiling" "$1/ceil.bin" "$2" ceil.out 2>&1; rc=$?
		rm -f "$2/ceil.out"; exit $rc' "$WB" "$TB" "$LIMIT" </dev/null); then
		secs=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
		bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$out")
		if [ -n "$secs" ] && [ -n "$bytes" ]; then
			rec HW ceil "$1" "$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.6f", (s > 0 ? b * 8 / s / 1000000000 : 0) }')"
			return
		fi
	fi
	fail ceil "$1" "bench_ceiling: $(tail -n 2 <<<"$out")"
}

# rdcp NAME REP PIN SRC ARGS...: a receiver on b (PIN: pinned to DEV_B),
# rdcp from a, timed on a's clock; the copy checked on b and removed.
rdcp_row() {
	local name=$1 rep=$2 pin=$3 src=$4 log=$OUT/bench-hw-srv.log out rc t0 t1 got P
	shift 4
	local dev=
	[ "$pin" = 1 ] && dev="--device $DEV_B"
	next_port
	"${SSH[@]}" "$B" "exec timeout $LIMIT $RDCP --listen --once -v --key-file $WB/key --root $TB --port $P $dev" \
		</dev/null >"$log" 2>&1 &
	local srv=$!
	LPIDS=("$srv")
	if ! wait_log "$srv" "$log" listening 60; then
		wait_bounded "$srv" 1
		fail "$name" "$rep" "receiver on $B: $(tail -n 2 "$log")"
		return
	fi
	out=$(rsc "$A" 'R=$1 W=$2 P=$3 L=$4 src=$5 dst=$6; shift 6
		t0=$(cut -d" " -f1 /proc/uptime)
		timeout "$L" "$R" --transport rdma -v --split 0 --key-file "$W/key" --port "$P" "$@" "$src" "$dst" >"$W/cli.log" 2>&1
		rc=$?
		t1=$(cut -d" " -f1 /proc/uptime)
		echo "T $rc $t0 $t1"
		[ $rc = 0 ] || tail -n 2 "$W/cli.log"' \
		"$RDCP" "$WA" "$P" "$LIMIT" "$WA/$src" "$ADDR::$src" "$@" </dev/null 2>&1) || true
	wait_bounded "$srv" 60
	read -r _ rc t0 t1 <<<"$(grep '^T ' <<<"$out" | tail -n 1)"
	# What arrived: the files and their bytes (rdcp names a file only
	# once it is verified).
	got=$(rsc "$B" 'find "$1" -type f | wc -l; find "$1" -type f -exec stat -c %s {} + | awk "{ s += \$1 } END { printf \"%.0f\n\", s }"
		rm -rf "$1" && mkdir "$1"' "$TB" </dev/null | tr '\n' ' ') || true
	if [ "${rc:-x}" != 0 ]; then
		fail "$name" "$rep" "rdcp exit ${rc:-?}: $(grep -v '^T ' <<<"$out" | tail -n 2)"
		return
	fi
	local want_n=1 want_b=$((BIG_MIB * 1048576))
	if [ "$src" = small ]; then want_n=$NSMALL want_b=$((NSMALL * SMALL_SIZE)); fi
	if [ "$got" != "$want_n $want_b " ]; then
		fail "$name" "$rep" "$B has $got(files bytes), want $want_n $want_b"
		return
	fi
	# (parentheses: in awk a bare ">" among printf's arguments redirects)
	rec HW "$name" "$rep" "$(awk -v b="$want_b" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.6f", (z > a ? b * 8 / (z - a) / 1000000000 : 0) }')" \
		"$(awk -v n="$want_n" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.0f", (z > a ? n / (z - a) : 0) }')"
}

run_row() { # NAME REP
	case $1 in
	ibw1) ibw 1 "$2" ;;
	ibw4) ibw 4 "$2" ;;
	ceil) ceiling "$2" ;;
	s1 | s2 | s4) rdcp_row "$1" "$2" 1 big.bin --streams "${1#s}" ;;
	enc) rdcp_row enc "$2" 1 big.bin --encrypt ;;
	sha) rdcp_row sha "$2" 1 big.bin --checksum sha256 ;;
	small) rdcp_row small "$2" 1 small -r ;;
	rails) rdcp_row rails "$2" 0 big.bin --streams "$RAILS_STREAMS" ;;
	esac
}

big_label="1 file of $(awk -v m="$BIG_MIB" 'BEGIN { if (m % 1024 == 0) printf "%d GiB", m / 1024; else printf "%d MiB", m }')"
rows=()
if [ -n "$PERF_OK" ]; then
	rows+=(ibw1 ibw4)
	rec ROW ibw1 "ib_write_bw, 1 QP, 1 MiB writes (reference)"
	rec ROW ibw4 "ib_write_bw, 4 QPs, 1 MiB writes (reference)"
fi
if [ -n "$CEIL_OK" ]; then
	rows+=(ceil)
	rec ROW ceil "network-free ceiling on b: $CEIL_MIB MiB, engine file to file"
fi
rows+=(s1 s2 s4 enc sha small)
rec ROW s1 "rdcp, $big_label, --streams 1"
rec ROW s2 "rdcp, $big_label, --streams 2"
rec ROW s4 "rdcp, $big_label, --streams 4"
rec ROW enc "rdcp, $big_label, --encrypt"
rec ROW sha "rdcp, $big_label, --checksum sha256"
rec ROW small "rdcp -r, $NSMALL files of $SMALL_SIZE bytes"
RAILS_STREAMS=$((NDEV_B * 2))
[ "$RAILS_STREAMS" -ge 4 ] || RAILS_STREAMS=4
[ "$RAILS_STREAMS" -le 16 ] || RAILS_STREAMS=16
if [ "$NDEV_B" -ge 2 ]; then
	rows+=(rails)
	rec ROW rails "rdcp, $big_label, --streams $RAILS_STREAMS over every rail ($NDEV_B devices on b)"
else
	rec NOTE "no rails row: $B has $NDEV_B active RDMA device with an address (rails need two)"
fi
rec NOTE "the rdcp rows other than rails: the receiver pinned to $DEV_B (--device), so they measure one NIC as ib_write_bw does"

n=${#rows[@]}
for rep in $(seq 1 "$REPS"); do
	note "round $rep of $REPS"
	for i in $(seq 0 $((n - 1))); do # rotated: each leads in turn
		run_row "${rows[$(((i + rep - 1) % n))]}" "$rep"
	done
done
echo
report
