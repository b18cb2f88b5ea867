# Tests of vhpc under Slurm: the pure parts (cmocka, fuzzed), and *.t
# against a real Slurm from Debian's packages (slurm-lib.sh).
$(eval $(call unit_test,unit-slurm,tests/slurm/test_slurm.c slurm/derive.c slurm/peers.c slurm/pmix.c,$(B)/lib/libvslurm.a))
$(eval $(call fuzzer,fuzz-slurm,tests/slurm/fuzz_slurm.c slurm/opts.c slurm/kv.c slurm/state.c slurm/hostlist.c slurm/layout.c))
