# vhpc-hv: the VMM.  Every hv/*.c except the bench is part of it; device
# files register themselves (HV_DEVICE), so adding one needs no edit here.
HV_SRCS := $(filter-out hv/bench_%.c,$(sort $(wildcard hv/*.c)))
$(eval $(call program,vhpc-hv,$(HV_SRCS)))
