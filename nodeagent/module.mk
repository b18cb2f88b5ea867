# The node agent as a library (nodeagent/nodeagent.h) linked into `vhpc`
# (the embedded agent) and vhpcd: the job lifecycle here, and one folder per
# concern (place/, jobdir/, net/, drivers/<name>/).  The daemon (daemon/) and
# the vhpc-na CLI (cli/) are programs on top of it.
# A program using it: LIBS $(NODEAGENT_LIBS); include "nodeagent/nodeagent.h".
NODEAGENT_SRCS := $(sort $(wildcard nodeagent/*.c nodeagent/place/*.c nodeagent/jobdir/*.c \
                    nodeagent/net/*.c nodeagent/drivers/*.c nodeagent/drivers/*/*.c))
$(eval $(call library,nodeagent,$(NODEAGENT_SRCS)))
$(call dir_cflags,nodeagent/net,$(shell pkg-config --cflags libnl-route-3.0 2>/dev/null))
# Archives in link order: the agent uses images and the vmshm layout.
NODEAGENT_LIBS := $(B)/lib/libnodeagent.a $(B)/lib/libimages.a $(B)/lib/libvmshm.a \
                  -lhwloc -lnl-route-3 -lnl-3 -lnftables

# vhpc-na: the agent's pieces from the command line (admins, tests).
$(eval $(call program,vhpc-na,nodeagent/cli/main.c,$(NODEAGENT_LIBS)))

# vhpcd: the node agent daemon of a cluster (scheduler/PROTOCOL.md).
VHPCD_SRCS := $(sort $(wildcard nodeagent/daemon/*.c))
$(eval $(call program,vhpcd,$(VHPCD_SRCS),$(NODEAGENT_LIBS) -libverbs))
