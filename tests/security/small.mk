# Helpers of the "Smaller holes" tests (tests/security/README.md).
# swap-paths: bind-symlink-swap.t's attacker, exchanging two names in a loop.
$(B)/testbin/swap-paths: $(B)/obj/tests/security/swap-paths.o
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $<

EXTRA_ALL += $(B)/testbin/swap-paths
EXTRA_TESTS += $(B)/testbin/swap-paths
