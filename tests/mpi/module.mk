# MPI programs the tests run in guests.  ckpt_cksum: the deterministic
# checksum job of the checkpoint tests (tests/mpi/README.md).  Plain flags,
# no sanitizers: it runs in guests, against the image's Open MPI.
CKPT_CKSUM_SRCS := tests/mpi/ckpt_cksum.c tests/mpi/cksum_fold.c tests/mpi/cksum_ref.c
$(B)/testbin/ckpt_cksum: $(CKPT_CKSUM_SRCS) tests/mpi/cksum_fold.h
	@mkdir -p $(@D)
	$(call say,MPICC,$@)
	$(Q)mpicc -O2 -Wall -Wextra -Werror -o $@ $(CKPT_CKSUM_SRCS)

EXTRA_ALL += $(B)/testbin/ckpt_cksum
EXTRA_TESTS += $(B)/testbin/ckpt_cksum

# scratch_log: the scratch-disk writer and checker of kvm-ckpt-more.t (no MPI).
SCRATCH_LOG_SRCS := tests/mpi/scratch_log.c tests/mpi/cksum_fold.c
$(B)/testbin/scratch_log: $(SCRATCH_LOG_SRCS) tests/mpi/cksum_fold.h
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -o $@ $(SCRATCH_LOG_SRCS)

EXTRA_ALL += $(B)/testbin/scratch_log
EXTRA_TESTS += $(B)/testbin/scratch_log

# The fold itself, under the sanitizers.
$(eval $(call unit_test,unit-cksum-fold,tests/mpi/test_cksum_fold.c tests/mpi/cksum_fold.c tests/mpi/cksum_ref.c))
