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

# The native sides of `vhpc bench`'s suites, also in the default guest image:
# vhpc-sysbench (UnixBench-style loops and a memory touch; no MPI) and
# vhpc-netbench (TCP stream, maerts and request/response between two MPI
# ranks, or without MPI between a server and a client: a guest and the host).
$(eval $(call program,vhpc-sysbench,bench/loops/sysbench.c))
$(eval $(call program,vhpc-netbench,bench/netbench/netbench.c bench/netbench/peer.c bench/netbench/tcp.c,$$(MPI_LIBS)))
$(B)/obj/bench/netbench/netbench.o: EXTRA_OBJ_CFLAGS = $(MPI_CFLAGS)

# The harness behind `vhpc bench` (scheduler/cmd_bench.c calls bench_run and
# bench_compare from bench/bench.h).  The program template links every object
# that $(B)/bin/vhpc depends on, so naming them here links them into vhpc
# without touching the scheduler's module.mk.
BENCH_HARNESS_CORE := bench/harness/stats.c bench/harness/metrics.c bench/harness/parse.c \
	bench/harness/sizes.c
BENCH_HARNESS_SRCS := $(BENCH_HARNESS_CORE) bench/harness/proc.c bench/harness/runs.c \
	bench/harness/run.c bench/harness/suite_mpi.c bench/harness/suite_net.c \
	bench/harness/suite_mem.c bench/harness/suite_sys.c bench/harness/machine.c \
	bench/harness/table.c bench/harness/plot.c bench/harness/compare.c bench/harness/image.c
$(B)/bin/vhpc: $(patsubst %.c,$(B)/obj/%.o,$(BENCH_HARNESS_SRCS) $(BENCH_LIB_SRCS))

$(eval $(call unit_test,unit-bench-harness,tests/bench/test_harness.c $(BENCH_HARNESS_CORE) \
	bench/harness/compare.c bench/harness/table.c $(BENCH_LIB_SRCS),,-Ibench))
$(eval $(call fuzzer,fuzz-bench-results,tests/bench/fuzz_bench_results.c $(BENCH_HARNESS_CORE) \
	bench/harness/runs.c bench/harness/suite_mpi.c bench/harness/suite_net.c bench/harness/suite_mem.c \
	bench/harness/suite_sys.c $(BENCH_LIB_SRCS),,-Ibench))
