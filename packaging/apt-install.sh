# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# shellcheck shell=bash
#
# Sourced (not run) by build-deps.sh, tool-deps.sh and tests/guest/setup.sh:
# the one apt-get installer. The sourcing script sets APT_WHO (its name,
# for messages) first.
#
#   apt_missing PKG...         prints the PKGs dpkg does not have installed
#   apt_update                 apt-get update, once per script
#   apt_install_missing PKG... installs those of PKG... not yet installed
#                              (apt-get update first, only then); quick and
#                              silent when all are there
#
# apt-get runs with sudo when not root. Every failure is one line on stderr
# ("$APT_WHO: error: ...") and exit 1.

apt_die() { echo "$APT_WHO: error: $*" >&2; exit 1; }

apt_missing() {
	local p st
	for p in "$@"; do
		st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[ "$st" = installed ] || printf '%s\n' "$p"
	done
}

APT_SUDO=()
apt_sudo() {
	[ "$(id -u)" -eq 0 ] && return 0
	command -v sudo >/dev/null 2>&1 ||
		apt_die "run as root (or install sudo) to run apt-get $*"
	APT_SUDO=(sudo)
}

APT_UPDATED=0
apt_update() {
	[ "$APT_UPDATED" = 1 ] && return 0
	apt_sudo update
	echo "$APT_WHO: apt-get update" >&2
	"${APT_SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
		apt_die "apt-get update failed (is a Debian mirror reachable?)"
	APT_UPDATED=1
}

apt_install_missing() {
	local missing
	mapfile -t missing < <(apt_missing "$@")
	[ "${#missing[@]}" -eq 0 ] && return 0
	command -v apt-get >/dev/null 2>&1 ||
		apt_die "apt-get not found; install by hand: ${missing[*]}"
	apt_sudo install "${missing[@]}"
	echo "$APT_WHO: installing: ${missing[*]}" >&2
	apt_update
	"${APT_SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		apt_die "apt-get install failed for: ${missing[*]}"
}
