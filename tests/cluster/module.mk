# Tests of the cluster: vhpc-ctld and vhpcd messages (unit, fuzz), and the
# wireprobe client the .t tests use to send forged, replayed and malformed
# messages.
CLUSTER_MSG_SRCS := scheduler/ctld/ctld_msg.c scheduler/ctld/ctld_usage.c scheduler/jobjson.c nodeagent/daemon/msg.c
$(eval $(call unit_test,unit-cluster-msg,tests/cluster/test_cluster_msg.c $(CLUSTER_MSG_SRCS),$(NODEAGENT_LIBS)))
# The fuzzer builds the agent from source, instrumented like the rest.
$(eval $(call fuzzer,fuzz-cluster-msg,tests/cluster/fuzz_cluster_msg.c $(CLUSTER_MSG_SRCS) $(NODEAGENT_SRCS) $(IMAGES_SRCS) $(VMSHM_AGENT),$(filter -l%,$(NODEAGENT_LIBS)),$(shell pkg-config --cflags libnl-route-3.0 2>/dev/null)))

$(B)/testbin/wireprobe: $(B)/obj/tests/cluster/wireprobe.o $(B)/obj/tests/cluster/wireframe.o $(B)/lib/libvhpc.a
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(B)/lib/libvhpc.a $(LIBVHPC_LIBS)

EXTRA_ALL += $(B)/testbin/wireprobe
EXTRA_TESTS += $(B)/testbin/wireprobe

# A job of known cost (tests/cluster/history.t): N CPU-seconds and M MiB.
# Plain flags, no sanitizers: it runs in guests.
$(B)/testbin/cpuburn: tests/cluster/cpuburn.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -o $@ $<

EXTRA_ALL += $(B)/testbin/cpuburn
EXTRA_TESTS += $(B)/testbin/cpuburn
