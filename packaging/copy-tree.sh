#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# copy-tree.sh DIR: copies rdcp's source tree (the one this script is in)
# into DIR, which must not exist, without build/ or .git. In a git work
# tree this is every tracked file plus untracked ones that are not ignored,
# as they are on disk (so uncommitted work is packaged too); elsewhere, such
# as an unpacked tarball, the whole tree. mkdeb.sh and mkrpm.sh use it.
set -euo pipefail

die() { echo "copy-tree.sh: error: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: copy-tree.sh DIR"
DEST=$1
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -e "$DEST" ] && die "'$DEST' exists"
mkdir -p "$DEST"

if git -C "$TOP" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# --deduplicate: a file both modified and listed once only; deleted
	# but still tracked files are skipped by the test -e filter.
	(cd "$TOP" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			case $f in build/*) continue ;; esac
			[ -e "$f" ] && printf '%s\0' "$f"
		done | tar --null -T - -cf -) | tar -C "$DEST" -xf -
else
	tar -C "$TOP" --exclude=./build --exclude=./.git -cf - . |
		tar -C "$DEST" -xf -
fi
[ -f "$DEST/Makefile" ] || die "no Makefile copied from $TOP"
