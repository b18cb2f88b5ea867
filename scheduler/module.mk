# vhpc (the CLI, with the embedded scheduler and node agent) and its tests.
VHPC_SRCS := scheduler/vhpc.c $(sort $(wildcard scheduler/cmd_*.c)) scheduler/embedded.c scheduler/launch.c
$(eval $(call program,vhpc,$(VHPC_SRCS) $(NODEAGENT_SRCS),$(NODEAGENT_LIBS)))

$(eval $(call unit_test,unit-launch,tests/scheduler/test_launch.c scheduler/launch.c))
$(eval $(call unit_test,unit-sched,tests/scheduler/test_sched.c scheduler/sched.c))
$(eval $(call unit_test,unit-store,tests/scheduler/test_store.c scheduler/store.c,-lsqlite3))
