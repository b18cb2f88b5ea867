# Tests of the cluster: vhpc-ctld and vhpcd messages (unit, fuzz), and the
# wireprobe client the .t tests use to send forged, replayed and malformed
# messages.
CLUSTER_MSG_SRCS := scheduler/ctld/ctld_msg.c scheduler/jobjson.c nodeagent/daemon/msg.c
$(eval $(call unit_test,unit-cluster-msg,tests/cluster/test_cluster_msg.c $(CLUSTER_MSG_SRCS),$(NODEAGENT_LIBS)))
# The fuzzer builds the agent from source, instrumented like the rest.
$(eval $(call fuzzer,fuzz-cluster-msg,tests/cluster/fuzz_cluster_msg.c $(CLUSTER_MSG_SRCS) $(NODEAGENT_SRCS) $(IMAGES_SRCS) $(VMSHM_AGENT),$(filter -l%,$(NODEAGENT_LIBS)),$(shell pkg-config --cflags libnl-route-3.0 2>/dev/null)))

$(B)/testbin/wireprobe: $(B)/obj/tests/cluster/wireprobe.o $(B)/obj/tests/cluster/wireframe.o $(B)/lib/libvhpc.a
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(B)/lib/libvhpc.a $(LIBVHPC_LIBS)

EXTRA_ALL += $(B)/testbin/wireprobe
EXTRA_TESTS += $(B)/testbin/wireprobe
