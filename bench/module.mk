# bench: vhpc-mpibench (IMB-MPI1-compatible MPI benchmark, built against
# Open MPI with its wrapper's flags), vhpc-imbcheck, and the IMB table
# library (parser, rules, sanity checks; public header bench/bench.h) that
# `vhpc bench` links too.

# Deferred (=), so that mpicc is asked when a recipe runs, after `make deps`
# installed Open MPI on a fresh machine.  -isystem: Open MPI's headers are
# not held to our warning flags.
MPI_CFLAGS = $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile))
MPI_LIBS   = $(shell mpicc --showme:link)

BENCH_LIB_SRCS := bench/imb_rules.c bench/imb_parse.c bench/imb_check.c bench/imb_json.c
BENCH_LIB      := $(B)/lib/libvhpc-bench.a

$(eval $(call library,vhpc-bench,$(BENCH_LIB_SRCS)))

MPIBENCH_SRCS := bench/mpibench/main.c bench/mpibench/opts.c bench/mpibench/pattern.c \
	bench/mpibench/kernels.c bench/mpibench/output.c bench/mpibench/hosts.c

$(eval $(call program,vhpc-mpibench,$(MPIBENCH_SRCS),$(BENCH_LIB) $$(MPI_LIBS)))
# $$: MPI's flags are asked for when an object is compiled (see above).
$(call dir_cflags,bench/mpibench,$$(MPI_CFLAGS))
$(eval $(call program,vhpc-imbcheck,bench/imbcheck/main.c,$(BENCH_LIB)))

# The native sides of `vhpc bench`'s suites, also in the default guest image:
# vhpc-sysbench (UnixBench-style loops and a memory touch; no MPI) and
# vhpc-netbench (TCP stream, maerts and request/response between two MPI
# ranks, or without MPI between a server and a client: a guest and the host).
$(eval $(call program,vhpc-sysbench,bench/loops/sysbench.c))
$(eval $(call program,vhpc-netbench,bench/netbench/netbench.c bench/netbench/peer.c bench/netbench/tcp.c,$$(MPI_LIBS)))
$(call dir_cflags,bench/netbench,$$(MPI_CFLAGS))

# The harness behind `vhpc bench` (scheduler/cli/cmd_bench.c calls bench_run and
# bench_compare from bench/bench.h).  The program template links every object
# that $(B)/bin/vhpc depends on, so naming them here links them into vhpc
# without touching the scheduler's module.mk.
BENCH_HARNESS_CORE := bench/harness/stats.c bench/harness/metrics.c bench/harness/parse.c \
	bench/harness/sizes.c bench/harness/iter.c
BENCH_HARNESS_SRCS := $(BENCH_HARNESS_CORE) bench/harness/proc.c bench/harness/runs.c \
	bench/harness/run.c bench/harness/linetrip.c bench/harness/suite_mpi.c bench/harness/suite_net.c \
	bench/harness/suite_mem.c bench/harness/suite_sys.c bench/harness/machine.c \
	bench/harness/table.c bench/harness/plot.c bench/harness/ratio.c bench/harness/gnuplot.c \
	bench/harness/compare.c bench/harness/image.c bench/harness/transport.c bench/harness/imbtable.c
$(B)/bin/vhpc: $(patsubst %.c,$(B)/obj/%.o,$(BENCH_HARNESS_SRCS) $(BENCH_LIB_SRCS))
