# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The receiver's listener and its handshake under attack (issue #16 items
# 1, 2, 4, 8, 9), over TCP on loopback: a pull HELLO of 4096 empty SRCs, a
# receiver out of descriptors, a held-off address's silent connections,
# connect data asking for bigger control buffers, key holders holding
# every descriptor they may, and a flood of
# unauthenticated connections next to a real client. Sourced by faults.sh
# (its helpers: start_rx, send, peer, served, ...); the peers come from
# 127.0.0.2 (RDCP_PEER_SRC), the real clients from 127.0.0.1.

# listen_peer SRC MODE [WAIT [COUNT]]: peer, from address SRC.
listen_peer() {
	local src=$1
	shift
	PEER_OUT=$(RDCP_PEER_SRC=$src timeout -s KILL 60 python3 "$PEER" "$P" "$@" 2>&1)
	PEER_RC=$?
}

# A pull HELLO naming 4096 empty SRCs (and 2100: 1996 named "x", then
# empty ones): the receiver once filled a stack array of 2048 entries with
# them before checking any (SIGSEGV).
# Run with an ASan build (run_faults.sh --build build/asan) for the memory
# check; here the receiver must answer, say why, and serve on.
s_paths() {
	local n
	mkdir -p rx/paths
	RXDIR=$W/rx/paths
	nextport
	t_begin "pull HELLO of 4096 or 2100 SRCs, empty ones among them: refused with a clear error, receiver serves on"
	if rx_spawn_or_fail "$W/rx-paths.log" "$RDCP" --listen -v --transport tcp \
		--bind "$ADDR" --port "$P" --no-auth --root "$RXDIR"; then
		for n in 4096 2100; do
			peer paths 10 "$n"
			echo "# $n SRCs: $PEER_OUT"
			[ "$PEER_RC" = 0 ] || t_fail "$n paths: $PEER_OUT"
			case $PEER_OUT in
			*"empty name"*) ;;
			*) t_fail "$n paths: the client is not told the SRC is empty: $PEER_OUT" ;;
			esac
			alive "$RX" || { t_fail "receiver gone after $n paths (crashed?)"; break; }
		done
		grep -q 'empty name' "$W/rx-paths.log" || t_fail "the receiver did not log the empty SRC"
		! grep -Eq 'AddressSanitizer|runtime error' "$W/rx-paths.log" ||
			t_fail "the sanitizer complained"
		if alive "$RX"; then
			run_bounded 60 "$W/tx-paths.log" "$RDCP" --transport tcp --port "$P" \
				--no-auth "$W/src/small" "$ADDR::small"
			[ "$SRC" = 0 ] || t_fail "a real client afterwards: exit $SRC, want 0"
			same "$W/src/small" "$RXDIR/small"
			t_log "$W/tx-paths.log"
		fi
		term_rx
	fi
	t_log "$W/rx-paths.log"
	t_end
	rm -rf rx/paths
}

# Connect data asking for control buffers of 64 KiB or 256 credits: over
# RDMA the receiver registered buffers of that size before the client
# proved anything; the protocol has 8 KiB and 64, nothing else is taken.
s_geom() {
	local g
	mkdir -p rx/geom
	RXDIR=$W/rx/geom
	nextport
	t_begin "connect data with control buffers of 64 KiB or 256 credits: refused (status 2), both sides say why"
	if start_rx_or_fail "$W/rx-geom.log" --root "$RXDIR"; then
		for g in 65536/256 65536/64 8192/256 1024/4; do
			peer geom 10 "$g"
			echo "# $PEER_OUT"
			case $PEER_OUT in
			*"status 2, closed"*) ;;
			*) t_fail "$g: $PEER_OUT (want status 2, closed)" ;;
			esac
		done
		grep -q 'asks for control buffers of 65536 bytes' "$W/rx-geom.log" ||
			t_fail "the receiver did not log the control buffer size"
		grep -q 'asks for 256 control credits' "$W/rx-geom.log" ||
			t_fail "the receiver did not log the credits"
		served "$W/tx-geom.log" after-geom
		term_rx
	fi
	t_log "$W/rx-geom.log"
	t_end
	rm -rf rx/geom
}

# A receiver with 24 descriptors, 32 clients at once from four addresses,
# each silent after the connect exchange: accept() fails with EMFILE. The
# listener once took that as fatal and exited; it must go on.
s_emfile() {
	local a pids='' p
	mkdir -p rx/mfile
	RXDIR=$W/rx/mfile
	nextport
	t_begin "receiver out of descriptors (ulimit -n 24): accept fails, the listener goes on, a real copy works after"
	if rx_spawn_or_fail "$W/rx-mfile.log" sh -c 'ulimit -n 24 && exec "$@"' sh \
		"$RDCP" --listen -v --transport tcp --bind "$ADDR" --port "$P" \
		--key-file "$KEY" --root "$RXDIR" --connect-timeout 2; then
		for a in 2 3 4 5; do
			RDCP_PEER_SRC=127.0.0.$a python3 "$PEER" "$P" hold-hs 8 8 \
				>"$W/peer-mfile-$a.log" 2>&1 &
			track $!
			pids="$pids $!"
		done
		for p in $pids; do
			wait_pid "$p" 30
		done
		sed 's/^/# /' "$W"/peer-mfile-*.log
		grep -q 'cannot accept' "$W/rx-mfile.log" ||
			t_fail "accept never failed: the test did not exhaust the descriptors"
		alive "$RX" || t_fail "receiver gone"
		! grep -q 'listener failed' "$W/rx-mfile.log" || t_fail "the listener gave up"
		served "$W/tx-mfile.log" after-emfile
		term_rx
	fi
	t_log "$W/rx-mfile.log"
	t_end
	rm -rf rx/mfile
}

# 127.0.0.2 guessed the key 3 times and is held off; it then opens 30
# silent connections. Each refusal once read the connect data on the
# listener's thread (up to 1 s): a real client from 127.0.0.1 waited behind
# all of them and timed out.
s_heldoff() {
	local i hp
	mkdir -p rx/held
	RXDIR=$W/rx/held
	nextport
	t_begin "held-off 127.0.0.2 opens 30 silent connections: a client from 127.0.0.1 copies within 3 s"
	if start_rx_or_fail "$W/rx-held.log" --root "$RXDIR"; then
		for i in 1 2 3; do
			listen_peer 127.0.0.2 bad-auth 10
			[ "$PEER_RC" = 0 ] || t_fail "guess $i: $PEER_OUT"
		done
		RDCP_PEER_SRC=127.0.0.2 python3 "$PEER" "$P" hold 20 30 >"$W/peer-held.log" 2>&1 &
		hp=$!
		track $hp
		i=0
		until [ "$(grep -c 'connection from 127.0.0.2' "$W/rx-held.log")" -ge 6 ] || [ $i -ge 100 ]; do
			i=$((i + 1))
			msleep 20
		done
		send "$W/tx-held.log" --connect-timeout 3 src/small "$ADDR::small"
		echo "# client from 127.0.0.1 next to 30 held-off connections: exit $SRC in ${ST}s"
		[ "$SRC" = 0 ] || t_fail "the real client: exit $SRC, want 0"
		same src/small "$RXDIR/small"
		wait_pid "$hp" 30
		echo "# $(cat "$W/peer-held.log")"
		[ "$WRC" = 0 ] || t_fail "held-off connections left open: $(cat "$W/peer-held.log")"
		case $(cat "$W/peer-held.log") in
		*"slowest after "[0-2].*) ;;
		*) t_fail "held-off connections not dropped within ~2 s" ;;
		esac
		grep -q 'held off' "$W/rx-held.log" || t_fail "the receiver log does not say 'held off'"
		alive "$RX" || t_fail "receiver gone"
		term_rx
	fi
	t_log "$W/tx-held.log" "$W/rx-held.log"
	t_end
	rm -rf rx/held
}

# 12 connections at a time from 127.0.0.2 that never authenticate (silent,
# silent after the connect exchange, or after a HELLO), against
# --max-sessions 4: they once took the session slots until the handshake
# timed out, and a real client got through about 1 time in 40.
s_preauth() {
	local i ok=0 n=10 fp
	mkdir -p rx/pre
	RXDIR=$W/rx/pre
	nextport
	t_begin "a flood of unauthenticated connections at --max-sessions 4: a client from 127.0.0.1 gets through $n times in $n"
	if start_rx_or_fail "$W/rx-pre.log" --root "$RXDIR" --max-sessions 4; then
		RDCP_PEER_SRC=127.0.0.2 python3 "$PEER" "$P" flood 15 12 >"$W/peer-pre.log" 2>&1 &
		fp=$!
		track $fp
		i=0
		until [ "$(grep -c 'connection from 127.0.0.2' "$W/rx-pre.log")" -ge 12 ] || [ $i -ge 100 ]; do
			i=$((i + 1))
			msleep 20
		done
		for i in $(seq 1 $n); do
			send "$W/tx-pre.log" --connect-timeout 5 src/small "$ADDR::p$i"
			if [ "$SRC" = 0 ] && cmp -s src/small "$RXDIR/p$i"; then
				ok=$((ok + 1))
			else
				cp "$W/tx-pre.log" "$W/tx-pre-bad$i.log"
				t_log "$W/tx-pre-bad$i.log"
			fi
		done
		echo "# $ok of $n copies went through the flood"
		[ "$ok" = "$n" ] || t_fail "only $ok of $n copies went through"
		wait_pid "$fp" 30
		echo "# $(cat "$W/peer-pre.log")"
		grep -q 'still authenticating' "$W/rx-pre.log" ||
			t_fail "the receiver never refused a connection over the per-address budget"
		alive "$RX" || t_fail "receiver gone"
		term_rx
	fi
	t_log "$W/rx-pre.log"
	t_end
	rm -rf rx/pre
}

# --max-sessions 1: a client (peer.py) passes the connect-time check, gets
# its WELCOME and waits 2 s before its AUTH; meanwhile a real client takes
# the one slot. The late one is told the receiver is at its session limit
# once it proved the key; the slot accounting must come out even (later
# clients served, SIGTERM ends the daemon at once).
s_lateslot() {
	local pp
	mkdir -p rx/late
	RXDIR=$W/rx/late
	nextport
	t_begin "the slot goes to whoever authenticates first: the later one is refused (session limit), the count stays right"
	if start_rx_or_fail "$W/rx-late.log" --root "$RXDIR" --max-sessions 1; then
		PYTHONPATH=$HERE timeout -s KILL 30 python3 - "$P" "$KEY" >"$W/peer-late.log" 2>&1 <<'PY' &
import sys, time
import peer
key = peer.load_key(sys.argv[2])
c = peer.Client(int(sys.argv[1]), key=key).connect()
w = c.handshake(peer.PUSH, ["late"], auth=False)
time.sleep(2)
c.conn.send(peer.Msg(peer.AUTH, mac=peer.auth_mac(key, "client", c.hello,
                                                  w)))
try:
    c.conn.expect(peer.RING)
    print("late client: got a RING")
except peer.RemoteError as e:
    print("late client: %s" % e)
PY
		pp=$!
		track $pp
		# The late client first (python may take a while to start).
		wait_until 20 "$pp" logged "$W/rx-late.log" "accepted" ||
			t_fail "the late client never connected"
		bg_send "$W/tx-late-slow.log" --bwlimit 2M src/big "$ADDR::slow"
		wait_pid "$pp" 20
		echo "# $(cat "$W/peer-late.log")"
		grep -q 'session limit' "$W/peer-late.log" ||
			t_fail "the late client was not refused for the session limit"
		kill -INT "$TX" 2>/dev/null
		wait_pid "$TX" 15
		no_temp "$RXDIR" 5
		served "$W/tx-late.log" after-late
		term_rx
		[ "$RX_RC" = 130 ] || t_fail "daemon exit $RX_RC after SIGTERM, want 130 (a slot count gone wrong?)"
	fi
	t_log "$W/peer-late.log" "$W/rx-late.log"
	t_end
	rm -rf rx/late
}

# ulimit -n 1024 (soft and hard, systemd's default soft limit) and
# --max-sessions 16: 4 key-holder sessions each hold 128 files in flight,
# one per directory (a temporary and its parent directory open for each:
# ~259 fds a session). They once took every descriptor: the listener could
# no longer accept and an honest client was turned away. Now the receiver
# says at start how many sessions its limit fits and serves no more; the
# descriptors a connection still authenticating needs stay free.
s_fdcap() {
	local hp fds=0 n i
	mkdir -p rx/fdcap
	RXDIR=$W/rx/fdcap
	nextport
	t_begin "ulimit -n 1024, --max-sessions 16, 4 sessions holding 128 files each: sessions capped, fds to spare, an honest client served or refused as busy"
	if rx_spawn_or_fail "$W/rx-fdcap.log" sh -c 'ulimit -n 1024 && exec "$@"' sh \
		"$RDCP" --listen -v --transport tcp --bind "$ADDR" --port "$P" \
		--key-file "$KEY" --root "$RXDIR" --max-sessions 16; then
		PYTHONPATH=$HERE timeout -s KILL 40 python3 - "$P" "$KEY" "$W/fdcap.stop" \
			>"$W/peer-fdcap.log" 2>&1 <<'PY' &
import os, sys, time
import peer
key, stop, held = peer.load_key(sys.argv[2]), sys.argv[3], []
for s in range(4):
    try:
        c = peer.Client(int(sys.argv[1]), key=key, timeout=10).connect()
        held.append(c)
        c.handshake(peer.PUSH, ["s%d/" % s])
        c.expect_ring()
        for i in range(127):
            c.send_file(peer.Entry("d%d" % i, kind=peer.KIND_DIR))
            c.send_file(peer.Entry("d%d/f" % i, b"x" * 10))
        c.send_file(peer.Entry("last", b"x" * 10))
        c.pump(lambda: len(c.results) >= 127)
        print("session %d: holding 128 files" % s, flush=True)
    except peer.PeerError as e:
        print("session %d: %s" % (s, str(e)[:160]), flush=True)
print("held", flush=True)
deadline = time.monotonic() + 20
while not os.path.exists(stop) and time.monotonic() < deadline:
    time.sleep(0.05)
PY
		hp=$!
		track $hp
		i=0
		until grep -q '^held' "$W/peer-fdcap.log" || [ $i -ge 1000 ] || ! alive "$hp"; do
			i=$((i + 1))
			msleep 20
		done
		fds=$(fdcount "$RX")
		sed 's/^/# /' "$W/peer-fdcap.log"
		echo "# receiver fds with the sessions held: $fds of 1024"
		n=$(grep -c 'holding 128 files' "$W/peer-fdcap.log")
		[ "$n" -ge 1 ] || t_fail "no session held its files: the test proves nothing"
		# 32 connections still authenticating must find their fds
		[ "$fds" -le $((1024 - 32 * 8)) ] ||
			t_fail "receiver holds $fds fds: no room left for connections still authenticating"
		send "$W/tx-fdcap.log" --connect-timeout 3 src/small "$ADDR::honest"
		echo "# honest client: exit $SRC: $(head -c 200 "$W/tx-fdcap.log")"
		if [ "$SRC" = 0 ]; then
			same src/small "$RXDIR/honest"
		elif [ "$SRC" != 3 ] || ! grep -q 'session limit' "$W/tx-fdcap.log"; then
			t_fail "honest client: exit $SRC, want 0, or 3 refused at the session limit"
		fi
		touch "$W/fdcap.stop"
		wait_pid "$hp" 10
		! grep -Eq 'Too many open files|cannot accept' "$W/rx-fdcap.log" ||
			t_fail "the receiver ran out of descriptors"
		grep -q 'open files: --max-sessions 16 needs .*serving at most [0-9]* sessions' "$W/rx-fdcap.log" ||
			t_fail "the receiver did not say at start how many sessions its fds fit"
		alive "$RX" || t_fail "receiver gone"
		term_rx
	fi
	t_log "$W/tx-fdcap.log" "$W/rx-fdcap.log"
	t_end
	rm -rf rx/fdcap
}
