#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# In the Soft-RoCE guest (tests/bench/iodepth.sh boots it; no network
# used): the network-free ceiling (bench_ceiling) copies a file from tmpfs
# into ext4 on a null_blk device whose every request completes LAT µs
# after it was queued (memory backed, irqmode=2 completion_nsec; LAT 0:
# at once, irqmode=0), with O_DIRECT, the sink's writes made by its
# WORKERS threads (-U off: at most WORKERS in flight) or through its
# io_uring (-U 0), the two arms interleaved (the order alternates each
# round). Prints "IOD LAT_US ARM ROUND key=value ..." lines (bench_ceiling's
# CEIL line), each copy checked byte for byte; "# ..." lines say what
# went wrong.
#   iodepth_guest.sh MIB ROUNDS CHUNK WORKERS "ARGS" LAT_US...
# (ARGS: more bench_ceiling options, "" none.)
MIB=${1:-64}
ROUNDS=${2:-3}
CHUNK=${3:-16384}
WORKERS=${4:-1}
ARGS=${5:-}
shift 5 || exit 2
W=/tmp/iod
MNT=$W/mnt
fail=0
mkdir -p "$MNT" || exit 1
head -c $((MIB * 1048576)) /dev/urandom >"$W/src"
echo "# kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) vCPUs"
for lat in "$@"; do
	rmmod null_blk 2>/dev/null
	if [ "$lat" = 0 ]; then
		irq="irqmode=0"
	else
		irq="irqmode=2 completion_nsec=$((lat * 1000))"
	fi
	# shellcheck disable=SC2086 # irq is words
	insmod /lib/modules/null_blk.ko nr_devices=1 memory_backed=1 gb=1 \
		bs=4096 hw_queue_depth=256 $irq ||
		{ echo "# insmod null_blk $irq failed"; exit 1; }
	i=0
	while [ ! -b /dev/nullb0 ] && [ $i -lt 50 ]; do
		usleep 100000
		i=$((i + 1))
	done
	if ! mkfs.ext4 -q -F /dev/nullb0 >/dev/null 2>&1 ||
		! mount -t ext4 /dev/nullb0 "$MNT"; then
		echo "# mkfs or mount on nullb0 failed"
		exit 1
	fi
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then arms="threads uring"; else arms="uring threads"; fi
		for arm in $arms; do
			case $arm in
			threads) u=off ;;
			uring) u=0 ;;
			esac
			rm -f "$MNT/out"
			sync
			# shellcheck disable=SC2086 # ARGS is words
			line=$(bench_ceiling -w "$WORKERS" -c "$CHUNK" -n 64 -d on \
				-U $u $ARGS "$W/src" "$MNT" out 2>"$W/err") || {
				echo "# $lat us $arm: bench_ceiling failed: $line"
				sed 's/^/# /' "$W/err"
				fail=1
			}
			cmp -s "$W/src" "$MNT/out" || { echo "# $lat us $arm: the copy differs"; fail=1; }
			echo "IOD $lat $arm $r ${line#CEIL }"
		done
	done
	umount "$MNT"
done
rmmod null_blk 2>/dev/null
exit $fail
