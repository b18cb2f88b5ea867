# hv test guests: freestanding x86-64 ELF files with a PVH entry note, run by
# the tests/hv/*.t tests under vhpc-hv.  Built for `make` and `make check`
# (EXTRA_ALL) into $(B)/hv-guests/, outside $(B)/tests/ so the test runner
# does not try to execute them.
HVG_DIR   := tests/hv
HVG_KIT   := $(HVG_DIR)/kit/start.S $(HVG_DIR)/kit/kit.c $(HVG_DIR)/kit/virtio.c
HVG_DEPS  := $(HVG_KIT) $(HVG_DIR)/kit/kit.h $(HVG_DIR)/kit/virtio.h $(HVG_DIR)/kit/link.ld
HVG_NAMES := $(patsubst $(HVG_DIR)/guests/%.c,%,$(sort $(wildcard $(HVG_DIR)/guests/*.c)))
HVG_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror -ffreestanding -fno-pic -fno-pie \
	-fno-stack-protector -fno-asynchronous-unwind-tables -mno-red-zone -mgeneral-regs-only \
	-fno-builtin -I$(HVG_DIR)/kit
HVG_LDFLAGS := -nostdlib -static -no-pie -Wl,--build-id=none -Wl,-T,$(HVG_DIR)/kit/link.ld \
	-Wl,-z,noexecstack -Wl,--no-warn-rwx-segments

$(B)/hv-guests/%.elf: $(HVG_DIR)/guests/%.c $(HVG_DEPS)
	@mkdir -p $(@D)
	$(call say,GUEST,$@)
	$(Q)$(CC) $(HVG_CFLAGS) $(HVG_LDFLAGS) -o $@ $(HVG_KIT) $<

EXTRA_ALL += $(patsubst %,$(B)/hv-guests/%.elf,$(HVG_NAMES))

# The bootinfo guest as a bzImage too (Linux 64-bit boot protocol): the
# flat image wrapped in a real setup header; init_size covers the bss.
$(B)/hv-guests/%.bz: $(B)/hv-guests/%.elf $(B)/hv-tools/hvt
	$(call say,BZIMAGE,$@)
	$(Q)objcopy -O binary $< $@.flat
	$(Q)$(B)/hv-tools/hvt bzimage $@.flat $$(( 0x$$(nm $< | awk '$$3 == "_end" { print $$1 }') - 0x100000 )) $@
	$(Q)rm -f $@.flat

EXTRA_ALL += $(B)/hv-guests/bootinfo.bz

# hvt: the host side of the device tests (patterns, tap frames, vsock
# peers), kept out of $(B)/bin since it is no product.
$(B)/hv-tools/hvt: $(HVG_DIR)/tools/hvt.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $<

EXTRA_ALL += $(B)/hv-tools/hvt

# Unit tests of the pieces that need no KVM.
HV_UNIT_SRCS := hv/mem.c hv/io.c hv/aml.c hv/config.c hv/devopt.c hv/acpi.c hv/boot.c hv/fdpath.c
$(eval $(call unit_test,unit-hv,tests/hv/unit_hv.c $(HV_UNIT_SRCS)))
$(eval $(call unit_test,unit-hv-virtq,tests/hv/unit_virtq.c hv/virtq.c hv/mem.c))
# The seccomp allowlist, loaded in forked children: no KVM needed.
$(eval $(call unit_test,unit-hv-sandbox,tests/hv/unit_sandbox.c hv/sandbox.c,-lseccomp))
# vhost-net's checks on what a driver gives it, without the kernel's vhost.
$(eval $(call unit_test,unit-hv-vhost-net,tests/hv/unit_vhost_net.c hv/vhost_net.c hv/mem.c))
# A VFIO function's virtual config space (hv/vfio_cfg.c) from made-up ones.
$(eval $(call unit_test,unit-hv-vfio,tests/hv/unit_vfio.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# The virtio transport's snapshot state, hostile ones refused (hv/virtio_snap.c).
$(eval $(call unit_test,unit-hv-virtio-snap,tests/hv/unit_virtio_snap.c tests/hv/virtio_drive.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# virtio-vsock's snapshot: connections reset toward the guest, listeners kept.
$(eval $(call unit_test,unit-hv-vsock-snap,tests/hv/unit_vsock_snap.c tests/hv/virtio_drive.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# virtio-net's snapshot on its userspace data path (a socket pair as the tap).
$(eval $(call unit_test,unit-hv-net-snap,tests/hv/unit_net_snap.c tests/hv/virtio_drive.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# The device registry (hv/devices.c) with test devices of its own.
$(eval $(call unit_test,unit-hv-devices,tests/hv/unit_devices.c hv/devices.c))

# Fuzzers: kernel files, device port I/O and control requests
# (tests/hv/fuzz_hv.c); PCI and the virtio device models against hostile
# rings, config space and BARs (tests/hv/fuzz_virtio.c).
$(eval $(call fuzzer,fuzz-hv,tests/hv/fuzz_hv.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
$(eval $(call fuzzer,fuzz-hv-virtio,tests/hv/fuzz_virtio.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# Snapshot files as a restoring vhpc-hv reads them (hv/snap_load.c and the
# devices' loaders).
$(eval $(call fuzzer,fuzz-hv-snapshot,tests/hv/fuzz_snapshot.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# A passed-through function's config space as its device reports it.
$(eval $(call fuzzer,fuzz-hv-vfio,tests/hv/fuzz_vfio.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
# The vhost-user codec and transport (hv/vhost_user.c): unit test and the
# fuzzer of back-end replies.
$(eval $(call unit_test,unit-vhost-user,tests/unit/test_vhost_user.c hv/vhost_user.c hv/fdpath.c))
$(eval $(call fuzzer,fuzz-vhost-user,tests/fuzz/fuzz_vhost_user.c hv/vhost_user.c hv/fdpath.c))
