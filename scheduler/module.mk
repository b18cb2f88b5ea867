# vhpc (cli/: the command, with the embedded scheduler and node agent) and
# vhpc-ctld (ctld/: the cluster controller, scheduler/PROTOCOL.md); what both
# use is here: mpirun's command line (launch.c), a job's JSON (jobjson.c).
VHPC_SRCS := $(sort $(wildcard scheduler/cli/*.c)) scheduler/launch.c scheduler/jobjson.c
# `vhpc mpirun` reads the Slurm plugin's state files (slurm/slurm.h).
$(eval $(call program,vhpc,$(VHPC_SRCS),$(NODEAGENT_LIBS) $(B)/lib/libvslurm.a))

# Its room on disk (ctld_spool.c, ctld_room.c): job output capped and cut,
# a reserve for the database.
CTLD_SRCS := $(sort $(wildcard scheduler/ctld/*.c)) scheduler/launch.c scheduler/jobjson.c
# --metrics' HTTP server is libmicrohttpd's (ctld/ctld_metrics_http.c).
$(eval $(call program,vhpc-ctld,$(CTLD_SRCS),$(B)/lib/libimages.a -lsqlite3 -lmicrohttpd))
