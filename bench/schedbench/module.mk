# vhpc-schedbench: vhpc-ctld's submit rate and gang placement time against
# real or simulated nodes (bench/scripts/cluster-sched runs it).
$(eval $(call program,vhpc-schedbench,bench/schedbench/main.c,))
