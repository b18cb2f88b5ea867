# Unit tests and fuzzers of the IMB table library, vhpc-mpibench's options and
# the harness behind `vhpc bench`.
$(eval $(call unit_test,unit-bench-imb,tests/bench/test_imb.c $(BENCH_LIB_SRCS)))
$(eval $(call unit_test,unit-bench-opts,tests/bench/test_mpibench_opts.c bench/mpibench/opts.c bench/mpibench/pattern.c bench/imb_rules.c))
$(eval $(call fuzzer,fuzz-imb-parse,tests/bench/fuzz_imb_parse.c $(BENCH_LIB_SRCS)))

$(eval $(call unit_test,unit-bench-harness,tests/bench/test_harness.c $(BENCH_HARNESS_CORE) \
	bench/harness/compare.c bench/harness/table.c bench/harness/ratio.c bench/harness/gnuplot.c \
	bench/harness/proc.c bench/harness/runs.c bench/harness/suite_mpi.c bench/harness/transport.c bench/harness/imbtable.c \
	$(BENCH_LIB_SRCS)))
$(eval $(call fuzzer,fuzz-bench-results,tests/bench/fuzz_bench_results.c $(BENCH_HARNESS_CORE) \
	bench/harness/runs.c bench/harness/suite_mpi.c bench/harness/transport.c bench/harness/suite_net.c bench/harness/suite_mem.c \
	bench/harness/suite_sys.c $(BENCH_LIB_SRCS)))
