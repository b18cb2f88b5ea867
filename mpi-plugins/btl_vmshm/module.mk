# mpi-plugins/btl_vmshm: the vmshm Open MPI BTL (mca_btl_vmshm.so), built
# out of tree against Debian's libopenmpi-dev; its unit test, fuzzer, MPI
# test programs and benchmark.
#
#   $(B)/lib/vhpc/openmpi/mca_btl_vmshm.so   put this directory in front
#                          of Open MPI's component path (installed as
#                          PREFIX/lib/vhpc/openmpi: PREFIX/lib/openmpi is
#                          where an Open MPI built into PREFIX loads from)
#   $(B)/vmshm/bin/*       MPI test and benchmark programs
#                          (not in $(B)/tests: they need mpirun)

VMSHM_DIR      := mpi-plugins/btl_vmshm
# The region and ring code is lib/vmshm's (VMSHM_CORE), compiled again
# position-independent for the .so.
VMSHM_BTL_SRCS := $(VMSHM_DIR)/btl_vmshm_component.c $(VMSHM_DIR)/btl_vmshm_module.c
MPICC          ?= mpicc
# Open MPI's headers are not ours to warn about: -isystem.
VMSHM_MPI_INC  := $(patsubst %,-isystem %,$(shell $(MPICC) --showme:incdirs 2>/dev/null))
VMSHM_MPI_LIBDIR := $(shell $(MPICC) --showme:libdirs 2>/dev/null)
VMSHM_SO       := $(B)/lib/vhpc/openmpi/mca_btl_vmshm.so
VMSHM_CFLAGS   := $(CFLAGS) -fPIC -fvisibility=hidden $(VMSHM_MPI_INC)

$(B)/vmshm/obj/%.o: $(VMSHM_DIR)/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(VMSHM_CFLAGS) -c -o $@ $<
$(B)/vmshm/obj/core/%.o: lib/vmshm/%.c
	@mkdir -p $(@D)
	$(call say,CC-PIC,$<)
	$(Q)$(CC) $(VMSHM_CFLAGS) -c -o $@ $<

# Only the component struct is exported (-fvisibility=hidden elsewhere);
# Open MPI finds it by the name mca_btl_vmshm_component.
$(VMSHM_SO): $(patsubst $(VMSHM_DIR)/%.c,$(B)/vmshm/obj/%.o,$(VMSHM_BTL_SRCS)) \
              $(patsubst lib/vmshm/%.c,$(B)/vmshm/obj/core/%.o,$(VMSHM_CORE))
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,mca_btl_vmshm.so -Wl,--no-undefined -o $@ $^ \
		-L$(VMSHM_MPI_LIBDIR) -lopen-pal

# MPI programs for the tests and the benchmark.
VMSHM_MPI_PROGS := $(B)/vmshm/bin/vmshm-test $(B)/vmshm/bin/vmshm-scribble \
                   $(B)/vmshm/bin/vmshm-pingpong $(B)/vmshm/bin/vmshm-bcastloop
$(B)/vmshm/bin/vmshm-test: tests/mpi-plugins/vmshm_test.c
	@mkdir -p $(@D)
	$(call say,MPICC,$@)
	$(Q)$(MPICC) $(CFLAGS) -pthread -o $@ $<
$(B)/vmshm/bin/vmshm-scribble: tests/mpi-plugins/vmshm_scribble.c $(B)/lib/libvmshm.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(filter %.c %.a,$^)
$(B)/vmshm/bin/vmshm-pingpong: $(VMSHM_DIR)/bench/pingpong.c
	@mkdir -p $(@D)
	$(call say,MPICC,$@)
	$(Q)$(MPICC) $(CFLAGS) -o $@ $<
$(B)/vmshm/bin/vmshm-bcastloop: $(VMSHM_DIR)/bench/bcastloop.c
	@mkdir -p $(@D)
	$(call say,MPICC,$@)
	$(Q)$(MPICC) $(CFLAGS) -o $@ $<

# No MPI in it: the copy limits themselves (bench/copybench.c).
$(B)/vmshm/bin/vmshm-copybench: $(VMSHM_DIR)/bench/copybench.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $<

# And the time the machine takes away from a running core (bench/holes.c).
$(B)/vmshm/bin/vmshm-holes: $(VMSHM_DIR)/bench/holes.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CFLAGS) -pthread -o $@ $<

EXTRA_ALL   += $(VMSHM_SO) $(VMSHM_MPI_PROGS) $(B)/vmshm/bin/vmshm-copybench \
               $(B)/vmshm/bin/vmshm-holes
EXTRA_TESTS += $(VMSHM_SO) $(VMSHM_MPI_PROGS) $(B)/vmshm/bin/vmshm-copybench \
               $(B)/vmshm/bin/vmshm-holes

# The top Makefile reads dependency files from $(B)/obj and $(B)/san only.
-include $(shell find $(B)/vmshm -name '*.d' -type f 2>/dev/null)
