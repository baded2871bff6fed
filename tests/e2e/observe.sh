#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The receiver's audit trail and metrics (issue #24), on this host over TCP
# loopback with fixed ports (in a network namespace of its own when root:
# lib.sh's own_netns): a receiver with --metrics and --audit-log -v, a push
# scraped with curl while it runs and after (counters moved by its bytes
# and files; promtool check metrics on each scrape), a wrong key counted
# as a refusal by reason, the JSON lines parsed by python3 field by field,
# SIGHUP reopening a rotated log, and the endpoint probed as an adversary
# would (a long request line, a slow client, path traversal, more
# connections than it serves, paths or keys in what it says) while copies
# go on. TAP out, 'N passed, N failed' last.
#
#   tests/e2e/observe.sh [--build DIR]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
own_netns RDCP_OBSERVE_NETNS "$@"
need_built "make all" "$BUILD/rdcp"
RDCP=$(cd "$BUILD" && pwd)/rdcp
T=$(mktemp -d /tmp/rdcp-observe.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
export XDG_CONFIG_HOME=$T/cfg
PORT=${RDCP_OBSERVE_PORT:-7700}
MPORT=$((PORT + 1))
URL=http://127.0.0.1:$MPORT/metrics
N=0 F=0
ok() { N=$((N + 1)); echo "ok $N - $1"; }
nok() { N=$((N + 1)) F=$((F + 1)); echo "not ok $N - $1"; shift; for l in "$@"; do echo "# $l"; done; }
check() { # NAME COMMAND...: passes when COMMAND succeeds
	local name=$1
	shift
	if "$@" >"$T/out" 2>&1; then ok "$name"; else nok "$name" "$(head -c 2000 "$T/out")"; fi
}
# metric FILE SAMPLE: the value of the sample line that starts with SAMPLE
metric() { awk -v s="$2 " 'index($0, s) == 1 { print $NF; exit }' "$1"; }
scrape() { curl -sf --max-time 5 "$URL" >"$1"; }

mkdir -p "$T/root" "$T/src" "$T/cfg"
"$RDCP" --keygen "$T/key" >/dev/null 2>&1
"$RDCP" --keygen "$T/other.key" >/dev/null 2>&1
for i in 1 2 3 4 5 6; do head -c 4194304 /dev/urandom >"$T/src/f$i"; done
printf 'x' >"$T/src/we\"ird
name"
"$RDCP" --listen -v --transport tcp --key-file "$T/key" --root "$T/root" \
	--port "$PORT" --metrics "127.0.0.1:$MPORT" --audit-log "$T/audit.jsonl" \
	2>"$T/rx.log" &
RX=$!
for _ in $(seq 50); do curl -sf -o /dev/null "$URL" && break; sleep 0.1; done
check "the endpoint answers GET /metrics" scrape "$T/s0"
if command -v promtool >/dev/null 2>&1; then
	check "promtool check metrics: an idle receiver's" promtool check metrics <"$T/s0"
else
	nok "promtool missing (packaging/build-deps.sh installs prometheus)"
fi

# A push of six 4 MiB files at 8 MB/s (about 3 s), scraped while it runs.
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" --bwlimit 8M \
	"$T"/src/f? 127.0.0.1::dst/ 2>"$T/tx.log" &
TX=$!
during=''
for _ in $(seq 100); do
	scrape "$T/s1" || break
	if [ "$(metric "$T/s1" rdcp_sessions_active)" = 1 ] &&
		[ "$(metric "$T/s1" 'rdcp_bytes_total{client="site-key",module="-",direction="in"}')" -gt 0 ]; then
		during=1
		break
	fi
	sleep 0.1
done
wait $TX
txrc=$?
if [ -n "$during" ]; then
	b=$(metric "$T/s1" 'rdcp_bytes_total{client="site-key",module="-",direction="in"}')
	if [ "$b" -gt 0 ] && [ "$b" -lt $((6 * 4194304)) ] &&
		[ "$(metric "$T/s1" rdcp_ring_slots)" -gt 0 ]; then
		ok "scraped while the copy ran: 1 session, $b bytes so far, its ring counted"
	else
		nok "scraped while the copy ran" "$(cat "$T/s1")"
	fi
else
	nok "no scrape saw the copy running" "$(cat "$T/s1" 2>/dev/null)"
fi
check "promtool check metrics: a scrape mid-copy" promtool check metrics <"$T/s1"
check "the push went (exit $txrc)" test "$txrc" = 0
scrape "$T/s2"
check "promtool check metrics: after" promtool check metrics <"$T/s2"
want() { # SAMPLE VALUE
	local v
	v=$(metric "$T/s2" "$1")
	if [ "$v" = "$2" ]; then ok "after: $1 = $2"; else nok "after: $1 = $v, want $2"; fi
}
want rdcp_sessions_active 0
want 'rdcp_sessions_total{client="site-key",module="-"}' 1
want 'rdcp_bytes_total{client="site-key",module="-",direction="in"}' $((6 * 4194304))
want 'rdcp_files_total{client="site-key",module="-",direction="in"}' 6
want 'rdcp_device_bytes_total{device="tcp",transport="tcp",direction="in"}' $((6 * 4194304))
want rdcp_ring_slots 0

# A pull of one file, a name with a quote and a line feed, a wrong key.
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" "$T/src/we\"ird
name" 127.0.0.1::dst/ 2>>"$T/tx.log"
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" 127.0.0.1::dst/f1 "$T/pulled" 2>>"$T/tx.log"
check "the pulled file is the sent one" cmp "$T/src/f1" "$T/pulled"
"$RDCP" -q --transport tcp --key-file "$T/other.key" --port "$PORT" "$T/src/f1" 127.0.0.1::dst/ 2>/dev/null
check "a wrong key exits 4" test $? = 4
scrape "$T/s3"
want3() {
	local v
	v=$(metric "$T/s3" "$1")
	if [ "$v" = "$2" ]; then ok "$3: $1 = $2"; else nok "$3: $1 = $v, want $2"; fi
}
want3 'rdcp_sessions_refused_total{reason="auth"}' 1 "the wrong key refused by reason"
want3 'rdcp_bytes_total{client="site-key",module="-",direction="out"}' 4194304 "the pull counted out"
want3 'rdcp_files_total{client="site-key",module="-",direction="in"}' 7 "the odd name counted in"
check "no path, name or key in a scrape" sh -c "! grep -Eq 'dst|f1|ird|$T|$(od -An -tx1 "$T/key" | tr -d ' \n' | cut -c1-16)' '$T/s3'"

# The JSON lines: every line parsed; the fields of each event.
check "the audit log's JSON lines have the right fields" python3 - "$T/audit.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
sess = [e for e in ev if e["event"] == "session"]
files = [e for e in ev if e["event"] == "file"]
common = {"event", "time", "peer", "client", "module", "op"}
for e in ev:
    assert common <= e.keys(), e
    assert e["client"] == "site-key" and e["module"] == "-", e
    assert e["peer"].startswith("127.0.0.1:"), e
    assert e["time"].endswith("Z"), e
assert len(sess) == 3, sess
push, odd, pull = sess
assert push["op"] == "push" and push["files"] == 6 and push["failed"] == 0, push
assert push["bytes"] == 6 * 4194304 and push["result"] == "ok", push
assert isinstance(push["seconds"], float) and push["seconds"] > 1, push
assert pull["op"] == "pull" and pull["bytes"] == 4194304, pull
pushed = sorted(f["path"] for f in files if f["op"] == "push")
assert pushed == sorted(["dst/f%d" % i for i in range(1, 7)] + ['dst/we"ird\nname']), pushed
for f in files:
    assert f["result"] == "ok" and f["type"] == "file", f
    assert f["bytes"] == (1 if "ird" in f["path"] else 4194304), f
assert [f["path"] for f in files if f["op"] == "pull"] == ["dst/f1"], files
PY
check "-v logs one line per file" grep -Eq "^rdcp: file peer=127\.0\.0\.1:[0-9]+ client=site-key module=- op=push path='dst/f3' bytes=4194304 result=ok$" "$T/rx.log"

# logrotate: moved, SIGHUP, the next line goes to a new file.
mv "$T/audit.jsonl" "$T/audit.jsonl.1"
kill -HUP $RX
sleep 1
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" "$T/src/f2" 127.0.0.1::again/ 2>>"$T/tx.log"
check "SIGHUP: the receiver goes on and writes a new audit log" \
	sh -c "kill -0 $RX && grep -q '\"path\":\"again/f2\"' '$T/audit.jsonl' && ! grep -q again '$T/audit.jsonl.1'"

# SIGHUPs in a storm while a push and a pull run: neither is disturbed.
(for _ in $(seq 60); do kill -HUP $RX 2>/dev/null; sleep 0.05; done) &
HUPS=$!
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" --bwlimit 8M "$T/src/f4" 127.0.0.1::hup/ 2>>"$T/tx.log"
p1=$?
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" --bwlimit 8M 127.0.0.1::hup/f4 "$T/hup-back" 2>>"$T/tx.log"
p2=$?
wait $HUPS
check "copies under a storm of SIGHUPs: both go (push $p1, pull $p2)" \
	sh -c "test $p1 = 0 && test $p2 = 0 && cmp '$T/src/f4' '$T/hup-back' && kill -0 $RX"

# The adversary. A request line longer than the limit: refused, closed.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL?$(head -c 5000 /dev/zero | tr '\0' a)")
check "a long request line: 431 ($code)" test "$code" = 431
for p in /../../etc/passwd /metrics/../../etc/passwd /%2e%2e/etc/passwd /; do
	code=$(curl -s -o "$T/body" -w '%{http_code}' --path-as-is --max-time 5 "http://127.0.0.1:$MPORT$p")
	check "GET $p: 404, nothing of the file ($code)" sh -c "test $code = 404 && ! grep -q root: '$T/body'"
done
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$URL")
check "POST: 405 ($code)" test "$code" = 405
# Slow clients: all its connections held by ones that never finish a
# request (and more beyond them), a copy meanwhile, each cut off in time.
python3 - "$MPORT" >"$T/slow.log" 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
conns = []
for i in range(16):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /metr")
    conns.append(s)
time.sleep(0.5)
over = 0
for s in conns:
    s.settimeout(0.1)
    try:
        if s.recv(100).startswith(b"HTTP/1.0 503"):
            over += 1
    except socket.timeout:
        pass
t0 = time.time()
cut = 0
for s in conns:
    s.settimeout(6)
    try:
        while s.recv(100):
            pass
        cut += 1
    except OSError:
        pass
print("over", over, "cut", cut, "in", round(time.time() - t0, 1))
sys.exit(0 if over >= 12 and cut == 16 and time.time() - t0 < 5 else 1)
PY
SLOW=$!
sleep 0.3
"$RDCP" -q --transport tcp --key-file "$T/key" --port "$PORT" "$T/src/f3" 127.0.0.1::busy/ 2>>"$T/tx.log"
check "a copy goes on while the endpoint is flooded" cmp "$T/src/f3" "$T/root/busy/f3"
wait $SLOW
check "slow clients: the ones over the limit 503, all cut off in time ($(cat "$T/slow.log"))" test $? = 0
scrape "$T/s4"
check "the endpoint serves again after the flood" promtool check metrics <"$T/s4"
if [ "$(metric "$T/s4" rdcp_metrics_refused_total)" -ge 12 ]; then
	ok "the refused connections counted"
else
	nok "the refused connections counted" "$(grep refused "$T/s4")"
fi

# Usage: only a receiver's, a port, a log that can be opened, a free port.
"$RDCP" --metrics 9471 "$T/src/f1" 127.0.0.1::x/ >/dev/null 2>"$T/e"
check "--metrics without --listen: exit 2" test $? = 2
"$RDCP" --listen --metrics 127.0.0.1:http --root "$T/root" >/dev/null 2>"$T/e"
check "--metrics without a port number: exit 2" test $? = 2
"$RDCP" --listen --key-file "$T/key" --transport tcp --port $((PORT + 2)) --root "$T/root" --audit-log "$T/no/such/dir/a.log" >/dev/null 2>"$T/e"
rc=$?
check "an audit log that cannot be opened: exit 6, one line ($(head -n1 "$T/e"))" sh -c "test $rc = 6 && test \$(wc -l <'$T/e') = 1"
"$RDCP" --listen --key-file "$T/key" --transport tcp --port $((PORT + 2)) --root "$T/root" --metrics "127.0.0.1:$MPORT" >/dev/null 2>"$T/e"
rc=$?
check "a metrics port in use: exit 3 ($(head -n1 "$T/e"))" test "$rc" = 3

kill -TERM $RX
wait $RX
check "the receiver stops cleanly (130)" test $? = 130
[ -n "${KEEP:-}" ] && echo "# kept $T"
echo "1..$N"
echo "$((N - F)) passed, $F failed"
[ "$F" = 0 ]
