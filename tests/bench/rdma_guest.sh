#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Runs inside the Soft-RoCE guest for `make bench` (tests/bench/run.sh):
# rdcp against ib_write_bw (64 KiB and rdcp's chunk size; plain RDMA WRITE,
# the ceiling) and rcopy (rdma-core's file copy over rsockets), on the same
# rxe link, interleaved, REPS times. Prints one line per measurement:
#   BENCH <name> <rep> <MB/s> [<sender cpu s> <receiver cpu s> <sender maxrss KiB>]
# rdcp runs with its default lane count ("rdcp") and with --streams 1, 2
# and 4 ("rdcp_s1" ...), in a rotating order each round; then --streams 2
# over one rail and over two (rxe0 and rxe1), alternating.
# Arguments: file MiB (256), repetitions (5), rdcp chunk size (1 MiB),
# and optionally the name of a second rdcp build in the guest (an A/B
# against a baseline: `BENCH_BASE=... make bench`), run in every round
# as "rdcp_base", after rdcp in odd rounds and before it in even ones.
# Rates are SI MB/s from the guest's clock (/proc/uptime, 10 ms), which is
# the same clock for every contender.
# shellcheck disable=SC2086 # $K: two words, --key-file and its path
set -u
MIB=${1:-256}
REPS=${2:-5}
CHUNK=${3:-1048576}
BASE=${4:-}
ADDR=$RDCP_GUEST_ADDR
BYTES=$((MIB * 1048576))
mkdir -p /tmp/b/root /tmp/b/rc
head -c "$BYTES" /dev/urandom >/tmp/b/src.bin
# rdcp authenticates, as deployed; its handshake is inside the timing.
rdcp --keygen /tmp/b/key >/dev/null 2>&1 || echo "# rdcp --keygen failed"
K="--key-file /tmp/b/key" # two words, split where used

now() { cut -d' ' -f1 /proc/uptime; }
rate() { awk -v b="$BYTES" -v a="$1" -v z="$2" 'BEGIN { printf "%.2f", b / 1e6 / (z - a) }'; }
# rdcp -v ends with "rdcp: resources: user U s, system S s, peak RSS N MiB"
# (getrusage).
cpu() { awk '/resources:/ { printf "%.2f", $4 + $7 }' "$1"; }
maxrss() { # in KiB
	awk '/resources:/ { m = $12 == "GiB" ? 1048576 : $12 == "MiB" ? 1024 : $12 == "B" ? 1 / 1024 : 1
		printf "%d", $11 * m }' "$1"
}

bw() { # SIZE: ib_write_bw average MB/s (perftest prints MiB/s)
	n=$((BYTES / $1))
	ib_write_bw -d rxe0 -x 1 -s "$1" -n "$n" -F -p 18515 >/dev/null 2>&1 &
	sleep 1
	ib_write_bw -d rxe0 -x 1 -s "$1" -n "$n" -F -p 18515 "$ADDR" 2>/dev/null |
		awk -v s="$1" '$1 == s { printf "%.2f", $4 * 1.048576 }'
	wait
}

rdcp_run() { # REP [BINARY NAME [ARGS...]]
	_rr=$1
	bin=${2:-rdcp}
	name=${3:-rdcp}
	shift
	[ $# -gt 0 ] && shift
	[ $# -gt 0 ] && shift
	# shellcheck disable=SC2086 # SRV_ARGS: the receiver's extra words
	$bin -v --listen $K --root /tmp/b/root --once ${SRV_ARGS:-} \
		--port 7490 >/tmp/b/srv.time 2>&1 &
	sleep 1
	t0=$(now)
	ok=1
	$bin -v $K --port 7490 --chunk-size "$CHUNK" "$@" \
		/tmp/b/src.bin "$ADDR::out.bin" >/tmp/b/cli.time 2>&1 ||
		{ echo "# $name failed"; cat /tmp/b/cli.time; ok=; }
	t1=$(now)
	wait
	cmp -s /tmp/b/src.bin /tmp/b/root/out.bin || { echo "# $name copy differs"; ok=; }
	[ -n "$ok" ] &&
		echo "BENCH $name $_rr $(rate "$t0" "$t1") $(cpu /tmp/b/cli.time) $(cpu /tmp/b/srv.time) $(maxrss /tmp/b/cli.time)"
	rm -f /tmp/b/root/out.bin
}

rcopy_run() { # REP
	(cd /tmp/b/rc && rcopy -p 7491 >/dev/null 2>&1) &
	srv=$!
	sleep 1
	t0=$(now)
	ok=1
	rcopy /tmp/b/src.bin "$ADDR:/tmp/b/rc/out.bin" -p 7491 >/dev/null 2>&1 ||
		{ echo "# rcopy failed"; ok=; }
	t1=$(now)
	kill "$srv" 2>/dev/null
	wait
	cmp -s /tmp/b/src.bin /tmp/b/rc/out.bin || { echo "# rcopy copy differs"; ok=; }
	[ -n "$ok" ] && echo "BENCH rcopy $1 $(rate "$t0" "$t1")"
	rm -f /tmp/b/rc/out.bin
}

rnr0=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_rnr_err)
for rep in $(seq 1 "$REPS"); do
	echo "BENCH ib_write_bw_64k $rep $(bw 65536)"
	echo "BENCH ib_write_bw_chunk $rep $(bw "$CHUNK")"
	[ -n "$BASE" ] && [ $((rep % 2)) -eq 0 ] && rdcp_run "$rep" "$BASE" rdcp_base
	rdcp_run "$rep"
	[ -n "$BASE" ] && [ $((rep % 2)) -eq 1 ] && rdcp_run "$rep" "$BASE" rdcp_base
	rcopy_run "$rep"
	case $((rep % 3)) in
	0) order="1 2 4" ;;
	1) order="2 4 1" ;;
	*) order="4 1 2" ;;
	esac
	for n in $order; do
		rdcp_run "$rep" rdcp "rdcp_s$n" --streams "$n"
	done
done

# Two rails: rxe1 on a second netdev (dummy1) beside rxe0, as in the
# guest scenario "rails". --streams 2 with the receiver on rxe0 alone
# ("rdcp_s2_1rail") and on every address, so lane 1 goes to rxe1
# ("rdcp_s2_2rails"), in alternating order, REPS rounds. Both rails are
# emulated by the same two vCPUs: the ratio is what a second rail costs
# here, not what it adds on two real NICs.
one_rail() { # REP
	SRV_ARGS="--device rxe0" rdcp_run "$1" rdcp rdcp_s2_1rail --streams 2
}
if ip link add dummy1 type dummy 2>/dev/null &&
	ip addr add 10.77.3.1/24 dev dummy1 && ip link set dummy1 up &&
	rdma link add rxe1 type rxe netdev dummy1; then
	sleep 2
	for rep in $(seq 1 "$REPS"); do
		[ $((rep % 2)) -eq 1 ] && one_rail "$rep"
		rdcp_run "$rep" rdcp rdcp_s2_2rails --streams 2
		grep -q "streams from .* on 2 rails" /tmp/b/srv.time ||
			echo "# rdcp_s2_2rails failed to use 2 rails"
		[ $((rep % 2)) -eq 0 ] && one_rail "$rep"
	done
	rdma link delete rxe1
	ip link del dummy1
else
	echo "# cannot add rxe1 on dummy1: no rails rows"
fi

# Memory must not grow with file size: a 1 GiB and an 8 GiB sparse file
# (1 MiB of data at the end, so it is cheap) through the same ring.
for g in 1 8; do
	truncate -s "$((g * 1024 - 1))M" /tmp/b/sparse.bin
	head -c 1048576 /dev/urandom >>/tmp/b/sparse.bin
	rdcp -v --listen $K --root /tmp/b/root --once \
		--port 7492 >/tmp/b/srv.time 2>&1 &
	sleep 1
	rdcp -v $K --port 7492 /tmp/b/sparse.bin "$ADDR::s.bin" >/tmp/b/cli.time 2>&1 ||
		echo "# sparse copy failed"
	wait
	echo "BENCH rss_${g}g 1 0 0 0 $(maxrss /tmp/b/cli.time) $(maxrss /tmp/b/srv.time)"
	rm -f /tmp/b/sparse.bin /tmp/b/root/s.bin
done
rnr1=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_rnr_err)
echo "BENCH rnr 1 $((rnr1 - rnr0))"
