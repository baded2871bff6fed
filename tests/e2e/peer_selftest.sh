#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Proof that tests/e2e/peer.py speaks protocol version 3, so the malicious
# peers built on it fail for what they do wrong on purpose, not by
# accident: its codec and digests against zlib and hashlib, then real
# sessions with the real rdcp over TCP on 127.0.0.1, with a key:
#   peer.py pushes to `rdcp --listen` (crc32 and sha256), pulls from it (also with a file list in NAMES),
#   serves a pull to an rdcp client and receives an rdcp client's push,
#   every file byte-identical and every rdcp exit 0;
#   one FILE_END with a wrong digest: the receiver refuses that file alone.
# TAP lines, then the plan; exit 0 only if everything passed.
#
#   tests/e2e/peer_selftest.sh [--build DIR] [--list | SCENARIO...]
# shellcheck disable=SC2317 # functions run by name (scenario lists, traps, wait_until callbacks)
# shellcheck disable=SC2119 # the helper's arguments are optional
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
PY=$HERE/peer.py
ADDR=127.0.0.1
P=7950 # ports: one per session (nextport)

POLL_MS=20
ALL="codec push sha256 pull pull_list serve_pull serve_push bad_digest"
check_scenarios "$ALL" "$@"

need_built "make all" "$BUILD/rdcp"
command -v python3 >/dev/null 2>&1 || { echo "not ok 1 - python3 missing"; exit 1; }
W=$(mktemp -d /tmp/rdcp-e2e-peer.XXXXXX)
PIDFILE=$W/pids
cleanup() {
	local p
	# Only what this script started, by pid, if still rdcp or peer.py.
	while read -r p; do
		[ -r "/proc/$p/cmdline" ] || continue
		tr '\0' ' ' <"/proc/$p/cmdline" | grep -Eq 'rdcp|peer\.py' &&
			kill -9 "$p" 2>/dev/null
	done <"$PIDFILE"
	rm -rf "$W"
}
trap cleanup EXIT
: >"$PIDFILE"
cp "$BUILD/rdcp" "$W/rdcp"
RDCP=$W/rdcp
KEY=$W/key
"$RDCP" --keygen "$KEY" >/dev/null 2>&1 || { echo "not ok 1 - rdcp --keygen failed"; exit 1; }
cd "$W" || exit 1
mkdir -p src
head -c 1234567 /dev/urandom >src/big # 19 chunks of 64 KiB: more than a ring
echo "a small file" >src/small       # packed when the sink takes packs

# A receiver with the key on $P, root $1, one session; RX = its pid.
rx_once() {
	mkdir -p "$2"
	start_rx "$1" --once --transport tcp --bind "$ADDR" --port "$P" \
		--key-file "$KEY" --root "$2" --chunk-size 64K ||
		t_fail "receiver did not start"
}
# peer LOG ARGS...: peer.py with the key against $P, bounded, in the
# foreground; SRC = its status.
peer() {
	run_bounded 60 "$1" python3 "$PY" --port "$P" --key "$KEY" "${@:2}"
}
# peer_server LOG ARGS...: peer.py serving one session on $P in the
# background (TX), once it listens.
peer_server() {
	bg_run "$1" python3 "$PY" --port "$P" --key "$KEY" "${@:2}"
	PEER_PID=$TX
	wait_until 10 "$TX" logged "$1" listening || t_fail "peer.py did not listen"
}
client() {
	send "$1" --transport tcp --port "$P" --key-file "$KEY" "${@:2}"
}

s_codec() {
	t_begin "peer.py codec: every message round-trips, crc32_combine and digests match zlib/hashlib"
	python3 - "$HERE" >codec.log 2>&1 <<'EOF' || t_fail "codec checks failed"
import hashlib, os, sys, zlib
sys.path.insert(0, sys.argv[1])
import peer
for t in peer.SPEC:
    b = peer.encode(peer.Msg(t, 3, 4))
    assert peer.encode(peer.decode(b)) == b, t
f = peer.Msg(peer.FILE, 0, 0, file_id=7, path="a/b", link="", mtime=-1, size=9)
assert peer.decode(peer.encode(f)).__dict__ == f.__dict__
for la, lb in [(0, 0), (1, 0), (0, 1), (5, 70000), (65536, 1), (3, 1 << 20)]:
    a, b = os.urandom(la), os.urandom(lb)
    assert peer.crc32_combine(zlib.crc32(a), zlib.crc32(b), lb) == zlib.crc32(a + b)
data = os.urandom(200000)
parts = [data[i:i + 65536] for i in range(0, len(data), 65536)]
assert peer.file_digest(1, parts) == zlib.crc32(data).to_bytes(4, "big")
assert peer.file_digest(2, parts) == hashlib.sha256(
    b"".join(hashlib.sha256(p).digest() for p in parts)).digest()
h = peer.slot_hdr(1, 2, 3, 4, 5)
assert peer.parse_slot(h + b"xyz")[0]["offset"] == 4
try:
    peer.parse_slot(h[:-1] + bytes([h[-1] ^ 1]) + b"xyz")
    raise SystemExit("a bad header CRC passed")
except peer.PeerError:
    pass
EOF
	t_log codec.log
	t_end
}

# push_test CSUM: peer.py pushes big (multi-chunk) and small.
push_test() {
	nextport
	t_begin "peer.py pushes 2 files ($1) to rdcp --listen: identical, receiver exit 0"
	rx_once "rx-$1.log" "rx-$1"
	peer "peer-$1.log" --csum "$1" push "" src/big src/small
	[ "$SRC" = 0 ] || t_fail "peer.py exit $SRC, want 0"
	stop_rx
	[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
	same src/big "rx-$1/big"
	same src/small "rx-$1/small"
	t_log "rx-$1.log" "peer-$1.log"
	t_end
}
s_push() { push_test crc32; }
s_sha256() { push_test sha256; }

s_pull() {
	nextport
	t_begin "peer.py pulls 2 files from rdcp --listen (a chunked and a packed one): identical, receiver exit 0"
	mkdir -p root-pull out-pull
	cp src/big src/small root-pull/
	rx_once rx-pull.log root-pull
	peer peer-pull.log pull out-pull big small
	[ "$SRC" = 0 ] || t_fail "peer.py exit $SRC, want 0"
	stop_rx
	[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
	same src/big out-pull/big
	same src/small out-pull/small
	t_log rx-pull.log peer-pull.log
	t_end
}

s_pull_list() {
	nextport
	t_begin "peer.py pulls 2 files named in a list (NAMES) beneath a directory: identical, receiver exit 0"
	mkdir -p root-pl/d out-pl
	cp src/big src/small root-pl/d/
	rx_once rx-pl.log root-pl
	peer peer-pl.log pull-list out-pl d big small
	[ "$SRC" = 0 ] || t_fail "peer.py exit $SRC, want 0"
	stop_rx
	[ "$RX_RC" = 0 ] || t_fail "receiver exit $RX_RC, want 0"
	same src/big out-pl/big
	same src/small out-pl/small
	t_log rx-pl.log peer-pl.log
	t_end
}

s_serve_pull() {
	nextport
	t_begin "peer.py serves a pull to an rdcp client: identical, client exit 0"
	mkdir -p out-sp
	peer_server peer-sp.log serve-pull src/big src/small
	client cl-sp.log --chunk-size 64K --window 4 "$ADDR::big" "$ADDR::small" out-sp/
	[ "$SRC" = 0 ] || t_fail "rdcp client exit $SRC, want 0"
	wait_pid "$PEER_PID" 20
	[ "$WRC" = 0 ] || t_fail "peer.py exit $WRC, want 0"
	same src/big out-sp/big
	same src/small out-sp/small
	t_log cl-sp.log peer-sp.log
	t_end
}

s_serve_push() {
	nextport
	t_begin "peer.py receives an rdcp client's push: identical, client exit 0"
	mkdir -p out-spu
	peer_server peer-spu.log serve-push out-spu
	client cl-spu.log --chunk-size 64K --window 4 src/big src/small "$ADDR::x/"
	[ "$SRC" = 0 ] || t_fail "rdcp client exit $SRC, want 0"
	wait_pid "$PEER_PID" 20
	[ "$WRC" = 0 ] || t_fail "peer.py exit $WRC, want 0"
	same src/big out-spu/big
	same src/small out-spu/small
	t_log cl-spu.log peer-spu.log
	t_end
}

s_bad_digest() {
	nextport
	t_begin "peer.py: a FILE_END with a wrong digest is refused (-EBADMSG, not placed), the other file placed, receiver exit 9"
	rx_once rx-bad.log rx-bad
	peer peer-bad.log push-bad-digest "" src/small src/big
	[ "$SRC" = 1 ] || t_fail "peer.py exit $SRC, want 1 (one file refused)"
	grep -q '^result 1 status -74 ' peer-bad.log || t_fail "no FILE_RESULT -EBADMSG for the bad file"
	grep -q '^result 0 status 0 ' peer-bad.log || t_fail "the good file was not accepted"
	stop_rx
	[ "$RX_RC" = 9 ] || t_fail "receiver exit $RX_RC, want 9 (partial)"
	same src/small rx-bad/small
	[ ! -e rx-bad/big ] || t_fail "the file with the wrong digest was placed"
	no_temp rx-bad 5
	logged rx-bad.log "'big' failed verification" || t_fail "receiver did not log the verification failure"
	t_log rx-bad.log peer-bad.log
	t_end
}

run_scenarios "$ALL" "$@"
t_finish
