#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Builds the RPM package rdcp-rdma with rpmbuild (on Debian: package rpm):
# makes build/rpm/SOURCES/rdcp-rdma-VERSION.tar.gz from a copy of the
# source tree and build/rpm/SPECS/rdcp-rdma.spec from packaging/rpm/rdcp.spec
# with "%global rdcp_version VERSION" on top (VERSION from `make -s
# version`), runs rpmbuild -ba with _topdir=build/rpm and leaves the binary
# and source RPMs in build/.
#
#   packaging/mkrpm.sh [--nocheck]    (`make rpm` runs it)
#
# On a Debian host the BuildRequires are Debian packages (build-deps.sh
# installs them), which rpm's own database does not know: rpmbuild runs
# with --nodeps there. --nocheck skips the in-process unit tests.
set -euo pipefail

die() { echo "mkrpm.sh: error: $*" >&2; exit 1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(dirname "$HERE")
OUT=$TOP/build
SPEC=$HERE/rpm/rdcp.spec
ARGS=()
for a in "$@"; do
	case $a in
	--nocheck) ARGS+=(--without check) ;;
	*) die "unknown argument '$a' (usage: mkrpm.sh [--nocheck])" ;;
	esac
done

ON_DEBIAN=0
if command -v apt-get >/dev/null 2>&1; then
	ON_DEBIAN=1
	"$HERE/tool-deps.sh" rpm
	"$HERE/build-deps.sh"
	ARGS+=(--nodeps)
fi
command -v rpmbuild >/dev/null 2>&1 || die "rpmbuild not found"

VERSION=$(make -s -C "$TOP" --no-print-directory version)
[[ $VERSION =~ ^[0-9][0-9A-Za-z.+~]*$ ]] ||
	die "'make -s version' gave '$VERSION', not a version"
NAME=$(sed -n 's/^Name: *//p' "$SPEC")

WORK=$OUT/rpm
rm -rf "$WORK"
mkdir -p "$WORK"/{SOURCES,SPECS,BUILD,RPMS,SRPMS,tree}
"$HERE/copy-tree.sh" "$WORK/tree/$NAME-$VERSION"
tar -C "$WORK/tree" --owner=0 --group=0 --sort=name \
	-czf "$WORK/SOURCES/$NAME-$VERSION.tar.gz" "$NAME-$VERSION"
rm -rf "$WORK/tree"
# The spec in the SRPM carries the version, so `rpmbuild --rebuild` works;
# rpmlint wants it named after the package.
{
	printf '%%global rdcp_version %s\n' "$VERSION"
	cat "$SPEC"
} >"$WORK/SPECS/$NAME.spec"

# On Debian, rpm comes without Fedora's redhat-rpm-config, which adds the
# -debuginfo package and strips binaries through find-debuginfo: no
# -debuginfo package here, and brp-strip (which calls "$STRIP -g") is made
# to strip all unneeded symbols instead. Debian's brp-compress needs bash
# (read -d) but says #!/bin/sh.
if [ "$ON_DEBIAN" = 1 ]; then
	# shellcheck disable=SC2016 # the script written, not expanded here
	printf '#!/bin/sh\n[ "$1" = -g ] && shift\nexec strip --strip-unneeded "$@"\n' \
		>"$WORK/strip"
	chmod +x "$WORK/strip"
	ARGS+=(--define "__strip $WORK/strip"
		--define "__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}")
fi

echo "mkrpm.sh: building $NAME $VERSION in $WORK" >&2
rpmbuild -ba "${ARGS[@]}" \
	--define "_topdir $WORK" \
	"$WORK/SPECS/$NAME.spec" >"$WORK/build.log" 2>&1 || {
	tail -n 40 "$WORK/build.log" >&2
	die "rpmbuild failed (whole log: $WORK/build.log)"
}

shopt -s nullglob
rpms=("$WORK"/RPMS/*/*.rpm "$WORK"/SRPMS/*.rpm)
[ "${#rpms[@]}" -gt 0 ] || die "rpmbuild made no package"
mv -f "${rpms[@]}" "$OUT/"
for r in "${rpms[@]}"; do echo "$OUT/$(basename "$r")"; done
