#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# `make test-quickstart`: the commands README's "Quick start" and "Install"
# sections show, run as shown where they can run here, with checks that
# they did what the README says. TAP lines and a closing "N passed, N
# failed" (.ci/run counts it); exits non-zero when a check failed. Seconds.
#
#   tests/quickstart.sh BUILD_DIR
#
# Covered elsewhere: `make demo` (tests/demo.sh, its own CI run), `make
# test` (CI), `make deb`, `make rpm` and `dpkg -i` of the .deb in a clean
# Debian chroot (make test-packages). Not run anywhere: enabling rdcpd
# with systemctl, which needs systemd as PID 1 and an RDMA device.
set -uo pipefail

BUILD=${1:-build}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MAKE=${MAKE:-make}
cd "$REPO" || exit 1
T=$BUILD/quickstart
rm -rf "$T"
mkdir -p "$T"

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
# check DESC CMD...: ok when CMD succeeds; else its output as comments.
check() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$desc"
	else
		not_ok "$desc"
		printf '%s\n' "$out" | tail -n 10 | sed 's/^/# /'
	fi
}
mk() { "$MAKE" --no-print-directory BUILD="$BUILD" "$@" >>"$T/make.log" 2>&1; }
version=$("$MAKE" --no-print-directory -s version)

# "From source: make && make install PREFIX=/usr/local", into a DESTDIR.
check "make" mk
D=$T/root
check "make install PREFIX=/usr/local DESTDIR=$D" \
	mk install PREFIX=/usr/local DESTDIR="$D"
P=$D/usr/local
check "installed rdcp --version says 'rdcp $version'" \
	grep -qx "rdcp $version" <("$P/bin/rdcp" --version)
check "man page renders (man rdcp)" \
	bash -c "man -l '$P/share/man/man1/rdcp.1' 2>/dev/null | grep -q RDMA"
check "bash completion completes rdcp" bash -c \
	". '$P/share/bash-completion/completions/rdcp' && complete -p rdcp"
check "rdcpd.service runs the installed binary, reads its rdcpd.conf" \
	bash -c "grep -q 'exec /usr/local/bin/rdcp --listen' '$P/lib/systemd/system/rdcpd.service' &&
		grep -qx 'EnvironmentFile=-/usr/local/etc/rdcp/rdcpd.conf' '$P/lib/systemd/system/rdcpd.service'"
check "rdcpd.conf and modules.conf installed" test -s "$P/etc/rdcp/rdcpd.conf" -a -s "$P/etc/rdcp/modules.conf"
echo "# edited" >>"$P/etc/rdcp/rdcpd.conf"
mk install PREFIX=/usr/local DESTDIR="$D"
check "make install again keeps an edited rdcpd.conf" \
	grep -qx "# edited" "$P/etc/rdcp/rdcpd.conf"
mk uninstall PREFIX=/usr/local DESTDIR="$D"
check "make uninstall removes all but the two configuration files" bash -c \
	"[ \"\$(cd '$D' && find . -type f | LC_ALL=C sort | tr '\n' ' ')\" = \
		'./usr/local/etc/rdcp/modules.conf ./usr/local/etc/rdcp/rdcpd.conf ' ]"

# "DESTDIR, BINDIR, MANDIR, SYSCONFDIR, UNITDIR honoured".
D=$T/dirs
mk install PREFIX=/opt/r BINDIR=/opt/b MANDIR=/opt/m SYSCONFDIR=/opt/e \
	UNITDIR=/opt/u DESTDIR="$D"
check "make install BINDIR MANDIR SYSCONFDIR UNITDIR put files there" \
	test -x "$D/opt/b/rdcp" -a -f "$D/opt/m/man1/rdcp.1" \
	-a -f "$D/opt/e/rdcp/rdcpd.conf" -a -f "$D/opt/u/rdcpd.service"
check "rdcpd.service follows BINDIR and SYSCONFDIR" bash -c \
	"grep -q 'exec /opt/b/rdcp ' '$D/opt/u/rdcpd.service' &&
		grep -qx 'EnvironmentFile=-/opt/e/rdcp/rdcpd.conf' '$D/opt/u/rdcpd.service'"

echo "$((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
