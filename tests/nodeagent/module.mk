# Unit tests of the node agent's placement, job dirs and OCI config.
$(eval $(call unit_test,unit-nodeagent-place,tests/nodeagent/test_place.c,$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-nodeagent-jobdir,tests/nodeagent/test_jobdir.c,$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-nodeagent-oci,tests/nodeagent/test_oci.c,$(NODEAGENT_LIBS)))
