# Unit tests of libvhpc (lib/).
$(eval $(call unit_test,unit-config,tests/unit/test_config.c))
$(eval $(call unit_test,unit-util,tests/unit/test_util.c))
$(eval $(call unit_test,unit-argv,tests/unit/test_argv.c))
$(eval $(call unit_test,unit-chan,tests/unit/test_chan.c))
$(eval $(call unit_test,unit-wire,tests/unit/test_wire.c tests/cluster/wireframe.c))
$(eval $(call unit_test,unit-gexec,tests/unit/test_gexec.c))
$(eval $(call unit_test,unit-binds,tests/unit/test_binds.c))
$(eval $(call unit_test,unit-fabric,tests/unit/test_fabric.c))
