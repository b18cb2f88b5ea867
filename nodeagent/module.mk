# The node agent as a library linked into `vhpc` (embedded) and, later,
# the vhpcd daemon.
NODEAGENT_SRCS := $(sort $(filter-out nodeagent/main_%.c,$(wildcard nodeagent/*.c)))
NODEAGENT_LIBS := -lhwloc -lnl-route-3 -lnl-3
