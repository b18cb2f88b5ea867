# vhpc top-level Makefile.
#
# Each component describes itself in its own <dir>/module.mk with the
# templates below, so adding a component never edits this file.
#
#   make          install missing Debian packages, build everything
#   make check    build, then run every test (unit, hv guests, integration, fuzz)
#   make demo     the README's demo: MPI in 2 guests beside native (bench/scripts/demo)
#   make fuzz     run each fuzzer longer (FUZZ_SECONDS, default 300)

B        ?= build
CC       := gcc
CLANG    ?= clang
PREFIX   ?= /usr/local

DEB_PACKAGES := build-essential pkg-config clang libclang-rt-14-dev \
	libyaml-dev libjson-c-dev libsodium-dev libhwloc-dev hwloc \
	libopenmpi-dev openmpi-bin libibverbs-dev munge libmunge-dev \
	runc criu libcmocka-dev libsqlite3-dev libseccomp-dev libnl-3-dev libnl-route-3-dev libnftables-dev nftables wireguard-tools \
	iproute2 e2fsprogs procps psmisc util-linux iputils-ping busybox-static ethtool lz4 \
	kmod cpio sqlite3 gnuplot-nox jq qemu-system-x86 qemu-system-common \
	skopeo umoci squashfs-tools erofs-utils apache2-utils openssl \
	libslurm-dev slurmctld slurmd slurm-client debootstrap \
	rdma-core ibverbs-utils perftest rdmacm-utils ucx-utils libfabric-bin \
	libmicrohttpd-dev

# Messages are truncated on purpose where buffers are fixed, hence no format-truncation.
WARN     := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wno-format-truncation
# $(B)/gen holds headers made by the build (lib/module.mk's driver_names.h).
GEN_DRIVER_NAMES := $(B)/gen/driver_names.h
CFLAGS   := -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -I$(B)/gen -fno-strict-aliasing \
            -fstack-protector-strong -MMD -MP $(EXTRA_CFLAGS)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZFLAGS:= -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -g -O1
LDFLAGS  := $(EXTRA_LDFLAGS)
# `make V=1` shows whole command lines.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-7s %s\n' $(1) $(2)
endif
LIBVHPC_LIBS := -lyaml -ljson-c -lsodium -lmunge -lpthread

PROGRAMS   :=
UNIT_TESTS :=
FUZZERS    :=
EXTRA_ALL  :=
# Built outside the program template but installed beside the programs
# (PREFIX/bin): a component adds to it.
INSTALL_BIN :=

.PHONY: all deps check demo fuzz clean install kernels lab tools FORCE
all: deps programs

# -- Debian packages ------------------------------------------------------
# The stamp is an included makefile on purpose: make builds it (installing
# what is missing) before anything else and then re-reads this file, so the
# $(shell pkg-config ...) and mpicc queries below run after the packages are
# there.  On a fresh machine they would otherwise see nothing and the first
# build would fail on a missing header.  Editing this file re-runs the check.
# It also marks $(B) as a build tree: its programs read the checkout's
# configs/, installed ones /etc/vhpc (lib/paths.c).
deps: $(B)/deps.mk
$(B)/deps.mk: Makefile
	@missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing missing Debian packages:" $$missing; \
		if [ "$$(id -u)" != 0 ]; then echo "error: installing packages needs root" >&2; exit 1; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing || exit 1; \
	fi
	@mkdir -p $(@D) && echo '# packages checked; see the deps rule in Makefile' >$@
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(B)/deps.mk
endif

# -- templates ------------------------------------------------------------
# Build flags belong to a library or a folder, never to a program: an
# object is compiled once, with its own folder's flags, whichever programs
# link it.  $(call dir_cflags,DIR,FLAGS) gives every object from DIR/ (and
# below) FLAGS, in the plain and the sanitized build.
dir_cflags = $(eval $(B)/obj/$(1)/%.o $(B)/san/$(1)/%.o: EXTRA_OBJ_CFLAGS = $(2))

# $(call library,NAME,SOURCES) -- $(B)/lib/libNAME.a, and $(B)/lib/libNAME-san.a
# (ASan+UBSan) for unit tests.  Programs name the first in their LIBS; unit
# tests get the sanitized one in its place.
define library
$(B)/lib/lib$(1).a: $(patsubst %.c,$(B)/obj/%.o,$(2))
	@mkdir -p $$(@D)
	$$(call say,AR,$$@)
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
$(B)/lib/lib$(1)-san.a: $(patsubst %.c,$(B)/san/%.o,$(2))
	@mkdir -p $$(@D)
	$$(call say,AR,$$@)
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef

# $(call program,NAME,SOURCES,LIBS) -- LIBS: archives (rebuilt first) and -l flags
define program
$(B)/bin/$(1): $(patsubst %.c,$(B)/obj/%.o,$(2)) $(filter %.a,$(3)) $(B)/lib/libvhpc.a
	@mkdir -p $$(@D)
	$$(call say,LD,$$@)
	$$(Q)$$(CC) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(3) $(B)/lib/libvhpc.a $$(LIBVHPC_LIBS)
PROGRAMS += $(B)/bin/$(1)
endef

# $(call unit_test,NAME,SOURCES,LIBS) -- always under ASan+UBSan
define unit_test
$(B)/tests/$(1): $(patsubst %.c,$(B)/san/%.o,$(2) tests/fixture.c) $(patsubst %.a,%-san.a,$(filter %.a,$(3))) $(B)/lib/libvhpc-san.a
	@mkdir -p $$(@D)
	$$(call say,LD,$$@)
	$$(Q)$$(CC) $$(SANFLAGS) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(patsubst %.a,%-san.a,$(3)) $(B)/lib/libvhpc-san.a -lcmocka $$(LIBVHPC_LIBS)
UNIT_TESTS += $(B)/tests/$(1)
endef

# $(call fuzzer,NAME,SOURCES,LIBS[,CFLAGS]) -- libFuzzer, built with clang in
# one command from sources (no shared objects, so CFLAGS stay its own)
define fuzzer
$(B)/fuzz/$(1): $(2) $(LIB_SRCS) $(GEN_DRIVER_NAMES)
	@mkdir -p $$(@D)
	$$(call say,FUZZ,$$@)
	$$(Q)$$(CLANG) $$(FUZZFLAGS) -std=gnu11 -D_GNU_SOURCE -DVHPC_FUZZING -I. -I$(B)/gen $(4) -o $$@ $(2) $(LIB_SRCS) $(3) $$(LIBVHPC_LIBS)
FUZZERS += $(B)/fuzz/$(1)
endef

# Generated headers exist before any object is compiled; once one is, its
# .d file says which of them it includes.
$(B)/obj/%.o: %.c | $(GEN_DRIVER_NAMES)
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) $(EXTRA_OBJ_CFLAGS) -c -o $@ $<

$(B)/san/%.o: %.c | $(GEN_DRIVER_NAMES)
	@mkdir -p $(@D)
	$(call say,CC-SAN,$<)
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) -O1 $(EXTRA_OBJ_CFLAGS) -c -o $@ $<

# -- components -----------------------------------------------------------
# A program rule reads its LIBS when it is made, so a component whose
# archives others link comes before them: libvhpc, then the node agent
# ($(NODEAGENT_LIBS), linked by vhpc and vhpc-slurmjob).
FIRST_MODULES := lib/module.mk nodeagent/module.mk
include $(FIRST_MODULES)
# Components may nest one level (mpi-plugins/rsh/module.mk).
include $(sort $(filter-out $(FIRST_MODULES),$(wildcard */module.mk */*/module.mk)))

.PHONY: programs tests fuzzers
programs: $(PROGRAMS) $(EXTRA_ALL)
tests: $(UNIT_TESTS) $(EXTRA_TESTS)
fuzzers: $(FUZZERS)

# The build part in parallel on every core: make 4.3 ignores a -j that a
# makefile adds to its own MAKEFLAGS, so a sub-make gets it.
check:
	@$(MAKE) --no-print-directory -j$(shell nproc) all tests fuzzers kernels lab tools
	@B=$(B) tests/run

# The Debian kernel kvm images and the hv smoke tests boot, fetched during
# set-up like a package (tests never download).  Offline, those tests skip.
KERNEL_PACKAGE := linux-image-cloud-amd64
kernels: programs
	@VHPC_KERNEL_CACHE=$(CURDIR)/$(B)/kernels $(B)/bin/vhpc image fetch-kernel $(KERNEL_PACKAGE) >/dev/null || \
		echo "warning: could not fetch $(KERNEL_PACKAGE); kvm image and kernel boot tests will be skipped"

# Two programs the tests need ship only in Debian packages whose
# installation enables and starts a server on every address of a systemd
# machine: promtool (prometheus; tests/cluster/metrics.t) and
# docker-registry (tests/integration/image-registry.t, which starts its
# own on loopback).  make check's set-up takes the one program out of the
# package instead (apt-get download, dpkg-deb -x) into $(B)/tools, as it
# fetches kernels.  Offline, the tests that need them skip.
TOOLS := $(B)/tools/promtool $(B)/tools/docker-registry
tools: $(TOOLS)
$(B)/tools/promtool: PKG = prometheus
$(B)/tools/docker-registry: PKG = docker-registry
$(B)/tools/%: | deps
	@d=$(B)/tools/pkg-$*; rm -rf $$d && mkdir -p $$d && \
	if (cd $$d && apt-get download -qq $(PKG) >/dev/null 2>&1 && dpkg-deb -x $(PKG)_*.deb x) && \
	   [ -x $$d/x/usr/bin/$* ]; then install -m 0755 $$d/x/usr/bin/$* $@; \
	else echo "warning: could not take $* out of Debian's $(PKG) package; the tests that need it will be skipped"; fi; \
	rm -rf $$d

# The virtualization lab's QEMU (Debian 13's, in a root of its own under
# $(B)/lab: tests/lab/prepare), fetched during set-up like the kernels.
# Offline, the lab runs on the host's QEMU and says so.
# The lab's second kernel (tests/lab/fetch-kernel): trixie-backports'
# Linux, whose rxe carries verbs between network namespaces; the tests
# that say "# lab-kernel:" boot it, and skip saying so where it is missing.
LAB_KERNELS := 7.3.4+deb13-amd64
lab: deps
	@B=$(B) tests/lab/prepare || \
		echo "warning: could not set up the lab's QEMU 10; the lab uses the host's QEMU 7.2, which loses more attempts"
	@for k in $(LAB_KERNELS); do B=$(B) tests/lab/fetch-kernel $$k >/dev/null || \
		echo "warning: could not fetch the lab kernel $$k; the tests that boot it (tests/fabric) will be skipped"; done

# One rank per guest on cores of their own, natively too, side by side
# (bench/scripts/demo); DEMO_ARGS adds vhpc bench options.
demo:
	@$(MAKE) --no-print-directory -j$(shell nproc) all
	B=$(B) bench/scripts/demo $(DEMO_ARGS)

fuzz: fuzzers
	@B=$(B) FUZZ_SECONDS=$${FUZZ_SECONDS:-300} tests/fuzz/run-all

# The installed tree is the build tree's bin/, lib/vhpc/ and share/vhpc/
# under PREFIX: programs find each other and their files relative to their
# own folder (lib/paths.h), so both work alike.  Configs go to /etc/vhpc
# (DESTDIR-aware), but never over an admin's: a file there that differs
# is kept, and the new one put beside it as FILE.new.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/vhpc $(DESTDIR)$(PREFIX)/lib/vhpc $(DESTDIR)/etc/vhpc
	install -m 0755 $(PROGRAMS) $(INSTALL_BIN) $(DESTDIR)$(PREFIX)/bin/
	cp -r $(B)/share/vhpc/. $(DESTDIR)$(PREFIX)/share/vhpc/
	cp -r $(B)/lib/vhpc/. $(DESTDIR)$(PREFIX)/lib/vhpc/
	@cd configs && find . -type f | sort | while read -r f; do d=$(DESTDIR)/etc/vhpc/$${f#./}; \
		install -d "$${d%/*}" || exit 1; \
		if [ ! -e "$$d" ]; then install -m 0644 "$$f" "$$d" || exit 1; \
		elif ! cmp -s "$$f" "$$d"; then install -m 0644 "$$f" "$$d.new" && \
			echo "install: kept $$d as it is; vhpc's new one is $$d.new" || exit 1; fi; \
	done
	if [ -f $(B)/lib/slurm/spank_vhpc.so ]; then install -D -m 0755 $(B)/lib/slurm/spank_vhpc.so \
		$(DESTDIR)$(PREFIX)/lib/vhpc/spank_vhpc.so; fi

clean:
	rm -rf $(B)

-include $(shell find $(B)/obj $(B)/san -name '*.d' -type f 2>/dev/null)
