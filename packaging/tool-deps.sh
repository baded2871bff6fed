#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Installs, with apt-get, the tools that building and checking rdcp's
# packages need on Debian (the compiler and libraries come from
# build-deps.sh). Idempotent and quick when everything is present.
#
#   tool-deps.sh deb      dpkg-buildpackage, debhelper
#   tool-deps.sh rpm      rpmbuild
#   tool-deps.sh check    lintian, rpmlint, mandoc, groff, systemd-analyze,
#                         debootstrap (the install test),
#                         bash-completion
#   tool-deps.sh all      everything
set -euo pipefail

die() { echo "tool-deps.sh: error: $*" >&2; exit 1; }

PACKAGES=()
for what in "${@:-all}"; do
	case $what in
	deb) PACKAGES+=(dpkg-dev debhelper) ;;
	rpm) PACKAGES+=(rpm) ;;
	check) PACKAGES+=(lintian rpmlint rpm mandoc groff systemd debootstrap
		bash-completion man-db) ;;
	all) PACKAGES+=(dpkg-dev debhelper rpm lintian rpmlint mandoc groff debootstrap
		systemd bash-completion man-db) ;;
	*) die "unknown set '$what' (deb, rpm, check or all)" ;;
	esac
done

missing=()
for p in "${PACKAGES[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

command -v apt-get >/dev/null 2>&1 ||
	die "apt-get not found; install by hand: ${missing[*]}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		die "run as root (or install sudo) to apt-get install: ${missing[*]}"
	SUDO=(sudo)
fi
echo "tool-deps.sh: installing: ${missing[*]}" >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
	die "apt-get update failed (is a Debian mirror reachable?)"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}" ||
	die "apt-get install failed for: ${missing[*]}"
