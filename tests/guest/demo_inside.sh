# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Runs inside the Soft-RoCE guest for `make demo` (tests/demo.sh).
echo "demo: guest kernel $(uname -r), device rxe0 (Soft-RoCE) on dummy0 at $RDCP_GUEST_ADDR"
echo "demo: figures are emulated (qemu TCG): only ratios mean anything"
RDCP_DEMO_MIB=${RDCP_DEMO_MIB:-64} sh /usr/bin/rdcp-demo /usr/bin/rdcp "$RDCP_GUEST_ADDR"
