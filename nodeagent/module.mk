# Node agent library (placement, job dirs, job network, container driver,
# crash cleanup) and vhpc-na, its CLI for admins and tests.
#
# To use the library from another program:
#   $(eval $(call program,NAME,SOURCES,$(NODEAGENT_LINK),$(NODEAGENT_CFLAGS)))
#   $(B)/bin/NAME: $(NODEAGENT_LIB)
# (unit tests: $(NODEAGENT_LINK_SAN) and $(NODEAGENT_LIB_SAN)).  Include
# "vhpcd.h".  NODEAGENT_SRCS lists the library's sources (no main()).

NODEAGENT_SRCS := \
	nodeagent/topo.c nodeagent/place.c nodeagent/jobdir.c nodeagent/subnet.c \
	nodeagent/netns.c nodeagent/ethtool.c nodeagent/net.c nodeagent/mounts.c \
	nodeagent/cgroup.c nodeagent/runc.c nodeagent/oci.c nodeagent/ctr.c \
	nodeagent/sweep.c nodeagent/driver.c
NODEAGENT_CFLAGS := -Inodeagent
NODEAGENT_LIB := $(B)/lib/libnodeagent.a
NODEAGENT_LIB_SAN := $(B)/lib/libnodeagent-san.a
NODEAGENT_SYSLIBS := -lhwloc -lnl-route-3 -lnl-3 -ljson-c -lpthread
# libvhpc again after the archive: the archive calls into it, and the
# program template puts libvhpc.a before these.
NODEAGENT_LINK := $(NODEAGENT_LIB) $(B)/lib/libvhpc.a $(NODEAGENT_SYSLIBS)
NODEAGENT_LINK_SAN := $(NODEAGENT_LIB_SAN) $(B)/lib/libvhpc-san.a $(NODEAGENT_SYSLIBS)

NA_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(NODEAGENT_SRCS))
NA_SAN_OBJS := $(patsubst %.c,$(B)/san/%.o,$(NODEAGENT_SRCS))
# libnl's headers live in their own directory on Debian.
$(NA_OBJS) $(NA_SAN_OBJS): EXTRA_OBJ_CFLAGS := -Inodeagent -I/usr/include/libnl3

$(NODEAGENT_LIB): $(NA_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(NODEAGENT_LIB_SAN): $(NA_SAN_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(eval $(call program,vhpc-na,nodeagent/na_main.c,$(NODEAGENT_LINK),$(NODEAGENT_CFLAGS)))
$(B)/bin/vhpc-na: $(NODEAGENT_LIB)

$(eval $(call unit_test,unit-nodeagent-place,tests/nodeagent/test_place.c,$(NODEAGENT_LINK_SAN),$(NODEAGENT_CFLAGS)))
$(B)/tests/unit-nodeagent-place: $(NODEAGENT_LIB_SAN)
$(eval $(call unit_test,unit-nodeagent-jobdir,tests/nodeagent/test_jobdir.c,$(NODEAGENT_LINK_SAN),$(NODEAGENT_CFLAGS)))
$(B)/tests/unit-nodeagent-jobdir: $(NODEAGENT_LIB_SAN)
$(eval $(call unit_test,unit-nodeagent-oci,tests/nodeagent/test_oci.c,$(NODEAGENT_LINK_SAN),$(NODEAGENT_CFLAGS)))
$(B)/tests/unit-nodeagent-oci: $(NODEAGENT_LIB_SAN)
