# libvhpc: static library linked into every program; a sanitized copy
# for unit tests.
LIB_SRCS := $(sort $(wildcard lib/*.c))

$(B)/lib/libvhpc.a: $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRCS))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/lib/libvhpc-san.a: $(patsubst %.c,$(B)/san/%.o,$(LIB_SRCS))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(eval $(call unit_test,unit-config,tests/unit/test_config.c))
$(eval $(call unit_test,unit-util,tests/unit/test_util.c))
$(eval $(call unit_test,unit-chan,tests/unit/test_chan.c))
$(eval $(call fuzzer,fuzz-config,tests/fuzz/fuzz_config.c))
$(eval $(call fuzzer,fuzz-chan,tests/fuzz/fuzz_chan.c))
$(eval $(call unit_test,unit-wire,tests/unit/test_wire.c))
$(eval $(call fuzzer,fuzz-wire,tests/fuzz/fuzz_wire.c))
$(eval $(call unit_test,unit-gexec,tests/unit/test_gexec.c))
