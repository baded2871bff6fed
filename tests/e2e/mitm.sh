#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# A man in the middle on the control channel (tests/e2e/mitm.py between an
# rdcp client and a --once receiver, TCP on 127.0.0.1), on sessions with
# a key and --encrypt: it grows a file, truncates one (--checksum none),
# injects a symlink to /etc/shadow and an empty file over an existing one
# into a push and into a pull, renames a file and rewrites its mode and
# mtime, and drops, replays and reorders a CREDIT or FREED. Each attack must end
# the session with exit 5 and place nothing. Protocol 2 accepted every
# one of them (exit 0, the damage done). Also, without any key (--no-auth:
# no tags), a size grown in flight must still fail the file: the sink
# wants every chunk of a file announced without holes.
#
#   tests/e2e/mitm.sh [--build DIR] [--list | SCENARIO...]
#
# Needs python3. Run it in a private network namespace (fixed ports):
#   unshare -n sh -c 'ip link set lo up && tests/e2e/mitm.sh'
# shellcheck disable=SC2317 # functions run by name (scenario lists, traps, wait_until callbacks)
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
RDCP=$(cd "$BUILD" 2>/dev/null && pwd)/rdcp
MITM=$HERE/mitm.py
ADDR=127.0.0.1
P=7950

POLL_MS=20

ALL="grow truncate inject_push inject_pull rewrite credit noauth_grow"
check_scenarios "$ALL" "$@"

[ -x "$RDCP" ] || { echo "not ok 1 - $RDCP missing (make all)"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "not ok 1 - python3 missing"; exit 1; }

W=$(mktemp -d /tmp/rdcp-e2e-mitm.XXXXXX)
PIDFILE=$W/pids
: >"$PIDFILE"
cleanup() {
	local p
	while read -r p; do
		[ -n "$p" ] && [ -r "/proc/$p/cmdline" ] &&
			tr '\0' ' ' <"/proc/$p/cmdline" | grep -Eq 'rdcp|mitm' &&
			kill -9 "$p" 2>/dev/null
	done <"$PIDFILE"
	rm -rf "$W"
}
trap cleanup EXIT
cd "$W" || exit 1
KEY=$W/key
"$RDCP" --keygen "$KEY" >/dev/null 2>&1 || { echo "not ok 1 - --keygen failed"; exit 1; }

prng() { head -c "$2" /dev/urandom >"$1"; }

# attack NAME RXARGS ACTION... -- CLIENT ARGS...: a --once receiver
# (RXARGS: its extra options, one word, may be empty) rooted at $W/rx,
# mitm.py with ACTION in front of it, the client with ARGS through it.
# SRC = the client's status; MITM_OUT = what the mitm said. Logs go to
# $W/NAME.{rx,tx,mitm}.log.
attack() {
	local name=$1 rxargs=$2 auth=(--key-file "$KEY") act=()
	shift 2
	while [ "$1" != -- ]; do act+=("$1"); shift; done
	shift
	[ "$rxargs" != --no-auth ] || auth=(--no-auth)
	nextport
	local rxp=$P
	nextport
	local mp=$P
	# shellcheck disable=SC2086 # rxargs: zero or one word
	rx_spawn "$W/$name.rx.log" "$RDCP" --listen -v --once --transport tcp \
		--bind "$ADDR" --port "$rxp" --root "$W/rx" "${auth[@]}" $rxargs ||
		t_fail "the receiver did not start"
	python3 "$MITM" "$mp" "$rxp" "${act[@]}" >"$W/$name.mitm.log" 2>&1 &
	local mpid=$!
	track "$mpid"
	wait_until 10 "$mpid" logged "$W/$name.mitm.log" listening ||
		t_fail "the mitm did not start"
	run_bounded 60 "$W/$name.tx.log" "$RDCP" --transport tcp --port "$mp" \
		"${auth[@]}" "$@"
	stop_rx 20
	wait_pid "$mpid" 20
	MITM_OUT=$(tr '\n' ';' <"$W/$name.mitm.log")
	echo "# mitm: $MITM_OUT"
	grep -q '^mitm: did nothing' "$W/$name.mitm.log" &&
		t_fail "the attack found nothing to change"
	t_log "$W/$name.tx.log" "$W/$name.rx.log"
}

want_refused() { # the client's exit must be 5 (protocol error)
	[ "$SRC" = 5 ] || t_fail "client exit $SRC, want 5"
}

absent() { # PATH...: none may exist
	local f
	for f in "$@"; do
		[ ! -e "$f" ] && [ ! -L "$f" ] || t_fail "$f was placed"
	done
}

mkdir -p src/tree rx
prng src/one 1048576      # exactly one 1 MiB chunk
prng src/three 200000     # 4 chunks of 64 KiB, the last short
prng src/many 4000000     # 62 chunks of 64 KiB
prng src/tree/a 300000
prng src/tree/b 300000

s_grow() {
	t_begin "mitm grows a file in FILE (+1 MiB): session refused (5), nothing placed"
	rm -rf rx/grow
	attack grow "" grow 1048576 -- --encrypt src/one "$ADDR::grow/"
	want_refused
	absent rx/grow/one
	t_end
}

s_truncate() {
	t_begin "mitm drops the last chunk and edits FILE_END (--checksum none): refused (5), nothing placed"
	attack truncate "" truncate -- --encrypt --checksum none --chunk-size 64K \
		src/three "$ADDR::trunc"
	want_refused
	absent rx/trunc
	t_end
}

s_inject_push() {
	local what
	for what in symlink empty; do
		t_begin "mitm injects $what into a push: refused (5), nothing created or emptied"
		rm -rf rx/ip && mkdir -p rx/ip/tree && echo precious >rx/ip/tree/victim
		if [ "$what" = symlink ]; then
			attack "inject-push-$what" "" inject-symlink tree/evil /etc/shadow \
				-- --encrypt -r src/tree "$ADDR::ip/"
		else
			attack "inject-push-$what" "" inject-empty tree/victim \
				-- --encrypt -r src/tree "$ADDR::ip/"
		fi
		want_refused
		absent rx/ip/tree/evil
		[ "$(cat rx/ip/tree/victim 2>/dev/null)" = precious ] ||
			t_fail "rx/ip/tree/victim was changed"
		t_end
	done
}

s_inject_pull() {
	local what
	mkdir -p rx/pull/tree
	cp src/tree/a src/tree/b rx/pull/tree/
	for what in symlink empty; do
		t_begin "mitm injects $what into a pull: refused (5), nothing created or emptied"
		rm -rf dst && mkdir -p dst/tree && echo precious >dst/tree/victim
		if [ "$what" = symlink ]; then
			attack "inject-pull-$what" "" inject-symlink tree/evil /etc/shadow \
				-- --encrypt -r "$ADDR::pull/tree" dst/
		else
			attack "inject-pull-$what" "" inject-empty tree/victim \
				-- --encrypt -r "$ADDR::pull/tree" dst/
		fi
		want_refused
		absent dst/tree/evil
		[ "$(cat dst/tree/victim 2>/dev/null)" = precious ] ||
			t_fail "dst/tree/victim was changed"
		t_end
	done
}

s_rewrite() {
	t_begin "mitm renames a file and rewrites its mode and mtime (-p): refused (5), nothing placed"
	rm -rf rx/rw
	attack rewrite "" rewrite other 0777 1000000000 \
		-- --encrypt -p src/one "$ADDR::rw/"
	want_refused
	absent rx/rw/one rx/rw/other
	t_end
}

s_credit() {
	local how
	for how in drop dup swap; do
		t_begin "mitm ${how}s the first CREDIT or FREED from the receiver: refused (5), nothing placed"
		rm -rf rx/cr
		attack "credit-$how" "" "$how-credit" -- --encrypt --window 2 \
			--chunk-size 64K src/many "$ADDR::cr/"
		want_refused
		# The first CREDIT comes mid-file: the file is not placed. (A
		# message tampered with after a file was verified and placed
		# ends the session all the same; the file is then intact.)
		absent rx/cr/many
		t_end
	done
}

s_noauth_grow() {
	t_begin "no key (no tags): a size grown in flight still fails the file (5), nothing placed"
	rm -rf rx/na
	attack noauth-grow --no-auth grow 1048576 -- src/one "$ADDR::na/"
	want_refused
	absent rx/na/one
	t_end
}

run_scenarios "$ALL" "$@"
t_finish
