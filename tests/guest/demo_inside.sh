# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Runs inside the Soft-RoCE guest for `make demo` (tests/demo.sh); $1 is
# the file size in MiB.
echo "demo: guest kernel $(uname -r), Soft-RoCE device rxe0 on dummy0 at $RDCP_GUEST_ADDR"
echo "demo: qemu emulates the CPU, so MB/s are not this host's: only the ratio means anything"
RDCP_DEMO_MIB=${1:-64} sh /usr/bin/rdcp-demo /usr/bin/rdcp "$RDCP_GUEST_ADDR" rxe0
