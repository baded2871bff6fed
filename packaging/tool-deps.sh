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

APT_WHO=tool-deps.sh
# shellcheck source=packaging/apt-install.sh
. "$(dirname "$0")/apt-install.sh"

PACKAGES=()
for what in "${@:-all}"; do
	case $what in
	deb) PACKAGES+=(dpkg-dev debhelper) ;;
	rpm) PACKAGES+=(rpm) ;;
	check) PACKAGES+=(lintian rpmlint rpm mandoc groff systemd debootstrap
		bash-completion man-db) ;;
	all) PACKAGES+=(dpkg-dev debhelper rpm lintian rpmlint mandoc groff debootstrap
		systemd bash-completion man-db) ;;
	*) apt_die "unknown set '$what' (deb, rpm, check or all)" ;;
	esac
done

apt_install_missing "${PACKAGES[@]}"
