#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Proof that the real OpenSSH server the ssh tests start on this host
# (tests/e2e/sshd.sh) behaves as rdcp's ssh mode relies on: it starts on
# 127.0.0.1 (`sshd -t` first); ssh in BatchMode runs a command given as
# rdcp gives it (`sh -c "$RSH \"\$@\"" rdcp HOST CMD ARGS`) that finds
# what the test put in its PATH, and brings back its stdout (8-bit clean,
# a MiB through `cat`), stderr and exit status; relative remote paths land
# in the throwaway remote home; the ssh_config alias works; a wrong host
# key, an unknown host key and an unauthorized user key fail in BatchMode
# with exit 255, at once, without running the command or waiting for
# input; a killed ssh client ends the remote command that reads its stdin
# (EOF) and leaves no sshd session; a remote command that exits ends ssh
# even with ssh's stdin still open; sshd_stop leaves nothing listening;
# all of it also inside a private network namespace (`unshare -n`).
# TAP lines, then the plan; exit 0 only if everything passed. A missing
# sshd is a failure with the reason, never a skip.
#
#   tests/e2e/ssh_selftest.sh [--build DIR] [--list | SCENARIO...]
# shellcheck disable=SC2317 # functions run by name (scenario lists, traps, wait_until callbacks)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS" # nothing of the build is needed: only ssh and sshd run

# shellcheck source=sshd.sh source-path=SCRIPTDIR
. "$HERE/sshd.sh"
POLL_MS=20
ALL="run args stream home alias hostkey unknownhost badkey killed remoteexit netns stop"
check_scenarios "$ALL" "$@"

W=$(mktemp -d /tmp/rdcp-e2e-ssh.XXXXXX)
PIDFILE=$W/pids
: >"$PIDFILE"
cleanup() {
	local p
	sshd_stop
	# Only what this script started, by pid, if still ssh or sleep.
	while read -r p; do
		[ -r "/proc/$p/cmdline" ] || continue
		tr '\0' ' ' <"/proc/$p/cmdline" | grep -Eq '^(ssh|sleep) ' &&
			kill -9 "$p" 2>/dev/null
	done <"$PIDFILE"
	exec 7>&- 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
cd "$W" || exit 1

# A tool the remote PATH must find, as the remote rdcp will be found.
mkdir -p "$W/bin"
printf '#!/bin/sh\nprintf "<%%s>" "$@"; echo\n' >"$W/bin/rdcp-ssh-probe"
chmod +x "$W/bin/rdcp-ssh-probe"

t_begin "sshd starts on 127.0.0.1 (sshd -t, its own keys, pid file and log)"
if SSHD_REMOTE_PATH=$W/bin:$PATH sshd_start "$W/sshd"; then
	echo "# sshd $SSHD_PID on 127.0.0.1:$SSHD_PORT, remote home $SSH_REMOTE_HOME"
	[ "$(cat "$SSHD_DIR/sshd.pid" 2>/dev/null)" = "$SSHD_PID" ] ||
		t_fail "pid file $SSHD_DIR/sshd.pid does not hold $SSHD_PID"
	[ -s "$SSH_KNOWN_HOSTS" ] || t_fail "no known_hosts"
else
	t_fail "$SSHD_ERR"
	t_log "$W/sshd/sshd.log"
fi
t_end
if [ "$FAILED" != 0 ]; then
	# Nothing below can run without it: each fails, naming why.
	# shellcheck disable=SC2086 # a word list
	[ $# -gt 0 ] || set -- $ALL
	for sc in "$@"; do
		t_begin "$sc"
		t_fail "no sshd: $SSHD_ERR"
		t_end
	done
	t_finish
fi

# lssh LOG ARGS...: $SSH_CMD 127.0.0.1 ARGS in the foreground, bounded
# (30 s); SRC = its status, ST = seconds.
lssh() {
	local log=$1
	shift
	# shellcheck disable=SC2086 # SSH_CMD: words
	run_bounded 30 "$log" $SSH_CMD 127.0.0.1 "$@"
}

s_run() {
	t_begin "ssh runs a command: its stdout, stderr and exit status come back"
	# shellcheck disable=SC2086
	timeout -s KILL 30 $SSH_CMD 127.0.0.1 'echo out; echo err >&2; exit 7' \
		>"$W/run.out" 2>"$W/run.err" </dev/null
	SRC=$?
	[ "$SRC" = 7 ] || t_fail "ssh exit $SRC, want 7 (the command's)"
	[ "$(cat "$W/run.out")" = out ] || t_fail "stdout '$(cat "$W/run.out")', want 'out'"
	grep -qx err "$W/run.err" || t_fail "stderr lacks 'err'"
	t_log "$W/run.out" "$W/run.err" "$SSHD_LOG"
	t_end
}

s_args() {
	t_begin "ssh as rdcp runs it (sh -c \"\$RSH \\\"\\\$@\\\"\" rdcp HOST CMD ARGS): the command found in the test's PATH"
	timeout -s KILL 30 sh -c "$SSH_CMD \"\$@\"" rdcp 127.0.0.1 \
		rdcp-ssh-probe --server x >"$W/args.log" 2>&1 </dev/null
	SRC=$?
	[ "$SRC" = 0 ] || t_fail "exit $SRC"
	grep -qx '<--server><x>' "$W/args.log" || t_fail "remote tool's output: $(head -n1 "$W/args.log")"
	t_log "$W/args.log"
	t_end
}

s_stream() {
	t_begin "stdin to stdout through the remote cat: a MiB of random bytes, identical"
	head -c 1048576 /dev/urandom >"$W/mib"
	# shellcheck disable=SC2086
	timeout -s KILL 60 $SSH_CMD 127.0.0.1 cat <"$W/mib" >"$W/mib.back" 2>"$W/stream.err"
	SRC=$?
	[ "$SRC" = 0 ] || t_fail "exit $SRC"
	cmp -s "$W/mib" "$W/mib.back" || t_fail "bytes differ ($(stat -c %s "$W/mib.back") back)"
	t_log "$W/stream.err"
	t_end
}

s_home() {
	t_begin "relative remote paths land in the throwaway remote home ($SSH_REMOTE_HOME)"
	rm -f "$SSH_REMOTE_HOME/rdcp-ssh-probe.$$"
	lssh "$W/home.log" "echo probe >rdcp-ssh-probe.$$ && pwd"
	[ "$SRC" = 0 ] || t_fail "exit $SRC"
	[ -f "$SSH_REMOTE_HOME/rdcp-ssh-probe.$$" ] ||
		t_fail "rdcp-ssh-probe.$$ not in $SSH_REMOTE_HOME (remote pwd: $(head -n1 "$W/home.log"))"
	if [ "$SSH_REMOTE_HOME" != "$(getent passwd "$(id -un)" | cut -d: -f6)" ] &&
		[ -e "$(getent passwd "$(id -un)" | cut -d: -f6)/rdcp-ssh-probe.$$" ]; then
		t_fail "the probe reached the real home"
	fi
	rm -f "$SSH_REMOTE_HOME/rdcp-ssh-probe.$$"
	t_log "$W/home.log"
	t_end
}

s_alias() {
	t_begin "the ssh_config alias ($SSH_HOST_ALIAS in \$SSH_CONFIG) reaches the same sshd"
	run_bounded 30 "$W/alias.log" ssh -F "$SSH_CONFIG" "$SSH_HOST_ALIAS" echo alias-ok
	[ "$SRC" = 0 ] || t_fail "exit $SRC"
	grep -qx alias-ok "$W/alias.log" || t_fail "no output"
	t_log "$W/alias.log"
	t_end
}

# refused WHAT LOG PATTERN CMD...: CMD (an ssh that must be refused) with
# its stdin held open: exit 255 within 10 s, PATTERN in its output, the
# command (which would create $W/ran) never run.
refused() {
	local what=$1 log=$2 pat=$3
	shift 3
	rm -f "$W/ran"
	exec 7<>"$W/hold"
	run_bounded 30 "$log" "$@" 127.0.0.1 "touch $W/ran" <&7
	exec 7>&-
	[ "$SRC" = 255 ] || t_fail "$what: ssh exit $SRC, want 255"
	[ "${ST%.*}" -lt 10 ] || t_fail "$what: took ${ST}s"
	grep -Eqi "$pat" "$log" || t_fail "$what: no '$pat' in ssh's output"
	[ ! -e "$W/ran" ] || t_fail "$what: the command ran"
	echo "# $what: exit $SRC after ${ST}s: $(grep -Ei "$pat" "$log" | head -n1)"
	t_log "$log"
}
rm -f "$W/hold"
mkfifo "$W/hold"

s_hostkey() {
	t_begin "a wrong host key: BatchMode fails at once, exit 255, nothing run"
	# shellcheck disable=SC2086
	refused "wrong host key" "$W/hostkey.log" 'host key verification failed' \
		$SSH_CMD_WRONG_HOSTKEY
	grep -q 'HOST IDENTIFICATION HAS CHANGED' "$W/hostkey.log" ||
		t_fail "ssh did not say the host key changed"
	t_end
}

s_unknownhost() {
	t_begin "an unknown host key: BatchMode fails at once (no prompt), exit 255"
	: >"$W/known_hosts.empty"
	# shellcheck disable=SC2086
	refused "unknown host key" "$W/unknown.log" 'host key verification failed' \
		${SSH_CMD/UserKnownHostsFile=$SSH_KNOWN_HOSTS/UserKnownHostsFile=$W/known_hosts.empty}
	t_end
}

s_badkey() {
	t_begin "a user key sshd does not know: BatchMode fails at once, exit 255"
	ssh-keygen -q -t ed25519 -N '' -f "$W/other_key" </dev/null >/dev/null 2>&1 ||
		t_fail "ssh-keygen failed"
	# shellcheck disable=SC2086
	refused "unknown user key" "$W/badkey.log" 'permission denied' \
		${SSH_CMD/-i $SSH_KEY/-i $W/other_key}
	t_end
}

# The behaviour rdcp --server relies on: when its ssh goes away, its stdin
# ends.
s_killed() {
	local tx r t snap
	t_begin "a killed ssh client ends the remote command reading its stdin; no session left"
	rm -f "$W/rpid"
	exec 7<>"$W/hold"
	# shellcheck disable=SC2086
	$SSH_CMD 127.0.0.1 "echo \$\$ >$W/rpid; exec cat >/dev/null" <&7 >"$W/killed.log" 2>&1 &
	tx=$!
	track "$tx"
	if wait_until 30 "$tx" test -s "$W/rpid"; then
		r=$(cat "$W/rpid")
		alive "$r" || t_fail "remote command $r not running"
		snap=$(sshd_sessions)
		[ -n "$snap" ] || t_fail "no sshd session while it runs"
		echo "$snap" | grep -qx "$r" || t_fail "remote command $r not among sshd's descendants"
		kill -9 "$tx"
		wait "$tx" 2>/dev/null
		t=$(now)
		if wait_until 10 "" gone "$r"; then
			echo "# remote command ended $(since "$t")s after ssh was killed"
		else
			t_fail "remote command $r still running 10 s after ssh was killed"
			kill -9 "$r" 2>/dev/null
		fi
		wait_until 10 "" no_descendants "$SSHD_PID" ||
			t_fail "sshd sessions left: $(sshd_sessions | tr '\n' ' ')"
		# shellcheck disable=SC2086 # a pid list
		sshd_all_gone 10 $snap || t_fail "left running: $SSHD_LEFT"
	else
		t_fail "the remote command did not start"
		kill -9 "$tx" 2>/dev/null
	fi
	exec 7>&-
	t_log "$W/killed.log"
	t_end

	# What rdcp --server must not do: a remote command that never reads
	# its stdin outlives its killed ssh (no pty, so no SIGHUP either).
	rm -f "$W/rpid"
	exec 7<>"$W/hold"
	# shellcheck disable=SC2086
	$SSH_CMD 127.0.0.1 "echo \$\$ >$W/rpid; exec sleep 30" <&7 >/dev/null 2>&1 &
	tx=$!
	track "$tx"
	if wait_until 30 "$tx" test -s "$W/rpid"; then
		r=$(cat "$W/rpid")
		snap=$(sshd_sessions)
		kill -9 "$tx"
		wait "$tx" 2>/dev/null
		# shellcheck disable=SC2086 # a pid list
		if ! sshd_all_gone 2 $snap; then
			echo "# note: a remote 'sleep' that ignores its stdin outlived its killed ssh (rdcp --server must watch its stdin): $SSHD_LEFT"
			kill -9 "$r" 2>/dev/null
		else
			echo "# note: a remote 'sleep' that ignores its stdin ended with its killed ssh"
		fi
	fi
	exec 7>&-
}

s_remoteexit() {
	local tx
	t_begin "the remote command's exit ends ssh at once, its stdin still open"
	exec 7<>"$W/hold"
	# shellcheck disable=SC2086
	$SSH_CMD 127.0.0.1 'exit 5' <&7 >"$W/rexit.log" 2>&1 &
	tx=$!
	track "$tx"
	exec 7>&-
	wait_pid "$tx" 15
	[ "$WRC" = 5 ] || t_fail "ssh exit $WRC, want 5 (124: still running after 15 s)"
	t_log "$W/rexit.log"
	t_end
}

s_netns() {
	local un=(unshare -n)
	[ "$(id -u)" = 0 ] || un=(unshare -rn)
	t_begin "in a private network namespace: sshd starts, runs a command, stops"
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout -s KILL 60 "${un[@]}" bash -c '
		ip link set lo up || exit 11
		. "$1/sshd.sh"
		sshd_start "$2" || { echo "sshd_start: $SSHD_ERR"; exit 12; }
		out=$($SSH_CMD 127.0.0.1 echo netns-ok </dev/null 2>&1)
		rc=$?
		sshd_stop
		echo "$out"
		[ "$rc" = 0 ] && [ "$out" = netns-ok ]' \
		bash "$HERE" "$W/sshd-netns" >"$W/netns.log" 2>&1
	SRC=$?
	[ "$SRC" = 0 ] || t_fail "exit $SRC (${un[*]})"
	grep -qx netns-ok "$W/netns.log" || t_fail "no output"
	t_log "$W/netns.log"
	t_end
}

s_stop() {
	local pid=$SSHD_PID port=$SSHD_PORT
	t_begin "sshd_stop: the listener and its sessions gone; ssh then fails at once (exit 255)"
	sshd_stop
	alive "$pid" && t_fail "sshd $pid still running"
	refused "no sshd" "$W/stop.log" 'refused' \
		ssh -F /dev/null -p "$port" -o BatchMode=yes -o ConnectTimeout=5
	t_end
}

run_scenarios "$ALL" "$@"
t_finish
