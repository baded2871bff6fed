#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Installs, with apt-get, what building and testing rdcp needs on
# Debian/Ubuntu: Build-Depends of packaging/debian/control, plus valgrind,
# busybox-static, python3, OpenSSH (the ssh tests start a real sshd) and
# Open MPI's mpirun (rdcp-mpi's tests), shellcheck (tests/shellcheck.sh),
# groff (tests/e2e/cli.sh renders the man pages), attr and acl (setfattr,
# setfacl: the xattrs scenario), curl and prometheus (its promtool checks
# the receiver's --metrics in tests/e2e/observe.sh; Debian has no smaller
# package with it) for make test. Idempotent and
# quick when everything is present (apt-get update runs only when a package
# is missing). `make setup` runs this and tests/guest/setup.sh.
set -euo pipefail

PACKAGES=(gcc make pkg-config libc6-dev libibverbs-dev librdmacm-dev
	zlib1g-dev libssl-dev libisal-dev liburing-dev mpi-default-dev libopenmpi-dev valgrind
	busybox-static python3 openssh-server openssh-client openmpi-bin
	mpi-default-bin shellcheck groff-base attr acl curl prometheus)

APT_WHO=build-deps.sh
# shellcheck source=packaging/apt-install.sh
. "$(dirname "$0")/apt-install.sh"
apt_install_missing "${PACKAGES[@]}"
