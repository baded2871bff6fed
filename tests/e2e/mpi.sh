#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# rdcp-mpi end to end on this host: `mpirun --oversubscribe -np 4..8` over
# TCP on loopback to two or three receivers (rdcp --listen) sharing one
# root, as the nodes of a cluster share a parallel file system. Every file
# is compared with its source, and nothing may sit under a final name that
# differs from its source. Runs in a network namespace of its own when it
# can (root), so that its fixed ports meet nobody else's.
#
#   tests/e2e/mpi.sh [--build DIR] [SCENARIO...]    (--list: the names)
#
# Scenarios: tree (many small files, a huge directory, a deep branch,
# symlinks, an empty directory), balance (the bytes of one huge directory
# and one deep branch shared by every rank: measured), big (one 1 GiB
# sparse file split into ranges over the ranks, among small ones: its one
# file_done has the whole file's CRC32), mix (SRCs from different
# directories, a file split among them, 8 ranks, 3 receivers), partial (a
# SRC missing: the others copied, exit 9, the job not cancelled), usage (a
# bad command line: exit 2, one message), noconnect (one of two receivers
# not there: exit 3, the rank and receiver named), rxkill (a receiver
# killed mid-job, ranges in flight: exit 11 in bounded time), rankkill (a
# rank killed mid-job, then --resume finishes, the directory's mode
# right), rangekill (a rank killed
# while it sends a range of a split file; --resume sends only the ranges
# missing), badrange (a range corrupted in flight by the hooks build:
# that file fails alone, once), hang (a rank stopped: the coordinator finds it silent and
# ends the job, exit 11), hang0 (rank 0 stopped: the others find it
# silent and end the job, exit 11), mirror (--delete, 4 ranks, 2
# receivers: --dry-run lists, nothing deleted when a rank failed,
# --max-delete exit 13, then one listing removes the extras, excluded
# names and what a symlink points to kept), devices (-D: FIFOs, and as
# root a device node), retry (--retry: a receiver
# killed and restarted mid-job, the ranks resume, exit 0, all verified),
# retryfail (--retry and a receiver with another key: ends at once).
# shellcheck disable=SC2317 # functions run by name (scenario lists, traps, wait_until callbacks)
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
# shellcheck disable=SC2016 # single quotes: expanded by the inner sh -c / remote shell
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
ALL="tree balance big mix partial usage noconnect rxkill rankkill rangekill skipfinal badrange hang hang0 mirror devices retry retryfail"
check_scenarios "$ALL" "$@"

own_netns RDCP_MPI_NETNS "$@"

need_built "make all mpi" "$BUILD/rdcp" "$BUILD/rdcp-mpi"
command -v mpirun >/dev/null ||
	{ echo "not ok 1 - mpirun missing (apt-get install openmpi-bin)"; exit 1; }

T=$(mktemp -d /tmp/rdcp-e2e-mpi.XXXXXX)
PIDFILE=$T/pids
cleanup() {
	local p
	if [ -f "$PIDFILE" ]; then
		while read -r p; do
			[ -r "/proc/$p/cmdline" ] || continue
			tr '\0' ' ' <"/proc/$p/cmdline" | grep -Eq 'rdcp|mpirun' &&
				kill -9 "$p" 2>/dev/null
		done <"$PIDFILE"
	fi
	mountpoint -q "$T/w" 2>/dev/null && umount "$T/w"
	rm -rf "$T"
}
trap cleanup EXIT
[ -z "${MPI_KEEP:-}" ] || trap - EXIT
mkdir -p "$T/w"
# The files live in memory: the disk's writeback would stretch the timing.
[ "$(id -u)" != 0 ] || mount -t tmpfs -o size=4g tmpfs "$T/w" ||
	echo "# cannot mount a tmpfs on $T/w: using the disk"
W=$T/w
RDCP=$BUILD/rdcp
"$RDCP" --keygen "$T/key" >/dev/null 2>&1 ||
	{ echo "not ok 1 - rdcp --keygen failed"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No shared memory transport in a container without a large /dev/shm,
# and nothing but loopback to look for.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
P=7810
RXS=""

# receivers N ROOT [ARGS...]: N receivers on ports P+1.., one root, each
# with ARGS too; RECV = their list for DEST
# (rdcp://127.0.0.1:P1,127.0.0.1:P2/...).
receivers() {
	local i n=$1 root=$2 list=""
	shift 2
	RXS=""
	mkdir -p "$root"
	for i in $(seq 1 "$n"); do
		nextport
		start_rx "$T/rx$i.log" --transport tcp -P "$P" --root "$root" \
			--key-file "$T/key" "$@" ||
			t_fail "receiver $i did not start"
		RXS="$RXS $RX"
		list="$list${list:+,}127.0.0.1:$P"
	done
	RECV="rdcp://$list"
}
stop_receivers() {
	local p
	for p in $RXS; do term_rx "$p"; done
	RXS=""
}

# mpi LOG NP ARGS...: rdcp-mpi under mpirun, bounded; SRC = its status.
# stdout (--json) to LOG, stderr to LOG.err: mpirun relays the two in
# chunks of its own, which may cut a line of one with a line of the other.
mpi() {
	local log=$1 np=$2
	shift 2
	run_bounded 180 "$log.err" sh -c 'log=$1; shift; exec "$@" >"$log"' _ \
		"$log" mpirun --oversubscribe -np "$np" \
		"$BUILD/rdcp-mpi" --transport tcp --key-file "$T/key" \
		--timeout 5 "$@"
}
# bg_mpi LOG ARGS...: mpirun ARGS in the background (TX), as mpi() logs.
bg_mpi() {
	local log=$1
	shift
	bg_run "$log.err" sh -c 'log=$1; shift; exec "$@" >"$log"' _ "$log" \
		mpirun "$@"
}

# verified SRC DST: every file under DST's final names equals its source
# (temporaries aside); every source file is there when $2 = all.
verified() {
	local src=$1 dst=$2 f n=0
	while IFS= read -r -d '' f; do
		f=${f#"$dst"/}
		case "${f##*/}" in .*.rdcp-part | .*.rdcp-ranges) continue ;; esac
		if [ -L "$dst/$f" ]; then
			[ "$(readlink "$dst/$f")" = "$(readlink "$src/$f")" ] ||
				t_fail "link $f differs"
		elif [ -f "$dst/$f" ]; then
			cmp -s "$src/$f" "$dst/$f" || t_fail "$f differs from its source"
			n=$((n + 1))
		fi
	done < <(find "$dst" \( -type f -o -type l \) -print0)
	VERIFIED=$n
}
complete() { # SRC DST: the whole tree is there, and nothing else
	diff -r --no-dereference "$1" "$2" >"$T/diff" 2>&1 ||
		t_fail "trees differ: $(head -c 300 "$T/diff")"
	no_temp "$2"
}

# A tree: a huge directory, a deep branch, small files, links, an empty dir.
make_tree() {
	local d=$1 i
	mkdir -p "$d/huge" "$d/deep" "$d/empty" "$d/s"
	for i in $(seq 1 1500); do printf 'h%d' "$i" >"$d/huge/f$i"; done
	local p=$d/deep
	for i in $(seq 1 40); do
		p=$p/d$i
		mkdir -p "$p"
		head -c $((i * 1000)) /dev/urandom >"$p/x"
	done
	for i in $(seq 1 30); do
		mkdir -p "$d/s/$i"
		for j in 1 2 3 4 5 6 7 8 9 10; do
			head -c $((i * 97 + j * 4099)) /dev/urandom >"$d/s/$i/$j"
		done
	done
	ln -s ../huge/f1 "$d/s/link"
	ln -s /nonexistent "$d/s/dangling"
}

# jsum LOG FIELD: a top-level FIELD of the --json summary (its ranks and
# receivers have fields of the same names, which jget would find).
jsum() {
	python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        j = json.loads(l)
        if j.get("event") == "summary":
            print(j[sys.argv[2]])' "$1" "$2" 2>/dev/null
}

# rank_files LOG: files_ok of each rank in the --json summary.
rank_files() {
	grep '"event":"summary"' "$1" | grep -o '"rank":[0-9]*,[^}]*"files_ok":[0-9]*' |
		sed 's/.*"files_ok":\([0-9]*\)/\1/' | tr '\n' ' '
}

s_tree() {
	t_begin "tree: 4 ranks, 2 receivers, 1800 files"
	make_tree "$W/tree"
	receivers 2 "$W/dst"
	mpi "$T/tree.log" 4 --json -r "$W/tree" "$RECV/t/"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	complete "$W/tree" "$W/dst/t/tree"
	[ "$(jsum "$T/tree.log" result)" = ok ] || t_fail "summary not ok"
	[ "$(jsum "$T/tree.log" nranks)" = 4 ] || t_fail "nranks"
	local f busy=0
	for f in $(rank_files "$T/tree.log"); do [ "$f" -gt 0 ] && busy=$((busy + 1)); done
	echo "# files per rank: $(rank_files "$T/tree.log")"
	[ "$busy" -ge 2 ] || t_fail "one rank copied everything: $(rank_files "$T/tree.log")"
	[ "$(grep -c '"event":"file_done"' "$T/tree.log")" -ge 1800 ] ||
		t_fail "file_done events missing"
	t_log "$T/tree.log.err" "$T/rx1.log"
	stop_receivers
	t_end
	rm -rf "$W/dst"
}

# rank_bytes LOG: bytes of each rank in the --json summary.
rank_bytes() {
	grep '"event":"summary"' "$1" | grep -o '"rank":[0-9]*,[^}]*"bytes":[0-9]*' |
		sed 's/.*"bytes":\([0-9]*\)/\1/' | tr '\n' ' '
}

s_balance() {
	t_begin "balance: one huge directory and one deep branch keep 4 ranks busy"
	local i p b min=-1 total=0
	mkdir -p "$W/bal/huge"
	for i in $(seq 1 320); do head -c 200000 /dev/urandom >"$W/bal/huge/f$i"; done
	p=$W/bal/deep
	for i in $(seq 1 40); do
		p=$p/d$i
		mkdir -p "$p"
		head -c 1000000 /dev/urandom >"$p/x"
	done
	touch -d '2001-02-03 04:05:06' "$W/bal/huge" "$W/bal/deep/d1/d2" "$W/bal"
	receivers 2 "$W/dst"
	# Each rank's session is held to 8 MB/s: the rate is the ranks'.
	# -p: the directories that every rank wrote into keep their times.
	mpi "$T/balance.log" 4 --json -p --bwlimit 8M -r "$W/bal" "$RECV/bal"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	complete "$W/bal" "$W/dst/bal/bal"
	(cd "$W/bal" && find . -type d -printf '%p %T@ %m\n' | sort) >"$T/bal.src"
	(cd "$W/dst/bal/bal" && find . -type d -printf '%p %T@ %m\n' | sort) >"$T/bal.dst"
	cmp -s "$T/bal.src" "$T/bal.dst" ||
		t_fail "-p: directory times or modes differ: $(diff "$T/bal.src" "$T/bal.dst" | head -c 300)"
	for b in $(rank_bytes "$T/balance.log"); do
		total=$((total + b))
		[ "$min" -ge 0 ] && [ "$min" -le "$b" ] || min=$b
	done
	echo "# bytes per rank: $(rank_bytes "$T/balance.log")in $(jsum "$T/balance.log" seconds) s"
	[ "$total" -gt 0 ] && [ $((min * 100 / total)) -ge 12 ] ||
		t_fail "a rank had less than 12% of the bytes: $(rank_bytes "$T/balance.log")"
	t_log "$T/balance.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/bal"
}

s_big() {
	t_begin "big: a 1 GiB sparse file split over 4 ranks, among small ones"
	mkdir -p "$W/big/small"
	truncate -s 1G "$W/big/huge.img"
	for o in 0 300 700 1023; do
		head -c 1048576 /dev/urandom |
			dd of="$W/big/huge.img" bs=1M seek="$o" conv=notrunc status=none
	done
	for i in $(seq 1 200); do head -c $((i * 311)) /dev/urandom >"$W/big/small/$i"; done
	receivers 2 "$W/dst"
	# four ranges of 256 MiB, one file_done (the range that placed it)
	mpi "$T/big.log" 4 --sparse --split-size 256M --json -r "$W/big" "$RECV/b"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	complete "$W/big" "$W/dst/b/big"
	grep -q '"receiver":"127.0.0.1:' "$T/big.log" || t_fail "no per-receiver summary"
	[ "$(grep -c "\"event\":\"file_done\",\"path\":\"$W/big/huge.img\"" "$T/big.log")" = 1 ] ||
		t_fail "not one file_done for the split file"
	[ "$(grep -c "\"event\":\"range_done\",\"path\":\"$W/big/huge.img\"" "$T/big.log")" = 3 ] ||
		t_fail "not three range_done events"
	local want got
	want=$(python3 -c 'import sys, zlib
c = 0
with open(sys.argv[1], "rb") as f:
    for b in iter(lambda: f.read(1 << 22), b""):
        c = zlib.crc32(b, c)
print("%08x" % c)' "$W/big/huge.img")
	got=$(grep "\"event\":\"file_done\",\"path\":\"$W/big/huge.img\"" "$T/big.log" |
		sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p')
	echo "# its CRC32 $want, its file_done's digest $got"
	[ "$got" = "$want" ] || t_fail "the final digest is not the file's CRC32"
	# the ranges' bytes (256 MiB each) count in their ranks' bytes
	local b n=0
	for b in $(rank_bytes "$T/big.log"); do
		[ "$b" -ge 268435456 ] && n=$((n + 1))
	done
	echo "# bytes per rank: $(rank_bytes "$T/big.log")"
	[ "$n" -ge 2 ] || t_fail "the file was not split over the ranks"
	# -n again: every file kept, the split one reported and counted once
	mpi "$T/bigkeep.log" 4 -n --sparse --split-size 256M --json -r \
		"$W/big" "$RECV/b"
	[ "$SRC" = 0 ] || t_fail "-n: exit $SRC, want 0"
	grep '"event":"summary"' "$T/bigkeep.log" | sed 's/^/# /'
	[ "$(grep -c "\"event\":\"file_done\",\"path\":\"$W/big/huge.img\".*\"status\":\"skipped\"" \
		"$T/bigkeep.log")" = 1 ] || t_fail "-n: not one skipped file_done for the split file"
	[ "$(jsum "$T/bigkeep.log" files_skipped)" = 201 ] ||
		t_fail "-n: files_skipped is not 201 (200 small, the split one)"
	[ "$(jsum "$T/bigkeep.log" files_ok)" = "$(jsum "$T/big.log" files_ok)" ] ||
		t_fail "-n: files_ok $(jsum "$T/bigkeep.log" files_ok), the copy's $(jsum "$T/big.log" files_ok)"
	t_log "$T/big.log.err"
	t_log "$T/bigkeep.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/big"
}

s_mix() {
	t_begin "mix: SRCs from two directories, 8 ranks, 3 receivers"
	mkdir -p "$W/m1" "$W/m2/sub"
	make_tree "$W/m1/tree"
	head -c 50000000 /dev/urandom >"$W/m2/blob"
	head -c 3 /dev/urandom >"$W/m2/sub/tiny"
	receivers 3 "$W/dst"
	mpi "$T/mix.log" 8 --json --split-size 16M -r "$W/m1/tree" \
		"$W/m2/blob" "$W/m2/sub" "$RECV/mix"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	complete "$W/m1/tree" "$W/dst/mix/tree"
	same "$W/m2/blob" "$W/dst/mix/blob"
	same "$W/m2/sub/tiny" "$W/dst/mix/sub/tiny"
	no_temp "$W/dst"
	# 50 MB: ranges of 16 MiB, 16 MiB and 15.7 MiB, the last one a file_done
	[ "$(grep -c '"event":"range_done"' "$T/mix.log")" = 2 ] ||
		t_fail "the blob was not split into 3 ranges"
	[ "$(grep -o '"receiver":"127.0.0.1:[0-9]*","ranks":[0-9]' "$T/mix.log" |
		sed 's/.*://' | tr '\n' ' ')" = '3 3 2 ' ] ||
		t_fail "8 ranks not spread 3, 3, 2 on 3 receivers"
	t_log "$T/mix.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/m1" "$W/m2"
}

s_partial() {
	t_begin "partial: a missing SRC fails alone, the tree is copied, exit 9"
	make_tree "$W/pt"
	receivers 2 "$W/dst"
	mpi "$T/partial.log" 4 --json -r "$W/missing" "$W/pt" "$RECV/p"
	[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
	complete "$W/pt" "$W/dst/p/pt"
	grep -q "\"event\":\"file_done\",\"path\":\"$W/missing\".*\"status\":\"failed\"" \
		"$T/partial.log" || t_fail "no failed file_done for the missing SRC"
	! grep -q '"event":"error"' "$T/partial.log" ||
		t_fail "a file's failure was taken for the job's"
	[ "$(jsum "$T/partial.log" files_failed)" = 1 ] ||
		t_fail "files_failed is not 1"
	t_log "$T/partial.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/pt"
}

# mpi_late LOG ARGS...: as mpi() with 3 ranks, rank 0 starting 1 s after
# the others, so a usage error must wait for rank 0's one message.
mpi_late() {
	local log=$1
	shift
	local cmd=("$BUILD/rdcp-mpi" --transport tcp --key-file "$T/key" --timeout 5)
	run_bounded 180 "$log.err" sh -c 'log=$1; shift; exec "$@" >"$log"' _ \
		"$log" mpirun --oversubscribe \
		-np 1 sh -c 'sleep 1; exec "$@"' _ "${cmd[@]}" "$@" : -np 2 "${cmd[@]}" "$@"
}

# skipfinal: every range verified but the file not placed (a receiver
# that died between the last record and the rename); --resume skips
# them all, and the range that places the file is a skipped one: its
# FILE_RESULT carries the final flag and the file's CRC32 with no bytes
# sent, which the source must take.
s_skipfinal() {
	t_begin "skipfinal: --resume where a skipped range places the file"
	mkdir -p "$W/sf"
	head -c $((8 << 20)) /dev/urandom >"$W/sf/big"
	receivers 1 "$W/dst"
	mpi "$T/sf1.log" 2 --split-size 4M --json -r "$W/sf" "$RECV/sf"
	[ "$SRC" = 0 ] || t_fail "first copy: exit $SRC"
	local d
	d=$(dirname "$(find "$W/dst/sf" -name big -type f | head -n 1)")
	if [ -f "$d/big" ]; then
		mv "$d/big" "$d/.big.rdcp-part"
		python3 - "$d/.big.rdcp-ranges" "$W/sf/big" <<'PY'
import os, struct, sys, zlib
st = os.stat(sys.argv[2])
d = open(sys.argv[2], "rb").read()
h = b"RDCPRNG1" + os.urandom(16) + struct.pack(
    ">QqII", len(d), st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9, 2)
half = len(d) // 2
open(sys.argv[1], "wb").write(h + b"".join(
    struct.pack(">QQB3xI", o, half, 1, zlib.crc32(d[o:o + half]))
    for o in (0, half)))
PY
		mpi "$T/sf2.log" 2 --split-size 4M --resume --json -r "$W/sf" "$RECV/sf"
		[ "$SRC" = 0 ] || t_fail "--resume: exit $SRC, want 0"
		cmp -s "$W/sf/big" "$d/big" || t_fail "not placed, or it differs"
		[ ! -e "$d/.big.rdcp-part" ] && [ ! -e "$d/.big.rdcp-ranges" ] ||
			t_fail "the temporary or the state left"
		# placed by a skipped range: reported once, as kept
		[ "$(grep -Ec '"event":"file_done","path":"[^"]*/big".*"status":"(ok|skipped)"' "$T/sf2.log")" = 1 ] ||
			t_fail "not one file_done for the file"
		[ "$(jsum "$T/sf2.log" bytes)" = 0 ] ||
			echo "# --resume moved $(jsum "$T/sf2.log" bytes) bytes"
	else
		t_fail "the first copy placed nothing"
	fi
	t_log "$T/sf2.log.err" "$T/rx1.log"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/sf"
}

s_usage() {
	t_begin "usage: a pull is refused, exit 2, one message"
	mpi_late "$T/usage.log" -r "rdcp://127.0.0.1:1/x" "$W"
	[ "$SRC" = 2 ] || t_fail "exit $SRC, want 2"
	[ "$(grep -c 'rdcp-mpi pushes' "$T/usage.log.err")" = 1 ] ||
		t_fail "want one message, have $(grep -c 'rdcp-mpi pushes' "$T/usage.log.err")"
	# ranges need CRC32: --split-size with sha256 is refused the same way
	mpi_late "$T/usage2.log" --checksum sha256 --split-size 64M -r "$W" \
		"rdcp://127.0.0.1:1/x"
	[ "$SRC" = 2 ] || t_fail "sha256 with --split-size: exit $SRC, want 2"
	[ "$(grep -c 'byte ranges need --checksum crc32' "$T/usage2.log.err")" = 1 ] ||
		t_fail "want one message for sha256 with --split-size"
	# -H is refused: a rank sees part of the tree (-D is taken: devices)
	mpi_late "$T/usage4.log" -aH -r "$W" "rdcp://127.0.0.1:1/x"
	[ "$SRC" = 2 ] || t_fail "-H: exit $SRC, want 2"
	[ "$(grep -c -- '-H: not with rdcp-mpi' "$T/usage4.log.err")" = 1 ] ||
		t_fail "want one message for -H"
	# an option argp refuses exits from inside argp_parse
	mpi_late "$T/usage3.log" --no-such-option -r "$W" "rdcp://127.0.0.1:1/x"
	[ "$SRC" = 2 ] || [ "$SRC" = 64 ] || t_fail "a bad option: exit $SRC"
	[ "$(grep -c 'no-such-option' "$T/usage3.log.err")" = 1 ] ||
		t_fail "want one message for a bad option"
	t_log "$T/usage.log.err"
	t_log "$T/usage2.log.err"
	t_log "$T/usage3.log.err"
	t_log "$T/usage4.log.err"
	t_end
}

s_noconnect() {
	t_begin "noconnect: one receiver not there, exit 3, named"
	mkdir -p "$W/nc"
	echo x >"$W/nc/a"
	receivers 1 "$W/dst"
	nextport
	mpi "$T/noconnect.log" 3 -r "$W/nc" "$RECV,127.0.0.1:$P/nc"
	[ "$SRC" = 3 ] || t_fail "exit $SRC, want 3"
	grep -q "rdcp-mpi: rank 1 on .* (to 127.0.0.1:$P): cannot connect" \
		"$T/noconnect.log.err" || t_fail "no message naming rank 1 and its receiver"
	t_log "$T/noconnect.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/nc"
}

# Data for the kill scenarios: 24 files of 8 MB, slowed down.
make_slow() {
	local i
	mkdir -p "$W/slow"
	for i in $(seq 1 24); do head -c 8000000 /dev/urandom >"$W/slow/f$i"; done
}

s_rxkill() {
	t_begin "rxkill: a receiver killed mid-job ends it, exit 11, bounded"
	make_slow
	receivers 2 "$W/dst"
	local victim=${RXS##* }
	bg_mpi "$T/rxkill.log" --oversubscribe -np 4 "$BUILD/rdcp-mpi" \
		--transport tcp --key-file "$T/key" --timeout 5 --bwlimit 10M \
		--split-size 4M --json -r "$W/slow" "$RECV/k"
	local mp=$TX
	wait_until 30 "$mp" has_temps "$W/dst" || t_fail "no copy under way"
	kill -9 "$victim"
	local t0
	t0=$(now)
	wait_pid "$mp" 30
	echo "# mpirun ended $(since "$t0") s after the receiver was killed, exit $WRC"
	[ "$WRC" = 11 ] || t_fail "exit $WRC, want 11"
	[ "$(( $(now) - t0 ))" -lt 20000 ] || t_fail "took $(since "$t0") s"
	grep -q '"event":"error","class":"peer-lost"' "$T/rxkill.log" ||
		t_fail "no peer-lost error event"
	[ "$(jsum "$T/rxkill.log" result)" = peer-lost ] ||
		t_fail "no summary with the cause"
	verified "$W/slow" "$W/dst/k/slow"
	echo "# $VERIFIED files under their final names, all verified"
	t_log "$T/rxkill.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst"
}

# rank_pid MPIRUN N: the pid of rank N under mpirun.
rank_pid() {
	local p
	for p in $(descendants "$1"); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
			grep -qx "OMPI_COMM_WORLD_RANK=$2" || continue
		grep -q rdcp-mpi "/proc/$p/cmdline" 2>/dev/null || continue
		echo "$p"
		return
	done
}

has_rank() { [ -n "$(rank_pid "$1" "$2")" ]; }
has_temps() { [ -n "$(temps "$1")" ]; }

s_rankkill() {
	t_begin "rankkill: a rank killed mid-job, then --resume finishes (the directory's mode right)"
	[ -d "$W/slow" ] || make_slow
	receivers 2 "$W/dst"
	bg_mpi "$T/rankkill.log" --oversubscribe -np 4 "$BUILD/rdcp-mpi" \
		--transport tcp --key-file "$T/key" --timeout 5 --bwlimit 10M \
		--resume -r "$W/slow" "$RECV/r"
	local mp=$TX t0 victim=""
	wait_until 30 "$mp" has_temps "$W/dst" || t_fail "no copy under way"
	wait_until 10 "$mp" has_rank "$mp" 2
	victim=$(rank_pid "$mp" 2)
	[ -n "$victim" ] || t_fail "no rank 2 found"
	[ -z "$victim" ] || kill -9 "$victim"
	t0=$(now)
	wait_pid "$mp" 30
	echo "# mpirun ended $(since "$t0") s after rank 2 was killed, exit $WRC"
	[ "$WRC" != 0 ] && [ "$WRC" != 124 ] || t_fail "exit $WRC"
	verified "$W/slow" "$W/dst/r/slow"
	echo "# $VERIFIED files verified after the kill; resuming"
	mpi "$T/resume.log" 4 --resume --json -r "$W/slow" "$RECV/r"
	[ "$SRC" = 0 ] || t_fail "resume: exit $SRC, want 0"
	complete "$W/slow" "$W/dst/r/slow"
	# The directory the killed job made (issue #23 item 3): finished by
	# the job that completed, not left owner-only (it was 0700 for good).
	local want
	want=$(printf '%o' $((0$(stat -c %a "$W/slow") & ~0$(umask))))
	[ "$(stat -c %a "$W/dst/r/slow")" = "$want" ] ||
		t_fail "directory r/slow: mode $(stat -c %a "$W/dst/r/slow"), want $want"
	local sent
	sent=$(grep '"event":"file_done"' "$T/resume.log" |
		sed -n 's/.*"sent":\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
	echo "# resume sent $sent of 192000000 bytes"
	[ "$sent" -lt 192000000 ] || t_fail "resume sent everything again"
	t_log "$T/rankkill.log.err" "$T/resume.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst"
}

# state_verified FILE: the ranges a split's state file records verified.
state_verified() {
	python3 -c 'import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from(">I", b, 44)[0]
print(sum(b[48 + 24 * i + 16] == 1 for i in range(n)))' "$1" 2>/dev/null || echo 0
}

s_rangekill() {
	t_begin "rangekill: a rank killed while it sends a range; --resume sends only the missing ranges"
	mkdir -p "$W/rk"
	head -c 167772160 /dev/urandom >"$W/rk/big" # 10 ranges of 16 MiB
	receivers 2 "$W/dst"
	bg_mpi "$T/rangekill.log" --oversubscribe -np 4 "$BUILD/rdcp-mpi" \
		--transport tcp --key-file "$T/key" --timeout 5 --bwlimit 10M \
		--split-size 16M --resume --json -r "$W/rk" "$RECV/rk"
	local mp=$TX t0 victim="" v sent skipped
	wait_until 30 "$mp" has_temps "$W/dst" || t_fail "no copy under way"
	sleep 2 # every rank in the middle of a range (1.6 s each)
	victim=$(rank_pid "$mp" 2)
	[ -n "$victim" ] || t_fail "no rank 2 found"
	[ -z "$victim" ] || kill -9 "$victim"
	t0=$(now)
	wait_pid "$mp" 30
	echo "# mpirun ended $(since "$t0") s after rank 2 was killed, exit $WRC"
	[ "$WRC" != 0 ] && [ "$WRC" != 124 ] || t_fail "exit $WRC"
	verified "$W/rk" "$W/dst/rk/rk"
	[ ! -e "$W/dst/rk/rk/big" ] || t_fail "the split file has its name after the kill"
	v=$(state_verified "$W/dst/rk/rk/.big.rdcp-ranges")
	echo "# $v of 10 ranges verified when the job ended"
	[ "$v" -gt 0 ] && [ "$v" -lt 10 ] || t_fail "$v ranges verified: nothing to show"
	mpi "$T/rkresume.log" 4 --resume --json --split-size 16M -r "$W/rk" "$RECV/rk"
	[ "$SRC" = 0 ] || t_fail "resume: exit $SRC, want 0"
	complete "$W/rk" "$W/dst/rk/rk"
	sent=$(grep -E '"event":"(range|file)_done","path":"[^"]*/big"' "$T/rkresume.log" |
		sed -n 's/.*"sent":\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
	skipped=$(grep '"event":"range_done"' "$T/rkresume.log" | grep -c '"status":"skipped"')
	echo "# resume: $skipped ranges skipped, $sent bytes sent"
	[ "$skipped" = "$v" ] || t_fail "$skipped ranges skipped, $v were verified"
	[ "$sent" -le $(((10 - v) * 16777216)) ] && [ "$sent" -gt 0 ] ||
		t_fail "resume sent $sent bytes for $((10 - v)) missing ranges"
	t_log "$T/rangekill.log.err" "$T/rkresume.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/rk"
}

s_badrange() {
	t_begin "badrange: a range corrupted in flight fails its file alone, counted once"
	[ -x "$BUILD/hooks/rdcp-mpi" ] || t_fail "no $BUILD/hooks/rdcp-mpi (make hooks-mpi)"
	mkdir -p "$W/br"
	head -c 33554432 /dev/urandom >"$W/br/a"
	head -c 33554432 /dev/urandom >"$W/br/b"
	head -c 1000 /dev/urandom >"$W/br/small"
	receivers 2 "$W/dst"
	# rank 1 flips a byte of the second chunk it posts (8 ranges of 8 MiB)
	local args="--transport tcp --key-file $T/key --timeout 5 --split-size 8M --json -r $W/br $RECV/br"
	# shellcheck disable=SC2086
	run_bounded 120 "$T/badrange.log.err" sh -c 'log=$1; shift; exec "$@" >"$log"' _ \
		"$T/badrange.log" mpirun --oversubscribe \
		-np 1 "$BUILD/hooks/rdcp-mpi" $args : \
		-np 1 env RDCP_TEST_CORRUPT_CHUNK=1 "$BUILD/hooks/rdcp-mpi" $args : \
		-np 2 "$BUILD/hooks/rdcp-mpi" $args
	[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
	local failed ok
	failed=$(grep '"event":"file_done"' "$T/badrange.log" | grep '"status":"failed"' |
		sed -n 's/.*"path":"[^"]*\/\([^"/]*\)".*/\1/p')
	echo "# failed: $failed"
	[ "$(echo "$failed" | wc -w)" = 1 ] || t_fail "not one failed file_done: $failed"
	[ "$(jsum "$T/badrange.log" files_failed)" = 1 ] || t_fail "files_failed $(jsum "$T/badrange.log" files_failed), want 1"
	[ ! -e "$W/dst/br/br/$failed" ] || t_fail "the failed file has its name"
	for ok in a b small; do
		[ "$ok" = "$failed" ] || same "$W/br/$ok" "$W/dst/br/br/$ok"
	done
	verified "$W/br" "$W/dst/br/br"
	no_temp "$W/dst" 5
	t_log "$T/badrange.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/br"
}

s_hang() {
	t_begin "hang: a stopped rank is found silent, exit 11, bounded"
	[ -d "$W/slow" ] || make_slow
	receivers 2 "$W/dst"
	bg_mpi "$T/hang.log" --oversubscribe -np 4 "$BUILD/rdcp-mpi" \
		--transport tcp --key-file "$T/key" --timeout 4 --bwlimit 10M \
		-r "$W/slow" "$RECV/h"
	local mp=$TX t0 victim=""
	wait_until 30 "$mp" has_temps "$W/dst" || t_fail "no copy under way"
	wait_until 10 "$mp" has_rank "$mp" 1
	victim=$(rank_pid "$mp" 1)
	[ -n "$victim" ] && kill -STOP "$victim"
	t0=$(now)
	wait_pid "$mp" 40
	[ -z "$victim" ] || kill -9 "$victim" 2>/dev/null
	echo "# mpirun ended $(since "$t0") s after rank 1 was stopped, exit $WRC"
	[ "$WRC" = 11 ] || t_fail "exit $WRC, want 11"
	grep -q 'rank 1 on .*no word from it' "$T/hang.log.err" ||
		t_fail "no message naming rank 1"
	verified "$W/slow" "$W/dst/h/slow"
	t_log "$T/hang.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst"
}

s_hang0() {
	t_begin "hang0: rank 0 stopped is found silent by the others, exit 11, bounded"
	[ -d "$W/slow" ] || make_slow
	receivers 2 "$W/dst"
	bg_mpi "$T/hang0.log" --oversubscribe -np 4 "$BUILD/rdcp-mpi" \
		--transport tcp --key-file "$T/key" --timeout 4 --bwlimit 10M \
		-r "$W/slow" "$RECV/h0"
	local mp=$TX t0 victim=""
	wait_until 30 "$mp" has_temps "$W/dst" || t_fail "no copy under way"
	wait_until 10 "$mp" has_rank "$mp" 0
	victim=$(rank_pid "$mp" 0)
	[ -n "$victim" ] && kill -STOP "$victim"
	t0=$(now)
	wait_pid "$mp" 40
	[ -z "$victim" ] || kill -9 "$victim" 2>/dev/null
	echo "# mpirun ended $(since "$t0") s after rank 0 was stopped, exit $WRC"
	[ "$WRC" = 11 ] || t_fail "exit $WRC, want 11"
	grep -q 'no word from rank 0 (the coordinator)' "$T/hang0.log.err" ||
		t_fail "no message naming rank 0"
	verified "$W/slow" "$W/dst/h0/slow"
	t_log "$T/hang0.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst"
}

# extras DIR: entries the source does not have, beneath DIR (a copy of it)
extras() {
	echo x >"$1/extra1"
	echo y >"$1/a/extra2"
	mkdir -p "$1/newdir/deeper"
	echo z >"$1/newdir/deeper/x"
	echo keep >"$1/a/keep.log" # excluded: kept
	mkdir -p "$W/outside"
	echo out >"$W/outside/o"
	ln -sfn "$W/outside" "$1/lnk" # a symlink: removed, not followed
}

# -D with 4 ranks: the FIFOs of the tree made beneath DEST, and as root,
# receivers with --allow-devices, a device node with its numbers.
s_devices() {
	t_begin "devices: -r -D, 4 ranks, 2 receivers: FIFOs made, and as root with --allow-devices a device node"
	local i d=$W/dst/dv/dv
	mkdir -p "$W/dv/a" "$W/dv/b"
	for i in $(seq 1 40); do echo "$i" >"$W/dv/a/f$i"; done
	mkfifo "$W/dv/p" "$W/dv/b/q"
	[ "$(id -u)" = 0 ] && mknod "$W/dv/a/null" c 1 3
	receivers 2 "$W/dst" --allow-devices
	mpi "$T/dv.log" 4 -r -D "$W/dv" "$RECV/dv/"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	[ -p "$d/p" ] && [ -p "$d/b/q" ] || t_fail "a FIFO was not made"
	if [ "$(id -u)" = 0 ]; then
		[ -c "$d/a/null" ] && [ "$(stat -c %t,%T "$d/a/null")" = 1,3 ] ||
			t_fail "the device node was not made as 1,3"
	fi
	verified "$W/dv" "$d"
	[ "$VERIFIED" = 40 ] || t_fail "$VERIFIED files verified, want 40"
	t_log "$T/dv.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/dv"
}

s_mirror() {
	t_begin "mirror: --delete after every rank's copy, one listing, 4 ranks, 2 receivers"
	local i d
	mkdir -p "$W/mi/a" "$W/mi/b/c"
	for i in $(seq 1 200); do head -c $((i * 53)) /dev/urandom >"$W/mi/a/f$i"; done
	for i in $(seq 1 100); do head -c $((i * 31)) /dev/urandom >"$W/mi/b/c/g$i"; done
	head -c 9000000 /dev/urandom >"$W/mi/b/big"
	ln -s a/f1 "$W/mi/ln"
	receivers 2 "$W/dst"
	mpi "$T/mi0.log" 4 --split-size 4M -r "$W/mi" "$RECV/m/"
	[ "$SRC" = 0 ] || t_fail "the first copy: exit $SRC"
	d=$W/dst/m/mi
	extras "$d"
	echo other >"$W/dst/m/other" # DEST's own entries: kept
	# --dry-run lists what would go, removes nothing
	mpi "$T/mi1.log" 4 --dry-run --delete --exclude '*.log' -a "$W/mi" "$RECV/m/"
	[ "$SRC" = 0 ] || t_fail "--dry-run --delete: exit $SRC (2: refused)"
	for i in mi/extra1 mi/a/extra2 mi/newdir/ mi/lnk; do
		grep -qx "delete *$i" "$T/mi1.log" || t_fail "--dry-run: no 'delete $i'"
	done
	! grep -q 'keep.log\|other' "$T/mi1.log" || t_fail "--dry-run lists an excluded or DEST's own entry"
	[ -e "$d/extra1" ] && [ -L "$d/lnk" ] || t_fail "--dry-run deleted something"
	# a rank fails (a SRC missing): nothing deleted
	mpi "$T/mi2.log" 4 --delete -a "$W/nothere" "$W/mi" "$RECV/m/"
	[ "$SRC" = 9 ] || t_fail "a missing SRC with --delete: exit $SRC, want 9"
	[ -e "$d/extra1" ] && [ -e "$d/newdir/deeper/x" ] || t_fail "deleted although a rank failed"
	# more than --max-delete would go: none goes, exit 13
	mpi "$T/mi3.log" 4 --delete --max-delete 2 --exclude '*.log' -a "$W/mi" "$RECV/m/"
	[ "$SRC" = 13 ] || t_fail "--max-delete 2: exit $SRC, want 13"
	[ -e "$d/extra1" ] && [ -e "$d/a/extra2" ] && [ -L "$d/lnk" ] ||
		t_fail "--max-delete: something was deleted"
	# the mirror: a changed file copied, the extras gone, the rest kept
	head -c 777 /dev/urandom >"$W/mi/a/f7"
	touch -d '2030-01-01' "$W/mi/a/f7"
	mpi "$T/mi4.log" 4 --json --delete --exclude '*.log' -a "$W/mi" "$RECV/m/"
	[ "$SRC" = 0 ] || t_fail "--delete: exit $SRC, want 0"
	[ ! -e "$d/extra1" ] && [ ! -e "$d/a/extra2" ] && [ ! -e "$d/newdir" ] &&
		[ ! -L "$d/lnk" ] || t_fail "an extra entry is left"
	[ -f "$d/a/keep.log" ] || t_fail "the excluded keep.log was deleted"
	[ -f "$W/outside/o" ] || t_fail "the symlink was followed"
	[ -f "$W/dst/m/other" ] || t_fail "DEST's own entry was deleted"
	rm -f "$d/a/keep.log"
	complete "$W/mi" "$d"
	[ "$(jsum "$T/mi4.log" deleted)" -ge 4 ] ||
		t_fail "summary deleted: $(jsum "$T/mi4.log" deleted), want at least 4"
	[ "$(grep -c '"event":"file_deleted"' "$T/mi4.log")" = "$(jsum "$T/mi4.log" deleted)" ] ||
		t_fail "not one file_deleted event per entry deleted"
	# one listing: one session (rank 0's) deleted, on one receiver
	local f n=0
	for f in "$T/rx1.log" "$T/rx2.log"; do
		! grep -q "deleted '" "$f" || n=$((n + 1))
	done
	[ "$n" = 1 ] || t_fail "deletions in $n receivers' logs, want 1 (one listing)"
	t_log "$T/mi0.log.err" "$T/mi1.log.err" "$T/mi2.log.err" "$T/mi3.log.err" "$T/mi4.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/mi" "$W/outside"
}

s_retry() {
	t_begin "retry: a receiver killed, back after more than --timeout, the ranks resume, exit 0"
	[ -d "$W/slow" ] || make_slow
	receivers 2 "$W/dst"
	local victim=${RXS##* } port=$P t0
	bg_mpi "$T/retry.log" --oversubscribe -np 4 "$BUILD/rdcp-mpi" \
		--transport tcp --key-file "$T/key" --timeout 5 --bwlimit 10M \
		--split-size 4M --retry 6 --retry-wait 0.5 --json -r "$W/slow" "$RECV/r"
	local mp=$TX
	wait_until 30 "$mp" has_temps "$W/dst" || t_fail "no copy under way"
	kill -9 "$victim"
	t0=$(now)
	RXS=${RXS% *}
	# down longer than --timeout: the ranks waiting to try again are
	# heard meanwhile, never taken for lost
	msleep 6500
	restart_rx "$T/rx2b.log" --transport tcp -P "$port" --root "$W/dst" \
		--key-file "$T/key" || t_fail "the receiver did not start again"
	RXS="$RXS $RX"
	wait_pid "$mp" 120
	echo "# mpirun ended $(since "$t0") s after the receiver was killed, exit $WRC"
	[ "$WRC" = 0 ] || t_fail "exit $WRC, want 0 (2: --retry refused)"
	complete "$W/slow" "$W/dst/r/slow"
	grep -q 'attempt 1 of 7 failed: .*trying again in' "$T/retry.log.err" ||
		t_fail "no line for the failed attempt"
	grep -q '"event":"attempt","rank":[0-9]*,"attempt":1,.*"retry":true' "$T/retry.log" ||
		t_fail "no attempt event"
	[ "$(jsum "$T/retry.log" result)" = ok ] || t_fail "summary not ok"
	# a file an attempt finished is not looked at again by the next one
	local twice
	twice=$(grep '"event":"file_done"' "$T/retry.log" | grep '"type":"file"' |
		grep -v '"status":"failed"' | sed 's/.*"path":"\([^"]*\)".*/\1/' | sort | uniq -d)
	[ -z "$twice" ] || t_fail "done twice: $(echo "$twice" | head -3 | tr '\n' ' ')"
	t_log "$T/retry.log.err" "$T/rx2b.log"
	stop_receivers
	t_end
	rm -rf "$W/dst"
}

s_retryfail() {
	t_begin "retryfail: --retry and an error no attempt heals: ends at once"
	mkdir -p "$W/rf" "$W/dst"
	echo one >"$W/rf/one"
	"$RDCP" --keygen "$T/key2" >/dev/null 2>&1
	nextport
	start_rx "$T/rxf.log" --transport tcp -P "$P" --root "$W/dst" \
		--key-file "$T/key2" || t_fail "receiver did not start"
	RXS=$RX
	mpi "$T/rf.log" 2 --retry 5 --retry-wait 5 -r "$W/rf" "rdcp://127.0.0.1:$P/rf"
	echo "# exit $SRC in $ST s"
	[ "$SRC" = 4 ] || t_fail "another key: exit $SRC, want 4 (2: --retry refused)"
	[ "${ST%.*}" -lt 5 ] || t_fail "took $ST s: it waited to try again"
	grep -q 'attempt 1 of 6 failed: .*not retrying' "$T/rf.log.err" ||
		t_fail "no 'not retrying' line"
	! grep -q 'trying again' "$T/rf.log.err" || t_fail "it tried again"
	t_log "$T/rf.log.err"
	stop_receivers
	t_end
	rm -rf "$W/dst" "$W/rf"
}

run_scenarios "$ALL" "$@"
t_finish
