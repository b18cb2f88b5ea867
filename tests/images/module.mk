# Tests of node images (images/): manifests written and read, pulls into a
# node's cache; the manifest parser's fuzzer (manifests come over the network).
$(eval $(call unit_test,unit-images,tests/images/test_manifest.c,$(B)/lib/libimages.a))
$(eval $(call fuzzer,fuzz-image-manifest,tests/images/fuzz_manifest.c $(IMAGES_SRCS)))
# Signed images: keys, signatures, the node's policy; the signatures file's fuzzer.
$(eval $(call unit_test,unit-image-sign,tests/images/test_sign.c,$(B)/lib/libimages.a))
$(eval $(call fuzzer,fuzz-image-sigs,tests/images/fuzz_sigs.c $(IMAGES_SRCS)))
