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
#   run_tests.sh --build DIR all     all of these, in three lanes side by
#                                    side: the guest suites; unit, tcp and
#                                    mpi; san. Each suite's output is
#                                    printed whole when it ends
#                                    (RDCP_TEST_LANES=1: one after the
#                                    other, as they run)
#
# Also in unit (and so quick and all): the fuzz corpora replayed, valgrind
# over three unit tests, and shellcheck over every shell script
# (tests/shellcheck.sh). The last lines are a table of each suite's time
# (also in DIR/test-logs/results, which .ci/run prints) and the totals.
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
# Each finished suite appends "NAME PASSED FAILED SECONDS" here; the
# closing line and .ci/run's table of times are made from it.
RESULTS=$LOGDIR/results
: >"$RESULTS"
# In "all", the suites run in three lanes side by side (see the end):
# LANE=1 while in one. A lane's suite keeps its output in its log and
# prints it whole when it ends, so that TAP lines never interleave.
LANE=0

# run_suite NAME CMD...: relay output, count ok / not ok lines. A suite
# that exits non-zero without a "not ok" line counts as one failure.
run_suite() {
	local name=$1 log=$LOGDIR/$1.log rc p f t0=$SECONDS
	shift
	if [ "$LANE" = 1 ]; then
		"$@" >"$log" 2>&1
		rc=$?
	else
		echo "# --- $name: $*"
		"$@" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
	fi
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	{
		if [ "$LANE" = 1 ]; then
			echo "# --- $name: $*"
			cat "$log"
		fi
		echo "# --- $name: $p passed, $f failed in $((SECONDS - t0)) s"
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			echo "not ok - $name exited with status $rc (log: $log)"
			f=1
		fi
		echo "$name $p $f $((SECONDS - t0))" >>"$RESULTS"
	} | locked_cat
}

# locked_cat: stdin to stdout in one piece, whatever the other lanes print.
locked_cat() {
	if [ "$LANE" = 1 ]; then
		flock "$LOGDIR/.print" cat
	else
		cat
	fi
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
		echo "not ok - no unit test binaries under $dir/tests" | locked_cat
		echo "unit-binaries-$label 0 1 0" >>"$RESULTS"
	fi
}

# The suites, by group.
unit_group() {
	unit_suites "$BUILD" ""
	# The layering doc/ARCHITECTURE.md promises, read from the objects (nm).
	run_suite layers python3 "$HERE/layers/layers.py" "$BUILD"
	# The fuzz targets replayed over their committed corpora (gcc, no
	# libFuzzer; tests/fuzz/run.sh fuzzes): path twice, over openat2(2)
	# and over the O_NOFOLLOW walk of kernels without it.
	run_suite fuzz-replay-wire "$BUILD/fuzz-replay/replay_wire" \
		"$HERE/fuzz/corpus/wire"
	run_suite fuzz-replay-path "$BUILD/fuzz-replay/replay_path" \
		"$HERE/fuzz/corpus/path"
	RDCP_FUZZ_PATH_WALK=1 run_suite fuzz-replay-path-walk \
		"$BUILD/fuzz-replay/replay_path" "$HERE/fuzz/corpus/path"
	run_suite fuzz-replay-filter "$BUILD/fuzz-replay/replay_filter" \
		"$HERE/fuzz/corpus/filter"
	# The quick in-process tests again under valgrind (memcheck, leaks).
	local t
	for t in test_wire test_credit test_util; do
		run_suite "valgrind-$t" valgrind -q --error-exitcode=1 \
			--leak-check=full "$BUILD/tests/$t"
	done
	# Every shell script of the tree through shellcheck (tests/shellcheck.sh).
	run_suite shellcheck "$HERE/shellcheck.sh"
}

tcp_group() {
	run_suite tcp-e2e "$HERE/e2e/run_tcp.sh" --build "$BUILD"
	run_suite cli "$HERE/e2e/cli.sh" --build "$BUILD"
	run_suite observe-e2e "$HERE/e2e/observe.sh" --build "$BUILD"
	run_suite faults-e2e "$HERE/e2e/run_faults.sh" --build "$BUILD"
	run_suite mitm-e2e "$HERE/e2e/mitm.sh" --build "$BUILD"
	run_suite peer-e2e "$HERE/e2e/peer_selftest.sh" --build "$BUILD"
	run_suite ranges-e2e "$HERE/e2e/ranges.sh" --build "$BUILD"
	run_suite sshd-selftest "$HERE/e2e/ssh_selftest.sh" --build "$BUILD"
	run_suite ssh-e2e "$HERE/e2e/ssh.sh" --build "$BUILD"
	run_suite trust-e2e python3 "$HERE/e2e/faults_trust.py" --build "$BUILD"
}

san_group() {
	ASAN_OPTIONS=detect_leaks=1 unit_suites "$BUILD/asan" "asan-"
	TSAN_OPTIONS=halt_on_error=1 unit_suites "$BUILD/tsan" "tsan-"
}

# rdcp-mpi under mpirun, when an MPI compiler is installed (make setup
# installs Open MPI; make test builds rdcp-mpi then).
mpi_group() {
	if command -v mpicc >/dev/null 2>&1 || [ "$WHAT" = mpi ]; then
		run_suite mpi-e2e "$HERE/e2e/mpi.sh" --build "$BUILD"
		run_suite mpi-ssh-e2e "$HERE/e2e/mpi_ssh.sh" --build "$BUILD"
	else
		echo "# no MPI compiler (mpicc): the rdcp-mpi suite left out"
	fi
}

guest_group() {
	guest_single_group
	guest_pair_group
}

# The guest suites in two parts: one guest with scenarios.sh (CPU-bound:
# qemu emulates the guest's two CPUs) and the NUMA guest; the guest pairs,
# whose time is mostly waits (peer-loss timeouts, link cuts, boots), and
# rdcp-mpi's guests. Each boot picks its own ports (tests/guest/guest.sh),
# so the two may run at once.
guest_single_group() {
	run_suite rdma-e2e "$HERE/e2e/run_rdma.sh" --build "$BUILD" single numa
}

guest_pair_group() {
	run_suite rdma-pair-e2e "$HERE/e2e/run_rdma.sh" --build "$BUILD" \
		ssh rxhost txhost linkcut retry benchhw
	# rdcp-mpi's ranks in a Soft-RoCE guest, when it was built.
	if [ -x "$BUILD/rdcp-mpi" ]; then
		run_suite mpi-rdma-e2e "$HERE/e2e/mpi_rdma.sh" --build "$BUILD"
		run_suite mpi-rdma-pair-e2e "$HERE/e2e/mpi_rdma.sh" \
			--build "$BUILD" --pair
	fi
}

# lane NAME GROUP...: the groups one after the other, in the background,
# each suite printed whole when it ends; a lane that stops before its end
# counts as one failure.
lane() {
	local name=$1 g
	shift
	(
		LANE=1
		for g in "$@"; do "$g"; done
		echo "lane-$name done" >"$LOGDIR/lane-$name.done"
	) &
	LANES+=("$name")
}

case "$WHAT" in
unit) unit_group ;;
tcp) tcp_group ;;
quick) unit_group; tcp_group ;;
san) san_group ;;
mpi) mpi_group ;;
guest) guest_group ;;
all)
	if [ "${RDCP_TEST_LANES:-3}" = 1 ]; then
		unit_group; tcp_group; san_group; mpi_group; guest_group
	else
		# Three lanes side by side. The Soft-RoCE guests have a network of
		# their own, and the sanitizer builds' unit tests listen only on
		# ports the kernel picks, so neither meets the host suites' fixed
		# ports; those stay one after the other in the host lane. The
		# guest lane is mostly qemu and waits (peer-loss timeouts, boots).
		# The pairs in a fourth lane of their own did not pay (2026-12-02:
		# the two CPUs are busy either way; the single guest went from
		# 859 s to 1273 s beside them, and a pair's guest timed out).
		LANES=()
		rm -f "$LOGDIR"/lane-*.done
		lane guest guest_group
		lane host unit_group tcp_group mpi_group
		lane san san_group
		wait
		for l in "${LANES[@]}"; do
			[ -e "$LOGDIR/lane-$l.done" ] && continue
			echo "not ok - the $l lane stopped before its end"
			echo "lane-$l 0 1 0" >>"$RESULTS"
		done
	fi
	;;
*)
	echo "run_tests.sh: unknown suite group '$WHAT' (unit, tcp, quick, san, mpi, guest, all)" >&2
	exit 2 ;;
esac

# Every suite's time (.ci/run shows them), then the totals.
echo "# suite times (s):"
while read -r name p f secs; do
	printf '#   %-28s %5s  %s passed, %s failed\n' "$name" "$secs" "$p" "$f"
	passed=$((passed + p))
	failed=$((failed + f))
done <"$RESULTS"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
