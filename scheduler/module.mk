# vhpc (the CLI, with the embedded scheduler and node agent) and its tests.
VHPC_SRCS := scheduler/vhpc.c $(sort $(wildcard scheduler/cmd_*.c)) scheduler/embedded.c scheduler/launch.c \
             scheduler/client.c scheduler/jobargs.c scheduler/jobjson.c
# `vhpc mpirun` reads the Slurm plugin's state files (slurm/slurm.h).
$(eval $(call program,vhpc,$(VHPC_SRCS),$(NODEAGENT_LIBS) $(B)/lib/libvslurm.a))

# vhpc-ctld: the cluster controller (scheduler/PROTOCOL.md).
CTLD_SRCS := scheduler/ctld_main.c scheduler/ctld_msg.c scheduler/ctld_state.c scheduler/ctld_req.c \
             scheduler/ctld_sched.c scheduler/ctld_rpc.c scheduler/ctld_image.c scheduler/imgstore.c \
             scheduler/imgstore_rec.c scheduler/sched.c scheduler/store.c scheduler/launch.c scheduler/jobjson.c
# Its room on disk: job output capped and cut, a reserve for the database.
CTLD_SRCS += scheduler/ctld_spool.c scheduler/ctld_room.c
$(eval $(call program,vhpc-ctld,$(CTLD_SRCS),$(B)/lib/libimages.a -lsqlite3))
