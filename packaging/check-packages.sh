#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Checks the packages that mkdeb.sh and mkrpm.sh left in build/, and the
# files they ship: lintian and rpmlint clean, the expected files, conffiles,
# dependencies and scriptlets, the man page (lint, and every option of
# --help and every exit code documented), the bash completion and the
# systemd unit. Prints TAP lines and a closing "N passed, N failed"; exits
# non-zero when anything failed. `make test-packages` builds, then runs it.
#
#   packaging/check-packages.sh [--chroot DIR | --no-install-test]
#
# Then install-test.sh installs the .deb in a clean Debian 12 chroot, runs
# the receiver as its unit would and copies files to it with the installed
# rdcp over loopback, and purges it (see there). That needs root and, the
# first time, the Debian mirror (debootstrap; the pristine root is cached
# in build/install-test/); without them it fails, it does not skip.
# --chroot DIR installs in DIR instead (a throwaway Debian root, or an
# empty or missing directory to debootstrap into); --no-install-test
# leaves the install test out.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(dirname "$HERE")
OUT=$TOP/build
CHROOT='' INSTALL_TEST=1
while [ $# -gt 0 ]; do
	case $1 in
	--chroot) CHROOT=${2:?--chroot needs a directory}; shift 2 ;;
	--no-install-test) INSTALL_TEST= ; shift ;;
	*) echo "usage: check-packages.sh [--chroot DIR | --no-install-test]" >&2
		exit 2 ;;
	esac
done

"$HERE/tool-deps.sh" check || exit 1

n=0 passed=0 failed=0
ok() { n=$((n + 1)); passed=$((passed + 1)); echo "ok $n - $1"; }
not_ok() {
	n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
	[ -n "${2-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'
	return 0
}
# check NAME CMD...: ok when CMD succeeds; its output becomes diagnostics.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name" "$out"; fi
}

VERSION=$(make -s -C "$TOP" --no-print-directory version)
PKG=$(sed -n 's/^Source: *//p' "$HERE/debian/control")
DEB=$OUT/${PKG}_${VERSION}_$(dpkg --print-architecture).deb
RPM=$OUT/$PKG-$VERSION-1.$(rpm --eval '%{_arch}').rpm
SRPM=$OUT/$PKG-$VERSION-1.src.rpm
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------- .deb
if [ -f "$DEB" ]; then ok "deb built: $(basename "$DEB")"; else
	not_ok "deb built: no $DEB (make deb)"; fi

if [ -f "$DEB" ]; then
	lint=$(lintian --pedantic -I -E --fail-on none "$DEB" 2>&1 |
		grep -v 'running with root privileges')
	bad=$(printf '%s\n' "$lint" | grep -E '^[EW]: ' || true)
	if [ -z "$bad" ]; then ok "lintian: no errors or warnings" \
		"$(printf '%s\n' "$lint" | grep -c '^[IPX]: ') info/pedantic"
	else not_ok "lintian: no errors or warnings" "$bad"; fi
	[ -n "$lint" ] && printf '%s\n' "$lint" | sed 's/^/# lintian: /'

	dpkg-deb -x "$DEB" "$TMP/deb"
	missing=
	for f in usr/bin/rdcp usr/share/man/man1/rdcp.1.gz \
		usr/share/man/man5/rdcp.conf.5.gz usr/share/man/man8/rdcpd.8.gz \
		usr/share/bash-completion/completions/rdcp \
		lib/systemd/system/rdcpd.service etc/rdcp/rdcpd.conf \
		usr/share/man/man5/rdcp-modules.conf.5.gz etc/rdcp/modules.conf \
		usr/share/doc/$PKG/copyright; do
		[ -e "$TMP/deb/$f" ] || missing="$missing /$f"
	done
	if [ -z "$missing" ]; then ok "deb ships binary, man page, completion, unit, config"
	else not_ok "deb ships binary, man page, completion, unit, config" "missing:$missing"; fi

	check "deb: /etc/rdcp/rdcpd.conf is a conffile" \
		sh -c "dpkg-deb -f '$DEB' Package >/dev/null &&
			dpkg-deb --ctrl-tarfile '$DEB' | tar -xOf - ./conffiles |
			grep -qx /etc/rdcp/rdcpd.conf"
	deps=$(dpkg-deb -f "$DEB" Depends)
	miss=
	for d in ibverbs-providers adduser libibverbs1 librdmacm1 libssl3 zlib1g; do
		[[ ",$deps," == *[\ ,]${d}[\ ,\(]* ]] || miss="$miss $d"
	done
	if [ -z "$miss" ]; then ok "deb Depends: ibverbs-providers, adduser and the libraries"
	else not_ok "deb Depends: ibverbs-providers, adduser and the libraries" \
		"missing:$miss in: $deps"; fi
	check "deb version $(dpkg-deb -f "$DEB" Version) is the Makefile's $VERSION" \
		test "$(dpkg-deb -f "$DEB" Version | sed 's/-[^-]*$//')" = "$VERSION"
	check "deb postinst creates the rdcp user and /srv/rdcp" \
		sh -c "dpkg-deb --ctrl-tarfile '$DEB' | tar -xOf - ./postinst |
			grep -q 'adduser .*--system' &&
			dpkg-deb --ctrl-tarfile '$DEB' | tar -xOf - ./postinst |
			grep -q '/srv/rdcp'"
	check "deb postinst makes /etc/rdcp/key only when absent, rdcp:rdcp 0600" \
		sh -c "dpkg-deb --ctrl-tarfile '$DEB' | tar -xOf - ./postinst >'$TMP/postinst' &&
			grep -q '! -e /etc/rdcp/key' '$TMP/postinst' &&
			grep -q 'rdcp --keygen /etc/rdcp/key' '$TMP/postinst' &&
			grep -q 'chown rdcp:rdcp /etc/rdcp/key' '$TMP/postinst'"
	# dh_installsystemd --no-enable: enable only what the admin had
	# enabled before (the "debian-installed" form of the snippet).
	check "deb postinst does not enable rdcpd.service on install" \
		sh -c "dpkg-deb --ctrl-tarfile '$DEB' | tar -xOf - ./postinst |
			grep -q 'deb-systemd-helper debian-installed .rdcpd.service.'"
	check "packaged rdcp --version prints rdcp $VERSION" \
		sh -c "'$TMP/deb/usr/bin/rdcp' --version | grep -qx 'rdcp $VERSION'"
fi

# ------------------------------------------------- rdcp-mpi, on its own
# rdcp-rdma must not need MPI; rdcp-mpi ships only rdcp-mpi and its page.
MPIDEB=$OUT/rdcp-mpi_$(basename "$DEB" | sed 's/^[^_]*_//')
if [ -f "$MPIDEB" ]; then ok "deb built: $(basename "$MPIDEB")"; else
	not_ok "deb built: no $MPIDEB (make deb)"; fi
if [ -f "$MPIDEB" ]; then
	lint=$(lintian --pedantic -I -E --fail-on none "$MPIDEB" 2>&1 |
		grep -v 'running with root privileges')
	bad=$(printf '%s\n' "$lint" | grep -E '^[EW]: ' || true)
	if [ -z "$bad" ]; then ok "lintian rdcp-mpi: no errors or warnings"
	else not_ok "lintian rdcp-mpi: no errors or warnings" "$bad"; fi
	dpkg-deb -x "$MPIDEB" "$TMP/mpideb"
	check "rdcp-mpi deb ships rdcp-mpi and its man page" \
		test -x "$TMP/mpideb/usr/bin/rdcp-mpi" -a \
		-f "$TMP/mpideb/usr/share/man/man1/rdcp-mpi.1.gz"
	check "rdcp-mpi deb Depends: mpi-default-bin and Open MPI's library" \
		sh -c "dpkg-deb -f '$MPIDEB' Depends | grep -q 'mpi-default-bin' &&
			dpkg-deb -f '$MPIDEB' Depends | grep -q 'libopenmpi'"
fi
if [ -f "$DEB" ]; then
	check "rdcp-rdma deb has no rdcp-mpi and no MPI dependency" \
		sh -c "! dpkg-deb -c '$DEB' | grep -q rdcp-mpi &&
			! dpkg-deb -f '$DEB' Depends | grep -qi mpi"
fi

# ---------------------------------------------------------------- .rpm
if [ -f "$RPM" ]; then ok "rpm built: $(basename "$RPM")"; else
	not_ok "rpm built: no $RPM (make rpm)"; fi

if [ -f "$RPM" ]; then
	lintfiles=("$RPM")
	MPIRPM=$OUT/rdcp-mpi-${RPM#"$OUT/$PKG-"}
	[ -f "$MPIRPM" ] && lintfiles+=("$MPIRPM")
	[ -f "$SRPM" ] && lintfiles+=("$SRPM")
	[ -f "$OUT/rpm/SPECS/$PKG.spec" ] && lintfiles+=("$OUT/rpm/SPECS/$PKG.spec")
	out=$(rpmlint -c "$HERE/rpm/rpmlint.toml" "${lintfiles[@]}" 2>&1)
	summary=$(printf '%s\n' "$out" | grep 'checked;')
	if printf '%s\n' "$summary" | grep -q ' 0 errors, 0 warnings'; then
		ok "rpmlint: $summary"
	else not_ok "rpmlint: no errors or warnings" "$out"; fi

	files=$(rpm -qlp "$RPM" 2>/dev/null)
	missing=
	for f in /usr/bin/rdcp /usr/share/man/man1/rdcp.1.gz \
		/usr/share/man/man5/rdcp.conf.5.gz /usr/share/man/man8/rdcpd.8.gz \
		/usr/share/bash-completion/completions/rdcp \
		/usr/lib/systemd/system/rdcpd.service /etc/rdcp/rdcpd.conf \
		/usr/share/man/man5/rdcp-modules.conf.5.gz /etc/rdcp/modules.conf; do
		grep -qx "$f" <<<"$files" || missing="$missing $f"
	done
	if [ -z "$missing" ]; then ok "rpm ships binary, man page, completion, unit, config"
	else not_ok "rpm ships binary, man page, completion, unit, config" "missing:$missing"; fi
	check "rpm: /etc/rdcp/rdcpd.conf is %config" \
		sh -c "rpm -qp --configfiles '$RPM' 2>/dev/null | grep -qx /etc/rdcp/rdcpd.conf"
	reqs=$(rpm -qp --requires "$RPM" 2>/dev/null)
	miss=
	for r in libibverbs 'libibverbs.so.1()(64bit)' 'librdmacm.so.1()(64bit)' \
		shadow-utils; do
		grep -qxF "$r" <<<"$reqs" || miss="$miss $r"
	done
	if [ -z "$miss" ]; then ok "rpm Requires: libibverbs (providers), the libraries, shadow-utils"
	else not_ok "rpm Requires: libibverbs (providers), the libraries, shadow-utils" \
		"missing:$miss"; fi
	check "rdcp-mpi rpm ships rdcp-mpi and its man page; rdcp-rdma does not" \
		sh -c "rpm -qlp '$MPIRPM' 2>/dev/null | grep -qx /usr/bin/rdcp-mpi &&
			rpm -qlp '$MPIRPM' | grep -qx /usr/share/man/man1/rdcp-mpi.1.gz &&
			! rpm -qlp '$RPM' | grep -q rdcp-mpi"
	check "rpm version is the Makefile's $VERSION" \
		test "$(rpm -qp --qf '%{VERSION}' "$RPM" 2>/dev/null)" = "$VERSION"
	check "rpm %pre creates the rdcp user" \
		sh -c "rpm -qp --scripts '$RPM' 2>/dev/null | grep -q 'useradd -r'"
	check "rpm %post makes /etc/rdcp/key only when absent; %ghost rdcp 0600" \
		sh -c "rpm -qp --scripts '$RPM' 2>/dev/null >'$TMP/rpmscripts' &&
			grep -q '! -e /etc/rdcp/key' '$TMP/rpmscripts' &&
			grep -q 'rdcp --keygen /etc/rdcp/key' '$TMP/rpmscripts' &&
			grep -q 'chown rdcp:rdcp /etc/rdcp/key' '$TMP/rpmscripts' &&
			rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags} %{FILEMODES:perms} %{FILEUSERNAME}\n]' '$RPM' 2>/dev/null |
			grep -qx '/etc/rdcp/key g -rw------- rdcp'"
fi

# ------------------------------------------------ files both packages ship
MAN=$TOP/doc/rdcp.1
# What the package managers show: rdcp as it is today (issue #23 item 6).
for f in "$HERE/debian/control" "$HERE/rpm/rdcp.spec"; do
	check "$(basename "$f"): the description names ssh mode, TCP and --encrypt (AES-256-GCM)" \
		sh -c "grep -q 'over ssh' '$f' && grep -q 'over TCP' '$f' &&
			grep -q 'AES-256-GCM' '$f' && grep -q -- '--encrypt' '$f' &&
			! grep -q 'the data is not encrypted' '$f'"
done

check "man page: mandoc -T lint clean" \
	sh -c "out=\$(mandoc -T lint -W warning '$MAN' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
check "man page: groff -man -ww clean" \
	sh -c "out=\$(groff -man -ww -z '$MAN' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
for page in rdcp.conf.5 rdcpd.8 rdcp-modules.conf.5; do
	check "$page: mandoc -T lint and groff -ww clean" \
		sh -c "out=\$(mandoc -T lint -W warning '$TOP/doc/$page' 2>&1; groff -man -ww -z '$TOP/doc/$page' 2>&1)
			echo \"\$out\"; [ -z \"\$out\" ]"
done
MPIMAN=$TOP/doc/rdcp-mpi.1
check "rdcp-mpi man page: mandoc -T lint and groff -ww clean" \
	sh -c "out=\$(mandoc -T lint -W warning '$MPIMAN' 2>&1; groff -man -ww -z '$MPIMAN' 2>&1)
		echo \"\$out\"; [ -z \"\$out\" ]"

BIN=$TMP/deb/usr/bin/rdcp
[ -x "$BIN" ] || BIN=$OUT/rdcp
COMP=$TMP/deb/usr/share/bash-completion/completions/rdcp
[ -f "$COMP" ] || COMP=$OUT/rdcp.bash-completion
if [ -x "$BIN" ]; then
	opts=$("$BIN" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
	mantext=$(sed 's/\\-/-/g' "$MAN")
	missing=
	for o in $opts; do
		grep -qF -- "$o" <<<"$mantext" || missing="$missing $o"
	done
	if [ -z "$missing" ]; then ok "man page documents every option of --help ($(wc -w <<<"$opts"))"
	else not_ok "man page documents every option of --help" "missing:$missing"; fi
	missing=
	for o in $opts; do
		grep -qF -- "$o" "$COMP" || missing="$missing $o"
	done
	if [ -z "$missing" ]; then ok "completion offers every option of --help"
	else not_ok "completion offers every option of --help" "missing:$missing"; fi
else
	not_ok "man page and completion against --help: no rdcp binary"
fi

codes=$(sed -n 's/.*RDCP_EXIT_[A-Z_]* = \([0-9]*\).*/\1/p' "$TOP/cmd/exit_codes.h")
section=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$MAN")
missing=
for c in $codes; do
	grep -qx "\.B $c" <<<"$section" || missing="$missing $c"
done
if [ -n "$codes" ] && [ -z "$missing" ]; then
	ok "man page lists every exit code of cmd/exit_codes.h ($(wc -w <<<"$codes"))"
else not_ok "man page lists every exit code of cmd/exit_codes.h" "missing:$missing"; fi

# shellcheck disable=SC2016 # expanded by the inner bash
check "bash completion: --checksum, --poll values and options" bash -c '
	source /usr/share/bash-completion/bash_completion
	source "$1"
	t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
		_rdcp rdcp "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}" 2>/dev/null
		echo "${COMPREPLY[*]}"; }
	[ "$(t rdcp --checksum "")" = "crc32 sha256 none" ] &&
	[ "$(t rdcp --poll=b)" = "busy" ] &&
	[ "$(t rdcp --lis)" = "--listen" ]' _ "$COMP"

UNIT=$TMP/deb/lib/systemd/system/rdcpd.service
[ -f "$UNIT" ] || UNIT=$HERE/systemd/rdcpd.service
check "systemd-analyze verify rdcpd.service" \
	env MANPATH="$TMP/deb/usr/share/man:$(manpath 2>/dev/null)" \
	systemd-analyze verify "$UNIT"
for want in 'User=rdcp' 'LimitMEMLOCK=infinity' 'LimitNOFILE=65536' \
	'ProtectSystem=strict' \
	'ReadWritePaths=/srv/rdcp' 'NoNewPrivileges=yes' 'PrivateTmp=yes' \
	'ProtectHome=yes' 'DevicePolicy=closed' \
	'DeviceAllow=char-infiniband_verbs rw' \
	'DeviceAllow=/dev/infiniband/rdma_cm rw' 'Restart=on-failure' \
	'KillSignal=SIGTERM' 'EnvironmentFile=-/etc/rdcp/rdcpd.conf'; do
	grep -qxF "$want" "$UNIT" || missing_unit="${missing_unit-} $want"
done
if [ -z "${missing_unit-}" ]; then ok "unit sets user, memlock, nofile, sandbox, devices, restart"
else not_ok "unit sets user, memlock, nofile, sandbox, devices, restart" "missing:$missing_unit"; fi

# ------------------------------------------------ install and run it
# install-test.sh prints unnumbered TAP lines and its own summary; they
# are numbered and counted here. Its exit status must agree.
if [ -n "$INSTALL_TEST" ]; then
	args=()
	[ -n "$CHROOT" ] && args=(--root "$CHROOT")
	it_failed=0 it_lines=0 it_rc=
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok "${line#ok - }"; it_lines=$((it_lines + 1)) ;;
		"not ok - "*) not_ok "${line#not ok - }"
			it_lines=$((it_lines + 1)) it_failed=$((it_failed + 1)) ;;
		"#"*) printf '%s\n' "$line" ;;
		[0-9]*" passed, "[0-9]*" failed") ;;
		"exit "[0-9]*) it_rc=${line#exit } ;;
		*) printf '# install-test: %s\n' "$line" ;;
		esac
	done < <("$HERE/install-test.sh" "${args[@]}" "$DEB" 2>&1; echo "exit $?")
	if [ "$it_lines" -eq 0 ] || [ -z "$it_rc" ] ||
		{ [ "$it_rc" != 0 ] && [ "$it_failed" -eq 0 ]; }; then
		not_ok "install test ended (status $it_rc) without reporting a failure"
	fi
fi

echo "1..$n"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
