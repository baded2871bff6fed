#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# rdcp over ssh, end to end on this host: a real OpenSSH sshd on 127.0.0.1
# (tests/e2e/sshd.sh: throwaway host and user keys, torn down after) starts
# `rdcp --server` for each copy, exactly as on another host; the data goes
# over TCP on loopback (no RDMA here; the Soft-RoCE guests run the rdma_cm
# path, tests/e2e/scenarios.sh `ssh`). Covers push, pull, paths relative
# to the remote home, user@host, trees, --resume after a cut, remote to
# remote, --json, --check HOST, rdcp://HOST:PORT/ beside it, --retry (each
# attempt starts a new rdcp --server; ssh refused twice, then working; the
# remote rdcp stopped with SIGTERM; not past a host key refused),
# --files-from on a pull, and the
# failures: rdcp missing or too old there, a wrong host key, no key
# (BatchMode, never a prompt), ssh or the local rdcp killed mid-copy (no
# process left on either side, nothing under a final name).
#   tests/e2e/ssh.sh [--build DIR]
# TAP lines, then "N passed, N failed"; exit 0 only if all passed.
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
fail_early() { echo "not ok 1 - $*"; echo "0 passed, 1 failed"; exit 1; }
need_built "make all hooks" "$BUILD/rdcp" "$BUILD/hooks/rdcp"
for t in ssh ssh-keygen /usr/sbin/sshd timeout pgrep; do
	command -v "$t" >/dev/null 2>&1 ||
		fail_early "$t missing (package openssh-server/openssh-client, procps; make setup installs them)"
done

T=$(mktemp -d /tmp/rdcp-e2e-ssh.XXXXXX)
# shellcheck source=sshd.sh
. "$HERE/sshd.sh"
cleanup() {
	sshd_stop
	pkill -9 -f "^$T/bin/rdcp" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/bin" "$T/src/tree/sub/deep" "$T/dst"
# A copy of the binary under $T: its path names our processes (pgrep).
cp "$BUILD/rdcp" "$T/bin/rdcp"
RDCP=$T/bin/rdcp
sshd_start "$T/sshd" || fail_early "cannot start sshd: $SSHD_ERR"
# r ARGS: rdcp with the test's ssh command line and remote program.
printf '#!/bin/sh\nexec "%s" -e "%s" --rdcp-path "%s" "$@"\n' "$RDCP" "$SSH_CMD" "$RDCP" >"$T/bin/r"
chmod +x "$T/bin/r"
r() { "$T/bin/r" "$@"; }
PATH=$T/bin:$PATH
# servers ... : how many rdcp --server of ours still run.
servers() { pgrep -f "^$RDCP --server" | wc -l; }
no_servers() { [ "$(servers)" = 0 ]; }

head -c 3000000 /dev/urandom >"$T/src/f1"
head -c 100000 /dev/urandom >"$T/src/tree/a"
printf 'b\n' >"$T/src/tree/sub/b"
head -c 70000 /dev/urandom >"$T/src/tree/sub/deep/c"
ln -s a "$T/src/tree/link"
: >"$T/src/tree/empty"
head -c 200M /dev/zero >"$T/src/big"
SEND_TIMEOUT=60

t_begin "push: HOST:DIR/ over ssh, no key file, no receiver running"
run_bounded 60 "$T/push.log" r "$T/src/f1" "127.0.0.1:$T/dst/"
[ "$SRC" = 0 ] || t_fail "exit $SRC"
same "$T/src/f1" "$T/dst/f1"
grep -q "over tcp" "$T/push.log" || t_fail "no summary line over tcp"
wait_until 10 "" no_servers || t_fail "rdcp --server still runs after the copy"
t_log "$T/push.log"
t_end

t_begin "pull: HOST:FILE DEST, and user@HOST"
run_bounded 60 "$T/pull.log" r "root@127.0.0.1:$T/src/f1" "$T/dst/pulled"
[ "$SRC" = 0 ] || t_fail "exit $SRC"
same "$T/src/f1" "$T/dst/pulled"
t_log "$T/pull.log"
t_end

t_begin "an ~/.ssh/config alias: ssh resolves it, the data goes where ssh went"
run_bounded 60 "$T/alias.log" "$RDCP" -e "ssh -F $SSH_CONFIG" --rdcp-path "$RDCP" "$T/src/f1" "$SSH_HOST_ALIAS:$T/dst/alias/"
[ "$SRC" = 0 ] || t_fail "exit $SRC"
same "$T/src/f1" "$T/dst/alias/f1"
t_log "$T/alias.log"
t_end

t_begin "paths as scp: relative to the remote home, ~/ too"
rel=rdcp-e2e-ssh.$$
run_bounded 60 "$T/rel.log" r "$T/src/f1" "127.0.0.1:$rel/"
[ "$SRC" = 0 ] || t_fail "push exit $SRC"
same "$T/src/f1" "$SSH_REMOTE_HOME/$rel/f1"
run_bounded 60 "$T/rel2.log" r "127.0.0.1:~/$rel/f1" "$T/dst/fromhome"
[ "$SRC" = 0 ] || t_fail "pull exit $SRC"
same "$T/src/f1" "$T/dst/fromhome"
t_log "$T/rel.log" "$T/rel2.log"
t_end

t_begin "-r -p trees pushed and pulled over ssh"
run_bounded 60 "$T/tree.log" r -r -p "$T/src/tree" "127.0.0.1:$T/dst/t1/"
[ "$SRC" = 0 ] || t_fail "push exit $SRC"
run_bounded 60 "$T/tree2.log" r -r -p "127.0.0.1:$T/src/tree" "$T/dst/t2/"
[ "$SRC" = 0 ] || t_fail "pull exit $SRC"
for d in t1 t2; do
	diff -r --no-dereference "$T/src/tree" "$T/dst/$d/tree" >/dev/null ||
		t_fail "$d differs: $(diff -r --no-dereference "$T/src/tree" "$T/dst/$d/tree" 2>&1 | head -3)"
	[ "$(readlink "$T/dst/$d/tree/link")" = a ] || t_fail "$d: symlink not kept"
done
t_log "$T/tree.log" "$T/tree2.log"
t_end

t_begin "--files-from on a pull over ssh: names beneath HOST:DIR (absolute, or in the home), a '..' refused, -r -0"
printf 'a\nsub/deep/c\n../f1\n' >"$T/list1"
run_bounded 60 "$T/fl1.log" r --files-from="$T/list1" "127.0.0.1:$T/src/tree" "$T/dst/fl1"
[ "$SRC" = 9 ] || t_fail "exit $SRC, want 9"
same "$T/src/tree/a" "$T/dst/fl1/a"
same "$T/src/tree/sub/deep/c" "$T/dst/fl1/sub/deep/c"
[ -z "$(find "$T/dst/fl1" -name f1)" ] || t_fail "'../f1' copied"
grep -q "'../f1' in the file list: not a path beneath" "$T/fl1.log" || t_fail "no line refusing '../f1'"
printf 'sub\0link\0' >"$T/list2"
run_bounded 60 "$T/fl2.log" r -r -0 --files-from=- "127.0.0.1:$T/src/tree" "$T/dst/fl2" <"$T/list2"
[ "$SRC" = 0 ] || t_fail "-r -0 exit $SRC"
same "$T/src/tree/sub/b" "$T/dst/fl2/sub/b"
same "$T/src/tree/sub/deep/c" "$T/dst/fl2/sub/deep/c"
same "$T/src/tree/a" "$T/dst/fl2/link" # a listed symlink is followed, as a SRC
echo f1 >"$T/list3"
run_bounded 60 "$T/fl3.log" r --files-from="$T/list3" "127.0.0.1:$rel" "$T/dst/fl3"
[ "$SRC" = 0 ] || t_fail "in the home: exit $SRC"
same "$T/src/f1" "$T/dst/fl3/f1"
wait_until 10 "" no_servers || t_fail "rdcp --server still runs after the copies"
t_log "$T/fl1.log" "$T/fl2.log" "$T/fl3.log"
t_end

t_begin "-n, -u, --compress, --encrypt, --bwlimit over ssh; --port-range honoured"
rm -rf "$T/dst/opt"; mkdir -p "$T/dst/opt"
run_bounded 60 "$T/opt1.log" r -v --port-range 40100-40109 --encrypt --compress=3 --bwlimit 50M "$T/src/f1" "127.0.0.1:$T/dst/opt/"
[ "$SRC" = 0 ] || t_fail "--encrypt --compress exit $SRC"
same "$T/src/f1" "$T/dst/opt/f1"
port=$(sed -n 's/.*listening for TCP connections on .*:\([0-9]*\)$/\1/p' "$T/opt1.log" | head -n1)
[ -n "$port" ] && [ "$port" -ge 40100 ] && [ "$port" -le 40109 ] ||
	t_fail "the remote listened on port ${port:-?}, not within --port-range 40100-40109"
echo changed >"$T/dst/opt/f1"
run_bounded 60 "$T/opt2.log" r --json -n "$T/src/f1" "127.0.0.1:$T/dst/opt/"
[ "$SRC" = 0 ] || t_fail "-n exit $SRC"
[ "$(cat "$T/dst/opt/f1")" = changed ] || t_fail "-n replaced the file"
touch -d '2000-01-01' "$T/dst/opt/f1"
run_bounded 60 "$T/opt3.log" r -u "$T/src/f1" "127.0.0.1:$T/dst/opt/"
[ "$SRC" = 0 ] || t_fail "-u exit $SRC"
same "$T/src/f1" "$T/dst/opt/f1"
t_log "$T/opt1.log" "$T/opt2.log" "$T/opt3.log"
t_end

t_begin "--resume after the local rdcp is killed mid-copy: no process left, then byte-identical"
rm -rf "$T/dst/res"; mkdir -p "$T/dst/res"
bg_run "$T/res1.log" "$RDCP" -e "$SSH_CMD" --rdcp-path "$RDCP" --resume --bwlimit 40M "$T/src/big" "127.0.0.1:$T/dst/res/"
wait_partfile "$T/dst/res" big "$TX" 20 || t_fail "no transfer under way"
sleep 1
kill -9 "$TX"
wait "$TX" 2>/dev/null
wait_until 15 "" no_servers || t_fail "rdcp --server still runs 15 s after its client was killed"
[ -e "$T/dst/res/big" ] && t_fail "a partial file has the final name"
[ -n "$(temps "$T/dst/res")" ] || t_fail "no temporary kept for --resume"
run_bounded 60 "$T/res2.log" r --json --resume "$T/src/big" "127.0.0.1:$T/dst/res/"
[ "$SRC" = 0 ] || t_fail "resume exit $SRC"
same "$T/src/big" "$T/dst/res/big"
sent=$(jdone "$T/res2.log" "$T/src/big" sent)
[ -n "$sent" ] && [ "$sent" -lt 209715200 ] || t_fail "resume sent ${sent:-?} bytes, want less than all"
t_log "$T/res1.log" "$T/res2.log"
t_end

t_begin "ssh killed mid-copy: exit 11 within bounds, nothing placed, no process left"
rm -rf "$T/dst/cut"; mkdir -p "$T/dst/cut"
bg_run "$T/cut.log" "$RDCP" -e "$SSH_CMD" --rdcp-path "$RDCP" --bwlimit 40M "$T/src/big" "127.0.0.1:$T/dst/cut/"
wait_partfile "$T/dst/cut" big "$TX" 20 || t_fail "no transfer under way"
pkill -9 -P "$TX" -f "^ssh " || t_fail "no ssh child to kill"
wait_pid "$TX" 30
rc=$WRC
[ "$rc" = 11 ] || t_fail "exit $rc, want 11 (peer lost)"
grep -q "ssh connection to '127.0.0.1' ended mid-copy" "$T/cut.log" || t_fail "no line saying ssh ended"
wait_until 15 "" no_servers || t_fail "rdcp --server still runs"
[ -e "$T/dst/cut/big" ] && t_fail "a partial file has the final name"
no_temp "$T/dst/cut" 10
t_log "$T/cut.log"
t_end

t_begin "--delete over ssh: a mirror, extras removed beneath DEST only, --dry-run first"
rm -rf "$T/dst/mir"; mkdir -p "$T/dst/mir/tree/old" "$T/dst/mir/keep"
echo x >"$T/dst/mir/tree/old/x"
echo y >"$T/dst/mir/tree/extra"
echo z >"$T/dst/mir/keep/z"
run_bounded 60 "$T/mir0.log" r -r --delete --dry-run "$T/src/tree" "127.0.0.1:$T/dst/mir/"
[ "$SRC" = 0 ] || t_fail "dry run exit $SRC"
[ -e "$T/dst/mir/tree/extra" ] || t_fail "the dry run deleted"
grep -q "^delete .*extra" "$T/mir0.log" || t_fail "the dry run does not list extra"
run_bounded 60 "$T/mir.log" r -r --delete "$T/src/tree" "127.0.0.1:$T/dst/mir/"
[ "$SRC" = 0 ] || t_fail "exit $SRC"
[ -e "$T/dst/mir/tree/extra" ] && t_fail "extra not deleted"
[ -e "$T/dst/mir/tree/old" ] && t_fail "old/ not deleted"
[ -e "$T/dst/mir/keep/z" ] || t_fail "deleted outside the directory sent"
diff -r --no-dereference "$T/src/tree" "$T/dst/mir/tree" >/dev/null || t_fail "not a mirror"
t_log "$T/mir0.log" "$T/mir.log"
t_end

t_begin "remote to remote: h1:SRC h2:DEST, --json relayed, filters applied there"
rm -rf "$T/dst/r2r"
run_bounded 60 "$T/r2r.log" r --json -r --exclude 'c' "127.0.0.1:$T/src/tree" "127.0.0.1:$T/dst/r2r/"
[ "$SRC" = 0 ] || t_fail "exit $SRC"
same "$T/src/tree/a" "$T/dst/r2r/tree/a"
same "$T/src/tree/sub/b" "$T/dst/r2r/tree/sub/b"
[ -e "$T/dst/r2r/tree/sub/deep/c" ] && t_fail "--exclude c not applied on the sending host"
[ "$(jget "$T/r2r.log" summary result)" = ok ] || t_fail "no ok summary event relayed"
wait_until 10 "" no_servers || t_fail "an rdcp --server still runs"
t_log "$T/r2r.log"
t_end

t_begin "rdcp missing on the host: exit 12, says what to install, --json error event"
run_bounded 60 "$T/missing.log" "$RDCP" --json -e "$SSH_CMD" --rdcp-path /nonexistent/rdcp "$T/src/f1" "127.0.0.1:$T/dst/m/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12"
grep -q "not found on '127.0.0.1'.*install rdcp there" "$T/missing.log" || t_fail "no line saying rdcp is missing"
grep -q '"event":"error","class":"remote-start","exit":12' "$T/missing.log" || t_fail "no --json error event"
t_log "$T/missing.log"
t_end

t_begin "remote to remote, rdcp missing there: exit 12 with --json error and summary events"
run_bounded 60 "$T/r2rmiss.log" "$RDCP" --json -e "$SSH_CMD" --rdcp-path /nonexistent/rdcp "127.0.0.1:$T/src/f1" "127.0.0.1:$T/dst/m2/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12"
grep -q '"event":"error","class":"remote-start","exit":12' "$T/r2rmiss.log" || t_fail "no --json error event"
grep -q '"event":"summary".*"exit":12' "$T/r2rmiss.log" || t_fail "no --json summary event"
t_log "$T/r2rmiss.log"
t_end

t_begin "an older rdcp there (no --server): exit 12, says to install the same version"
printf '#!/bin/sh\necho "rdcp: unrecognized option '"'"'--server'"'"'" >&2\necho "Try '"'"'rdcp --help'"'"'" >&2\nexit 2\n' >"$T/bin/old-rdcp"
chmod +x "$T/bin/old-rdcp"
run_bounded 60 "$T/old.log" "$RDCP" -e "$SSH_CMD" --rdcp-path "$T/bin/old-rdcp" "$T/src/f1" "127.0.0.1:$T/dst/m/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12"
grep -q "does not take --server (it said: rdcp: unrecognized option" "$T/old.log" || t_fail "no line naming the old version"
t_log "$T/old.log"
t_end

t_begin "a wrong host key: exit 12 in seconds, never copied"
run_bounded 30 "$T/hostkey.log" "$RDCP" -e "$SSH_CMD_WRONG_HOSTKEY" --rdcp-path "$RDCP" "$T/src/f1" "127.0.0.1:$T/dst/hk/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12"
grep -q "ssh to '127.0.0.1' failed" "$T/hostkey.log" || t_fail "no line saying ssh failed"
[ -e "$T/dst/hk/f1" ] && t_fail "copied despite the host key"
t_log "$T/hostkey.log"
t_end

t_begin "no usable key and no terminal: BatchMode, exit 12, no prompt waited on"
run_bounded 30 "$T/batch.log" setsid "$RDCP" -e "ssh -p $SSHD_PORT -i $T/none -o UserKnownHostsFile=$SSH_KNOWN_HOSTS -o IdentitiesOnly=yes -F /dev/null" --rdcp-path "$RDCP" "$T/src/f1" "127.0.0.1:$T/dst/b/" </dev/null
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12 (a prompt would hang until killed: 137)"
t_log "$T/batch.log"
t_end

t_begin "--check HOST over ssh: says how the data would go"
run_bounded 60 "$T/check.log" r --check 127.0.0.1
grep -q "^ok .*started on '127.0.0.1' over ssh" "$T/check.log" || t_fail "no line on the rdcp started over ssh"
grep -q "ssh reached it at 127.0.0.1" "$T/check.log" || t_fail "no line on the address ssh used"
grep -q "^PROBLEM no RDMA route to '127.0.0.1'.*over TCP" "$T/check.log" || t_fail "no line saying the data would go over TCP"
wait_until 10 "" no_servers || t_fail "rdcp --server still runs after --check"
t_log "$T/check.log"
t_end

t_begin "a running receiver beside ssh: rdcp://HOST:PORT/PATH, HOST::PATH, --daemon"
P=$((SSHD_PORT + 1))
"$RDCP" --keygen "$T/key" >/dev/null 2>&1
mkdir -p "$T/dst/daemon"
"$RDCP" --listen -v --transport tcp --key-file "$T/key" --root "$T/dst/daemon" --port $P >"$T/rx.log" 2>&1 &
RX=$!
wait_until 10 "$RX" logged "$T/rx.log" "listening" || t_fail "the receiver did not start listening"
run_bounded 30 "$T/d1.log" "$RDCP" --key-file "$T/key" --transport tcp "$T/src/f1" "rdcp://127.0.0.1:$P/url/"
[ "$SRC" = 0 ] || t_fail "rdcp:// exit $SRC"
same "$T/src/f1" "$T/dst/daemon/url/f1"
run_bounded 30 "$T/d2.log" "$RDCP" --key-file "$T/key" --transport tcp --port $P "$T/src/f1" "127.0.0.1::dd/"
[ "$SRC" = 0 ] || t_fail "HOST:: exit $SRC"
same "$T/src/f1" "$T/dst/daemon/dd/f1"
run_bounded 30 "$T/d3.log" "$RDCP" --daemon --key-file "$T/key" --transport tcp --port $P "$T/src/f1" "127.0.0.1:dm/"
[ "$SRC" = 0 ] || t_fail "--daemon exit $SRC"
same "$T/src/f1" "$T/dst/daemon/dm/f1"
kill "$RX" 2>/dev/null
wait "$RX" 2>/dev/null
t_log "$T/d1.log" "$T/d2.log" "$T/d3.log"
t_end

t_begin "--retry over ssh: the remote drops the first session mid-file, a new rdcp --server resumes"
# The first rdcp --server (the test-hooks build) ends its session at its
# 20th ring write as a cut link would; the retry starts another one.
cp "$BUILD/hooks/rdcp" "$T/bin/rdcp-hooks"
printf '#!/bin/sh\nif [ ! -e "%s" ]; then : >"%s"; export RDCP_TEST_DROP_AT_WRITE=20; fi\nexec "%s" "$@"\n' \
	"$T/dropped" "$T/dropped" "$T/bin/rdcp-hooks" >"$T/bin/rdcp-drop"
chmod +x "$T/bin/rdcp-drop"
run_bounded 60 "$T/retry.log" "$RDCP" -e "$SSH_CMD" --rdcp-path "$T/bin/rdcp-drop" \
	--chunk-size 64K --retry 3 --retry-wait 0.2 --json "$T/src/f1" "127.0.0.1:$T/dst/retry/"
[ "$SRC" = 0 ] || t_fail "exit $SRC"
same "$T/src/f1" "$T/dst/retry/f1"
[ -e "$T/dropped" ] || t_fail "the first remote rdcp did not run"
[ "$(jattempts "$T/retry.log")" = "peer-lost/11/true " ] ||
	t_fail "attempts: '$(jattempts "$T/retry.log")', want peer-lost/11/true"
sent=$(jlastdone "$T/retry.log" "$T/src/f1" sent)
[ -n "$sent" ] && [ "$sent" -lt 3000000 ] || t_fail "the retry sent ${sent:-?} of 3000000 bytes: not resumed"
wait_until 10 "" sh -c "! pgrep -f '^$T/bin/rdcp-hooks' >/dev/null" || t_fail "an rdcp --server still runs"
t_log "$T/retry.log"
t_end

t_begin "--retry over ssh: ssh cannot connect twice (connection refused, as while a host reboots), the third attempt copies"
# An ssh command line that fails as OpenSSH does when nothing listens,
# the first two times.
# shellcheck disable=SC2016 # the script written is the ssh stand-in's
printf '#!/bin/sh\nn=$(cat "%s" 2>/dev/null || echo 0)\necho $((n + 1)) >"%s"\nif [ "$n" -lt 2 ]; then\n\techo "ssh: connect to host 127.0.0.1 port 22: Connection refused" >&2\n\texit 255\nfi\nexec %s "$@"\n' \
	"$T/refused" "$T/refused" "$SSH_CMD" >"$T/bin/ssh-refused"
chmod +x "$T/bin/ssh-refused"
run_bounded 60 "$T/refused.log" "$RDCP" -e "$T/bin/ssh-refused" --rdcp-path "$RDCP" \
	--retry 3 --retry-wait 0.2 --json "$T/src/f1" "127.0.0.1:$T/dst/refused/"
[ "$SRC" = 0 ] || t_fail "exit $SRC, want 0"
same "$T/src/f1" "$T/dst/refused/f1"
[ "$(jattempts "$T/refused.log")" = "remote-start/12/true remote-start/12/true " ] ||
	t_fail "attempts: '$(jattempts "$T/refused.log")', want remote-start/12/true twice"
[ "$(grep -c 'trying again in' "$T/refused.log")" = 2 ] || t_fail "not one line per failed attempt"
t_log "$T/refused.log"
t_end

t_begin "--retry over ssh: a host key refused is not tried again (exit 12, one attempt)"
run_bounded 30 "$T/hostkey2.log" "$RDCP" -e "$SSH_CMD_WRONG_HOSTKEY" --rdcp-path "$RDCP" \
	--retry 3 --retry-wait 5 --json "$T/src/f1" "127.0.0.1:$T/dst/hk2/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12"
[ "${ST%.*}" -lt 5 ] || t_fail "took ${ST}s: it waited to retry"
[ "$(jattempts "$T/hostkey2.log")" = "remote-start/12/false " ] ||
	t_fail "attempts: '$(jattempts "$T/hostkey2.log")', want remote-start/12/false"
grep -q 'not retrying' "$T/hostkey2.log" || t_fail "no 'not retrying' line"
t_log "$T/hostkey2.log"
t_end

t_begin "--retry over ssh: the remote rdcp stopped with SIGTERM (twice: at once) mid-copy is tried again, exit 0 (was: 130)"
rm -rf "$T/dst/term"; mkdir -p "$T/dst/term"
bg_run "$T/term.log" "$RDCP" -e "$SSH_CMD" --rdcp-path "$RDCP" --chunk-size 64K --bwlimit 1M \
	--retry 3 --retry-wait 0.2 --json "$T/src/f1" "127.0.0.1:$T/dst/term/"
if wait_partfile "$T/dst/term" f1 "$TX" 20; then
	sleep 0.5
	srv=$(pgrep -f "^$RDCP --server" | head -n1)
	if [ -n "$srv" ]; then
		kill -TERM "$srv"
		sleep 0.2
		kill -TERM "$srv" 2>/dev/null
	else
		t_fail "no rdcp --server found"
	fi
	wait_pid "$TX" 60
	[ "$WRC" = 0 ] || t_fail "exit $WRC, want 0"
	same "$T/src/f1" "$T/dst/term/f1"
	case "$(jattempts "$T/term.log")" in
	peer-lost/11/true*) ;;
	*) t_fail "attempts: '$(jattempts "$T/term.log")', want peer-lost/11/true first" ;;
	esac
	grep -q '"exit":130' "$T/term.log" && t_fail "an exit 130 reported"
else
	t_fail "no transfer under way"
fi
kill -9 "$TX" 2>/dev/null
wait_until 10 "" no_servers || t_fail "an rdcp --server still runs"
t_log "$T/term.log"
t_end

t_begin "a copy over ssh has no fixed wait after the data: rdcp exits within 0.4 s of the remote rdcp's last line (was 1 s)"
# The remote rdcp's last line (-v: "resources: ...") and rdcp's exit, as
# the end of its stderr, timed here; the best of three.
mkdir -p "$T/dst/tail"
best=""
for _ in 1 2 3; do
	gap=$( { r -v "$T/src/tree/sub/b" "127.0.0.1:$T/dst/tail/" 2>&1 >/dev/null; } |
		{ t1=""
		while IFS= read -r l; do
			case $l in "127.0.0.1: rdcp: resources:"*) t1=$EPOCHREALTIME ;; esac
		done
		[ -n "$t1" ] && awk -v a="$t1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'; })
	echo "# from the remote's last line to rdcp's exit: ${gap:-?} ms"
	[ -n "$gap" ] && { [ -z "$best" ] || [ "$gap" -lt "$best" ]; } && best=$gap
done
[ -n "$best" ] || t_fail "no remote 'resources:' line seen"
[ -z "$best" ] || [ "$best" -lt 400 ] || t_fail "rdcp ended ${best} ms after the remote rdcp at best, want < 400"
same "$T/src/tree/sub/b" "$T/dst/tail/b"
t_end

t_begin "Ctrl-C on a remote-to-remote copy: exit 130, no false 'ssh failed' (was: exit 12 quoting a progress line)"
# A terminal's Ctrl-C: SIGINT to the whole process group, ssh included.
rm -rf "$T/dst/r2rint"; mkdir -p "$T/dst/r2rint"
bg_run "$T/r2rint.log" setsid "$T/bin/r" --progress --bwlimit 20M "127.0.0.1:$T/src/big" "127.0.0.1:$T/dst/r2rint/"
if wait_partfile "$T/dst/r2rint" big "$TX" 20; then
	sleep 0.5
	kill -INT -- "-$TX"
	wait_pid "$TX" 20
	[ "$WRC" = 130 ] || t_fail "exit $WRC, want 130"
	grep -qi "failed" "$T/r2rint.log" && t_fail "a failure reported: $(grep -i failed "$T/r2rint.log" | head -n1)"
	grep -q "interrupted" "$T/r2rint.log" || t_fail "no 'interrupted' line"
	[ -e "$T/dst/r2rint/big" ] && t_fail "a partial file has the final name"
else
	t_fail "no transfer under way"
fi
kill -9 "$TX" 2>/dev/null
wait_until 15 "" no_servers || t_fail "an rdcp --server still runs"
t_log "$T/r2rint.log"
t_end

t_begin "a remote error is printed once, without stacked address prefixes (DEST beneath a file; a missing source; a tree's directory)"
run_bounded 60 "$T/once1.log" r -r "$T/src/tree" "127.0.0.1:$T/src/f1/x/"
[ "$SRC" = 2 ] || t_fail "push: exit $SRC, want 2"
[ "$(grep -c "cannot create directory" "$T/once1.log")" = 1 ] ||
	t_fail "push: the error printed $(grep -c "cannot create directory" "$T/once1.log") times, want once"
grep -Eq '[0-9]: [0-9.]+:[0-9]+: ' "$T/once1.log" && t_fail "push: stacked prefixes: $(grep -E '[0-9]: [0-9.]+:[0-9]+: ' "$T/once1.log")"
run_bounded 60 "$T/once2.log" r "127.0.0.1:$T/src/nope" "$T/dst/"
[ "$SRC" = 7 ] || t_fail "pull: exit $SRC, want 7"
[ "$(grep -c "cannot stat" "$T/once2.log")" = 1 ] ||
	t_fail "pull: the error printed $(grep -c "cannot stat" "$T/once2.log") times, want once"
# A directory that cannot be made (a file has its name): said once, and
# the entries beneath it counted in one line, not one line each.
rm -rf "$T/dst/coll"; mkdir -p "$T/dst/coll"; echo x >"$T/dst/coll/tree"
run_bounded 60 "$T/once3.log" r -r "$T/src/tree" "127.0.0.1:$T/dst/coll/"
[ "$SRC" = 7 ] || t_fail "tree: exit $SRC, want 7"
[ "$(grep -c "cannot create directory" "$T/once3.log")" = 1 ] ||
	t_fail "tree: the directory's error printed $(grep -c "cannot create directory" "$T/once3.log") times, want once"
grep -Eq '^rdcp: .*tree: [0-9]+ entries beneath it failed too$' "$T/once3.log" ||
	t_fail "tree: no one line counting the entries beneath"
[ "$(grep -c '^rdcp: ' "$T/once3.log")" -le 3 ] || t_fail "tree: $(grep -c '^rdcp: ' "$T/once3.log") lines, want 3 at most"
t_log "$T/once1.log" "$T/once2.log" "$T/once3.log"
t_end

t_begin "no rdcp process of this test is left on either side"
sleep 1
left=$(pgrep -af "^$RDCP" | head -3)
[ -z "$left" ] || t_fail "still running: $left"
t_end

echo "1..$N"
echo "$((N - FAILED)) passed, $FAILED failed"
[ "$FAILED" = 0 ]
