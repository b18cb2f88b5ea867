# Unit test and fuzzer of the vmshm rings (lib/vmshm/).
$(eval $(call unit_test,unit-vmshm-ring,tests/mpi-plugins/test_vmshm_ring.c,$(B)/lib/libvmshm.a))
$(eval $(call fuzzer,fuzz-vmshm-ring,tests/mpi-plugins/fuzz_vmshm_ring.c $(VMSHM_CORE)))
# Compiled straight from sources, without dependency files.
$(B)/fuzz/fuzz-vmshm-ring $(B)/vmshm/bin/vmshm-scribble: $(VMSHM_HDRS)
