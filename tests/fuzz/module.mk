# Fuzzers of libvhpc's parsers: YAML config, channel frames, wire messages.
$(eval $(call fuzzer,fuzz-config,tests/fuzz/fuzz_config.c))
$(eval $(call fuzzer,fuzz-chan,tests/fuzz/fuzz_chan.c))
$(eval $(call fuzzer,fuzz-wire,tests/fuzz/fuzz_wire.c))
$(eval $(call fuzzer,fuzz-binds,tests/fuzz/fuzz_binds.c))
$(eval $(call fuzzer,fuzz-wirepipe,tests/fuzz/fuzz_wirepipe.c))
