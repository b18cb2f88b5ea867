# Tests of vhpc-guestd, vhpc-rsh and lib/gexec.c (tests/guest/*.t use the
# helpers below).
$(eval $(call unit_test,unit-guestd,tests/guest/test_guestd.c guest/proto.c guest/opts.c guest/spawn.c))
$(eval $(call unit_test,unit-rsh-args,tests/guest/test_rsh_args.c mpi-plugins/rsh/args.c))
$(eval $(call fuzzer,fuzz-guestd,tests/guest/fuzz_guestd.c guest/proto.c guest/opts.c))

# Test helpers live outside $(B)/tests, which tests/run executes as tests.
$(B)/testbin/gprobe: $(B)/obj/tests/guest/gprobe.o $(B)/lib/libvhpc.a
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(B)/lib/libvhpc.a $(LIBVHPC_LIBS)

# An MPI program that says where each rank runs (needs mpicc, libopenmpi-dev).
$(B)/testbin/mpi-where: tests/guest/mpi_where.c
	@mkdir -p $(@D)
	$(call say,MPICC,$@)
	$(Q)mpicc -O2 -Wall -Wextra -Werror -o $@ $<

# Built by plain `make` too, so `make && tests/run guest` works from scratch.
EXTRA_ALL += $(B)/testbin/gprobe $(B)/testbin/mpi-where
EXTRA_TESTS += $(B)/testbin/gprobe $(B)/testbin/mpi-where
