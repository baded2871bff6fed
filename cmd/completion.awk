# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The option words of the bash completion, read from `rdcp --help` (the
# Makefile's $(BUILD)/rdcp.bash-completion rule), so that cmd/options.c
# is the one place an option is listed: -X; --name; --name= for an option
# with an argument; both --name and --name= for an optional one
# ([=ARG]). An option's line starts with two spaces and a short option or
# six spaces and a long one; the description's lines are indented deeper.
# -? (argp's short --help) is left out: compgen -W would glob it.
/^(  -[^-]|      --)/ {
	spec = $0
	sub(/^ +/, "", spec)
	sub(/  .*/, "", spec)
	n = split(spec, item, /, /)
	for (i = 1; i <= n; i++) {
		w = item[i]
		if (w == "-?")
			continue
		if (w ~ /\[=/) {
			sub(/\[=.*/, "", w)
			words = words " " w " " w "="
		} else if (w ~ /=/) {
			sub(/=.*/, "=", w)
			words = words " " w
		} else {
			sub(/ .*/, "", w)
			words = words " " w
		}
	}
}
END { print substr(words, 2) }
