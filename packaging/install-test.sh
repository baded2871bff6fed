#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Installs the .deb in a clean Debian 12 chroot and runs the installed
# rdcp end to end, the way the package and its unit would on a real host:
#
#   - a root: DIR if given and already a Debian root; else debootstrap
#     (--variant=minbase bookworm) into DIR, or, without DIR, a fresh copy
#     (in a temporary directory under $TMPDIR or /var/tmp, removed again)
#     of a pristine root cached in build/install-test/ (debootstrapped first
#     when the cache is missing: needs the Debian mirror, and fails, never
#     skips, when it cannot be had);
#   - /proc, /dev and /sys (both read-only) mounted in it, unmounted by a
#     trap whatever happens; a policy-rc.d that stops services starting;
#   - dpkg -i the .deb, apt-get -f install for its Depends; the key
#     /etc/rdcp/key made (rdcp:rdcp 0600), the unit not enabled, a
#     reinstall leaves the key alone;
#   - the receiver started as the unit would start it: ExecStart=, User=,
#     Group=, Environment=, EnvironmentFile=, LimitMEMLOCK= and UMask= are
#     read from the installed unit (parsed, with systemd's quoting and
#     $$/${VAR} rules, not hard-coded), run under prlimit and setpriv in the
#     chroot; the conffile is edited first to bind 127.0.0.1 on a free port;
#   - an empty, a small and a 64 MiB random file sent with the installed
#     /usr/bin/rdcp and its default key to 127.0.0.1 (TCP, no RDMA here),
#     compared byte for byte in RDCP_ROOT; SIGTERM stops the receiver;
#   - a site set up as rdcpd(8) tells the admin: client keys made with
#     rdcp --keygen --name and copied to /etc/rdcp/clients, modules in
#     /etc/rdcp/modules.conf (a writable one, a read-only one, one with
#     hosts=, one with require-encrypt; rdcp --check --modules), the audit
#     log and the metrics in RDCP_OPTS; the receiver started again from
#     the unit (LogsDirectory= made as systemd makes it); real clients
#     with their own keys push and pull where allowed and are refused
#     (exit 4, the rule named) where not; a key removed and the unit's
#     ExecReload= run (as its user, $MAINPID the receiver): the key is
#     refused, the others go on, the receiver is the same process; the
#     audit lines; /metrics scraped with curl, its counters checked and
#     promtool check metrics run (from the root, else the host, else SKIP);
#   - dpkg --purge: what packaging/README.md promises goes, goes; what
#     stays, stays.
#
# Only loopback carries rdcp traffic. The sandboxing options of the unit
# (ProtectSystem=, DeviceAllow=, ...) are not reproduced: that needs systemd
# as PID 1. Prints TAP lines (unnumbered: check-packages.sh numbers them)
# and "N passed, N failed"; exits non-zero when anything failed.
#
#   packaging/install-test.sh [--root DIR] DEB
#   packaging/install-test.sh --prepare   only the cached root (debootstrap
#                                         when missing): .ci/run makes it
#                                         while make test runs
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian).
# shellcheck disable=SC2317 # functions run by name (scenario lists, traps, wait_until callbacks)
# shellcheck disable=SC2016 # single quotes: expanded by the inner sh -c / remote shell
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(dirname "$HERE")
CACHE=$TOP/build/install-test
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ROOT='' DEB='' PREPARE=0
while [ $# -gt 0 ]; do
	case $1 in
	--root) ROOT=${2:?--root needs a directory}; shift 2 ;;
	--prepare) PREPARE=1; shift ;;
	-*) echo "usage: install-test.sh [--root DIR] DEB" >&2; exit 2 ;;
	*) DEB=$1; shift ;;
	esac
done
[ -n "$DEB" ] || [ "$PREPARE" = 1 ] ||
	{ echo "usage: install-test.sh [--root DIR] DEB" >&2; exit 2; }

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - install: $1"; }
not_ok() {
	failed=$((failed + 1)); echo "not ok - install: $1"
	[ -n "${2-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'
	return 0
}
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name" "$out"; fi
}
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}
# in_root CMD...: CMD in the chroot, with a clean environment.
in_root() {
	chroot "$ROOT" /usr/bin/env -i HOME=/root LC_ALL=C.UTF-8 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive "$@"
}

MOUNTS=() RECEIVER='' MADE_ROOT=''
cleanup() {
	if [ -n "$RECEIVER" ] && kill -0 "$RECEIVER" 2>/dev/null; then
		kill -KILL "$RECEIVER" 2>/dev/null
		wait "$RECEIVER" 2>/dev/null
	fi
	local i
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" ||
			echo "# install-test.sh: could not unmount ${MOUNTS[i]}" >&2
	done
	# A throwaway root we made is removed, but never while anything is
	# still mounted beneath it (that would delete the host's /dev).
	if [ -n "$MADE_ROOT" ] && [ -d "$MADE_ROOT" ]; then
		if awk -v r="$MADE_ROOT/" 'index($2 "/", r) == 1 { f = 1 }
			END { exit !f }' /proc/self/mounts; then
			echo "# install-test.sh: mounts remain under $MADE_ROOT: kept" >&2
		else
			rm -rf --one-file-system "$MADE_ROOT"
		fi
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || { not_ok "needs root (chroot, mount, debootstrap)"; finish; }
if [ "$PREPARE" = 0 ]; then
	[ -f "$DEB" ] || { not_ok "no package $DEB (make deb)"; finish; }
	DEB=$(cd "$(dirname "$DEB")" && pwd)/$(basename "$DEB")
	PKG=$(dpkg-deb -f "$DEB" Package)
	VERSION=$(dpkg-deb -f "$DEB" Version)
fi

# ------------------------------------------------------------- the root
# debootstrap_to DIR: a minbase bookworm in DIR, made in DIR.new first so
# that an interrupted run leaves no half-made root behind.
debootstrap_to() {
	local dir=$1 log
	rm -rf --one-file-system "$dir.new"
	mkdir -p "$(dirname "$dir")"
	log=$(debootstrap --variant=minbase "$SUITE" "$dir.new" "$MIRROR" 2>&1) || {
		printf '%s\n' "$log" | tail -n 20
		rm -rf --one-file-system "$dir.new"
		return 1
	}
	mv "$dir.new" "$dir"
}

# --prepare: the cached root only, no TAP (the test proper says whether it
# was cached or debootstrapped, and fails when it could not be had).
if [ "$PREPARE" = 1 ]; then
	[ -x "$CACHE/$SUITE/usr/bin/dpkg" ] && exit 0
	debootstrap_to "$CACHE/$SUITE"
	exit
fi

t0=$SECONDS
if [ -n "$ROOT" ]; then
	if [ ! -x "$ROOT/usr/bin/dpkg" ]; then
		[ ! -e "$ROOT" ] || [ -z "$(ls -A "$ROOT")" ] || {
			not_ok "--root $ROOT is neither a Debian root nor empty"; finish; }
		rmdir "$ROOT" 2>/dev/null
		if out=$(debootstrap_to "$ROOT"); then
			ok "debootstrap $SUITE minbase into $ROOT ($((SECONDS - t0)) s)"
		else
			not_ok "debootstrap $SUITE minbase from $MIRROR" "$out"; finish
		fi
	fi
	ROOT=$(cd "$ROOT" && pwd)
else
	if [ -x "$CACHE/$SUITE/usr/bin/dpkg" ]; then
		what="cached in build/install-test"
	elif out=$(debootstrap_to "$CACHE/$SUITE"); then
		what="debootstrapped into build/install-test ($((SECONDS - t0)) s)"
	else
		not_ok "debootstrap $SUITE minbase from $MIRROR" "$out"; finish
	fi
	# The working root, which gets the mounts, lives outside build/: a
	# `make clean` (rm -rf build) running meanwhile must not walk into a
	# bind mount of the host's /dev.
	ROOT=$(mktemp -d "${TMPDIR:-/var/tmp}/rdcp-install-test.XXXXXX") || {
		not_ok "mktemp -d for the root"; finish; }
	MADE_ROOT=$ROOT
	cp -a "$CACHE/$SUITE/." "$ROOT/" || { not_ok "copy the cached root"; finish; }
	ok "clean Debian $SUITE minbase root, $what"
fi


# Mounted in this shell, not in $(...), so that the trap knows them.
ERR=$(mktemp)
trap 'cleanup; rm -f "$ERR" "${KEEP_LOG-}"' EXIT
mnt() {
	local dst=$ROOT$1
	shift
	mkdir -p "$dst" && mount "$@" "$dst" 2>>"$ERR" && MOUNTS+=("$dst")
}
# /dev and /sys are bound read-only: the device nodes work, but nothing
# in the chroot (or an rm -rf of it) can delete or add host nodes.
if mnt /proc -t proc proc && mnt /dev --bind /dev &&
	mount -o remount,bind,ro "$ROOT/dev" 2>>"$ERR" &&
	mnt /sys --bind /sys && mount -o remount,bind,ro "$ROOT/sys" 2>>"$ERR"; then
	ok "mounted /proc, /dev and /sys (both read-only) in the root"
else
	not_ok "mount /proc, /dev, /sys in the root" "$(cat "$ERR")"; finish
fi
# No service may start in the chroot; the host's resolver for apt.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true

# ------------------------------------------------------------- install
cp "$DEB" "$ROOT/tmp/"
D=/tmp/$(basename "$DEB")
t0=$SECONDS
out=$( { in_root dpkg -i "$D" || in_root sh -c 'apt-get update -q &&
	apt-get -f install -y -q --no-install-recommends'; } 2>&1)
st=$(in_root dpkg-query -W -f='${db:Status-Status} ${Version}' "$PKG" 2>&1)
if [ "$st" = "installed $VERSION" ]; then
	ok "dpkg -i $(basename "$DEB"), apt-get -f install the Depends ($((SECONDS - t0)) s)"
else
	not_ok "dpkg -i $(basename "$DEB"), apt-get -f install the Depends" \
		"status: $st
$(printf '%s\n' "$out" | tail -n 30)"
	finish
fi
printf '%s\n' "$out" | grep -F 'rdcp-rdma: ' | sed 's/^/# postinst: /'
check "installed rdcp --version is rdcp ${VERSION%-*}" \
	sh -c "chroot '$ROOT' /usr/bin/rdcp --version | grep -qx 'rdcp ${VERSION%-*}'"
check "system user rdcp, /srv/rdcp rdcp:rdcp 0750" in_root sh -c '
	getent passwd rdcp && stat -c "%U:%G %a" /srv/rdcp &&
	[ "$(stat -c "%U:%G %a" /srv/rdcp)" = "rdcp:rdcp 750" ]'
check "postinst made /etc/rdcp/key: rdcp:rdcp 0600, 64 hex digits" in_root sh -c '
	stat -c "%U:%G %a %F" /etc/rdcp/key &&
	[ "$(stat -c "%U:%G %a %F" /etc/rdcp/key)" = "rdcp:rdcp 600 regular file" ] &&
	grep -Eqx "[0-9a-f]{64}" /etc/rdcp/key'
check "rdcpd.service is installed but not enabled" in_root sh -c '
	[ -f /lib/systemd/system/rdcpd.service ] &&
	! ls /etc/systemd/system/*.wants/rdcpd.service 2>/dev/null'
key1=$(sha256sum <"$ROOT/etc/rdcp/key")
out=$(in_root dpkg -i "$D" 2>&1)
check "reinstall (dpkg -i again) keeps the key as it was" sh -c "
	printf '%s\n' \"\$1\" | tail -n 5
	[ \"\$(sha256sum <'$ROOT/etc/rdcp/key')\" = '$key1' ] &&
	[ \"\$(chroot '$ROOT' stat -c '%U:%G %a' /etc/rdcp/key)\" = 'rdcp:rdcp 600' ]" _ "$out"

# ------------------------------------------------- the unit, parsed
UNIT=$ROOT/lib/systemd/system/rdcpd.service
# unit_get KEY: the values of KEY= in [Service], one per line, in order.
unit_get() {
	awk -v k="$1" '
		/^[ \t]*\[/ { sec = $0; next }
		sec ~ /^\[Service\]/ && index($0, k "=") == 1 {
			print substr($0, length(k) + 2) }' "$UNIT"
}
# split_words STRING: WORDS=() as systemd splits a command line or an
# Environment= value: blanks separate, '...' and "..." quote, a backslash
# takes the next character as it is.
split_words() {
	local s=$1 i=0 c w='' inw=0 q=''
	WORDS=()
	while [ "$i" -lt "${#s}" ]; do
		c=${s:i:1}
		if [ "$c" = \\ ]; then
			i=$((i + 1)); w+=${s:i:1}; inw=1
		elif [ -n "$q" ]; then
			if [ "$c" = "$q" ]; then q=; else w+=$c; fi
		else
			case $c in
			' ' | $'\t') [ "$inw" = 1 ] && WORDS+=("$w"); w='' inw=0 ;;
			\' | \") q=$c inw=1 ;;
			*) w+=$c inw=1 ;;
			esac
		fi
		i=$((i + 1))
	done
	[ -z "$q" ] || return 1
	[ "$inw" = 1 ] && WORDS+=("$w")
	return 0
}
# expand WORD: systemd's ExecStart= substitution: $$ is '$', ${NAME} is
# the variable's value; anything else with '$' is not supported here.
expand() {
	local s=$1 r='' name
	while [[ $s == *'$'* ]]; do
		r+=${s%%'$'*}; s=${s#*'$'}
		if [[ $s == '$'* ]]; then r+='$'; s=${s#'$'}
		elif [[ $s =~ ^\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; then
			name=${BASH_REMATCH[1]}; r+=${ENVV[$name]-}
			s=${s#"{$name}"}
		else echo "unsupported \$ in '$1'" >&2; return 1
		fi
	done
	printf '%s' "$r$s"
}
# bytes VALUE: a systemd size (K, M, G, T: powers of 1024) in bytes, or
# "unlimited" for infinity.
bytes() {
	case $1 in
	infinity) echo unlimited ;;
	*[0-9]) echo "$1" ;;
	*[0-9][KMGT]) local n=${1%?}
		case $1 in *K) echo $((n << 10)) ;; *M) echo $((n << 20)) ;;
		*G) echo $((n << 30)) ;; *T) echo $((n << 40)) ;; esac ;;
	*) return 1 ;;
	esac
}

declare -A ENVV=()
parse_unit() {
	local v w name line f
	USER_=$(unit_get User | tail -n 1)
	GROUP_=$(unit_get Group | tail -n 1)
	[ -n "$USER_" ] || { echo "no User="; return 1; }
	ENT=$(chroot "$ROOT" getent passwd "$USER_") || {
		echo "User=$USER_ does not exist in the root"; return 1; }
	[ -n "$GROUP_" ] || GROUP_=$(chroot "$ROOT" id -gn "$USER_")
	IFS=: read -r _ _ _ _ _ UHOME USHELL <<<"$ENT"
	# systemd's environment for a service with User=, then Environment=,
	# then EnvironmentFile= (later ones win), as systemd.exec(5) says.
	ENVV=([PATH]=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		[HOME]=$UHOME [USER]=$USER_ [LOGNAME]=$USER_ [SHELL]=$USHELL)
	while IFS= read -r v; do
		split_words "$v" || { echo "bad quoting: Environment=$v"; return 1; }
		for w in "${WORDS[@]}"; do ENVV[${w%%=*}]=${w#*=}; done
	done < <(unit_get Environment)
	ENVFILES=()
	while IFS= read -r f; do
		ENVFILES+=("$f")
		case $f in -*) f=${f#-}; [ -e "$ROOT$f" ] || continue ;; esac
		[ -r "$ROOT$f" ] || { echo "EnvironmentFile=$f missing"; return 1; }
		# KEY=value lines as systemd reads them (not sourced by a shell:
		# RDCP_OPTS=--a b is one value); quotes around the value go.
		while IFS= read -r line || [ -n "$line" ]; do
			line=${line#"${line%%[![:space:]]*}"}
			case $line in '' | '#'* | ';'*) continue ;; esac
			name=${line%%=*}; v=${line#*=}
			name=${name%"${name##*[![:space:]]}"}
			v=${v#"${v%%[![:space:]]*}"}; v=${v%"${v##*[![:space:]]}"}
			case $v in \"*\" | \'*\') v=${v:1:${#v}-2} ;; esac
			ENVV[$name]=$v
		done <"$ROOT$f"
	done < <(unit_get EnvironmentFile)
	MEMLOCK=$(unit_get LimitMEMLOCK | tail -n 1)
	[ -n "$MEMLOCK" ] || MEMLOCK=8M   # systemd's default
	MEMLOCK_B=$(bytes "$MEMLOCK") || { echo "LimitMEMLOCK=$MEMLOCK?"; return 1; }
	UMASK=$(unit_get UMask | tail -n 1)
	[ -n "$UMASK" ] || UMASK=0022
	SUCCESS=" 0 $(unit_get SuccessExitStatus | tr '\n' ' ') "
	EXEC=$(unit_get ExecStart | tail -n 1)
	split_words "$EXEC" || { echo "bad quoting: ExecStart=$EXEC"; return 1; }
	ARGV=()
	for w in "${WORDS[@]}"; do ARGV+=("$(expand "$w")") || return 1; done
	case ${ARGV[0]-} in
	-/*) ARGV[0]=${ARGV[0]#-} ;;
	/*) ;;
	*) echo "ExecStart= prefix or relative path not supported: ${ARGV[0]-}"
		return 1 ;;
	esac
	printf 'User=%s Group=%s LimitMEMLOCK=%s UMask=%s EnvironmentFile=%s\n' \
		"$USER_" "$GROUP_" "$MEMLOCK" "$UMASK" "${ENVFILES[*]}"
	printf 'ExecStart: %s\n' "${ARGV[*]}"
}

# The admin's edit of the conffile: loopback only, on a free port.
# port_used PORT: a local TCP socket (any state) has that port.
port_used() {
	awk -v p="$(printf ':%04X' "$1")" 'substr($2, length($2) - 4) == p {
		f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
PORT=7471
while port_used "$PORT"; do PORT=$((PORT + 1)); done
CONF=$ROOT/etc/rdcp/rdcpd.conf
check "edit /etc/rdcp/rdcpd.conf: RDCP_BIND=127.0.0.1, RDCP_PORT=$PORT" sh -c "
	sed -i -e 's/^RDCP_BIND=.*/RDCP_BIND=127.0.0.1/' \
		-e 's/^RDCP_PORT=.*/RDCP_PORT=$PORT/' '$CONF' &&
	grep -qx RDCP_BIND=127.0.0.1 '$CONF' && grep -qx RDCP_PORT=$PORT '$CONF'"

if parse_unit >"$ERR" 2>&1; then
	ok "parsed the installed unit's ExecStart, User, EnvironmentFile, LimitMEMLOCK"
	sed 's/^/#   /' "$ERR"
else
	not_ok "parse the installed unit (ExecStart, User, EnvironmentFile, LimitMEMLOCK)" \
		"$(cat "$ERR")"
	finish
fi
[ "${ENVV[RDCP_PORT]-}" = "$PORT" ] ||
	not_ok "EnvironmentFile= gave RDCP_PORT=${ENVV[RDCP_PORT]-}, not $PORT"
RROOT=${ENVV[RDCP_ROOT]:-/srv/rdcp}

# ------------------------------------------------- the receiver
# systemd (PID 1) may raise the limit; this shell may not without
# CAP_SYS_RESOURCE (as in an unprivileged container): then the receiver
# gets the host's hard limit, which TCP does not need, and the limit check
# is a TAP SKIP that says so.
MEMLOCK_EFF=$MEMLOCK_B MEMLOCK_SKIP=
if ! prlimit --memlock="$MEMLOCK_B:$MEMLOCK_B" true 2>/dev/null; then
	hard=$(ulimit -Hl)
	[ "$hard" = unlimited ] || hard=$((hard * 1024))
	MEMLOCK_EFF=$hard
	MEMLOCK_SKIP=" # SKIP this host cannot raise RLIMIT_MEMLOCK to $MEMLOCK_B (no CAP_SYS_RESOURCE): the receiver runs with the hard limit, $hard"
fi
RLOG=$(mktemp); KEEP_LOG=$RLOG
# as_unit CMD...: CMD in the root as the unit runs its commands: its
# User=, Group=, UMask=, LimitMEMLOCK= and environment (ENVV).
as_unit() {
	local k envargs=()
	for k in "${!ENVV[@]}"; do envargs+=("$k=${ENVV[$k]}"); done
	umask "$UMASK"
	exec chroot "$ROOT" /usr/bin/prlimit --memlock="$MEMLOCK_EFF:$MEMLOCK_EFF" \
		/usr/bin/setpriv --reuid="$USER_" --regid="$GROUP_" --init-groups \
		-- /usr/bin/env -i "${envargs[@]}" "$@"
}
listening() {
	awk -v p="$(printf ':%04X' "$PORT")" '$4 == "0A" && substr($2,
		length($2) - 4) == p { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}
# start_receiver: ExecStart= in the background (RECEIVER), its output in
# RLOG (emptied); LogsDirectory= made as systemd makes it, owned by User=.
start_receiver() {
	local d
	for d in $(unit_get LogsDirectory); do
		install -d -o "$(chroot "$ROOT" id -u "$USER_")" \
			-g "$(chroot "$ROOT" getent group "$GROUP_" | cut -d: -f3)" \
			-m 0755 "$ROOT/var/log/$d"
	done
	: >"$RLOG"
	(as_unit "${ARGV[@]}") </dev/null >"$RLOG" 2>&1 &
	RECEIVER=$!
	for _ in $(seq 100); do
		listening && break
		kill -0 "$RECEIVER" 2>/dev/null || break
		sleep 0.1
	done
	if listening && kill -0 "$RECEIVER" 2>/dev/null; then
		ok "receiver started from ExecStart= listens on 127.0.0.1:$PORT${1:+ ($1)}"
	else
		not_ok "receiver started from ExecStart= listens on 127.0.0.1:$PORT${1:+ ($1)}" \
			"$(cat "$RLOG")"
	fi
}
# stop_receiver: SIGTERM (KillSignal=), the exit within 10 s with a
# SuccessExitStatus=.
stop_receiver() {
	local t0 ms rc
	kill -TERM "$RECEIVER" 2>/dev/null
	t0=$(date +%s%N)
	for _ in $(seq 100); do
		kill -0 "$RECEIVER" 2>/dev/null || break
		# a zombie counts as gone: wait reaps it below
		[ "$(awk '{ print $3 }' "/proc/$RECEIVER/stat" 2>/dev/null)" = Z ] && break
		sleep 0.1
	done
	if kill -0 "$RECEIVER" 2>/dev/null &&
		[ "$(awk '{ print $3 }' "/proc/$RECEIVER/stat" 2>/dev/null)" != Z ]; then
		not_ok "receiver exits within 10 s of SIGTERM${1:+ ($1)}" "$(cat "$RLOG")"
	else
		wait "$RECEIVER"; rc=$?
		ms=$((($(date +%s%N) - t0) / 1000000))
		if [[ $SUCCESS == *" $rc "* ]]; then
			ok "SIGTERM: receiver exited in $ms ms with status $rc (a SuccessExitStatus)${1:+ ($1)}"
		else
			not_ok "SIGTERM: receiver exited with status $rc, not one of:$SUCCESS${1:+ ($1)}" \
				"$(cat "$RLOG")"
		fi
		RECEIVER=
	fi
	sed 's/^/# receiver: /' "$RLOG"
}

start_receiver
# After the execs (chroot, prlimit, setpriv, env, sh -c 'exec ...') the
# background job is rdcp itself.
check "receiver is /usr/bin/rdcp as $USER_ (User=), umask $UMASK (UMask=)" sh -c "
	readlink /proc/$RECEIVER/exe; grep -E '^(Uid|Gid|Umask)' /proc/$RECEIVER/status
	grep 'locked memory' /proc/$RECEIVER/limits
	[ \"\$(readlink /proc/$RECEIVER/exe)\" = '$ROOT/usr/bin/rdcp' ] ||
		[ \"\$(readlink /proc/$RECEIVER/exe)\" = /usr/bin/rdcp ] &&
	uid=\$(awk '/^Uid:/ { print \$2 }' /proc/$RECEIVER/status) &&
	[ \"\$uid\" = \"\$(chroot '$ROOT' id -u '$USER_')\" ] &&
	[ \"\$(awk '/^Umask:/ { print \$2 }' /proc/$RECEIVER/status)\" = \
		'$(printf '%04o' $((8#$UMASK)))' ]"
check "receiver has LimitMEMLOCK=$MEMLOCK$MEMLOCK_SKIP" sh -c "
	grep 'locked memory' /proc/$RECEIVER/limits
	awk -v w='$MEMLOCK_EFF' '/locked memory/ {
		exit !(\$4 == w && \$5 == w) }' /proc/$RECEIVER/limits"

# ------------------------------------------------- the copy
SRC=$ROOT/tmp/rdcp-src
rm -rf "$SRC"; mkdir -p "$SRC"
: >"$SRC/empty"
head -c 1234567 /dev/urandom >"$SRC/small.bin"
head -c 64M /dev/urandom >"$SRC/big.bin"
t0=$SECONDS
out=$(in_root timeout 120 /usr/bin/rdcp --port "$PORT" \
	/tmp/rdcp-src/empty /tmp/rdcp-src/small.bin /tmp/rdcp-src/big.bin \
	127.0.0.1:: 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
	ok "installed rdcp sent 3 files (0 B, 1.2 MB, 64 MiB) with the default key ($((SECONDS - t0)) s)"
else
	not_ok "installed rdcp sends 3 files to 127.0.0.1:$PORT (status $rc)" \
		"$out
receiver:
$(cat "$RLOG")"
fi
printf '%s\n' "$out" | sed 's/^/# sender: /'
check "sender said it used TCP (no RDMA device here)" \
	grep -q 'using TCP' <<<"$out"
for f in empty small.bin big.bin; do
	check "$RROOT/$f is byte for byte the source, owned by $USER_" sh -c "
		cmp '$SRC/$f' '$ROOT$RROOT/$f' &&
		[ \"\$(chroot '$ROOT' stat -c %U '$RROOT/$f')\" = '$USER_' ]"
done
check "no partial files left in $RROOT" sh -c "
	! ls -A '$ROOT$RROOT' | grep -F .rdcp-part"

# ------------------------------------------------- SIGTERM
stop_receiver

# ------------------------------------------------- a site: clients, modules
# The admin's setup of doc/rdcpd.8, CLIENTS AND MODULES, with the
# installed rdcp: a key for each client (rdcp --keygen --name) and its
# copy in /etc/rdcp/clients/NAME.key (rdcp, 0600), modules in the shipped
# /etc/rdcp/modules.conf (checked with rdcp --check --modules), the audit
# log and the metrics in RDCP_OPTS; then the restart the conffile asks for,
# copies by real clients, a revoked key after the unit's ExecReload=.
MD=/srv/rdcp/site # module paths: beneath the unit's ReadWritePaths=
MPORT=$((PORT + 1))
while port_used "$MPORT"; do MPORT=$((MPORT + 1)); done
check "admin: client keys for alice, bob, carol in /etc/rdcp/clients (rdcp:rdcp 0600)" \
	in_root sh -c '
	mkdir -p /root/keys && install -d -o rdcp -g rdcp -m 0700 /etc/rdcp/clients &&
	for c in alice bob carol; do
		rdcp --keygen --name "$c" "/root/keys/$c.key" &&
		install -o rdcp -g rdcp -m 0600 "/root/keys/$c.key" \
			"/etc/rdcp/clients/$c.key" || exit 1
	done
	ls -l /etc/rdcp/clients'
check "admin: modules scratch (rw), archive (read-only), instrument (hosts=), secure (require-encrypt)" \
	in_root sh -c "
	install -d -o rdcp -g rdcp -m 0750 $MD $MD/scratch $MD/archive \
		$MD/instrument $MD/secure &&
	head -c 300000 /dev/urandom >$MD/archive/a1 && chown rdcp:rdcp $MD/archive/a1 &&
	cat >>/etc/rdcp/modules.conf <<MODS
[scratch]
    path = $MD/scratch
    read = alice, bob, carol
    write = alice, carol
[archive]
    # read-only: nobody may push
    path = $MD/archive
    read = alice, bob
[instrument]
    path = $MD/instrument
    write = alice
    hosts = 10.1.2.0/24
[secure]
    path = $MD/secure
    read = alice
    write = alice
    require-encrypt
MODS
	# --check also reports the host (no RDMA here): its modules line
	setpriv --reuid=rdcp --regid=rdcp --init-groups env HOME=/nonexistent \
		rdcp --check --modules /etc/rdcp/modules.conf >/tmp/check.out 2>&1
	cat /tmp/check.out
	grep -Eq '^ok +modules file /etc/rdcp/modules.conf: 4 modules' /tmp/check.out"
check "admin: RDCP_OPTS=--audit-log /var/log/rdcp/audit.jsonl --metrics 127.0.0.1:$MPORT" sh -c "
	sed -i 's|^RDCP_OPTS=.*|RDCP_OPTS=--audit-log /var/log/rdcp/audit.jsonl --metrics 127.0.0.1:$MPORT|' '$CONF' &&
	grep -x 'RDCP_OPTS=--audit-log /var/log/rdcp/audit.jsonl --metrics 127.0.0.1:$MPORT' '$CONF'"
# systemctl restart: the unit read again, with the new EnvironmentFile=.
if parse_unit >"$ERR" 2>&1; then
	sed 's/^/#   /' "$ERR"
else
	not_ok "parse the installed unit again" "$(cat "$ERR")"
fi
start_receiver "clients and modules"
check "receiver read 3 named clients and 4 modules" \
	grep -Eq 'serving 3 named clients from .*, 4 modules' "$RLOG"

# client NAME ARGS...: the installed rdcp in the root with NAME's key;
# its exit status in CRC, its output in COUT.
client() {
	local name=$1
	shift
	COUT=$(in_root timeout 60 /usr/bin/rdcp --key-file "/root/keys/$name.key" \
		--port "$PORT" "$@" 2>&1)
	CRC=$?
	printf '%s\n' "$COUT" | sed "s/^/# $name: /"
}
SITE=$ROOT/tmp/rdcp-site
mkdir -p "$SITE"
head -c 2000003 /dev/urandom >"$SITE/f1"
client alice /tmp/rdcp-site/f1 127.0.0.1::scratch/run1/
check "alice pushes into the writable module scratch" sh -c "
	[ $CRC = 0 ] || { echo 'exit $CRC'; exit 1; }
	cmp '$SITE/f1' '$ROOT$MD/scratch/run1/f1' &&
	[ \"\$(stat -c %U '$ROOT$MD/scratch/run1/f1')\" = \"\$(stat -c %U '$ROOT$MD')\" ]"
client bob 127.0.0.1::archive/a1 /tmp/rdcp-site/a1
check "bob pulls from the read-only module archive" sh -c "
	[ $CRC = 0 ] || { echo 'exit $CRC'; exit 1; }
	cmp '$ROOT$MD/archive/a1' '$SITE/a1'"
client bob /tmp/rdcp-site/f1 127.0.0.1::archive/
check "bob's push into archive is refused: exit 4, 'module archive: client bob may not write'" sh -c "
	[ $CRC = 4 ] || { echo 'exit $CRC, want 4'; exit 1; }
	printf '%s\\n' \"\$1\" | grep -q 'module archive: client bob may not write' &&
	grep -q 'module archive: client bob may not write' '$RLOG' &&
	[ ! -e '$ROOT$MD/archive/f1' ]" _ "$COUT"
client alice /tmp/rdcp-site/f1 127.0.0.1::instrument/
check "alice's push into instrument from 127.0.0.1 is refused: exit 4, hosts=" sh -c "
	[ $CRC = 4 ] || { echo 'exit $CRC, want 4'; exit 1; }
	printf '%s\\n' \"\$1\" |
		grep -qF 'module instrument: client alice may not use it from 127.0.0.1 (hosts=)' &&
	[ -z \"\$(ls -A '$ROOT$MD/instrument')\" ]" _ "$COUT"
client alice /tmp/rdcp-site/f1 127.0.0.1::secure/
check "alice's push into secure without --encrypt is refused: exit 4, require-encrypt" sh -c "
	[ $CRC = 4 ] || { echo 'exit $CRC, want 4'; exit 1; }
	printf '%s\\n' \"\$1\" | grep -q 'module secure requires --encrypt' &&
	[ -z \"\$(ls -A '$ROOT$MD/secure')\" ]" _ "$COUT"
client alice --encrypt /tmp/rdcp-site/f1 127.0.0.1::secure/
check "alice's push into secure with --encrypt is placed" sh -c "
	[ $CRC = 0 ] || { echo 'exit $CRC'; exit 1; }
	cmp '$SITE/f1' '$ROOT$MD/secure/f1'"
client carol /tmp/rdcp-site/f1 127.0.0.1::scratch/carol1/
check "carol pushes into scratch before her key is revoked" sh -c "
	[ $CRC = 0 ] || { echo 'exit $CRC'; exit 1; }
	cmp '$SITE/f1' '$ROOT$MD/scratch/carol1/f1'"

# systemctl reload: every ExecReload= of the unit, in order, as its user,
# with $MAINPID the receiver's.
PID0=$RECEIVER
rm -f "$ROOT/etc/rdcp/clients/carol.key"
out=
while IFS= read -r line; do
	if ! split_words "$line"; then
		out+="bad quoting: ExecReload=$line"$'\n'; continue
	fi
	ENVV[MAINPID]=$RECEIVER
	argv=()
	for w in "${WORDS[@]}"; do
		w=${w//'$MAINPID'/$RECEIVER}
		argv+=("$(expand "$w")")
	done
	unset 'ENVV[MAINPID]'
	out+="ExecReload: ${argv[*]}"$'\n'
	case ${argv[0]} in
	/*) [ -x "$ROOT${argv[0]}" ] ||
		not_ok "ExecReload=${argv[0]} exists in the root (the package's Depends)" ;;
	*) not_ok "ExecReload= with a prefix or relative path: ${argv[0]}" ;;
	esac
	out+=$( (as_unit "${argv[@]}") 2>&1) || out+="(status $?)"$'\n'
done < <(unit_get ExecReload)
printf '%s' "$out" | sed 's/^/#   /'
for _ in $(seq 100); do
	grep -q 'reload: 2 named clients' "$RLOG" && break
	sleep 0.1
done
check "ExecReload= (SIGHUP): the receiver read 2 named clients, same process" sh -c "
	grep 'reload:' '$RLOG'
	grep -q 'reload: 2 named clients' '$RLOG' &&
	[ '$RECEIVER' = '$PID0' ] && kill -0 '$RECEIVER'"
client carol /tmp/rdcp-site/f1 127.0.0.1::scratch/carol2/
check "carol's revoked key is refused after the reload: exit 4" sh -c "
	[ $CRC = 4 ] || { echo 'exit $CRC, want 4'; exit 1; }
	[ ! -e '$ROOT$MD/scratch/carol2' ]"
client alice /tmp/rdcp-site/f1 127.0.0.1::scratch/run2/
check "alice still pushes after the reload (nothing restarted)" sh -c "
	[ $CRC = 0 ] || { echo 'exit $CRC'; exit 1; }
	cmp '$SITE/f1' '$ROOT$MD/scratch/run2/f1' && [ '$RECEIVER' = '$PID0' ]"

AUDIT=$ROOT/var/log/rdcp/audit.jsonl
check "audit log /var/log/rdcp/audit.jsonl: alice's push, bob's pull, the refusal, owned by $USER_" sh -c "
	sed 's/^/#   /' '$AUDIT'
	[ \"\$(chroot '$ROOT' stat -c %U /var/log/rdcp/audit.jsonl)\" = '$USER_' ] &&
	grep -q '\"event\":\"session\".*\"client\":\"alice\",\"module\":\"scratch\",\"op\":\"push\",\"files\":1,\"failed\":0,\"refused\":0,\"bytes\":2000003,\"result\":\"ok\"' '$AUDIT' &&
	grep -q '\"client\":\"bob\",\"module\":\"archive\",\"op\":\"pull\",\"files\":1,.*\"result\":\"ok\"' '$AUDIT' &&
	grep -q '\"client\":\"bob\",\"module\":\"archive\",\"op\":\"push\",.*\"result\":\"auth\"' '$AUDIT'"

MET=$(mktemp)
check "metrics: curl http://127.0.0.1:$MPORT/metrics answers" \
	curl -fsS --max-time 5 -o "$MET" "http://127.0.0.1:$MPORT/metrics"
check "metrics: alice's and bob's sessions and bytes by module, device tcp, ring slots held 0" sh -c "
	grep -E '^rdcp_(sessions|bytes)_total\\{client=\"(alice|bob)\"|^rdcp_ring|^rdcp_device' '$MET'
	grep -qx 'rdcp_sessions_total{client=\"alice\",module=\"scratch\"} 2' '$MET' &&
	grep -qx 'rdcp_bytes_total{client=\"alice\",module=\"scratch\",direction=\"in\"} 4000006' '$MET' &&
	grep -qx 'rdcp_bytes_total{client=\"bob\",module=\"archive\",direction=\"out\"} 300000' '$MET' &&
	grep -qx 'rdcp_device_bytes_total{device=\"tcp\",transport=\"tcp\",direction=\"in\"} 8000012' '$MET' &&
	grep -qx 'rdcp_ring_slots_held 0' '$MET'"
PROMTOOL=
if [ -x "$ROOT/usr/bin/promtool" ]; then PROMTOOL="chroot $ROOT promtool"
elif command -v promtool >/dev/null; then PROMTOOL=promtool
fi
if [ -n "$PROMTOOL" ]; then
	check "metrics: promtool check metrics" sh -c "$PROMTOOL check metrics <'$MET'"
else
	ok "metrics: promtool check metrics # SKIP no promtool in the root or on the host"
fi
rm -f "$MET"
stop_receiver "clients and modules"
# What the admin made goes with the module data: the purge below
# checks that the package removes its own.
rm -rf --one-file-system "$ROOT$MD" "$SITE" "$ROOT/var/log/rdcp" "$ROOT/root/keys"

# ------------------------------------------------- purge
out=$(in_root dpkg --purge "$PKG" 2>&1)
printf '%s\n' "$out" | grep -F 'rdcp-rdma: ' | sed 's/^/# postrm: /'
check "purge: package, /etc/rdcp (conffile, key) gone" sh -c "
	printf '%s\n' \"\$1\" | tail -n 5
	[ -z \"\$(chroot '$ROOT' dpkg-query -W -f='\${db:Status-Status}' '$PKG' 2>/dev/null)\" ] ||
		[ \"\$(chroot '$ROOT' dpkg-query -W -f='\${db:Status-Status}' '$PKG' 2>/dev/null)\" = not-installed ] &&
	for f in /etc/rdcp /usr/bin/rdcp /lib/systemd/system/rdcpd.service \
		/usr/share/man/man1/rdcp.1.gz /usr/share/man/man5/rdcp.conf.5.gz \
		/usr/share/man/man8/rdcpd.8.gz /usr/share/man/man5/rdcp-modules.conf.5.gz; do
		[ ! -e '$ROOT'\$f ] || { echo \"still there: \$f\"; exit 1; }
	done" _ "$out"
check "purge: received files kept in a non-empty /srv/rdcp, with a note; user rdcp kept" sh -c "
	[ -f '$ROOT/srv/rdcp/big.bin' ] &&
	printf '%s\n' \"\$1\" | grep -q '/srv/rdcp is not empty' &&
	chroot '$ROOT' getent passwd rdcp >/dev/null" _ "$out"
rm -f "$ROOT/srv/rdcp/empty" "$ROOT/srv/rdcp/small.bin" "$ROOT/srv/rdcp/big.bin"
out=$(in_root dpkg -i "$D" 2>&1)
check "install again: a new key, not the purged one" sh -c "
	printf '%s\n' \"\$1\" | tail -n 5
	[ -f '$ROOT/etc/rdcp/key' ] &&
	[ \"\$(sha256sum <'$ROOT/etc/rdcp/key')\" != '$key1' ] &&
	[ \"\$(chroot '$ROOT' stat -c '%U:%G %a' /etc/rdcp/key)\" = 'rdcp:rdcp 600' ]" _ "$out"
out=$(in_root dpkg --purge "$PKG" 2>&1)
check "purge with an empty /srv/rdcp: /srv/rdcp and /etc/rdcp gone" sh -c "
	printf '%s\n' \"\$1\" | tail -n 5
	[ ! -e '$ROOT/srv/rdcp' ] && [ ! -e '$ROOT/etc/rdcp' ]" _ "$out"

finish
