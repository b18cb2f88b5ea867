# Helpers of the "Smaller holes" tests (tests/security/README.md).
# swap-paths: bind-symlink-swap.t's attacker, exchanging two names in a loop.
$(B)/testbin/swap-paths: $(B)/obj/tests/security/swap-paths.o
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $<

EXTRA_ALL += $(B)/testbin/swap-paths
EXTRA_TESTS += $(B)/testbin/swap-paths

# kvm_control (nodeagent/drivers/kvm) against a symlink planted at vhpc-hv's
# control socket: a unit test, no KVM needed.
$(eval $(call unit_test,unit-kvm-control-symlink,tests/security/kvm-control-symlink.c,$(NODEAGENT_LIBS)))

# A kvm guest's cgroups against a process that allocates past its limit.
$(eval $(call unit_test,unit-kvm-guest-memory,tests/security/kvm-guest-memory.c,$(NODEAGENT_LIBS)))

# The kvm driver's virtiofsd against a bind source path swapped after the check.
$(eval $(call unit_test,unit-bind-kvm-fs,tests/security/bind-kvm-fs.c,$(NODEAGENT_LIBS)))
