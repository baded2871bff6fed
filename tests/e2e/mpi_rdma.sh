#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# rdcp-mpi over Soft-RoCE: one qemu guest (tests/guest/guest.sh) runs a
# receiver on rxe0 and `mpirun -np 3 rdcp-mpi --transport rdma` against
# it, so every rank's session goes over rdma_cm and RDMA WRITEs; the tree
# arrives whole (its 24 MB file split into three ranges of 8 MiB, sent by
# the ranks at once), the summary says rdma and the rxe counters saw the
# bytes.
#
# The guest is a busybox initramfs made of host binaries and what ldd
# lists for them. Open MPI also dlopens its components and reads its help
# and parameter files, so this ships them as they are on the host:
# orterun (as mpirun) and orted, /usr/lib/x86_64-linux-gnu/openmpi (the
# components, libmpi), pmix2, /usr/share/openmpi, /etc/openmpi, and every
# library a component links; the guest gets a host name (Open MPI refuses
# "(none)"). Prints TAP and a closing "N passed, N failed".
#
#   tests/e2e/mpi_rdma.sh [--build DIR]
set -uo pipefail
BUILD=build
if [ "${1:-}" = --build ]; then
	BUILD=$2
	shift 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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
kill "$RX"
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
