#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The single-host end-to-end scenarios of scenarios.sh, run on this host
# over TCP on loopback (127.0.0.1): the quick everyday suite, and proof
# that both transports pass the same list. Wrappers named rdcp and
# rdcp-hooks, first in PATH, add --transport tcp to every call, so the
# scenarios themselves are the very same script. Prints its TAP lines and
# exits non-zero if anything failed.
#
#   tests/e2e/run_tcp.sh [--build DIR] [--list | SCENARIO...]
#       e.g. `tests/e2e/run_tcp.sh --build build tree` runs one scenario;
#       without names, all of them.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"
e2e_build "$@"
shift "$BUILD_ARGS"
need_built "make all hooks" "$BUILD/rdcp" "$BUILD/hooks/rdcp"

T=$(mktemp -d /tmp/rdcp-e2e-tcp.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/cfg"
cp "$BUILD/rdcp" "$T/bin/rdcp.real"
cp "$BUILD/hooks/rdcp" "$T/bin/rdcp-hooks.real"
for n in rdcp rdcp-hooks; do
	printf '#!/bin/sh\nexec "%s" --transport tcp "$@"\n' "$T/bin/$n.real" >"$T/bin/$n"
	chmod +x "$T/bin/$n"
done

# The scenarios are written for the guest's busybox: run them with it, and
# give them its usleep.
command -v busybox >/dev/null 2>&1 ||
	{ echo "not ok 1 - busybox missing (run make setup)"; exit 1; }
printf '#!/bin/sh\nexec busybox usleep "$@"\n' >"$T/bin/usleep"
chmod +x "$T/bin/usleep"

# The ssh server of the ssh scenarios: a real sshd on 127.0.0.1 (see
# tests/e2e/sshd.sh) whose commands find the rdcp wrappers first in PATH.
# If it cannot start, RDCP_E2E_SSH_ERR says why and those scenarios fail.
# shellcheck source=sshd.sh source-path=SCRIPTDIR
. "$HERE/sshd.sh"
trap 'sshd_stop; rm -rf "$T"' EXIT
if SSHD_REMOTE_PATH=$T/bin:$PATH sshd_start "$T/sshd"; then
	export RDCP_E2E_SSH=$SSH_CMD RDCP_E2E_SSHD_PID=$SSHD_PID \
		RDCP_E2E_SSH_HOME=$SSH_REMOTE_HOME
else
	export RDCP_E2E_SSH_ERR=$SSHD_ERR
fi

cd "$T" || exit 1
PATH=$T/bin:$PATH RDCP_GUEST_ADDR=127.0.0.1 RDCP_E2E_HOST=1 \
	RDCP_E2E_KILL_MIB=1024 RDCP_E2E_KILL_AFTER_US=200000 \
	RDCP_E2E_AUTO_BIN=$T/bin/rdcp.real RDCP_E2E_AUTO_WANT=tcp \
	RDCP_E2E_DIR=$T/e2e XDG_CONFIG_HOME=$T/cfg \
	busybox sh "$HERE/scenarios.sh" "$@"
