#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Runs rdcp's test suites and adds up their TAP lines into one closing
# "N passed, N failed" line. `make test` calls this with "all".
#
#   run_tests.sh --build DIR unit    in-process tests: util, wire, credits,
#                                    the engine over an in-memory transport
#   run_tests.sh --build DIR san     the same binaries built under
#                                    ASan+UBSan (DIR/asan) and TSan (DIR/tsan)
#   run_tests.sh --build DIR tcp     the end-to-end scenarios over TCP on
#                                    this host's loopback (seconds), the
#                                    CLI, faults and peer.py self-tests,
#                                    a lying key holder (faults_trust.py),
#                                    the test sshd's self-test and rdcp
#                                    over ssh against it (ssh.sh)
#   run_tests.sh --build DIR quick   unit + tcp: the everyday suite
#   run_tests.sh --build DIR mpi     rdcp-mpi under mpirun, 4-8 ranks to
#                                    2-3 receivers over TCP on loopback
#                                    (tests/e2e/mpi.sh; in "all" when an
#                                    MPI compiler is installed)
#   run_tests.sh --build DIR guest   real rdcp processes over Soft-RoCE
#                                    (rdma_rxe) in qemu guests; rdcp-mpi's
#                                    ranks in one, and in one against a
#                                    receiver in the other (mpi_rdma.sh,
#                                    --pair) when built
#   run_tests.sh --build DIR all     all of these
#
# A suite that crashes or exits non-zero without a "not ok" line still
# counts as one failure, so nothing can fail silently; the guest suite
# fails (never skips) when qemu or the guest kernel cannot be had.
#
# One case or scenario alone (doc/TESTING.md, "Running one test"):
#   DIR/tests/test_engine test_pack_tree        a unit case by name or glob
#   tests/e2e/run_tcp.sh --build DIR tree       scenarios.sh over TCP
#   tests/e2e/run_faults.sh --build DIR soak    faults.sh
#   tests/e2e/mitm.sh --build DIR grow          a man in the middle
#   tests/e2e/run_rdma.sh --build DIR single:tree   in the Soft-RoCE guest
#   tests/e2e/mpi.sh --build DIR rxkill   rdcp-mpi (make mpi first)
set -uo pipefail

BUILD=build
while [ $# -gt 1 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	*) break ;;
	esac
done
WHAT=${1:-all}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"

passed=0
failed=0

# run_suite NAME CMD...: relay output, count ok / not ok lines.
run_suite() {
	local name=$1 log=$LOGDIR/$1.log rc p f t0=$SECONDS
	shift
	echo "# --- $name: $*"
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	echo "# --- $name: $p passed, $f failed in $((SECONDS - t0)) s"
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc (log: $log)"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
}

# unit_suites DIR LABEL: every test binary under DIR/tests.
unit_suites() {
	local dir=$1 label=$2 t found=0
	for t in "$dir"/tests/test_*; do
		[ -x "$t" ] || continue
		found=1
		run_suite "$label$(basename "$t")" "$t"
	done
	if [ "$found" = 0 ]; then
		echo "not ok - no unit test binaries under $dir/tests"
		failed=$((failed + 1))
	fi
}

if [ "$WHAT" = unit ] || [ "$WHAT" = quick ] || [ "$WHAT" = all ]; then
	unit_suites "$BUILD" ""
fi

# The fuzz targets replayed over their committed corpora (gcc, no
# libFuzzer; tests/fuzz/run.sh fuzzes): path twice, over openat2(2) and
# over the O_NOFOLLOW walk of kernels without it.
# The layering doc/ARCHITECTURE.md promises, read from the objects (nm).
if [ "$WHAT" = unit ] || [ "$WHAT" = quick ] || [ "$WHAT" = all ]; then
	run_suite layers python3 "$HERE/layers/layers.py" "$BUILD"
fi

if [ "$WHAT" = unit ] || [ "$WHAT" = quick ] || [ "$WHAT" = all ]; then
	run_suite fuzz-replay-wire "$BUILD/fuzz-replay/replay_wire" \
		"$HERE/fuzz/corpus/wire"
	run_suite fuzz-replay-path "$BUILD/fuzz-replay/replay_path" \
		"$HERE/fuzz/corpus/path"
	RDCP_FUZZ_PATH_WALK=1 run_suite fuzz-replay-path-walk \
		"$BUILD/fuzz-replay/replay_path" "$HERE/fuzz/corpus/path"
	run_suite fuzz-replay-filter "$BUILD/fuzz-replay/replay_filter" \
		"$HERE/fuzz/corpus/filter"
fi

# The quick in-process tests again under valgrind (memcheck, leaks).
if [ "$WHAT" = unit ] || [ "$WHAT" = quick ] || [ "$WHAT" = all ]; then
	for t in test_wire test_credit test_util; do
		run_suite "valgrind-$t" valgrind -q --error-exitcode=1 \
			--leak-check=full "$BUILD/tests/$t"
	done
fi

if [ "$WHAT" = tcp ] || [ "$WHAT" = quick ] || [ "$WHAT" = all ]; then
	run_suite tcp-e2e "$HERE/e2e/run_tcp.sh" --build "$BUILD"
	run_suite cli "$HERE/e2e/cli.sh" --build "$BUILD"
	run_suite faults-e2e "$HERE/e2e/run_faults.sh" --build "$BUILD"
	run_suite mitm-e2e "$HERE/e2e/mitm.sh" --build "$BUILD"
	run_suite peer-e2e "$HERE/e2e/peer_selftest.sh" --build "$BUILD"
	run_suite ranges-e2e "$HERE/e2e/ranges.sh" --build "$BUILD"
	run_suite sshd-selftest "$HERE/e2e/ssh_selftest.sh" --build "$BUILD"
	run_suite ssh-e2e "$HERE/e2e/ssh.sh" --build "$BUILD"
	run_suite trust-e2e python3 "$HERE/e2e/faults_trust.py" --build "$BUILD"
fi

if [ "$WHAT" = san ] || [ "$WHAT" = all ]; then
	ASAN_OPTIONS=detect_leaks=1 unit_suites "$BUILD/asan" "asan-"
	TSAN_OPTIONS=halt_on_error=1 unit_suites "$BUILD/tsan" "tsan-"
fi

# rdcp-mpi under mpirun, when an MPI compiler is installed (make setup
# installs Open MPI; make test builds rdcp-mpi then).
if [ "$WHAT" = mpi ] || [ "$WHAT" = all ]; then
	if command -v mpicc >/dev/null 2>&1 || [ "$WHAT" = mpi ]; then
		run_suite mpi-e2e "$HERE/e2e/mpi.sh" --build "$BUILD"
		run_suite mpi-ssh-e2e "$HERE/e2e/mpi_ssh.sh" --build "$BUILD"
	else
		echo "# no MPI compiler (mpicc): the rdcp-mpi suite left out"
	fi
fi

if [ "$WHAT" = guest ] || [ "$WHAT" = all ]; then
	run_suite rdma-e2e "$HERE/e2e/run_rdma.sh" --build "$BUILD"
	# rdcp-mpi's ranks in a Soft-RoCE guest, when it was built.
	if [ -x "$BUILD/rdcp-mpi" ]; then
		run_suite mpi-rdma-e2e "$HERE/e2e/mpi_rdma.sh" --build "$BUILD"
		run_suite mpi-rdma-pair-e2e "$HERE/e2e/mpi_rdma.sh" \
			--build "$BUILD" --pair
	fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
