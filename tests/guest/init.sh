#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# /init of the Soft-RoCE test guest (busybox sh, no systemd).  Built into
# the initramfs by tests/guest/guest.sh.  Mounts the pseudo file systems,
# loads the RDMA modules listed in /lib/modules/order, brings up the netdev
# (dummy0 in single mode, virtio eth0 in pair mode), adds rxe0 on it,
# starts sshd if the run shipped a host key, runs /test/script.sh with the
# arguments stored in /test/args/, prints RDCP-GUEST-EXIT=<status> and
# powers the machine off.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm /tmp /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run

fail() {
	echo "rdcp-guest: init: $*"
	echo "RDCP-GUEST-EXIT=125"
	poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 5
	exit 1
}

role=single
# shellcheck disable=SC2013 # the kernel command line is words
for a in $(cat /proc/cmdline); do
	case "$a" in
	rdcp.role=*) role=${a#rdcp.role=} ;;
	esac
done

while read -r m; do
	[ -n "$m" ] || continue
	insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done </lib/modules/order
mount -t configfs configfs /sys/kernel/config || fail "mount configfs failed"

ip=/usr/sbin/ip
$ip link set lo up
case "$role" in
single)
	dev=dummy0
	addr=10.77.0.1
	peer=
	[ -e /sys/class/net/dummy0 ] || $ip link add dummy0 type dummy ||
		fail "cannot create dummy0"
	;;
a)
	dev=eth0
	addr=10.77.1.1
	peer=10.77.1.2
	;;
b)
	dev=eth0
	addr=10.77.1.2
	peer=10.77.1.1
	;;
*) fail "unknown role $role" ;;
esac
[ -e "/sys/class/net/$dev" ] || fail "netdev $dev missing"
$ip link set "$dev" mtu 1500 up || fail "cannot bring $dev up"
$ip addr add "$addr/24" dev "$dev" || fail "cannot set address on $dev"
rdma link add rxe0 type rxe netdev "$dev" || fail "rdma link add rxe0 on $dev failed"

# shellcheck disable=SC3045 # busybox sh has ulimit -l
ulimit -l unlimited
# OpenSSH's sshd on port 22 when the run shipped a host key (run_rdma.sh:
# root logs in with the key in /root/.ssh). Started after the ulimit: what
# it runs (an rdcp started over ssh) may pin memory as the script may.
if [ -f /etc/ssh/ssh_host_ed25519_key ]; then
	mkdir -m 0755 /run/sshd
	/usr/sbin/sshd -E /run/sshd.log ||
		echo "rdcp-guest: init: sshd did not start: $(tail -n 1 /run/sshd.log)"
fi
export RDCP_GUEST_ROLE="$role" RDCP_GUEST_ADDR=$addr HOME=/tmp
[ -n "$peer" ] && export RDCP_PEER_ADDR=$peer

set --
for f in /test/args/*; do
	[ -f "$f" ] && set -- "$@" "$(cat "$f")"
done
echo "RDCP-GUEST-READY role=$role addr=$addr uptime=$(cut -d' ' -f1 /proc/uptime)"
cd /test || fail "no /test"
/bin/sh /test/script.sh "$@" </dev/null 2>&1
st=$?
echo "RDCP-GUEST-EXIT=$st"
poweroff -f
echo o >/proc/sysrq-trigger
sleep 5
