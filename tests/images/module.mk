# Tests of node images (images/): manifests written and read, pulls into a
# node's cache; the manifest parser's fuzzer (manifests come over the network).
$(eval $(call unit_test,unit-images,tests/images/test_manifest.c,$(B)/lib/libimages.a))
$(eval $(call fuzzer,fuzz-image-manifest,tests/images/fuzz_manifest.c $(IMAGES_SRCS)))
# Registry pulls: references and manifests a registry sends, checked (unit,
# fuzz), and the throttling, counting relay the registry tests put in front
# of their registry.
$(eval $(call unit_test,unit-image-registry,tests/images/test_registry.c,$(B)/lib/libimages.a))
$(eval $(call fuzzer,fuzz-image-registry,tests/images/fuzz_registry.c images/registry_ref.c))
$(B)/testbin/relay: $(B)/obj/tests/images/relay.o
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lpthread
EXTRA_ALL += $(B)/testbin/relay
EXTRA_TESTS += $(B)/testbin/relay
