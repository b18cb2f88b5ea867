# vhpc-hv: the VMM.  Every hv/*.c is part of it; device
# files register themselves (HV_DEVICE), so adding one needs no edit here.
HV_SRCS := $(sort $(wildcard hv/*.c))
$(eval $(call program,vhpc-hv,$(HV_SRCS)))
$(eval $(call program,vhpc-hvctl,hv/ctl/hvctl.c))

# The test guests, their kit and hvt live in tests/hv/module.mk (the
# Makefile picks up */*/module.mk too).

# Unit tests of the pieces that need no KVM.
HV_UNIT_SRCS := hv/mem.c hv/io.c hv/aml.c hv/config.c hv/devopt.c hv/acpi.c hv/boot.c
$(eval $(call unit_test,unit-hv,tests/hv/unit_hv.c $(HV_UNIT_SRCS),,-Ihv))
$(eval $(call unit_test,unit-hv-virtq,tests/hv/unit_virtq.c hv/virtq.c hv/mem.c,,-Ihv))

# Fuzzers: kernel files, device port I/O and control requests
# (tests/hv/fuzz_hv.c); PCI and the virtio device models against hostile
# rings, config space and BARs (tests/hv/fuzz_virtio.c).
$(eval $(call fuzzer,fuzz-hv,tests/hv/fuzz_hv.c $(filter-out hv/main.c,$(HV_SRCS)),,-Ihv))
$(eval $(call fuzzer,fuzz-hv-virtio,tests/hv/fuzz_virtio.c $(filter-out hv/main.c,$(HV_SRCS)),,-Ihv))

# Benchmarks (not tests): RAM set-up per GiB against memset, start-up time;
# virtio-net backend throughput against a plain loop on the same tap.
$(eval $(call program,vhpc-hv-bench,hv/bench/bench.c hv/mem.c))
$(eval $(call program,vhpc-hv-netbench,hv/bench/netbench.c $(filter-out hv/main.c,$(HV_SRCS)),,-Ihv))
