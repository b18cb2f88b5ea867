# bench: vhpc-mpibench (IMB-MPI1-compatible MPI benchmark, built against
# Open MPI with its wrapper's flags), vhpc-imbcheck, and the IMB table
# library (parser, rules, sanity checks; public header bench/bench.h) that
# `vhpc bench` links too: add $(BENCH_LIB) and -Ibench.

# Deferred (=), so that mpicc is asked when a recipe runs, after `make deps`
# installed Open MPI on a fresh machine.  -isystem: Open MPI's headers are
# not held to our warning flags.
MPI_CFLAGS = $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile))
MPI_LIBS   = $(shell mpicc --showme:link)

BENCH_LIB_SRCS := bench/imb_rules.c bench/imb_parse.c bench/imb_check.c bench/imb_json.c
BENCH_LIB      := $(B)/lib/libvhpc-bench.a

$(BENCH_LIB): $(patsubst %.c,$(B)/obj/%.o,$(BENCH_LIB_SRCS))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

MPIBENCH_SRCS := bench/mpibench/main.c bench/mpibench/opts.c bench/mpibench/pattern.c \
	bench/mpibench/kernels.c bench/mpibench/output.c bench/mpibench/hosts.c

# libvhpc.a again after the bench library, which uses it.
$(eval $(call program,vhpc-mpibench,$(MPIBENCH_SRCS),$(BENCH_LIB) $(B)/lib/libvhpc.a $$(MPI_LIBS)))
$(B)/bin/vhpc-mpibench: $(BENCH_LIB)
# After the template's immediate (:=) assignment, so this deferred one wins.
$(patsubst %.c,$(B)/obj/%.o,$(MPIBENCH_SRCS)): EXTRA_OBJ_CFLAGS = -Ibench $(MPI_CFLAGS)
$(eval $(call program,vhpc-imbcheck,bench/imbcheck/main.c,$(BENCH_LIB) $(B)/lib/libvhpc.a,-Ibench))
$(B)/bin/vhpc-imbcheck: $(BENCH_LIB)

$(eval $(call unit_test,unit-bench-imb,tests/bench/test_imb.c $(BENCH_LIB_SRCS),,-Ibench))
$(eval $(call unit_test,unit-bench-opts,tests/bench/test_mpibench_opts.c bench/mpibench/opts.c bench/mpibench/pattern.c bench/imb_rules.c,,-Ibench -Ibench/mpibench))
$(eval $(call fuzzer,fuzz-imb-parse,tests/bench/fuzz_imb_parse.c $(BENCH_LIB_SRCS),,-Ibench))
