# libvhpc: the modules every program shares, one header each (lib/*.h,
# included as "lib/NAME.h").  Its tests are in tests/unit/module.mk.
LIB_SRCS := $(sort $(wildcard lib/*.c))
$(eval $(call library,vhpc,$(LIB_SRCS)))
