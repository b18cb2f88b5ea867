# Unit tests of the node agent's placement, job dirs and OCI config.
$(eval $(call unit_test,unit-nodeagent-place,tests/nodeagent/test_place.c,$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-nodeagent-jobdir,tests/nodeagent/test_jobdir.c,$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-nodeagent-oci,tests/nodeagent/test_oci.c,$(NODEAGENT_LIBS)))
# vhpcd's fabric: what a node reports, and the job_prepare's share checked against its cluster file.
$(eval $(call unit_test,unit-vd-fabric,tests/nodeagent/test_vd_fabric.c nodeagent/daemon/fabric.c,$(NODEAGENT_LIBS)))
# What a guest used, from its cgroup files in each kernel's layout (vhpc history).
$(eval $(call unit_test,unit-cgroup-usage,tests/nodeagent/test_cgroup_usage.c,$(NODEAGENT_LIBS)))
# A node's part of a checkpoint: layout, part file, clean-up, the link attacks.
$(eval $(call unit_test,unit-ckpt-part,tests/nodeagent/test_ckpt_part.c,$(NODEAGENT_LIBS)))
# A container guest's output folder, which the guest can write: the link, FIFO and hard-link attacks.
$(eval $(call unit_test,unit-ctr-out,tests/nodeagent/test_ctr_out.c,$(NODEAGENT_LIBS)))
# A restored job's ports on the bridge: down until job_resume (ports_down, na_net_ports_up).
$(eval $(call unit_test,unit-net-ports,tests/nodeagent/test_net_ports.c,$(NODEAGENT_LIBS)))
# The tail of a guest's log put into the node's by root: the link, FIFO and escape attacks.
$(eval $(call unit_test,unit-log-tail,tests/nodeagent/test_log_tail.c,$(NODEAGENT_LIBS)))
