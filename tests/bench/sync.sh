#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make bench`, re-runs: rdcp -a against rsync -a on the same tree over
# the same transport (TCP on loopback: rdcp to a receiver, rsync to an
# rsync daemon, both started here on 127.0.0.1 only), interleaved rounds,
# medians, the ratio rdcp/rsync of each row from the same run:
#   - unchanged: a tree of N small files (BENCH_SYNC_FILES, default
#     100 000, in directories of 1000) copied again with nothing changed
#   - one changed: one file of it rewritten (new content and mtime)
# and the bytes of file data that crossed: rdcp's from its --json
# events ("sent"), rsync's from --stats ("Literal data"); a re-run with
# nothing changed must send 0, one changed file its size. Raw numbers go
# to BUILD/bench/sync-raw.txt.
#
#   tests/bench/sync.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
. "$HERE/bench_lib.sh"
RDCP=$(cd "$BUILD" && pwd)/rdcp
REPS=${BENCH_REPS:-5}
NFILES=${BENCH_SYNC_FILES:-100000}
FSIZE=${BENCH_SYNC_SIZE:-1024}
OUT=$BUILD/bench
mkdir -p "$OUT"
SHM=$(mktemp -d /dev/shm/rdcp-sync.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$SHM"
}
trap cleanup EXIT
PORT=$((20000 + $$ % 20000))

if ! command -v rsync >/dev/null 2>&1; then
	echo "bench: installing rsync" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends rsync >/dev/null
fi

# The tree: NFILES files of FSIZE bytes each, 1000 to a directory.
python3 - "$SHM/tree" "$NFILES" "$FSIZE" <<'PY'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(os.urandom(size))
PY

RAW=$OUT/sync-raw.txt
: >"$RAW"
rec() { echo "$*" >>"$RAW"; echo "# $*"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v z="$2" 'BEGIN { printf "%.3f", z - a }'; }

PORT=$((PORT + 1)); RSPORT=$PORT
mkdir -p "$SHM/rsync" "$SHM/rdcp"
bench_rsyncd "$RSPORT" "$SHM/rsync" "$SHM/rsyncd.conf"
PORT=$((PORT + 1)); RDPORT=$PORT
# A receiver whose limit on open files covers the window of 1024 files
# asked first for each session it serves (rdcp(1), --max-sessions): 4
# sessions need about 13,300, which a hard limit of 20,000 (this VM's)
# allows; the packaged service's 65,536 covers the default 16. Without
# the room it offers 128, and says which with -v.
"$RDCP" --listen --no-auth -q --transport tcp --root "$SHM/rdcp" \
	--port "$RDPORT" --max-sessions 4 &
PIDS+=($!)
sleep 1

# rdcp -a SRC to the receiver; prints "SECONDS BYTES_SENT".
rdcp_run() {
	local t0 t1
	t0=$(now)
	(cd "$SHM" && "$RDCP" --no-auth --json --transport tcp \
		--port "$RDPORT" -a tree "127.0.0.1::") >"$SHM/rdcp.json" \
		2>/dev/null
	t1=$(now)
	echo "$(secs "$t0" "$t1") $(awk -F'"sent":' 'NF > 1 { split($2, v, ","); s += v[1] } END { print s + 0 }' "$SHM/rdcp.json")"
}
# rsync -a SRC to the daemon; prints "SECONDS LITERAL_BYTES".
rsync_run() {
	local t0 t1
	t0=$(now)
	rsync -a --stats "$SHM/tree" "rsync://127.0.0.1:$RSPORT/b/" \
		>"$SHM/rsync.stats"
	t1=$(now)
	echo "$(secs "$t0" "$t1") $(awk -F': ' '/^Literal data/ { gsub(/[^0-9]/, "", $2); print $2 }' "$SHM/rsync.stats")"
}
# Rewrites one file of the tree: new content, same size, new mtime.
change_one() { # N: another file each time, in the first directory
	local n=$(($1 % (NFILES < 1000 ? NFILES : 1000)))
	head -c "$FSIZE" /dev/urandom >"$SHM/tree/d000/$(printf f%06d "$n")"
}

# The first copies: not timed against each other's re-runs.
read -r t b < <(rdcp_run)
rec rdcp_first 0 "$t" "$b"
read -r t b < <(rsync_run)
rec rsync_first 0 "$t" "$b"
diff -rq "$SHM/tree" "$SHM/rdcp/tree" >/dev/null ||
	{ echo "bench: rdcp's copy differs" >&2; exit 1; }

for rep in $(seq 1 "$REPS"); do
	# ABBA: neither tool always runs first on a warm cache.
	if [ $((rep % 2)) -eq 1 ]; then order="rdcp rsync"; else order="rsync rdcp"; fi
	for tool in $order; do
		read -r t b < <("${tool}_run")
		rec "${tool}_unchanged" "$rep" "$t" "$b"
	done
	change_one "$rep" # the same one file for both
	for tool in $order; do
		read -r t b < <("${tool}_run")
		rec "${tool}_one" "$rep" "$t" "$b"
	done
done
diff -rq "$SHM/tree" "$SHM/rdcp/tree" >/dev/null ||
	{ echo "bench: rdcp's copy differs after the re-runs" >&2; exit 1; }

median() { # ROW FIELD: the median of FIELD (3: seconds, 4: bytes)
	awk -v r="$1" -v f="$2" '$1 == r { print $f }' "$RAW" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
printf '%-34s %10s %10s %8s %14s %14s\n' "re-run, $NFILES files of $FSIZE B" \
	"rdcp s" "rsync s" "ratio" "rdcp bytes" "rsync bytes"
for row in unchanged one; do
	a=$(median "rdcp_$row" 3)
	z=$(median "rsync_$row" 3)
	printf '%-34s %10s %10s %8s %14s %14s\n' \
		"$([ "$row" = one ] && echo "one file changed" || echo "nothing changed")" \
		"$a" "$z" "$(awk -v a="$a" -v z="$z" 'BEGIN { printf "%.2f", a / z }')" \
		"$(median "rdcp_$row" 4)" "$(median "rsync_$row" 4)"
done
printf '%-34s %10s %10s\n' "first copy (one run)" \
	"$(median rdcp_first 3)" "$(median rsync_first 3)"
