#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# End-to-end tests of rdcp in ONE Soft-RoCE guest (rxe0 on dummy0,
# 10.77.0.1): real receivers and senders over rdma_rxe, started by
# tests/e2e/run_rdma.sh through `tests/guest/guest.sh run`.  Runs inside
# the guest under busybox sh; expects /usr/bin/rdcp and the test-hooks
# build as /usr/bin/rdcp-hooks.  Covers chunk/ring boundary sizes, the
# default geometry, >4 GiB sparse files, the digests, an injected CRC
# mismatch, DEST confinement, multi-file/partial sessions, connection
# failure, kill -9 of either side, a multi-client receiver daemon, and
# that rxe saw no RNR across the suite.  Prints TAP lines ("ok N - ...",
# "not ok N - ..." with "# " diagnostics, the plan last) and exits 0 only
# if everything passed.

ADDR=${RDCP_GUEST_ADDR:-10.77.0.1}
# RDCP_E2E_HOST=1: the same scenarios on the host over TCP loopback
# (tests/e2e/run_tcp.sh puts rdcp wrappers adding --transport tcp first in
# PATH): no tmpfs mount, no rxe counters, the key under XDG_CONFIG_HOME.
HOST_MODE=${RDCP_E2E_HOST:-}
# The kill tests need a transfer still running when the kill comes: TCP
# on loopback is ~30x faster than rxe under TCG.
KILL_MIB=${RDCP_E2E_KILL_MIB:-64}
KILL_AFTER_US=${RDCP_E2E_KILL_AFTER_US:-1000000}
W=${RDCP_E2E_DIR:-/tmp/e2e}
HW=/sys/class/infiniband/rxe0/ports/1/hw_counters
RNR_COUNTERS="rcvd_rnr_err send_rnr_err retry_rnr_exceeded_err"
# The peer-went-away wording accepted from a survivor.
LOST_RE='went away|no word from|host is down|link is cut|peer (was )?lost|lost (the )?peer|gone|silent|disconnect|unreachable|retr'

rm -rf "$W"
mkdir -p "$W" || exit 1
cd "$W" || exit 1

# ---------------------------------------------------------------- TAP

N=0 FAILED=0
T_NAME='' T_WHY='' T_LOGS=''
t_begin() { T_NAME=$1 T_WHY='' T_LOGS=''; T_START=$(now); }
t_fail() { T_WHY="$T_WHY${T_WHY:+; }$*"; }
t_log() { T_LOGS="$T_LOGS $*"; }
t_end() {
	N=$((N + 1))
	if [ -z "$T_WHY" ]; then
		echo "ok $N - $T_NAME ($(since "$T_START")s)"
	else
		FAILED=$((FAILED + 1))
		echo "not ok $N - $T_NAME ($(since "$T_START")s)"
		echo "# $T_WHY"
		for f in $T_LOGS; do
			[ -f "$f" ] || continue
			echo "# ---- $f (last 25 lines)"
			tail -n 25 "$f" | sed 's/^/#   /'
		done
	fi
}

# ---------------------------------------------------------------- helpers

now() { # centiseconds since boot
	read -r up _ </proc/uptime
	echo "${up%.*}${up#*.}"
}
since() { # seconds (one decimal) since a now() value
	d=$(($(now) - $1))
	echo "$((d / 100)).$((d % 100 / 10))"
}

alive() { # PID: running (not gone, not a zombie)
	[ -r "/proc/$1/stat" ] || return 1
	! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null
}

# wait_pid PID SECONDS: wait up to SECONDS for PID; WRC = its status, or
# 124 after killing it on timeout.  WT = seconds waited.
wait_pid() {
	_s=$(now)
	_d=$((_s + $2 * 100))
	while alive "$1"; do
		if [ "$(now)" -ge "$_d" ]; then
			kill -9 "$1" 2>/dev/null
			wait "$1" 2>/dev/null
			WRC=124 WT=$(since "$_s")
			return
		fi
		usleep 50000
	done
	wait "$1"
	WRC=$? WT=$(since "$_s")
}

# start_rx LOG ARGS...: start a receiver in the background, RX = its pid;
# returns non-zero if it does not report listening within 10 s.
start_rx() {
	_log=$1
	shift
	rdcp --listen -v "$@" >"$_log" 2>&1 &
	RX=$!
	_i=0
	until grep -q 'listening' "$_log" 2>/dev/null; do
		alive "$RX" || return 1
		_i=$((_i + 1))
		[ $_i -lt 200 ] || return 1
		usleep 50000
	done
	return 0
}

# stop_rx: make sure the receiver RX is gone (for --once receivers whose
# session did not reach them); RX_RC = its status.
stop_rx() {
	wait_pid "$RX" "${1:-10}"
	RX_RC=$WRC
}

# send LOG ARGS...: run a sender in the foreground, bounded; SRC = status,
# ST = seconds.
send() {
	_log=$1
	shift
	_s=$(now)
	timeout -s KILL 120 rdcp "$@" >"$_log" 2>&1
	SRC=$? ST=$(since "$_s")
}

mkrand() { # FILE BYTES
	head -c "$2" /dev/urandom >"$1"
}

same() { # A B: byte-for-byte equal, else t_fail
	if [ ! -f "$2" ]; then
		t_fail "$2 missing"
	elif ! cmp "$1" "$2" >/dev/null 2>&1; then
		t_fail "$2 differs from $1 (sizes $(stat -c %s "$1") vs $(stat -c %s "$2"))"
	fi
}

no_temp() { # DIR: no .*.rdcp-part left
	_t=$(find "$1" -name '.*.rdcp-part' 2>/dev/null)
	[ -z "$_t" ] || t_fail "temporary file(s) left: $(echo "$_t" | tr '\n' ' ')"
}

counters() {
	for c in $RNR_COUNTERS; do
		printf '%s=%s ' "$c" "$(cat "$HW/$c" 2>/dev/null || echo '?')"
	done
}

# wait_partfile DIR NAME PID: wait (<= 20 s) until the receiver has the
# temporary file for NAME, i.e. the transfer is under way.
wait_partfile() {
	_i=0
	until [ -e "$1/.$2.rdcp-part" ]; do
		alive "$3" || return 1
		_i=$((_i + 1))
		[ $_i -lt 400 ] || return 1
		usleep 50000
	done
}

# ---------------------------------------------------------------- scenarios

M=1048576
P=7500 # ports: one per receiver
nextport() { P=$((P + 1)); }

# 1. Boundary sizes with a 64 KiB x 4 ring: one copy each, then all of
#    them in one session into dir/.
s_sizes() {
	K=65536
	SIZES="0 1 $((K - 1)) $K $((K + 1)) $((4 * K - 1)) $((4 * K)) $((4 * K + 1)) $((8 * 1024 * 1024))"
	NAMES="zero one chunk-1 chunk chunk+1 ring-1 ring ring+1 8MiB"
	mkdir -p src/sizes rx/sizes
	# shellcheck disable=SC2086 # word lists
	set -- $NAMES
	for s in $SIZES; do
		mkrand "src/sizes/$1" "$s"
		shift
	done
	nextport
	if start_rx "$W/rx-sizes.log" --root "$W/rx/sizes" --port $P --chunk-size 64K --window 4; then
		# shellcheck disable=SC2086
		set -- $SIZES
		for n in $NAMES; do
			t_begin "64K x 4 ring: $n ($1 bytes)"
			send "$W/tx-$n.log" --port $P --chunk-size 64K --window 4 "src/sizes/$n" "$ADDR:$n"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			same "src/sizes/$n" "rx/sizes/$n"
			t_log "$W/tx-$n.log" "$W/rx-sizes.log"
			t_end
			shift
		done
		t_begin "64K x 4 ring: all sizes in one session into dir/"
		set --
		for n in $NAMES; do set -- "$@" "src/sizes/$n"; done
		send "$W/tx-sizes-dir.log" --port $P --chunk-size 64K --window 4 "$@" "$ADDR:dir/"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		for n in $NAMES; do same "src/sizes/$n" "rx/sizes/dir/$n"; done
		no_temp rx/sizes
		t_log "$W/tx-sizes-dir.log" "$W/rx-sizes.log"
		t_end
		kill -TERM "$RX" 2>/dev/null
		stop_rx 10
	else
		t_begin "64K x 4 ring: receiver starts"
		t_fail "receiver did not start listening"
		t_log "$W/rx-sizes.log"
		t_end
		kill -9 "$RX" 2>/dev/null
	fi
	rm -rf src/sizes rx/sizes
}

# 2. Default geometry (1 MiB x 64), 32 MiB random file.
s_default() {
	t_begin "default geometry: 32 MiB file"
	mkdir -p src rx/def
	dd if=/dev/urandom of=src/big32 bs=1M count=32 2>/dev/null
	nextport
	if start_rx "$W/rx-def.log" --root "$W/rx/def" --once --port $P; then
		send "$W/tx-def.log" --port $P src/big32 "$ADDR:big32"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		stop_rx 10
		[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
		same src/big32 rx/def/big32
		echo "# default geometry: 32 MiB in ${ST}s"
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-def.log" "$W/rx-def.log"
	t_end
	rm -rf rx/def src/big32
}

# 3. Sparse sources > 4 GiB.  The receiver root is a tmpfs allowed to be
#    bigger than RAM: only the data parts are ever stored.  The content is
#    compared region by region (the data parts and a sample of each hole
#    with cmp) plus the allocation of the copy (its holes must stay holes,
#    so they read as zeros); a full cmp of 4 GiB takes minutes under TCG.
s_sparse() {
	BIG=/mnt/big
	if [ -n "$HOST_MODE" ]; then
		BIG=$W/big
		mkdir -p "$BIG"
	else
		mkdir -p "$BIG"
		mount -t tmpfs -o size=16g tmpfs "$BIG"
	fi
	mkdir -p $BIG/src $BIG/rx
	dd if=/dev/urandom of=$BIG/src/tail bs=1M count=1 seek=4096 2>/dev/null
	dd if=/dev/urandom of=$BIG/src/ends bs=1M count=3 2>/dev/null
	dd if=/dev/urandom of=$BIG/src/ends bs=1M count=2 seek=4096 conv=notrunc 2>/dev/null
	# mib_sum FILE OFF LEN: md5 of LEN MiB at OFF MiB (dd seeks, cmp would read
	# the whole skipped part).
	mib_sum() {
		dd if="$1" bs=1M skip="$2" count="$3" 2>/dev/null | md5sum | cut -d' ' -f1
	}
	ZERO_SUM=$(head -c $M /dev/zero | md5sum | cut -d' ' -f1)
	# sparse_same SRC DST "OFF:LEN ..." (data regions, MiB) "OFF ..." (hole
	# samples, MiB)
	sparse_same() {
		if [ ! -f "$2" ]; then
			t_fail "$2 missing"
			return
		fi
		[ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] ||
			t_fail "$2: size $(stat -c %s "$2"), want $(stat -c %s "$1")"
		for r in $3; do
			[ "$(mib_sum "$1" "${r%:*}" "${r#*:}")" = "$(mib_sum "$2" "${r%:*}" "${r#*:}")" ] ||
				t_fail "$2: data region at ${r%:*} MiB (+${r#*:} MiB) differs"
		done
		for o in $4; do
			[ "$(mib_sum "$2" "$o" 1)" = "$ZERO_SUM" ] ||
				t_fail "$2: not zeros in the hole at $o MiB"
		done
		_sb=$(($(stat -c '%b * %B' "$1")))
		_db=$(($(stat -c '%b * %B' "$2")))
		[ "$_db" -le $((_sb + M)) ] ||
			t_fail "$2 allocates $_db bytes, the source $_sb: holes were filled"
	}
	for f in tail ends; do
		t_begin "sparse 4 GiB+ file '$f'"
		nextport
		if start_rx "$W/rx-sparse-$f.log" --root $BIG/rx --once --port $P; then
			send "$W/tx-sparse-$f.log" --port $P "$BIG/src/$f" "$ADDR:$f"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			stop_rx 10
			[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
			if [ "$f" = tail ]; then
				sparse_same $BIG/src/tail $BIG/rx/tail \
					"4096:1" "0 2048 4095"
			else
				sparse_same $BIG/src/ends $BIG/rx/ends \
					"0:3 4096:2" "3 2048 4095"
			fi
			# Holes are not sent: 4 GiB at rxe speed would take minutes.
			[ "${ST%.*}" -lt 30 ] || t_fail "copy took ${ST}s: holes were sent?"
			echo "# sparse '$f': copy ${ST}s"
		else
			t_fail "receiver did not start listening"
		fi
		t_log "$W/tx-sparse-$f.log" "$W/rx-sparse-$f.log"
		t_end
		rm -f "$BIG/rx/$f"
	done
	rm -rf $BIG/src $BIG/rx
	[ -n "$HOST_MODE" ] || umount "$BIG"
	rm -rf "$W/big"
}

# 4. --checksum sha256 and none.
s_checksum() {
	mkdir -p src rx/ck
	mkrand src/ck $((3 * M + 12345))
	for alg in sha256 none; do
		t_begin "--checksum $alg"
		nextport
		if start_rx "$W/rx-ck-$alg.log" --root "$W/rx/ck" --once --port $P; then
			send "$W/tx-ck-$alg.log" --port $P --chunk-size 256K --checksum $alg src/ck "$ADDR:ck-$alg"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			stop_rx 10
			[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
			same src/ck "rx/ck/ck-$alg"
		else
			t_fail "receiver did not start listening"
		fi
		t_log "$W/tx-ck-$alg.log" "$W/rx-ck-$alg.log"
		t_end
	done
	rm -rf rx/ck src/ck
}

# 5. A chunk corrupted after its CRC was computed (test-hooks sender).
s_corrupt() {
	t_begin "corrupted chunk: sender exits 8, file not placed"
	mkdir -p src rx/bad
	mkrand src/bad $((M + 5))
	nextport
	if start_rx "$W/rx-bad.log" --root "$W/rx/bad" --once --port $P --chunk-size 64K; then
		_s=$(now)
		RDCP_TEST_CORRUPT_CHUNK=1 timeout -s KILL 60 rdcp-hooks --port $P --chunk-size 64K \
			src/bad "$ADDR:bad" >"$W/tx-bad.log" 2>&1
		SRC=$?
		[ "$SRC" = 8 ] || t_fail "sender exit $SRC, want 8"
		stop_rx 10
		[ "$RX_RC" != 0 ] || t_fail "receiver exit 0 after a corrupted chunk"
		[ ! -e rx/bad/bad ] || t_fail "the corrupted file was placed"
		no_temp rx/bad
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-bad.log" "$W/rx-bad.log"
	t_end
	rm -rf rx/bad src/bad
}

# 6. DEST escaping the root is refused and writes nothing outside it.
s_escape() {
	mkdir -p src
	mkrand src/esc 1000
	for d in .. ../x /etc/x; do
		t_begin "DEST '$d' refused"
		rm -rf "$W/esc"
		mkdir -p "$W/esc/root"
		nextport
		if start_rx "$W/rx-esc.log" --root "$W/esc/root" --once --port $P; then
			send "$W/tx-esc.log" --port $P src/esc "$ADDR:$d"
			[ "$SRC" = 7 ] || t_fail "sender exit $SRC, want 7"
			stop_rx 10
			[ "$RX_RC" != 0 ] || t_fail "receiver exit 0"
			_extra=$(find "$W/esc" ! -path "$W/esc" ! -path "$W/esc/root")
			[ -z "$_extra" ] || t_fail "written: $(echo "$_extra" | tr '\n' ' ')"
			[ ! -e /etc/x ] || t_fail "/etc/x written"
		else
			t_fail "receiver did not start listening"
		fi
		t_log "$W/tx-esc.log" "$W/rx-esc.log"
		t_end
	done
	rm -rf "$W/esc" /etc/x src/esc
}

# 7. Several SRCs to a DEST that is an existing regular file.
s_multifile() {
	t_begin "several SRCs to an existing regular file refused"
	mkdir -p src rx/mf
	mkrand src/m1 5000
	mkrand src/m2 7000
	echo keep >rx/mf/target
	nextport
	if start_rx "$W/rx-mf.log" --root "$W/rx/mf" --once --port $P; then
		send "$W/tx-mf.log" --port $P src/m1 src/m2 "$ADDR:target"
		[ "$SRC" != 0 ] || t_fail "sender exit 0"
		stop_rx 10
		[ "$(cat rx/mf/target)" = keep ] || t_fail "the existing file was changed"
		[ "$(find rx/mf -mindepth 1)" = rx/mf/target ] || t_fail "root now holds: $(find rx/mf -mindepth 1 | tr '\n' ' ')"
		echo "# several SRCs to a file: sender exit $SRC, receiver exit $RX_RC"
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-mf.log" "$W/rx-mf.log"
	t_end
	rm -rf rx/mf src/m1 src/m2
}

# 8. A missing SRC among good ones: partial (9), the good ones placed.
s_partial() {
	t_begin "missing SRC among good ones: exit 9, good files placed"
	mkdir -p src rx/part
	mkrand src/m1 5000
	mkrand src/m2 7000
	nextport
	if start_rx "$W/rx-part.log" --root "$W/rx/part" --once --port $P; then
		send "$W/tx-part.log" --port $P src/m1 src/does-not-exist src/m2 "$ADDR:pd/"
		[ "$SRC" = 9 ] || t_fail "sender exit $SRC, want 9"
		stop_rx 10
		same src/m1 rx/part/pd/m1
		same src/m2 rx/part/pd/m2
		[ ! -e rx/part/pd/does-not-exist ] || t_fail "the missing SRC was created"
		no_temp rx/part
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-part.log" "$W/rx-part.log"
	t_end
	rm -rf rx/part src/m1 src/m2
}

# 9. Nobody listening: exit 3 within the connect timeout (10 s).
s_noconn() {
	t_begin "no receiver on the port: exit 3 within the connect timeout"
	mkdir -p src
	mkrand src/nc 1000
	send "$W/tx-noconn.log" --port 7499 src/nc "$ADDR:x"
	[ "$SRC" = 3 ] || t_fail "sender exit $SRC, want 3"
	[ "${ST%.*}" -lt 12 ] || t_fail "took ${ST}s (connect timeout is 10 s)"
	echo "# no receiver: exit $SRC after ${ST}s"
	t_log "$W/tx-noconn.log"
	t_end
	rm -f src/nc
}

# 10. kill -9 of the sender mid-transfer.
mk64() {
	mkdir -p src
	[ -f src/k64 ] || dd if=/dev/urandom of=src/k64 bs=1M count="$KILL_MIB" 2>/dev/null
}
s_killsender() {
	mk64
	t_begin "sender killed mid-transfer: receiver exits 11 within 30 s, no file"
	mkdir -p rx/ks
	nextport
	if start_rx "$W/rx-ks.log" --root "$W/rx/ks" --once --port $P; then
		rdcp --port $P --window 2 --chunk-size 64K src/k64 "$ADDR:k64" >"$W/tx-ks.log" 2>&1 &
		TX=$!
		if wait_partfile rx/ks k64 "$TX"; then
			usleep "$KILL_AFTER_US"
			if alive "$TX"; then
				kill -9 "$TX"
				wait "$TX" 2>/dev/null
				wait_pid "$RX" 40
				[ "$WRC" = 11 ] || t_fail "receiver exit $WRC, want 11"
				[ "${WT%.*}" -lt 30 ] || t_fail "receiver took ${WT}s"
				echo "# receiver noticed the killed sender after ${WT}s (exit $WRC)"
				[ ! -e rx/ks/k64 ] || t_fail "file placed under its final name"
				no_temp rx/ks
			else
				t_fail "the transfer ended before the kill (test too fast)"
			fi
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" "$RX" 2>/dev/null
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-ks.log" "$W/rx-ks.log"
	t_end
	rm -rf rx/ks
}

# 11. kill -9 of the receiver mid-transfer.
s_killreceiver() {
	mk64
	t_begin "receiver killed mid-transfer: sender exits 11 within 30 s, says so"
	mkdir -p rx/kr
	nextport
	if start_rx "$W/rx-kr.log" --root "$W/rx/kr" --once --port $P; then
		rdcp --port $P --window 2 --chunk-size 64K src/k64 "$ADDR:k64" >"$W/tx-kr.log" 2>&1 &
		TX=$!
		if wait_partfile rx/kr k64 "$RX"; then
			usleep "$KILL_AFTER_US"
			if alive "$TX"; then
				kill -9 "$RX"
				wait "$RX" 2>/dev/null
				wait_pid "$TX" 40
				[ "$WRC" = 11 ] || t_fail "sender exit $WRC, want 11"
				[ "${WT%.*}" -lt 30 ] || t_fail "sender took ${WT}s"
				grep -Eiq "$LOST_RE" "$W/tx-kr.log" ||
					t_fail "sender did not say the peer went away"
				echo "# sender noticed the killed receiver after ${WT}s (exit $WRC): $(grep -Ei "$LOST_RE" "$W/tx-kr.log" | head -n1)"
				[ ! -e rx/kr/k64 ] || t_fail "file placed under its final name"
			else
				t_fail "the transfer ended before the kill (test too fast)"
			fi
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" "$RX" 2>/dev/null
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-kr.log" "$W/rx-kr.log"
	t_end
	rm -rf rx/kr src/k64
}

# 12. A receiver daemon: 2 sequential clients, 3 concurrent ones, SIGTERM.
s_daemon() {
	mkdir -p src rx/dm
	for i in 1 2 3 4 5; do mkrand "src/d$i" $((i * 700000 + i)); done
	nextport
	DP=$P
	if start_rx "$W/rx-dm.log" --root "$W/rx/dm" --port $DP; then
		DM=$RX
		t_begin "daemon: two sequential clients"
		for i in 1 2; do
			send "$W/tx-d$i.log" --port $DP "src/d$i" "$ADDR:seq/"
			[ "$SRC" = 0 ] || t_fail "client $i exit $SRC, want 0"
			same "src/d$i" "rx/dm/seq/d$i"
			t_log "$W/tx-d$i.log"
		done
		alive "$DM" || t_fail "daemon gone"
		t_log "$W/rx-dm.log"
		t_end

		t_begin "daemon: three concurrent clients"
		pids=
		for i in 3 4 5; do
			timeout -s KILL 120 rdcp --port $DP "src/d$i" "$ADDR:conc$i" >"$W/tx-d$i.log" 2>&1 &
			pids="$pids $!"
			t_log "$W/tx-d$i.log"
		done
		i=3
		for p in $pids; do
			wait_pid "$p" 130
			[ "$WRC" = 0 ] || t_fail "client $i exit $WRC, want 0"
			same "src/d$i" "rx/dm/conc$i"
			i=$((i + 1))
		done
		no_temp rx/dm
		alive "$DM" || t_fail "daemon gone"
		t_log "$W/rx-dm.log"
		t_end

		t_begin "daemon: SIGTERM stops it within 5 s"
		kill -TERM "$DM"
		wait_pid "$DM" 5
		[ "$WRC" != 124 ] || t_fail "still running 5 s after SIGTERM"
		echo "# daemon exit status after SIGTERM: $WRC (${WT}s)"
		t_log "$W/rx-dm.log"
		t_end
	else
		t_begin "daemon starts"
		t_fail "receiver did not start listening"
		t_log "$W/rx-dm.log"
		t_end
	fi
	rm -rf rx/dm src
}

# 13. Authentication (builds with --keygen): a sender with another key is
#     refused with 4 and writes nothing.
s_auth() {
	t_begin "wrong key: refused with exit 4, nothing written"
	if [ -z "$AUTH" ]; then
		t_end
		echo "# (this rdcp has no --keygen: nothing to test)"
		return
	fi
	mkdir -p src rx/auth
	mkrand src/au 5000
	rdcp --keygen "$W/other.key" >/dev/null 2>&1 || t_fail "rdcp --keygen failed"
	nextport
	if start_rx "$W/rx-auth.log" --root "$W/rx/auth" --once --port $P; then
		send "$W/tx-auth.log" --port $P --key-file "$W/other.key" src/au "$ADDR:au"
		[ "$SRC" = 4 ] || t_fail "sender exit $SRC, want 4"
		stop_rx 10
		[ "$RX_RC" != 0 ] || t_fail "receiver exit 0"
		[ -z "$(find rx/auth -mindepth 1)" ] || t_fail "written: $(find rx/auth -mindepth 1 | tr '\n' ' ')"
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-auth.log" "$W/rx-auth.log"
	t_end
	rm -rf rx/auth src/au
}

# 14. --transport auto (the default) picks the transport this host has:
#     RDMA in the guest, TCP with one notice on a host without RDMA.
s_auto() {
	want=${RDCP_E2E_AUTO_WANT:-rdma}
	auto=${RDCP_E2E_AUTO_BIN:-rdcp}
	t_begin "--transport auto picks $want here"
	mkdir -p src rx/auto
	mkrand src/auto 100000
	nextport
	"$auto" --listen -v --root "$W/rx/auto" --once --port $P >"$W/rx-auto.log" 2>&1 &
	RX=$!
	usleep 500000
	timeout -s KILL 60 "$auto" -v --port $P src/auto "$ADDR:auto" >"$W/tx-auto.log" 2>&1
	rc=$?
	wait_pid "$RX" 20
	[ "$rc" = 0 ] || t_fail "sender exit $rc"
	grep -q "over $want" "$W/tx-auto.log" || t_fail "the copy did not go over $want"
	if [ "$want" = tcp ]; then
		grep -q "using TCP" "$W/tx-auto.log" ||
			t_fail "no notice that TCP was chosen"
		grep -q "serving TCP only" "$W/rx-auto.log" ||
			t_fail "the receiver did not say it serves TCP only"
	fi
	same src/auto rx/auto/auto
	t_log "$W/tx-auto.log" "$W/rx-auto.log"
	t_end
	rm -rf rx/auto
}

# 15. rdcp --check HOST: in the guest everything is right (rxe0 ACTIVE,
#     the RoCE v2 IPv4 GID found, rdma_cm resolves through rxe0, the
#     receiver answers over rdma); on a host without RDMA it names the
#     problems with their fixes and exits 10.
s_check() {
	auto=${RDCP_E2E_AUTO_BIN:-rdcp}
	t_begin "rdcp --check $ADDR"
	mkdir -p rx/check
	nextport
	"$auto" --listen --root "$W/rx/check" --once --port $P >"$W/rx-check.log" 2>&1 &
	RX=$!
	usleep 500000
	timeout -s KILL 60 "$auto" --check --port $P "$ADDR" >"$W/check.log" 2>&1
	rc=$?
	kill "$RX" 2>/dev/null
	wait "$RX" 2>/dev/null
	if [ "${RDCP_E2E_AUTO_WANT:-rdma}" = rdma ]; then
		[ "$rc" = 0 ] || t_fail "exit $rc, want 0"
		grep -q "^ok .*rxe0 port 1: active" "$W/check.log" || t_fail "rxe0 not reported ACTIVE"
		grep -q "RoCE v2 over IPv4 is GID index 1" "$W/check.log" || t_fail "RoCE v2 GID not found"
		grep -q "resolves $ADDR through rxe0" "$W/check.log" || t_fail "no rdma_cm route reported"
		grep -q "answers at .* over rdma" "$W/check.log" || t_fail "receiver not found over rdma"
	else
		[ "$rc" = 10 ] || t_fail "exit $rc, want 10"
		grep -q "^PROBLEM no RDMA device: .*rdma link add" "$W/check.log" || t_fail "no 'no RDMA device' problem with its fix"
		grep -q "answers at .* over tcp" "$W/check.log" || t_fail "receiver not found over tcp"
	fi
	t_log "$W/check.log"
	t_end
	rm -rf rx/check
}

# 16. --device pins the RDMA device; a device this host lacks is refused
#     on both sides with the list of those it has (exit 3).
s_device() {
	auto=${RDCP_E2E_AUTO_BIN:-rdcp}
	t_begin "--device: the named device is used, an unknown one refused"
	mkdir -p src rx/dev
	mkrand src/dev 70000
	if [ "${RDCP_E2E_AUTO_WANT:-rdma}" = rdma ]; then
		nextport
		"$auto" --listen -v --device rxe0 --root "$W/rx/dev" --once --port $P >"$W/rx-dev.log" 2>&1 &
		RX=$!
		usleep 500000
		timeout -s KILL 60 "$auto" -v --device rxe0 --port $P src/dev "$ADDR:dev" >"$W/tx-dev.log" 2>&1
		rc=$?
		wait_pid "$RX" 20
		[ "$rc" = 0 ] || t_fail "sender with --device rxe0: exit $rc"
		grep -q "over rdma on rxe0" "$W/tx-dev.log" || t_fail "not over rxe0"
		grep -q "listening for RDMA connections on $ADDR:" "$W/rx-dev.log" ||
			t_fail "receiver did not listen on rxe0's address"
		same src/dev rx/dev/dev
	fi
	nextport
	timeout -s KILL 30 "$auto" --device nosuch0 --port $P src/dev "$ADDR:x" >"$W/tx-dev2.log" 2>&1
	rc=$?
	[ "$rc" = 3 ] || t_fail "sender with --device nosuch0: exit $rc, want 3"
	grep -q "no RDMA device named 'nosuch0'" "$W/tx-dev2.log" || t_fail "no clear message"
	timeout -s KILL 30 "$auto" --listen --device nosuch0 --root "$W/rx/dev" --port $P >"$W/rx-dev2.log" 2>&1
	rc=$?
	[ "$rc" = 3 ] || t_fail "receiver with --device nosuch0: exit $rc, want 3"
	t_log "$W/tx-dev.log" "$W/rx-dev.log" "$W/tx-dev2.log" "$W/rx-dev2.log"
	t_end
	rm -rf rx/dev
}

# ---------------------------------------------------------------- main

# A shared key for every rdcp here (builds with authentication).
AUTH=
if rdcp --help 2>&1 | grep -q -- '--keygen'; then
	AUTH=1
	KEY=/etc/rdcp/key
	[ -z "${XDG_CONFIG_HOME:-}" ] || KEY=$XDG_CONFIG_HOME/rdcp/key
	if [ ! -f "$KEY" ]; then
		mkdir -p "$(dirname "$KEY")"
		rdcp --keygen "$KEY" >/dev/null 2>&1 ||
			{ echo "# rdcp --keygen $KEY failed"; echo "not ok 1 - key setup"; echo "1..1"; exit 1; }
	fi
fi

ALL="sizes default sparse checksum corrupt escape multifile partial noconn"
ALL="$ALL killsender killreceiver daemon auth auto check device"
# shellcheck disable=SC2086 # a word list
[ $# -gt 0 ] || set -- $ALL
RNR0=$(counters)
echo "# rxe counters at start: $RNR0"
SUITE_START=$(now)
for sc in "$@"; do
	case " $ALL " in
	*" $sc "*) ;;
	*) echo "# unknown scenario $sc (have: $ALL)"; exit 2 ;;
	esac
	SC_START=$(now)
	"s_$sc"
	echo "# scenario $sc: $(since "$SC_START")s"
done

# 13. No RNR NAK across the whole suite (RDMA only: TCP has no RNR).
[ -z "$HOST_MODE" ] || { echo "1..$N"; [ "$FAILED" -eq 0 ]; exit; }
RNR1=$(counters)
echo "# rxe counters at end: $RNR1"
t_begin "no RNR across the suite"
T_START=$SUITE_START
for c in $RNR_COUNTERS; do
	a=$(echo "$RNR0" | tr ' ' '\n' | sed -n "s/^$c=//p")
	b=$(echo "$RNR1" | tr ' ' '\n' | sed -n "s/^$c=//p")
	[ "$a" = "$b" ] || t_fail "$c went from $a to $b"
done
t_end

echo "1..$N"
[ "$FAILED" = 0 ]
