# Tests of the kvm driver (nodeagent/drivers/kvm/), the guest side it relies on
# (vhpc-guestd's kernel command line, guest/initramfs/init) and the vsock
# client (lib/gexec.c).  The *.t files next to this run real vhpc-hv guests.
$(eval $(call unit_test,unit-kvm,tests/kvm/test_kvm.c guest/opts.c,$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-vsock-client,tests/kvm/test_vsock_client.c))
$(eval $(call unit_test,unit-kvm-ckpt,tests/kvm/test_kvm_ckpt.c,$(NODEAGENT_LIBS)))
# vfio-job: a kvm job with PCI functions for vfio.t: a test tool, in $(B)/bin
# beside the programs it finds there (vhpc-hv, vhpc-guestd), but not in
# PROGRAMS, so not installed.
$(B)/bin/vfio-job: $(B)/obj/tests/kvm/vfio_job.o $(NODEAGENT_LIBS) $(B)/lib/libvhpc.a
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(NODEAGENT_LIBS) $(B)/lib/libvhpc.a $(LIBVHPC_LIBS)
EXTRA_ALL += $(B)/bin/vfio-job
