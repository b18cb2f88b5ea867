# vhpc-hv: the VMM.  Every hv/*.c except the bench is part of it; device
# files register themselves (HV_DEVICE), so adding one needs no edit here.
HV_SRCS := $(filter-out hv/bench_%.c,$(sort $(wildcard hv/*.c)))
$(eval $(call program,vhpc-hv,$(HV_SRCS)))

# The test guests and their kit live in tests/hv/ (only top-level module.mk
# files are picked up by the Makefile).
include tests/hv/module.mk
