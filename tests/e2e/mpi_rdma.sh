#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# rdcp-mpi over Soft-RoCE: one qemu guest (tests/guest/guest.sh) runs a
# receiver on rxe0 and `mpirun -np 3 rdcp-mpi --transport rdma` against
# it, so every rank's session goes over rdma_cm and RDMA WRITEs; the tree
# arrives whole (its 24 MB file split into three ranges of 8 MiB, sent by
# the ranks at once), the summary says rdma and the rxe counters saw the
# bytes; then --delete mirrors it, the extras put there removed.
#
# The guest is a busybox initramfs made of host binaries and what ldd
# lists for them. Open MPI also dlopens its components and reads its help
# and parameter files, so this ships them as they are on the host:
# orterun (as mpirun) and orted, /usr/lib/x86_64-linux-gnu/openmpi (the
# components, libmpi), pmix2, /usr/share/openmpi, /etc/openmpi, and every
# library a component links; the guest gets a host name (Open MPI refuses
# "(none)"). Prints TAP and a closing "N passed, N failed".
#
# With --pair: two guests (guest.sh run --pair), the three ranks in guest
# a and the receiver in guest b, so every range crosses the emulated link
# between two kernels' rxe; each guest prints an MD5 line per file (a of
# its sources, b of what it placed once a's job has ended, which a tells
# it with one more push), and the host compares the two lists.
#
#   tests/e2e/mpi_rdma.sh [--build DIR] [--pair]
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
PAIR=0
[ "${1:-}" = --pair ] && PAIR=1
GUEST=$HERE/../guest/guest.sh
fail() { echo "not ok 1 - rdcp-mpi over Soft-RoCE: $*"; echo "0 passed, 1 failed"; exit 1; }
for b in "$BUILD/rdcp" "$BUILD/rdcp-mpi"; do
	[ -x "$b" ] || fail "$b missing (make all mpi)"
done
ML=/usr/lib/x86_64-linux-gnu
[ -x /usr/bin/orterun ] && [ -d "$ML/openmpi/lib/openmpi3" ] ||
	fail "Open MPI 4 (openmpi-bin) is not installed"

T=$(mktemp -d /tmp/rdcp-mpi-rdma.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$GUEST" prepare >"$T/prepare.log" 2>&1 ||
	fail "guest.sh prepare: $(tail -n 3 "$T/prepare.log")"
cp "$BUILD/rdcp" "$BUILD/rdcp-mpi" "$T/"
ln -s /usr/bin/orterun "$T/mpirun"
"$T/rdcp" --keygen "$T/key" >/dev/null 2>&1 || fail "rdcp --keygen"

cat >"$T/inside.sh" <<'EOF'
#!/bin/sh
. /test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hostname guest
t_begin "rdcp-mpi: 3 ranks to a receiver over rdma_cm (Soft-RoCE)"
mkdir -p /tmp/src/t/d /tmp/dst
i=0
while [ $i -lt 60 ]; do
	head -c $((i * 997 + 1)) /dev/urandom >/tmp/src/t/d/f$i
	i=$((i + 1))
done
head -c 24000000 /dev/urandom >/tmp/src/t/big
ln -s d/f1 /tmp/src/t/link
rdcp --listen -v --transport rdma --bind 10.77.0.1 --root /tmp/dst >/tmp/rx.log 2>&1 &
RX=$!
wait_until 10 "$RX" logged /tmp/rx.log listening || t_fail "no receiver"
s0=$(rxe_sent)
timeout -s KILL 240 mpirun --oversubscribe -np 3 --mca btl self,tcp \
	--mca pml ob1 rdcp-mpi --transport rdma -v --split-size 8M \
	-r /tmp/src/t 10.77.0.1::out/ >/tmp/mpi.log 2>&1
rc=$?
s1=$(rxe_sent)
[ "$rc" = 0 ] || t_fail "mpirun exit $rc"
grep -q 'over rdma by 3 ranks to 1 receiver' /tmp/mpi.log ||
	t_fail "the summary does not say rdma, 3 ranks"
diff -r /tmp/src/t /tmp/dst/out/t >/tmp/diff 2>&1 ||
	t_fail "trees differ: $(head -c 300 /tmp/diff)"
# the split: two ranges sent without placing the file, one that placed it
n=$(grep -c "sent range [0-9] of 3 of '/tmp/src/t/big'" /tmp/mpi.log)
[ "$n" = 2 ] || t_fail "$n ranges of big reported, want 2 (and the final one)"
[ -z "$(find /tmp/dst -name '.*.rdcp-*')" ] || t_fail "a temporary or state left"
over_rdma "rdcp-mpi" "$s0" "$s1" 24000000
grep 'rank [0-9] on' /tmp/mpi.log | sed 's/^/# /'
t_log /tmp/mpi.log /tmp/rx.log
t_end
t_begin "rdcp-mpi --delete over rdma_cm: after the job, one session removes the extras"
echo x >/tmp/dst/out/t/extra
mkdir -p /tmp/dst/out/t/d/xdir
echo y >/tmp/dst/out/t/d/xdir/y
timeout -s KILL 240 mpirun --oversubscribe -np 3 --mca btl self,tcp \
	--mca pml ob1 rdcp-mpi --transport rdma --delete --split-size 8M \
	-r /tmp/src/t 10.77.0.1::out/ >/tmp/mpidel.log 2>&1
rc=$?
[ "$rc" = 0 ] || t_fail "mpirun --delete exit $rc"
grep -q 'deleted 3$' /tmp/mpidel.log || t_fail "the summary does not say deleted 3"
diff -r /tmp/src/t /tmp/dst/out/t >/tmp/diff 2>&1 ||
	t_fail "not a mirror: $(head -c 300 /tmp/diff)"
t_log /tmp/mpidel.log /tmp/rx.log
kill "$RX"
t_end
t_finish
EOF

cat >"$T/pair.sh" <<'EOF'
#!/bin/sh
# Guest a: the ranks; guest b: the receiver (RDCP_GUEST_ROLE).
. /test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hostname "guest-$RDCP_GUEST_ROLE"
sums() { (cd "$1" && find . -type f | sort | while read -r f; do
	echo "SUM $(md5sum <"$f" | cut -d' ' -f1) $f"; done); }
if [ "$RDCP_GUEST_ROLE" = b ]; then
	mkdir -p /tmp/dst
	rdcp --listen -v --transport rdma --bind "$RDCP_GUEST_ADDR" \
		--root /tmp/dst >/tmp/rx.log 2>&1 &
	RX=$!
	t_begin "receiver in guest b: every range placed, nothing left over"
	i=0 # a pushes /tmp/done last, once its job has ended
	while [ ! -f /tmp/dst/done ] && [ $i -lt 2400 ]; do
		usleep 100000
		i=$((i + 1))
	done
	[ -f /tmp/dst/done ] || t_fail "guest a never said it was done"
	[ -z "$(find /tmp/dst -name '.*.rdcp-*')" ] ||
		t_fail "a temporary or state left: $(find /tmp/dst -name '.*.rdcp-*')"
	grep -q "received 'out/t/big'" /tmp/rx.log || t_fail "big not received"
	sums /tmp/dst/out
	t_log /tmp/rx.log
	kill "$RX"
	t_end
	t_finish
	exit
fi
t_begin "rdcp-mpi: 3 ranks in guest a, a split file to a receiver in guest b over rdma_cm"
mkdir -p /tmp/src/t/d
i=0
while [ $i -lt 20 ]; do
	head -c $((i * 997 + 1)) /dev/urandom >/tmp/src/t/d/f$i
	i=$((i + 1))
done
head -c 24000000 /dev/urandom >/tmp/src/t/big
echo done >/tmp/done
i=0 # b's receiver up: a probe push goes through
until rdcp --transport rdma /tmp/done "$RDCP_PEER_ADDR::probe" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 60 ] || { t_fail "no receiver in guest b"; break; }
	sleep 1
done
s0=$(rxe_sent)
timeout -s KILL 240 mpirun --oversubscribe -np 3 --mca btl self,tcp \
	--mca pml ob1 rdcp-mpi --transport rdma -v --split-size 8M \
	-r /tmp/src/t "$RDCP_PEER_ADDR::out/" >/tmp/mpi.log 2>&1
rc=$?
s1=$(rxe_sent)
[ "$rc" = 0 ] || t_fail "mpirun exit $rc"
grep -q 'over rdma by 3 ranks to 1 receiver' /tmp/mpi.log ||
	t_fail "the summary does not say rdma, 3 ranks"
n=$(grep -c "sent range [0-9] of 3 of '/tmp/src/t/big'" /tmp/mpi.log)
[ "$n" = 2 ] || t_fail "$n ranges of big reported, want 2 (and the final one)"
over_rdma "rdcp-mpi" "$s0" "$s1" 24000000
sums /tmp/src
grep 'rank [0-9] on' /tmp/mpi.log | sed 's/^/# /'
rdcp --transport rdma /tmp/done "$RDCP_PEER_ADDR::" >/dev/null 2>&1 ||
	t_fail "cannot tell guest b it is done"
t_log /tmp/mpi.log
t_end
t_finish
EOF

args=(--bin "$T/rdcp" --bin "$T/rdcp-mpi" --bin /usr/bin/orterun
	--bin /usr/bin/orted --bin "$T/mpirun" --file "$T/key:/etc/rdcp/key"
	--file "$HERE/lib.sh:/test/lib.sh"
	--file "$ML/openmpi:$ML/openmpi" --file "$ML/pmix2:$ML/pmix2"
	--file /usr/share/openmpi:/usr/share/openmpi
	--file /etc/openmpi:/etc/openmpi)
[ -d /usr/share/pmix ] && args+=(--file /usr/share/pmix:/usr/share/pmix)
for l in $(for so in "$ML"/openmpi/lib/openmpi3/*.so "$ML"/pmix2/lib/pmix/*.so; do
	ldd "$so" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'
done | sort -u); do
	args+=(--file "$l:$l")
done
if [ "$PAIR" = 1 ]; then
	"$GUEST" run --pair --timeout 400 --mem 1536 "${args[@]}" \
		"$T/pair.sh" >"$T/run.log" 2>&1
	rc=$?
	# what a sent, what b placed: the same files, the same bytes
	sed -n 's/^\[a\] SUM \([0-9a-f]*\) \.\/t\//\1 /p' "$T/run.log" |
		sort >"$T/sums-a"
	sed -n 's/^\[b\] SUM \([0-9a-f]*\) \.\/t\//\1 /p' "$T/run.log" |
		sort >"$T/sums-b"
	grep -E '^\[[ab]\] (ok|not ok|#)' "$T/run.log"
	p=$(grep -cE '^\[[ab]\] ok ' "$T/run.log")
	f=$(grep -cE '^\[[ab]\] not ok ' "$T/run.log")
	if [ -s "$T/sums-a" ] && cmp -s "$T/sums-a" "$T/sums-b"; then
		echo "ok - guest b holds every file of guest a, byte for byte ($(wc -l <"$T/sums-a") files)"
		p=$((p + 1))
	else
		echo "not ok - the files in guest b differ from guest a's sources"
		diff "$T/sums-a" "$T/sums-b" | head -n 10 | sed 's/^/#   /'
		f=$((f + 1))
	fi
	if [ "$p" -lt 3 ] && [ "$f" = 0 ]; then
		echo "not ok - the guests ended with $rc before their results"
		tail -n 20 "$T/run.log" | sed 's/^/#   /'
		f=1
	fi
	echo "$p passed, $f failed"
	[ "$f" -eq 0 ] && [ "$rc" -eq 0 ]
	exit
fi
"$GUEST" run --timeout 300 --mem 2048 "${args[@]}" "$T/inside.sh" \
	>"$T/run.log" 2>&1
rc=$?
grep -E '^(ok|not ok|#)' "$T/run.log"
if ! grep -qE '^(ok|not ok) ' "$T/run.log"; then
	echo "not ok 1 - rdcp-mpi over Soft-RoCE: the guest ended with $rc before a result"
	tail -n 20 "$T/run.log" | sed 's/^/#   /'
fi
p=$(grep -c '^ok ' "$T/run.log")
f=$(grep -c '^not ok ' "$T/run.log")
[ "$p" -gt 0 ] || [ "$f" -gt 0 ] || f=1
echo "$p passed, $f failed"
[ "$f" -eq 0 ] && [ "$rc" -eq 0 ]
