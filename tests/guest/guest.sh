#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Soft-RoCE (rdma_rxe) qemu guest harness for rdcp's end-to-end tests.
# The host kernel has no RDMA, so this boots Debian's 6.1 kernel (fetched
# with `apt-get download`, unpacked into a cache, never installed) in qemu
# with a busybox initramfs, loads rdma_rxe and runs a test script inside.
#
#   guest.sh prepare
#       Download/unpack the kernel into the cache ($RDCP_GUEST_DIR, default
#       build/guest/), extract vmlinux, decompress the needed modules.
#   guest.sh run [--pair [--rails] | --numa] [--timeout S] [--mem MiB] [--bin PATH]...
#                [--file SRC:DEST]... SCRIPT [ARGS...]
#       Boot one guest (rxe0 on dummy0, 10.77.0.1, 2 vCPUs) or, with --pair,
#       two guests joined by a private qemu dgram link on 127.0.0.1 (rxe0 on
#       eth0, 10.77.1.1 = a, 10.77.1.2 = b, 1 vCPU each), run SCRIPT with
#       ARGS as /test/script.sh and exit with its status.  A guest line
#       RDCP-GUEST-KILL-OTHER makes the host kill the other guest's qemu.
#       With --rails, the pair has a second link of its own (another
#       dgram socket pair) and each guest a second virtio NIC on it (MAC
#       52:54:00:77:02:01 on a, :02 on b; unconfigured: the script gives
#       it 10.77.2.x and an rxe device, a second rail).
#       With --numa, the single guest has two NUMA nodes (vCPU 0 and half
#       the memory on node 0, vCPU 1 and the other half on node 1) and a
#       virtio NIC, eth0, behind a PCI expander bridge on node 1 (its
#       device/numa_node reads 1; nothing is connected to it), and a
#       second one, eth1 (MAC 52:54:00:77:03:02), behind one on node 0:
#       for tests/e2e/numa.sh, which puts an rxe device on each (rails on
#       two nodes).
#       Exit 124 on timeout, 125 when a guest died without reporting a status.
#       With a host key shipped as /etc/ssh/ssh_host_ed25519_key (--file),
#       /init starts OpenSSH's sshd on port 22: root logs in by the keys
#       in /root/.ssh (authorized_keys, shipped too), no PAM.
#
# Console logs are kept in the cache dir, one set per run: run-PID.log
# (pair mode: with [a]/[b] prefixes) and run-PID-a.log / -b.log, with
# last-run*.log pointing at the newest.  The guest's
# /init is tests/guest/init.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GDIR=${RDCP_GUEST_DIR:-$REPO/build/guest}
KDIR=$GDIR/kernel
LOGP=$GDIR/run-$$ # this run's console logs: $LOGP.log, $LOGP-a.log, ...
FIX="run: sudo tests/guest/setup.sh"

# Modules to load, in this order, after their dependencies (resolved from
# each module's .modinfo depends= at prepare time).  crc32_generic: rxe
# needs a crc32 shash but does not declare it.  loop, ext4 (crc32c_generic
# for its metadata checksums, a soft dependency): a real file system with
# O_DIRECT for the direct scenario (the guest's /tmp is a tmpfs).
WANT_MODULES=(crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs
	rdma_rxe ib_cm iw_cm configfs rdma_cm rdma_ucm dummy
	virtio_pci virtio_net crc32c_generic loop ext4)
# Modules shipped in /lib/modules but not loaded at boot: a script insmods
# them with its own parameters. null_blk: a memory-backed block device
# with a set completion time (tests/bench/iodepth_guest.sh).
DEMAND_MODULES=(null_blk)

# Host tools copied into every guest (path in the guest = path here).
GUEST_TOOLS=(/usr/sbin/rdma /usr/sbin/ip /usr/bin/ib_write_bw /usr/bin/rping
	/usr/bin/rcopy /usr/bin/ibv_devinfo /usr/sbin/mkfs.ext4 /usr/bin/fincore
	/usr/bin/setfattr /usr/bin/getfattr /usr/bin/setfacl)
# OpenSSH's server and client (packages openssh-server, openssh-client):
# /init starts sshd on port 22 when a run ships a host key (see init.sh).
SSH_TOOLS=(/usr/sbin/sshd /usr/bin/ssh)

die() { echo "guest.sh: error: $*" >&2; exit 1; }
note() { echo "guest.sh: $*" >&2; }

usage() {
	sed -n '/^#   guest.sh prepare/,/^# \/init/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# ---------------------------------------------------------------- prepare

host_tool_path() { # resolve a tool path that may live in /usr/bin or /bin
	local p=$1 b
	[ -x "$p" ] && { echo "$p"; return 0; }
	b=$(basename "$p")
	for d in /usr/sbin /usr/bin /sbin /bin; do
		[ -x "$d/$b" ] && { echo "$d/$b"; return 0; }
	done
	return 1
}

check_host() {
	command -v qemu-system-x86_64 >/dev/null 2>&1 ||
		die "qemu-system-x86_64 not found (package qemu-system-x86); $FIX"
	if ! { [ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1; }; then
		die "static busybox not found at /bin/busybox (package busybox-static); $FIX"
	fi
	local t
	for t in "${GUEST_TOOLS[@]}"; do
		host_tool_path "$t" >/dev/null ||
			die "$(basename "$t") not found (packages iproute2 perftest rdmacm-utils ibverbs-utils e2fsprogs util-linux attr acl); $FIX"
	done
	if ! compgen -G '/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so' >/dev/null ||
		[ ! -f /etc/libibverbs.d/rxe.driver ]; then
		die "rxe verbs provider missing (package ibverbs-providers); $FIX"
	fi
	for t in "${SSH_TOOLS[@]}"; do
		[ -x "$t" ] || die "$t not found (packages openssh-server openssh-client); $FIX"
	done
	command -v xz >/dev/null 2>&1 || die "xz not found (package xz-utils); $FIX"
	command -v ldd >/dev/null 2>&1 || die "ldd not found (package libc-bin); $FIX"
}

module_depends() { # print the depends= list of a (decompressed) module
	tr '\0' '\n' <"$1" | sed -n 's/^depends=//p' | tr ',' ' '
}

# locked FN: FN in a subshell that holds $GDIR/.lock: make test's two
# guest lanes may prepare (or build the base image) at once; the second
# waits, then finds it ready. A failure inside exits this script too.
locked() {
	mkdir -p "$GDIR" || die "cannot create $GDIR"
	(
		flock -w 900 9 || die "another guest.sh held $GDIR/.lock for 900 s"
		"$@"
	) 9>"$GDIR/.lock" || exit 1
}

cmd_prepare() { locked prepare_kernel; }

prepare_kernel() {
	check_host
	# Ready, and for the modules wanted now (a list that grew re-prepares).
	[ -f "$KDIR/ready" ] && [ -f "$KDIR/vmlinux" ] &&
		[ "$(cat "$KDIR/want" 2>/dev/null)" = "${WANT_MODULES[*]} / ${DEMAND_MODULES[*]}" ] &&
		return 0

	local pkg
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: cannot fetch the guest kernel"
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1 || true)
	[ -n "$pkg" ] ||
		die "apt does not know linux-image-amd64 (its linux-image-*-amd64 dependency); $FIX (it runs apt-get update)"

	note "fetching guest kernel $pkg into $KDIR"
	local tmp
	mkdir -p "$GDIR"
	tmp=$(mktemp -d "$GDIR/prepare.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >/dev/null) ||
		die "apt-get download $pkg failed (is the Debian mirror reachable?); $FIX"
	dpkg-deb -x "$tmp"/*.deb "$tmp/x" || die "dpkg-deb -x of $pkg failed"

	local kver vmlinuz off mdir
	vmlinuz=$(compgen -G "$tmp/x/boot/vmlinuz-*" | head -n1 || true)
	[ -n "$vmlinuz" ] || die "no /boot/vmlinuz-* in $pkg"
	kver=${vmlinuz##*/vmlinuz-}
	mdir=$tmp/x/lib/modules/$kver
	[ -d "$mdir" ] || die "no /lib/modules/$kver in $pkg"

	mkdir -p "$tmp/k/modules"
	cp "$vmlinuz" "$tmp/k/vmlinuz"
	cp "$tmp/x/boot/config-$kver" "$tmp/k/config" 2>/dev/null || true
	# Uncompressed ELF vmlinux (booted via PVH): saves the in-guest
	# decompression, which is slow under TCG.  Same idea as the kernel's
	# scripts/extract-vmlinux, for the xz-compressed Debian image.
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n1 | cut -d: -f1 || true)
	if [ -n "$off" ]; then
		tail -c "+$((off + 1))" "$vmlinuz" | xz -dc --single-stream >"$tmp/k/vmlinux" 2>/dev/null || true
	fi
	if ! head -c 4 "$tmp/k/vmlinux" 2>/dev/null | grep -q 'ELF'; then
		note "could not extract vmlinux; will boot the compressed vmlinuz"
		rm -f "$tmp/k/vmlinux"
	fi

	# Find, decompress and order the modules.
	local -A path=() done_=()
	local f n order=()
	while IFS= read -r f; do
		n=${f##*/}; n=${n%%.ko*}
		path[$n]=$f
	done < <(find "$mdir/kernel" -name '*.ko*')
	local builtin=$mdir/modules.builtin
	add_module() {
		local m=$1 f out d
		[ -n "${done_[$m]:-}" ] && return 0
		done_[$m]=1
		f=${path[$m]:-}
		if [ -z "$f" ]; then
			grep -q "/$m.ko\$" "$builtin" 2>/dev/null && return 0
			die "kernel module $m not found in $pkg"
		fi
		out=$tmp/k/modules/$m.ko
		case "$f" in
		*.ko) cp "$f" "$out" ;;
		*.ko.xz) xz -dc "$f" >"$out" ;;
		*.ko.zst) zstd -q -dc "$f" >"$out" ;;
		*.ko.gz) gzip -dc "$f" >"$out" ;;
		*) die "unknown module format $f" ;;
		esac
		for d in $(module_depends "$out"); do add_module "$d"; done
		order+=("$m")
	}
	for n in "${WANT_MODULES[@]}"; do add_module "$n"; done
	printf '%s\n' "${order[@]}" >"$tmp/k/modules/order"
	# (their dependencies must be among the modules loaded at boot)
	for n in "${DEMAND_MODULES[@]}"; do add_module "$n"; done
	echo "${WANT_MODULES[*]} / ${DEMAND_MODULES[*]}" >"$tmp/k/want"
	echo "$pkg $kver" >"$tmp/k/ready"

	rm -rf "$KDIR"
	mv "$tmp/k" "$KDIR"
	rm -rf "$tmp"
	trap - EXIT
	note "guest kernel ready: $pkg ($kver), modules: ${order[*]}"
}

# ---------------------------------------------------------------- initramfs

# IN_BASE: the files of the base image (set by cmd_run), which a run's
# overlay need not carry again (rdcp's libraries, libcrypto and all, are
# there for the tools and sshd).
declare -A IN_BASE=()
# copy_with_libs ROOT SRC [DEST]: copy an executable/library dereferenced to
# ROOT/DEST plus everything ldd lists for it (but what the base image has).
copy_file() {
	local root=$1 src=$2 dst=${3:-$2} u
	[ -e "$root$dst" ] && return 0
	u=${dst/#\/lib\//\/usr\/lib\/}; u=${u/#\/lib64\//\/usr\/lib64\/}
	[ -n "${IN_BASE[$u]:-}" ] && return 0
	mkdir -p "$root$(dirname "$dst")"
	cp -L "$src" "$root$dst"
}
copy_libs() {
	local root=$1 bin=$2 lib
	while read -r lib; do
		[ -n "$lib" ] && copy_file "$root" "$lib"
	done < <(ldd "$bin" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p')
	if ldd "$bin" 2>&1 | grep -q 'not found'; then
		die "$bin: libraries not found: $(ldd "$bin" 2>&1 | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
	fi
}
copy_with_libs() {
	copy_file "$1" "$2" "${3:-$2}"
	copy_libs "$1" "$2"
}

find_lib() { # first existing path for a library soname
	local d
	for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /lib64; do
		[ -e "$d/$1" ] && { echo "$d/$1"; return 0; }
	done
	return 1
}

# The base image (busybox, modules, tools, libs) is cached; the key covers
# the inputs so a changed package or harness rebuilds it.
build_base() {
	local key t out=$GDIR/base.cpio
	key=$(
		cat "$KDIR/ready" "${BASH_SOURCE[0]}" "$HERE/init.sh"
		for t in /bin/busybox "${GUEST_TOOLS[@]}"; do ls -lL "$(host_tool_path "$t")"; done
		ls -lL "${SSH_TOOLS[@]}"
		# their libraries, which runs take from the base image too
		for t in "${GUEST_TOOLS[@]}" "${SSH_TOOLS[@]}"; do
			ldd "$(host_tool_path "$t")" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'
		done | LC_ALL=C sort -u | xargs -r ls -lL
		ls -lL /usr/lib/x86_64-linux-gnu/libibverbs/ /lib/x86_64-linux-gnu/libc.so.6
	)
	key=$(echo "$key" | md5sum | cut -d' ' -f1)
	if [ -f "$out" ] && [ -f "$out.list" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
		return 0
	fi
	local root
	root=$(mktemp -d "$GDIR/base.XXXXXX")
	mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{proc,sys,dev,tmp,run,etc,root,test,mnt}
	ln -s usr/bin "$root/bin"; ln -s usr/sbin "$root/sbin"
	ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"

	for t in "${GUEST_TOOLS[@]}"; do copy_with_libs "$root" "$(host_tool_path "$t")" "$t"; done
	for t in "${SSH_TOOLS[@]}"; do copy_with_libs "$root" "$t"; done
	local p
	for p in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do
		copy_with_libs "$root" "$p"
	done
	copy_file "$root" /etc/libibverbs.d/rxe.driver
	copy_file "$root" "$(find_lib libgcc_s.so.1)" /usr/lib/x86_64-linux-gnu/libgcc_s.so.1 ||
		die "libgcc_s.so.1 not found"

	cp /bin/busybox "$root/usr/bin/busybox"
	local a
	while read -r a; do
		a=/${a#/}
		a=${a/#\/bin\//\/usr\/bin\/}; a=${a/#\/sbin\//\/usr\/sbin\/}
		[ -e "$root$a" ] || [ -L "$root$a" ] || ln -s /usr/bin/busybox "$root$a"
	done < <(/bin/busybox --list-full)

	mkdir -p "$root/lib/modules"
	cp "$KDIR"/modules/*.ko "$KDIR/modules/order" "$root/lib/modules/"
	install -m 0755 "$HERE/init.sh" "$root/init"
	# root logs in over ssh with a key (no password: "*"); sshd is
	# OpenSSH's privilege separation user (its chroot: /run/sshd).
	printf 'root:x:0:0:root:/root:/bin/sh\nsshd:x:102:65534::/run/sshd:/usr/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	printf 'root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
	chmod 0640 "$root/etc/shadow"
	mkdir -p "$root/etc/ssh"
	# The host key and root's ~/.ssh come with each run (run_rdma.sh).
	cat >"$root/etc/ssh/sshd_config" <<'EOF'
# rdcp's test guests (tests/guest/guest.sh): root by key only, no PAM
Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
MaxStartups 100
MaxSessions 100
LogLevel VERBOSE
# Under TCG the default post-quantum key exchange (sntrup761x25519) takes
# ~2 s of a ~3 s login; curve25519 alone, ~1 s.
KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org
EOF
	printf '127.0.0.1 localhost\n10.77.0.1 guest\n10.77.1.1 guest-a\n10.77.1.2 guest-b\n' >"$root/etc/hosts"

	(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$out.tmp"
	(cd "$root" && find . -mindepth 1 -type f | sed 's|^\.||') >"$out.list"
	rm -rf "$root"
	echo "$key" >"$out.key.tmp"
	mv "$out.tmp" "$out"
	mv "$out.key.tmp" "$out.key"
}

# ---------------------------------------------------------------- run

RUN=
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	[ -n "$RUN" ] && rm -rf "$RUN"
	return 0
}

# reader NAME PREFIX LOG OTHER: copy a guest's console to stdout (prefixed)
# and LOG, record its exit status, and kill the other guest on request.
reader() {
	local g=$1 prefix=$2 log=$3 other=$4 line st
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%$'\r'}
		printf '%s%s\n' "$prefix" "$line"
		printf '%s\n' "$line" >>"$log"
		[ -n "$prefix" ] && printf '%s%s\n' "$prefix" "$line" >>"$LOGP.log"
		case "$line" in
		RDCP-GUEST-EXIT=*)
			st=${line#RDCP-GUEST-EXIT=}
			[[ "$st" =~ ^[0-9]+$ ]] && echo "$st" >"$RUN/status-$g"
			;;
		RDCP-GUEST-KILL-OTHER)
			if [ -n "$other" ] && [ ! -e "$RUN/killed-$g" ]; then
				touch "$RUN/killed-$other"
				kill -KILL "$(cat "$RUN/pid-$other")" 2>/dev/null || true
				printf '%sguest.sh: killed guest %s on request\n' "$prefix" "$other"
			fi
			;;
		esac
	done
}

cmd_run() {
	local pair=0 numa=0 rails=0 timeout=300 mem=1024 bins=() files=()
	while [ $# -gt 0 ]; do
		case "$1" in
		--pair) pair=1; shift ;;
		--rails) rails=1; shift ;;
		--numa) numa=1; shift ;;
		--timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
		--mem) [ $# -ge 2 ] || usage; mem=$2; shift 2 ;;
		--bin) [ $# -ge 2 ] || usage; bins+=("$2"); shift 2 ;;
		--file) [ $# -ge 2 ] || usage; files+=("$2"); shift 2 ;;
		--) shift; break ;;
		-*) usage ;;
		*) break ;;
		esac
	done
	[ $# -ge 1 ] || usage
	local script=$1; shift
	[ -f "$script" ] || die "script $script not found"
	[[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout wants seconds, got $timeout"
	[[ "$mem" =~ ^[0-9]+$ ]] || die "--mem wants MiB, got $mem"
	[ "$pair$numa" != 11 ] || die "--numa is for the single guest, not --pair"
	[ "$rails" = 0 ] || [ "$pair" = 1 ] || die "--rails is for --pair"

	cmd_prepare
	locked build_base
	local f
	while IFS= read -r f; do IN_BASE[$f]=1; done <"$GDIR/base.cpio.list"

	RUN=$(mktemp -d "$GDIR/run.XXXXXX")
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	# Per-run overlay: the script, its arguments, --bin and --file.
	local root=$RUN/root b i=0 src dst
	mkdir -p "$root/test/args" "$root/usr/bin"
	cp "$script" "$root/test/script.sh"
	for b in "$@"; do
		printf '%s' "$b" >"$root/test/args/$(printf '%04d' $i)"
		i=$((i + 1))
	done
	for b in "${bins[@]}"; do
		[ -f "$b" ] || die "--bin $b: no such file"
		cp -L "$b" "$root/usr/bin/$(basename "$b")"
		copy_libs "$root" "$b"
	done
	for b in "${files[@]}"; do
		src=${b%%:*}; dst=${b#*:}
		if [ "$src" = "$b" ] || [ "${dst#/}" = "$dst" ]; then
			die "--file wants SRC:/ABSOLUTE/DEST, got $b"
		fi
		[ -e "$src" ] || die "--file $src: no such file"
		mkdir -p "$root$(dirname "$dst")"
		cp -rL "$src" "$root$dst"
	done
	# The base image has /lib -> usr/lib etc.; an overlay real dir would
	# replace the symlink, so move such files under usr/.
	for b in lib lib64 bin sbin; do
		if [ -d "$root/$b" ]; then
			mkdir -p "$root/usr/$b"
			cp -a "$root/$b/." "$root/usr/$b/"
			rm -rf "${root:?}/$b"
		fi
	done
	(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$RUN/run.cpio"
	cat "$GDIR/base.cpio" "$RUN/run.cpio" >"$RUN/initrd"

	local kernel=$KDIR/vmlinux
	[ -f "$kernel" ] || kernel=$KDIR/vmlinuz
	# shellcheck disable=SC2054 # commas are qemu option syntax
	local common=(-accel tcg,thread=multi -cpu max -m "$mem" -nodefaults -no-user-config
		-display none -monitor none -serial stdio -no-reboot
		-kernel "$kernel" -initrd "$RUN/initrd")
	local cmdline="console=ttyS0 panic=-1 oops=panic quiet loglevel=3 tsc=reliable no_timer_check mitigations=off"

	local guests=()
	# Logs per run (concurrent runs must not share them); last-run*.log
	# point at the newest.
	rm -f "$LOGP"*.log
	ln -sfn "$(basename "$LOGP").log" "$GDIR/last-run.log"
	if [ "$pair" = 1 ]; then
		ln -sfn "$(basename "$LOGP")-a.log" "$GDIR/last-run-a.log"
		ln -sfn "$(basename "$LOGP")-b.log" "$GDIR/last-run-b.log"
	fi
	if [ "$pair" = 0 ]; then
		guests=(s)
		: >"$LOGP.log"
	else
		guests=(a b)
		: >"$LOGP.log"; : >"$LOGP-a.log"; : >"$LOGP-b.log"
	fi

	local port=0
	if [ "$pair" = 1 ]; then
		# Two adjacent free UDP ports on 127.0.0.1 (four with --rails:
		# the second link's are the next two), derived from our pid.
		local try
		for try in $(seq 0 200); do
			port=$((20000 + (($$ + try * 7) % 10000) * 4))
			if ! ss -Hunl 2>/dev/null | awk '{print $4}' |
				grep -qE ":($port|$((port + 1))|$((port + 2))|$((port + 3)))\$"; then
				break
			fi
		done
	fi

	local g start=$SECONDS rpids=() qargs log prefix other lport rport mac role
	for g in "${guests[@]}"; do
		if [ "$g" = s ]; then
			role=single; log=$LOGP.log; prefix=; other=
			qargs=(-smp 2 -append "$cmdline rdcp.role=single")
			# shellcheck disable=SC2054 # commas are qemu option syntax
			if [ "$numa" = 1 ]; then qargs+=(
				-object "memory-backend-ram,id=m0,size=$((mem / 2))M"
				-object "memory-backend-ram,id=m1,size=$((mem - mem / 2))M"
				-numa node,nodeid=0,cpus=0,memdev=m0
				-numa node,nodeid=1,cpus=1,memdev=m1
				-device pxb,id=pxb1,bus=pci.0,bus_nr=8,numa_node=1
				-netdev user,id=n1,restrict=on
				-device "virtio-net-pci,netdev=n1,bus=pxb1,addr=0x1,mac=52:54:00:77:03:01,romfile="
				-device pxb,id=pxb0,bus=pci.0,bus_nr=16,numa_node=0
				-netdev user,id=n2,restrict=on
				-device "virtio-net-pci,netdev=n2,bus=pxb0,addr=0x1,mac=52:54:00:77:03:02,romfile=")
			fi
		else
			role=$g; log=$LOGP-$g.log; prefix="[$g] "
			if [ "$g" = a ]; then other=b lport=$port rport=$((port + 1)) mac=52:54:00:77:01:01
			else other=a lport=$((port + 1)) rport=$port mac=52:54:00:77:01:02; fi
			qargs=(-smp 1 -append "$cmdline rdcp.role=$g"
				-netdev "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$lport,remote.type=inet,remote.host=127.0.0.1,remote.port=$rport"
				-device "virtio-net-pci,netdev=n0,mac=$mac,romfile=")
			# shellcheck disable=SC2054 # commas are qemu option syntax
			[ "$rails" = 0 ] || qargs+=(
				-netdev "dgram,id=n1,local.type=inet,local.host=127.0.0.1,local.port=$((lport + 2)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((rport + 2))"
				-device "virtio-net-pci,netdev=n1,mac=${mac/77:01:/77:02:},romfile=")
		fi
		mkfifo "$RUN/con-$g"
		qemu-system-x86_64 "${common[@]}" "${qargs[@]}" -name "rdcp-guest-$role" \
			</dev/null >"$RUN/con-$g" 2>&1 &
		echo $! >"$RUN/pid-$g"
		PIDS+=("$!")
		reader "$g" "$prefix" "$log" "$other" <"$RUN/con-$g" &
		rpids+=("$!")
	done

	# Wait for all guests to finish (or be killed), up to the timeout.
	# stderr is muted meanwhile: bash would report a killed qemu job.
	local deadline=$((start + timeout)) timed_out=0 alive p
	exec 3>&2 2>/dev/null
	while :; do
		alive=0
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		if [ "$SECONDS" -ge "$deadline" ]; then
			timed_out=1
			for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
			break
		fi
		sleep 0.2
	done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	for p in "${rpids[@]}"; do wait "$p" 2>/dev/null || true; done
	exec 2>&3 3>&-
	local elapsed=$((SECONDS - start))

	# Collect statuses.
	local st=() why=() rc=0
	for g in "${guests[@]}"; do
		if [ -e "$RUN/killed-$g" ]; then
			st+=(killed)
		elif [ -f "$RUN/status-$g" ]; then
			st+=("$(cat "$RUN/status-$g")")
		else
			if [ "$timed_out" = 1 ]; then st+=(124); why+=("$g:timeout")
			else st+=(125); why+=("$g:died"); fi
		fi
	done
	if [ "$pair" = 0 ]; then
		rc=${st[0]}
	elif [ "${st[1]}" = killed ]; then
		rc=${st[0]}
	elif [ "${st[0]}" = killed ]; then
		rc=${st[1]}
	else
		rc=0
		for i in 0 1; do
			if [ "${st[$i]}" != 0 ]; then rc=${st[$i]}; break; fi
		done
	fi
	[ "$rc" = killed ] && rc=125

	local w name
	for w in "${why[@]}"; do
		g=${w%%:*}
		if [ "$g" = s ]; then log=$LOGP.log name="guest"
		else log=$LOGP-$g.log name="guest $g"; fi
		echo "guest.sh: ---- last 50 console lines of $name ($log) ----" >&2
		tail -n 50 "$log" >&2
		if [ "${w#*:}" = timeout ]; then
			echo "guest.sh: error: $name timed out after ${timeout}s without printing RDCP-GUEST-EXIT=" >&2
		else
			echo "guest.sh: error: $name stopped without printing RDCP-GUEST-EXIT= (crash, panic or qemu failure)" >&2
		fi
	done
	[ "$timed_out" = 1 ] && [ "$rc" = 0 ] && rc=124
	note "run finished in ${elapsed}s, status $rc (${guests[*]}: ${st[*]})"
	return "$rc"
}

case "${1:-}" in
prepare) shift; [ $# -eq 0 ] || usage; cmd_prepare ;;
run) shift; cmd_run "$@" ;;
*) usage ;;
esac
