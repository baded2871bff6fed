#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Installs (with apt-get) the Debian packages the Soft-RoCE guest test
# harness (tests/guest/guest.sh) needs on the host: qemu, a static busybox
# for the guest's userland, rdma-core's libraries, providers and tools,
# perftest, iproute2 and OpenSSH (sshd and ssh, copied into the guests).
# Idempotent: when everything is already installed it only checks and
# returns; `apt-get update` runs only when a package is missing or apt
# does not know the kernel package yet.  Never installs a
# kernel on the host (guest.sh prepare downloads it with apt-get download).
set -euo pipefail

PACKAGES=(
	qemu-system-x86 busybox-static
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
	libibverbs-dev librdmacm-dev perftest
	iproute2 xz-utils zstd gzip coreutils libc-bin
	openssh-server openssh-client
)

APT_WHO=setup.sh
# shellcheck source=packaging/apt-install.sh
. "$(dirname "$0")/../../packaging/apt-install.sh"
command -v apt-get >/dev/null 2>&1 ||
	apt_die "apt-get not found: this harness needs a Debian/Ubuntu host"
apt_install_missing "${PACKAGES[@]}"

# guest.sh prepare needs apt to know the kernel meta package to download
# the matching linux-image; a fresh image has empty package lists.
if ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then
	apt_update
	apt-cache show linux-image-amd64 >/dev/null 2>&1 \
		|| apt_die "apt does not know linux-image-amd64 even after apt-get update; check /etc/apt/sources.list"
fi

echo "setup.sh: all guest-harness packages present" >&2
