# Node images (images/images.h): built, stored and verified here; the node
# agent starts guests from them and the vhpc CLI builds and lists them.
IMAGES_SRCS := $(sort $(wildcard images/*.c))
$(eval $(call library,images,$(IMAGES_SRCS)))
