#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Runs the Debian package shellcheck (packaging/build-deps.sh installs it)
# over every shell script of the tree, one TAP line per file, with
# the sourced files followed (-x, from the script's own directory). A
# finding is fixed, or disabled where it stands with the reason beside it.
# Files without a #! line name their shell here (they are sourced, or run
# by the guest's busybox sh).
#
#   tests/shellcheck.sh [FILE...]     default: every shell script in git
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

n=0 fail=0
if ! command -v shellcheck >/dev/null 2>&1; then
	echo "not ok 1 - shellcheck not installed (run packaging/build-deps.sh)"
	exit 1
fi

# shell_of FILE: the -s argument for a file without a #! line.
shell_of() {
	case $1 in
	tests/e2e/lib.sh | tests/guest/demo_inside.sh) echo sh ;;
	tests/e2e/faults_listen.sh | tests/e2e/sshd.sh | tests/bench/bench_lib.sh | *.bash-completion.in) echo bash ;;
	esac
}

if [ $# -gt 0 ]; then
	files=("$@")
else
	# A package build runs this in an exported tree (no .git, or inside
	# the checkout's ignored build/): list the files with find there.
	if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$PWD" ]; then
		list() { git ls-files; }
	else
		list() {
			find . -path ./build -prune -o -path ./.git -prune -o -type f -print |
				sed 's|^\./||'
		}
	fi
	mapfile -t files < <(
		{
			list | grep -E '\.sh$|\.bash-completion\.in$|^\.ci/run$'
			list | tr '\n' '\0' |
				xargs -0 grep -lE '^#!(/usr/bin/env )?/?(usr/)?(bin/)?(ba)?sh\b' 2>/dev/null
		} | grep -v '^packaging/debian/rules$' | LC_ALL=C sort -u)
fi

for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	s=$(shell_of "$f")
	if out=$(shellcheck -x -P SCRIPTDIR ${s:+-s "$s"} -f gcc "$f" 2>&1); then
		echo "ok $n - shellcheck $f"
	else
		fail=$((fail + 1))
		echo "not ok $n - shellcheck $f"
		printf '%s\n' "$out" | sed 's/^/#   /'
	fi
done
echo "1..$n"
[ "$n" -gt 0 ] && [ "$fail" -eq 0 ]
