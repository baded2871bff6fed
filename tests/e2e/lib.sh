# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The harness every end-to-end shell suite of rdcp shares: TAP results,
# the clock, waiting on processes and files, starting receivers and
# senders, comparing copies and reading --json output.  Sourced by
#   tests/e2e/scenarios.sh  one host, RDMA in the Soft-RoCE guest (busybox
#                           sh) or TCP on this host's loopback (busybox sh)
#   tests/e2e/rdma_pair.sh  two Soft-RoCE guests (busybox sh)
#   tests/e2e/faults.sh     TCP on this host's loopback (bash)
# from their own directory:
#   . "$(dirname "$0")/lib.sh"
# In a guest the script runs as /test/script.sh, so tests/e2e/run_rdma.sh
# ships this file as /test/lib.sh (`guest.sh run --file SRC:/test/lib.sh`).
#
# POSIX sh, for busybox ash as well as bash (also under `set -u`): no
# `local`, so the helpers' own variables start with an underscore and the
# helper's initials; the callers' variables without one are left alone.
#
# A script may set, after sourcing:
#   RDCP          the rdcp binary the default start_rx/send/bg_send run
#                 (default: rdcp from PATH)
#   SEND_TIMEOUT  seconds a foreground sender may take (default 120)
#   POLL_MS       how often the waits look, in ms (default 50)
#   T_PREFIX      put before every test name
#   PIDFILE       every background pid is appended to it (for cleanup)
#   P             the port nextport counts up from (must be set)
# and may redefine start_rx, send and bg_send to add options of its own
# (faults.sh adds the transport, port and key).

# shellcheck disable=SC2034 # results and settings the sourcing scripts read
# shellcheck disable=SC2015 # [ A ] && [ B ] || t_fail: both are conditions, either failing is the failure
RDCP=${RDCP:-rdcp}
SEND_TIMEOUT=${SEND_TIMEOUT:-120}
POLL_MS=${POLL_MS:-50}
T_PREFIX=${T_PREFIX:-}
M=1048576
# The peer-went-away wording accepted from a survivor.
LOST_RE='went away|no word from|host is down|link is cut|peer (was )?lost|lost (the )?peer|gone|silent|disconnect|unreachable|retr'

# ---------------------------------------------------------------- preamble

# e2e_build ARGS...: the start of every bash suite, right after sourcing
# this file: BUILD from a leading "--build DIR" of ARGS (default build),
# made absolute; BUILD_ARGS = how many of ARGS that took (0 or 2), for the
# caller's `shift "$BUILD_ARGS"`.
e2e_build() {
	BUILD=build BUILD_ARGS=0
	if [ "${1:-}" = --build ]; then
		BUILD=$2 BUILD_ARGS=2
	fi
	case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
}

# need_built HINT FILE...: every FILE executable, or else the suite's one
# failure ("FILE missing (HINT)") and exit 1.
need_built() {
	_nb_hint=$1
	shift
	for _nb_f in "$@"; do
		[ -x "$_nb_f" ] && continue
		echo "not ok 1 - $_nb_f missing ($_nb_hint)"
		echo "1..1"
		echo "0 passed, 1 failed"
		exit 1
	done
}

# ---------------------------------------------------------------- clock

# own_netns VAR ARGS...: as root, re-runs the calling script (with
# --build "$BUILD" ARGS) in a network namespace of its own with lo up, so
# that its fixed ports meet nobody else's; VAR marks the second run. Runs
# on in place when it cannot (not root, no unshare).
# shellcheck disable=SC3043,SC3053,SC3028,SC3054,SC2016 # bash: only the bash suites (mpi.sh, mpi_ssh.sh, ranges.sh) call it; the quotes are bash -c's
own_netns() {
	local var="$1"
	shift
	[ -z "${!var:-}" ] && [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null ||
		return 0
	exec unshare -n env "$var=1" bash -c \
		'ip link set lo up && exec bash "$0" --build "$1" "${@:2}"' \
		"${BASH_SOURCE[1]}" "$BUILD" "$@"
}

now() { # milliseconds since boot (centisecond resolution)
	read -r _now_up _ </proc/uptime
	echo "${_now_up%.*}${_now_up#*.}0"
}
secs() { # MS: as seconds with one decimal
	echo "$(($1 / 1000)).$(($1 % 1000 / 100))"
}
since() { # T: seconds (one decimal) since a now() value
	secs $(($(now) - $1))
}
# msleep MS: busybox's usleep where there is one (the guest; run_tcp.sh
# puts one in PATH), else sleep with a fraction (GNU sleep).
if command -v usleep >/dev/null 2>&1; then
	msleep() { usleep $(($1 * 1000)); }
else
	msleep() { sleep "$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)))"; }
fi

# ---------------------------------------------------------------- TAP

# t_begin NAME ... t_fail WHY (any number) ... t_log FILE... ... t_end:
# one result, "ok N - NAME (Ts)" or "not ok N - NAME (Ts)" followed by the
# reasons and the tail of each log named, as "# " diagnostics.
N=0 FAILED=0
T_NAME='' T_WHY='' T_LOGS='' T_START=0
E2E_T0=$(now)
t_begin() { T_NAME=$T_PREFIX$1 T_WHY='' T_LOGS='' T_START=$(now); }
t_fail() { T_WHY="$T_WHY${T_WHY:+; }$*"; }
t_log() { T_LOGS="$T_LOGS $*"; }
t_end() {
	N=$((N + 1))
	if [ -z "$T_WHY" ]; then
		echo "ok $N - $T_NAME ($(since "$T_START")s)"
	else
		FAILED=$((FAILED + 1))
		echo "not ok $N - $T_NAME ($(since "$T_START")s)"
		echo "# $T_WHY"
		for _te_f in $T_LOGS; do
			[ -f "$_te_f" ] || continue
			echo "# ---- $_te_f (last 25 lines)"
			tail -n 25 "$_te_f" | sed 's/^/#   /'
		done
	fi
}
t_skip() { # NAME WHY: a result that was not tested here
	N=$((N + 1))
	echo "ok $N - $T_PREFIX$1 # SKIP $2"
}
t_finish() { # the plan last; exit 0 only if everything passed
	echo "1..$N"
	echo "# $((N - FAILED)) of $N passed in $(since "$E2E_T0")s"
	[ "$FAILED" = 0 ]
	exit
}

# check_scenarios "NAME..." ARGS...: the script's arguments, checked
# before any setup: "--list" prints the list and exits 0; a name not in
# the list exits 2.
check_scenarios() {
	_cs_all=$1
	shift
	if [ "${1:-}" = --list ]; then
		echo "$_cs_all"
		exit 0
	fi
	for _cs_sc in "$@"; do
		case " $_cs_all " in
		*" $_cs_sc "*) ;;
		*) echo "# unknown scenario $_cs_sc (have: $_cs_all)"; exit 2 ;;
		esac
	done
}

# run_scenarios "NAME..." [NAME...]: s_NAME for each NAME given, in that
# order (see check_scenarios), or for the whole list without any.
run_scenarios() {
	check_scenarios "$@"
	_rs_all=$1
	shift
	# shellcheck disable=SC2086 # a word list
	[ $# -gt 0 ] || set -- $_rs_all
	for _rs_sc in "$@"; do
		_rs_t=$(now)
		"s_$_rs_sc"
		echo "# scenario $_rs_sc: $(since "$_rs_t")s"
	done
}

nextport() { P=$((P + 1)); }

# ---------------------------------------------------------------- processes

track() { [ -z "${PIDFILE:-}" ] || echo "$1" >>"$PIDFILE"; }

alive() { # PID: running (not gone, not a zombie)
	[ -r "/proc/$1/stat" ] || return 1
	! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null
}

# wait_pid PID SECONDS: wait up to SECONDS for PID (a child); WRC = its
# status, or 124 after kill -9 on timeout.  WT = seconds waited.
wait_pid() {
	_wp_s=$(now)
	_wp_d=$((_wp_s + $2 * 1000))
	while alive "$1"; do
		if [ "$(now)" -ge "$_wp_d" ]; then
			kill -9 "$1" 2>/dev/null
			wait "$1" 2>/dev/null
			WRC=124 WT=$(since "$_wp_s")
			return
		fi
		msleep "$POLL_MS"
	done
	wait "$1"
	WRC=$? WT=$(since "$_wp_s")
}

# wait_ok PID SECONDS WHAT: wait_pid, and t_fail unless PID exited 0.
wait_ok() {
	wait_pid "$1" "$2"
	[ "$WRC" = 0 ] || t_fail "$3 exit $WRC, want 0"
}

# wait_copies SECONDS "PID..." SRC DST [SRC DST]...: for each background
# sender PID in turn, the copy it made: wait_ok (up to SECONDS each),
# then same SRC DST.
wait_copies() {
	_wc_t=$1 _wc_pids=$2
	shift 2
	for _wc_p in $_wc_pids; do
		wait_ok "$_wc_p" "$_wc_t" "sender of $1"
		same "$1" "$2"
		shift 2
	done
}

# wait_until SECONDS PID CMD...: run CMD every POLL_MS ms until it
# succeeds; non-zero once PID (unless empty) is gone, or after SECONDS
# worth of polls (counted, not timed: a loaded host stretches the bound).
wait_until() {
	_wu_n=$(($1 * 1000 / POLL_MS)) _wu_pid=$2 _wu_i=0
	shift 2
	until "$@"; do
		[ -z "$_wu_pid" ] || alive "$_wu_pid" || return 1
		_wu_i=$((_wu_i + 1))
		[ "$_wu_i" -lt "$_wu_n" ] || return 1
		msleep "$POLL_MS"
	done
}

logged() { grep -q "$2" "$1" 2>/dev/null; } # LOG PATTERN
# rx_sessions LOG N: a receiver's LOG has N session lines or more (one is
# logged as each session ends, whatever its result: rdcpd(8) LOG).
rx_sessions() { [ "$(grep -c 'session peer=' "$1" 2>/dev/null)" -ge "$2" ]; }

# ---------------------------------------------------------------- rdcp

# rx_spawn LOG CMD...: start a receiver in the background, RX = its pid;
# non-zero if it does not log 'listening' within 10 s.
rx_spawn() {
	_rx_log=$1
	shift
	# Emptied here, not by the child's redirection: the wait below must
	# not find a 'listening' left in LOG by an earlier receiver before
	# the new one has truncated it.
	: >"$_rx_log"
	"$@" >>"$_rx_log" 2>&1 &
	RX=$!
	track "$RX"
	wait_until 10 "$RX" logged "$_rx_log" listening
}

# start_rx LOG ARGS...: rdcp --listen -v ARGS (see rx_spawn).
start_rx() {
	_sr_log=$1
	shift
	rx_spawn "$_sr_log" "$RDCP" --listen -v "$@"
}

# start_rx_or_fail LOG ARGS..., rx_spawn_or_fail LOG CMD...: start_rx or
# rx_spawn, or else the current test fails with "receiver did not start
# listening" and what started is killed; then non-zero, for the caller to
# skip what needed the receiver.
start_rx_or_fail() { start_rx "$@" || rx_failed; }
rx_spawn_or_fail() { rx_spawn "$@" || rx_failed; }
rx_failed() {
	t_fail "receiver did not start listening"
	kill -9 "$RX" 2>/dev/null
	return 1
}

# restart_rx LOG ARGS...: start_rx again, up to 10 tries 0.3 s apart,
# while the port the receiver just left may still be taken (a client
# retrying against it waits meanwhile). Non-zero when it never started.
restart_rx() {
	_rr_i=0
	until start_rx "$@"; do
		kill -9 "$RX" 2>/dev/null
		_rr_i=$((_rr_i + 1))
		[ "$_rr_i" -lt 10 ] || return 1
		msleep 300
	done
}

# rx_not_started NAME LOG: after a start_rx that failed outside a test:
# the failed test "NAME: receiver starts" with LOG, and RX killed.
rx_not_started() {
	t_begin "$1: receiver starts"
	t_fail "receiver did not start listening"
	t_log "$2"
	t_end
	kill -9 "$RX" 2>/dev/null
}

# stop_rx [SECONDS]: wait (default 10 s, then kill -9) for the receiver RX
# to end by itself (a --once receiver); RX_RC = its status.
stop_rx() {
	wait_pid "$RX" "${1:-10}"
	RX_RC=$WRC
}

# term_rx [PID]: SIGTERM a receiver daemon (default RX) and wait for it
# (10 s, then kill -9); RX_RC = its status.
term_rx() {
	_tr_pid=${1:-$RX}
	kill -TERM "$_tr_pid" 2>/dev/null
	wait_pid "$_tr_pid" 10
	RX_RC=$WRC
}

# run_bounded SECONDS LOG CMD...: CMD in the foreground, killed after
# SECONDS; SRC = its status, ST = seconds taken.
run_bounded() {
	_rb_t=$1 _rb_log=$2
	shift 2
	_rb_s=$(now)
	timeout -s KILL "$_rb_t" "$@" >"$_rb_log" 2>&1
	SRC=$? ST=$(since "$_rb_s")
}

# bg_run LOG CMD...: CMD in the background; TX = its pid (CMD itself, not
# a subshell: TX gets the signals).
bg_run() {
	_br_log=$1
	shift
	: >"$_br_log" # emptied before it starts, as in rx_spawn
	"$@" >>"$_br_log" 2>&1 &
	TX=$!
	track "$TX"
}

# send LOG ARGS...: rdcp ARGS in the foreground, bounded by SEND_TIMEOUT.
send() {
	_sd_log=$1
	shift
	run_bounded "$SEND_TIMEOUT" "$_sd_log" "$RDCP" "$@"
}

# bg_send LOG ARGS...: rdcp ARGS in the background (see bg_run).
bg_send() {
	_bs_log=$1
	shift
	bg_run "$_bs_log" "$RDCP" "$@"
}

# ---------------------------------------------------------------- files

same() { # A B: byte-for-byte equal, else t_fail
	if [ ! -f "$2" ]; then
		t_fail "$2 missing"
	elif ! cmp "$1" "$2" >/dev/null 2>&1; then
		t_fail "$2 differs from $1 (sizes $(stat -c %s "$1") vs $(stat -c %s "$2"))"
	fi
}

temps() { find "$1" \( -name '.*.rdcp-part' -o -name '.*.rdcp-ranges' \) 2>/dev/null | tr '\n' ' '; }
no_temps() { [ -z "$(temps "$1")" ]; }

# no_temp DIR [SECONDS]: no .*.rdcp-part under DIR, else t_fail (waits up
# to SECONDS for the receiver to remove them).
no_temp() {
	wait_until "${2:-0}" "" no_temps "$1" ||
		t_fail "temporary file(s) left: $(temps "$1")"
}

# wait_partfile DIR NAME PID [SECONDS]: wait (default 20 s) until the
# receiver has the temporary of NAME in DIR, i.e. the transfer is under
# way, while PID lives.
wait_partfile() {
	wait_until "${4:-20}" "$3" test -e "$1/.$2.rdcp-part"
}

# jget LOG EVENT FIELD: FIELD of the first --json EVENT line in LOG
# (numbers and plain strings only).
jget() {
	grep "\"event\":\"$2\"" "$1" | head -n1 |
		sed -n "s/.*\"$3\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# jdone LOG PATH FIELD: FIELD of the file_done event for PATH.
jdone() {
	grep "\"event\":\"file_done\",\"path\":\"$2\"" "$1" | head -n1 |
		sed -n "s/.*\"$3\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# jlastdone LOG PATH FIELD: FIELD of the last file_done event for PATH
# (with --retry, a file may have one per attempt).
jlastdone() {
	grep "\"event\":\"file_done\",\"path\":\"$2\"" "$1" | tail -n1 |
		sed -n "s/.*\"$3\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# jattempts LOG: --retry's attempt events in LOG, "CLASS/EXIT/RETRY " each.
jattempts() {
	grep '"event":"attempt"' "$1" |
		sed 's/.*"class":"\([^"]*\)","exit":\([0-9]*\),.*"retry":\([a-z]*\).*/\1\/\2\/\3/' |
		tr '\n' ' '
}

# ---------------------------------------------------------------- ssh, rxe

# descendants PID: every process below PID (its children, theirs, ...),
# one a line. A process whose parent exited (reparented) is no longer one.
descendants() {
	_ds_todo=$1
	while [ -n "$_ds_todo" ]; do
		# shellcheck disable=SC2086 # a word list
		set -- $_ds_todo
		_ds_cur=$1
		shift
		_ds_todo=$*
		for _ds_f in /proc/[0-9]*/stat; do
			read -r _ds_l 2>/dev/null <"$_ds_f" || continue
			# "pid (comm) state ppid ...": comm may hold ") ".
			_ds_r=${_ds_l##*") "}
			_ds_r=${_ds_r#* }
			[ "${_ds_r%% *}" = "$_ds_cur" ] || continue
			_ds_p=${_ds_f#/proc/}
			_ds_p=${_ds_p%/stat}
			echo "$_ds_p"
			_ds_todo="$_ds_todo $_ds_p"
		done
	done
}
no_descendants() { [ -z "$(descendants "$1")" ]; } # PID
gone() { ! alive "$1"; }                           # PID

# rxe_sent [DEV] / rxe_rcvd [DEV]: RoCE packets the rxe device DEV
# (default rxe0) has sent / received since it was created (its
# hw_counters sent_pkts / rcvd_pkts; acks included); empty without one.
rxe_sent() { cat "/sys/class/infiniband/${1:-rxe0}/ports/1/hw_counters/sent_pkts" 2>/dev/null; }
rxe_rcvd() { cat "/sys/class/infiniband/${1:-rxe0}/ports/1/hw_counters/rcvd_pkts" 2>/dev/null; }

# over_rdma WHAT BEFORE AFTER BYTES: t_fail unless a counter (rxe_sent on
# the side whose data it is, rxe_rcvd on the other) went from BEFORE to at
# least BEFORE + BYTES/4096, a packet per 4 KiB (the largest RoCE MTU):
# then the BYTES crossed over RDMA, not over a TCP socket (ssh's, or the
# TCP transport's), which rxe never counts. Prints the packets seen.
over_rdma() {
	if [ -z "$2" ] || [ -z "$3" ]; then
		t_fail "$1: no rxe counter to read"
		return
	fi
	_or_d=$(($3 - $2)) _or_min=$(($4 / 4096))
	echo "# $1: $_or_d RoCE packets for $4 bytes (at least $_or_min wanted)"
	[ "$_or_d" -ge "$_or_min" ] && [ "$_or_d" -gt 0 ] ||
		t_fail "$1: rxe counted $_or_d packets for $4 bytes: the data did not go over RDMA"
}
