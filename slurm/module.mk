# vhpc under Slurm (slurm/README.md): vhpc-slurmjob, the process that holds
# a job's guests on a node, and the SPANK plugin spank_vhpc.so, built when
# Slurm's headers are here (libslurm-dev).
#
# The plugin is loaded into srun, sbatch, salloc and slurmstepd, so it
# links nothing of vhpc's archives (nor libslurm: Slurm resolves its spank_*
# calls) and exports only what Slurm looks up (spank_vhpc.map).  What it
# shares with vhpc-slurmjob is compiled into it position-independent, and so
# is the job option table its --vhpc-* options come from (lib/jobopts.c).
VS_SHARED_SRCS := slurm/opts.c slurm/kv.c slurm/state.c
# slurm/slurm.h, for vhpc-slurmjob and `vhpc mpirun` (scheduler/).
$(eval $(call library,vslurm,slurm/hostlist.c slurm/layout.c $(VS_SHARED_SRCS)))
VS_HOLDER_SRCS := slurm/holder.c slurm/spec.c slurm/derive.c slurm/peers.c slurm/relay.c
$(eval $(call program,vhpc-slurmjob,$(VS_HOLDER_SRCS),$(B)/lib/libvslurm.a $(NODEAGENT_LIBS)))

ifneq ($(wildcard /usr/include/slurm/spank.h),)
VS_PLUGIN_SRCS := slurm/spank_vhpc.c slurm/task.c slurm/pmix.c $(VS_SHARED_SRCS) lib/parse.c lib/drivers.c lib/jobopts.c lib/fabric.c
VS_PLUGIN := $(B)/lib/slurm/spank_vhpc.so
$(B)/pic/%.o: %.c | $(GEN_DRIVER_NAMES)
	@mkdir -p $(@D)
	$(call say,CC-PIC,$<)
	$(Q)$(CC) $(CFLAGS) -fPIC -DVS_BINDIR='"$(PREFIX)/bin"' -c -o $@ $<
# The plugin starts PREFIX/bin/vhpc-slurmjob: built again when PREFIX
# changes (`make install PREFIX=/opt/vhpc` after a plain `make`).
$(B)/gen/prefix: FORCE
	@mkdir -p $(@D)
	@echo '$(PREFIX)' >$@.tmp; cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(B)/pic/slurm/spank_vhpc.o: $(B)/gen/prefix
$(VS_PLUGIN): $(patsubst %.c,$(B)/pic/%.o,$(VS_PLUGIN_SRCS)) slurm/spank_vhpc.map
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,--version-script=slurm/spank_vhpc.map -o $@ $(filter %.o,$^)
EXTRA_ALL += $(VS_PLUGIN)
endif
