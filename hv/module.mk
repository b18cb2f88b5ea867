# vhpc-hv: the VMM.  Every hv/*.c is part of it; device
# files register themselves (HV_DEVICE), so adding one needs no edit here.
HV_SRCS := $(sort $(wildcard hv/*.c))
$(eval $(call program,vhpc-hv,$(HV_SRCS),-lseccomp))
$(eval $(call program,vhpc-hvctl,hv/ctl/hvctl.c))

# The test guests, their kit, hvt, unit tests and fuzzers live in
# tests/hv/module.mk.

# Benchmarks (not tests): RAM set-up per GiB against memset, start-up time;
# virtio-net backend throughput against a plain loop on the same tap.
$(eval $(call program,vhpc-hv-bench,hv/bench/bench.c hv/mem.c))
$(eval $(call program,vhpc-hv-netbench,hv/bench/netbench.c $(filter-out hv/main.c,$(HV_SRCS)),-lseccomp))
