#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# The benches' one chart helper: a clustered bar chart of a table, drawn
# by gnuplot as a PNG beside the table it shows.
#
#   tests/bench/chart.sh OUT.png TITLE YLABEL DATA.tsv
#
# DATA.tsv: a header line "row<TAB>series 1<TAB>series 2...", then one
# line per row: its label, then one number per series ("-" where there is
# none: no bar). gnuplot (Debian: gnuplot-nox) is installed with apt-get
# when missing and this runs as root, as tests/bench/sync.sh installs
# rsync; without it, one line on stderr says there is no chart and the
# status is still 0: a chart never fails a bench.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: chart.sh OUT.png TITLE YLABEL DATA.tsv" >&2; exit 2; }
png=$1 title=$2 ylabel=$3 data=$4

if ! command -v gnuplot >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
	command -v apt-get >/dev/null 2>&1; then
	echo "chart: installing gnuplot-nox" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends gnuplot-nox >/dev/null 2>&1 || true
fi
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "chart: no chart ($png): gnuplot not found (Debian: apt-get install gnuplot-nox)" >&2
	exit 0
fi
nseries=$(head -n1 "$data" | awk -F'\t' '{ print NF - 1 }')
rows=$(($(wc -l <"$data") - 1))
# Room for the labels under the bars, rotated by 35 degrees (in gnuplot's
# character heights and widths, measured on its png terminal): about 0.3
# of the longest label's length below the axis, 0.82 of it to the right.
longest=$(tail -n +2 "$data" | awk -F'\t' '{ if (length($1) > m) m = length($1) } END { print m + 0 }')
bmargin=$((longest * 30 / 100 + 3))
rmargin=$((longest * 82 / 100 / 2 + 4))
width=$((rows * 80 + 450 + longest * 4))
[ "$width" -ge 800 ] || width=800
height=$((450 + bmargin * 15))
plot=
for i in $(seq 2 $((nseries + 1))); do
	if [ "$i" = 2 ]; then
		plot="'$data' using $i:xtic(1) title columnheader($i)"
	else
		plot="$plot, '' using $i title columnheader($i)"
	fi
done
if ! gnuplot 2>"$png.err" <<EOF; then
set terminal png size $width,$height noenhanced
set output '$png'
set datafile separator "\t"
set datafile missing "-"
set title "$title" noenhanced
set ylabel "$ylabel"
set yrange [0:*]
set grid ytics
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35 left nomirror
set key top right
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
set bmargin $bmargin
set rmargin $rmargin
plot $plot
EOF
	echo "chart: no chart ($png): gnuplot failed: $(head -n1 "$png.err")" >&2
	rm -f "$png" "$png.err"
	exit 0
fi
rm -f "$png.err"
echo "chart: $png" >&2
