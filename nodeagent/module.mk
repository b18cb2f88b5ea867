# The node agent as a library linked into `vhpc` (embedded) and, later,
# the vhpcd daemon: every nodeagent/*.c but the main_*.c of its programs.
# A program using it: sources $(NODEAGENT_SRCS), libraries $(NODEAGENT_LIBS),
# include "nodeagent/vhpcd.h".
NODEAGENT_SRCS := $(sort $(filter-out nodeagent/main_%.c,$(wildcard nodeagent/*.c))) \
                  mpi-plugins/btl_vmshm/vmshm_region.c mpi-plugins/btl_vmshm/vmshm_ring.c
NODEAGENT_LIBS := -lhwloc -lnl-route-3 -lnl-3

# vhpc-na: the agent's pieces from the command line (admins, tests).
$(eval $(call program,vhpc-na,nodeagent/main_na.c $(NODEAGENT_SRCS),$(NODEAGENT_LIBS)))

$(eval $(call unit_test,unit-nodeagent-place,tests/nodeagent/test_place.c $(NODEAGENT_SRCS),$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-nodeagent-jobdir,tests/nodeagent/test_jobdir.c $(NODEAGENT_SRCS),$(NODEAGENT_LIBS)))
$(eval $(call unit_test,unit-nodeagent-oci,tests/nodeagent/test_oci.c $(NODEAGENT_SRCS),$(NODEAGENT_LIBS)))
