#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# rdcp-mpi with receivers started over ssh, on this host: a real OpenSSH
# sshd on 127.0.0.1 (tests/e2e/sshd.sh) stands for the destination nodes,
# which an ssh_config names rx1, rx2, rx3 (all 127.0.0.1), so DEST can be
# a host list, "rx[1-2]:DIR", as on a cluster. Each rank starts its own
# rdcp --server over ssh, as rdcp does for HOST:PATH, with no key file and
# no receiver running. Runs in a network namespace of its own when it can.
#
#   tests/e2e/mpi_ssh.sh [--build DIR]
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
# shellcheck disable=SC2016 # single quotes: expanded by the inner sh -c / remote shell
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
own_netns RDCP_MPI_NETNS
# shellcheck source=sshd.sh
. "$HERE/sshd.sh"
fail_early() { echo "not ok 1 - $*"; echo "1..1"; echo "0 passed, 1 failed"; exit 1; }
need_built "make all mpi" "$BUILD/rdcp" "$BUILD/rdcp-mpi"
command -v mpirun >/dev/null || fail_early "mpirun missing (apt-get install openmpi-bin)"

T=$(mktemp -d /tmp/rdcp-e2e-mpissh.XXXXXX)
cleanup() {
	sshd_stop
	pkill -9 -f "^$T/bin/rdcp" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/bin" "$T/src/tree/sub/deep" "$T/dst"
# Copies of the binaries under $T: their paths name our processes.
cp "$BUILD/rdcp" "$BUILD/rdcp-mpi" "$T/bin/"
RDCP=$T/bin/rdcp
sshd_start "$T/sshd" || fail_early "cannot start sshd: $SSHD_ERR"
# rx1..rx3 are this host, as the test's sshd; rx9 is nobody (a closed port).
CFG=$T/ssh_config
{
	sed "s/^Host .*/Host rx1 rx2 rx3/" "$SSH_CONFIG"
	printf 'Host rx9\n\tHostName 127.0.0.1\n\tPort 1\n\tConnectTimeout 5\n'
} >"$CFG"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom >"$T/src/tree/f$i"; done
for i in $(seq 1 20); do head -c $((i * 4099)) /dev/urandom >"$T/src/tree/sub/g$i"; done
head -c 30000000 /dev/urandom >"$T/src/tree/sub/deep/big"
ln -s f1 "$T/src/tree/link"

# mpi LOG NP ARGS...: rdcp-mpi under mpirun over the test's ssh, bounded.
mpi() {
	local log=$1 np=$2
	shift 2
	run_bounded 180 "$log.err" sh -c 'log=$1; shift; exec "$@" >"$log"' _ \
		"$log" mpirun --oversubscribe -np "$np" "$T/bin/rdcp-mpi" \
		-e "ssh -F $CFG" --rdcp-path "$RDCP" --transport tcp --timeout 5 "$@"
}
sessions() { grep -c "Accepted publickey" "$SSHD_LOG"; }
no_servers() { ! pgrep -f "^$RDCP --server" >/dev/null; }

t_begin "rx[1-2]:DIR: 4 ranks start 4 rdcp --server over ssh, no key, the tree verified"
before=$(sessions)
mpi "$T/push.json" 4 --json -r "$T/src/tree" "rx[1-2]:$T/dst/"
[ "$SRC" = 0 ] || t_fail "exit $SRC: $(tail -3 "$T/push.json.err")"
diff -r --no-dereference "$T/src/tree" "$T/dst/tree" >"$T/diff" 2>&1 ||
	t_fail "the copy differs: $(head -3 "$T/diff")"
[ $(($(sessions) - before)) = 4 ] ||
	t_fail "$(($(sessions) - before)) ssh sessions, want one per rank (4)"
grep '"summary"' "$T/push.json" | grep -q '"receivers":\[{[^]]*"rx1".*"rx2"' ||
	t_fail "the summary does not name receivers rx1 and rx2"
wait_until 10 "" no_servers || t_fail "an rdcp --server still runs after the job"
t_log "$T/push.json" "$T/push.json.err"
t_end

t_begin "user@rx[1-3]:DIR with --resume: 3 ranks, nothing sent again"
mpi "$T/again.json" 3 --json --resume -r "$T/src/tree" "$SSH_USER@rx[1-3]:$T/dst/"
[ "$SRC" = 0 ] || t_fail "exit $SRC: $(tail -3 "$T/again.json.err")"
sent=$(grep '"file_done"' "$T/again.json" | sed -n 's/.*"sent":\([0-9]*\).*/\1/p' |
	awk '{ s += $1; n++ } END { print n "/" s }')
[ "${sent#*/}" = 0 ] && [ "${sent%/*}" -ge 60 ] ||
	t_fail "the second run: files/bytes sent $sent, want 60+ files and 0 bytes"
grep '"summary"' "$T/again.json" | grep -q '"receiver":"'"$SSH_USER"'@rx3"' ||
	t_fail "the summary does not name $SSH_USER@rx3"
t_log "$T/again.json" "$T/again.json.err"
t_end

t_begin "rx[1-2]:DIR with --delete: rank 0's one more session over ssh removes the extras"
echo x >"$T/dst/tree/extra"
mkdir -p "$T/dst/tree/xdir"
echo y >"$T/dst/tree/xdir/y"
before=$(sessions)
mpi "$T/del.json" 4 --json --delete -r "$T/src/tree" "rx[1-2]:$T/dst/"
[ "$SRC" = 0 ] || t_fail "exit $SRC (2: --delete refused): $(tail -3 "$T/del.json.err")"
[ ! -e "$T/dst/tree/extra" ] && [ ! -e "$T/dst/tree/xdir" ] || t_fail "an extra entry is left"
diff -r --no-dereference "$T/src/tree" "$T/dst/tree" >"$T/diff" 2>&1 ||
	t_fail "the mirror differs: $(head -3 "$T/diff")"
[ $(($(sessions) - before)) = 5 ] ||
	t_fail "$(($(sessions) - before)) ssh sessions, want 5 (4 ranks, rank 0's mirror)"
[ "$(grep -c '"event":"file_deleted"' "$T/del.json")" = 3 ] ||
	t_fail "want 3 file_deleted events (extra, xdir/y, xdir)"
wait_until 10 "" no_servers || t_fail "an rdcp --server still runs after the job"
t_log "$T/del.json" "$T/del.json.err"
t_end

t_begin "a receiver ssh cannot reach: exit 12, the rank's host named"
mpi "$T/bad.json" 2 -r "$T/src/tree" "rx[1],rx9:$T/dst2/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12"
grep -q "rx9" "$T/bad.json.err" || t_fail "rx9 not named: $(tail -3 "$T/bad.json.err")"
wait_until 10 "" no_servers || t_fail "an rdcp --server still runs after the job"
t_log "$T/bad.json.err"
t_end

t_begin "--retry 1 and a receiver ssh cannot reach: tried twice, then exit 12"
mpi "$T/badr.json" 2 --retry 1 --retry-wait 0.2 -r "$T/src/tree" "rx[1],rx9:$T/dst2/"
[ "$SRC" = 12 ] || t_fail "exit $SRC, want 12 (2: --retry refused)"
grep -q "rank 1 .*rx9.*attempt 1 of 2 failed: .*trying again in" "$T/badr.json.err" ||
	t_fail "no line for the first attempt: $(tail -3 "$T/badr.json.err")"
grep -q "rank 1 .*rx9.*attempt 2 of 2 failed: .*giving up" "$T/badr.json.err" ||
	t_fail "no line giving up"
wait_until 10 "" no_servers || t_fail "an rdcp --server still runs after the job"
t_log "$T/badr.json.err"
t_end

t_begin "a malformed host list: exit 2, one line"
mpi "$T/usage.json" 2 -r "$T/src/tree" "rx[2-1]:$T/dst3/"
[ "$SRC" = 2 ] || t_fail "exit $SRC, want 2"
grep -q "range backwards" "$T/usage.json.err" || t_fail "no reason: $(cat "$T/usage.json.err")"
[ ! -e "$T/dst3" ] || t_fail "DEST was made"
t_end

echo "1..$N"
echo "$((N - FAILED)) passed, $FAILED failed"
[ "$FAILED" = 0 ]
