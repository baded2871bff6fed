#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# NUMA placement and huge pages over Soft-RoCE, in a guest of its own
# (`tests/guest/guest.sh run --numa`, started by tests/e2e/run_rdma.sh
# numa): two NUMA nodes, vCPU 1 and half the memory on node 1, and a
# virtio NIC, "eth0" (found by its MAC), behind a PCI expander bridge on
# node 1. rxe1 goes on eth0 (10.77.3.1; rdma_cm picks it for that address), the hugetlb pool
# gets pages on both nodes, and one receiver and one sender copy a file
# over it while their /proc/PID/numa_maps, their threads' CPU lists and
# HugePages_Free are sampled: the ring and the staging buffers must be in
# 2 MiB pages on node 1, the engine threads and workers on CPU 1, the copy
# byte-identical. Then --hugepages off and --numa off, and --hugepages on
# with the pool emptied (a clear error, exit 10). Last, rails on two
# nodes: rxe2 on "eth1" (10.77.4.1, the guest's second NIC, on node 0), the
# unit test's per-rail placement case (test_numa, shipped when built) and a
# two-rail session (--device rxe1,rxe2 --streams 2, 2 MiB chunks) whose
# ring and staging must have huge pages on both nodes, lane 0's slots on
# node 1 and lane 1's on node 0.
# Prints TAP; expects rdcp in PATH and lib.sh beside it.

# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

W=/tmp/numa
ADDR=10.77.3.1
P=7600
NODE1=/sys/devices/system/node/node1
HP=hugepages/hugepages-2048kB/nr_hugepages
rm -rf "$W"
mkdir -p "$W/src" "$W/rx" || exit 1
cd "$W" || exit 1

hp_free() { awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo; }

# sample PID OUT: until PID ends, append its huge mappings (numa_maps),
# its threads' CPU lists and HugePages_Free to OUT.
sample() {
	while alive "$1"; do
		{
			grep huge "/proc/$1/numa_maps" 2>/dev/null | sed 's/^/MAP /'
			# one line per sample: every thread's CPU list
			echo "CPUS $(cat /proc/"$1"/task/*/status 2>/dev/null |
				awk '/^Cpus_allowed_list:/ { printf "%s ", $2 }')"
			echo "FREE $(hp_free)"
		} >>"$2"
		usleep 100000
	done
}

# ---------------------------------------------------------------- setup

# nic MAC: the interface of that address (guest.sh --numa's: :01 on node
# 1, :02 on node 0; which of them the kernel calls eth0 is its choice).
nic() {
	for _d in /sys/class/net/*; do
		[ "$(cat "$_d/address" 2>/dev/null)" = "$1" ] && echo "${_d##*/}"
	done
}

t_begin "guest: two NUMA nodes, eth0 on node 1, rxe1 on eth0"
eth0=$(nic 52:54:00:77:03:01)
[ -n "$eth0" ] || t_fail "no NIC with MAC 52:54:00:77:03:01"
eth0=${eth0:-eth0}
ip link set "$eth0" up 2>/dev/null || t_fail "no $eth0"
ip addr add "$ADDR/24" dev "$eth0" 2>/dev/null || t_fail "cannot address $eth0"
rdma link add rxe1 type rxe netdev "$eth0" 2>/dev/null || t_fail "rdma link add rxe1 failed"
[ -d "$NODE1" ] || t_fail "no NUMA node 1 (qemu -numa, kernel CONFIG_NUMA)"
# eth0's device is a virtio one, whose parent is the PCI function on the pxb.
n=$(cat "/sys/class/net/$eth0/device/../numa_node" 2>/dev/null)
[ "$n" = 1 ] || t_fail "$eth0's PCI function's numa_node is '$n', want 1 (qemu pxb numa_node=1)"
echo "# node1 CPUs $(cat "$NODE1/cpulist" 2>/dev/null), $eth0 node $n," \
	"rxe1 parent $(cat /sys/class/infiniband/rxe1/parent 2>/dev/null || echo none)"
# 2 MiB pages on both nodes: placement, not scarcity, puts them on 1.
echo 24 >/sys/devices/system/node/node0/$HP
echo 24 >"$NODE1/$HP"
[ "$(cat "$NODE1/$HP")" = 24 ] || t_fail "node 1 has $(cat "$NODE1/$HP") huge pages, want 24"
t_end

t_begin "--check names rxe1's NUMA node and the free huge pages"
rdcp --check --window 16 >"$W/check.log" 2>&1
grep -q "rxe1: NUMA node 1: ring, staging and threads go there (CPUs 1)" "$W/check.log" ||
	t_fail "no NUMA line for rxe1"
grep -q "huge pages: 48 of 2 MiB free" "$W/check.log" || t_fail "no huge pages line"
t_log "$W/check.log"
t_end

head -c $((96 * M)) /dev/urandom >"$W/src/big" 2>/dev/null

# copy NAME LOGTAG ARGS...: one copy of src/big to rx/NAME over rxe1
# with ARGS on both sides, sampled; RC = the sender's status.
copy() {
	_name=$1 _tag=$2
	shift 2
	nextport
	: >"$W/rx-$_tag.samples"
	: >"$W/tx-$_tag.samples"
	start_rx "$W/rx-$_tag.log" --root "$W/rx" --port $P --window 16 "$@" ||
		t_fail "receiver did not start"
	sample "$RX" "$W/rx-$_tag.samples" &
	_s1=$!
	bg_send "$W/tx-$_tag.log" -v --json --window 16 --port $P "$@" \
		"$W/src/big" "$ADDR::$_name"
	sample "$TX" "$W/tx-$_tag.samples" &
	_s2=$!
	wait_pid "$TX" 240
	RC=$WRC
	term_rx "$RX"
	wait "$_s1" "$_s2" 2>/dev/null
}

# ---------------------------------------------------------------- huge

t_begin "over rxe1: ring and staging in 2 MiB pages on node 1, threads on node 1's CPU"
before=$(hp_free)
copy huge huge
[ "$RC" = 0 ] || t_fail "sender exit $RC"
same "$W/src/big" "$W/rx/huge"
grep -q "ring: 16.00 MiB in 2 MiB huge pages, NUMA node 1" "$W/rx-huge.log" ||
	t_fail "receiver -v does not say huge pages on node 1"
grep -q "staging buffers: 16.00 MiB in 2 MiB huge pages, NUMA node 1" "$W/tx-huge.log" ||
	t_fail "sender -v does not say huge pages on node 1"
grep -q "rxe1: NUMA node 1, CPUs 1, 2 workers" "$W/tx-huge.log" ||
	t_fail "sender -v does not say node 1, CPU 1"
for side in rx tx; do
	f=$W/$side-huge.samples
	# numa_maps: "ADDR prefer:1 file=/anon_hugepage\040(deleted) huge
	# dirty=9 N1=9 kernelpagesize_kB=2048"
	grep -q "^MAP .*prefer:1 .*huge.* N1=[0-9]" "$f" ||
		t_fail "$side: no huge mapping on node 1 in numa_maps"
	if grep "^MAP .*huge" "$f" | grep -q " N0="; then
		t_fail "$side: huge pages on node 0"
	fi
	# The engine thread and its 2 workers on CPU 1 (the receiver's
	# listener thread is not a session's: it may run anywhere).
	pinned=$(awk '/^CPUS/ { n = 0; for (i = 2; i <= NF; i++) n += $i == "1"; if (n > m) m = n } END { print m + 0 }' "$f")
	[ "${pinned:-0}" -ge 3 ] || t_fail "$side: ${pinned:-0} threads on CPU 1 alone, want 3"
done
echo "# receiver: $(grep -m1 "^MAP" "$W/rx-huge.samples")"
echo "# receiver threads' CPUs: $(awk '/^CPUS/ && NF > m { m = NF; l = $0 } END { print l }' "$W/rx-huge.samples")"
low=$(grep -h "^FREE" "$W"/rx-huge.samples "$W"/tx-huge.samples | awk '{ print $2 }' | sort -n | head -1)
echo "# HugePages_Free $before before, $low at the lowest during the copy"
if [ -z "$low" ] || [ "$low" -gt $((before - 16)) ]; then
	t_fail "HugePages_Free did not drop by 2 x 8 pages ($before -> $low)"
fi
[ "$(hp_free)" = "$before" ] || t_fail "huge pages not given back: $(hp_free) free, $before before"
grep -q '"numa_node":1,"workers":2,"pages":"2 MiB huge pages"' "$W/tx-huge.log" ||
	t_fail "--json summary lacks node, workers and pages"
t_log "$W/rx-huge.log" "$W/tx-huge.log" "$W/tx-huge.samples"
t_end

t_begin "--hugepages off, --numa off: ordinary pages, threads anywhere"
before=$(hp_free)
copy plain plain --hugepages off --numa off
[ "$RC" = 0 ] || t_fail "sender exit $RC"
same "$W/src/big" "$W/rx/plain"
grep -q "staging buffers: 16.00 MiB in 4 KiB pages" "$W/tx-plain.log" || t_fail "sender not in 4 KiB pages"
grep -q "ring: 16.00 MiB in 4 KiB pages" "$W/rx-plain.log" || t_fail "receiver not in 4 KiB pages"
grep -q "rxe1: NUMA node unknown, CPUs 0-1" "$W/tx-plain.log" || t_fail "sender pinned with --numa off"
grep -q "^MAP" "$W/tx-plain.samples" && t_fail "sender has huge mappings"
low=$(grep -h "^FREE" "$W"/rx-plain.samples "$W"/tx-plain.samples | awk '{ print $2 }' | sort -n | head -1)
[ "${low:-$before}" = "$before" ] || t_fail "HugePages_Free moved ($before -> $low)"
t_log "$W/rx-plain.log" "$W/tx-plain.log"
t_end

t_begin "--hugepages on with no free huge page: the sender fails, saying why (exit 10)"
echo 0 >/sys/devices/system/node/node0/$HP
echo 0 >"$NODE1/$HP"
nextport
start_rx "$W/rx-on.log" --root "$W/rx" --port $P --window 16 || t_fail "receiver did not start"
send "$W/tx-on.log" --hugepages on --window 16 --port $P "$W/src/big" "$ADDR::on"
term_rx "$RX"
[ "$SRC" = 10 ] || t_fail "sender exit $SRC, want 10"
grep -q "cannot allocate staging buffers (16.00 MiB) in huge pages: 0 of 2 MiB free, 9 needed" "$W/tx-on.log" ||
	t_fail "no clear message"
[ -e "$W/rx/on" ] && t_fail "a file landed"
t_log "$W/tx-on.log" "$W/rx-on.log"
t_end

# ---------------------------------------------------------------- rails

ADDR2=10.77.4.1
t_begin "rails on two nodes: eth1 on node 0, rxe2 on eth1"
eth1=$(nic 52:54:00:77:03:02)
[ -n "$eth1" ] || t_fail "no NIC with MAC 52:54:00:77:03:02 (guest.sh --numa's second)"
n=$(cat "/sys/class/net/$eth1/device/../numa_node" 2>/dev/null)
[ "$n" = 0 ] || t_fail "$eth1's PCI function's numa_node is '$n', want 0 (qemu pxb numa_node=0)"
ip link set "$eth1" up 2>/dev/null || t_fail "cannot bring $eth1 up"
ip addr add "$ADDR2/24" dev "$eth1" 2>/dev/null || t_fail "cannot address $eth1"
rdma link add rxe2 type rxe netdev "$eth1" 2>/dev/null || t_fail "rdma link add rxe2 failed"
echo 24 >/sys/devices/system/node/node0/$HP
echo 24 >"$NODE1/$HP"
echo "# $eth1 node $n, rxe2 rate $(cat /sys/class/infiniband/rxe2/ports/1/rate 2>/dev/null)," \
	"rxe1 rate $(cat /sys/class/infiniband/rxe1/ports/1/rate 2>/dev/null)"
t_end

t_begin "unit test: each slot's pages on its rail's node (test_numa test_rail_place)"
if ! command -v test_numa >/dev/null 2>&1; then
	t_fail "test_numa not shipped (make build/tests/test_numa before run_rdma.sh numa)"
else
	test_numa test_rail_place >"$W/unit.log" 2>&1
	rc=$?
	sed 's/^/#   /' "$W/unit.log"
	[ "$rc" = 0 ] || t_fail "test_numa exit $rc"
	grep -q "^1 passed, 0 failed" "$W/unit.log" || t_fail "test_numa: no clean pass"
	grep -q "skip" "$W/unit.log" && t_fail "test_numa skipped: it sees one node"
fi
t_end

t_begin "two rails on two nodes: each lane's slots on its device's node"
copy rails rails --device rxe1,rxe2 --streams 2 --chunk-size 2M
[ "$RC" = 0 ] || t_fail "sender exit $RC"
same "$W/src/big" "$W/rx/rails"
grep -q "ring: .* in 2 MiB huge pages, by rail: NUMA node 1 (16.00 MiB), 0 (16.00 MiB)" "$W/rx-rails.log" ||
	t_fail "receiver -v does not say the ring's slots are on nodes 1 and 0"
grep -q "staging buffers: .* in 2 MiB huge pages, by rail: NUMA node 1 (16.00 MiB), 0 (16.00 MiB)" "$W/tx-rails.log" ||
	t_fail "sender -v does not say the staging slots are on nodes 1 and 0"
for side in rx tx; do
	f=$W/$side-rails.samples
	grep -q "^MAP .*prefer:0 .*huge.* N0=[0-9]" "$f" || t_fail "$side: no huge mapping on node 0"
	grep -q "^MAP .*prefer:1 .*huge.* N1=[0-9]" "$f" || t_fail "$side: no huge mapping on node 1"
	if grep "^MAP .*prefer:0 .*huge" "$f" | grep -q " N1="; then
		t_fail "$side: node 0's slots have pages on node 1"
	fi
done
echo "# receiver's huge mappings: $(grep "^MAP" "$W/rx-rails.samples" | sort -u | awk '{ printf "%s %s %s; ", $2, $NF, $(NF-1) }')"
t_log "$W/rx-rails.log" "$W/tx-rails.log" "$W/rx-rails.samples"
t_end

t_finish
