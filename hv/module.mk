# vhpc-hv: the VMM.  Every hv/*.c is part of it; device
# files register themselves (HV_DEVICE), so adding one needs no edit here.
HV_SRCS := $(sort $(wildcard hv/*.c))
$(eval $(call program,vhpc-hv,$(HV_SRCS)))
$(eval $(call program,vhpc-hvctl,hv/ctl/hvctl.c))

# The test guests and their kit live in tests/hv/ (only top-level module.mk
# files are picked up by the Makefile).
include tests/hv/module.mk
