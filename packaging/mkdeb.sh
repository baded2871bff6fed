#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Builds the Debian package rdcp-rdma: copies the source tree to
# build/deb/rdcp-rdma-VERSION/, puts packaging/debian there as debian/,
# runs `dpkg-buildpackage -us -uc -b` in it and leaves the .deb (with the
# -dbgsym .deb, .changes and .buildinfo) in build/.
# VERSION comes from `make -s version`; when debian/changelog has not been
# given an entry for it, an automatic entry is added to the copy (with a
# warning) so that the Makefile stays the one place the version lives.
#
#   packaging/mkdeb.sh [--nocheck]    (`make deb` runs it)
#
# --nocheck skips the in-process unit tests that the build runs.
set -euo pipefail

die() { echo "mkdeb.sh: error: $*" >&2; exit 1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(dirname "$HERE")
OUT=$TOP/build
NOCHECK=
for a in "$@"; do
	case $a in
	--nocheck) NOCHECK=1 ;;
	*) die "unknown argument '$a' (usage: mkdeb.sh [--nocheck])" ;;
	esac
done

"$HERE/tool-deps.sh" deb
"$HERE/build-deps.sh"

VERSION=$(make -s -C "$TOP" --no-print-directory version)
[[ $VERSION =~ ^[0-9][0-9A-Za-z.+~]*$ ]] ||
	die "'make -s version' gave '$VERSION', not a version"
PKG=$(sed -n 's/^Source: *//p' "$HERE/debian/control")
ARCH=$(dpkg --print-architecture)

WORK=$OUT/deb
SRC=$WORK/$PKG-$VERSION
rm -rf "$WORK"
mkdir -p "$WORK"
"$HERE/copy-tree.sh" "$SRC"
rm -rf "$SRC/debian"
cp -a "$HERE/debian" "$SRC/debian"

have=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
if [ "${have%-*}" != "$VERSION" ]; then
	echo "mkdeb.sh: warning: debian/changelog is at $have, the Makefile at" \
		"$VERSION: adding an automatic entry to the build copy" >&2
	maint=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Maintainer)
	{
		printf '%s (%s) unstable; urgency=medium\n\n' "$PKG" "$VERSION"
		printf '  * Version %s (entry made by packaging/mkdeb.sh).\n\n' \
			"$VERSION"
		printf ' -- %s  %s\n\n' "$maint" "$(date -R)"
		cat "$SRC/debian/changelog"
	} >"$SRC/debian/changelog.new"
	mv "$SRC/debian/changelog.new" "$SRC/debian/changelog"
fi
DEBVER=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)

(cd "$SRC" && dpkg-checkbuilddeps) ||
	die "missing build dependencies (make setup installs them)"

opts=${DEB_BUILD_OPTIONS:-}
[ -n "$NOCHECK" ] && opts="$opts nocheck"
echo "mkdeb.sh: building $PKG $DEBVER in $SRC" >&2
(cd "$SRC" && DEB_BUILD_OPTIONS="${opts# }" \
	dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 || {
	tail -n 40 "$WORK/build.log" >&2
	die "dpkg-buildpackage failed (whole log: $WORK/build.log)"
}

DEB=${PKG}_${DEBVER}_${ARCH}.deb
[ -f "$WORK/$DEB" ] || die "dpkg-buildpackage made no $DEB"
# The .changes and .buildinfo list the .debs beside them: keep them together.
mv -f "$WORK"/*.deb "$WORK"/*.changes "$WORK"/*.buildinfo "$OUT/"
echo "$OUT/$DEB"
