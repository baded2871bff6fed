# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# rdcp: one non-recursive GNU Makefile. Objects go to build/. Every module's
# objects except cmd/main.o form build/librdcp.a, which the rdcp binary and
# every test link, so tests exercise the real code.
#
#   make                 build build/rdcp
#   make test            unit + engine tests, TCP loopback and Soft-RoCE
#                        end-to-end suites; ends with "N passed, N failed"
#   make test-quick      in-process tests + end-to-end over TCP loopback
#   make test-unit       only the in-process tests (seconds)
#   make test-mpi        rdcp-mpi under mpirun (needs Open MPI or MPICH)
#   make fuzz            libFuzzer on the wire decoder, path checker, filters
#   make demo            a real RDMA copy (host device, else Soft-RoCE guest)
#   make test-quickstart the README's build and install commands, checked
#   make SAN=address,undefined test    sanitizer build
#   make mpi             build/rdcp-mpi, with an MPI compiler (MPICC=mpicc)
#   make install DESTDIR=... PREFIX=/usr
#   make deb / make rpm  packages in build/ (NOCHECK=1: skip unit tests)
#   make test-packages   build both packages, lint and inspect them
#   make bench-hw HOSTS=a,b  qualify two real RDMA hosts (over ssh)
#   make V=1             show commands

# The one place the version is kept; packaging reads it with `make -s version`.
VERSION := 0.1.0

CC      ?= cc
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
# /etc and /lib/systemd/system when PREFIX is /usr, else beneath PREFIX.
SYSCONFDIR  ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR     ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DESTDIR ?=
BUILD   ?= build
SAN     ?=

PKGS := libibverbs librdmacm zlib libcrypto
# Intel ISA-L, when present (Debian: libisal-dev), computes the same CRC32
# as zlib ~3.5x faster (PCLMULQDQ); without it rdcp uses zlib's. ISAL=0
# builds without it even where it is installed.
ISAL ?= $(shell pkg-config --exists libisal 2>/dev/null && echo 1 || echo 0)
ifeq ($(ISAL),1)
PKGS += libisal
endif
# liburing, when present (Debian: liburing-dev): the sink's O_DIRECT
# writes go through an io_uring, as many in flight as the window has
# slots, whatever --workers is (util/workq.h). Without it (URING=0, or not
# installed) the workers write themselves, one write each in flight.
URING ?= $(shell pkg-config --exists liburing 2>/dev/null && echo 1 || echo 0)
ifeq ($(URING),1)
PKGS += liburing
endif
# rdma-core's newer headers give an XDR port's speed (0x100, more than the
# 8 bits of active_speed hold) in ibv_port_attr.active_speed_ex.
SPEED_EX ?= $(shell printf '\043include <infiniband/verbs.h>\nint f(struct ibv_port_attr *a);\nint f(struct ibv_port_attr *a) { return (int)a->active_speed_ex; }\n' | \
	$(CC) -x c -fsyntax-only - 2>/dev/null && echo 1 || echo 0)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || \
	echo -libverbs -lrdmacm -lz -lcrypto)

WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wvla \
	-Wstrict-prototypes -Wwrite-strings -Wno-unused-parameter \
	-Wno-format-truncation
# (format-truncation: log and wire messages are cut to their buffers on purpose)
ifdef WERROR
WARN += -Werror
endif
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -DRDCP_VERSION=\"$(VERSION)\" \
	-I. $(WARN) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -pthread
ifeq ($(ISAL),1)
ALL_CFLAGS += -DRDCP_HAVE_ISAL
endif
ifeq ($(URING),1)
ALL_CFLAGS += -DRDCP_HAVE_LIBURING
endif
ifeq ($(SPEED_EX),1)
ALL_CFLAGS += -DRDCP_HAVE_SPEED_EX
endif
ifdef TEST_HOOKS
ALL_CFLAGS += -DRDCP_TEST_HOOKS
endif
ALL_LDFLAGS := $(LDFLAGS) -pthread
ifneq ($(SAN),)
ALL_CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer
ALL_LDFLAGS += -fsanitize=$(SAN)
endif
LIBS := $(PKG_LIBS)

ifeq ($(V),1)
Q :=
else
Q := @
endif

LIB_SRCS := $(wildcard util/*.c) $(wildcard cm/*.c) $(wildcard transfer/*/*.c) \
	$(filter-out cmd/main.c,$(wildcard cmd/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
MAIN_OBJ := $(BUILD)/cmd/main.o
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_HELPERS := $(filter-out $(TEST_SRCS),$(wildcard tests/unit/*.c))
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
# The fuzz targets (tests/fuzz/) linked with a plain main() that replays a
# corpus: built by `make tests`, run over tests/fuzz/corpus by run_tests.sh.
FUZZ_REPLAY_BINS := $(BUILD)/fuzz-replay/replay_wire \
	$(BUILD)/fuzz-replay/replay_path $(BUILD)/fuzz-replay/replay_filter

.PHONY: mpi hooks-mpi test-mpi install-mpi test-quick setup tests san-tests test-san hooks all test test-unit test-e2e test-guest demo bench install uninstall \
	clean help deb rpm test-packages fuzz version
all: $(BUILD)/rdcp $(BUILD)/rdcp.bash-completion

# The completion offers the options of --help: cmd/options.c is the one
# list of them (cmd/completion.awk reads the words off the built binary).
$(BUILD)/rdcp.bash-completion: cmd/rdcp.bash-completion.in \
		cmd/completion.awk $(BUILD)/rdcp
	$(Q)opts=$$($(BUILD)/rdcp --help | awk -f cmd/completion.awk) && \
		[ -n "$$opts" ] && sed "s|@OPTIONS@|$$opts|" $< >$@.tmp && \
		mv $@.tmp $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/librdcp.a: $(LIB_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/rdcp: $(MAIN_OBJ) $(BUILD)/librdcp.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# rdcp-mpi (cmd/mpi/*.c): the only objects built with the MPI compiler
# wrapper (Open MPI's or MPICH's mpicc, MPI-3 calls only); librdcp.a
# stays free of MPI. HAVE_MPI: whether that compiler is here.
MPICC ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
MPI_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard cmd/mpi/*.c))

$(BUILD)/cmd/mpi/%.o: cmd/mpi/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  MPICC   $<")
	$(Q)$(MPICC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/rdcp-mpi: $(MPI_OBJS) $(BUILD)/librdcp.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(MPICC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

mpi: $(BUILD)/rdcp-mpi

$(BUILD)/tests/%: tests/unit/%.c $(TEST_HELPERS) $(BUILD)/librdcp.a tests/tap.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -Itests/unit $(ALL_LDFLAGS) -o $@ $< \
		$(TEST_HELPERS) $(BUILD)/librdcp.a $(LIBS)

# The network-free ceiling of `make bench` (tests/bench/ceiling.c): both
# engines in one process over memconn; every thread's CPU is counted for
# the side that started it through a --wrap of pthread_create; -D slows
# some of the sink's chunk writes through a --wrap of direct_pwrite (and
# of direct_pwrite_async, with an io_uring); a wrap of workq_destroy
# reads the depth the sink's io_uring reached.
BENCH_BINS := $(BUILD)/tests/bench_ceiling
$(BUILD)/tests/bench_ceiling: tests/bench/ceiling.c $(TEST_HELPERS) \
		$(BUILD)/librdcp.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -Itests/unit $(ALL_LDFLAGS) \
		-Wl,--wrap=pthread_create -Wl,--wrap=direct_pwrite \
		-Wl,--wrap=direct_pwrite_async -Wl,--wrap=direct_pread \
		-Wl,--wrap=direct_pread_async -Wl,--wrap=workq_destroy -o $@ $< \
		$(TEST_HELPERS) \
		$(BUILD)/librdcp.a $(LIBS)

# test_fault fails the Nth allocation, open or file call of librdcp.a:
# GNU ld --wrap sends each of these to the test's __wrap_X, which calls
# __real_X unless told to fail it (tests/unit/test_fault.c). private: not
# for librdcp.a, built as a prerequisite.
FAULT_WRAP := malloc calloc realloc strdup vasprintf __vasprintf_chk \
	fdopendir EVP_MD_CTX_new pthread_create open openat __open_2 \
	__openat_2 dup eventfd syscall pread pwrite fsync ftruncate fstat \
	fstatat mkdir mkdirat symlinkat renameat readlinkat __readlinkat_chk \
	fchmod futimens utimensat flock lseek fstatvfs posix_fadvise getrandom \
	open64 openat64 __open64_2 __openat64_2 pread64 pwrite64 ftruncate64 \
	fstat64 fstatat64 lseek64 fstatvfs64 posix_fadvise64 posix_memalign \
	fallocate fallocate64 sync_file_range
$(BUILD)/tests/test_fault: private ALL_LDFLAGS += \
	$(foreach s,$(FAULT_WRAP),-Wl,--wrap=$(s))

# test_direct fails O_DIRECT opens (a file system without it) and
# fallocate (ENOSPC) on request, and counts the latter.
$(BUILD)/tests/test_direct: private ALL_LDFLAGS += \
	-Wl,--wrap=open -Wl,--wrap=__open_2 -Wl,--wrap=fallocate

# test_iodepth slows (and fails) the sink's chunk writes and the source's
# chunk reads, reads the depth its io_uring reached, and refuses io_uring
# as a container may.
$(BUILD)/tests/test_iodepth: private ALL_LDFLAGS += \
	-Wl,--wrap=direct_pwrite -Wl,--wrap=direct_pwrite_async \
	-Wl,--wrap=direct_pread -Wl,--wrap=direct_pread_async \
	-Wl,--wrap=workq_destroy $(IODEPTH_WRAP)
ifeq ($(URING),1)
IODEPTH_WRAP := -Wl,--wrap=io_uring_queue_init
endif

# The same binary with test-only fault hooks (RDCP_TEST_CORRUPT_CHUNK=N
# flips a byte of chunk N after its CRC was taken): end-to-end tests use it
# to prove corruption is caught. Never installed.
hooks:
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/hooks TEST_HOOKS=1 \
		$(BUILD)/hooks/rdcp

$(BUILD)/fuzz-replay/replay_%: tests/fuzz/replay.c tests/fuzz/fuzz_%.c \
		tests/fuzz/fuzz.h $(BUILD)/librdcp.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/fuzz $(ALL_LDFLAGS) -o $@ \
		tests/fuzz/replay.c tests/fuzz/fuzz_$*.c $(BUILD)/librdcp.a \
		$(LIBS)

# libFuzzer (clang) for 60 s per target run; findings in build/fuzz/crashes.
fuzz:
	$(Q)tests/fuzz/run.sh 60

# Everything a fresh Debian machine needs to build and test (apt-get;
# quick when already installed).
setup:
	$(Q)packaging/build-deps.sh
	$(Q)tests/guest/setup.sh

# The whole suite: in-process tests, then real rdcp processes over
# Soft-RoCE (rdma_rxe) in qemu guests. The guest suite fails, never skips,
# when qemu or the kernel cannot be had. Re-invokes make after setup so
# pkg-config is asked once the -dev packages exist.
# The builds (plain, hooks, ASan, TSan, rdcp-mpi: separate directories)
# run TEST_JOBS at a time, one per CPU unless told; then the suites run in
# three lanes side by side (tests/run_tests.sh all; RDCP_TEST_LANES=1 runs
# them one after the other).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: setup
	$(Q)$(MAKE) --no-print-directory -j$(TEST_JOBS) WERROR=1 all hooks \
		tests san-tests \
		$(if $(shell command -v $(MPICC) 2>/dev/null),mpi hooks-mpi)
	$(Q)tests/run_tests.sh --build $(BUILD) all

# rdcp-mpi alone: 4-8 ranks under mpirun over TCP on loopback (a minute).
test-mpi: all mpi hooks-mpi
	$(Q)tests/run_tests.sh --build $(BUILD) mpi

# rdcp-mpi with the test hooks (tests/e2e/mpi.sh corrupts a range with it);
# after hooks: both build $(BUILD)/hooks/librdcp.a, which -j2 would race on.
hooks-mpi: hooks
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/hooks TEST_HOOKS=1 \
		$(BUILD)/hooks/rdcp-mpi

# The in-process tests built again under ASan+UBSan and under TSan (the
# threaded pipeline); make test runs them too.
san-tests:
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/asan \
		SAN=address,undefined WERROR=1 tests
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan SAN=thread \
		WERROR=1 tests

test-san: san-tests
	$(Q)tests/run_tests.sh --build $(BUILD) san

tests: $(TEST_BINS) $(FUZZ_REPLAY_BINS) $(BENCH_BINS)

test-unit: all $(TEST_BINS) $(FUZZ_REPLAY_BINS)
	$(Q)tests/run_tests.sh --build $(BUILD) unit

# The everyday suite, seconds: in-process tests and every end-to-end
# scenario over TCP on loopback.
test-quick: all hooks $(TEST_BINS) $(FUZZ_REPLAY_BINS)
	$(Q)tests/run_tests.sh --build $(BUILD) quick

test-guest: all hooks
	$(Q)tests/run_tests.sh --build $(BUILD) guest

# A real RDMA copy: over the host's own RDMA device when it has one,
# otherwise inside the Soft-RoCE guest.
demo: setup
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tests/demo.sh $(BUILD)

# What README's Quick start and Install sections show that can run here:
# make, make install into a DESTDIR under build/ (TAP, "N passed, N
# failed"). Seconds.
.PHONY: test-quickstart
test-quickstart: all
	$(Q)tests/quickstart.sh $(BUILD)

# Side-by-side ratios (not a test: nothing is asserted; read the tables):
# the network-free ceiling against cp (tmpfs and ext4 on a loop device),
# and with its ring and staging in hugetlb, transparent or 4 KiB pages;
# over TCP on loopback against iperf3, nc, scp, rsync and tar | nc;
# re-runs of a 100 000-file tree, unchanged and one file changed, rdcp -a
# against rsync -a (tests/bench/sync.sh);
# --direct against --no-direct and cp within ext4 on a loop device, and
# threads against io_uring (as root); the sink's writes by its threads
# or through io_uring against per-write latency (tests/bench/iodepth.sh:
# injected here, a null_blk device's in the guest); in the Soft-RoCE guest against
# ib_write_bw and rcopy; rdcp-mpi with 1, 2 and 4 ranks
# (tests/bench/mpi.sh). Minutes, not seconds.
bench: setup
	$(Q)$(MAKE) --no-print-directory all $(BENCH_BINS)
	$(Q)tests/bench/ceiling.sh $(BUILD)
	$(Q)tests/bench/hugepages.sh $(BUILD)
	$(Q)tests/bench/tcp.sh $(BUILD)
	$(Q)tests/bench/sync.sh $(BUILD)
	$(Q)tests/bench/direct.sh $(BUILD)
	$(Q)tests/bench/iodepth.sh $(BUILD)
	$(Q)tests/bench/run.sh $(BUILD)
	$(Q)if command -v $(MPICC) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory mpi && tests/bench/mpi.sh $(BUILD); \
	else echo "bench: no MPI compiler: rdcp-mpi's scaling left out"; fi

# The hardware qualification kit (tests/bench/hw.sh; doc/PERFORMANCE.md,
# "Qualifying real hardware"): ib_write_bw, the network-free ceiling and
# rdcp between two hosts over ssh, one Markdown table of ratios and the
# hosts' facts, a chart beside it. HOSTS=a,b; RDCP, TARGET_DIR and the
# BENCH_* knobs from the environment or the command line.
.PHONY: bench-hw
bench-hw: $(BUILD)/tests/bench_ceiling
	$(Q)HOSTS="$(HOSTS)" tests/bench/hw.sh $(BUILD)

# The unit names the binary and the config file: their paths follow
# BINDIR and SYSCONFDIR. An existing rdcpd.conf is never overwritten.
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(SYSCONFDIR)/rdcp
	install -m 0755 $(BUILD)/rdcp $(DESTDIR)$(BINDIR)/rdcp
	install -m 0644 doc/rdcp.1 $(DESTDIR)$(MANDIR)/man1/rdcp.1
	install -m 0644 doc/rdcp.conf.5 $(DESTDIR)$(MANDIR)/man5/rdcp.conf.5
	install -m 0644 doc/rdcpd.8 $(DESTDIR)$(MANDIR)/man8/rdcpd.8
	install -m 0644 doc/rdcp-modules.conf.5 \
		$(DESTDIR)$(MANDIR)/man5/rdcp-modules.conf.5
	install -m 0644 $(BUILD)/rdcp.bash-completion $(DESTDIR)$(BASHCOMPDIR)/rdcp
	sed -e 's|/usr/bin/rdcp|$(BINDIR)/rdcp|g' \
		-e 's|/etc/rdcp/|$(SYSCONFDIR)/rdcp/|g' \
		packaging/systemd/rdcpd.service >$(BUILD)/rdcpd.service
	install -m 0644 $(BUILD)/rdcpd.service $(DESTDIR)$(UNITDIR)/rdcpd.service
	test -e $(DESTDIR)$(SYSCONFDIR)/rdcp/rdcpd.conf || \
		install -m 0644 packaging/systemd/rdcpd.conf \
			$(DESTDIR)$(SYSCONFDIR)/rdcp/rdcpd.conf
	test -e $(DESTDIR)$(SYSCONFDIR)/rdcp/modules.conf || \
		install -m 0644 packaging/systemd/modules.conf \
			$(DESTDIR)$(SYSCONFDIR)/rdcp/modules.conf
	@if [ "$(INSTALL_MPI)" != 0 ] && [ -x $(BUILD)/rdcp-mpi ]; then \
		$(MAKE) --no-print-directory install-mpi; fi

# rdcp-mpi and its man page (make install runs this when make mpi built
# it; INSTALL_MPI=0 leaves it out: the packages ship it on its own).
INSTALL_MPI ?= 1
install-mpi: $(BUILD)/rdcp-mpi
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(BUILD)/rdcp-mpi $(DESTDIR)$(BINDIR)/rdcp-mpi
	install -m 0644 doc/rdcp-mpi.1 $(DESTDIR)$(MANDIR)/man1/rdcp-mpi.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rdcp $(DESTDIR)$(MANDIR)/man1/rdcp.1 \
		$(DESTDIR)$(MANDIR)/man5/rdcp.conf.5 $(DESTDIR)$(MANDIR)/man8/rdcpd.8 \
		$(DESTDIR)$(BINDIR)/rdcp-mpi $(DESTDIR)$(MANDIR)/man1/rdcp-mpi.1 \
		$(DESTDIR)$(BASHCOMPDIR)/rdcp $(DESTDIR)$(UNITDIR)/rdcpd.service \
		$(DESTDIR)$(MANDIR)/man5/rdcp-modules.conf.5
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/rdcp/rdcpd.conf and modules.conf (remove them by hand)"

# Packages, built from a copy of the tree (build/deb, build/rpm) and left
# in build/. NOCHECK=1 skips the unit tests the package builds run.
deb:
	$(Q)packaging/mkdeb.sh $(if $(NOCHECK),--nocheck)

rpm:
	$(Q)packaging/mkrpm.sh $(if $(NOCHECK),--nocheck)

# Builds both packages, lints and inspects them, installs the .deb in a
# clean Debian root (debootstrap, cached under build/) and copies files to
# a receiver started the way the unit starts it, with the installed
# binary; purges it again (TAP, "N passed, N failed"). The unit tests run
# once, in the .deb's build: the .rpm is built from the same tree by the
# same compiler here, so its %check would run the same binaries again
# (`make rpm` alone still runs it).
test-packages:
	$(Q)packaging/mkdeb.sh $(if $(NOCHECK),--nocheck)
	$(Q)packaging/mkrpm.sh --nocheck
	$(Q)packaging/check-packages.sh

clean:
	rm -rf $(BUILD)

version:
	@echo $(VERSION)

help:
	@sed -n 's/^#   //p' Makefile

-include $(LIB_OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(TEST_BINS:=.d) \
	$(FUZZ_REPLAY_BINS:=.d) $(BENCH_BINS:=.d) $(MPI_OBJS:.o=.d)
