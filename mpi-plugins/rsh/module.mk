# vhpc-rsh: Open MPI's plm_rsh_agent for vhpc guests (talks to vhpc-guestd).
$(eval $(call program,vhpc-rsh,mpi-plugins/rsh/rsh.c mpi-plugins/rsh/args.c))
