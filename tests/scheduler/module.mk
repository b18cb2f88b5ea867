# Unit tests of the scheduler: launch files, the placement policy, the job store, the image store.
$(eval $(call unit_test,unit-launch,tests/scheduler/test_launch.c scheduler/launch.c))
$(eval $(call unit_test,unit-sched,tests/scheduler/test_sched.c scheduler/ctld/sched.c))
$(eval $(call unit_test,unit-store,tests/scheduler/test_store.c scheduler/ctld/store.c scheduler/ctld/store_usage.c scheduler/ctld/store_ckpt.c,-lsqlite3))
$(eval $(call unit_test,unit-imgstore,tests/scheduler/test_imgstore.c scheduler/ctld/imgstore.c scheduler/ctld/imgstore_rec.c,$(B)/lib/libimages.a))
# lib/fsutil.c's atomic writes, their fsyncs and rename recorded in order.
$(eval $(call unit_test,unit-atomic-write,tests/scheduler/test_atomic_write.c,-Xlinker --wrap=fsync -Xlinker --wrap=rename))
# The job option table: its rows, getopt_long's arrays and --help made from
# them, vhpc run's errors, and the Slurm plugin's rows.
$(eval $(call unit_test,unit-jobopts,tests/scheduler/test_jobopts.c scheduler/cli/jobargs.c scheduler/cli/optgen.c scheduler/jobjson.c,$(B)/lib/libvslurm.a))
# `vhpc history --since`: ages, dates and times.
$(eval $(call unit_test,unit-since,tests/scheduler/test_since.c scheduler/cli/since.c))
