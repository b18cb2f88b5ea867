# The vmshm region layout and its rings: one home for what the node agent
# (which creates a job's region) and the vmshm BTL (which uses it inside the
# guests) must agree on.  The BTL compiles the same sources position-
# independent into its .so (mpi-plugins/btl_vmshm/module.mk); everything
# else links libvmshm.a.
VMSHM_CORE := lib/vmshm/vmshm_region.c lib/vmshm/vmshm_ring.c
VMSHM_HDRS := lib/vmshm/vmshm_region.h lib/vmshm/vmshm_ring.h
# The copy probe is the node agent's alone (vmshm_copyprobe.h): in the
# library and in what builds the agent from source, not in the BTL.
VMSHM_AGENT := $(VMSHM_CORE) lib/vmshm/vmshm_copyprobe.c
$(eval $(call library,vmshm,$(VMSHM_AGENT)))
