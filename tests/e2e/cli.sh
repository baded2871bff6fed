#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The command line as a user and a script meet it, on this host over TCP
# loopback: --help against a golden copy (tests/e2e/help.golden:
# regenerate it with 'build/rdcp --help > tests/e2e/help.golden' when an
# option changes on purpose) and its long options against the man page
# and the bash completion, usage errors (one line, exit 2), --version,
# key handling (exit 4), and --json: every line parsed as JSON and the
# events checked field by field. TAP out, 'N passed, N failed' last.
#
#   tests/e2e/cli.sh [--build DIR]
set -u
BUILD=build
[ "${1:-}" = --build ] && BUILD=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RDCP=$(cd "$BUILD" && pwd)/rdcp
T=$(mktemp -d /tmp/rdcp-cli.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
export XDG_CONFIG_HOME=$T/cfg
N=0 F=0
ok() { N=$((N + 1)); echo "ok $N - $1"; }
nok() { N=$((N + 1)) F=$((F + 1)); echo "not ok $N - $1"; shift; for l in "$@"; do echo "# $l"; done; }
check() { # NAME COMMAND...: passes when COMMAND succeeds
	local name=$1
	shift
	if "$@" >"$T/out" 2>&1; then ok "$name"; else nok "$name" "$(head -c 2000 "$T/out")"; fi
}
# expect_fail NAME CODE ARGS...: rdcp exits CODE with exactly one line
# on stderr and nothing on stdout.
expect_fail() {
	local name=$1 code=$2 rc lines
	shift 2
	"$RDCP" "$@" >"$T/o" 2>"$T/e"
	rc=$?
	lines=$(grep -c . "$T/e")
	if [ "$rc" = "$code" ] && [ "$lines" -ge 1 ] && [ ! -s "$T/o" ]; then
		ok "$name (exit $rc: $(head -n1 "$T/e"))"
	else
		nok "$name" "exit $rc, want $code" "$(cat "$T/e" "$T/o")"
	fi
}

check "--help matches tests/e2e/help.golden" diff -u "$HERE/help.golden" <("$RDCP" --help)

# An option is listed in cmd/options.c, which prints --help, and described
# in the man page; the golden copy above holds --help still, and the
# completion takes its words from --help when make builds it
# (cmd/completion.awk). Every long option of --help must have an entry
# of its own in doc/rdcp.1 (the tag line after a .TP, so a mention in
# passing does not count) and be offered by the built completion, and
# neither may offer one that --help lacks.
TOP=$(cd "$HERE/../.." && pwd)
longopts() { grep -oE -- '--[a-z][a-z0-9-]+' | sort -u; }
"$RDCP" --help | longopts >"$T/opts.help"
awk 'prev == ".TP" { print } { prev = $0 }' "$TOP/doc/rdcp.1" |
	sed 's/\\-/-/g' | longopts >"$T/opts.man"
longopts <"$BUILD/rdcp.bash-completion" >"$T/opts.comp"
# same_opts NAME FILE: FILE's options are exactly those of --help.
same_opts() {
	local missing extra
	missing=$(comm -23 "$T/opts.help" "$2" | tr '\n' ' ')
	extra=$(comm -13 "$T/opts.help" "$2" | tr '\n' ' ')
	if [ -s "$T/opts.help" ] && [ -z "$missing$extra" ]; then
		ok "$1 has every long option of --help, and no other ($(wc -l <"$2"))"
	else
		nok "$1 has every long option of --help, and no other" \
			"missing: ${missing:-none}" "not in --help: ${extra:-none}"
	fi
}
same_opts "doc/rdcp.1 (an entry each)" "$T/opts.man"
same_opts "$BUILD/rdcp.bash-completion (made from --help)" "$T/opts.comp"

# Every man page renders without a warning (groff -ww: also bad macros,
# escapes and lines the formatter cannot fill).
for page in "$TOP"/doc/*.[1-8]; do
	check "$(basename "$page") renders without warnings (groff -man -ww)" \
		bash -c "command -v groff >/dev/null || { echo 'groff not installed (packaging/build-deps.sh)'; exit 1; }
			out=\$(groff -t -man -ww -z '$page' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
done
check "--version names rdcp and a version" bash -c "'$RDCP' --version | grep -Eq '^rdcp [0-9]+\.[0-9]+'"
check "--usage lists the options" bash -c "'$RDCP' --usage | grep -q -- '--transport'"
expect_fail "no arguments" 2
expect_fail "one argument" 2 file
expect_fail "last argument not HOST:DEST" 2 a b
expect_fail "local and remote SRCs mixed in a pull" 2 host:src local .
expect_fail "a pull's SRCs from two hosts" 2 h1:a h2:b .
expect_fail "remote to remote with a running receiver" 2 h1::a h2:b
expect_fail "remote to remote with --manifest (a local file)" 2 --manifest=m h1:a h2:b
expect_fail "user@ with a running receiver" 2 a u@h::x
expect_fail "--no-auth over ssh" 2 --no-auth a h:
expect_fail "a host name starting with -" 2 -- a -oProxyCommand=x:y
expect_fail "--ssh with HOST::PATH" 2 --ssh a h::x
expect_fail "bad --port-range" 2 --port-range 9-3 a h:
expect_fail "-P over ssh (a receiver's port): refused, never ignored" 2 -P 2222 a h:
check "-P over ssh: the error names ssh's own port option" bash -c "'$RDCP' -P 2222 a h:x 2>&1 | grep -q \"ssh -p 2222\""
expect_fail "--port over ssh, a pull between two hosts too" 2 --port=2222 h1:a h2:b
expect_fail "--rdma-addr with a running receiver" 2 --rdma-addr 10.0.0.1 a h::x
expect_fail "rdcp:// with a bad port" 2 a rdcp://h:0/x
expect_fail "[v6]:PATH goes over ssh (-e false: it fails, exit 12)" 12 -e false a '[::1]:x'
expect_fail "--streams beyond 16" 2 --streams 17 a h:
expect_fail "--streams 0" 2 --streams 0 a h:
expect_fail "--gid-index without --device" 2 --gid-index 1 a h:
expect_fail "--device with an empty name in its list" 2 --device rxe0,,rxe1 a h:
expect_fail "--device list ending in a comma" 2 --device rxe0, a h:
expect_fail "--compress level out of range" 2 --compress=10 a h:
expect_fail "bad --bwlimit" 2 --bwlimit fast a h:
expect_fail "--encrypt with --no-auth" 2 --encrypt --no-auth a h:
expect_fail "--no-clobber with --update" 2 -n -u a h:
expect_fail "bad --transport" 2 --transport ib a h:
expect_fail "bad --chunk-size (not a power of two)" 2 --chunk-size 3000 a h:
expect_fail "bad --window" 2 --window 0 a h:
expect_fail "bad --checksum" 2 --checksum md5 a h:
expect_fail "--listen with a DEST" 2 --listen a h:
expect_fail "--no-auth with --key-file" 2 --no-auth --key-file k a h:
expect_fail "--files-from on a pull of two SRCs" 2 --files-from=l h:a h:b .
expect_fail "--files-from with two SRCs" 2 --files-from=l a b h:
expect_fail "--exclude with no pattern" 2 --exclude=/ a h:
expect_fail "--exclude-from and --files-from both on stdin" 2 --files-from=- --exclude-from=- a h:
expect_fail "--exclude-from a missing file" 6 --exclude-from="$T/none" a h:
expect_fail "--manifest with --checksum none" 2 --manifest=m --checksum none a h:
expect_fail "--manifest with --dry-run" 2 --manifest=m --dry-run a h:
expect_fail "--files-from a missing file" 6 --no-auth --files-from="$T/none" a h::
expect_fail "--require-encrypt on a copy without --encrypt" 2 --require-encrypt a h:
expect_fail "--require-encrypt on a pull without --encrypt" 2 --require-encrypt h:a .
expect_fail "--require-encrypt with --no-auth" 2 --require-encrypt --no-auth --listen
expect_fail "--delete without -r" 2 --delete a h:
expect_fail "--delete with --files-from" 2 -r --delete --files-from=l a h:
expect_fail "--max-delete without --delete" 2 -r --max-delete=3 a h:
expect_fail "bad --max-delete" 2 -r --delete --max-delete=-1 a h:
expect_fail "bad --retry" 2 --retry=-1 a h:
expect_fail "--retry beyond 10000" 2 --retry 10001 a h:
expect_fail "bad --retry-wait" 2 --retry-wait 1s a h:
expect_fail "--retry-wait beyond an hour" 2 --retry-wait 3600.5 a h:
expect_fail "--retry on a copy between two remote hosts" 2 --retry 2 h1:a h2:b

# Keys.
mkdir -p "$T/cfg/rdcp"
check "--keygen writes a 0600 key" bash -c "'$RDCP' --keygen '$T/k1' 2>/dev/null && [ \"\$(stat -c %a '$T/k1')\" = 600 ] && [ \$(head -c 64 '$T/k1' | tr -d 0-9a-f | wc -c) = 0 ]"
expect_fail "--keygen never overwrites" 6 --keygen "$T/k1"
cp "$T/k1" "$T/k2" && chmod 644 "$T/k2"
expect_fail "a key readable by others is refused" 4 --key-file "$T/k2" a h::
expect_fail "no key and no --no-auth" 4 a h::
cp "$T/k1" "$T/cfg/rdcp/key"
# Named keys and the modules file (rdcp-modules.conf(5)).
check "--keygen --name writes the client's name on line 2" bash -c "'$RDCP' --keygen --name alice.1 '$T/ka' 2>/dev/null && [ \"\$(sed -n 2p '$T/ka')\" = 'name alice.1' ]"
expect_fail "--name refuses a name that is no client's" 2 --keygen "$T/kb" --name 'a/b'
expect_fail "--name refuses site-key" 2 --keygen "$T/kb" --name site-key
expect_fail "--name without --keygen" 2 --name alice a h::
expect_fail "--modules without --listen" 2 --modules "$T/m.conf" a h::
printf '[a]\npath = /tmp\nsize = 1T\nquota = 20X\nmax-bytes = 0\n[a]\npath = /tmp\n' >"$T/m.conf"
check "--check lists each problem of a modules file with its line" bash -c "'$RDCP' --check --modules '$T/m.conf' >'$T/chk' 2>&1; [ \$? = 10 ] && grep -q '^PROBLEM $T/m.conf:3: unknown setting .size.' '$T/chk' && grep -q '^PROBLEM $T/m.conf:6: module a again (first on line 1)' '$T/chk' && grep -q '^PROBLEM $T/m.conf:4: quota .20X. is not a size' '$T/chk' && grep -q '^PROBLEM $T/m.conf:5: max-bytes .0. is not a size' '$T/chk'"
expect_fail "a receiver with a bad modules file does not start" 2 --listen --no-auth --modules "$T/m.conf" --port 7599

# --json against a receiver over TCP.
mkdir -p "$T/root" "$T/src"
head -c 3000000 /dev/urandom >"$T/src/big"
echo hi >"$T/src/small"
: >"$T/src/empty"
PORT=$((30000 + $$ % 20000))
"$RDCP" --listen -q --transport tcp --root "$T/root" --port "$PORT" &
RX=$!
sleep 0.5
"$RDCP" --json -q --transport tcp --port "$PORT" "$T/src/small" "$T/src/missing" \
	"$T/src/empty" "$T/src/big" "127.0.0.1::j/" >"$T/json" 2>"$T/json.err"
RC=$?
check "--json partial copy exits 9" test "$RC" = 9
check "--json: every line is a JSON object with the documented fields" python3 - "$T/json" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [e["event"] for e in ev]
assert kinds.count("file_start") == 3, kinds
assert kinds.count("file_done") == 4, kinds
assert kinds[-1] == "summary", kinds
done = {e["path"].rsplit("/", 1)[1]: e for e in ev if e["event"] == "file_done"}
for n in ("small", "empty", "big"):
    d = done[n]
    assert d["status"] == "ok" and d["algorithm"] == "crc32" and len(d["digest"]) == 8, d
    assert isinstance(d["seconds"], float) and d["bytes"] >= 0, d
assert done["big"]["bytes"] == 3000000
m = done["missing"]
assert m["status"] == "failed" and m["class"] == "local-io" and "missing" in m["error"], m
s = ev[-1]
assert s["files_ok"] == 3 and s["files_failed"] == 1 and s["result"] == "partial" and s["exit"] == 9, s
assert s["transport"] == "tcp" and s["bytes"] == 3000003 and s["bytes_per_second"] >= 0, s
assert s["retries"] == 0, s
PY
check "--json copies arrived" cmp "$T/src/big" "$T/root/j/big"
"$RDCP" --json -q --transport tcp --port $((PORT + 1)) "$T/src/small" 127.0.0.1:: >"$T/json2" 2>/dev/null
RC=$?
check "--json connect failure: error + summary events, exit 3" python3 - "$T/json2" "$RC" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert int(sys.argv[2]) == 3
assert [e["event"] for e in ev] == ["error", "summary"], ev
assert ev[0]["class"] == "connect" and ev[0]["exit"] == 3 and "cannot connect" in ev[0]["message"], ev
assert ev[1]["result"] == "connect" and ev[1]["exit"] == 3, ev
PY
"$RDCP" --progress --transport tcp --port "$PORT" "$T/src/small" "$T/src/big" \
	"127.0.0.1::p/" 2>"$T/progress" >"$T/progress.out"
RC=$?
check "--progress: a line per file and a total, on stderr only" bash -c "
	[ $RC = 0 ] && [ ! -s '$T/progress.out' ] &&
	tr '\r' '\n' <'$T/progress' | grep -Eq '/small +3 B +ok' &&
	tr '\r' '\n' <'$T/progress' | grep -Eq '/big +2.86 MiB +ok' &&
	grep -Eq '^2 files, 2.86 MiB in .* over tcp' '$T/progress'"
# 2.86 MiB at 1 MiB/s: about 3 s, so progress lines come even on a loaded
# host (at 2 MiB/s a CI run under load saw none).
"$RDCP" --progress --bwlimit 1M --transport tcp --port "$PORT" "$T/src/big" \
	"127.0.0.1::pp/" 2>"$T/progress2" >/dev/null
RC=$?
check "--progress to a file: plain lines (no carriage return, no escape), with the total and an ETA" bash -c "
	[ $RC = 0 ] && ! grep -q \$'[\r\033]' '$T/progress2' &&
	grep -Eq '^big +[0-9.]+ [kMG]?i?B / 2.86 MiB .* ETA [0-9]+:[0-9]{2}\$' '$T/progress2'"
"$RDCP" --progress --bwlimit 1M --transport tcp --port "$PORT" "127.0.0.1::pp/big" \
	"$T/pulled-progress" 2>"$T/progress3" >/dev/null
RC=$?
check "--progress of a pull: the total and an ETA" bash -c "
	[ $RC = 0 ] && cmp -s '$T/src/big' '$T/pulled-progress' &&
	grep -Eq '^pulled-progress +[0-9.]+ [kMG]?i?B / 2.86 MiB .* ETA [0-9]+:[0-9]{2}\$' '$T/progress3'"
"$RDCP" --transport tcp --port "$PORT" "$T/src/small" "$T/src/missing" "$T/src/big" \
	"127.0.0.1::s/" 2>"$T/sum" >"$T/sum.out"
RC=$?
check "summary: one last line, files, bytes, rate, skipped, failed, retries" bash -c "
	[ $RC = 9 ] && [ ! -s '$T/sum.out' ] &&
	tail -n1 '$T/sum' | grep -Eq '^2 files, 2.86 MiB in [0-9.]+ s \([0-9.]+ [kMG]?B/s\) over tcp; skipped 0, failed 1, retries 0\$'"
"$RDCP" -q --transport tcp --port "$PORT" "$T/src/small" "127.0.0.1::s/" >"$T/sum.out" 2>&1
RC=$?
check "summary: none with -q" bash -c "[ $RC = 0 ] && [ ! -s '$T/sum.out' ]"

# rdcp.conf: the user's defaults, the command line winning.
printf '# site defaults\nport %s\n--transport=tcp\nchecksum = sha256\nquiet\n' "$PORT" >"$T/cfg/rdcp/rdcp.conf"
"$RDCP" "$T/src/small" 127.0.0.1::conf/ >"$T/conf.out" 2>&1
RC=$?
check "rdcp.conf: port, transport, checksum from the file: the copy arrives" bash -c "
	[ $RC = 0 ] && cmp '$T/src/small' '$T/root/conf/small'"
check "--print-config: each value with its origin, the command line's winning" bash -c "
	'$RDCP' --print-config --port 7 >'$T/pc' &&
	grep -qx '# port $PORT.# $T/cfg/rdcp/rdcp.conf:2, overridden' '$T/pc' &&
	grep -qx 'checksum sha256.# $T/cfg/rdcp/rdcp.conf:4' '$T/pc' &&
	grep -qx 'port 7.# command line' '$T/pc' &&
	grep -qx '# $T/cfg/rdcp/rdcp.conf: read' '$T/pc'"
check "--no-config: the file is not read" bash -c "
	'$RDCP' --no-config --print-config | grep -vq port"
echo 'prot 1' >>"$T/cfg/rdcp/rdcp.conf"
check "--no-config: a copy ignores a broken file" bash -c "
	'$RDCP' --no-config -q --transport tcp --port $PORT '$T/src/small' 127.0.0.1::conf2/ &&
	cmp '$T/src/small' '$T/root/conf2/small'"
expect_fail "rdcp.conf: an unknown option, its line named" 2 "$T/src/small" h:
if grep -q "rdcp.conf:6: unknown option 'prot'" "$T/e"; then ok "  ... as FILE:LINE"; else nok "  ... as FILE:LINE" "$(cat "$T/e")"; fi
printf 'port 0\n' >"$T/cfg/rdcp/rdcp.conf"
expect_fail "rdcp.conf: a bad value, its line named" 2 "$T/src/small" h:
if grep -q "rdcp.conf:1: --port: '0'" "$T/e"; then ok "  ... as FILE:LINE"; else nok "  ... as FILE:LINE" "$(cat "$T/e")"; fi
printf 'delete\n' >"$T/cfg/rdcp/rdcp.conf"
expect_fail "rdcp.conf: delete is no default" 2 -r "$T/src" h:
printf 'boot-stdin 127.0.0.1\n' >"$T/cfg/rdcp/rdcp.conf"
expect_fail "rdcp.conf: boot-stdin is no default" 2 "$T/src/small" h:
if grep -q "rdcp.conf:1: 'boot-stdin' is not a default" "$T/e"; then
	ok "  ... as FILE:LINE"
else
	nok "  ... as FILE:LINE" "$(cat "$T/e")"
fi
printf 'server\n' >"$T/cfg/rdcp/rdcp.conf"
expect_fail "rdcp.conf: server is no default" 2 "$T/src/small" h:
printf 'port %s\n' "$PORT" >"$T/cfg/rdcp/rdcp.conf"
chmod o+w "$T/cfg/rdcp/rdcp.conf"
expect_fail "rdcp.conf writable by anyone: not read" 2 "$T/src/small" 127.0.0.1::conf3/
if grep -q "is writable by anyone: not read" "$T/e"; then
	ok "  ... and says so"
else
	nok "  ... and says so" "$(cat "$T/e")"
fi
chmod o-w "$T/cfg/rdcp/rdcp.conf"
printf 'retry 2\nretry-wait = 0.1\n' >"$T/cfg/rdcp/rdcp.conf"
"$RDCP" --json --transport tcp --port $((PORT + 1)) "$T/src/small" 127.0.0.1:: >"$T/rc.json" 2>"$T/rc.err"
RC=$?
check "rdcp.conf: retry and retry-wait from the file: 3 attempts, the last one's exit" \
	python3 - "$T/rc.json" "$RC" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert int(sys.argv[2]) == 3, sys.argv[2]
assert [e["event"] for e in ev] == ["attempt"] * 3 + ["error", "summary"], ev
for n, a in enumerate(ev[:3], 1):
    assert a["attempt"] == n and a["class"] == "connect" and a["exit"] == 3, a
    assert a["retry"] == (n < 3) and "cannot connect" in a["message"], a
    assert a["transport"] is None, a  # it never connected
    assert (0.08 <= a["wait"] <= 0.12) if n == 1 else True, a
assert 0.16 <= ev[1]["wait"] <= 0.24, ev[1]
assert ev[2]["wait"] == 0, ev[2]
assert ev[-1]["retries"] == 2 and ev[-1]["exit"] == 3, ev[-1]
PY
check "--print-config: retry and retry-wait with their origin" bash -c "
	'$RDCP' --print-config >'$T/pc' &&
	grep -qx 'retry 2.# $T/cfg/rdcp/rdcp.conf:1' '$T/pc' &&
	grep -qx 'retry-wait 0.1.# $T/cfg/rdcp/rdcp.conf:2' '$T/pc'"
rm -f "$T/cfg/rdcp/rdcp.conf"

kill "$RX" 2>/dev/null
wait "$RX" 2>/dev/null

# The bootstrap line has a limit (2048 bytes with its newline): a longer
# one is refused whole, never cut to fit. A "remote shell" that runs the
# real rdcp --server here and pads its bootstrap line past the limit with
# a field a reader skips; cut at the limit, the line would still parse.
cat >"$T/padssh" <<EOF
#!/bin/sh
shift # the host
sh -c "\$*" | sed -u '/^RDCP-BOOT /s/\$/ pad=$(printf '%03000d' 0)/'
EOF
chmod +x "$T/padssh"
expect_fail "a bootstrap line over the limit is refused (exit 12)" 12 \
	-q --transport tcp -e "$T/padssh" --rdcp-path "$RDCP" "$T/src/small" "localhost:$T/padded/"
check "... saying so, and nothing was written" bash -c "
	grep -q 'bootstrap line longer than 2048 bytes' '$T/e' && [ ! -e '$T/padded' ]"
printf 'RDCP-BOOT 3 x port=9 listen=tcp tcp=127.0.0.1 key=%064d pad=%03000d\n' 0 0 >"$T/longboot"
"$RDCP" --boot-stdin 127.0.0.1 -- "$T/src/small" 127.0.0.1:x <"$T/longboot" >"$T/o" 2>"$T/e"
RC=$?
check "--boot-stdin: a line over the limit is refused (exit 12)" bash -c "
	[ $RC = 12 ] && grep -q 'longer than 2048 bytes' '$T/e'"

# --check says which CRC32 this build has: a warning (not a problem)
# without ISA-L.
"$RDCP" --check >"$T/check.out" 2>&1
if ldd "$RDCP" | grep -q libisal; then
	check "--check: CRC32 by ISA-L, said as ok" grep -q '^ok      CRC32 by ISA-L' "$T/check.out"
else
	check "--check: CRC32 by zlib, a warning" grep -q '^WARNING CRC32 by zlib: this rdcp was built without ISA-L' "$T/check.out"
fi

# A receiver that requires --encrypt.
mkdir -p "$T/root/enc"
echo secret >"$T/root/enc/pullme"
"$RDCP" --listen -q --transport tcp --root "$T/root" --port "$((PORT + 2))" \
	--require-encrypt 2>"$T/rx-enc.log" &
RX=$!
sleep 0.5
expect_fail "--require-encrypt receiver: a push without --encrypt is refused" 4 \
	--transport tcp --port "$((PORT + 2))" "$T/src/small" 127.0.0.1::enc/
expect_fail "--require-encrypt receiver: a pull without --encrypt is refused" 4 \
	--transport tcp --port "$((PORT + 2))" 127.0.0.1::enc/pullme "$T/pulled"
check "--require-encrypt receiver: nothing was written or pulled" \
	bash -c "[ ! -e '$T/root/enc/small' ] && [ ! -e '$T/pulled' ]"
check "--require-encrypt receiver: the refusal names --encrypt" \
	grep -q 'requires --encrypt' "$T/e"
check "--require-encrypt on both sides with --encrypt: copied" \
	"$RDCP" -q --require-encrypt --encrypt --transport tcp \
	--port "$((PORT + 2))" "$T/src/small" 127.0.0.1::enc/
check "... and the copy arrived" cmp "$T/src/small" "$T/root/enc/small"
kill "$RX" 2>/dev/null
wait "$RX" 2>/dev/null

# The receiver's log at the default level: one line per session (issue
# #23 item 6, #24 item 3), a push, a pull and a failed pull.
mkdir -p "$T/root/audit"
"$RDCP" --listen --transport tcp --root "$T/root" --port "$((PORT + 3))" 2>"$T/rx-audit.log" &
RX=$!
sleep 0.5
"$RDCP" -q --transport tcp --port "$((PORT + 3))" "$T/src/big" 127.0.0.1::audit/
"$RDCP" -q --transport tcp --port "$((PORT + 3))" 127.0.0.1::audit/big "$T/audit-pulled"
"$RDCP" -q --transport tcp --port "$((PORT + 3))" 127.0.0.1::audit/nope "$T/audit-nope" 2>/dev/null
kill "$RX" 2>/dev/null
wait "$RX" 2>/dev/null
check "receiver log: one line per session at the default level (peer, key, module, op, files, bytes, result, time)" bash -c "
	[ \$(grep -c '^rdcp: session ' '$T/rx-audit.log') = 3 ] &&
	grep -Eq '^rdcp: session peer=127\.0\.0\.1:[0-9]+ client=site-key module=- op=push files=1 failed=0 refused=0 bytes=3000000 result=ok seconds=[0-9.]+\$' '$T/rx-audit.log' &&
	grep -Eq '^rdcp: session peer=127\.0\.0\.1:[0-9]+ client=site-key module=- op=pull files=1 failed=0 refused=0 bytes=3000000 result=ok seconds=[0-9.]+\$' '$T/rx-audit.log' &&
	grep -Eq '^rdcp: session peer=127\.0\.0\.1:[0-9]+ client=site-key module=- op=pull files=0 failed=1 refused=0 bytes=0 result=[a-z-]+ seconds=[0-9.]+\$' '$T/rx-audit.log'"
echo "1..$N"
echo "$((N - F)) passed, $F failed"
[ "$F" = 0 ]
