# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# What the bench scripts share, sourced (bash; tests/shellcheck.sh names
# its shell). The guest's benchhw ships it beside hw.sh
# (tests/e2e/run_rdma.sh).
#
# BENCH_MEDIAN_AWK: the awk function median(k), the median of val[k, 1]
# .. val[k, cnt[k]] (0 when there is none), put in front of a report's
# awk program: awk -v ... "$BENCH_MEDIAN_AWK"'...' RAW.
# shellcheck disable=SC2034 # used by the scripts that source this file
BENCH_MEDIAN_AWK='
function median(k,   n, i, j, t, a) {
	n = cnt[k]
	for (i = 1; i <= n; i++) a[i] = val[k, i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (!n) return 0
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
'

# bench_rsyncd PORT DIR CONF: an rsync daemon on 127.0.0.1:PORT in the
# background, its module b the directory DIR, writable, as root (its
# configuration written to CONF); its pid added to the caller's PIDS.
bench_rsyncd() {
	cat >"$3" <<CONF
[b]
path = $2
read only = false
use chroot = false
uid = root
gid = root
CONF
	rsync --daemon --no-detach --address=127.0.0.1 --port="$1" \
		--config="$3" &
	PIDS+=($!)
}
