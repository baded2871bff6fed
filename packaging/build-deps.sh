#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Installs, with apt-get, what building and testing rdcp needs on
# Debian/Ubuntu: Build-Depends of packaging/debian/control, plus valgrind,
# busybox-static, python3, OpenSSH (the ssh tests start a real sshd) and
# Open MPI's mpirun (rdcp-mpi's tests) and shellcheck (tests/shellcheck.sh)
# for make test. Idempotent and
# quick when everything is present (apt-get update runs only when a package
# is missing). `make setup` runs this and tests/guest/setup.sh.
set -euo pipefail

PACKAGES=(gcc make pkg-config libc6-dev libibverbs-dev librdmacm-dev
	zlib1g-dev libssl-dev libisal-dev mpi-default-dev libopenmpi-dev valgrind
	busybox-static python3 openssh-server openssh-client openmpi-bin
	mpi-default-bin shellcheck)

die() { echo "build-deps.sh: error: $*" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		die "run as root (or install sudo) to apt-get install: ${missing[*]}"
	SUDO=(sudo)
fi
echo "build-deps.sh: installing: ${missing[*]}" >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
	die "apt-get update failed (is a Debian mirror reachable?)"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}" ||
	die "apt-get install failed for: ${missing[*]}"
