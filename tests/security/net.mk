# Job networks (tests/security/vxlan-*.t): vxlan-inject, the attacker that
# builds VXLAN frames in a plain UDP socket, and its counter in a guest.
$(B)/testbin/vxlan-inject: $(B)/obj/tests/security/vxlan-inject.o
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $<

EXTRA_ALL += $(B)/testbin/vxlan-inject
EXTRA_TESTS += $(B)/testbin/vxlan-inject

# Underlay encryption's parts that need no WireGuard in the kernel.
$(eval $(call unit_test,unit-net-wg,tests/security/test_net_wg.c,$(NODEAGENT_LIBS)))
