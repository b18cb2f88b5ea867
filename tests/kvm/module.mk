# Tests of the kvm driver (nodeagent/drivers/kvm/), the guest side it relies on
# (vhpc-guestd's kernel command line, guest/initramfs/init) and the vsock
# client (lib/gexec.c).  The *.t files next to this run real vhpc-hv guests.
$(eval $(call unit_test,unit-kvm,tests/kvm/test_kvm.c guest/opts.c,$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-vsock-client,tests/kvm/test_vsock_client.c))
