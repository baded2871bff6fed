# shellcheck shell=bash disable=SC2034 # SSHD_ERR: for the sourcing script
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# A real OpenSSH server for rdcp's end-to-end tests on this host (bash,
# sourced): /usr/sbin/sshd (package openssh-server) on 127.0.0.1 on a free
# port, as the current user, with a throwaway host key and user key pair
# made under DIR, its own authorized_keys, pid file and log there, no PAM;
# never reads or writes ~/.ssh or /etc/ssh. Works inside a network
# namespace (`unshare -n`), as the TCP suites run.
#
#   . tests/e2e/sshd.sh
#   sshd_start DIR || { echo "not ok 1 - $SSHD_ERR"; exit 1; }
#   $SSH_CMD 127.0.0.1 some command      # or rdcp -e "$SSH_CMD" ...
#   sshd_stop                            # safe in a trap, and twice
#
# sshd_start reads (optional):
#   SSHD_REMOTE_PATH  PATH of the commands ssh runs (default: the caller's
#                     PATH at sshd_start), set with sshd's SetEnv
# and sets and exports, on success (status 0):
#   SSHD_PORT         the port it listens on, on 127.0.0.1
#   SSHD_PID          the listening sshd (sessions are its descendants)
#   SSHD_DIR SSHD_LOG DIR and sshd's log (LogLevel VERBOSE)
#   SSH_KEY           the user's private key (its .pub is authorized)
#   SSH_KNOWN_HOSTS   known_hosts with the host key for [127.0.0.1]:PORT
#   SSH_CMD           "ssh -F /dev/null -p PORT -i KEY -o UserKnownHostsFile=
#                     ... -o StrictHostKeyChecking=yes -o BatchMode=yes
#                     -o IdentitiesOnly=yes ..." (host and command follow)
#   SSH_WRONG_KNOWN_HOSTS  known_hosts naming another key for the same
#                     host and port, and SSH_CMD_WRONG_HOSTKEY: SSH_CMD
#                     with it (must fail: "host key verification failed")
#   SSH_CONFIG SSH_HOST_ALIAS  an ssh_config defining the alias (Host
#                     rdcp-test-sshd: 127.0.0.1, the port, key and
#                     known_hosts): `ssh -F "$SSH_CONFIG" rdcp-test-sshd`
#   SSH_USER          the user ssh logs in as (the current one)
#   SSH_REMOTE_HOME   where, seen from here, the remote commands' home
#                     (their working directory, where relative remote
#                     paths land) is: as root, DIR/home, bind-mounted over
#                     the user's home in sshd's own mount namespace (the
#                     remote side still calls it by the home's name, e.g.
#                     /root; no dotfile of the real home runs there);
#                     otherwise, or when DIR, the working directory or
#                     this tree lies under that home, the real home.
# On failure sshd_start returns non-zero with SSHD_ERR set (one line:
# what is missing or what sshd said); a test must then FAIL, never skip.
#
# sshd_sessions: the pids of the listening sshd's descendants (one sshd
# per connection, and the commands they run while they are their
# children), one a line: empty once every session ended. A command that
# outlives its session is reparented and no longer listed: to prove that
# nothing is left, take sshd_sessions while the command runs, then
# sshd_all_gone SECONDS PID... after.
#
# sshd_all_gone SECONDS PID...: wait up to SECONDS until none of the PIDs
# runs (gone or a zombie); non-zero with SSHD_LEFT = those still running
# (as "PID:COMMAND ...") otherwise.

SSHD_BIN=/usr/sbin/sshd
SSH_HOST_ALIAS=rdcp-test-sshd
SSHD_PID=
SSHD_ERR=
_SSHD_LIBDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# _sshd_descendants PID: every descendant of PID, one a line.
_sshd_descendants() {
	local f line rest p todo=("$1") cur
	local -A parent=()
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		# "pid (comm) state ppid ...": comm may hold spaces or ')'.
		rest=${line##*) }
		rest=${rest#* }
		p=${f#/proc/}
		parent[${p%/stat}]=${rest%% *}
	done
	while [ ${#todo[@]} -gt 0 ]; do
		cur=${todo[0]}
		todo=("${todo[@]:1}")
		for p in "${!parent[@]}"; do
			if [ "${parent[$p]}" = "$cur" ]; then
				echo "$p"
				todo+=("$p")
			fi
		done
	done
}

# _sshd_alive PID: running, not gone and not a zombie.
_sshd_alive() {
	local line
	read -r line 2>/dev/null <"/proc/$1/stat" || return 1
	line=${line##*) }
	[ "${line%% *}" != Z ]
}

sshd_sessions() {
	[ -n "${SSHD_PID:-}" ] || return 0
	_sshd_descendants "$SSHD_PID"
}

sshd_all_gone() {
	local secs=$1 i p
	shift
	for i in $(seq 1 $((secs * 20))); do
		SSHD_LEFT=
		for p in "$@"; do
			_sshd_alive "$p" &&
				SSHD_LEFT="$SSHD_LEFT $p:$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)"
		done
		[ -z "$SSHD_LEFT" ] && return 0
		[ "$i" -lt $((secs * 20)) ] && sleep 0.05
	done
	SSHD_LEFT=${SSHD_LEFT# }
	return 1
}

# _sshd_free_port: a TCP port nobody listens on (random in 20000..59999).
_sshd_free_port() {
	local port i
	for i in $(seq 1 50); do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if ! ss -Htln 2>/dev/null | awk '{print $4}' | grep -q ":$port\$"; then
			echo "$port"
			return 0
		fi
	done
	return 1
}

# _sshd_under DIR PREFIX: DIR is PREFIX or lies beneath it.
_sshd_under() {
	case "$1/" in "${2%/}/"*) return 0 ;; esac
	return 1
}

sshd_start() {
	local dir=$1 user home port cfg rc i
	SSHD_ERR=
	[ -n "$dir" ] || { SSHD_ERR="sshd_start: no DIR given"; return 1; }
	if [ ! -x "$SSHD_BIN" ]; then
		SSHD_ERR="$SSHD_BIN not found (package openssh-server; run make setup)"
		return 1
	fi
	for i in ssh ssh-keygen; do
		command -v "$i" >/dev/null 2>&1 || {
			SSHD_ERR="$i not found (package openssh-client; run make setup)"
			return 1
		}
	done
	user=$(id -un)
	home=$(getent passwd "$user" | cut -d: -f6)
	if [ "$(id -u)" = 0 ]; then
		# What Debian's service makes before it starts sshd: the
		# privilege separation user and its empty chroot directory.
		getent passwd sshd >/dev/null || {
			SSHD_ERR="no user sshd (sshd's privilege separation; reinstall openssh-server)"
			return 1
		}
		[ -d /run/sshd ] || mkdir -m 0755 /run/sshd || {
			SSHD_ERR="cannot create /run/sshd"
			return 1
		}
	fi
	mkdir -p "$dir" || { SSHD_ERR="cannot create $dir"; return 1; }
	dir=$(cd "$dir" && pwd)
	SSHD_DIR=$dir SSHD_LOG=$dir/sshd.log SSH_KEY=$dir/id_ed25519
	SSH_KNOWN_HOSTS=$dir/known_hosts SSH_WRONG_KNOWN_HOSTS=$dir/known_hosts.wrong
	SSH_CONFIG=$dir/ssh_config SSH_USER=$user
	rm -f "$dir"/ssh_host_ed25519_key* "$dir"/wrong_host_key* "$SSH_KEY" "$SSH_KEY.pub"
	for i in "$dir/ssh_host_ed25519_key" "$dir/wrong_host_key" "$SSH_KEY"; do
		ssh-keygen -q -t ed25519 -N '' -C "rdcp-test" -f "$i" </dev/null >/dev/null 2>&1 || {
			SSHD_ERR="ssh-keygen -t ed25519 -f $i failed"
			return 1
		}
	done
	cp "$SSH_KEY.pub" "$dir/authorized_keys"
	chmod 0600 "$dir/authorized_keys"

	# The remote home: DIR/home over the real one, in sshd's own mount
	# namespace, unless that would hide this tree or DIR.
	local bind=0
	SSH_REMOTE_HOME=$home
	if [ "$(id -u)" = 0 ] && [ -n "$home" ] && [ "$home" != / ] && [ -d "$home" ] &&
		command -v unshare >/dev/null 2>&1 &&
		! _sshd_under "$dir" "$home" && ! _sshd_under "$_SSHD_LIBDIR" "$home" &&
		! _sshd_under "$PWD" "$home"; then
		mkdir -p "$dir/home"
		# Not where mount namespaces are denied (an unprivileged
		# container): then the real home, as for any other user.
		# shellcheck disable=SC2016 # expanded by the inner sh
		if unshare -m --propagation private sh -c 'mount --bind "$1" "$2"' \
			sh "$dir/home" "$home" >/dev/null 2>&1; then
			bind=1
			SSH_REMOTE_HOME=$dir/home
		fi
	fi

	for _ in 1 2 3 4 5; do
		port=$(_sshd_free_port) || { SSHD_ERR="no free TCP port found"; return 1; }
		cfg=$dir/sshd_config
		cat >"$cfg" <<EOF
# rdcp's test sshd (tests/e2e/sshd.sh): throwaway, 127.0.0.1 only
Port $port
ListenAddress 127.0.0.1
AddressFamily inet
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
AllowUsers $user
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
PermitUserEnvironment no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTunnel no
MaxStartups 100
MaxSessions 100
LoginGraceTime 30
LogLevel VERBOSE
SetEnv "PATH=${SSHD_REMOTE_PATH:-$PATH}"
EOF
		if ! "$SSHD_BIN" -t -f "$cfg" >"$dir/sshd-t.log" 2>&1; then
			SSHD_ERR="sshd -t: $(head -n1 "$dir/sshd-t.log")"
			return 1
		fi
		: >"$SSHD_LOG"
		# shellcheck disable=SC2016,SC2094 # expanded by the inner sh; sshd -E and stderr both append to the log
		if [ "$bind" = 1 ]; then
			unshare -m --propagation private sh -c \
				'mount --bind "$1" "$2" && exec "$3" -D -f "$4" -E "$5"' \
				sh "$SSH_REMOTE_HOME" "$home" "$SSHD_BIN" "$cfg" "$SSHD_LOG" \
				</dev/null >>"$SSHD_LOG" 2>&1 &
		else
			"$SSHD_BIN" -D -f "$cfg" -E "$SSHD_LOG" </dev/null >>"$SSHD_LOG" 2>&1 &
		fi
		SSHD_PID=$!
		# Listening, or gone (a port taken meanwhile: try another).
		for i in $(seq 1 200); do
			grep -q "Server listening on 127.0.0.1 port $port" "$SSHD_LOG" && break
			_sshd_alive "$SSHD_PID" || break
			sleep 0.05
		done
		if grep -q "Server listening on 127.0.0.1 port $port" "$SSHD_LOG"; then
			rc=0
			break
		fi
		rc=1
		if _sshd_alive "$SSHD_PID"; then
			kill -KILL "$SSHD_PID" 2>/dev/null
			wait "$SSHD_PID" 2>/dev/null
			SSHD_PID=
			SSHD_ERR="sshd did not listen within 10 s: $(tail -n1 "$SSHD_LOG")"
			return 1
		fi
		wait "$SSHD_PID" 2>/dev/null
		SSHD_PID=
		SSHD_ERR="sshd exited: $(grep -v '^$' "$SSHD_LOG" | tail -n1)"
		grep -q 'Address already in use' "$SSHD_LOG" || return 1
	done
	[ "$rc" = 0 ] || return 1

	SSHD_PORT=$port
	echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/ssh_host_ed25519_key.pub")" >"$SSH_KNOWN_HOSTS"
	echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/wrong_host_key.pub")" >"$SSH_WRONG_KNOWN_HOSTS"
	local opts="-o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes"
	opts="$opts -o GlobalKnownHostsFile=/dev/null -o ConnectTimeout=10"
	SSH_CMD="ssh -F /dev/null -p $port -i $SSH_KEY -o UserKnownHostsFile=$SSH_KNOWN_HOSTS $opts"
	SSH_CMD_WRONG_HOSTKEY="ssh -F /dev/null -p $port -i $SSH_KEY -o UserKnownHostsFile=$SSH_WRONG_KNOWN_HOSTS $opts"
	cat >"$SSH_CONFIG" <<EOF
Host $SSH_HOST_ALIAS
	HostName 127.0.0.1
	Port $port
	User $user
	IdentityFile $SSH_KEY
	IdentitiesOnly yes
	UserKnownHostsFile $SSH_KNOWN_HOSTS
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	ConnectTimeout 10
EOF
	export SSHD_PORT SSHD_PID SSHD_DIR SSHD_LOG SSH_KEY SSH_KNOWN_HOSTS SSH_CMD \
		SSH_WRONG_KNOWN_HOSTS SSH_CMD_WRONG_HOSTKEY SSH_CONFIG SSH_HOST_ALIAS \
		SSH_USER SSH_REMOTE_HOME
	return 0
}

# sshd_stop: SIGTERM the listener (then SIGKILL after 5 s), and SIGKILL
# whatever of its sessions is left. Only pids this file started or their
# descendants, checked to still be sshd's. Safe when nothing runs.
sshd_stop() {
	local p i left
	[ -n "${SSHD_PID:-}" ] || return 0
	if [ -r "/proc/$SSHD_PID/cmdline" ] &&
		tr '\0' ' ' <"/proc/$SSHD_PID/cmdline" | grep -q sshd; then
		left=$(_sshd_descendants "$SSHD_PID")
		kill -TERM "$SSHD_PID" 2>/dev/null
		for i in $(seq 1 100); do
			_sshd_alive "$SSHD_PID" || break
			sleep 0.05
		done
		kill -KILL "$SSHD_PID" 2>/dev/null
		for p in $left; do kill -KILL "$p" 2>/dev/null; done
	fi
	wait "$SSHD_PID" 2>/dev/null
	SSHD_PID=
	return 0
}
