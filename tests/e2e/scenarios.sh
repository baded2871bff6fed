#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The single-host end-to-end scenarios of rdcp, over either transport:
# real receivers and senders on ONE host, run under busybox sh
#   - over RDMA in a Soft-RoCE guest (rxe0 on dummy0, 10.77.0.1), started
#     by tests/e2e/run_rdma.sh through `tests/guest/guest.sh run`;
#   - over TCP on this host's loopback, started by tests/e2e/run_tcp.sh
#     (RDCP_E2E_HOST=1, see below).
# Expects rdcp and the test-hooks build as rdcp-hooks in PATH, and the
# shared harness tests/e2e/lib.sh beside this script.  Covers chunk/ring
# boundary sizes, the default geometry, >4 GiB sparse files, the digests,
# an injected CRC mismatch, DEST confinement, multi-file/partial sessions,
# connection failure, kill -9 of either side, a multi-client receiver
# daemon, -r -p trees (compared entry by entry), pull, --resume after
# kill -9 of either side, --no-clobber/--update, --encrypt/--compress,
# --sparse, --bwlimit, a full receiver file system, a tree of 600 small
# files (packed) pushed and pulled, --streams 1/2/4 (over RDMA: rxe shows
# that many QPs of the sender moving data), and (RDMA) that rxe saw no RNR
# across the suite.
# Prints TAP lines ("ok N - ...", "not ok N - ..." with "# " diagnostics,
# the plan last) and exits 0 only if everything passed.
#
#   scenarios.sh [--list | SCENARIO...]   (default: all, in list order)
# e.g. `tests/e2e/run_tcp.sh --build build tree pull` runs two scenarios
# over TCP, `tests/e2e/run_rdma.sh --build build single:tree` one in the
# guest.

# shellcheck source=lib.sh source-path=SCRIPTDIR
# shellcheck disable=SC2317 # functions run by name (scenario lists, traps, wait_until callbacks)
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
# shellcheck disable=SC2119 # the helper's arguments are optional
# shellcheck disable=SC2016 # single quotes: expanded by the inner sh -c / remote shell
. "$(dirname "$0")/lib.sh"

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
# The scenarios, s_NAME below, in the order they run.
ALL="sizes default sparse checksum corrupt escape destforms multifile partial"
ALL="$ALL ctrlnames longnames fifo noconn"
ALL="$ALL killsender killreceiver daemon auth auto check device"
ALL="$ALL tree pull resume skip sync crypt zeros bwlimit full small script entries"
ALL="$ALL ssh retry dirmodes owners xattrs links direct streams streamslate"
ALL="$ALL modules metrics quota window"
ALL="$ALL split"
# Over RDMA these run last, after the RNR check (they re-create rxe0,
# which resets its counters); over TCP only when named.
EXTRA="devremove autofall rails railsafe"
EXTRA="$EXTRA splitrails"
check_scenarios "$ALL $EXTRA" "$@"

rm -rf "$W"
mkdir -p "$W" || exit 1
cd "$W" || exit 1

# The ssh server rdcp's ssh mode starts its peer through, and the command
# line that reaches it: in the guest, the guest's own sshd on port 22
# (root's keys in /root/.ssh, tests/guest/init.sh; pid in /run/sshd.pid);
# on the host, the test sshd on 127.0.0.1 that run_tcp.sh started
# (tests/e2e/sshd.sh), whose ssh command line (with its port, key and
# known_hosts) is RDCP_E2E_SSH; RDCP_E2E_SSH_ERR says why it could not
# start. SSH_HOME: where the remote commands' home (their working
# directory, where relative remote paths land) is, seen from here.
SSH=${RDCP_E2E_SSH:-ssh -o BatchMode=yes -o ConnectTimeout=30}
SSH_HOME=${RDCP_E2E_SSH_HOME:-/root}
sshd_pid() { echo "${RDCP_E2E_SSHD_PID:-$(cat /run/sshd.pid 2>/dev/null)}"; }

# ---------------------------------------------------------------- helpers

mkrand() { # FILE BYTES
	head -c "$2" /dev/urandom >"$1"
}

# maxrss LOG: the peak RSS in KiB from rdcp -v's last line, "rdcp:
# resources: user U s, system S s, peak RSS N MiB" (getrusage).
maxrss() {
	awk '/resources:/ { m = $12 == "GiB" ? 1048576 : $12 == "MiB" ? 1024 : $12 == "B" ? 1 / 1024 : 1
		printf "%d", $11 * m }' "$1"
}

counters() {
	for c in $RNR_COUNTERS; do
		printf '%s=%s ' "$c" "$(cat "$HW/$c" 2>/dev/null || echo '?')"
	done
}

# ---------------------------------------------------------------- scenarios

P=7500 # ports: one per receiver (nextport)

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
	if start_rx "$W/rx-sizes.log" --root "$W/rx/sizes" --port "$P" --chunk-size 64K --window 4; then
		# shellcheck disable=SC2086
		set -- $SIZES
		for n in $NAMES; do
			t_begin "64K x 4 ring: $n ($1 bytes)"
			send "$W/tx-$n.log" --port "$P" --chunk-size 64K --window 4 "src/sizes/$n" "$ADDR::$n"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			same "src/sizes/$n" "rx/sizes/$n"
			t_log "$W/tx-$n.log" "$W/rx-sizes.log"
			t_end
			shift
		done
		t_begin "64K x 4 ring: all sizes in one session into dir/"
		set --
		for n in $NAMES; do set -- "$@" "src/sizes/$n"; done
		send "$W/tx-sizes-dir.log" --port "$P" --chunk-size 64K --window 4 "$@" "$ADDR::dir/"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		for n in $NAMES; do same "src/sizes/$n" "rx/sizes/dir/$n"; done
		no_temp rx/sizes
		t_log "$W/tx-sizes-dir.log" "$W/rx-sizes.log"
		t_end
		term_rx
	else
		rx_not_started "64K x 4 ring" "$W/rx-sizes.log"
	fi
	rm -rf src/sizes rx/sizes
}

# 2. Default geometry (1 MiB x 64), 32 MiB random file.
s_default() {
	t_begin "default geometry: 32 MiB file"
	mkdir -p src rx/def
	dd if=/dev/urandom of=src/big32 bs=1M count=32 2>/dev/null
	nextport
	if start_rx_or_fail "$W/rx-def.log" --root "$W/rx/def" --once --port "$P"; then
		send "$W/tx-def.log" --port "$P" src/big32 "$ADDR::big32"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		stop_rx 10
		[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
		same src/big32 rx/def/big32
		echo "# default geometry: 32 MiB in ${ST}s"
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
	mkdir -p "$BIG/src" "$BIG/rx"
	dd if=/dev/urandom of="$BIG/src/tail" bs=1M count=1 seek=4096 2>/dev/null
	dd if=/dev/urandom of="$BIG/src/ends" bs=1M count=3 2>/dev/null
	dd if=/dev/urandom of="$BIG/src/ends" bs=1M count=2 seek=4096 conv=notrunc 2>/dev/null
	# mib_sum FILE OFF LEN: md5 of LEN MiB at OFF MiB (dd seeks, cmp would read
	# the whole skipped part).
	mib_sum() {
		dd if="$1" bs=1M skip="$2" count="$3" 2>/dev/null | md5sum | cut -d' ' -f1
	}
	ZERO_SUM=$(head -c "$M" /dev/zero | md5sum | cut -d' ' -f1)
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
		if start_rx_or_fail "$W/rx-sparse-$f.log" --root "$BIG/rx" --once --port "$P"; then
			send "$W/tx-sparse-$f.log" --port "$P" "$BIG/src/$f" "$ADDR::$f"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			stop_rx 10
			[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
			if [ "$f" = tail ]; then
				sparse_same "$BIG/src/tail" "$BIG/rx/tail" \
					"4096:1" "0 2048 4095"
			else
				sparse_same "$BIG/src/ends" "$BIG/rx/ends" \
					"0:3 4096:2" "3 2048 4095"
			fi
			# Holes are not sent: 4 GiB at rxe speed would take minutes.
			[ "${ST%.*}" -lt 30 ] || t_fail "copy took ${ST}s: holes were sent?"
			echo "# sparse '$f': copy ${ST}s"
		fi
		t_log "$W/tx-sparse-$f.log" "$W/rx-sparse-$f.log"
		t_end
		rm -f "$BIG/rx/$f"
	done
	rm -rf "$BIG/src" "$BIG/rx"
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
		if start_rx_or_fail "$W/rx-ck-$alg.log" --root "$W/rx/ck" --once --port "$P"; then
			send "$W/tx-ck-$alg.log" --port "$P" --chunk-size 256K --checksum "$alg" src/ck "$ADDR::ck-$alg"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			stop_rx 10
			[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
			same src/ck "rx/ck/ck-$alg"
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
	if start_rx_or_fail "$W/rx-bad.log" --root "$W/rx/bad" --once --port "$P" --chunk-size 64K; then
		RDCP_TEST_CORRUPT_CHUNK=1 timeout -s KILL 60 rdcp-hooks --port "$P" --chunk-size 64K \
			src/bad "$ADDR::bad" >"$W/tx-bad.log" 2>&1
		SRC=$?
		[ "$SRC" = 8 ] || t_fail "sender exit $SRC, want 8"
		stop_rx 10
		[ "$RX_RC" != 0 ] || t_fail "receiver exit 0 after a corrupted chunk"
		[ ! -e rx/bad/bad ] || t_fail "the corrupted file was placed"
		no_temp rx/bad
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
		if start_rx_or_fail "$W/rx-esc.log" --root "$W/esc/root" --once --port "$P"; then
			send "$W/tx-esc.log" --port "$P" src/esc "$ADDR::$d"
			# '..' is a bad name (usage, 2); '/etc/x' is etc/x in
			# the root, whose etc/ does not exist (remote I/O, 7).
			case $d in /*) want=7 ;; *) want=2 ;; esac
			[ "$SRC" = "$want" ] || t_fail "sender exit $SRC, want $want"
			stop_rx 10
			[ "$RX_RC" != 0 ] || t_fail "receiver exit 0"
			_extra=$(find "$W/esc" ! -path "$W/esc" ! -path "$W/esc/root")
			[ -z "$_extra" ] || t_fail "written: $(echo "$_extra" | tr '\n' ' ')"
			[ ! -e /etc/x ] || t_fail "/etc/x written"
		fi
		t_log "$W/tx-esc.log" "$W/rx-esc.log"
		t_end
	done
	rm -rf "$W/esc" /etc/x src/esc
}

# 6b. DEST and SRC as scp and rsync users type them: '.', './', './sub/',
#     'sub/.' and '/' are the root or paths inside it; pulls of './f' and
#     '/f' too.
s_destforms() {
	rm -rf rx/df got
	mkdir -p src rx/df/have got
	mkrand src/df 3001
	mkrand rx/df/have/pf 4001
	nextport
	if start_rx "$W/rx-df.log" --root "$W/rx/df" --port "$P"; then
		for d in "" . ./ / ./sub/ sub/. ./sub/deeper/ have/./; do
			case $d in
			*sub/deeper/) at=sub/deeper ;;
			*sub*) at=sub ;;
			*have*) at=have ;;
			*) at=. ;;
			esac
			t_begin "push to DEST '$d' lands in '$at'"
			rm -f "rx/df/$at/df"
			send "$W/tx-df.log" --port "$P" src/df "$ADDR::$d"
			[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0: $(head -n1 "$W/tx-df.log")"
			same src/df "rx/df/$at/df"
			no_temp rx/df
			t_log "$W/tx-df.log" "$W/rx-df.log"
			t_end
		done
		for s in ./have/pf /have/pf have/./pf //have//pf; do
			t_begin "pull of SRC '$s'"
			rm -f got/pf
			send "$W/tx-dfp.log" --port "$P" "$ADDR::$s" got/
			[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0: $(head -n1 "$W/tx-dfp.log")"
			same rx/df/have/pf got/pf
			t_log "$W/tx-dfp.log" "$W/rx-df.log"
			t_end
		done
		for s in . / ./ ..; do
			t_begin "pull of SRC '$s' (the root or above) refused: exit 2"
			send "$W/tx-dfr.log" --port "$P" -r "$ADDR::$s" got/r/
			[ "$SRC" = 2 ] || t_fail "exit $SRC, want 2"
			grep -q "not a path inside" "$W/tx-dfr.log" ||
				t_fail "no message saying why: $(head -n1 "$W/tx-dfr.log")"
			[ -z "$(ls -A got/r 2>/dev/null)" ] || t_fail "written: $(find got/r -mindepth 1 | tr '\n' ' ')"
			alive "$RX" || t_fail "receiver gone"
			t_log "$W/tx-dfr.log" "$W/rx-df.log"
			t_end
		done
		term_rx
	else
		rx_not_started "DEST forms" "$W/rx-df.log"
	fi
	rm -rf rx/df got src/df
}

# 6c. Names with control bytes: a newline and a forged log line, and
#     terminal escapes (OSC title, clear screen), pushed and pulled. They
#     are legal names and copied as they are, but every log line and the
#     progress output show them escaped: nothing forged, nothing raw.
s_ctrlnames() {
	rm -rf rx/nm src/nm got
	mkdir -p rx/nm src/nm got
	_nl=$(printf 'x\nrdcp: session from 6.6.6.6: 9 files ok')
	_esc=$(printf 'y\033]0;pwned\007\033[2J')
	echo a >"src/nm/$_nl"
	echo b >"src/nm/$_esc"
	_raw=$(printf '\033]0;')
	nextport
	if start_rx "$W/rx-nm.log" --root "$W/rx/nm" --port "$P"; then
		t_begin "names with a newline and escapes: pushed, logs escaped"
		send "$W/tx-nm.log" --port "$P" -v -r src/nm "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same "src/nm/$_nl" "rx/nm/nm/$_nl"
		same "src/nm/$_esc" "rx/nm/nm/$_esc"
		! grep -q '^rdcp: session from 6.6.6.6' "$W/rx-nm.log" ||
			t_fail "the receiver's log has a forged line"
		! grep -q "$_raw" "$W/rx-nm.log" "$W/tx-nm.log" ||
			t_fail "an escape sequence reached a log raw"
		grep -q 'x\\x0ardcp: session' "$W/rx-nm.log" ||
			t_fail "the name is not in the receiver's log, escaped"
		t_log "$W/tx-nm.log" "$W/rx-nm.log"
		t_end

		t_begin "names with a newline and escapes: pulled, -v and progress escaped"
		send "$W/tx-nmp.log" --port "$P" -v --progress -r "$ADDR::nm" got/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same "src/nm/$_esc" "got/nm/$_esc"
		! grep -q "$_raw" "$W/tx-nmp.log" ||
			t_fail "an escape sequence reached the client's terminal raw"
		! grep -q '^rdcp: session from 6.6.6.6' "$W/tx-nmp.log" ||
			t_fail "the client's output has a forged line"
		t_log "$W/tx-nmp.log" "$W/rx-nm.log"
		t_end
		term_rx
	else
		rx_not_started "names" "$W/rx-nm.log"
	fi
	rm -rf rx/nm src/nm got
}

# Two 244-byte names sharing their first 200 bytes (not packed: 100 KB
# each): each gets a temporary of its own, pushed, resumed and pulled.
s_longnames() {
	rm -rf rx/ln src/ln got
	mkdir -p rx/ln src/ln got
	_p=$(printf '%0200d' 0 | tr 0 n)
	_a="$_p$(printf '%044d' 0 | tr 0 a)"
	_b="$_p$(printf '%044d' 0 | tr 0 b)"
	mkrand "src/ln/$_a" 100000
	mkrand "src/ln/$_b" 100001
	nextport
	if start_rx "$W/rx-ln.log" --root "$W/rx/ln" --port "$P"; then
		t_begin "two long names sharing 200 bytes: pushed, resumed, pulled"
		send "$W/tx-ln.log" --port "$P" -r src/ln "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "push: exit $SRC, want 0"
		same "src/ln/$_a" "rx/ln/ln/$_a"
		same "src/ln/$_b" "rx/ln/ln/$_b"
		rm -rf rx/ln/ln
		send "$W/tx-lnr.log" --port "$P" --resume -r src/ln "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "--resume push: exit $SRC, want 0"
		same "src/ln/$_b" "rx/ln/ln/$_b"
		send "$W/tx-lnp.log" --port "$P" -r "$ADDR::ln" got/
		[ "$SRC" = 0 ] || t_fail "pull: exit $SRC, want 0"
		same "src/ln/$_a" "got/ln/$_a"
		same "src/ln/$_b" "got/ln/$_b"
		no_temp rx/ln
		t_log "$W/tx-ln.log" "$W/tx-lnr.log" "$W/tx-lnp.log" "$W/rx-ln.log"
		t_end
		term_rx
	else
		rx_not_started "long names" "$W/rx-ln.log"
	fi
	rm -rf rx/ln src/ln got
}

# A FIFO where a --resume copy looks: at the final name (replaced, as
# without --resume), at the temporary's (that file fails), as a pull's
# local DEST (replaced). Nothing waits on it; SIGTERM still stops the
# receiver.
s_fifo() {
	rm -rf rx/ff src/ff got
	mkdir -p rx/ff/d src/ff got
	mkrand src/ff/f 300000
	mkfifo rx/ff/d/f rx/ff/d/.g.rdcp-part got/fifo
	cp src/ff/f src/ff/g
	nextport
	if start_rx "$W/rx-ff.log" --root "$W/rx/ff" --port "$P"; then
		t_begin "a FIFO at the final name: --resume push replaces it"
		send "$W/tx-ff1.log" --port "$P" --resume src/ff/f "$ADDR::d/f"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/ff/f rx/ff/d/f
		t_log "$W/tx-ff1.log"
		t_end

		t_begin "a FIFO at the temporary's name: --resume push fails that file"
		send "$W/tx-ff2.log" --port "$P" --resume src/ff/g "$ADDR::d/g"
		[ "$SRC" = 7 ] || t_fail "exit $SRC, want 7 (remote I/O)"
		grep -q 'temporary is not a regular file' "$W/tx-ff2.log" ||
			t_fail "no clear line about the temporary"
		[ -p rx/ff/d/.g.rdcp-part ] || t_fail "the FIFO was removed"
		[ ! -e rx/ff/d/g ] || t_fail "d/g was created"
		t_log "$W/tx-ff2.log"
		t_end

		t_begin "a FIFO as a --resume pull's local DEST: replaced"
		send "$W/tx-ff3.log" --port "$P" --resume "$ADDR::d/f" got/fifo
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/ff/f got/fifo
		t_log "$W/tx-ff3.log"
		t_end

		t_begin "a FIFO: SIGTERM stops the receiver"
		term_rx
		[ "$RX_RC" != 124 ] || t_fail "the receiver had to be killed"
		t_log "$W/rx-ff.log"
		t_end
	else
		rx_not_started "fifo" "$W/rx-ff.log"
	fi
	rm -rf rx/ff src/ff got
}

# 7. Several SRCs to a DEST that is an existing regular file.
s_multifile() {
	t_begin "several SRCs to an existing regular file refused"
	mkdir -p src rx/mf
	mkrand src/m1 5000
	mkrand src/m2 7000
	echo keep >rx/mf/target
	nextport
	if start_rx_or_fail "$W/rx-mf.log" --root "$W/rx/mf" --once --port "$P"; then
		send "$W/tx-mf.log" --port "$P" src/m1 src/m2 "$ADDR::target"
		[ "$SRC" != 0 ] || t_fail "sender exit 0"
		stop_rx 10
		[ "$(cat rx/mf/target)" = keep ] || t_fail "the existing file was changed"
		[ "$(find rx/mf -mindepth 1)" = rx/mf/target ] || t_fail "root now holds: $(find rx/mf -mindepth 1 | tr '\n' ' ')"
		echo "# several SRCs to a file: sender exit $SRC, receiver exit $RX_RC"
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
	if start_rx_or_fail "$W/rx-part.log" --root "$W/rx/part" --once --port "$P"; then
		send "$W/tx-part.log" --port "$P" src/m1 src/does-not-exist src/m2 "$ADDR::pd/"
		[ "$SRC" = 9 ] || t_fail "sender exit $SRC, want 9"
		stop_rx 10
		same src/m1 rx/part/pd/m1
		same src/m2 rx/part/pd/m2
		[ ! -e rx/part/pd/does-not-exist ] || t_fail "the missing SRC was created"
		no_temp rx/part
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
	send "$W/tx-noconn.log" --port 7499 src/nc "$ADDR::x"
	[ "$SRC" = 3 ] || t_fail "sender exit $SRC, want 3"
	[ "${ST%.*}" -lt 12 ] || t_fail "took ${ST}s (connect timeout is 10 s)"
	echo "# no receiver: exit $SRC after ${ST}s"
	t_log "$W/tx-noconn.log"
	t_end
	rm -f src/nc
}

# 10, 11. kill -9 of one side mid-transfer.
mk64() {
	mkdir -p src
	[ -f src/k64 ] || dd if=/dev/urandom of=src/k64 bs=1M count="$KILL_MIB" 2>/dev/null
}
# kill_mid WHO: kill -9 the sender or the receiver (WHO) while src/k64
# is under way: the other side exits 11 within 30 s, no file is placed;
# a receiver left alone leaves no temporary, a sender says the peer went.
kill_mid() {
	mk64
	_km=kr
	[ "$1" != sender ] || _km=ks
	mkdir -p "rx/$_km"
	nextport
	if start_rx_or_fail "$W/rx-$_km.log" --root "$W/rx/$_km" --once --port "$P"; then
		rdcp --port "$P" --window 2 --chunk-size 64K src/k64 "$ADDR::k64" >"$W/tx-$_km.log" 2>&1 &
		TX=$!
		if [ "$1" = sender ]; then
			_km_dead=$TX _km_left=$RX _km_who=receiver
		else
			_km_dead=$RX _km_left=$TX _km_who=sender
		fi
		if wait_partfile "rx/$_km" k64 "$_km_dead"; then
			usleep "$KILL_AFTER_US"
			if alive "$TX"; then
				kill -9 "$_km_dead"
				wait "$_km_dead" 2>/dev/null
				wait_pid "$_km_left" 40
				[ "$WRC" = 11 ] || t_fail "$_km_who exit $WRC, want 11"
				[ "${WT%.*}" -lt 30 ] || t_fail "$_km_who took ${WT}s"
				if [ "$1" = sender ]; then
					echo "# receiver noticed the killed sender after ${WT}s (exit $WRC)"
					no_temp "rx/$_km"
				else
					grep -Eiq "$LOST_RE" "$W/tx-$_km.log" ||
						t_fail "sender did not say the peer went away"
					echo "# sender noticed the killed receiver after ${WT}s (exit $WRC): $(grep -Ei "$LOST_RE" "$W/tx-$_km.log" | head -n1)"
				fi
				[ ! -e "rx/$_km/k64" ] || t_fail "file placed under its final name"
			else
				t_fail "the transfer ended before the kill (test too fast)"
			fi
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" "$RX" 2>/dev/null
	fi
	t_log "$W/tx-$_km.log" "$W/rx-$_km.log"
	rm -rf "rx/$_km"
}
s_killsender() {
	t_begin "sender killed mid-transfer: receiver exits 11 within 30 s, no file"
	kill_mid sender
	t_end
}
s_killreceiver() {
	t_begin "receiver killed mid-transfer: sender exits 11 within 30 s, says so"
	kill_mid receiver
	t_end
	rm -f src/k64
}

# 12. A receiver daemon: 2 sequential clients, 3 concurrent ones, SIGTERM.
s_daemon() {
	mkdir -p src rx/dm
	for i in 1 2 3 4 5; do mkrand "src/d$i" $((i * 700000 + i)); done
	nextport
	DP=$P
	if start_rx "$W/rx-dm.log" --root "$W/rx/dm" --port "$DP"; then
		DM=$RX
		t_begin "daemon: two sequential clients"
		for i in 1 2; do
			send "$W/tx-d$i.log" --port "$DP" "src/d$i" "$ADDR::seq/"
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
			timeout -s KILL 120 rdcp --port "$DP" "src/d$i" "$ADDR::conc$i" >"$W/tx-d$i.log" 2>&1 &
			pids="$pids $!"
			t_log "$W/tx-d$i.log"
		done
		wait_copies 130 "$pids" src/d3 rx/dm/conc3 src/d4 rx/dm/conc4 \
			src/d5 rx/dm/conc5
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
		rx_not_started "daemon" "$W/rx-dm.log"
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
	if start_rx_or_fail "$W/rx-auth.log" --root "$W/rx/auth" --once --port "$P"; then
		send "$W/tx-auth.log" --port "$P" --key-file "$W/other.key" src/au "$ADDR::au"
		[ "$SRC" = 4 ] || t_fail "sender exit $SRC, want 4"
		stop_rx 10
		[ "$RX_RC" != 0 ] || t_fail "receiver exit 0"
		[ -z "$(find rx/auth -mindepth 1)" ] || t_fail "written: $(find rx/auth -mindepth 1 | tr '\n' ' ')"
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
	rx_spawn "$W/rx-auto.log" "$auto" --listen -v --root "$W/rx/auto" --once --port "$P" ||
		t_fail "receiver did not start listening"
	timeout -s KILL 60 "$auto" -v --port "$P" src/auto "$ADDR::auto" >"$W/tx-auto.log" 2>&1
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
	rx_spawn "$W/rx-check.log" "$auto" --listen -v --root "$W/rx/check" --once --port "$P" ||
		t_fail "receiver did not start listening"
	timeout -s KILL 60 "$auto" --check --daemon --port "$P" "$ADDR" >"$W/check.log" 2>&1
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
	t_begin "--device (and --gid-index): the named device and GID are used, unknown ones refused"
	mkdir -p src rx/dev
	mkrand src/dev 70000
	if [ "${RDCP_E2E_AUTO_WANT:-rdma}" = rdma ]; then
		nextport
		rx_spawn "$W/rx-dev.log" "$auto" --listen -v --device rxe0 --root "$W/rx/dev" --once --port "$P" ||
			t_fail "receiver did not start listening"
		timeout -s KILL 60 "$auto" -v --device rxe0 --port "$P" src/dev "$ADDR::dev" >"$W/tx-dev.log" 2>&1
		rc=$?
		wait_pid "$RX" 20
		[ "$rc" = 0 ] || t_fail "sender with --device rxe0: exit $rc"
		grep -q "over rdma on rxe0" "$W/tx-dev.log" || t_fail "not over rxe0"
		grep -q "listening for RDMA connections on $ADDR:" "$W/rx-dev.log" ||
			t_fail "receiver did not listen on rxe0's address"
		same src/dev rx/dev/dev
	fi
	if [ "${RDCP_E2E_AUTO_WANT:-rdma}" = rdma ]; then
		# --gid-index: the GID holding ::ffff:$ADDR is pinned and named
		# by -v; an empty GID is refused before connecting.
		want=$(echo "$ADDR" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')
		gi='' empty=''
		for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
			v=$(cat "$g" 2>/dev/null) || continue
			[ "$v" = "$want" ] && [ -z "$gi" ] && gi=${g##*/}
			[ "$v" = "0000:0000:0000:0000:0000:0000:0000:0000" ] && empty=${g##*/}
		done
		if [ -z "$gi" ]; then
			t_fail "no GID of rxe0 holds $ADDR"
		else
			nextport
			rx_spawn "$W/rx-gid.log" "$auto" --listen -v --root "$W/rx/dev" --once --port "$P" ||
				t_fail "receiver did not start listening"
			timeout -s KILL 60 "$auto" -v --device rxe0 --gid-index "$gi" --port "$P" src/dev "$ADDR::gid" >"$W/tx-gid.log" 2>&1
			rc=$?
			wait_pid "$RX" 20
			[ "$rc" = 0 ] || t_fail "sender with --gid-index $gi: exit $rc"
			grep -q "GID $gi " "$W/tx-gid.log" || t_fail "-v does not name GID $gi"
			same src/dev rx/dev/gid
			t_log "$W/tx-gid.log" "$W/rx-gid.log"
		fi
		if [ -n "$empty" ]; then
			nextport
			timeout -s KILL 30 "$auto" --device rxe0 --gid-index "$empty" --port "$P" src/dev "$ADDR::x" >"$W/tx-gid2.log" 2>&1
			rc=$?
			[ "$rc" = 3 ] || t_fail "--gid-index $empty (empty GID): exit $rc, want 3"
			grep -q "has no GID $empty" "$W/tx-gid2.log" || t_fail "no clear message for an empty GID"
			t_log "$W/tx-gid2.log"
		fi
	fi
	nextport
	timeout -s KILL 30 "$auto" --device nosuch0 --port "$P" src/dev "$ADDR::x" >"$W/tx-dev2.log" 2>&1
	rc=$?
	[ "$rc" = 3 ] || t_fail "sender with --device nosuch0: exit $rc, want 3"
	grep -q "no RDMA device named 'nosuch0'" "$W/tx-dev2.log" || t_fail "no clear message"
	timeout -s KILL 30 "$auto" --listen --device nosuch0 --root "$W/rx/dev" --port "$P" >"$W/rx-dev2.log" 2>&1
	rc=$?
	[ "$rc" = 3 ] || t_fail "receiver with --device nosuch0: exit $rc, want 3"
	t_log "$W/tx-dev.log" "$W/rx-dev.log" "$W/tx-dev2.log" "$W/rx-dev2.log"
	t_end
	rm -rf rx/dev
}

# ---------------------------------------------------------------- protocol v2

# alloc FILE: bytes allocated on disk.
alloc() { echo $(($(stat -c '%b * %B' "$1"))); }

# mktree DIR: the tree the -r tests copy: nested directories, two empty
# ones, files of 0, chunk+1 (64 KiB chunks) and other sizes, a relative,
# an absolute (/etc/passwd) and a dangling symlink, a file with holes, a
# 0750 directory, a 0640 file with old times (atime != mtime), old times
# on a symlink and on directories.  MT_ATIME = the old file's atime.
mktree() {
	mkdir -p "$1/a/b/c" "$1/empty" "$1/e2/inner-empty"
	mkrand "$1/top" 3000
	mkrand "$1/a/f640" 65537
	mkrand "$1/a/b/c/deep" 100
	: >"$1/zero"
	ln -s a/f640 "$1/rel"
	ln -s /etc/passwd "$1/abs"
	ln -s does/not/exist "$1/a/dangling"
	# 8 MiB: 64 KiB of data at 0 and at 5 MiB, holes elsewhere (whole
	# chunks of holes even with 1 MiB chunks).
	dd if=/dev/urandom of="$1/holey" bs=65536 count=1 2>/dev/null
	dd if=/dev/urandom of="$1/holey" bs=65536 count=1 seek=80 conv=notrunc 2>/dev/null
	truncate -s $((8 * M)) "$1/holey"
	chmod 0640 "$1/a/f640"
	chmod 0750 "$1/a"
	chmod 0700 "$1/e2/inner-empty"
	touch -d '2001-02-03 04:05:06' "$1/a/f640"
	touch -a -d '2002-03-04 05:06:07' "$1/a/f640"
	MT_ATIME=$(stat -c %X "$1/a/f640")
	touch -h -d '2003-04-05 06:07:08' "$1/rel"
	touch -d '2004-05-06 07:08:09' "$1/a/b/c" "$1/empty" "$1/e2/inner-empty"
	touch -d '2005-06-07 08:09:10' "$1/a/b" "$1/a"
}

# tree_same A B [p]: B holds the same entries as A (names, types, file
# contents, symlink targets); with p also the same mode and mtime.
tree_same() {
	if [ ! -d "$2" ]; then
		t_fail "$2 missing"
		return
	fi
	(cd "$1" && find . | sort) >"$W/tree-a"
	(cd "$2" && find . | sort) >"$W/tree-b"
	[ -s "$W/tree-a" ] || t_fail "$1 is empty (test setup)"
	_only=$(grep -vxF -f "$W/tree-b" "$W/tree-a" | tr '\n' ' ')
	[ -z "$_only" ] || t_fail "missing in $2: $_only"
	_only=$(grep -vxF -f "$W/tree-a" "$W/tree-b" | tr '\n' ' ')
	[ -z "$_only" ] || t_fail "extra in $2: $_only"
	while read -r _e; do
		_a=$1/$_e _b=$2/$_e
		[ -e "$_b" ] || [ -L "$_b" ] || continue
		_ta=$(stat -c %F "$_a") _tb=$(stat -c %F "$_b")
		if [ "$_ta" != "$_tb" ]; then
			t_fail "$_e: a $_tb, want a $_ta"
			continue
		fi
		case "$_ta" in
		symbolic*)
			[ "$(readlink "$_a")" = "$(readlink "$_b")" ] ||
				t_fail "$_e: link to '$(readlink "$_b")', want '$(readlink "$_a")'"
			;;
		regular*)
			cmp "$_a" "$_b" >/dev/null 2>&1 || t_fail "$_e: content differs"
			;;
		esac
		[ "${3:-}" = p ] || continue
		case "$_ta" in
		symbolic*) ;;
		*)
			[ "$(stat -c %a "$_a")" = "$(stat -c %a "$_b")" ] ||
				t_fail "$_e: mode $(stat -c %a "$_b"), want $(stat -c %a "$_a")"
			;;
		esac
		[ "$(stat -c %Y "$_a")" = "$(stat -c %Y "$_b")" ] ||
			t_fail "$_e: mtime $(stat -c %Y "$_b"), want $(stat -c %Y "$_a")"
	done <"$W/tree-a"
}

# tree_extra B [p]: what mktree's tree must look like beyond tree_same:
# the symlinks are links (the absolute one not followed), the empty
# directories exist, the holes stayed holes, with p the atime was kept.
# Call it before tree_same, whose cmp reads the files (and sets atimes).
tree_extra() {
	[ -L "$1/abs" ] || t_fail "$1/abs is not a symlink (followed?)"
	[ "$(readlink "$1/abs" 2>/dev/null)" = /etc/passwd ] || t_fail "$1/abs does not point to /etc/passwd"
	[ -L "$1/a/dangling" ] || t_fail "$1/a/dangling is not a symlink"
	[ -d "$1/empty" ] && [ -z "$(ls -A "$1/empty")" ] || t_fail "$1/empty is not an empty directory"
	[ -d "$1/e2/inner-empty" ] || t_fail "$1/e2/inner-empty missing"
	if [ -f "$1/holey" ]; then
		[ "$(stat -c %s "$1/holey")" = $((8 * M)) ] || t_fail "$1/holey: size $(stat -c %s "$1/holey")"
		[ "$(alloc "$1/holey")" -lt $((4 * M)) ] ||
			t_fail "$1/holey allocates $(alloc "$1/holey") of $((8 * M)) bytes: holes filled"
	fi
	if [ "${2:-}" = p ]; then
		[ "$(stat -c %X "$1/a/f640" 2>/dev/null)" = "$MT_ATIME" ] ||
			t_fail "$1/a/f640: atime $(stat -c %X "$1/a/f640" 2>/dev/null), want $MT_ATIME"
	fi
}

# 17. -r -p: a whole tree pushed, compared entry by entry; DEST missing
#     (renamed, as cp -r does) and DEST an existing directory (DEST/NAME);
#     a symlink planted in DEST's tree is never written through.
s_tree() {
	rm -rf src/tree rx/tree
	mkdir -p src rx/tree/exists
	mktree src/tree
	[ "$(alloc src/tree/holey)" -lt $((4 * M)) ] ||
		echo "# note: this file system did not keep the source's holes"
	nextport
	if start_rx "$W/rx-tree.log" --root "$W/rx/tree" --port "$P"; then
		t_begin "-r -p tree push to a new DEST: entries, modes, times, links, holes"
		send "$W/tx-tree.log" --port "$P" --chunk-size 64K -r -p --json src/tree "$ADDR::copy"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		tree_extra rx/tree/copy p
		tree_same src/tree rx/tree/copy p
		[ ! -e rx/tree/copy/tree ] || t_fail "DEST did not exist, yet the tree went to DEST/tree"
		no_temp rx/tree
		# --json: one file_done per entry, each with its type, all ok.
		for k in d:dir l:symlink f:file; do
			_want=$(find src/tree -type "${k%:*}" | wc -l)
			_got=$(grep '"event":"file_done"' "$W/tx-tree.log" | grep -c "\"type\":\"${k#*:}\"")
			[ "$_want" = "$_got" ] || t_fail "--json: $_got file_done of type ${k#*:}, want $_want"
		done
		_n=$(find src/tree | wc -l)
		[ "$(grep '"event":"file_done"' "$W/tx-tree.log" | grep -c '"status":"ok"')" = "$_n" ] ||
			t_fail "--json: not $_n file_done with status ok"
		[ "$(jget "$W/tx-tree.log" summary files_ok)" = "$_n" ] ||
			t_fail "--json summary: files_ok $(jget "$W/tx-tree.log" summary files_ok), want $_n"
		[ "$(jdone "$W/tx-tree.log" src/tree/a/f640 sent)" = 65537 ] ||
			t_fail "--json: a/f640 sent $(jdone "$W/tx-tree.log" src/tree/a/f640 sent), want 65537"
		t_log "$W/tx-tree.log" "$W/rx-tree.log"
		t_end

		t_begin "-r tree push to an existing directory DEST: lands in DEST/NAME"
		send "$W/tx-tree2.log" --port "$P" -r src/tree "$ADDR::exists"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		tree_extra rx/tree/exists/tree
		tree_same src/tree rx/tree/exists/tree
		[ ! -e rx/tree/exists/top ] || t_fail "the tree's contents went into DEST itself"
		no_temp rx/tree
		alive "$RX" || t_fail "receiver gone"
		t_log "$W/tx-tree2.log" "$W/rx-tree.log"
		t_end

		t_begin "-r push: a symlink planted in DEST's tree is not followed"
		rm -rf "$W/outside"
		mkdir -p "$W/outside" rx/tree/trap/tree/a
		ln -s "$W/outside" rx/tree/trap/tree/a/b
		send "$W/tx-tree3.log" --port "$P" -r src/tree "$ADDR::trap"
		[ "$SRC" = 9 ] || t_fail "sender exit $SRC, want 9 (a/b cannot be made)"
		[ -z "$(ls -A "$W/outside")" ] ||
			t_fail "written through the symlink: $(find "$W/outside" -mindepth 1 | tr '\n' ' ')"
		same src/tree/top rx/tree/trap/tree/top
		no_temp rx/tree
		alive "$RX" || t_fail "receiver gone"
		t_log "$W/tx-tree3.log" "$W/rx-tree.log"
		t_end
		term_rx
	else
		rx_not_started "-r tree push" "$W/rx-tree.log"
	fi
	rm -rf rx/tree "$W/outside"
}

# 18. Pull (HOST:SRC... DEST) from a receiver daemon: one file, several
#     into a directory, a -r -p tree; a missing source (exit 7, named);
#     sources outside the root refused.
s_pull() {
	rm -rf rx/pull got
	mkdir -p rx/pull/pl got
	mkrand rx/pull/pl/one 100001
	mkrand rx/pull/pl/two $((M + 3))
	mktree rx/pull/tree
	echo bait >rx/x # ../x from the root
	nextport
	if start_rx "$W/rx-pull.log" --root "$W/rx/pull" --port "$P"; then
		t_begin "pull: one file"
		send "$W/tx-pull1.log" --port "$P" "$ADDR::pl/one" got/one.copy
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same rx/pull/pl/one got/one.copy
		no_temp got
		t_log "$W/tx-pull1.log" "$W/rx-pull.log"
		t_end

		t_begin "pull: several files into a directory"
		send "$W/tx-pull2.log" --port "$P" "$ADDR::pl/one" "$ADDR::pl/two" got/multi/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same rx/pull/pl/one got/multi/one
		same rx/pull/pl/two got/multi/two
		no_temp got
		t_log "$W/tx-pull2.log" "$W/rx-pull.log"
		t_end

		t_begin "pull: -r -p tree: entries, modes, times, links, holes"
		send "$W/tx-pull3.log" --port "$P" --chunk-size 64K -r -p "$ADDR::tree" got/tree
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_extra got/tree p
		tree_same rx/pull/tree got/tree p
		no_temp got
		t_log "$W/tx-pull3.log" "$W/rx-pull.log"
		t_end

		t_begin "pull: a missing remote source: exit 7, named, nothing written"
		send "$W/tx-pull4.log" --port "$P" "$ADDR::pl/nope" got/nope
		[ "$SRC" = 7 ] || t_fail "exit $SRC, want 7"
		grep -q "pl/nope" "$W/tx-pull4.log" || t_fail "no message naming pl/nope"
		[ ! -e got/nope ] && [ ! -L got/nope ] || t_fail "got/nope written"
		no_temp got
		t_log "$W/tx-pull4.log" "$W/rx-pull.log"
		t_end

		for s in ../x /etc/passwd ../pull/../x; do
			t_begin "pull: source '$s' outside the root refused"
			rm -rf got/esc
			mkdir -p got/esc
			send "$W/tx-pull5.log" --port "$P" "$ADDR::$s" got/esc/
			[ "$SRC" != 0 ] || t_fail "exit 0"
			echo "# pull of '$s': exit $SRC: $(head -n1 "$W/tx-pull5.log")"
			[ -z "$(ls -A got/esc)" ] || t_fail "written: $(find got/esc -mindepth 1 | tr '\n' ' ')"
			[ "$(cat rx/x)" = bait ] || t_fail "$W/rx/x changed"
			alive "$RX" || t_fail "receiver gone"
			t_log "$W/tx-pull5.log" "$W/rx-pull.log"
			t_end
		done
		term_rx
	else
		rx_not_started "pull" "$W/rx-pull.log"
	fi
	rm -rf rx/pull rx/x got
}

# 19. --resume.  The interrupted copies are paced with --bwlimit 1M so the
#     kill lands mid-file on any transport: 4 MiB in 64 KiB chunks, killed
#     1.5 s after the temporary appeared.
RS_SIZE=$((4 * M))
# rs_kill WHO: start a --once receiver and a --resume sender, kill -9 WHO
# (sender|receiver) mid-file, check the temporary is kept, then resume
# with a new receiver: byte-identical and fewer bytes sent than the size.
rs_kill() {
	rm -rf rx/rs
	mkdir -p rx/rs
	nextport
	if ! start_rx_or_fail "$W/rx-rs-$1.log" --root "$W/rx/rs" --once --port "$P"; then
		t_log "$W/rx-rs-$1.log"
		return
	fi
	t_log "$W/tx-rs-$1.log" "$W/rx-rs-$1.log" "$W/tx-rs2-$1.log" "$W/rx-rs2-$1.log"
	rdcp --port "$P" --chunk-size 64K --resume --bwlimit 1M src/rs "$ADDR::rs" >"$W/tx-rs-$1.log" 2>&1 &
	TX=$!
	if ! wait_partfile rx/rs rs "$TX"; then
		t_fail "transfer never started"
		kill -9 "$TX" "$RX" 2>/dev/null
		return
	fi
	usleep 1500000
	if ! alive "$TX"; then
		t_fail "the transfer ended before the kill"
		kill -9 "$RX" 2>/dev/null
		return
	fi
	if [ "$1" = sender ]; then
		kill -9 "$TX"
		wait "$TX" 2>/dev/null
		wait_pid "$RX" 40
		[ "$WRC" = 11 ] || t_fail "receiver exit $WRC, want 11"
	else
		kill -9 "$RX"
		wait "$RX" 2>/dev/null
		wait_pid "$TX" 40
		[ "$WRC" = 11 ] || t_fail "sender exit $WRC, want 11"
	fi
	[ ! -e rx/rs/rs ] || t_fail "file placed under its final name"
	if [ -f rx/rs/.rs.rdcp-part ]; then
		echo "# kill -9 of the $1: the temporary holds $(alloc rx/rs/.rs.rdcp-part) bytes"
	else
		t_fail "the temporary .rs.rdcp-part was not kept (--resume)"
	fi
	nextport
	if start_rx "$W/rx-rs2-$1.log" --root "$W/rx/rs" --once --port "$P"; then
		send "$W/tx-rs2-$1.log" --port "$P" --chunk-size 64K --resume --json src/rs "$ADDR::rs"
		[ "$SRC" = 0 ] || t_fail "resuming sender exit $SRC, want 0"
		stop_rx 10
		[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
		same src/rs rx/rs/rs
		no_temp rx/rs
		_sent=$(jdone "$W/tx-rs2-$1.log" src/rs sent)
		echo "# resumed after kill -9 of the $1: sent $_sent of $RS_SIZE bytes"
		[ -n "$_sent" ] && [ "$_sent" -lt "$RS_SIZE" ] ||
			t_fail "resume sent '$_sent' bytes, want fewer than $RS_SIZE"
		[ "$(jdone "$W/tx-rs2-$1.log" src/rs status)" = ok ] || t_fail "file_done status not ok"
	else
		t_fail "second receiver did not start listening"
		kill -9 "$RX" 2>/dev/null
	fi
}
s_resume() {
	mkdir -p src
	mkrand src/rs "$RS_SIZE"
	t_begin "--resume after kill -9 of the sender: temporary kept, rest sent"
	rs_kill sender
	t_end
	t_begin "--resume after kill -9 of the receiver: temporary kept, rest sent"
	rs_kill receiver
	t_end

	rm -rf rx/rs
	mkdir -p rx/rs
	nextport
	if start_rx "$W/rx-rs3.log" --root "$W/rx/rs" --port "$P"; then
		t_begin "--resume onto an identical file: skipped, nothing sent"
		cp src/rs rx/rs/same
		send "$W/tx-rs3.log" --port "$P" --chunk-size 64K --resume --json src/rs "$ADDR::same"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/rs rx/rs/same
		[ "$(jdone "$W/tx-rs3.log" src/rs status)" = skipped ] ||
			t_fail "status '$(jdone "$W/tx-rs3.log" src/rs status)', want skipped"
		[ "$(jdone "$W/tx-rs3.log" src/rs sent)" = 0 ] ||
			t_fail "sent $(jdone "$W/tx-rs3.log" src/rs sent), want 0"
		[ "$(jget "$W/tx-rs3.log" summary files_skipped)" = 1 ] ||
			t_fail "summary files_skipped $(jget "$W/tx-rs3.log" summary files_skipped), want 1"
		no_temp rx/rs
		t_log "$W/tx-rs3.log" "$W/rx-rs3.log"
		t_end

		t_begin "--resume onto an older version: only the changed chunk sent"
		cp src/rs rx/rs/older
		cp src/rs src/rs-new
		dd if=/dev/urandom of=src/rs-new bs=65536 count=1 seek=30 conv=notrunc 2>/dev/null
		cmp src/rs-new rx/rs/older >/dev/null 2>&1 && t_fail "test setup: the versions are equal"
		send "$W/tx-rs4.log" --port "$P" --chunk-size 64K --resume --json src/rs-new "$ADDR::older"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/rs-new rx/rs/older
		[ "$(jdone "$W/tx-rs4.log" src/rs-new status)" = ok ] ||
			t_fail "status '$(jdone "$W/tx-rs4.log" src/rs-new status)', want ok"
		[ "$(jdone "$W/tx-rs4.log" src/rs-new sent)" = 65536 ] ||
			t_fail "sent $(jdone "$W/tx-rs4.log" src/rs-new sent), want 65536 (one chunk)"
		no_temp rx/rs
		t_log "$W/tx-rs4.log" "$W/rx-rs3.log"
		t_end
		term_rx
	else
		rx_not_started "--resume" "$W/rx-rs3.log"
	fi
	rm -rf rx/rs src/rs src/rs-new
}

# 20. --no-clobber and --update.
s_skip() {
	rm -rf rx/skip
	mkdir -p src rx/skip
	nextport
	if start_rx "$W/rx-skip.log" --root "$W/rx/skip" --port "$P"; then
		t_begin "--no-clobber keeps an existing different file, copies a new one"
		mkrand src/nc 5000
		echo keep >rx/skip/nc
		send "$W/tx-nc.log" --port "$P" -n --json src/nc "$ADDR::nc"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(cat rx/skip/nc)" = keep ] || t_fail "the existing file was replaced"
		[ "$(jdone "$W/tx-nc.log" src/nc status)" = skipped ] ||
			t_fail "status '$(jdone "$W/tx-nc.log" src/nc status)', want skipped"
		[ "$(jget "$W/tx-nc.log" summary files_skipped)" = 1 ] ||
			t_fail "summary files_skipped $(jget "$W/tx-nc.log" summary files_skipped), want 1"
		send "$W/tx-nc2.log" --port "$P" -n --json src/nc "$ADDR::nc-new"
		[ "$SRC" = 0 ] || t_fail "exit $SRC for a new name, want 0"
		same src/nc rx/skip/nc-new
		[ "$(jdone "$W/tx-nc2.log" src/nc status)" = ok ] || t_fail "new name: status not ok"
		no_temp rx/skip
		t_log "$W/tx-nc.log" "$W/tx-nc2.log" "$W/rx-skip.log"
		t_end

		t_begin "--update skips a newer DEST, replaces an older one"
		mkrand src/up 7000
		touch -d '2010-01-01 00:00:00' src/up
		echo newer >rx/skip/up
		touch -d '2020-01-01 00:00:00' rx/skip/up
		send "$W/tx-up.log" --port "$P" -u --json src/up "$ADDR::up"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(cat rx/skip/up)" = newer ] || t_fail "a newer DEST was replaced"
		[ "$(jdone "$W/tx-up.log" src/up status)" = skipped ] ||
			t_fail "newer DEST: status '$(jdone "$W/tx-up.log" src/up status)', want skipped"
		touch -d '2000-01-01 00:00:00' rx/skip/up
		send "$W/tx-up2.log" --port "$P" -u --json src/up "$ADDR::up"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/up rx/skip/up
		[ "$(jdone "$W/tx-up2.log" src/up status)" = ok ] ||
			t_fail "older DEST: status '$(jdone "$W/tx-up2.log" src/up status)', want ok"
		[ "$(jdone "$W/tx-up2.log" src/up sent)" = 7000 ] ||
			t_fail "older DEST: sent $(jdone "$W/tx-up2.log" src/up sent), want 7000"
		no_temp rx/skip
		t_log "$W/tx-up.log" "$W/tx-up2.log" "$W/rx-skip.log"
		t_end
		term_rx
	else
		rx_not_started "--no-clobber/--update" "$W/rx-skip.log"
	fi
	rm -rf rx/skip src/nc src/up
}

# 20b. --sync and -a: a re-run moves only what changed. Pushed and pulled
#     twice, the second run sends 0 bytes of file data (the sum of --json's
#     "sent"); one file changed, only its bytes cross; a file of the same
#     size and mtime but other content is kept by -a (mtime) and found by
#     --sync checksum; --dry-run -a says keep or replace per file.
sent_sum() { # LOG: bytes of file data that crossed, from --json
	awk -F'"sent":' '/"event":"file_done"/ { split($2, v, ","); s += v[1] }
		END { print s + 0 }' "$1"
}
s_sync() {
	rm -rf rx/sync src/sy got/sy
	mkdir -p src/sy/sub rx/sync got
	for i in 1 2 3 4 5 6 7 8; do mkrand "src/sy/f$i" $((i * 70001)); done
	mkrand src/sy/sub/deep 5000
	ln -s f1 src/sy/link
	nextport
	if start_rx "$W/rx-sync.log" --root "$W/rx/sync" --port "$P"; then
		t_begin "-a twice (push): the second run sends 0 bytes, keeps all"
		send "$W/tx-sy1.log" --port "$P" -a --json src/sy "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "first run: exit $SRC, want 0"
		send "$W/tx-sy2.log" --port "$P" -a --json src/sy "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "second run: exit $SRC, want 0"
		tree_same src/sy rx/sync/sy
		[ "$(sent_sum "$W/tx-sy2.log")" = 0 ] ||
			t_fail "second run sent $(sent_sum "$W/tx-sy2.log") bytes, want 0"
		[ "$(jget "$W/tx-sy2.log" summary files_skipped)" = 10 ] ||
			t_fail "files_skipped $(jget "$W/tx-sy2.log" summary files_skipped), want 10"
		[ "$(jdone "$W/tx-sy2.log" src/sy/f3 reason)" = mtime ] ||
			t_fail "reason '$(jdone "$W/tx-sy2.log" src/sy/f3 reason)', want mtime"
		no_temp rx/sync
		t_log "$W/tx-sy1.log" "$W/tx-sy2.log" "$W/rx-sync.log"
		t_end

		t_begin "-a with one file changed: only its bytes cross"
		mkrand src/sy/f3 210003
		send "$W/tx-sy3.log" --port "$P" -a --json src/sy "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/sy/f3 rx/sync/sy/f3
		[ "$(sent_sum "$W/tx-sy3.log")" = 210003 ] ||
			t_fail "sent $(sent_sum "$W/tx-sy3.log") bytes, want 210003"
		t_log "$W/tx-sy3.log" "$W/rx-sync.log"
		t_end

		t_begin "same size and mtime, other content: -a keeps it, --sync checksum sends it"
		printf 'changed' | dd of=rx/sync/sy/f2 bs=1 seek=9 conv=notrunc 2>/dev/null
		# the source's mtime back, to the nanosecond (not cp -p's)
		touch -r src/sy/f2 rx/sync/sy/f2
		stat -c '%n %y %s' src/sy/f2 rx/sync/sy/f2 >"$W/sy-stat.log"
		send "$W/tx-sy4.log" --port "$P" -a --json src/sy "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "-a: exit $SRC, want 0"
		[ "$(sent_sum "$W/tx-sy4.log")" = 0 ] ||
			t_fail "-a sent $(sent_sum "$W/tx-sy4.log") bytes, want 0"
		cmp -s src/sy/f2 rx/sync/sy/f2 && t_fail "-a replaced a file of the same size and mtime"
		send "$W/tx-sy5.log" --port "$P" -a --sync checksum --json src/sy "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "--sync checksum: exit $SRC, want 0"
		tree_same src/sy rx/sync/sy
		# one chunk of f2 (the default chunk holds all of it)
		[ "$(sent_sum "$W/tx-sy5.log")" = 140002 ] ||
			t_fail "--sync checksum sent $(sent_sum "$W/tx-sy5.log") bytes, want 140002"
		[ "$(jget "$W/tx-sy5.log" summary files_skipped)" = 9 ] ||
			t_fail "files_skipped $(jget "$W/tx-sy5.log" summary files_skipped), want 9 (all but f2)"
		no_temp rx/sync
		t_log "$W/sy-stat.log" "$W/tx-sy4.log" "$W/tx-sy5.log" "$W/rx-sync.log"
		t_end

		t_begin "--dry-run -a: keep or replace per file, nothing changes"
		mkrand src/sy/f5 350005
		mkrand src/sy/new 10
		send "$W/tx-sy6.log" --port "$P" -a --dry-run src/sy "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		grep -q '^replace *sy/f5$' "$W/tx-sy6.log" || t_fail "no 'replace sy/f5'"
		grep -q '^keep *sy/f4$' "$W/tx-sy6.log" || t_fail "no 'keep sy/f4'"
		grep -q '^keep *sy/link$' "$W/tx-sy6.log" || t_fail "no 'keep sy/link'"
		grep -q '^new *sy/new$' "$W/tx-sy6.log" || t_fail "no 'new sy/new'"
		[ -e rx/sync/sy/new ] && t_fail "--dry-run made sy/new"
		cmp -s src/sy/f5 rx/sync/sy/f5 && t_fail "--dry-run replaced sy/f5"
		t_log "$W/tx-sy6.log" "$W/rx-sync.log"
		t_end

		t_begin "-a twice (pull): the second run sends 0 bytes"
		send "$W/tx-sy7.log" --port "$P" -a --json "$ADDR::sy" got/
		[ "$SRC" = 0 ] || t_fail "first pull: exit $SRC, want 0"
		send "$W/tx-sy8.log" --port "$P" -a --json "$ADDR::sy" got/
		[ "$SRC" = 0 ] || t_fail "second pull: exit $SRC, want 0"
		tree_same rx/sync/sy got/sy
		[ "$(sent_sum "$W/tx-sy8.log")" = 0 ] ||
			t_fail "second pull sent $(sent_sum "$W/tx-sy8.log") bytes, want 0"
		[ "$(jget "$W/tx-sy8.log" summary files_skipped)" = 10 ] ||
			t_fail "files_skipped $(jget "$W/tx-sy8.log" summary files_skipped), want 10"
		no_temp got
		t_log "$W/tx-sy7.log" "$W/tx-sy8.log" "$W/rx-sync.log"
		t_end
		term_rx
	else
		t_begin "--sync: receiver starts"
		t_fail "receiver did not start listening"
		t_log "$W/rx-sync.log"
		t_end
		kill -9 "$RX" 2>/dev/null
	fi
	rm -rf rx/sync src/sy got/sy
}

# 21. --encrypt, --compress, both; a chunk corrupted under --encrypt.
s_crypt() {
	rm -rf rx/cr
	mkdir -p src rx/cr
	mkrand src/cr-rand $((M + 777))
	{ head -c 500000 /dev/zero; head -c 300000 /dev/urandom; seq 1 50000; } >src/cr-text
	for o in --encrypt --compress "--compress=9 --encrypt"; do
		t_begin "$o: byte-identical"
		nextport
		if start_rx_or_fail "$W/rx-cr.log" --root "$W/rx/cr" --once --port "$P"; then
			# shellcheck disable=SC2086 # option list
			send "$W/tx-cr.log" --port $P --chunk-size 64K $o src/cr-rand src/cr-text "$ADDR::d/"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			stop_rx 10
			[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
			same src/cr-rand rx/cr/d/cr-rand
			same src/cr-text rx/cr/d/cr-text
			no_temp rx/cr
		fi
		t_log "$W/tx-cr.log" "$W/rx-cr.log"
		t_end
		rm -rf rx/cr/d
	done

	t_begin "--encrypt, chunk 0 corrupted: exit 8, file not placed"
	nextport
	if start_rx_or_fail "$W/rx-crbad.log" --root "$W/rx/cr" --once --port "$P" --chunk-size 64K; then
		RDCP_TEST_CORRUPT_CHUNK=0 timeout -s KILL 60 rdcp-hooks --port "$P" --chunk-size 64K \
			--encrypt src/cr-rand "$ADDR::bad" >"$W/tx-crbad.log" 2>&1
		SRC=$?
		[ "$SRC" = 8 ] || t_fail "sender exit $SRC, want 8"
		stop_rx 10
		[ "$RX_RC" != 0 ] || t_fail "receiver exit 0 after a corrupted chunk"
		[ ! -e rx/cr/bad ] || t_fail "the corrupted file was placed"
		no_temp rx/cr
	fi
	t_log "$W/tx-crbad.log" "$W/rx-crbad.log"
	t_end
	rm -rf rx/cr src/cr-rand src/cr-text
}

# 22. --sparse: all-zero chunks of a dense source arrive as holes and are
#     not sent.
s_zeros() {
	t_begin "--sparse: all-zero chunks become holes, not sent"
	mkdir -p src rx/zeros
	{ head -c "$M" /dev/urandom; head -c $((3 * M)) /dev/zero; } >src/zeros
	nextport
	if start_rx_or_fail "$W/rx-zeros.log" --root "$W/rx/zeros" --once --port "$P"; then
		send "$W/tx-zeros.log" --port "$P" --chunk-size 64K --sparse --json src/zeros "$ADDR::zeros"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		stop_rx 10
		[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
		same src/zeros rx/zeros/zeros
		[ -f rx/zeros/zeros ] && [ "$(alloc rx/zeros/zeros)" -lt $((2 * M)) ] ||
			t_fail "the copy allocates $(alloc rx/zeros/zeros 2>/dev/null) bytes: zeros written"
		[ "$(jdone "$W/tx-zeros.log" src/zeros sent)" = "$M" ] ||
			t_fail "sent $(jdone "$W/tx-zeros.log" src/zeros sent), want $M"
	fi
	t_log "$W/tx-zeros.log" "$W/rx-zeros.log"
	t_end
	rm -rf rx/zeros src/zeros
}

# 23. --bwlimit paces the sender: 8 MiB at 4M/s cannot take less than
#     ~1.5 s (a lower bound only).
s_bwlimit() {
	t_begin "--bwlimit 4M: 8 MiB takes at least 1.5 s"
	mkdir -p src rx/bw
	mkrand src/bw $((8 * M))
	nextport
	if start_rx_or_fail "$W/rx-bw.log" --root "$W/rx/bw" --once --port "$P"; then
		send "$W/tx-bw.log" --port "$P" --bwlimit 4M src/bw "$ADDR::bw"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		stop_rx 10
		same src/bw rx/bw/bw
		echo "# --bwlimit 4M: 8 MiB in ${ST}s"
		[ "${ST%.*}${ST#*.}" -ge 15 ] || t_fail "8 MiB in ${ST}s: faster than 4 MiB/s allows"
	fi
	t_log "$W/tx-bw.log" "$W/rx-bw.log"
	t_end
	rm -rf rx/bw src/bw
}

# 24. The receiver's file system full (a 2 MiB tmpfs): a dense file
#     (refused up front) and a sparse one (the write meets ENOSPC) fail
#     with 7 and leave nothing; the daemon then takes a small file.
s_full() {
	FS=$W/full
	mkdir -p "$FS" src
	if [ -n "$HOST_MODE" ] && [ "$(id -u)" != 0 ]; then
		t_skip "receiver file system full" "not root: cannot mount a tmpfs"
		return
	fi
	if ! mount -t tmpfs -o size=2m tmpfs "$FS"; then
		if [ -n "$HOST_MODE" ]; then
			t_skip "receiver file system full" "cannot mount a tmpfs on $FS"
		else
			t_begin "receiver file system full: tmpfs"
			t_fail "cannot mount a tmpfs on $FS"
			t_end
		fi
		return
	fi
	mkrand src/full-dense $((4 * M))
	truncate -s $((5 * M)) src/full-sparse
	dd if=/dev/urandom of=src/full-sparse bs=65536 count=48 conv=notrunc 2>/dev/null
	mkrand src/full-small 100000
	nextport
	if start_rx "$W/rx-full.log" --root "$FS" --port "$P"; then
		for v in dense sparse; do
			t_begin "receiver file system full (2 MiB tmpfs, $v file): exit 7, nothing left"
			send "$W/tx-full-$v.log" --port "$P" --chunk-size 64K "src/full-$v" "$ADDR::$v"
			[ "$SRC" = 7 ] || t_fail "sender exit $SRC, want 7"
			grep -qi 'space' "$W/tx-full-$v.log" || t_fail "the sender did not say the disk is full"
			echo "# $v: $(grep -m1 -i 'space' "$W/tx-full-$v.log")"
			[ ! -e "$FS/$v" ] || t_fail "'$v' placed under its final name"
			no_temp "$FS"
			alive "$RX" || t_fail "receiver gone"
			t_log "$W/tx-full-$v.log" "$W/rx-full.log"
			t_end
		done
		t_begin "receiver file system full: the same daemon then takes a small file"
		send "$W/tx-full-small.log" --port "$P" src/full-small "$ADDR::small"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/full-small "$FS/small"
		no_temp "$FS"
		t_log "$W/tx-full-small.log" "$W/rx-full.log"
		t_end
		term_rx
	else
		rx_not_started "receiver file system full" "$W/rx-full.log"
	fi
	umount "$FS" || echo "# cannot umount $FS"
	rm -rf "$FS" src/full-dense src/full-sparse src/full-small
}

# 25. O_DIRECT (--direct, --no-direct) on a real file system: an ext4 image
#     on a loop device (root only; in the guest the ext4 and loop modules
#     are loaded, its /tmp is a tmpfs), sources and receiver both on it.
#     Sizes with and without an unaligned tail, a small (packed) file,
#     pushed with --direct and --no-direct and pulled with --direct: exact,
#     the final sizes too, no fallback logged; where fincore(1) is there,
#     the page cache holds at most the tail page of a --direct copy and
#     all of a --no-direct one. Then --direct into a tmpfs: one line on
#     the receiver, the copy still exact.
direct_cached() { # FILE: its pages in the page cache, "" if unknown
	command -v fincore >/dev/null 2>&1 || return 0
	fincore -n -o PAGES "$1" 2>/dev/null | tr -d ' '
}
# direct_copy MODE: every source pushed with MODE (--direct or
# --no-direct) into rx/MODE/ from a cold page cache; appends "MODE ms
# ms_synced" to direct-times.
direct_copy() {
	_dcm=$1
	rm -rf "$DFS/rx/$_dcm"
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
	set --
	for n in $DNAMES; do set -- "$@" "$DFS/src/$n"; done
	_dc0=$(now)
	send "$W/tx-direct$_dcm.log" --port "$P" "$_dcm" "$@" "$ADDR::$_dcm/"
	[ "$SRC" = 0 ] || t_fail "$_dcm: sender exit $SRC, want 0"
	_dc1=$(now)
	sync
	echo "$_dcm $((_dc1 - _dc0)) $(($(now) - _dc0))" >>"$W/direct-times"
}
direct_median() { # MODE FIELD: median of the field over its lines
	grep -- "^$1 " "$W/direct-times" | cut -d' ' -f"$2" | sort -n |
		awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
s_direct() {
	DFS=$W/dfs
	if [ "$(id -u)" != 0 ] || ! command -v mkfs.ext4 >/dev/null 2>&1; then
		t_skip "--direct on ext4" "not root, or no mkfs.ext4: cannot make an ext4 image"
		return
	fi
	mkdir -p "$DFS" src
	if ! truncate -s 192M "$W/dfs.img" ||
		! mkfs.ext4 -q -F "$W/dfs.img" >"$W/mkfs.log" 2>&1 ||
		! mount -o loop "$W/dfs.img" "$DFS"; then
		t_begin "--direct on ext4: an ext4 image on a loop device"
		t_fail "cannot make or mount an ext4 image (ext4 and loop in the kernel?)"
		t_log "$W/mkfs.log"
		t_end
		rm -rf "$W/dfs.img" "$DFS"
		return
	fi
	mkdir -p "$DFS/src" "$DFS/rx" "$W/dshm"
	# 24 MiB + 4097: full chunks and an odd tail; 2 MiB: chunks only;
	# 1 MiB + 1: one byte past a chunk; 6000: packed, always buffered.
	DSIZES="$((24 * M + 4097)) $((2 * M)) $((M + 1)) 6000"
	DNAMES="odd even onebyte small"
	# shellcheck disable=SC2086 # word lists
	set -- $DSIZES
	for n in $DNAMES; do
		mkrand "$DFS/src/$n" "$1"
		shift
	done
	nextport
	if start_rx "$W/rx-direct.log" --root "$DFS/rx" --port "$P"; then
		: >"$W/direct-times"
		for mode in --direct --no-direct; do
			t_begin "$mode on ext4: every size exact, no fallback"
			direct_copy "$mode"
			# shellcheck disable=SC2086 # a word list
			set -- $DSIZES
			for n in $DNAMES; do
				d=$DFS/rx/$mode/$n
				c=$(direct_cached "$d")
				echo "# $mode '$n' ($1 bytes): ${c:-?} pages cached"
				if [ -n "$c" ] && [ "$n" != small ]; then
					if [ "$mode" = --direct ]; then
						[ "$c" -le 1 ] || t_fail "'$n': $c pages cached after --direct"
					else
						[ "$c" -ge $(($1 / 4096)) ] || t_fail "'$n': $c pages cached after --no-direct"
					fi
				fi
				same "$DFS/src/$n" "$d"
				shift
			done
			no_temp "$DFS/rx"
			! logged "$W/rx-direct.log" O_DIRECT || t_fail "the receiver fell back: $(grep O_DIRECT "$W/rx-direct.log")"
			! logged "$W/tx-direct$mode.log" O_DIRECT || t_fail "the sender fell back"
			t_log "$W/tx-direct$mode.log" "$W/rx-direct.log"
			t_end
		done

		# Timed, not judged: what the guest can tell of O_DIRECT.
		t_begin "--direct and --no-direct, two more rounds each (timed, not judged)"
		for mode in --no-direct --direct --direct --no-direct; do
			direct_copy "$mode"
			for n in $DNAMES; do same "$DFS/src/$n" "$DFS/rx/$mode/$n"; done
		done
		for mode in --direct --no-direct; do
			echo "# $mode, $(echo "$DSIZES" | tr ' ' '+') bytes from a cold cache, median of 3: $(direct_median "$mode" 2) ms until it returned, $(direct_median "$mode" 3) ms until synced"
		done
		t_log "$W/rx-direct.log"
		t_end

		t_begin "--direct pull from ext4 into ext4: exact"
		rm -rf "$DFS/got"
		send "$W/tx-direct-pull.log" --port "$P" --direct "$ADDR::--direct/odd" "$ADDR::--direct/even" "$DFS/got/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same "$DFS/src/odd" "$DFS/got/odd"
		same "$DFS/src/even" "$DFS/got/even"
		no_temp "$DFS/got"
		! logged "$W/rx-direct.log" O_DIRECT || t_fail "the receiver fell back"
		t_log "$W/tx-direct-pull.log" "$W/rx-direct.log"
		t_end
		term_rx
	else
		rx_not_started "--direct on ext4" "$W/rx-direct.log"
	fi

	# A tmpfs receiver: /tmp in the guest; one mounted here on the host.
	_dm=
	if [ -n "$HOST_MODE" ] && mount -t tmpfs -o size=64m tmpfs "$W/dshm"; then
		_dm=1
	fi
	nextport
	if start_rx "$W/rx-direct-tmpfs.log" --root "$W/dshm" --port "$P"; then
		t_begin "--direct into a tmpfs: one line on the receiver, exact"
		send "$W/tx-direct-tmpfs.log" --port "$P" --direct "$DFS/src/odd" "$DFS/src/even" "$ADDR::d/"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same "$DFS/src/odd" "$W/dshm/d/odd"
		same "$DFS/src/even" "$W/dshm/d/even"
		[ "$(grep -c 'O_DIRECT' "$W/rx-direct-tmpfs.log")" = 1 ] ||
			t_fail "want one O_DIRECT line on the receiver, got: $(grep O_DIRECT "$W/rx-direct-tmpfs.log")"
		echo "# $(grep -m1 O_DIRECT "$W/rx-direct-tmpfs.log")"
		t_log "$W/tx-direct-tmpfs.log" "$W/rx-direct-tmpfs.log"
		t_end

		# 64 MiB, the auto threshold: sparse, so only its last MiB moves
		t_begin "auto into a tmpfs (64 MiB sparse file): nothing said, exact"
		truncate -s $((63 * M)) "$DFS/src/sp"
		head -c "$M" /dev/urandom >>"$DFS/src/sp"
		send "$W/tx-direct-auto.log" --port "$P" "$DFS/src/sp" "$ADDR::auto/"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same "$DFS/src/sp" "$W/dshm/auto/sp"
		[ "$(grep -c 'O_DIRECT' "$W/rx-direct-tmpfs.log")" = 1 ] ||
			t_fail "auto said something: $(grep O_DIRECT "$W/rx-direct-tmpfs.log")"
		t_log "$W/tx-direct-auto.log" "$W/rx-direct-tmpfs.log"
		t_end
		term_rx
	else
		rx_not_started "--direct into a tmpfs" "$W/rx-direct-tmpfs.log"
	fi
	[ -n "$_dm" ] && umount "$W/dshm"
	umount "$DFS" || echo "# cannot umount $DFS"
	rm -rf "$W/dfs.img" "$DFS" "$W/dshm"
}

# sums DIR: every entry of DIR as "name type mode mtime", then an md5sum
# of every file: one line each, sorted, in two processes (not one per file:
# the guest's CPU is emulated).
sums() {
	(cd "$1" && find . | sort | xargs stat -c '%n %F %a %Y' &&
		find . -type f | sort | xargs md5sum)
}

# 27. Many small files, packed several to a ring slot: a tree of 600 files
#     of 0 B to 40 KiB (and every 50th of 100 KiB, sent alone in between),
#     four modes, old times, three directories: pushed -r -p, pulled back
#     -r -p, pushed again with --compress. Each copy has every entry, mode,
#     mtime and byte; --json has one ok file_done per entry and a summary
#     that counts the packed files. Then --encrypt, and a packed slot
#     corrupted in flight: only the file hit fails, named.
s_small() {
	rm -rf src/small rx/small got
	mkdir -p src/small/d1/d2 src/small/d3 rx/small got
	i=0
	while [ "$i" -lt 600 ]; do
		case $((i % 3)) in
		0) d=src/small ;;
		1) d=src/small/d1/d2 ;;
		*) d=src/small/d3 ;;
		esac
		if [ $((i % 50)) = 25 ]; then
			mkrand "$d/f$i" 102400
		else
			mkrand "$d/f$i" $((i * 997 % 40960))
		fi
		i=$((i + 1))
	done
	chmod 0640 src/small/d3/*
	chmod 0755 src/small/d1/d2/f1*
	chmod 0600 src/small/f2*
	touch -d '2006-07-08 09:10:11' src/small/d3/f1* src/small/f3*
	touch -d '2007-08-09 10:11:12' src/small/d1/d2 src/small/d3
	sums src/small >"$W/small-a"
	_n=$(find src/small | wc -l)
	nextport
	if start_rx "$W/rx-small.log" --root "$W/rx/small" --port "$P"; then
		t_begin "600 small files -r -p push, packed: every entry, mode, mtime and byte"
		send "$W/tx-small1.log" --port "$P" -r -p --json src/small "$ADDR::copy"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		sums rx/small/copy >"$W/small-b"
		cmp -s "$W/small-a" "$W/small-b" ||
			t_fail "the copy differs: $(diff "$W/small-a" "$W/small-b" | grep '^[-+][^-+]' | head -n 3 | tr '\n' ' ')"
		no_temp rx/small
		[ "$(grep '"event":"file_done"' "$W/tx-small1.log" | grep -c '"status":"ok"')" = "$_n" ] ||
			t_fail "--json: not $_n file_done with status ok"
		_p=$(jget "$W/tx-small1.log" summary files_packed)
		echo "# push: $_p of $_n entries packed in $ST s"
		[ "${_p:-0}" -ge 500 ] || t_fail "summary files_packed ${_p:-none}, want >= 500"
		t_log "$W/tx-small1.log" "$W/rx-small.log"
		t_end

		t_begin "600 small files -r -p pull, packed: every entry, mode, mtime and byte"
		send "$W/tx-small2.log" --port "$P" -r -p --json "$ADDR::copy" got/back
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		sums got/back >"$W/small-c"
		cmp -s "$W/small-a" "$W/small-c" ||
			t_fail "the copy differs: $(diff "$W/small-a" "$W/small-c" | grep '^[-+][^-+]' | head -n 3 | tr '\n' ' ')"
		no_temp got
		_p=$(jget "$W/tx-small2.log" summary files_packed)
		echo "# pull: $_p of $_n entries packed in $ST s"
		[ "${_p:-0}" -ge 500 ] || t_fail "summary files_packed ${_p:-none}, want >= 500"
		t_log "$W/tx-small2.log" "$W/rx-small.log"
		t_end

		t_begin "600 small files -r -p --compress push, packed: identical"
		send "$W/tx-small3.log" --port "$P" -r -p --compress --json src/small "$ADDR::zcopy"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		sums rx/small/zcopy >"$W/small-d"
		cmp -s "$W/small-a" "$W/small-d" ||
			t_fail "the copy differs: $(diff "$W/small-a" "$W/small-d" | grep '^[-+][^-+]' | head -n 3 | tr '\n' ' ')"
		no_temp rx/small
		[ "$(jget "$W/tx-small3.log" summary files_packed)" -ge 500 ] ||
			t_fail "summary files_packed $(jget "$W/tx-small3.log" summary files_packed), want >= 500"
		t_log "$W/tx-small3.log" "$W/rx-small.log"
		t_end

		if [ -n "$AUTH" ]; then
			t_begin "600 small files -r -p --encrypt push, packed: identical"
			send "$W/tx-small4.log" --port "$P" -r -p --encrypt --json src/small "$ADDR::ecopy"
			[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
			sums rx/small/ecopy >"$W/small-e"
			cmp -s "$W/small-a" "$W/small-e" ||
				t_fail "the copy differs: $(diff "$W/small-a" "$W/small-e" | grep '^[-+][^-+]' | head -n 3 | tr '\n' ' ')"
			no_temp rx/small
			[ "$(jget "$W/tx-small4.log" summary files_packed)" -ge 500 ] ||
				t_fail "summary files_packed $(jget "$W/tx-small4.log" summary files_packed), want >= 500"
			t_log "$W/tx-small4.log" "$W/rx-small.log"
			t_end
		fi

		# The first slot written is a pack (the top directory goes as a
		# FILE message): a byte in the middle of it, file data, is
		# flipped in flight. That file fails its digest; the others of
		# the pack and of the tree arrive.
		t_begin "a packed slot corrupted in flight: the file hit is refused (exit 9), the rest arrive"
		RDCP_TEST_CORRUPT_CHUNK=0 timeout -s KILL 120 rdcp-hooks --port "$P" -r --json \
			src/small "$ADDR::bad" >"$W/tx-small5.log" 2>&1
		SRC=$?
		[ "$SRC" = 9 ] || t_fail "sender exit $SRC, want 9"
		grep '"status":"failed"' "$W/tx-small5.log" |
			sed -n 's/.*"path":"src\/small\/\([^"]*\)".*/\1/p' >"$W/small-bad"
		_bad=$(wc -l <"$W/small-bad")
		[ "$_bad" -ge 1 ] || t_fail "no file failed"
		grep '"status":"failed"' "$W/tx-small5.log" | grep -qv '"class":"verify"' &&
			t_fail "a failure not of class verify"
		while read -r _f; do
			[ ! -e "rx/small/bad/$_f" ] || t_fail "$_f placed from a corrupted slot"
		done <"$W/small-bad"
		_got=$(find rx/small/bad -type f | wc -l)
		[ "$_got" = $((600 - _bad)) ] || t_fail "$_got files placed, want $((600 - _bad))"
		echo "# $_bad files refused, $_got placed"
		no_temp rx/small
		alive "$RX" || t_fail "receiver gone"
		t_log "$W/tx-small5.log" "$W/rx-small.log"
		t_end
		term_rx
	else
		rx_not_started "small files" "$W/rx-small.log"
	fi
	rm -rf src/small rx/small got
}

# listing DIR: its entries, sorted, one line.
listing() { (cd "$1" && find . -mindepth 1 | sort | tr '\n' ' '); }

# 28. Scripted bulk moves: --include/--exclude(-from) on a push (the client
#     walks) and a pull (the receiver walks, the rules in the HELLO);
#     --files-from a file and, -0, from a pipe of 3000 names; a listed
#     name outside SRC refused; the same lists on a pull (the names walked
#     by the receiver: a '..' and a symlink out of its root refused per
#     name, -r, filters, --manifest, --json, --dry-run, --resume);
#     --manifest checked by sha256sum -c and
#     against --json's digests; --dry-run on a push and a pull, nothing
#     made or changed; --delete mirrors on a push and a pull (nested extra
#     files, directories and symlinks gone, a symlink to outside removed
#     as a link, excluded names and entries beside the tree kept),
#     --dry-run --delete, the --max-delete brake (exit 13), a run with a
#     corrupted chunk that deletes nothing, --json's file_deleted events.
s_script() {
	rm -rf src/scr rx/scr got src/mir "$W/outside"
	mkdir -p src/scr/build src/scr/sub rx/scr got
	for f in a.c a.o keep.o build/x.c sub/b.c sub/b.o sub/build top sub/top; do
		echo "$f" >"src/scr/$f"
	done
	_want="./a.c ./keep.o ./sub ./sub/b.c ./sub/build ./sub/top "
	printf '# rules\n\n*.o\n;more\nbuild/\n/scr/top\n' >"$W/scr-ex"
	nextport
	if start_rx "$W/rx-scr.log" --root "$W/rx/scr" --port "$P"; then
		t_begin "--include/--exclude on a push: first match wins, dir-only, anchored"
		send "$W/tx-scr1.log" --port "$P" -r --include=keep.o --exclude='*.o' \
			--exclude=build/ --exclude=/scr/top src/scr "$ADDR::f1"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(listing rx/scr/f1)" = "$_want" ] || t_fail "got: $(listing rx/scr/f1)"
		same src/scr/sub/b.c rx/scr/f1/sub/b.c
		t_log "$W/tx-scr1.log" "$W/rx-scr.log"
		t_end

		t_begin "--exclude-from FILE and --include-from - (stdin)"
		echo keep.o >"$W/scr-in"
		send "$W/tx-scr2.log" --port "$P" -r --include-from=- \
			--exclude-from="$W/scr-ex" src/scr "$ADDR::f2" <"$W/scr-in"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(listing rx/scr/f2)" = "$_want" ] || t_fail "got: $(listing rx/scr/f2)"
		t_log "$W/tx-scr2.log" "$W/rx-scr.log"
		t_end

		t_begin "--include/--exclude on a pull: the receiver's walk filtered"
		cp -a src/scr rx/scr/whole
		send "$W/tx-scr3.log" --port "$P" -r --include=keep.o --exclude='*.o' \
			--exclude=build/ --exclude=/whole/top "$ADDR::whole" got/p
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(listing got/p)" = "$_want" ] || t_fail "got: $(listing got/p)"
		same src/scr/a.c got/p/a.c
		t_log "$W/tx-scr3.log" "$W/rx-scr.log"
		t_end

		t_begin "--files-from FILE: the names beneath SRC, kept as they are"
		printf 'a.c\nsub/b.c\n./sub/top\n\n' >"$W/scr-list"
		send "$W/tx-scr4.log" --port "$P" --files-from="$W/scr-list" src/scr "$ADDR::l1"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(listing rx/scr/l1)" = "./a.c ./sub ./sub/b.c ./sub/top " ] ||
			t_fail "got: $(listing rx/scr/l1)"
		same src/scr/sub/top rx/scr/l1/sub/top
		t_log "$W/tx-scr4.log" "$W/rx-scr.log"
		t_end

		t_begin "--files-from=- -0: 3000 names from find -print0 through a pipe"
		mkdir -p src/scr/many/d1 src/scr/many/d2
		i=0
		while [ "$i" -lt 1500 ]; do
			: >"src/scr/many/d1/f$i"
			echo "$i" >"src/scr/many/d2/g$i"
			i=$((i + 1))
		done
		# the right side of a pipe is a subshell: its status via a file
		(cd src/scr && find many -type f -print0) | {
			send "$W/tx-scr5.log" --port "$P" -0 --files-from=- src/scr "$ADDR::l2/"
			echo "$SRC" >"$W/scr-rc"
		}
		SRC=$(cat "$W/scr-rc")
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		_n=$(find rx/scr/l2/many -type f | wc -l)
		[ "$_n" = 3000 ] || t_fail "$_n files, want 3000"
		same src/scr/many/d2/g1499 rx/scr/l2/many/d2/g1499
		t_log "$W/tx-scr5.log" "$W/rx-scr.log"
		t_end

		t_begin "--files-from: a name outside SRC refused (exit 9), the rest sent"
		printf 'a.c\n../../etc/passwd\n' >"$W/scr-bad"
		send "$W/tx-scr6.log" --port "$P" --files-from=- src/scr "$ADDR::l3" <"$W/scr-bad"
		[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
		grep -q "not a path beneath" "$W/tx-scr6.log" || t_fail "no message"
		[ "$(listing rx/scr/l3)" = "./a.c " ] || t_fail "got: $(listing rx/scr/l3)"
		t_log "$W/tx-scr6.log" "$W/rx-scr.log"
		t_end

		script_pull_list

		t_begin "--manifest --checksum sha256 on a push: sha256sum -c in DEST passes, catches a change"
		send "$W/tx-scr7.log" --port "$P" -r --checksum sha256 --manifest="$W/scr-m1" \
			--exclude=many/ src/scr "$ADDR::m1/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		_n=$(find src/scr -path src/scr/many -prune -o -type f -print | wc -l)
		[ "$(grep -c '^[0-9a-f]\{64\}  scr/' "$W/scr-m1")" = "$_n" ] ||
			t_fail "not $_n sha256sum lines: $(head -n 3 "$W/scr-m1" | tr '\n' ' ')"
		(cd rx/scr/m1 && sha256sum -c "$W/scr-m1") >"$W/scr-c1" 2>&1 ||
			t_fail "sha256sum -c: $(grep -v ': OK' "$W/scr-c1" | head -n 3 | tr '\n' ' ')"
		echo changed >>rx/scr/m1/scr/sub/b.c
		(cd rx/scr/m1 && sha256sum -c "$W/scr-m1") >/dev/null 2>&1 &&
			t_fail "sha256sum -c passed a changed file"
		t_log "$W/tx-scr7.log" "$W/rx-scr.log"
		t_end

		t_begin "--manifest on a pull, crc32: a CRC32 line per file placed, as --json's digest"
		send "$W/tx-scr8.log" --port "$P" -r --json --manifest="$W/scr-m2" "$ADDR::f1" got/m2
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(grep -c '^CRC32 (got/m2/' "$W/scr-m2")" = 5 ] ||
			t_fail "not 5 CRC32 lines: $(tr '\n' ' ' <"$W/scr-m2")"
		for f in a.c keep.o sub/b.c; do
			_j=$(jdone "$W/tx-scr8.log" "got/m2/$f" digest)
			grep -qx "CRC32 (got/m2/$f) = $_j" "$W/scr-m2" ||
				t_fail "$f: --json digest '$_j' not in the manifest"
		done
		t_log "$W/tx-scr8.log" "$W/rx-scr.log"
		t_end

		t_begin "--dry-run push: every entry 'new' into a missing DEST, nothing made"
		send "$W/tx-scr9.log" --port "$P" -r --dry-run --exclude=many/ src/scr "$ADDR::d1/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ ! -e rx/scr/d1 ] || t_fail "rx/scr/d1 made"
		grep -qx 'new      scr/sub/b.c' "$W/tx-scr9.log" || t_fail "no 'new scr/sub/b.c'"
		grep -qx 'new      scr/build/' "$W/tx-scr9.log" || t_fail "no 'new scr/build/'"
		grep -q '^dry run, nothing copied: ' "$W/tx-scr9.log" || t_fail "no dry-run summary"
		t_log "$W/tx-scr9.log" "$W/rx-scr.log"
		t_end

		t_begin "--dry-run -u push onto a copy: keep, replace, new, exists; nothing changes"
		send "$W/tx-scr10.log" --port "$P" -r --exclude=many/ src/scr "$ADDR::d2/"
		touch -d '2001-01-01' rx/scr/d2/scr/keep.o
		echo new >src/scr/sub/new.txt
		sums rx/scr/d2 >"$W/scr-before"
		send "$W/tx-scr10.log" --port "$P" -r -u --dry-run --exclude=many/ src/scr "$ADDR::d2/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		sums rx/scr/d2 >"$W/scr-after"
		cmp -s "$W/scr-before" "$W/scr-after" || t_fail "the receiver's tree changed"
		for l in 'keep     scr/a.c' 'replace  scr/keep.o' 'new      scr/sub/new.txt' 'exists   scr/sub/'; do
			grep -qx "$l" "$W/tx-scr10.log" || t_fail "no '$l'"
		done
		rm -f src/scr/sub/new.txt
		t_log "$W/tx-scr10.log" "$W/rx-scr.log"
		t_end

		t_begin "--dry-run pull --json: 'would' in file_done, no local DEST made"
		send "$W/tx-scr11.log" --port "$P" -r --dry-run --json "$ADDR::f1" got/dry/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ ! -e got/dry ] || t_fail "got/dry made"
		[ "$(jdone "$W/tx-scr11.log" got/dry/f1/a.c would)" = new ] ||
			t_fail "a.c: would '$(jdone "$W/tx-scr11.log" got/dry/f1/a.c would)'"
		[ "$(jget "$W/tx-scr11.log" summary dry_run)" = true ] || t_fail "summary without dry_run"
		t_log "$W/tx-scr11.log" "$W/rx-scr.log"
		t_end

		script_delete
		term_rx
	else
		rx_not_started "script" "$W/rx-scr.log"
	fi
	script_list_pause
	rm -rf src/scr rx/scr got src/mir "$W/outside"
}

# --files-from=- from a writer that stays silent for longer than both
# sides' --timeout (`find -newer` crossing a tree with nothing to print),
# a push and a pull: the list is read by a thread of its own, so the
# client keeps answering meanwhile. Read in the engine's thread, the pause
# blocked it and the receiver gave up on it (exit 11).
script_list_pause() {
	t_begin "--files-from=-: the list's writer silent longer than --timeout, a push, a pull and a push with --retry wait for it"
	nextport
	if start_rx_or_fail "$W/rx-lp.log" --timeout 2 --root "$W/rx/scr" --port "$P"; then
		{
			echo a.c
			sleep 4
			echo sub/b.c
		} | {
			send "$W/tx-lp1.log" --port "$P" --timeout 2 --files-from=- src/scr "$ADDR::lp/"
			echo "$SRC" >"$W/scr-rc"
		}
		SRC=$(cat "$W/scr-rc")
		[ "$SRC" = 0 ] || t_fail "push: exit $SRC, want 0"
		same src/scr/sub/b.c rx/scr/lp/sub/b.c
		{
			echo a.c
			sleep 4
			echo sub/b.c
		} | {
			send "$W/tx-lp2.log" --port "$P" --timeout 2 --files-from=- "$ADDR::lp" got/lp/
			echo "$SRC" >"$W/scr-rc"
		}
		SRC=$(cat "$W/scr-rc")
		[ "$SRC" = 0 ] || t_fail "pull: exit $SRC, want 0"
		same src/scr/sub/b.c got/lp/sub/b.c
		# with --retry the list is spooled for the next attempt as it
		# is read (cmd/retry.c): the same, through the spool
		{
			echo a.c
			sleep 4
			echo sub/b.c
		} | {
			send "$W/tx-lp3.log" --port "$P" --timeout 2 --retry 2 --files-from=- src/scr "$ADDR::lp3/"
			echo "$SRC" >"$W/scr-rc"
		}
		SRC=$(cat "$W/scr-rc")
		[ "$SRC" = 0 ] || t_fail "push --retry: exit $SRC, want 0"
		same src/scr/sub/b.c rx/scr/lp3/sub/b.c
		! grep -q 'attempt [0-9]* of' "$W/tx-lp3.log" || t_fail "push --retry: it needed another attempt"
		term_rx
	fi
	t_log "$W/tx-lp1.log" "$W/tx-lp2.log" "$W/tx-lp3.log" "$W/rx-lp.log"
	t_end
}

# The pulls of s_script with --files-from (the names go to the receiver,
# which walks them beneath the SRC), against its receiver (root rx/scr,
# port P), from what the pushes before left there: rx/scr/l1 (a.c, sub/b.c,
# sub/top) and rx/scr/l2/many (3000 files).
script_pull_list() {
	t_begin "--files-from on a pull, -0: 3000 names from find -print0 through a pipe"
	(cd src/scr && find many -type f -print0) | {
		send "$W/tx-pl1.log" --port "$P" -0 --files-from=- "$ADDR::l2" got/pl1
		echo "$SRC" >"$W/scr-rc"
	}
	SRC=$(cat "$W/scr-rc")
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	_n=$(find got/pl1/many -type f | wc -l)
	[ "$_n" = 3000 ] || t_fail "$_n files, want 3000"
	same src/scr/many/d2/g1499 got/pl1/many/d2/g1499
	same src/scr/many/d1/f7 got/pl1/many/d1/f7
	no_temp got/pl1
	t_log "$W/tx-pl1.log" "$W/rx-scr.log"
	t_end

	t_begin "--files-from on a pull: names outside SRC refused per name (exit 9), the rest copied"
	mkdir -p "$W/outside-l"
	echo secret >"$W/outside-l/secret"
	ln -sfn "$W/outside-l" rx/scr/l1/out # leaves the receiver's root
	printf 'a.c
../l2/many/d1/f1
out/secret
sub/b.c
' >"$W/scr-pbad"
	send "$W/tx-pl2.log" --port "$P" --files-from="$W/scr-pbad" "$ADDR::l1" got/pl2
	[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
	grep -q "'../l2/many/d1/f1' in the file list: not a path beneath" "$W/tx-pl2.log" ||
		t_fail "no message for the '..' name"
	grep -q "out/secret.*a symlink on the way" "$W/tx-pl2.log" ||
		t_fail "no message for the name through a symlink"
	[ "$(listing got/pl2)" = "./a.c ./sub ./sub/b.c " ] || t_fail "got: $(listing got/pl2)"
	rm -f rx/scr/l1/out
	t_log "$W/tx-pl2.log" "$W/rx-scr.log"
	t_end

	t_begin "--files-from -r on a pull: a listed directory as a tree, filtered there; --manifest, --json"
	printf 'sub
a.c
' >"$W/scr-pdir"
	send "$W/tx-pl3.log" --port "$P" -r --exclude=top --json --manifest="$W/scr-m3" \
		--files-from="$W/scr-pdir" "$ADDR::l1" got/pl3
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	[ "$(listing got/pl3)" = "./a.c ./sub ./sub/b.c " ] || t_fail "got: $(listing got/pl3)"
	same src/scr/sub/b.c got/pl3/sub/b.c
	_j=$(jdone "$W/tx-pl3.log" got/pl3/sub/b.c digest)
	grep -qx "CRC32 (got/pl3/sub/b.c) = $_j" "$W/scr-m3" ||
		t_fail "sub/b.c: --json digest '$_j' not in the manifest: $(tr '\n' ' ' <"$W/scr-m3")"
	[ "$(wc -l <"$W/scr-m3")" = 2 ] || t_fail "manifest: $(tr '\n' ' ' <"$W/scr-m3")"
	t_log "$W/tx-pl3.log" "$W/rx-scr.log"
	t_end

	t_begin "--files-from on a pull --dry-run, then --resume: nothing made, then all of it"
	send "$W/tx-pl4.log" --port "$P" --dry-run --files-from="$W/scr-pdir" "$ADDR::l1" got/pl4/
	[ "$SRC" = 0 ] || t_fail "dry run: exit $SRC, want 0"
	[ ! -e got/pl4 ] || t_fail "got/pl4 made by a dry run"
	grep -qx 'new      got/pl4/a.c' "$W/tx-pl4.log" || t_fail "no 'new got/pl4/a.c'"
	send "$W/tx-pl4.log" --port "$P" --resume --files-from="$W/scr-pdir" "$ADDR::l1" got/pl4/
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	[ "$(listing got/pl4)" = "./a.c ./sub " ] || t_fail "got: $(listing got/pl4)"
	t_log "$W/tx-pl4.log" "$W/rx-scr.log"
	t_end
	rm -rf "$W/outside-l"
}

# The --delete part of s_script, against its receiver (root rx/scr, port
# P): src/mir mirrored to rx/scr/mir/mir, and back into got/mir.
script_delete() {
	_mw="./a ./sub ./sub/b ./sub/deeper ./sub/deeper/c ./sub/notes.keep "
	_mo="./d ./d/f ./secret "
	mkdir -p src/mir/sub/deeper "$W/outside/d" got
	echo a >src/mir/a
	echo b >src/mir/sub/b
	echo c >src/mir/sub/deeper/c
	echo secret >"$W/outside/secret"
	echo f >"$W/outside/d/f"
	t_begin "--delete push: nested extra files, dirs, symlinks gone; excluded, outside, beside kept"
	send "$W/tx-del0.log" --port "$P" -r src/mir "$ADDR::mir/"
	_d=rx/scr/mir/mir
	mkdir -p "$_d/old/older" "$_d/sub/gone"
	for f in x sub/y old/older/z sub/gone/g; do echo "$f" >"$_d/$f"; done
	echo excluded >"$_d/sub/notes.keep"
	ln -s "$W/outside" "$_d/sub/out" # a directory outside the root
	ln -s "$W/outside/secret" "$_d/lnfile"
	echo beside >rx/scr/mir/beside
	send "$W/tx-del1.log" --port "$P" -r --delete --exclude='*.keep' src/mir "$ADDR::mir/"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	[ "$(listing "$_d")" = "$_mw" ] || t_fail "got: $(listing "$_d")"
	[ -f rx/scr/mir/beside ] || t_fail "DEST's own entry 'beside' deleted"
	[ "$(listing "$W/outside")" = "$_mo" ] || t_fail "outside: $(listing "$W/outside")"
	grep -q ', deleted 9, retries' "$W/tx-del1.log" || t_fail "no 'deleted 9' in the summary"
	t_log "$W/tx-del1.log" "$W/rx-scr.log"
	t_end

	t_begin "--delete pull: this side deletes what the receiver's tree lacks, no symlink followed"
	mkdir -p got/mir/old
	echo x >got/mir/x
	echo o >got/mir/old/o
	ln -s "$W/outside" got/mir/out
	echo mine >got/beside
	send "$W/tx-del2.log" --port "$P" -r --delete "$ADDR::mir/mir" got/
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	[ "$(listing got/mir)" = "$_mw" ] || t_fail "got: $(listing got/mir)"
	[ -f got/beside ] || t_fail "DEST's own entry 'beside' deleted"
	[ "$(listing "$W/outside")" = "$_mo" ] || t_fail "outside: $(listing "$W/outside")"
	t_log "$W/tx-del2.log" "$W/rx-scr.log"
	t_end

	t_begin "--dry-run --delete: lists exactly what would go, changes nothing"
	echo x2 >"$_d/x2"
	mkdir -p "$_d/d2"
	echo y >"$_d/d2/y"
	sums rx/scr/mir >"$W/del-before"
	send "$W/tx-del3.log" --port "$P" -r --delete --dry-run --exclude='*.keep' src/mir "$ADDR::mir/"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	sums rx/scr/mir >"$W/del-after"
	cmp -s "$W/del-before" "$W/del-after" || t_fail "the receiver's tree changed"
	[ "$(grep '^delete ' "$W/tx-del3.log" | tr '\n' ' ')" = "delete   mir/d2/y delete   mir/d2/ delete   mir/x2 " ] ||
		t_fail "delete lines: $(grep '^delete ' "$W/tx-del3.log" | tr '\n' ' ')"
	grep -q ', would delete 3, retries' "$W/tx-del3.log" || t_fail "no 'would delete 3'"
	t_log "$W/tx-del3.log" "$W/rx-scr.log"
	t_end

	t_begin "--max-delete: more would go, so nothing is deleted (exit 13)"
	send "$W/tx-del4.log" --port "$P" -r --delete --max-delete=2 --exclude='*.keep' src/mir "$ADDR::mir/"
	[ "$SRC" = 13 ] || t_fail "exit $SRC, want 13"
	grep -q '3 entries would go, more than --max-delete 2' "$W/tx-del4.log" || t_fail "no line naming the brake"
	[ -f "$_d/x2" ] && [ -f "$_d/d2/y" ] || t_fail "deleted despite the brake"
	t_log "$W/tx-del4.log" "$W/rx-scr.log"
	t_end

	t_begin "--delete with a file that fails (a chunk corrupted): nothing deleted, exit 9"
	mkrand src/mir/big $((3 * 65536 + 7))
	RDCP_TEST_CORRUPT_CHUNK=1 timeout -s KILL 60 rdcp-hooks --port "$P" --chunk-size 64K \
		-r --delete --exclude='*.keep' src/mir "$ADDR::mir/" >"$W/tx-del5.log" 2>&1
	SRC=$?
	[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
	[ -f "$_d/x2" ] && [ -f "$_d/d2/y" ] || t_fail "deleted after a failed file"
	grep -q 'nothing deleted' "$W/tx-del5.log" || t_fail "no 'nothing deleted'"
	rm -f src/mir/big "$_d/big"
	no_temp rx/scr/mir
	t_log "$W/tx-del5.log" "$W/rx-scr.log"
	t_end

	t_begin "--delete --json: a file_deleted event per entry, deleted in the summary"
	send "$W/tx-del6.log" --port "$P" -r --delete --json --exclude='*.keep' src/mir "$ADDR::mir/"
	[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
	[ "$(grep -c '"event":"file_deleted"' "$W/tx-del6.log")" = 3 ] || t_fail "not 3 file_deleted events"
	grep -q '"event":"file_deleted","path":"mir/d2","type":"dir","status":"ok"' "$W/tx-del6.log" ||
		t_fail "no file_deleted for mir/d2"
	[ "$(jget "$W/tx-del6.log" summary deleted)" = 3 ] || t_fail "summary deleted '$(jget "$W/tx-del6.log" summary deleted)'"
	[ "$(listing "$_d")" = "$_mw" ] || t_fail "got: $(listing "$_d")"
	t_log "$W/tx-del6.log" "$W/rx-scr.log"
	t_end
}

# 29. --retry: one invocation gets past a receiver killed mid-copy and
#     restarted (the list of names read again from a pipe, the manifest
#     listing each file once; a pull's list sent again to the receiver
#     restarted), a receiver stopped with SIGTERM (the running session
#     finishes) or SIGTERM twice (stopped at once: the client is told
#     "receiver shutting down" and resumes against the restart), a
#     receiver not listening yet (exit 3); not
#     past a wrong key (exit 4, one attempt); when N runs out the exit is
#     the last attempt's; SIGTERM in the wait and SIGINT mid-copy end it
#     at once with 130, the temporary kept for --resume.
RT_SIZE=$((3 * M))
# rt_kill_rx: kill -9 the receiver RX once the sender TX is ~1 s into
# the copy of NAME (the temporary DIR/.NAME.rdcp-part exists).
rt_kill_rx() {
	if ! wait_partfile "$1" "$2" "$TX"; then
		t_fail "transfer never started"
		return 1
	fi
	usleep 1000000
	alive "$TX" || { t_fail "the copy ended before the kill"; return 1; }
	kill -9 "$RX"
	wait "$RX" 2>/dev/null
	return 0
}
s_retry() {
	rm -rf rx/rt
	mkdir -p src rx/rt
	mkrand src/rt "$RT_SIZE"
	echo small >src/rt-small

	t_begin "--retry: receiver killed mid-copy and restarted, the same run completes byte-identical"
	nextport
	if start_rx_or_fail "$W/rx-rt1.log" --root "$W/rx/rt" --port "$P"; then
		# The names from a pipe on stdin, read once: each attempt
		# reads them again (spooled).
		rm -f "$W/rt-fifo"
		mkfifo "$W/rt-fifo"
		(printf 'rt-small\nrt\n' >"$W/rt-fifo") &
		rdcp --port "$P" --chunk-size 64K --bwlimit 1M --retry 5 --retry-wait 0.5 \
			--json --files-from=- --checksum sha256 --manifest="$W/rt-man" \
			src "$ADDR::l/" <"$W/rt-fifo" >"$W/tx-rt1.log" 2>&1 &
		TX=$!
		track "$TX"
		if rt_kill_rx rx/rt/l rt; then
			# A loop brings the receiver back (as a supervisor would).
			restart_rx "$W/rx-rt1b.log" --root "$W/rx/rt" --port "$P"
			wait_pid "$TX" 120
			[ "$WRC" = 0 ] || t_fail "sender exit $WRC, want 0"
			same src/rt rx/rt/l/rt
			same src/rt-small rx/rt/l/rt-small
			no_temp rx/rt
			_r=$(jget "$W/tx-rt1.log" summary retries)
			[ "${_r:-0}" -ge 1 ] 2>/dev/null || t_fail "summary retries '$_r', want >= 1"
			grep -Eq '^2 files, .* skipped 0, failed 0, retries [1-9]' "$W/tx-rt1.log" ||
				t_fail "no summary line '2 files ... skipped 0, failed 0, retries N'"
			_a=$(jattempts "$W/tx-rt1.log")
			case "$_a" in
			peer-lost/11/true*) ;;
			*) t_fail "attempts: '$_a', want peer-lost/11/true first" ;;
			esac
			_t=rdma
			[ -z "$HOST_MODE" ] || _t=tcp
			[ "$(af_attempt "$W/tx-rt1.log" 1 transport)" = "$_t" ] ||
				t_fail "the attempt event does not name $_t"
			_sent=$(jlastdone "$W/tx-rt1.log" src/rt sent)
			echo "# attempts: $_a; the last sent $_sent of $RT_SIZE bytes"
			[ -n "$_sent" ] && [ "$_sent" -lt "$RT_SIZE" ] ||
				t_fail "the retry sent '$_sent' bytes, want fewer than $RT_SIZE (resumed)"
			[ "$(grep -c '^[0-9a-f]\{64\}  rt$' "$W/rt-man")/$(grep -c '^[0-9a-f]\{64\}  rt-small$' "$W/rt-man")/$(wc -l <"$W/rt-man")" = 1/1/2 ] ||
				t_fail "manifest: not one line per file: $(tr '\n' ' ' <"$W/rt-man")"
			(cd rx/rt/l && sha256sum -c "$W/rt-man") >"$W/rt-c" 2>&1 ||
				t_fail "sha256sum -c: $(tr '\n' ' ' <"$W/rt-c")"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	fi
	t_log "$W/tx-rt1.log" "$W/rx-rt1.log" "$W/rx-rt1b.log"
	t_end

	t_begin "--retry on a pull with --files-from from a pipe: receiver killed mid-copy, the list sent again"
	rm -rf got/rt
	mkdir -p rx/rt/pl got
	cp src/rt src/rt-small rx/rt/pl/
	nextport
	if start_rx_or_fail "$W/rx-rt6.log" --root "$W/rx/rt" --port "$P"; then
		rm -f "$W/rt-fifo"
		mkfifo "$W/rt-fifo"
		(printf 'rt-small\nrt\n' >"$W/rt-fifo") &
		rdcp --port "$P" --chunk-size 64K --bwlimit 1M --retry 5 --retry-wait 0.5 \
			--json --files-from=- "$ADDR::pl" got/rt/ <"$W/rt-fifo" >"$W/tx-rt6.log" 2>&1 &
		TX=$!
		track "$TX"
		if rt_kill_rx got/rt rt; then
			restart_rx "$W/rx-rt6b.log" --root "$W/rx/rt" --port "$P"
			wait_pid "$TX" 120
			[ "$WRC" = 0 ] || t_fail "client exit $WRC, want 0"
			same src/rt got/rt/rt
			same src/rt-small got/rt/rt-small
			no_temp got/rt
			_a=$(jattempts "$W/tx-rt6.log")
			_sent=$(jlastdone "$W/tx-rt6.log" got/rt/rt sent)
			echo "# attempts: $_a; the last sent $_sent of $RT_SIZE bytes"
			case "$_a" in
			peer-lost/11/true*) ;;
			*) t_fail "attempts: '$_a', want peer-lost/11/true first" ;;
			esac
			[ -n "$_sent" ] && [ "$_sent" -lt "$RT_SIZE" ] ||
				t_fail "the retry sent '$_sent' bytes, want fewer than $RT_SIZE (resumed)"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	fi
	t_log "$W/tx-rt6.log" "$W/rx-rt6.log" "$W/rx-rt6b.log"
	t_end

	t_begin "--retry: a receiver not listening yet (exit 3) is tried again"
	nextport
	bg_send "$W/tx-rt2.log" --port "$P" --retry 4 --retry-wait 1 --json src/rt-small "$ADDR::late"
	usleep 1500000
	if start_rx_or_fail "$W/rx-rt2.log" --root "$W/rx/rt" --port "$P"; then
		wait_pid "$TX" 60
		[ "$WRC" = 0 ] || t_fail "sender exit $WRC, want 0"
		same src/rt-small rx/rt/late
		_a=$(jattempts "$W/tx-rt2.log")
		echo "# attempts: $_a"
		case "$_a" in
		connect/3/true*) ;;
		*) t_fail "attempts: '$_a', want connect/3/true first" ;;
		esac
		[ "$(jget "$W/tx-rt2.log" summary retries)" -ge 1 ] 2>/dev/null ||
			t_fail "summary retries '$(jget "$W/tx-rt2.log" summary retries)'"
		# Each failed attempt: one line, its error and what comes next.
		_l=$(grep -c '^rdcp: warning: attempt [0-9]* of 5 failed: .*connect.* (connect, exit 3): trying again in' "$W/tx-rt2.log")
		[ "$_l" = "$(grep -c '"event":"attempt"' "$W/tx-rt2.log")" ] ||
			t_fail "$_l attempt lines for $(grep -c '"event":"attempt"' "$W/tx-rt2.log") attempts"
		! grep -v '^rdcp: warning: attempt ' "$W/tx-rt2.log" | grep -q '^rdcp: ' ||
			t_fail "a line besides the attempt lines: $(grep -v '^rdcp: warning: attempt ' "$W/tx-rt2.log" | grep '^rdcp: ' | head -1)"
	fi
	t_log "$W/tx-rt2.log" "$W/rx-rt2.log"
	t_end

	t_begin "--retry: a wrong key is not tried again (exit 4, one attempt)"
	if [ -z "$AUTH" ]; then
		echo "# (this rdcp has no --keygen: nothing to test)"
	elif alive "$RX"; then
		[ -f "$W/other.key" ] || rdcp --keygen "$W/other.key" >/dev/null 2>&1
		send "$W/tx-rt3.log" --port "$P" --key-file "$W/other.key" --retry 3 \
			--retry-wait 5 --json src/rt-small "$ADDR::auth"
		[ "$SRC" = 4 ] || t_fail "sender exit $SRC, want 4"
		[ "${ST%.*}" -lt 4 ] || t_fail "took ${ST}s: it waited to retry"
		[ "$(jattempts "$W/tx-rt3.log")" = "auth/4/false " ] ||
			t_fail "attempts: '$(jattempts "$W/tx-rt3.log")', want one, auth/4/false"
		[ "$(jget "$W/tx-rt3.log" summary retries)" = 0 ] || t_fail "summary retries not 0"
		[ "$(grep -c '^rdcp: ' "$W/tx-rt3.log")" = 1 ] &&
			grep -q '^rdcp: .*key.*; attempt 1 of 4 failed: not retrying' "$W/tx-rt3.log" ||
			t_fail "not one line with the error and 'not retrying'"
	else
		t_fail "the receiver of the previous test is gone"
	fi
	t_log "$W/tx-rt3.log"
	t_end
	term_rx

	t_begin "--retry: a receiver stopped with SIGTERM lets the running session finish (exit 0), refuses new ones (retried after its restart), then exits 130"
	nextport
	if start_rx "$W/rx-rt7.log" --root "$W/rx/rt" --port "$P"; then
		bg_send "$W/tx-rt7.log" --port "$P" --chunk-size 64K --bwlimit 1M --retry 3 \
			--retry-wait 0.5 --json src/rt "$ADDR::grace"
		if wait_partfile rx/rt grace "$TX"; then
			_tx=$TX
			usleep 500000
			kill -TERM "$RX"
			usleep 200000
			# A client that comes while it stops: refused, tried again.
			bg_send "$W/tx-rt7b.log" --port "$P" --retry 20 --retry-wait 0.5 \
				--json src/rt-small "$ADDR::late7"
			_tx2=$TX
			wait_pid "$_tx" 60
			[ "$WRC" = 0 ] || t_fail "client exit $WRC, want 0 (the session may finish)"
			same src/rt rx/rt/grace
			[ "$(jget "$W/tx-rt7.log" summary retries)" = 0 ] || t_fail "retried: the session was not let finish"
			wait_pid "$RX" 10
			[ "$WRC" = 130 ] || t_fail "receiver exit $WRC after SIGTERM, want 130"
			grep -q 'shutting down: 1 running session' "$W/rx-rt7.log" || t_fail "the receiver did not say it waits for the session"
			grep -q 'refused .*: shutting down' "$W/rx-rt7.log" || t_fail "the late client was not refused while it stopped"
			start_rx "$W/rx-rt7c.log" --root "$W/rx/rt" --port "$P" || t_fail "the restart did not listen"
			wait_pid "$_tx2" 60
			[ "$WRC" = 0 ] || t_fail "the late client: exit $WRC, want 0"
			same src/rt-small rx/rt/late7
			case "$(jattempts "$W/tx-rt7b.log")" in
			connect/3/true*) ;;
			*) t_fail "late client attempts: '$(jattempts "$W/tx-rt7b.log")', want connect/3/true first" ;;
			esac
			term_rx
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" "$_tx" "$RX" 2>/dev/null
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-rt7.log" "$W/tx-rt7b.log" "$W/rx-rt7.log"
	t_end

	t_begin "--retry: a receiver stopped at once (SIGTERM twice) tells the client, which resumes against its restart (was: 'interrupted', exit 130)"
	nextport
	if start_rx "$W/rx-rt8.log" --root "$W/rx/rt" --port "$P"; then
		bg_send "$W/tx-rt8.log" --port "$P" --chunk-size 64K --bwlimit 1M --retry 5 \
			--retry-wait 0.5 --json src/rt "$ADDR::stopped"
		if wait_partfile rx/rt stopped "$TX"; then
			usleep 1000000
			kill -TERM "$RX"
			usleep 200000
			kill -TERM "$RX"
			wait_pid "$RX" 10
			[ "$WRC" = 130 ] || t_fail "receiver exit $WRC, want 130"
			[ ! -e rx/rt/stopped ] || t_fail "a partial file under its final name"
			restart_rx "$W/rx-rt8b.log" --root "$W/rx/rt" --port "$P"
			wait_pid "$TX" 60
			[ "$WRC" = 0 ] || t_fail "client exit $WRC, want 0"
			same src/rt rx/rt/stopped
			grep -q 'receiver shutting down' "$W/tx-rt8.log" || t_fail "the client was not told the receiver is shutting down"
			_a=$(jattempts "$W/tx-rt8.log")
			echo "# attempts: $_a"
			case "$_a" in
			peer-lost/11/true*) ;;
			*) t_fail "attempts: '$_a', want peer-lost/11/true first" ;;
			esac
			_sent=$(jlastdone "$W/tx-rt8.log" src/rt sent)
			[ -n "$_sent" ] && [ "$_sent" -lt "$RT_SIZE" ] ||
				t_fail "the retry sent '$_sent' bytes, want fewer than $RT_SIZE (resumed)"
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-rt8.log" "$W/rx-rt8.log" "$W/rx-rt8b.log"
	t_end

	t_begin "--retry: N exhausted, the exit status is the last attempt's"
	nextport
	if start_rx_or_fail "$W/rx-rt4.log" --root "$W/rx/rt" --once --port "$P"; then
		bg_send "$W/tx-rt4.log" --port "$P" --chunk-size 64K --bwlimit 1M --connect-timeout 2 \
			--retry 2 --retry-wait 0.2 --json src/rt "$ADDR::ex"
		if rt_kill_rx rx/rt ex; then
			wait_pid "$TX" 60
			[ "$WRC" = 3 ] || t_fail "sender exit $WRC, want 3 (the last attempt's)"
			_a=$(jattempts "$W/tx-rt4.log")
			echo "# attempts: $_a"
			case "$_a" in
			"peer-lost/11/true connect/3/true connect/3/false ") ;;
			*) t_fail "attempts: '$_a'" ;;
			esac
			[ "$(jget "$W/tx-rt4.log" summary retries)" = 2 ] || t_fail "summary retries not 2"
			[ -f rx/rt/.ex.rdcp-part ] || t_fail "the temporary was not kept"
		fi
		kill -9 "$TX" 2>/dev/null
	fi
	t_log "$W/tx-rt4.log" "$W/rx-rt4.log"
	t_end

	t_begin "--retry: SIGTERM in the wait ends it at once (130), the temporary left for --resume"
	nextport
	if start_rx_or_fail "$W/rx-rt5.log" --root "$W/rx/rt" --once --port "$P"; then
		bg_send "$W/tx-rt5.log" --port "$P" --chunk-size 64K --bwlimit 1M \
			--retry 3 --retry-wait 30 --json src/rt "$ADDR::sig"
		if rt_kill_rx rx/rt sig; then
			if wait_until 40 "$TX" logged "$W/tx-rt5.log" '"event":"attempt"'; then
				kill -TERM "$TX"
				wait_pid "$TX" 10
				[ "$WRC" = 130 ] || t_fail "sender exit $WRC, want 130"
				[ "${WT%.*}" -lt 3 ] || t_fail "took ${WT}s after SIGTERM"
				[ "$(jget "$W/tx-rt5.log" error class)" = canceled ] || t_fail "no error event of class canceled"
				[ "$(jget "$W/tx-rt5.log" summary exit)" = 130 ] || t_fail "summary exit not 130"
			else
				t_fail "no attempt event"
			fi
			[ -f rx/rt/.sig.rdcp-part ] || t_fail "the temporary was not kept"
			nextport
			if start_rx "$W/rx-rt5b.log" --root "$W/rx/rt" --once --port "$P"; then
				send "$W/tx-rt5b.log" --port "$P" --chunk-size 64K --resume --json src/rt "$ADDR::sig"
				[ "$SRC" = 0 ] || t_fail "--resume afterwards: exit $SRC"
				same src/rt rx/rt/sig
				_sent=$(jdone "$W/tx-rt5b.log" src/rt sent)
				[ -n "$_sent" ] && [ "$_sent" -lt "$RT_SIZE" ] ||
					t_fail "--resume afterwards sent '$_sent' of $RT_SIZE bytes"
				stop_rx 10
			else
				t_fail "second receiver did not start listening"
			fi
		fi
		kill -9 "$TX" 2>/dev/null
	fi
	t_log "$W/tx-rt5.log" "$W/rx-rt5.log" "$W/tx-rt5b.log"
	t_end

	t_begin "--retry: SIGINT mid-copy ends it at once (130), not retried, the temporary kept"
	nextport
	if start_rx_or_fail "$W/rx-rt6.log" --root "$W/rx/rt" --port "$P"; then
		bg_send "$W/tx-rt6.log" --port "$P" --chunk-size 64K --bwlimit 1M \
			--retry 3 --retry-wait 0.2 --json src/rt "$ADDR::int"
		if wait_partfile rx/rt int "$TX"; then
			usleep 1000000
			kill -INT "$TX"
			wait_pid "$TX" 10
			[ "$WRC" = 130 ] || t_fail "sender exit $WRC, want 130"
			[ "${WT%.*}" -lt 3 ] || t_fail "took ${WT}s after SIGINT"
			[ "$(jattempts "$W/tx-rt6.log")" = "canceled/130/false " ] ||
				t_fail "attempts: '$(jattempts "$W/tx-rt6.log")', want canceled/130/false"
			wait_until 5 "" test -f rx/rt/.int.rdcp-part || t_fail "the temporary was not kept"
			alive "$RX" || t_fail "the receiver is gone"
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	fi
	t_log "$W/tx-rt6.log" "$W/rx-rt6.log"
	t_end
	rm -rf rx/rt got/rt src/rt src/rt-small
}

# 29b. Directories always end right (issue #23 item 3): a tree copy cut
#      off while its directories are open (SIGINT of the pushing client,
#      kill -9 of the pulling client, the receiver killed under --retry of
#      a pull) leaves them unfinished; the next copy that completes gives
#      each the source's mode (and, with -p, its mtime) or the mode less the
#      umask, push and pull, never 0700. Before, a directory that was there
#      already (made by the cut copy) kept 0700 unless a push had -p.
DM_SIZE=$((4 * M))
# dm_tree DIR: directories of modes 0755, 0750 and 0705 (old mtimes), the
# slow file in the deepest.
dm_tree() {
	mkdir -p "$1/a/b" "$1/c"
	echo c >"$1/c/f"
	echo a >"$1/a/f"
	mkrand "$1/a/b/big" "$DM_SIZE"
	chmod 0755 "$1" "$1/a"
	chmod 0750 "$1/a/b"
	chmod 0705 "$1/c"
	touch -d '2004-05-06 07:08:09' "$1/a/b" "$1/c" "$1/a" "$1"
}
# dm_check SRC COPY [p]: every directory's mode as SRC's (less the umask
# without p), with p its mtime too.
dm_check() {
	for _d in . a a/b c; do
		_m=$(stat -c %a "$1/$_d")
		[ "${3:-}" = p ] || _m=$(printf '%o' $((0$_m & ~0$(umask))))
		_g=$(stat -c %a "$2/$_d" 2>/dev/null)
		[ "$_g" = "$_m" ] || t_fail "directory $_d: mode ${_g:-missing}, want $_m"
		[ "${3:-}" != p ] || [ "$(stat -c %Y "$1/$_d")" = "$(stat -c %Y "$2/$_d" 2>/dev/null)" ] ||
			t_fail "directory $_d: mtime $(stat -c %Y "$2/$_d" 2>/dev/null), want $(stat -c %Y "$1/$_d")"
	done
}
# dm_cut DIR: the open directories the cut copy left (mode 1700).
dm_cut() {
	echo "# left by the cut copy: $(cd "$1" 2>/dev/null && stat -c '%n %a' . a a/b 2>/dev/null | tr '\n' ' ')"
}
s_dirmodes() {
	rm -rf src/dm rx/dm got/dm
	mkdir -p src rx/dm/push got/dm/pl got/dm/rt
	dm_tree src/dm
	nextport
	if start_rx "$W/rx-dm.log" --root "$W/rx/dm" --port "$P"; then
		t_begin "dirmodes: push cut by SIGINT, then -r --resume: every directory's mode as the source's less the umask"
		bg_send "$W/tx-dm1.log" --port "$P" --chunk-size 64K --bwlimit 1M -r src/dm "$ADDR::push/"
		if wait_partfile rx/dm/push/dm/a/b big "$TX"; then
			usleep 1000000
			kill -INT "$TX"
			wait_pid "$TX" 20
			[ "$WRC" = 130 ] || t_fail "cut copy: exit $WRC, want 130"
			wait_until 10 "$RX" rx_sessions "$W/rx-dm.log" 1 ||
				t_fail "the receiver never ended the cut session"
			dm_cut rx/dm/push/dm
			send "$W/tx-dm1b.log" --port "$P" -r --resume src/dm "$ADDR::push/"
			[ "$SRC" = 0 ] || t_fail "second copy: exit $SRC, want 0"
			same src/dm/a/b/big rx/dm/push/dm/a/b/big
			dm_check src/dm rx/dm/push/dm
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		t_log "$W/tx-dm1.log" "$W/tx-dm1b.log" "$W/rx-dm.log"
		t_end

		t_begin "dirmodes: pull -r -p cut by kill -9, then again: every directory's mode and mtime as the source's"
		cp -a src/dm rx/dm/pl
		bg_send "$W/tx-dm2.log" --port "$P" --chunk-size 64K --bwlimit 1M -r -p "$ADDR::pl" got/dm/pl/
		if wait_partfile got/dm/pl/pl/a/b big "$TX"; then
			usleep 1000000
			kill -9 "$TX"
			wait "$TX" 2>/dev/null
			dm_cut got/dm/pl/pl
			usleep 500000
			send "$W/tx-dm2b.log" --port "$P" -r -p --resume "$ADDR::pl" got/dm/pl/
			[ "$SRC" = 0 ] || t_fail "second copy: exit $SRC, want 0"
			same src/dm/a/b/big got/dm/pl/pl/a/b/big
			dm_check src/dm got/dm/pl/pl p
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		t_log "$W/tx-dm2.log" "$W/tx-dm2b.log" "$W/rx-dm.log"
		t_end
		term_rx
	else
		t_begin "dirmodes: receiver starts"
		t_fail "receiver did not start listening"
		t_end
		kill -9 "$RX" 2>/dev/null
	fi

	t_begin "dirmodes: pull -r --retry, the receiver killed and restarted: exit 0, every directory's mode less the umask"
	nextport
	if start_rx "$W/rx-dm3.log" --root "$W/rx/dm" --port "$P"; then
		bg_send "$W/tx-dm3.log" --port "$P" --chunk-size 64K --bwlimit 1M --retry 5 \
			--retry-wait 0.5 -r "$ADDR::pl" got/dm/rt/
		if wait_partfile got/dm/rt/pl/a/b big "$TX"; then
			usleep 1000000
			kill -9 "$RX"
			wait "$RX" 2>/dev/null
			restart_rx "$W/rx-dm3b.log" --root "$W/rx/dm" --port "$P"
			wait_pid "$TX" 120
			[ "$WRC" = 0 ] || t_fail "client exit $WRC, want 0"
			grep -q 'trying again' "$W/tx-dm3.log" || t_fail "no retry"
			same src/dm/a/b/big got/dm/rt/pl/a/b/big
			dm_check src/dm got/dm/rt/pl
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-dm3.log" "$W/rx-dm3.log" "$W/rx-dm3b.log"
	t_end

	# One directory SRC, a DEST that does not exist, no trailing '/':
	# DEST is the copy (cp -r). Each later attempt, and a --resume after
	# a cut, must land there too, not in DEST/dm (issue #23).
	rm -rf rx/dm/rn got/dm/rn
	[ -d rx/dm/pl ] || cp -a src/dm rx/dm/pl
	t_begin "dirmodes: push -r --retry to a new DEST (no '/'), the receiver killed and restarted: every attempt lands at DEST, not DEST/dm"
	nextport
	if start_rx "$W/rx-dm4.log" --root "$W/rx/dm" --port "$P"; then
		bg_send "$W/tx-dm4.log" --port "$P" --chunk-size 64K --bwlimit 1M --retry 5 \
			--retry-wait 0.5 -r src/dm "$ADDR::rn"
		if wait_partfile rx/dm/rn/a/b big "$TX"; then
			usleep 1000000
			kill -9 "$RX"
			wait "$RX" 2>/dev/null
			restart_rx "$W/rx-dm4b.log" --root "$W/rx/dm" --port "$P"
			wait_pid "$TX" 120
			[ "$WRC" = 0 ] || t_fail "client exit $WRC, want 0"
			grep -q 'trying again' "$W/tx-dm4.log" || t_fail "no retry"
			[ ! -e rx/dm/rn/dm ] || t_fail "a retry made DEST/dm: $(cd rx/dm/rn && find dm | head -3 | tr '\n' ' ')"
			same src/dm/a/b/big rx/dm/rn/a/b/big
			same src/dm/c/f rx/dm/rn/c/f
			dm_check src/dm rx/dm/rn
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-dm4.log" "$W/rx-dm4.log" "$W/rx-dm4b.log"
	t_end

	t_begin "dirmodes: pull -r --retry to a new DEST (no '/'), the receiver killed and restarted: every attempt lands at DEST"
	nextport
	if start_rx "$W/rx-dm5.log" --root "$W/rx/dm" --port "$P"; then
		bg_send "$W/tx-dm5.log" --port "$P" --chunk-size 64K --bwlimit 1M --retry 5 \
			--retry-wait 0.5 -r "$ADDR::pl" got/dm/rn
		if wait_partfile got/dm/rn/a/b big "$TX"; then
			usleep 1000000
			kill -9 "$RX"
			wait "$RX" 2>/dev/null
			restart_rx "$W/rx-dm5b.log" --root "$W/rx/dm" --port "$P"
			wait_pid "$TX" 120
			[ "$WRC" = 0 ] || t_fail "client exit $WRC, want 0"
			grep -q 'trying again' "$W/tx-dm5.log" || t_fail "no retry"
			[ ! -e got/dm/rn/pl ] || t_fail "a retry made DEST/pl"
			same src/dm/a/b/big got/dm/rn/a/b/big
			dm_check src/dm got/dm/rn
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-dm5.log" "$W/rx-dm5.log" "$W/rx-dm5b.log"
	t_end

	rm -rf rx/dm/rn
	t_begin "dirmodes: push -r to a new DEST (no '/') cut by kill -9, then -r --resume: lands at DEST, not DEST/dm"
	nextport
	if start_rx "$W/rx-dm6.log" --root "$W/rx/dm" --port "$P"; then
		bg_send "$W/tx-dm6.log" --port "$P" --chunk-size 64K --bwlimit 1M -r src/dm "$ADDR::rn"
		if wait_partfile rx/dm/rn/a/b big "$TX"; then
			usleep 1000000
			kill -9 "$TX"
			wait "$TX" 2>/dev/null
			usleep 1000000 # the receiver ends the cut session
			dm_cut rx/dm/rn
			send "$W/tx-dm6b.log" --port "$P" -r --resume src/dm "$ADDR::rn"
			[ "$SRC" = 0 ] || t_fail "second copy: exit $SRC, want 0"
			[ ! -e rx/dm/rn/dm ] || t_fail "the resumed copy made DEST/dm"
			same src/dm/a/b/big rx/dm/rn/a/b/big
			dm_check src/dm rx/dm/rn
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	else
		t_fail "receiver did not start listening"
	fi
	t_log "$W/tx-dm6.log" "$W/tx-dm6b.log" "$W/rx-dm6.log"
	t_end
	rm -rf src/dm rx/dm got/dm
}

# 25. -o/-g (and -a) as root: owners and groups kept by number (ids with
# no name here) and by name, setuid/setgid bits only with them, packed
# small files, a large file, a directory and a symlink; a --listen
# receiver without --allow-owners keeps files its own (one warning, on
# the client too); a pull; a re-run (-a, --sync mtime) that fixes owners
# and modes of files whose data did not change, and the owner of a kept
# symlink, sending nothing.
ow_mktree() {
	mkdir -p "$1/d"
	mkrand "$1/small" 100
	mkrand "$1/d/small2" 2000
	mkrand "$1/big" 3000000
	mkrand "$1/suid" 50
	mkrand "$1/sgid" 50
	mkrand "$1/mine" 10
	ln -s small "$1/link"
	chown 12345:12346 "$1/small" "$1/big" "$1/suid" "$1/sgid" "$1/d"
	chown 23456:0 "$1/d/small2"
	chown -h 12345:12346 "$1/link"
	chmod 4755 "$1/suid"
	chmod 2755 "$1/sgid"
	chmod 750 "$1/d"
}
# ow_stat DIR: "name uid gid mode" of every entry, sorted
ow_stat() {
	(cd "$1" && find . -mindepth 1 -exec stat -c '%n %u %g %a' {} + | sort)
}
ow_same() { # A B
	ow_stat "$1" >"$W/ow-a.txt"
	ow_stat "$2" >"$W/ow-b.txt"
	cmp -s "$W/ow-a.txt" "$W/ow-b.txt" ||
		t_fail "owners/modes differ: $(diff "$W/ow-a.txt" "$W/ow-b.txt" | grep '^[<>]' | tr '\n' ' ')"
}
s_owners() {
	rm -rf src/ow rx/ow got/ow
	mkdir -p src rx/ow/allow rx/ow/deny got/ow
	ow_mktree src/ow
	nextport
	if start_rx "$W/rx-ow.log" --root "$W/rx/ow/allow" --port "$P" --allow-owners; then
		t_begin "-a as root to a receiver with --allow-owners (push): owners, groups, setuid/setgid kept"
		send "$W/tx-ow1.log" --port "$P" -a src/ow "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/ow rx/ow/allow/ow
		ow_same src/ow rx/ow/allow/ow
		grep -q 'not kept\|cannot set' "$W/tx-ow1.log" && t_fail "a warning with owners allowed"
		t_log "$W/tx-ow1.log" "$W/rx-ow.log" "$W/ow-a.txt" "$W/ow-b.txt"
		t_end

		t_begin "-a re-run: owners and modes of unchanged files (and a kept symlink's owner) fixed, nothing sent"
		chown 0:0 rx/ow/allow/ow/big rx/ow/allow/ow/suid
		chown -h 0:0 rx/ow/allow/ow/link
		chmod 600 rx/ow/allow/ow/small
		chown 1:1 rx/ow/allow/ow/d
		send "$W/tx-ow2.log" --port "$P" -a --json src/ow "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(sent_sum "$W/tx-ow2.log")" = 0 ] ||
			t_fail "sent $(sent_sum "$W/tx-ow2.log") bytes, want 0"
		ow_same src/ow rx/ow/allow/ow
		t_log "$W/tx-ow2.log" "$W/rx-ow.log" "$W/ow-a.txt" "$W/ow-b.txt"
		t_end

		t_begin "-a as root (pull): owners, groups, setuid/setgid kept"
		send "$W/tx-ow3.log" --port "$P" -a "$ADDR::ow" got/ow/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		ow_same src/ow got/ow/ow
		tree_same src/ow got/ow/ow
		t_log "$W/tx-ow3.log" "$W/rx-ow.log" "$W/ow-a.txt" "$W/ow-b.txt"
		t_end

		t_begin "-g without -o (push): groups kept, owners not, setuid cleared"
		rm -rf rx/ow/allow/g
		send "$W/tx-ow4.log" --port "$P" -r -p -g src/ow "$ADDR::g/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(stat -c '%u %g %a' rx/ow/allow/g/ow/big 2>&1)" = "0 12346 $(stat -c %a src/ow/big)" ] ||
			t_fail "big: $(stat -c '%u %g %a' rx/ow/allow/g/ow/big 2>&1), want 0 12346"
		[ "$(stat -c '%u %g %a' rx/ow/allow/g/ow/suid 2>&1)" = "0 12346 755" ] ||
			t_fail "suid: $(stat -c '%u %g %a' rx/ow/allow/g/ow/suid 2>&1), want 0 12346 755"
		[ "$(stat -c '%u %g %a' rx/ow/allow/g/ow/sgid 2>&1)" = "0 12346 2755" ] ||
			t_fail "sgid: $(stat -c '%u %g %a' rx/ow/allow/g/ow/sgid 2>&1), want 0 12346 2755"
		t_log "$W/tx-ow4.log" "$W/rx-ow.log"
		t_end
		term_rx
	else
		rx_not_started "-o/-g" "$W/rx-ow.log"
	fi
	nextport
	if start_rx "$W/rx-ow2.log" --root "$W/rx/ow/deny" --port "$P"; then
		t_begin "-a to a receiver without --allow-owners: files its own, no setuid/setgid, one warning"
		send "$W/tx-ow5.log" --port "$P" -a src/ow "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/ow rx/ow/deny/ow
		_ow_other=$(find rx/ow/deny/ow \( ! -user 0 -o ! -group 0 \) | tr '\n' ' ')
		[ -z "$_ow_other" ] || t_fail "owned by another user or group: $_ow_other"
		_ow_set=$(find rx/ow/deny/ow \( -perm -4000 -o -perm -2000 \) | tr '\n' ' ')
		[ -z "$_ow_set" ] || t_fail "setuid/setgid: $_ow_set"
		[ "$(grep -c 'owners and groups not kept' "$W/tx-ow5.log")" = 1 ] ||
			t_fail "the client saw $(grep -c 'owners and groups not kept' "$W/tx-ow5.log") warnings, want 1"
		[ "$(grep -c 'owners and groups not kept' "$W/rx-ow2.log")" = 1 ] ||
			t_fail "the receiver logged $(grep -c 'owners and groups not kept' "$W/rx-ow2.log") warnings, want 1"
		t_log "$W/tx-ow5.log" "$W/rx-ow2.log"
		t_end

		t_begin "-a of files already the receiver's user's, without --allow-owners: no warning"
		send "$W/tx-ow6.log" --port "$P" -a src/ow/mine "$ADDR::mine"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		grep -q 'not kept' "$W/tx-ow6.log" && t_fail "a warning when nothing was lost"
		t_log "$W/tx-ow6.log" "$W/rx-ow2.log"
		t_end
		term_rx
	else
		rx_not_started "no --allow-owners" "$W/rx-ow2.log"
	fi
	rm -rf src/ow rx/ow got/ow
}

# 26. -X/-A (attr and acl's tools on this host; a guest without them
# skips): user.* attributes and ACLs (a file's, a directory's default)
# pushed and pulled, files and directories; a re-run (-a) that makes a
# kept file's attributes the source's again (changed, added, removed)
# sending nothing; trusted.* kept by a client run as root (a pull's sink),
# not by a --listen receiver without --allow-owners (one warning).
xa_dump() { # DIR: every attribute of every entry, names and values, by name
	(cd "$1" && find . | sort | while read -r _xa_f; do
		getfattr -h -d -m - --absolute-names "$_xa_f" 2>/dev/null
	done | grep -v '^security\.selinux')
}
xa_same() { # A B
	xa_dump "$1" >"$W/xa-a.txt"
	xa_dump "$2" >"$W/xa-b.txt"
	[ -s "$W/xa-a.txt" ] || t_fail "no attributes read from $1"
	cmp -s "$W/xa-a.txt" "$W/xa-b.txt" ||
		t_fail "attributes differ: $(diff "$W/xa-a.txt" "$W/xa-b.txt" | grep '^[<>]' | head -5 | tr '\n' ' ')"
}
s_xattrs() {
	if ! command -v setfattr >/dev/null 2>&1 || ! command -v setfacl >/dev/null 2>&1; then
		t_skip "-X/-A" "setfattr/setfacl missing here (packages attr, acl)"
		return
	fi
	rm -rf src/xa rx/xa got/xa
	mkdir -p src/xa/d rx/xa got/xa
	mkrand src/xa/a 100
	mkrand src/xa/d/b 300000
	mkrand src/xa/c 10
	# user.* needs a file system that has them (tmpfs before Linux 6.6
	# does not): without, the ACLs and trusted.* are what is tested
	setfattr -n user.color -v blue src/xa/a 2>/dev/null ||
		echo "# no user.* attributes on this file system: ACLs and trusted.* only"
	setfattr -n user.empty src/xa/a 2>/dev/null
	setfattr -n user.dir -v 1 src/xa/d 2>/dev/null
	setfattr -n user.bin -v 0sAAECAwQFBgcICQ== src/xa/d/b 2>/dev/null
	setfacl -m u:12345:rx src/xa/a
	setfacl -d -m g:12346:rwx src/xa/d
	setfattr -n trusted.t -v secret src/xa/c
	nextport
	if start_rx "$W/rx-xa.log" --root "$W/rx/xa" --port "$P"; then
		t_begin "-a -X -A (push): attributes and ACLs of files and directories"
		send "$W/tx-xa1.log" --port "$P" -a -X -A src/xa "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/xa rx/xa/xa
		getfattr -n trusted.t rx/xa/xa/c >/dev/null 2>&1 &&
			t_fail "a receiver without --allow-owners set trusted.t"
		setfattr -x trusted.t src/xa/c
		xa_same src/xa rx/xa/xa
		setfattr -n trusted.t -v secret src/xa/c
		[ "$(grep -c 'trusted.\* and security.\* attributes not kept' "$W/tx-xa1.log")" = 1 ] ||
			t_fail "the client was not told once that trusted.* was not kept"
		t_log "$W/tx-xa1.log" "$W/rx-xa.log" "$W/xa-a.txt" "$W/xa-b.txt"
		t_end

		t_begin "-a -X -A re-run: a kept file's attributes made the source's, nothing sent"
		setfattr -n trusted.t -v secret rx/xa/xa/c
		setfattr -n user.color -v red rx/xa/xa/a 2>/dev/null
		setfattr -n user.extra -v 1 rx/xa/xa/a 2>/dev/null
		setfacl -b rx/xa/xa/a
		setfacl -k rx/xa/xa/d
		setfattr -x user.bin rx/xa/xa/d/b 2>/dev/null
		xa_dump rx/xa/xa >"$W/xa-changed.txt"
		xa_dump src/xa | cmp -s - "$W/xa-changed.txt" && t_fail "the changes made no difference"
		send "$W/tx-xa2.log" --port "$P" -a -X -A --json src/xa "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(sent_sum "$W/tx-xa2.log")" = 0 ] ||
			t_fail "sent $(sent_sum "$W/tx-xa2.log") bytes, want 0"
		xa_same src/xa rx/xa/xa
		t_log "$W/tx-xa2.log" "$W/rx-xa.log" "$W/xa-a.txt" "$W/xa-b.txt"
		t_end

		t_begin "-a -X -A (pull, as root): attributes, ACLs and trusted.* kept"
		send "$W/tx-xa3.log" --port "$P" -a -X -A "$ADDR::xa" got/xa/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/xa got/xa/xa
		xa_same src/xa got/xa/xa
		t_log "$W/tx-xa3.log" "$W/rx-xa.log" "$W/xa-a.txt" "$W/xa-b.txt"
		t_end

		t_begin "without -X/-A: no attribute copied"
		rm -rf rx/xa/plain
		send "$W/tx-xa4.log" --port "$P" -r -p src/xa "$ADDR::plain/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ -z "$(xa_dump rx/xa/plain)" ] || t_fail "attributes copied: $(xa_dump rx/xa/plain | head -3 | tr '\n' ' ')"
		t_log "$W/tx-xa4.log" "$W/rx-xa.log"
		t_end

		t_begin "-r -p -X -A (no --sync): small files without attributes packed, with them alone, all kept"
		mkdir -p src/xp rx/xa/xp
		for _xa_i in 1 2 3 4 5 6 7 8 9 10 11 12; do
			mkrand "src/xp/p$_xa_i" 50
		done
		mkrand src/xp/acl 50
		setfacl -m u:12345:r src/xp/acl
		mkrand src/xp/attr 50
		setfattr -n user.k -v v src/xp/attr 2>/dev/null
		setfattr -n trusted.k -v v src/xp/attr
		# files made beneath it inherit an ACL that the source's lack
		setfacl -d -m u:12346:rw rx/xa/xp
		send "$W/tx-xa5.log" --port "$P" -r -p -X -A --json src/xp "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/xp rx/xa/xp
		setfattr -x trusted.k src/xp/attr
		xa_same src/xp rx/xa/xp
		_p=$(jget "$W/tx-xa5.log" summary files_packed)
		[ "${_p:-0}" = 12 ] || t_fail "summary files_packed ${_p:-none}, want 12"
		t_log "$W/tx-xa5.log" "$W/rx-xa.log" "$W/xa-a.txt" "$W/xa-b.txt"
		t_end
		term_rx
	else
		rx_not_started "-X/-A" "$W/rx-xa.log"
	fi
	xa_names
	rm -rf src/xa src/xp rx/xa got/xa
}
# -A's named users and groups mapped by name: a receiver in a mount
# namespace of its own whose /etc/passwd and /etc/group give the first
# user and group other than root (daemon on most systems; sshd and nogroup
# in the guest) the ids 23456 and 23457; an id without a name (12345)
# keeps its number, and so does every id with --numeric-ids.
xn_ids() { # FILE: "user:ID ... group:ID ..." of its access ACL's named entries
	_xi_h=$(getfattr -n system.posix_acl_access -e hex --absolute-names "$1" 2>/dev/null |
		sed -n 's/^system.posix_acl_access=0x//p' | cut -c9-)
	_xi_out=
	while [ "${#_xi_h}" -ge 16 ]; do
		_xi_e=$(printf %s "$_xi_h" | cut -c1-16)
		_xi_h=$(printf %s "$_xi_h" | cut -c17-)
		_xi_tag=$(printf %s "$_xi_e" | cut -c1-2)
		_xi_id=$(printf %s "$_xi_e" | sed 's/^........\(..\)\(..\)\(..\)\(..\)$/\4\3\2\1/')
		case $_xi_tag in
		02) _xi_out="$_xi_out user:$((0x$_xi_id))" ;;
		08) _xi_out="$_xi_out group:$((0x$_xi_id))" ;;
		esac
	done
	echo "${_xi_out# }"
}
xa_names() {
	_xn_u=$(awk -F: '$3 != 0 { print $1; exit }' /etc/passwd)
	_xn_uid=$(awk -F: '$3 != 0 { print $3; exit }' /etc/passwd)
	_xn_g=$(awk -F: '$3 != 0 { print $1; exit }' /etc/group)
	_xn_gid=$(awk -F: '$3 != 0 { print $3; exit }' /etc/group)
	if [ "$(id -u)" != 0 ] || [ -z "$_xn_u" ] || [ -z "$_xn_g" ] ||
		! unshare --propagation private -m true 2>/dev/null; then
		t_skip "-A: ACL users and groups by name" "needs root, unshare -m and a user and group other than root"
		return
	fi
	sed "s/^$_xn_u:\([^:]*\):$_xn_uid:/$_xn_u:\1:23456:/" /etc/passwd >"$W/xa-passwd"
	sed "s/^$_xn_g:\([^:]*\):$_xn_gid:/$_xn_g:\1:23457:/" /etc/group >"$W/xa-group"
	mkdir -p src/xn rx/xn
	mkrand src/xn/f 100
	setfacl -m "u:$_xn_uid:rx,g:$_xn_gid:rwx,u:12345:r" src/xn/f
	nextport
	# shellcheck disable=SC2016 # expanded by the inner sh
	if rx_spawn "$W/rx-xn.log" unshare --propagation private -m sh -c \
		'mount -o bind "$0" /etc/passwd && mount -o bind "$1" /etc/group && shift && exec "$@"' \
		"$W/xa-passwd" "$W/xa-group" "$RDCP" --listen -v --root "$W/rx/xn" --port "$P"; then
		t_begin "-A: ACL users and groups by name ($_xn_u, $_xn_g: 23456, 23457 there), an id without a name by number"
		send "$W/tx-xn1.log" --port "$P" -a -A src/xn/f "$ADDR::byname"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		_xn_acl=$(xn_ids rx/xn/byname)
		[ "$_xn_acl" = "user:12345 user:23456 group:23457" ] ||
			t_fail "ACL there: $_xn_acl ($(xn_ids src/xn/f) here)"
		t_log "$W/tx-xn1.log" "$W/rx-xn.log"
		t_end

		t_begin "-A --numeric-ids: ACL users and groups by number"
		send "$W/tx-xn2.log" --port "$P" -a -A --numeric-ids src/xn/f "$ADDR::bynum"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		_xn_acl=$(xn_ids rx/xn/bynum)
		[ -n "$_xn_acl" ] && [ "$_xn_acl" = "$(xn_ids src/xn/f)" ] ||
			t_fail "ACL there: $_xn_acl, want $(xn_ids src/xn/f)"
		t_log "$W/tx-xn2.log" "$W/rx-xn.log"
		t_end
		term_rx
	else
		rx_not_started "-A by name" "$W/rx-xn.log"
	fi
	rm -rf src/xn rx/xn
}

# 27. -H and -D: a file of three names (one chunk and more), a small one
# of two (not packed), one whose other name is outside the tree (sent as
# a file), pushed and pulled with -aH: the names are links of one inode
# at DEST, and a re-run sends nothing and keeps them; a FIFO and (as
# root) a character device pushed with -aD: the FIFO made, the device
# only by a receiver with --allow-devices (without: one warning, on the
# client too), kept by a re-run; a pull -aD as root makes the device.
ln_ino() { stat -c %i "$1" 2>/dev/null; }
ln_same() { # DIR: the link groups of the -H tree share their inodes
	[ -n "$(ln_ino "$1/a")" ] && [ "$(ln_ino "$1/a")" = "$(ln_ino "$1/d/a2")" ] &&
		[ "$(ln_ino "$1/a")" = "$(ln_ino "$1/d/e/a3")" ] ||
		t_fail "$1: a, d/a2, d/e/a3 are not one file ($(ln_ino "$1/a") $(ln_ino "$1/d/a2") $(ln_ino "$1/d/e/a3"))"
	[ -n "$(ln_ino "$1/s")" ] && [ "$(ln_ino "$1/s")" = "$(ln_ino "$1/s2")" ] ||
		t_fail "$1: s and s2 are not one file"
	[ "$(stat -c %h "$1/x" 2>/dev/null)" = 1 ] ||
		t_fail "$1: x has $(stat -c %h "$1/x" 2>/dev/null) names, want 1"
}
s_links() {
	rm -rf src/hl rx/hl got/hl "$W/hl-out"
	mkdir -p src/hl/d/e rx/hl/deny rx/hl/allow got/hl
	mkrand src/hl/a 3000000
	ln src/hl/a src/hl/d/a2
	ln src/hl/a src/hl/d/e/a3
	mkrand src/hl/s 100
	ln src/hl/s src/hl/s2
	mkrand src/hl/p 200
	mkrand src/hl/x 300
	ln src/hl/x "$W/hl-out"
	nextport
	if start_rx "$W/rx-hl.log" --root "$W/rx/hl/deny" --port "$P"; then
		t_begin "-aH (push): names of one file are links of one file at DEST"
		send "$W/tx-hl1.log" --port "$P" -aH src/hl "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/hl rx/hl/deny/hl p
		ln_same rx/hl/deny/hl
		t_log "$W/tx-hl1.log" "$W/rx-hl.log"
		t_end

		t_begin "-aH re-run: nothing sent, links kept"
		_hl_ino=$(ln_ino rx/hl/deny/hl/a)
		send "$W/tx-hl2.log" --port "$P" -aH --json src/hl "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(sent_sum "$W/tx-hl2.log")" = 0 ] ||
			t_fail "sent $(sent_sum "$W/tx-hl2.log") bytes, want 0"
		[ "$(ln_ino rx/hl/deny/hl/a)" = "$_hl_ino" ] || t_fail "a was replaced"
		ln_same rx/hl/deny/hl
		t_log "$W/tx-hl2.log" "$W/rx-hl.log"
		t_end

		t_begin "-aH re-run after a link was broken: made a link again"
		rm rx/hl/deny/hl/d/a2
		cp rx/hl/deny/hl/a rx/hl/deny/hl/d/a2
		send "$W/tx-hl3.log" --port "$P" -aH src/hl "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		ln_same rx/hl/deny/hl
		t_log "$W/tx-hl3.log" "$W/rx-hl.log"
		t_end

		t_begin "-aH (pull): links kept"
		send "$W/tx-hl4.log" --port "$P" -aH "$ADDR::hl" got/hl/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		tree_same src/hl got/hl/hl p
		ln_same got/hl/hl
		t_log "$W/tx-hl4.log" "$W/rx-hl.log"
		t_end

		t_begin "-aH re-run (pull): nothing sent"
		send "$W/tx-hl5.log" --port "$P" -aH --json "$ADDR::hl" got/hl/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(sent_sum "$W/tx-hl5.log")" = 0 ] ||
			t_fail "sent $(sent_sum "$W/tx-hl5.log") bytes, want 0"
		ln_same got/hl/hl
		t_log "$W/tx-hl5.log" "$W/rx-hl.log"
		t_end

		rm -rf src/dv
		mkdir -p src/dv
		mkfifo src/dv/fifo
		mkrand src/dv/f 10
		_dv_root=
		[ "$(id -u)" = 0 ] && mknod src/dv/null c 1 3 && _dv_root=1
		t_begin "-aD (push) to a receiver without --allow-devices: the FIFO made, no device, one warning"
		send "$W/tx-dv1.log" --port "$P" -aD src/dv "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ -p rx/hl/deny/dv/fifo ] || t_fail "no FIFO at DEST"
		if [ -n "$_dv_root" ]; then
			[ -e rx/hl/deny/dv/null ] && t_fail "a device node made without --allow-devices"
			[ "$(grep -c 'device nodes were not made' "$W/tx-dv1.log")" = 1 ] ||
				t_fail "the client saw $(grep -c 'device nodes were not made' "$W/tx-dv1.log") warnings, want 1"
		fi
		t_log "$W/tx-dv1.log" "$W/rx-hl.log"
		t_end

		t_begin "-a without -D: FIFO and device left out, as before"
		send "$W/tx-dv2.log" --port "$P" -a src/dv "$ADDR::nod/"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ -e rx/hl/deny/nod/dv/fifo ] && t_fail "a FIFO made without -D"
		[ -f rx/hl/deny/nod/dv/f ] || t_fail "the file is missing"
		t_log "$W/tx-dv2.log" "$W/rx-hl.log"
		t_end
		term_rx
	else
		rx_not_started "-H/-D" "$W/rx-hl.log"
	fi
	if [ -z "$_dv_root" ]; then
		t_skip "-aD as root with --allow-devices: device nodes made (push, re-run, pull)" "not root"
		rm -rf src/hl src/dv rx/hl got/hl "$W/hl-out"
		return
	fi
	nextport
	if start_rx "$W/rx-dv.log" --root "$W/rx/hl/allow" --port "$P" --allow-devices; then
		t_begin "-aD (push) as root with --allow-devices: FIFO and device made"
		send "$W/tx-dv3.log" --port "$P" -aD src/dv "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ -p rx/hl/allow/dv/fifo ] || t_fail "no FIFO at DEST"
		[ -c rx/hl/allow/dv/null ] && [ "$(stat -c '%t %T' rx/hl/allow/dv/null)" = "1 3" ] ||
			t_fail "no device 1,3 at DEST: $(stat -c '%F %t %T' rx/hl/allow/dv/null 2>&1)"
		tree_same src/dv rx/hl/allow/dv p
		grep -q 'not made' "$W/tx-dv3.log" && t_fail "a warning with devices allowed"
		t_log "$W/tx-dv3.log" "$W/rx-dv.log"
		t_end

		t_begin "-aD re-run: FIFO and device kept, nothing sent"
		_dv_ino=$(ln_ino rx/hl/allow/dv/null)
		send "$W/tx-dv4.log" --port "$P" -aD --json src/dv "$ADDR::"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ "$(sent_sum "$W/tx-dv4.log")" = 0 ] ||
			t_fail "sent $(sent_sum "$W/tx-dv4.log") bytes, want 0"
		[ "$(ln_ino rx/hl/allow/dv/null)" = "$_dv_ino" ] || t_fail "the device was made again"
		t_log "$W/tx-dv4.log" "$W/rx-dv.log"
		t_end

		t_begin "-aD (pull) as root: FIFO and device made"
		send "$W/tx-dv5.log" --port "$P" -aD "$ADDR::dv" got/hl/
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		[ -p got/hl/dv/fifo ] || t_fail "no FIFO"
		[ -c got/hl/dv/null ] && [ "$(stat -c '%t %T' got/hl/dv/null)" = "1 3" ] ||
			t_fail "no device 1,3: $(stat -c '%F %t %T' got/hl/dv/null 2>&1)"
		t_log "$W/tx-dv5.log" "$W/rx-dv.log"
		t_end
		term_rx
	else
		rx_not_started "-D --allow-devices" "$W/rx-dv.log"
	fi
	rm -rf src/hl src/dv rx/hl got/hl "$W/hl-out"
}

# 30. The sending side's memory does not grow with the session: it frees
#     each entry's state once the entry is finished. A push fed
#     --files-from lists of 20 000 and 400 000 names (all missing: each
#     fails on the client, so only the source's bookkeeping is at work)
#     and a pull whose receiver walks a tree of 5 000 and one of 40 000
#     empty files, 1 000 to a directory (a directory being listed holds
#     its names), through a 4 x 64 KiB ring (as many files fly in both):
#     the larger's peak RSS (-v "resources:") may pass the smaller's by
#     2 MiB.
#     Kept to the end, each entry cost ~1 KB: 370 MiB and 35 MiB more;
#     the spread measured between runs is under 0.3 MiB, and 2 MiB is
#     what 6 bytes per entry held would add to the push. Over TCP only:
#     the bookkeeping does not depend on the transport, and 445 000 entries
#     would take minutes of the Soft-RoCE guest's emulated CPU.
s_entries() {
	if [ -z "$HOST_MODE" ]; then
		t_skip "--files-from: 400 000 names cost the client no more memory than 20 000" "TCP host mode only"
		t_skip "a pull of 40 000 files costs the walking receiver no more memory than 5 000" "TCP host mode only"
		return
	fi
	rm -rf src/ent rx/ent got/ent
	mkdir -p src/ent rx/ent/t1 rx/ent/t2 got/ent
	awk 'BEGIN { for (i = 0; i < 20000; i++) print "gone/n" i }' >"$W/ent-l1"
	awk 'BEGIN { for (i = 0; i < 400000; i++) print "gone/n" i }' >"$W/ent-l2"
	for _t in t1:5 t2:40; do
		(cd "rx/ent/${_t%:*}" &&
			awk -v n="${_t#*:}" 'BEGIN { for (d = 0; d < n; d++) print "d" d }' | xargs mkdir &&
			awk -v n="${_t#*:}" 'BEGIN { for (i = 0; i < n * 1000; i++) print "d" int(i / 1000) "/f" i }' |
			xargs touch)
	done
	nextport
	if start_rx "$W/rx-ent.log" --root "$W/rx/ent" --port "$P"; then
		t_begin "--files-from: 400 000 names cost the client no more memory than 20 000"
		send "$W/tx-ent1.log" -v --port "$P" --files-from="$W/ent-l1" src/ent "$ADDR::e1"
		_s1=$SRC
		send "$W/tx-ent2.log" -v --port "$P" --files-from="$W/ent-l2" src/ent "$ADDR::e2"
		[ "$_s1" = 6 ] && [ "$SRC" = 6 ] || t_fail "exit $_s1 and $SRC, want 6 (every name missing)"
		_a=$(maxrss "$W/tx-ent1.log") _b=$(maxrss "$W/tx-ent2.log")
		echo "# client peak RSS: ${_a:-?} KiB for 20 000 names, ${_b:-?} KiB for 400 000"
		[ -n "$_a" ] && [ -n "$_b" ] && [ "$_b" -le $((_a + 2048)) ] ||
			t_fail "peak RSS ${_b:-?} KiB, more than ${_a:-?} + 2048"
		t_log "$W/tx-ent2.log" "$W/rx-ent.log"
		t_end
		term_rx
	else
		rx_not_started "--files-from, many names" "$W/rx-ent.log"
	fi
	t_begin "a pull of 40 000 files costs the walking receiver no more memory than 5 000"
	for _t in t1 t2; do
		nextport
		if ! start_rx_or_fail "$W/rx-ent-$_t.log" --root "$W/rx/ent" --once --port "$P"; then
			continue
		fi
		send "$W/tx-ent-$_t.log" --port "$P" -r --chunk-size 64K --window 4 "$ADDR::$_t" "got/ent/$_t"
		[ "$SRC" = 0 ] || t_fail "pull of $_t: exit $SRC, want 0"
		stop_rx 30
	done
	_a=$(maxrss "$W/rx-ent-t1.log") _b=$(maxrss "$W/rx-ent-t2.log")
	echo "# receiver peak RSS: ${_a:-?} KiB for 5 000 files, ${_b:-?} KiB for 40 000"
	[ "$(find got/ent/t2 -type f | wc -l)" = 40000 ] || t_fail "not 40 000 files pulled"
	[ -n "$_a" ] && [ -n "$_b" ] && [ "$_b" -le $((_a + 2048)) ] ||
		t_fail "peak RSS ${_b:-?} KiB, more than ${_a:-?} + 2048"
	t_log "$W/tx-ent-t2.log" "$W/rx-ent-t2.log"
	t_end
	rm -rf src/ent rx/ent got/ent "$W/ent-l1" "$W/ent-l2" "$W"/tx-ent*.log
}

# The ssh server under rdcp's ssh mode (scenario ssh): ssh to this host
# (in the guest also as 127.0.0.1) in BatchMode runs a command that finds
# rdcp in PATH (in the guest, may pin memory: ulimit -l unlimited), its
# output and exit status come back; a killed ssh ends the remote command
# that was reading its stdin (EOF), no sshd session left. Then rdcp
# itself over ssh (ssh_rdcp): a push to HOST:DIR/, a pull back and a copy
# from HOST: to HOST: (both ends started over ssh), a push through ssh to
# 127.0.0.1 (no RDMA address: the data goes to the RDMA address the far
# end names) and one with --rdma-addr ADDR; no key file and no receiver
# running; in the guest the data must go over rdma_cm (rxe's
# packet counter moves by a packet per 4 KiB at least, and the summary
# says rdma); nothing of it left running.
s_ssh() {
	_ss_hosts=$ADDR
	[ -n "$HOST_MODE" ] || _ss_hosts="$ADDR 127.0.0.1"
	for _ss_h in $_ss_hosts; do
		t_begin "ssh $_ss_h: runs a command, its output and exit status come back"
		if [ -n "${RDCP_E2E_SSH_ERR:-}" ]; then
			t_fail "no sshd: $RDCP_E2E_SSH_ERR"
		else
			# shellcheck disable=SC2016,SC2086 # remote $(...); SSH: words
			rm -f "$SSH_HOME/rdcp-ssh-probe"
			# shellcheck disable=SC2086 # $SSH: the ssh command and its options
			run_bounded 60 "$W/ssh-run.log" $SSH "$_ss_h" \
				': >rdcp-ssh-probe; echo "ok $(pwd) $(ulimit -l) $(command -v rdcp)"; exit 3'
			[ "$SRC" = 3 ] || t_fail "ssh exit $SRC, want 3 (the command's)"
			_ss_out=$(grep '^ok ' "$W/ssh-run.log")
			echo "# $_ss_h: $_ss_out"
			[ -n "$_ss_out" ] || t_fail "no output"
			[ -f "$SSH_HOME/rdcp-ssh-probe" ] ||
				t_fail "a relative remote path did not land in $SSH_HOME"
			rm -f "$SSH_HOME/rdcp-ssh-probe"
			case "$_ss_out" in
			*" /"*rdcp) ;;
			*) t_fail "no rdcp in the remote PATH" ;;
			esac
			if [ -z "$HOST_MODE" ]; then
				case "$_ss_out" in
				*" unlimited /"*) ;;
				*) t_fail "remote ulimit -l is not unlimited" ;;
				esac
			fi
		fi
		t_log "$W/ssh-run.log"
		t_end
	done
	t_begin "ssh: a killed ssh ends the remote command reading its stdin, no session left"
	if [ -n "${RDCP_E2E_SSH_ERR:-}" ]; then
		t_fail "no sshd: $RDCP_E2E_SSH_ERR"
	else
		rm -f "$W/ssh-fifo" "$W/ssh-rpid"
		mkfifo "$W/ssh-fifo"
		# Read-write: never blocks, and ssh's stdin stays open.
		exec 7<>"$W/ssh-fifo"
		# (Not bg_run: an asynchronous command's stdin is /dev/null
		# unless redirected on the command itself.)
		# shellcheck disable=SC2086 # SSH: words
		$SSH "$ADDR" "echo \$\$ >$W/ssh-rpid; exec cat >/dev/null" \
			<"$W/ssh-fifo" >"$W/ssh-kill.log" 2>&1 &
		_ss_tx=$!
		track "$_ss_tx"
		if wait_until 60 "$_ss_tx" test -s "$W/ssh-rpid"; then
			_ss_r=$(cat "$W/ssh-rpid")
			alive "$_ss_r" || t_fail "remote command $_ss_r not running"
			kill -9 "$_ss_tx"
			wait "$_ss_tx" 2>/dev/null
			_ss_t=$(now)
			if wait_until 20 "" gone "$_ss_r"; then
				echo "# remote command ended $(since "$_ss_t")s after ssh was killed"
			else
				t_fail "remote command $_ss_r still running 20 s after ssh was killed"
				kill -9 "$_ss_r" 2>/dev/null
			fi
			_ss_d=$(sshd_pid)
			if [ -z "$_ss_d" ]; then
				t_fail "no sshd pid"
			elif ! wait_until 20 "" no_descendants "$_ss_d"; then
				t_fail "sshd sessions left: $(descendants "$_ss_d" | tr '\n' ' ')"
			fi
		else
			t_fail "the remote command did not start"
			kill -9 "$_ss_tx" 2>/dev/null
		fi
		exec 7>&-
	fi
	t_log "$W/ssh-kill.log"
	t_end
	ssh_rdcp
}

# ssh_rdcp: see s_ssh.
ssh_rdcp() {
	_sr_n=8388608
	mkdir -p src/sshr rx/sshr
	head -c "$_sr_n" /dev/urandom >src/sshr/f
	for _sr_k in push pull both lo addr; do
		t_begin "rdcp over ssh, $_sr_k: no key, no receiver running$([ -n "$HOST_MODE" ] || echo ', data over RDMA')"
		if [ -n "${RDCP_E2E_SSH_ERR:-}" ]; then
			t_fail "no sshd: $RDCP_E2E_SSH_ERR"
			t_end
			continue
		fi
		case $_sr_k in
		push) set -- src/sshr/f "$ADDR:$W/rx/sshr/push/" ;;
		pull) set -- "$ADDR:$W/src/sshr/f" "$W/rx/sshr/pull" ;;
		both) set -- "$ADDR:$W/src/sshr/f" "$ADDR:$W/rx/sshr/both/" ;;
		lo) set -- src/sshr/f "127.0.0.1:$W/rx/sshr/lo/" ;;
		addr) set -- --rdma-addr "$ADDR" src/sshr/f "127.0.0.1:$W/rx/sshr/addr/" ;;
		esac
		_sr_b=$(rxe_sent)
		# shellcheck disable=SC2086 # SSH: words
		run_bounded 120 "$W/tx-sshr-$_sr_k.log" rdcp -v -e "$SSH" "$@"
		_sr_a=$(rxe_sent)
		[ "$SRC" = 0 ] || t_fail "exit $SRC"
		case $_sr_k in
		pull) same src/sshr/f rx/sshr/pull ;;
		*) same src/sshr/f "rx/sshr/$_sr_k/f" ;;
		esac
		if [ -z "$HOST_MODE" ]; then
			grep -q "over rdma" "$W/tx-sshr-$_sr_k.log" ||
				t_fail "the summary does not say rdma"
			over_rdma "$_sr_k" "$_sr_b" "$_sr_a" "$_sr_n"
		fi
		_sr_d=$(sshd_pid)
		[ -z "$_sr_d" ] || wait_until 20 "" no_descendants "$_sr_d" ||
			t_fail "still running under sshd: $(descendants "$_sr_d" | tr '\n' ' ')"
		t_log "$W/tx-sshr-$_sr_k.log"
		t_end
	done
	rm -rf src/sshr rx/sshr
}

# rxe0 is removed mid-copy (`rdma link delete`): both ends of the session
# end within 30 s (--timeout 60: not by the silence bound) naming the
# device, the receiver's RDMA-only listener says the device went and
# exits 3, the removal itself does not hang, nothing is placed; then rxe0
# is re-created on the same netdev and a copy works again (over RDMA). RDMA
# only; the suite runs it last, after the RNR check.
s_devremove() {
	t_begin "rxe0 removed mid-copy: both sides end at once naming it, the removal does not hang"
	if [ -n "$HOST_MODE" ]; then
		echo "# skipped: RDMA only"
		t_end
		return
	fi
	mk64
	mkdir -p rx/dr
	# 'rdma link show' names links DEV/PORT: rxe0/1 ... netdev dummy0
	_dr_dev=$(rdma link show | sed -n 's|^link rxe0/[0-9]* .* netdev \([^ ]*\).*|\1|p' | head -n1)
	nextport
	if start_rx_or_fail "$W/rx-dr.log" --transport rdma --device rxe0 --timeout 60 --root "$W/rx/dr" --port "$P"; then
		rdcp --transport rdma --timeout 60 --port "$P" --window 2 --chunk-size 64K src/k64 "$ADDR::k64" >"$W/tx-dr.log" 2>&1 &
		TX=$!
		if wait_partfile rx/dr k64 "$TX"; then
			_dr_s=$(now)
			timeout -s KILL 60 rdma link delete rxe0
			_dr_rc=$?
			echo "# rdma link delete rxe0: exit $_dr_rc after $(since "$_dr_s")s"
			[ "$_dr_rc" = 0 ] || t_fail "rdma link delete rxe0 failed or hung (exit $_dr_rc)"
			wait_pid "$TX" 30
			echo "# sender: exit $WRC after ${WT}s: $(grep -E 'rxe0|went away' "$W/tx-dr.log" | head -n1)"
			case "$WRC" in
			10 | 11) ;;
			*) t_fail "sender exit $WRC, want 10 (device gone) or 11 (peer gone)" ;;
			esac
			grep -Eq 'rxe0|went away' "$W/tx-dr.log" || t_fail "sender did not say why"
			wait_pid "$RX" 30
			[ "$WRC" = 3 ] || t_fail "receiver exit $WRC, want 3 (its listener's device is gone)"
			grep -q "RDMA device rxe0 was removed" "$W/rx-dr.log" || t_fail "receiver did not say rxe0 was removed"
			[ ! -e rx/dr/k64 ] || t_fail "file placed under its final name"
		else
			t_fail "transfer never started"
		fi
		kill -9 "$TX" "$RX" 2>/dev/null
	fi
	if ! rdma link show | grep -q '^link rxe0/'; then
		rdma link add rxe0 type rxe netdev "$_dr_dev" || t_fail "cannot re-create rxe0 on $_dr_dev"
	fi
	DEV_RECREATED=1
	t_log "$W/tx-dr.log" "$W/rx-dr.log"
	t_end
	t_begin "rxe0 re-created: a copy works again"
	mkrand src/dr 300000
	nextport
	if start_rx_or_fail "$W/rx-dr2.log" --transport rdma --root "$W/rx/dr" --once --port "$P"; then
		run_bounded 120 "$W/tx-dr2.log" rdcp --transport rdma --port "$P" src/dr "$ADDR::dr"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC"
		stop_rx 20
		cmp -s src/dr rx/dr/dr || t_fail "dr differs"
	fi
	t_log "$W/tx-dr2.log" "$W/rx-dr2.log"
	t_end
	rm -rf rx/dr src/dr src/k64
}

# --retry with --transport auto when the RDMA path goes: rxe0 is removed
# (`rdma link delete`) while a push with --bwlimit is under way to a
# receiver listening for both (the default): the next attempt finds no
# RDMA route, says "rdma path to ADDR gone (...): going on over tcp" and
# resumes over TCP, the file lands byte identical, the first attempt's
# --json event names rdma and the summary tcp; once rxe0 is back a later
# run goes over RDMA again. With --transport rdma the same loss never
# goes over TCP: its attempts fail over RDMA until --retry runs out.
# rxe cannot take its device from a process (no disassociate): the removal
# ends only once every process that used rxe0 (librdmacm keeps its verbs
# context) has exited, so it runs in the background and the receiver is
# stopped before it is waited for. RDMA only; the suite runs it last (it
# re-creates rxe0).
AF_SIZE=$((6 * M))
# af_delete: `rdma link delete rxe0` in the background, DEL its pid.
af_delete() {
	rdma link delete rxe0 >"$W/af-del.log" 2>&1 &
	DEL=$!
	track "$DEL"
}
# af_relink DEV: once the removal DEL has ended (60 s; never waited on
# with wait: it may hang in the kernel), rxe0 back on netdev DEV, active.
af_relink() {
	if ! wait_until 60 "" sh -c "! kill -0 $DEL 2>/dev/null"; then
		t_fail "rdma link delete rxe0 still waiting after the processes ended"
		return 1
	fi
	if ! rdma link show | grep -q '^link rxe0/'; then
		rdma link add rxe0 type rxe netdev "$1" || t_fail "cannot re-create rxe0 on $1"
	fi
	wait_until 20 "" sh -c 'rdma link show rxe0/1 | grep -q ACTIVE' ||
		t_fail "rxe0 not active again"
	DEV_RECREATED=1
}
# af_attempt LOG N FIELD: FIELD of the Nth attempt event in LOG ("" for null).
af_attempt() {
	grep '"event":"attempt"' "$1" | sed -n "$2p" |
		sed -n "s/.*\"$3\":\"\([^\"]*\)\".*/\1/p"
}
# af_went_tcp LOG DIR: the copy src/af arrived whole in DIR after its
# first attempt went over RDMA and the last over TCP, saying so.
af_went_tcp() {
	same src/af "$2/af"
	no_temp "$2"
	grep -q "rdma path to $ADDR gone (.*): going on over tcp" "$1" ||
		t_fail "no line 'rdma path to $ADDR gone (...): going on over tcp'"
	[ "$(af_attempt "$1" 1 transport)" = rdma ] ||
		t_fail "the first attempt event does not say rdma"
	[ "$(jget "$1" summary transport)" = tcp ] ||
		t_fail "summary transport '$(jget "$1" summary transport)', want tcp"
}
# af_cut_copy TRANSPORT RETRIES LOG: src/af pushed to the receiver on $P
# (--transport TRANSPORT --retry RETRIES --json into LOG), rxe0 removed
# once its temporary is there; WRC is its exit. 1 when it never started.
af_cut_copy() {
	rdcp --transport "$1" --port "$P" --chunk-size 64K --bwlimit 1M --retry "$2" --retry-wait 0.5 \
		--json src/af "$ADDR::af" >"$3" 2>&1 &
	TX=$!
	track "$TX"
	if ! wait_partfile rx/af af "$TX"; then
		t_fail "transfer never started"
		return 1
	fi
	msleep 1500
	alive "$TX" || t_fail "the copy ended before rxe0 was removed"
	af_delete
	wait_pid "$TX" 120
	return 0
}
s_autofall() {
	if [ -n "$HOST_MODE" ]; then
		t_skip "--transport auto --retry: rxe0 removed mid-copy, goes on over TCP" "RDMA only"
		t_skip "rxe0 back: a later run goes over RDMA again" "RDMA only"
		t_skip "--transport rdma --retry: rxe0 removed mid-copy, never over TCP" "RDMA only"
		t_skip "over ssh, --transport auto --retry: rxe0 removed mid-copy, over TCP" "RDMA only"
		return
	fi
	mkdir -p src rx/af
	mkrand src/af "$AF_SIZE"
	_af_dev=$(rdma link show | sed -n 's|^link rxe0/[0-9]* .* netdev \([^ ]*\).*|\1|p' | head -n1)

	t_begin "--transport auto --retry: rxe0 removed mid-copy, goes on over TCP from where it stopped"
	DEL=
	nextport
	if start_rx_or_fail "$W/rx-af.log" --root "$W/rx/af" --port "$P"; then
		if af_cut_copy auto 3 "$W/tx-af.log"; then
			[ "$WRC" = 0 ] || t_fail "sender exit $WRC, want 0"
			af_went_tcp "$W/tx-af.log" rx/af
			grep -Eq '^1 files, .* over tcp.* retries [1-9]' "$W/tx-af.log" ||
				t_fail "no summary line '1 files ... over tcp ... retries N'"
			_sent=$(jlastdone "$W/tx-af.log" src/af sent)
			echo "# attempts: $(jattempts "$W/tx-af.log"); the last sent $_sent of $AF_SIZE bytes"
			[ -n "$_sent" ] && [ "$_sent" -lt "$AF_SIZE" ] ||
				t_fail "the TCP attempt sent '$_sent' bytes, want fewer than $AF_SIZE (resumed)"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	fi
	[ -z "$DEL" ] || af_relink "$_af_dev"
	t_log "$W/tx-af.log" "$W/rx-af.log" "$W/af-del.log"
	t_end

	t_begin "rxe0 back: a later run with --transport auto goes over RDMA again"
	mkrand src/af2 300000
	nextport
	if start_rx_or_fail "$W/rx-af2.log" --root "$W/rx/af" --port "$P"; then
		run_bounded 120 "$W/tx-af2.log" rdcp --port "$P" src/af2 "$ADDR::af2"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC"
		same src/af2 rx/af/af2
		grep -q " over rdma" "$W/tx-af2.log" || t_fail "not over rdma"
		! grep -qi "tcp" "$W/tx-af2.log" || t_fail "said TCP"
		term_rx
	fi
	t_log "$W/tx-af2.log" "$W/rx-af2.log"
	t_end

	t_begin "--transport rdma --retry: rxe0 removed mid-copy, never over TCP"
	rm -rf rx/af
	mkdir -p rx/af
	DEL=
	nextport
	if start_rx_or_fail "$W/rx-af3.log" --root "$W/rx/af" --port "$P"; then
		if af_cut_copy rdma 2 "$W/tx-af3.log"; then
			[ "$WRC" != 0 ] || t_fail "sender exit 0: it went on without RDMA"
			[ ! -e rx/af/af ] || t_fail "the file was placed"
			! grep -qi "over tcp\|using tcp" "$W/tx-af3.log" || t_fail "it went over TCP"
			[ "$(af_attempt "$W/tx-af3.log" 1 transport)" = rdma ] ||
				t_fail "the first attempt event does not say rdma"
			! grep '"event":"attempt"' "$W/tx-af3.log" | grep -q '"transport":"tcp"' ||
				t_fail "an attempt ran over tcp"
			echo "# exit $WRC; attempts: $(jattempts "$W/tx-af3.log")"
			[ "$(grep -c '"event":"attempt"' "$W/tx-af3.log")" = 3 ] ||
				t_fail "not 3 attempts (the lost RDMA path retried over RDMA)"
		fi
		kill -9 "$TX" 2>/dev/null
		term_rx
	fi
	[ -z "$DEL" ] || af_relink "$_af_dev"
	t_log "$W/tx-af3.log" "$W/rx-af3.log" "$W/af-del.log"
	t_end

	# Over ssh: each attempt starts the remote rdcp anew, whose bootstrap
	# line then offers no RDMA address.
	t_begin "over ssh, --transport auto --retry: rxe0 removed mid-copy, the next remote rdcp is reached over TCP"
	rm -rf rx/afs
	mkdir -p rx/afs
	DEL=
	# shellcheck disable=SC2086 # SSH: words
	rdcp -e "$SSH" --port-range 7900-7999 --chunk-size 64K --bwlimit 1M --retry 3 --retry-wait 0.5 \
		--json src/af "$ADDR:$W/rx/afs/" >"$W/tx-afs.log" 2>&1 &
	TX=$!
	track "$TX"
	if wait_partfile rx/afs af "$TX" 60; then
		msleep 1500
		alive "$TX" || t_fail "the copy ended before rxe0 was removed"
		af_delete
		wait_pid "$TX" 180
		[ "$WRC" = 0 ] || t_fail "exit $WRC, want 0"
		af_went_tcp "$W/tx-afs.log" rx/afs
		echo "# attempts: $(jattempts "$W/tx-afs.log")"
	else
		t_fail "transfer never started"
	fi
	kill -9 "$TX" 2>/dev/null
	[ -z "$DEL" ] || af_relink "$_af_dev"
	t_log "$W/tx-afs.log" "$W/af-del.log"
	t_end
	rm -rf rx/af rx/afs src/af src/af2
}

# 36. Two rails: rxe1 on a second netdev (dummy1, 10.77.3.1) beside rxe0;
#     a receiver listening on every address advertises both, and a copy
#     with --streams 2 and 4 puts lane k on rail k % 2: each device's
#     sent_pkts (hw_counters) moves by at least a quarter of the file's
#     packets, the file lands byte identical and both sides log 2 rails;
#     the same pulled back (the client's ring on both devices); the same
#     with --device rxe0,rxe1 on both sides, one rail with a receiver's
#     --device rxe0; then,
#     with rxe1 gone again, --streams 2 stays on one rail.
# rxe1_up: a second Soft-RoCE device, rxe1 on dummy1 (10.77.3.1/24), the
# stand-in for a second rail; rxe1_down removes it again.
rxe1_up() {
	ip link add dummy1 type dummy 2>/dev/null
	ip addr add 10.77.3.1/24 dev dummy1 2>/dev/null
	ip link set dummy1 up
	rdma link add rxe1 type rxe netdev dummy1 ||
		t_fail "cannot add rxe1 on dummy1"
	wait_until 10 "" sh -c 'rdma link show rxe1/1 | grep -q ACTIVE' ||
		t_fail "rxe1 never became active"
}
rxe1_down() {
	rdma link delete rxe1
	ip link del dummy1
}
rail_pkts() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts"; }
s_rails() {
	t_begin "--streams 2, 4 over two rails (rxe0, rxe1): both devices carry data"
	if [ -n "$HOST_MODE" ]; then
		echo "# skipped: RDMA only"
		t_end
		return
	fi
	mkdir -p src rx/rl
	mkrand src/rl16 $((16 * M))
	rxe1_up
	for n in 2 4; do
		nextport
		if ! start_rx_or_fail "$W/rx-rl$n.log" --root "$W/rx/rl" --port "$P"; then
			continue
		fi
		a0=$(rail_pkts rxe0) a1=$(rail_pkts rxe1)
		send "$W/tx-rl$n.log" -v --streams "$n" --chunk-size 256K \
			--port "$P" src/rl16 "$ADDR::rl16-$n"
		b0=$(rail_pkts rxe0) b1=$(rail_pkts rxe1)
		[ "$SRC" = 0 ] || t_fail "--streams $n: sender exit $SRC"
		same src/rl16 "rx/rl/rl16-$n"
		# 16 MiB in packets of at most 4 KiB: 4096 at least, a quarter
		# of those on each rail (either end of a lane counts on its own
		# device).
		echo "# --streams $n: rxe0 sent $((b0 - a0)) packets, rxe1 $((b1 - a1))"
		[ $((b0 - a0)) -ge 1024 ] || t_fail "--streams $n: rxe0 carried no share"
		[ $((b1 - a1)) -ge 1024 ] || t_fail "--streams $n: rxe1 carried no share"
		logged "$W/rx-rl$n.log" "$n streams from .* on 2 rails" ||
			t_fail "--streams $n: the receiver did not use 2 rails"
		logged "$W/tx-rl$n.log" "$n streams to .* on 2 rails" ||
			t_fail "--streams $n: the sender did not use 2 rails"
		# A pull: the client is the sink, its ring on both devices.
		a0=$(rail_pkts rxe0) a1=$(rail_pkts rxe1)
		send "$W/tx-rlp$n.log" -v --streams "$n" --chunk-size 256K \
			--port "$P" "$ADDR::rl16-$n" "$W/rx/rl/pulled-$n"
		b0=$(rail_pkts rxe0) b1=$(rail_pkts rxe1)
		[ "$SRC" = 0 ] || t_fail "pull --streams $n: exit $SRC"
		same src/rl16 "rx/rl/pulled-$n"
		echo "# pull --streams $n: rxe0 sent $((b0 - a0)) packets, rxe1 $((b1 - a1))"
		[ $((b0 - a0)) -ge 1024 ] && [ $((b1 - a1)) -ge 1024 ] ||
			t_fail "pull --streams $n: not both rails carried data"
		term_rx
		t_log "$W/tx-rl$n.log" "$W/rx-rl$n.log" "$W/tx-rlp$n.log"
	done
	# --device rxe0,rxe1 on both sides: the same two rails; a receiver
	# with --device rxe0 alone listens there and keeps one.
	nextport
	if start_rx "$W/rx-rld.log" --device rxe0,rxe1 --root "$W/rx/rl" --port "$P"; then
		a1=$(rail_pkts rxe1)
		send "$W/tx-rld.log" -v --device rxe0,rxe1 --streams 2 \
			--port "$P" src/rl16 "$ADDR::rl16-d"
		b1=$(rail_pkts rxe1)
		[ "$SRC" = 0 ] || t_fail "--device rxe0,rxe1: sender exit $SRC"
		same src/rl16 rx/rl/rl16-d
		echo "# --device rxe0,rxe1: rxe1 sent $((b1 - a1)) packets"
		[ $((b1 - a1)) -ge 1024 ] || t_fail "--device rxe0,rxe1: rxe1 carried no share"
		logged "$W/rx-rld.log" "2 streams from .* on 2 rails" ||
			t_fail "--device rxe0,rxe1: the receiver did not use 2 rails"
		term_rx
	else
		t_fail "receiver --device rxe0,rxe1 did not start listening"
	fi
	nextport
	if start_rx "$W/rx-rl0.log" --device rxe0 --root "$W/rx/rl" --port "$P"; then
		send "$W/tx-rl0.log" -v --streams 2 --port "$P" src/rl16 "$ADDR::rl16-0"
		[ "$SRC" = 0 ] || t_fail "--device rxe0: sender exit $SRC"
		same src/rl16 rx/rl/rl16-0
		! logged "$W/rx-rl0.log" "rails" ||
			t_fail "--device rxe0: more than one rail"
		term_rx
	else
		t_fail "receiver --device rxe0 did not start listening"
	fi
	t_log "$W/tx-rld.log" "$W/rx-rld.log" "$W/tx-rl0.log" "$W/rx-rl0.log"
	rxe1_down
	nextport
	if start_rx_or_fail "$W/rx-rl1.log" --root "$W/rx/rl" --port "$P"; then
		send "$W/tx-rl1.log" -v --streams 2 --port "$P" src/rl16 "$ADDR::rl16-1"
		[ "$SRC" = 0 ] || t_fail "one rail: sender exit $SRC"
		same src/rl16 rx/rl/rl16-1
		! logged "$W/rx-rl1.log" "rails" ||
			t_fail "rails without rxe1"
		term_rx
	fi
	t_log "$W/tx-rl1.log" "$W/rx-rl1.log"
	t_end
	rm -rf rx/rl src/rl16
}

# 37. Rails that cannot make things worse (rxe1 on dummy1 as in 36):
#     a receiver whose rxe1 reads 40 Gb/s (test hook RDCP_TEST_RAIL_GBPS)
#     beside rxe0 leaves it out with one info line, and --streams 2 runs
#     on one rail, rxe1 idle; then rxe1's address made unreachable for
#     the client (an ip rule ahead of the local table, busybox syntax): the receiver
#     offers 2 rails, the client drops rail 1 with one warning, its lanes
#     join rail 0, and the copies (--streams 2 and 4, pushed and pulled)
#     land identical with rxe1 idle. Before, the second failed the session at the join.
s_railsafe() {
	t_begin "rails: a faster rxe1 is left out, an unreachable one dropped"
	if [ -n "$HOST_MODE" ]; then
		echo "# skipped: RDMA only"
		t_end
		return
	fi
	mkdir -p src rx/rs
	mkrand src/rs16 $((16 * M))
	rxe1_up
	nextport
	if rx_spawn_or_fail "$W/rx-rs1.log" env RDCP_TEST_RAIL_GBPS=rxe1=40 \
		rdcp-hooks --listen -v --root "$W/rx/rs" --port "$P"; then
		a1=$(rail_pkts rxe1)
		send "$W/tx-rs1.log" -v --streams 2 --chunk-size 256K \
			--port "$P" src/rs16 "$ADDR::rs16-rate"
		b1=$(rail_pkts rxe1)
		[ "$SRC" = 0 ] || t_fail "rxe1 at another rate: sender exit $SRC"
		same src/rs16 rx/rs/rs16-rate
		echo "# rxe1 at another rate: rxe1 sent $((b1 - a1)) packets"
		[ $((b1 - a1)) -lt 64 ] || t_fail "rxe1 at another rate carried data"
		logged "$W/rx-rs1.log" "device rxe1 left out of the rails of .*: its link is 40 Gb/s" ||
			t_fail "no line saying why rxe1 was left out"
		! logged "$W/rx-rs1.log" "on 2 rails" ||
			t_fail "rxe1 at another rate offered as a rail"
		term_rx
	fi
	t_log "$W/tx-rs1.log" "$W/rx-rs1.log"
	# rxe1's address unreachable: a rule ahead of the local table.
	{ ip rule add pref 100 lookup local &&
		ip rule del pref 0 &&
		ip rule add pref 10 to 10.77.3.1/32 type unreachable; } >"$W/iprule.log" 2>&1 ||
		t_fail "cannot block 10.77.3.1 with an ip rule: $(tr '\n' ' ' <"$W/iprule.log")"
	for n in 2 4; do
		nextport
		start_rx_or_fail "$W/rx-rs$n.log" --root "$W/rx/rs" --port "$P" || continue
		a1=$(rail_pkts rxe1)
		send "$W/tx-rsu$n.log" -v --streams "$n" --chunk-size 256K \
			--port "$P" src/rs16 "$ADDR::rs16-u$n"
		b1=$(rail_pkts rxe1)
		[ "$SRC" = 0 ] || t_fail "--streams $n, rail 1 unreachable: sender exit $SRC"
		same src/rs16 "rx/rs/rs16-u$n"
		echo "# --streams $n, rail 1 unreachable: rxe1 sent $((b1 - a1)) packets"
		[ $((b1 - a1)) -lt 64 ] || t_fail "--streams $n: the unreachable rail carried data"
		logged "$W/rx-rs$n.log" "$n streams from .* on 2 rails" ||
			t_fail "--streams $n: the receiver did not offer 2 rails"
		grep 'rail 1 (10.77.3.1)' "$W/tx-rsu$n.log" | sed 's/^/# /'
		[ "$(grep -c 'warning: rail 1 (10.77.3.1) of .* dropped' "$W/tx-rsu$n.log")" = 1 ] ||
			t_fail "--streams $n: not one warning that rail 1 was dropped"
		logged "$W/tx-rsu$n.log" "$n streams to .* on 1 of 2 rails (1 dropped)" ||
			t_fail "--streams $n: the sender did not say it ran on 1 rail"
		# A pull: the client's ring, with no lane on rail 1.
		a1=$(rail_pkts rxe1)
		send "$W/tx-rsp$n.log" -v --streams "$n" --chunk-size 256K \
			--port "$P" "$ADDR::rs16-u$n" "$W/rx/rs/pulled-u$n"
		b1=$(rail_pkts rxe1)
		[ "$SRC" = 0 ] || t_fail "pull --streams $n, rail 1 unreachable: exit $SRC"
		same src/rs16 "rx/rs/pulled-u$n"
		[ $((b1 - a1)) -lt 64 ] || t_fail "pull --streams $n: the unreachable rail carried data"
		logged "$W/tx-rsp$n.log" "$n streams to .* on 1 of 2 rails (1 dropped)" ||
			t_fail "pull --streams $n: the client did not say it ran on 1 rail"
		term_rx
		t_log "$W/tx-rsu$n.log" "$W/rx-rs$n.log" "$W/tx-rsp$n.log"
	done
	ip rule del pref 10
	ip rule add pref 0 lookup local
	ip rule del pref 100
	rxe1_down
	t_end
	rm -rf rx/rs src/rs16
}

# 38. --split (issue #25): one file of 24 MiB and an odd tail pushed as
#     3 byte ranges by 3 sessions of one rdcp: byte identical, one
#     file_start and one file_done (the whole file's size and CRC32, the
#     same digest as a copy in one session), the summary's sessions 3, the
#     receiver's 3 session lines; auto over one rail (TCP: none) stays one
#     session; a receiver with --max-sessions 1 gets the file whole from one
#     session, after one warning; a session cut mid-way (the receiver's test
#     hook RDCP_TEST_DROP_AT_WRITE) fails the copy with exit 11 and leaves
#     no file under its name, and a re-run with --resume sends only the
#     ranges not verified; --retry gets past the same cut by itself; an
#     explicit --split with --checksum sha256 is a usage error (exit 2).
sp_sessions() { # LOG: the summary's sessions
	jget "$1" summary sessions
}
sp_rx_data() { # LOG N: the receiver logged N sessions that pushed data
	[ "$(grep -c 'session peer=.* op=push .* bytes=[1-9]' "$1")" = "$2" ]
}
s_split() {
	SZ=$((24 * M + 12345))
	mkdir -p src rx/sp
	mkrand src/sp24 "$SZ"
	nextport
	t_begin "--split 3: one file in 3 ranges over 3 sessions, one result"
	if start_rx_or_fail "$W/rx-sp.log" --root "$W/rx/sp" --port "$P"; then
		send "$W/tx-sp3.log" --json --port "$P" --split 3 --split-size 1M \
			--chunk-size 256K src/sp24 "$ADDR::sp24"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/sp24 rx/sp/sp24
		no_temp rx/sp
		[ "$(grep -c '"event":"file_start"' "$W/tx-sp3.log")" = 1 ] ||
			t_fail "not one file_start event"
		[ "$(grep -c '"event":"file_done"' "$W/tx-sp3.log")" = 1 ] ||
			t_fail "not one file_done event"
		! logged "$W/tx-sp3.log" range_done || t_fail "range events shown"
		[ "$(jdone "$W/tx-sp3.log" src/sp24 status)" = ok ] ||
			t_fail "file_done status '$(jdone "$W/tx-sp3.log" src/sp24 status)'"
		[ "$(jdone "$W/tx-sp3.log" src/sp24 bytes)" = "$SZ" ] ||
			t_fail "file_done bytes $(jdone "$W/tx-sp3.log" src/sp24 bytes), want $SZ"
		[ "$(sp_sessions "$W/tx-sp3.log")" = 3 ] ||
			t_fail "summary sessions '$(sp_sessions "$W/tx-sp3.log")', want 3"
		[ "$(jget "$W/tx-sp3.log" summary files_ok)" = 1 ] ||
			t_fail "summary files_ok $(jget "$W/tx-sp3.log" summary files_ok), want 1"
		wait_until 10 "" sp_rx_data "$W/rx-sp.log" 3 ||
			t_fail "the receiver did not log 3 sessions with data"
		# The same file in one session: the same digest.
		send "$W/tx-sp1.log" --json --port "$P" --split 0 --split-size 1M \
			--chunk-size 256K src/sp24 "$ADDR::sp24-one"
		[ "$SRC" = 0 ] || t_fail "--split 0: exit $SRC"
		same src/sp24 rx/sp/sp24-one
		[ "$(sp_sessions "$W/tx-sp1.log")" = 1 ] || t_fail "--split 0: not one session"
		D3=$(jdone "$W/tx-sp3.log" src/sp24 digest)
		D1=$(jdone "$W/tx-sp1.log" src/sp24 digest)
		[ -n "$D3" ] && [ "$D3" = "$D1" ] ||
			t_fail "split digest '$D3', one session's '$D1'"
		t_log "$W/tx-sp3.log" "$W/tx-sp1.log" "$W/rx-sp.log"
		t_end
		t_begin "--split auto over one rail: one session, as without it"
		send "$W/tx-spa.log" --json -v --port "$P" --split-size 1M \
			src/sp24 "$ADDR::sp24-auto"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/sp24 rx/sp/sp24-auto
		[ "$(sp_sessions "$W/tx-spa.log")" = 1 ] ||
			t_fail "auto: sessions '$(sp_sessions "$W/tx-spa.log")', want 1"
		! logged "$W/tx-spa.log" "splitting" || t_fail "auto split over one rail"
		t_log "$W/tx-spa.log"
		t_end
		t_begin "--split 2 with --checksum sha256: a usage error"
		send "$W/tx-sps.log" --port "$P" --split 2 --checksum sha256 \
			src/sp24 "$ADDR::sp24-sha"
		[ "$SRC" = 2 ] || t_fail "exit $SRC, want 2"
		logged "$W/tx-sps.log" "need --checksum crc32" || t_fail "no reason given"
		[ ! -e rx/sp/sp24-sha ] || t_fail "copied anyway"
		t_log "$W/tx-sps.log"
		t_end
		term_rx
	else
		t_end
	fi
	nextport
	t_begin "--split 3 to a receiver of one session: the file goes whole"
	if start_rx_or_fail "$W/rx-sp1.log" --root "$W/rx/sp" --port "$P" --max-sessions 1; then
		send "$W/tx-spm.log" --json --port "$P" --split 3 --split-size 1M \
			--chunk-size 256K src/sp24 "$ADDR::sp24-max1"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/sp24 rx/sp/sp24-max1
		no_temp rx/sp
		[ "$(sp_sessions "$W/tx-spm.log")" = 1 ] ||
			t_fail "sessions '$(sp_sessions "$W/tx-spm.log")', want 1"
		[ "$(grep -c "warning: 'src/sp24' went in one session" "$W/tx-spm.log")" = 1 ] ||
			t_fail "not one warning that the split fell back"
		term_rx
	fi
	t_log "$W/tx-spm.log" "$W/rx-sp1.log"
	t_end
	# 24 MiB in chunks of 256 KiB: 97 writes; the 40th cuts its session.
	nextport
	t_begin "--split 3 with a session cut: exit 11, no file, --resume sends the rest"
	if rx_spawn_or_fail "$W/rx-spd.log" env RDCP_TEST_DROP_AT_WRITE=40 \
		rdcp-hooks --listen -v --root "$W/rx/sp" --port "$P"; then
		send "$W/tx-spd1.log" --json --port "$P" --split 3 --split-size 1M \
			--chunk-size 256K --resume src/sp24 "$ADDR::sp24-cut"
		[ "$SRC" = 11 ] || t_fail "cut: exit $SRC, want 11"
		[ ! -e rx/sp/sp24-cut ] || t_fail "a partial file under its final name"
		[ -e rx/sp/.sp24-cut.rdcp-part ] && [ -e rx/sp/.sp24-cut.rdcp-ranges ] ||
			t_fail "no temporary and state kept for --resume"
		[ "$(grep -c '"event":"error"' "$W/tx-spd1.log")" = 1 ] ||
			t_fail "not one error event"
		send "$W/tx-spd2.log" --json --port "$P" --split 3 --split-size 1M \
			--chunk-size 256K --resume src/sp24 "$ADDR::sp24-cut"
		[ "$SRC" = 0 ] || t_fail "re-run: exit $SRC, want 0"
		same src/sp24 rx/sp/sp24-cut
		no_temp rx/sp
		SENT=$(jdone "$W/tx-spd2.log" src/sp24 sent)
		echo "# re-run sent $SENT of $SZ bytes"
		[ -n "$SENT" ] && [ "$SENT" -lt $((SZ * 3 / 4)) ] ||
			t_fail "the re-run sent '$SENT' bytes: verified ranges again"
		term_rx
	fi
	t_log "$W/tx-spd1.log" "$W/tx-spd2.log" "$W/rx-spd.log"
	t_end
	nextport
	t_begin "--split 3 --retry 2: a cut session, the copy completes by itself"
	if rx_spawn_or_fail "$W/rx-spr.log" env RDCP_TEST_DROP_AT_WRITE=40 \
		rdcp-hooks --listen -v --root "$W/rx/sp" --port "$P"; then
		send "$W/tx-spr.log" --json --port "$P" --split 3 --split-size 1M \
			--chunk-size 256K --retry 2 --retry-wait 0.2 src/sp24 "$ADDR::sp24-retry"
		[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
		same src/sp24 rx/sp/sp24-retry
		no_temp rx/sp
		[ "$(jattempts "$W/tx-spr.log")" = "peer-lost/11/true " ] ||
			t_fail "attempts '$(jattempts "$W/tx-spr.log")', want one lost peer"
		[ "$(jget "$W/tx-spr.log" summary retries)" = 1 ] || t_fail "retries not 1"
		term_rx
	fi
	t_log "$W/tx-spr.log" "$W/rx-spr.log"
	t_end
	rm -rf rx/sp src/sp24
}

# 39. --split auto over two rails (rxe1 on dummy1, as in 36): a file of at
#     least --split-size goes in 2 ranges, one session per rail the first
#     session reached, byte identical, the receiver logging 2 sessions;
#     RDMA only.
s_splitrails() {
	t_begin "--split auto over two rails: 2 sessions"
	if [ -n "$HOST_MODE" ]; then
		echo "# skipped: RDMA only"
		t_end
		return
	fi
	mkdir -p src rx/spr
	mkrand src/spr16 $((16 * M + 777))
	rxe1_up
	nextport
	if start_rx_or_fail "$W/rx-spr2.log" --root "$W/rx/spr" --port "$P"; then
		send "$W/tx-spr2.log" --json -v --streams 2 --split-size 4M \
			--port "$P" src/spr16 "$ADDR::spr16"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/spr16 rx/spr/spr16
		no_temp rx/spr
		[ "$(sp_sessions "$W/tx-spr2.log")" = 2 ] ||
			t_fail "sessions '$(sp_sessions "$W/tx-spr2.log")', want 2"
		logged "$W/tx-spr2.log" "into 2 ranges, one session each (one per rail)" ||
			t_fail "the sender did not say it split per rail"
		wait_until 10 "" sp_rx_data "$W/rx-spr2.log" 2 ||
			t_fail "the receiver did not log 2 sessions with data"
		term_rx
	fi
	t_log "$W/tx-spr2.log" "$W/rx-spr2.log"
	rxe1_down
	t_end
	rm -rf rx/spr src/spr16
}

# ---------------------------------------------------------------- main

# A shared key for every rdcp here (builds with authentication).
# "lqpn:sq-psn" of the RC QPs in RTS of process PID, one a line (rdma(8)).
qp_psns() {
	rdma res show qp 2>/dev/null | awk -v p="$1" '{
		q = ""; s = ""; pid = ""; st = ""
		for (i = 1; i < NF; i++) {
			if ($i == "lqpn") q = $(i + 1)
			if ($i == "sq-psn") s = $(i + 1)
			if ($i == "pid") pid = $(i + 1)
			if ($i == "state") st = $(i + 1)
		}
		if (pid == p && q != "" && st == "RTS") print q ":" s }'
}

qp_ready() { [ "$(qp_psns "$1" | grep -c :)" -ge "$2" ]; } # PID N

# How many QPs of B (qp_psns) moved on since A (same QP, other PSN).
qp_moved() {
	printf '%s\n' "$2" | awk -F: -v a="$1" '
		BEGIN { n = split(a, l, "\n"); for (i = 1; i <= n; i++) {
			split(l[i], f, ":"); old[f[1]] = f[2] } }
		$1 in old && old[$1] != $2 { m++ } END { print m + 0 }'
}

# 34. --streams 1, 2, 4: a 24 MiB file (paced, so that it is still being
#     written when rxe is asked) and a tree, each over N lanes, byte
#     identical; the receiver logs N streams; over RDMA, once the sender
#     has N RC QPs in RTS and the handshake is over, all N advanced their
#     send PSN within 2 s (rdma res show qp): every lane carried data.
s_streams() {
	t_begin "--streams 1, 2, 4: a file and a tree over N lanes each"
	mkdir -p src rx/st
	mkrand src/st48 $((24 * M))
	rm -rf src/sttree
	mktree src/sttree
	for n in 1 2 4; do
		nextport
		if ! start_rx_or_fail "$W/rx-st$n.log" --root "$W/rx/st" --port "$P"; then
			continue
		fi
		bg_run "$W/tx-st$n.log" rdcp -v --streams "$n" --bwlimit 3M \
			--chunk-size 256K --port "$P" src/st48 "$ADDR::st48-$n"
		if [ -z "$HOST_MODE" ]; then
			wait_until 30 "$TX" qp_ready "$TX" "$n" ||
				t_fail "--streams $n: the sender never had $n QPs"
			msleep 1500
			a=$(qp_psns "$TX")
			msleep 2000
			b=$(qp_psns "$TX")
			moved=$(qp_moved "$a" "$b")
			echo "# --streams $n: $moved of $(printf '%s\n' "$b" | grep -c :) sender QPs moved data"
			[ "$moved" -ge "$n" ] ||
				t_fail "--streams $n: only $moved QPs of the sender moved data"
		fi
		wait_ok "$TX" 120 "sender --streams $n"
		same src/st48 "rx/st/st48-$n"
		if [ "$n" -gt 1 ]; then
			logged "$W/rx-st$n.log" "$n streams from" ||
				t_fail "receiver did not run $n streams"
		fi
		send "$W/tx-stt$n.log" -r -p --streams "$n" --port "$P" src/sttree \
			"$ADDR::tree-$n/"
		[ "$SRC" = 0 ] || t_fail "tree --streams $n: sender exit $SRC"
		tree_same src/sttree "rx/st/tree-$n/sttree" p
		send "$W/tx-stp$n.log" -r --streams "$n" --port "$P" \
			"$ADDR::tree-$n/sttree" "$W/rx/st/pulled-$n"
		[ "$SRC" = 0 ] || t_fail "pull --streams $n: sender exit $SRC"
		tree_same src/sttree "rx/st/pulled-$n"
		term_rx
		t_log "$W/tx-st$n.log" "$W/rx-st$n.log" "$W/tx-stt$n.log" \
			"$W/tx-stp$n.log"
	done
	t_end
	# The default: over TCP one lane; over RDMA 2 (4 at >= 100 Gb/s).
	t_begin "--streams default: TCP 1, RDMA 2 (4 on a port of 100 Gb/s)"
	nextport
	if start_rx_or_fail "$W/rx-std.log" --root "$W/rx/st" --port "$P"; then
		send "$W/tx-std.log" -r --port "$P" src/sttree "$ADDR::dflt/"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC"
		tree_same src/sttree rx/st/dflt/sttree
		term_rx
		if [ -n "$HOST_MODE" ]; then
			! logged "$W/rx-std.log" "streams from" ||
				t_fail "more than one lane over TCP by default"
		else
			logged "$W/rx-std.log" "[24] streams from" ||
				t_fail "not 2 (or 4) lanes over RDMA by default"
		fi
	fi
	t_log "$W/tx-std.log" "$W/rx-std.log"
	t_end
	rm -rf rx/st src/st48 src/sttree
}

# 34b. A lane that joins late (test hook RDCP_TEST_LANE_JOIN_DELAY=K:MS on
#     the client: lane K waits 5 s, past the receiver's join deadline, its
#     --connect-timeout of 3 s): the receiver goes on with lanes 0..K-1 at
#     its deadline and refuses the late join, the client goes on with them
#     too, one warning each side per session; a push (lane 2 late: 2 lanes)
#     and a pull (lane 1 late: lane 0 alone) are byte identical, exit 0.
s_streamslate() {
	t_begin "--streams 4 with a lane that joins late: the copy goes on with the lanes that joined"
	mkdir -p src rx/sl
	mkrand src/sl8 $((8 * M + 7))
	nextport
	if start_rx_or_fail "$W/rx-sl.log" --root "$W/rx/sl" --port "$P" --connect-timeout 3; then
		run_bounded 120 "$W/tx-sl.log" env RDCP_TEST_LANE_JOIN_DELAY=2:5000 \
			rdcp-hooks -v --streams 4 --chunk-size 256K --port "$P" src/sl8 "$ADDR::sl8"
		[ "$SRC" = 0 ] || t_fail "push, lane 2 late: sender exit $SRC"
		same src/sl8 rx/sl/sl8
		[ "$(grep -c 'did not join' "$W/tx-sl.log")" = 1 ] ||
			t_fail "push: not one line from the sender about the late lane"
		logged "$W/tx-sl.log" "warning: lane 2 of 4 to .* did not join (.*): going on with 2 streams" ||
			t_fail "push: the sender did not warn that it goes on with 2 streams"
		logged "$W/rx-sl.log" "warning: .*: lane 2 of 4 did not join (not in time): going on with 2 streams" ||
			t_fail "push: the receiver did not warn that it goes on with 2 streams"
		run_bounded 120 "$W/tx-slp.log" env RDCP_TEST_LANE_JOIN_DELAY=1:5000 \
			rdcp-hooks -v --streams 4 --chunk-size 256K --port "$P" "$ADDR::sl8" "$W/rx/sl/pulled"
		[ "$SRC" = 0 ] || t_fail "pull, lane 1 late: exit $SRC"
		same src/sl8 rx/sl/pulled
		[ "$(grep -c 'did not join' "$W/tx-slp.log")" = 1 ] ||
			t_fail "pull: not one line from the client about the late lane"
		logged "$W/tx-slp.log" "warning: lane 1 of 4 to .* did not join (.*): going on with 1 stream$" ||
			t_fail "pull: the client did not warn that it goes on with lane 0"
		[ "$(grep -c 'did not join' "$W/rx-sl.log")" = 2 ] ||
			t_fail "not one line from the receiver per session about its late lane"
		term_rx
	fi
	t_log "$W/tx-sl.log" "$W/tx-slp.log" "$W/rx-sl.log"
	t_end
	rm -rf rx/sl src/sl8
}

# Named clients and modules (--clients, --modules, rdcp-modules.conf(5)):
# push and pull in a module, a read-only module pushed to, a client reading
# a module it has no right to, unknown and forbidden modules alike to the
# client, a name claimed with another client's key, and a key removed
# while its session runs: that session finishes, the next is refused.
# The window (issue #25): a receiver without --window grants a client's
# larger one as far as its memory budget goes (it used to clamp it to its
# own default, 64); one with --window still clamps to it; a client without
# --window gets 64 slots over TCP (no link rate). The receiver's -v names
# the ring it allocated: slots x 64 KiB (+ a page of headers).
s_window() {
	mkdir -p src rx/win
	mkrand src/win3 $((3 * M))
	nextport
	t_begin "window: a default receiver grants --window 100 (6.26 MiB ring)"
	if start_rx_or_fail "$W/rx-win.log" --root "$W/rx/win" --port "$P" \
		--chunk-size 64K; then
		send "$W/tx-win100.log" --chunk-size 64K --window 100 --port "$P" \
			src/win3 "$ADDR::w100"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/win3 rx/win/w100
		logged "$W/rx-win.log" "ring: 6.26 MiB" ||
			t_fail "the receiver did not grant 100 slots of 64 KiB"
		t_log "$W/tx-win100.log" "$W/rx-win.log"
		t_end
		t_begin "window: a client leaving it to the link"
		send "$W/tx-windef.log" --chunk-size 64K --port "$P" src/win3 \
			"$ADDR::wdef"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/win3 rx/win/wdef
		# over TCP no link rate: 64 slots; over RDMA at least that
		if [ -n "$HOST_MODE" ]; then
			[ "$(grep -c 'ring: 4.00 MiB' "$W/rx-win.log")" = 1 ] ||
				t_fail "over TCP the default window is not 64 slots"
		else
			grep 'ring: ' "$W/rx-win.log" | tail -1 | sed 's/^/# /'
		fi
		t_log "$W/tx-windef.log" "$W/rx-win.log"
		t_end
		term_rx
	fi
	nextport
	t_begin "window: a receiver's --window 32 is the most a client gets"
	if start_rx_or_fail "$W/rx-win32.log" --root "$W/rx/win" --port "$P" \
		--chunk-size 64K --window 32; then
		send "$W/tx-win32.log" --chunk-size 64K --window 100 --port "$P" \
			src/win3 "$ADDR::w32"
		[ "$SRC" = 0 ] || t_fail "sender exit $SRC, want 0"
		same src/win3 rx/win/w32
		logged "$W/rx-win32.log" "ring: 2.00 MiB" ||
			t_fail "the receiver did not clamp to 32 slots"
		term_rx
	fi
	t_log "$W/tx-win32.log" "$W/rx-win32.log"
	t_end
	rm -rf src/win3 rx/win
}

s_modules() {
	if [ -z "$AUTH" ]; then
		t_skip "modules" "this rdcp has no --keygen"
		return
	fi
	MD=$W/mod # not M: lib.sh's M is a MiB
	rm -rf "$MD"
	mkdir -p "$MD/clients" "$MD/keys" "$MD/scratch" "$MD/archive" "$MD/secret" src/mo
	for c in alice bob; do
		rdcp --keygen --name "$c" "$MD/keys/$c.key" >/dev/null 2>&1
		cp "$MD/keys/$c.key" "$MD/clients/$c.key"
		chmod 600 "$MD/clients/$c.key"
	done
	mkrand src/mo/f1 300000
	mkrand src/mo/big 8388608
	mkrand "$MD/archive/a1" 5000
	mkrand "$MD/secret/s1" 5000
	printf '# the e2e scenario modules\n[scratch]\npath = %s\nread = alice, bob\nwrite = alice\n[archive]\npath = %s\nread = bob\n[secret]\npath = %s\nread = alice\n' \
		"$MD/scratch" "$MD/archive" "$MD/secret" >"$MD/modules.conf"
	nextport
	if ! start_rx "$W/rx-mod.log" --port "$P" --clients "$MD/clients" --modules "$MD/modules.conf"; then
		rx_not_started "modules" "$W/rx-mod.log"
		return
	fi
	MRX=$RX

	t_begin "modules: alice pushes into scratch, bob pulls it back"
	send "$W/tx-mod1.log" --key-file "$MD/keys/alice.key" --port "$P" src/mo/f1 "$ADDR::scratch/run1/"
	[ "$SRC" = 0 ] || t_fail "push exit $SRC, want 0"
	same src/mo/f1 "$MD/scratch/run1/f1"
	send "$W/tx-mod2.log" --key-file "$MD/keys/bob.key" --port "$P" "$ADDR::scratch/run1/f1" src/mo/back
	[ "$SRC" = 0 ] || t_fail "pull exit $SRC, want 0"
	same src/mo/f1 src/mo/back
	logged "$W/rx-mod.log" "client=alice module=scratch op=push files=1 failed=0 .* result=ok" ||
		t_fail "no session line for alice's push"
	logged "$W/rx-mod.log" "client=bob module=scratch op=pull files=1 failed=0 .* result=ok" ||
		t_fail "no session line for bob's pull"
	t_log "$W/tx-mod1.log" "$W/tx-mod2.log" "$W/rx-mod.log"
	t_end

	t_begin "modules: a push into a module the client may only read is refused"
	send "$W/tx-mod3.log" --key-file "$MD/keys/bob.key" --port "$P" src/mo/f1 "$ADDR::archive/"
	[ "$SRC" = 4 ] || t_fail "exit $SRC, want 4"
	logged "$W/tx-mod3.log" "module archive: client bob may not write" || t_fail "the client was not told the rule"
	logged "$W/rx-mod.log" "module archive: client bob may not write" || t_fail "the log does not say the rule"
	[ ! -e "$MD/archive/f1" ] || t_fail "written into archive"
	t_log "$W/tx-mod3.log"
	t_end

	t_begin "modules: another's module and an unknown one look the same"
	send "$W/tx-mod4.log" --key-file "$MD/keys/alice.key" --port "$P" "$ADDR::archive/a1" src/mo/a1
	R1=$SRC
	send "$W/tx-mod5.log" --key-file "$MD/keys/alice.key" --port "$P" "$ADDR::nosuch/a1" src/mo/a1
	[ "$R1" = 4 ] && [ "$SRC" = 4 ] || t_fail "exits $R1 and $SRC, want 4 and 4"
	[ ! -e src/mo/a1 ] || t_fail "alice read archive"
	E1=$(grep -o "unknown module.*" "$W/tx-mod4.log" | head -1 | sed 's/archive/X/')
	E2=$(grep -o "unknown module.*" "$W/tx-mod5.log" | head -1 | sed 's/nosuch/X/')
	[ -n "$E1" ] && [ "$E1" = "$E2" ] || t_fail "told apart: '$E1' vs '$E2'"
	! grep -q "$MD" "$W/tx-mod4.log" "$W/tx-mod5.log" || t_fail "a module's path reached the client"
	send "$W/tx-mod6.log" --key-file "$MD/keys/bob.key" --port "$P" "$ADDR::secret/s1" src/mo/s1
	[ "$SRC" = 4 ] || t_fail "bob reading alice's module: exit $SRC, want 4"
	[ ! -e src/mo/s1 ] || t_fail "bob read secret"
	t_log "$W/tx-mod4.log" "$W/tx-mod5.log" "$W/tx-mod6.log"
	t_end

	t_begin "modules: bob's name with alice's key fails authentication"
	sed 's/^name alice$/name bob/' "$MD/keys/alice.key" >"$MD/keys/forged.key"
	chmod 600 "$MD/keys/forged.key"
	send "$W/tx-mod7.log" --key-file "$MD/keys/forged.key" --port "$P" src/mo/f1 "$ADDR::scratch/forged/"
	[ "$SRC" = 4 ] || t_fail "exit $SRC, want 4"
	[ ! -e "$MD/scratch/forged" ] || t_fail "written as bob"
	t_log "$W/tx-mod7.log"
	t_end

	t_begin "modules: a modules file that does not parse keeps the old one"
	cp "$MD/modules.conf" "$MD/modules.good"
	printf '[scratch]\nsize-limit = 1T\n' >"$MD/modules.conf"
	kill -HUP "$MRX"
	wait_until 10 "" logged "$W/rx-mod.log" "keeping the configuration in use" ||
		t_fail "no refusal of the bad file logged"
	logged "$W/rx-mod.log" "modules.conf:2: unknown setting 'size-limit'" || t_fail "the problem's line not logged"
	send "$W/tx-mod10.log" --key-file "$MD/keys/bob.key" --port "$P" "$ADDR::archive/a1" src/mo/a1b
	[ "$SRC" = 0 ] || t_fail "bob's pull under the old modules: exit $SRC, want 0"
	t_log "$W/tx-mod10.log" "$W/rx-mod.log"
	t_end
	cp "$MD/modules.good" "$MD/modules.conf"
	kill -HUP "$MRX"
	wait_until 10 "" logged "$W/rx-mod.log" "reload: 2 named clients" ||
		t_fail "the good modules file not read again"

	t_begin "modules: SIGHUP revokes a key: its running session finishes, the next is refused"
	bg_send "$W/tx-mod8.log" --key-file "$MD/keys/alice.key" --port "$P" --bwlimit 2M src/mo/big "$ADDR::scratch/slow/"
	SLOW=$TX
	# authenticated, data flowing: its temporary is there
	wait_partfile "$MD/scratch/slow" big "$SLOW" 30 ||
		t_fail "the slow session did not start"
	rm -f "$MD/clients/alice.key"
	kill -HUP "$MRX"
	wait_until 10 "" logged "$W/rx-mod.log" "reload: 1 named client" ||
		t_fail "no reload logged"
	alive "$SLOW" || t_fail "the running session had ended before the reload (make it slower)"
	wait_pid "$SLOW" 120
	[ "$WRC" = 0 ] || t_fail "running session exit $WRC, want 0"
	same src/mo/big "$MD/scratch/slow/big"
	send "$W/tx-mod9.log" --key-file "$MD/keys/alice.key" --port "$P" src/mo/f1 "$ADDR::scratch/after/"
	[ "$SRC" = 4 ] || t_fail "revoked key: exit $SRC, want 4"
	[ ! -e "$MD/scratch/after" ] || t_fail "written with a revoked key"
	alive "$MRX" || t_fail "receiver gone"
	t_log "$W/tx-mod8.log" "$W/tx-mod9.log" "$W/rx-mod.log"
	t_end
	term_rx "$MRX"
	rm -rf "$MD" src/mo
}

# scrape URL FILE: GET URL into FILE with what this host has: curl, else
# busybox wget (the guest), else a plain HTTP/1.0 request over the
# shell's /dev/tcp (bash).
scrape() {
	if command -v curl >/dev/null 2>&1; then
		curl -sf --max-time 5 -o "$2" "$1"
	elif command -v wget >/dev/null 2>&1; then
		rm -f "$2"
		timeout 5 wget -q -O "$2" "$1"
	else
		return 1
	fi
}
# metric FILE SAMPLE: the value of the sample that starts with SAMPLE.
metric() { awk -v s="$2 " 'index($0, s) == 1 { print $NF; exit }' "$1"; }

# The receiver's --metrics over the link this suite runs on: a push and a
# pull of 16 MiB each, counted per device (rxe0 over RDMA, tcp over TCP),
# no ring slot left held, and the rxe port's own counters exported as
# sysfs has them (rdcp_rdma_*: RNR NAKs both ways, retries run out,
# duplicates, out of sequence, packets): in the guest the kernel's, the
# packets having moved by at least what 16 MiB take at the largest MTU;
# over TCP a made-up sysfs (RDCP_SYSFS_ROOT).
s_metrics() {
	t_begin "metrics: per-device bytes, ring slots held, the device's RNR and retry counters"
	mkdir -p src/me rx/me
	mkrand src/me/f $((16 * M))
	nextport
	MP=$((P + 1000))
	URL=http://$ADDR:$MP/metrics
	HWD=$HW
	if [ -n "$HOST_MODE" ]; then
		# no rxe here: the receiver reads a made-up one
		# (RDCP_SYSFS_ROOT), as the guest's kernel would show it
		HWD=$W/sys/class/infiniband/rxe0/ports/1/hw_counters
		mkdir -p "$HWD"
		n=1
		for f in rcvd_rnr_err send_rnr_err retry_exceeded_err \
			retry_rnr_exceeded_err duplicate_request out_of_seq_request \
			sent_pkts rcvd_pkts; do
			echo "$n" >"$HWD/$f"
			n=$((n * 7))
		done
		export RDCP_SYSFS_ROOT="$W/sys"
	fi
	start_rx_or_fail "$W/rx-me.log" --root "$W/rx/me" --port "$P" --metrics "$ADDR:$MP"
	ST_RX=$?
	unset RDCP_SYSFS_ROOT
	if [ "$ST_RX" != 0 ]; then
		t_end
		return
	fi
	wait_until 10 "$RX" scrape "$URL" "$W/me0.txt" || t_fail "no answer from $URL"
	send "$W/tx-me1.log" --port "$P" src/me/f "$ADDR::f"
	[ "$SRC" = 0 ] || t_fail "push exit $SRC"
	same src/me/f rx/me/f
	send "$W/tx-me2.log" --port "$P" "$ADDR::f" src/me/back
	[ "$SRC" = 0 ] || t_fail "pull exit $SRC"
	same src/me/f src/me/back
	scrape "$URL" "$W/me1.txt" || t_fail "no second scrape"
	if [ -n "$HOST_MODE" ]; then
		dev=tcp tr=tcp
	else
		dev=rxe0 tr=rdma
	fi
	for d in in out; do
		v=$(metric "$W/me1.txt" "rdcp_device_bytes_total{device=\"$dev\",transport=\"$tr\",direction=\"$d\"}")
		[ "$v" = $((16 * M)) ] || t_fail "rdcp_device_bytes_total $dev $d: '$v', want $((16 * M))"
	done
	v=$(metric "$W/me1.txt" rdcp_ring_slots_held)
	[ "$v" = 0 ] || t_fail "rdcp_ring_slots_held: '$v' after the sessions, want 0"
	grep -q '^# TYPE rdcp_rdma_rnr_naks_total counter' "$W/me1.txt" ||
		t_fail "no rdcp_rdma_rnr_naks_total"
	l='device="rxe0",port="1"'
	for pair in "rcvd_rnr_err rdcp_rdma_rnr_naks_total{$l,direction=\"in\"}" \
		"send_rnr_err rdcp_rdma_rnr_naks_total{$l,direction=\"out\"}" \
		"retry_exceeded_err rdcp_rdma_retries_exhausted_total{$l,kind=\"transport\"}" \
		"retry_rnr_exceeded_err rdcp_rdma_retries_exhausted_total{$l,kind=\"rnr\"}" \
		"duplicate_request rdcp_rdma_duplicate_requests_total{$l}" \
		"out_of_seq_request rdcp_rdma_out_of_sequence_total{$l}" \
		"sent_pkts rdcp_rdma_packets_total{$l,direction=\"out\"}" \
		"rcvd_pkts rdcp_rdma_packets_total{$l,direction=\"in\"}"; do
		f=${pair%% *} name=${pair#* }
		[ -r "$HWD/$f" ] || { echo "# $HWD/$f: not on this kernel"; continue; }
		v=$(metric "$W/me1.txt" "$name")
		want=$(cat "$HWD/$f")
		echo "# $name $v (sysfs $f: $want)"
		[ "$v" = "$want" ] || t_fail "$name: '$v', sysfs $f says $want"
	done
	if [ -z "$HOST_MODE" ]; then
		a=$(metric "$W/me0.txt" "rdcp_rdma_packets_total{$l,direction=\"out\"}")
		b=$(metric "$W/me1.txt" "rdcp_rdma_packets_total{$l,direction=\"out\"}")
		# 4096: the largest RoCE MTU, so the fewest packets 16 MiB take
		[ -n "$a" ] && [ -n "$b" ] && [ $((b - a)) -ge $((16 * M / 4096)) ] ||
			t_fail "rxe0 sent $a then $b packets: fewer than 16 MiB take"
	fi
	term_rx
	t_log "$W/rx-me.log" "$W/me1.txt"
	t_end
	rm -rf src/me rx/me "$W/sys"
}


# Byte limits of modules (quota=, max-bytes=; rdcp-modules.conf(5)) and
# the receiver's --json events: a push that fits; one over the quota,
# refused per file (exit 7, nothing left under its name or as a
# temporary, the client told the rule and no path); one session over
# max-bytes (exit 9: its first file placed, the next refused); the
# module's usage in the metrics after a push and after a --delete; the
# receiver's JSON events, one per session (and per file at -v), parsed.
s_quota() {
	if [ -z "$AUTH" ]; then
		t_skip "quota" "this rdcp has no --keygen"
		return
	fi
	QD=$W/quota
	rm -rf "$QD" src/qt
	mkdir -p "$QD/clients" "$QD/keys" "$QD/q" "$QD/m" src/qt/tree src/qt/mb
	rdcp --keygen --name alice "$QD/keys/alice.key" >/dev/null 2>&1
	cp "$QD/keys/alice.key" "$QD/clients/alice.key"
	chmod 600 "$QD/clients/alice.key"
	mkrand src/qt/tree/a 300000
	mkrand src/qt/tree/b 200000
	mkrand src/qt/big 900000
	mkrand src/qt/mb/m1 500000
	mkrand src/qt/mb/m2 500000
	printf '[q]\npath = %s\nread = alice\nwrite = alice\nquota = 1M\n[m]\npath = %s\nwrite = alice\nmax-bytes = 800K\n' \
		"$QD/q" "$QD/m" >"$QD/modules.conf"
	nextport
	QP=$P
	nextport
	QURL=http://127.0.0.1:$P/metrics
	if ! start_rx "$W/rx-quota.log" --port "$QP" --json --clients "$QD/clients" \
		--modules "$QD/modules.conf" --metrics "127.0.0.1:$P"; then
		rx_not_started "quota" "$W/rx-quota.log"
		return
	fi
	QRX=$RX
	QK="--key-file $QD/keys/alice.key --port $QP"

	t_begin "quota: a push that fits; the usage in the metrics"
	wait_until 20 "$QRX" logged "$W/rx-quota.log" "module q: .* used of its quota" ||
		t_fail "the module's tree was not walked"
	# shellcheck disable=SC2086 # QK: options
	send "$W/tx-q1.log" $QK -r src/qt/tree "$ADDR::q/t/"
	[ "$SRC" = 0 ] || t_fail "push exit $SRC, want 0"
	same src/qt/tree/a "$QD/q/t/tree/a"
	same src/qt/tree/b "$QD/q/t/tree/b"
	scrape "$QURL" "$W/quota-m1.txt" || t_fail "no metrics"
	U=$(metric "$W/quota-m1.txt" 'rdcp_module_bytes_used{module="q"}')
	[ "$U" = 500000 ] || t_fail "usage $U after the push, want 500000"
	[ "$(metric "$W/quota-m1.txt" 'rdcp_module_quota_bytes{module="q"}')" = 1048576 ] ||
		t_fail "no quota in the metrics"
	t_log "$W/tx-q1.log" "$W/quota-m1.txt"
	t_end

	t_begin "quota: a file over the quota is refused, nothing left (exit 7)"
	# shellcheck disable=SC2086
	send "$W/tx-q2.log" $QK src/qt/big "$ADDR::q/t/"
	[ "$SRC" = 7 ] || t_fail "exit $SRC, want 7"
	[ ! -e "$QD/q/t/big" ] || t_fail "the refused file is there"
	no_temp "$QD/q" 5
	logged "$W/tx-q2.log" "'t/big' refused: module q would go over its quota of 1.00 MiB (quota)" ||
		t_fail "the client was not told the rule"
	! grep -q "$QD" "$W/tx-q2.log" || t_fail "a module's path reached the client"
	logged "$W/rx-quota.log" 'path=.t/big. bytes=900000 result=refused rule=quota' ||
		t_fail "no file line with the rule"
	scrape "$QURL" "$W/quota-m2.txt" || t_fail "no metrics"
	[ "$(metric "$W/quota-m2.txt" 'rdcp_files_refused_total{module="q",reason="quota"}')" = 1 ] ||
		t_fail "the refusal not counted"
	[ "$(metric "$W/quota-m2.txt" 'rdcp_module_bytes_used{module="q"}')" = 500000 ] ||
		t_fail "the refused file changed the usage"
	t_log "$W/tx-q2.log" "$W/quota-m2.txt"
	t_end

	t_begin "quota: max-bytes: one session's second file refused (exit 9)"
	# shellcheck disable=SC2086
	send "$W/tx-q3.log" $QK -r src/qt/mb "$ADDR::m/"
	[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
	NM=$(find "$QD/m/mb" -type f 2>/dev/null | wc -l)
	[ "$NM" = 1 ] || t_fail "$NM files placed, want 1"
	no_temp "$QD/m" 5
	logged "$W/tx-q3.log" "module m takes at most 800.00 KiB from one session (max-bytes)" ||
		t_fail "the client was not told the rule"
	# a new session has its own max-bytes: the other file goes now
	# shellcheck disable=SC2086
	send "$W/tx-q4.log" $QK -r -n src/qt/mb "$ADDR::m/"
	[ "$SRC" = 0 ] || t_fail "the next session: exit $SRC, want 0"
	same src/qt/mb/m1 "$QD/m/mb/m1"
	same src/qt/mb/m2 "$QD/m/mb/m2"
	t_log "$W/tx-q3.log" "$W/tx-q4.log"
	t_end

	t_begin "quota: --delete gives the deleted file's bytes back"
	B=$(stat -c '%b %B' "$QD/q/t/tree/b" | awk '{ print $1 * $2 }')
	rm src/qt/tree/b # -n: a stays as it is, b goes
	# shellcheck disable=SC2086
	send "$W/tx-q5.log" $QK -r -n --delete src/qt/tree "$ADDR::q/t/"
	[ "$SRC" = 0 ] || t_fail "push --delete exit $SRC, want 0"
	[ ! -e "$QD/q/t/tree/b" ] || t_fail "not deleted"
	scrape "$QURL" "$W/quota-m3.txt" || t_fail "no metrics"
	U=$(metric "$W/quota-m3.txt" 'rdcp_module_bytes_used{module="q"}')
	[ "$U" = $((500000 - B)) ] || t_fail "usage $U after the delete, want $((500000 - B))"
	# a file that fits now that b is gone
	mkrand src/qt/more 400000
	# shellcheck disable=SC2086
	send "$W/tx-q6.log" $QK src/qt/more "$ADDR::q/t/"
	[ "$SRC" = 0 ] || t_fail "push after the delete: exit $SRC, want 0"
	t_log "$W/tx-q5.log" "$W/tx-q6.log" "$W/quota-m3.txt"
	t_end

	t_begin "quota: small files (packed) up to the quota, the rest refused (exit 9)"
	scrape "$QURL" "$W/quota-m4.txt" || t_fail "no metrics"
	U0=$(metric "$W/quota-m4.txt" 'rdcp_module_bytes_used{module="q"}')
	mkdir -p src/qt/small
	i=0
	while [ "$i" -lt 120 ]; do
		mkrand "src/qt/small/s$i" 5000
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	send "$W/tx-q7.log" $QK -r src/qt/small "$ADDR::q/"
	[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
	NP=$(find "$QD/q/small" -type f 2>/dev/null | wc -l)
	[ "$NP" -gt 0 ] && [ "$NP" -lt 120 ] || t_fail "$NP of 120 placed, want some"
	no_temp "$QD/q" 5
	scrape "$QURL" "$W/quota-m5.txt" || t_fail "no metrics"
	U=$(metric "$W/quota-m5.txt" 'rdcp_module_bytes_used{module="q"}')
	[ "$U" = $((U0 + NP * 5000)) ] || t_fail "usage $U, want $U0 + $NP x 5000"
	[ "$U" -le 1048576 ] || t_fail "usage $U over the quota"
	[ $((U + 5000)) -gt 1048576 ] || t_fail "usage $U: a refused file would have fitted"
	t_log "$W/tx-q7.log" "$W/quota-m5.txt"
	t_end

	t_begin "quota: the receiver's --json events"
	grep '^{' "$W/rx-quota.log" >"$W/rx-quota.json"
	NS=$(grep -c '"event":"session"' "$W/rx-quota.json")
	[ "$NS" = 7 ] || t_fail "$NS session events, want 7"
	if command -v python3 >/dev/null 2>&1; then
		python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ss = [e for e in ev if e["event"] == "session"]
for e in ss:
    for k in ("time", "peer", "client", "module", "op", "files", "failed",
              "refused", "bytes", "result", "seconds"):
        assert k in e, (k, e)
assert [e["result"] for e in ss][:3] == ["ok", "local-io", "partial"], ss
assert ss[0]["client"] == "alice" and ss[0]["module"] == "q", ss[0]
assert ss[0]["op"] == "push" and ss[0]["files"] == 3, ss[0]  # and t/tree
assert ss[0]["bytes"] == 500000, ss[0]
assert ss[1]["refused"] == 1 and ss[2]["refused"] == 1, ss
fs = [e for e in ev if e["event"] == "file" and e.get("rule")]
assert [(e["rule"], e["result"]) for e in fs][:2] == [("quota", "refused"),
    ("max-bytes", "refused")], fs
assert all(e["rule"] == "quota" and e["result"] == "refused"
           and e["path"].startswith("small/s") for e in fs[2:]), fs
assert ss[6]["refused"] == len(fs) - 2 > 0, (ss[6], len(fs))
' "$W/rx-quota.json" 2>"$W/quota-py.log" || t_fail "events: $(tail -n 1 "$W/quota-py.log")"
	else
		logged "$W/rx-quota.json" '"event":"file",.*"result":"refused","rule":"quota"' ||
			t_fail "no file event with the rule"
	fi
	t_log "$W/rx-quota.json"
	t_end

	t_begin "quota: a reload walks the tree again: the usage is its files' blocks"
	WANT=$(find "$QD/q" -type f -exec stat -c '%b %B' {} \; | awk '{ s += $1 * $2 } END { print s + 0 }')
	kill -HUP "$QRX"
	wait_until 20 "$QRX" sh -c '[ "$(grep -c "module q: .* used of its quota" "$1")" -ge 2 ]' _ "$W/rx-quota.log" ||
		t_fail "no second walk after SIGHUP"
	scrape "$QURL" "$W/quota-m6.txt" || t_fail "no metrics"
	U=$(metric "$W/quota-m6.txt" 'rdcp_module_bytes_used{module="q"}')
	[ "$U" = "$WANT" ] || t_fail "usage $U after the walk, want $WANT"
	t_log "$W/quota-m6.txt"
	t_end
	term_rx "$QRX"
	rm -rf "$QD" src/qt
}

AUTH=
if rdcp --help 2>&1 | grep -q -- '--keygen'; then
	AUTH=1
	KEY=/etc/rdcp/key
	[ -z "${XDG_CONFIG_HOME:-}" ] || KEY=$XDG_CONFIG_HOME/rdcp/key
	if [ ! -f "$KEY" ]; then
		mkdir -p "$(dirname "$KEY")"
		rdcp --keygen "$KEY" >/dev/null 2>&1 ||
			{ echo "# rdcp --keygen $KEY failed"; t_begin "key setup"; t_fail "rdcp --keygen $KEY"; t_end; t_finish; }
	fi
fi

RNR0=$(counters)
echo "# rxe counters at start: $RNR0"
SUITE_START=$(now)
if [ $# -gt 0 ]; then
	run_scenarios "$ALL $EXTRA" "$@"
else
	run_scenarios "$ALL"
fi

# 13. No RNR NAK across the whole suite (RDMA only: TCP has no RNR; not
# after rxe0 was re-created, which resets its counters).
if [ -z "$HOST_MODE" ] && [ -z "${DEV_RECREATED:-}" ]; then
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
fi
# The whole suite ends with the scenarios that re-create rxe0, after the
# RNR check they would reset.
if [ $# -eq 0 ] && [ -z "$HOST_MODE" ]; then
	run_scenarios "$EXTRA"
fi
t_finish
