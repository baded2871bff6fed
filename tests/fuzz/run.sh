#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,
# undefined) into build/fuzz/ and runs each for SECONDS (default 60) from
# the committed corpus. `make fuzz` runs it with 60.
#
#   tests/fuzz/run.sh [SECONDS]
#
# fuzz_wire and fuzz_filter run once; fuzz_path runs twice, over openat2(2) and over the
# O_NOFOLLOW walk older kernels get (RDCP_FUZZ_PATH_WALK=1). New inputs
# libFuzzer finds go to build/fuzz/new/TARGET/, never into
# tests/fuzz/corpus/; copy one there by hand when it earns a place. On a
# crash, leak or timeout the input is left in build/fuzz/crashes/NAME/ and
# its path printed with the report; the script then exits 1 (each run
# clears its own findings of the previous run first). CC_FUZZ=clang-NN
# picks the compiler, FUZZ_OUT another output directory.
set -uo pipefail

SECS=${1:-60}
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${FUZZ_OUT:-$TOP/build/fuzz}
CC=${CC_FUZZ:-clang}
cd "$TOP" || exit 1

case "$SECS" in
''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
# clang with libFuzzer's runtime: Debian 12's clang and libclang-rt-14-dev.
fuzzer_ok() {
	command -v "$CC" >/dev/null &&
		printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ return 0; }\n' |
		"$CC" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null
}
if ! fuzzer_ok && [ "$CC" = clang ] && command -v apt-get >/dev/null; then
	echo "run.sh: installing clang and libFuzzer (apt-get)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends clang libclang-rt-14-dev >/dev/null
fi
if ! fuzzer_ok; then
	echo "run.sh: $CC cannot build libFuzzer targets (Debian: apt-get install clang libclang-rt-14-dev)" >&2
	exit 1
fi

PKGS="libibverbs librdmacm zlib libcrypto"
DEFS=
if pkg-config --exists libisal 2>/dev/null; then
	PKGS="$PKGS libisal"
	DEFS=-DRDCP_HAVE_ISAL
fi
# shellcheck disable=SC2086
PKG_CFLAGS=$(pkg-config --cflags $PKGS 2>/dev/null)
# shellcheck disable=SC2086
PKG_LIBS=$(pkg-config --libs $PKGS 2>/dev/null ||
	echo -libverbs -lrdmacm -lz -lcrypto)
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
CFLAGS="-std=c11 -D_GNU_SOURCE $DEFS -I. -Itests/fuzz -O1 -g \
	-fno-omit-frame-pointer -pthread $PKG_CFLAGS $SAN"

# ---- build: every util/ cm/ transfer/ object, then one binary per target

mkdir -p "$OUT/obj" || exit 1
objs=()
for src in util/*.c cm/*.c transfer/*/*.c; do
	obj=$OUT/obj/${src//\//_}
	obj=${obj%.c}.o
	objs+=("$obj")
	# rebuilt when the source or any header is newer (headers are few)
	if [ -e "$obj" ] && [ -z "$(find "$src" util cm transfer \
		-name '*.h' -newer "$obj" -o -path "$src" -newer "$obj" |
		head -1)" ]; then
		continue
	fi
	echo "  CC      $src"
	# shellcheck disable=SC2086
	"$CC" $CFLAGS -fsanitize=fuzzer-no-link -c -o "$obj" "$src" || exit 1
done
for t in wire path filter; do
	echo "  FUZZ    $OUT/fuzz_$t"
	# shellcheck disable=SC2086
	"$CC" $CFLAGS -fsanitize=fuzzer -o "$OUT/fuzz_$t" \
		"tests/fuzz/fuzz_$t.c" "${objs[@]}" $PKG_LIBS -pthread ||
		exit 1
done

# ---- run

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0

# fuzz NAME TARGET MAX_LEN [ENV=VALUE]
fuzz() {
	local name=$1 target=$2 max_len=$3 new=$OUT/new/$2
	local crashes=$OUT/crashes/$name log=$OUT/$name.log rc f found=0
	shift 3
	mkdir -p "$new" "$crashes"
	rm -f "$crashes"/crash-* "$crashes"/leak-* "$crashes"/timeout-* \
		"$crashes"/oom-* # this run's findings only
	echo "# --- $name: ${SECS}s, new inputs to $new, log $log"
	env "$@" "$OUT/fuzz_$target" -max_total_time="$SECS" \
		-max_len="$max_len" -timeout=20 -print_final_stats=1 \
		-artifact_prefix="$crashes/" \
		"$new" "tests/fuzz/corpus/$target" >"$log" 2>&1
	rc=$?
	grep -E '^#[0-9]+[[:space:]]+DONE' "$log"
	grep -E '^stat::(number_of_executed_units|new_units_added)' "$log"
	for f in "$crashes"/crash-* "$crashes"/leak-* "$crashes"/timeout-* \
		"$crashes"/oom-*; do
		[ -e "$f" ] || continue
		echo "not ok - $name: failing input $f"
		found=1
	done
	if [ "$rc" -ne 0 ] || [ "$found" = 1 ]; then
		echo "not ok - $name: libFuzzer exited $rc; the report:"
		grep -E -A40 '^==[0-9]+==ERROR|runtime error|^fuzz_' "$log" |
			head -60
		status=1
	else
		echo "ok - $name"
	fi
}

fuzz wire wire 8448
fuzz path-openat2 path 4200
fuzz path-walk path 4200 RDCP_FUZZ_PATH_WALK=1
fuzz filter filter 5200
exit $status
