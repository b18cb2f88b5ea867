# vhpc-guestd: the guest agent (guest/PROTOCOL.md).
GUESTD_SRCS := guest/main.c guest/opts.c guest/proto.c guest/info.c guest/spawn.c guest/session.c guest/detached.c
$(eval $(call program,vhpc-guestd,$(GUESTD_SRCS),))

# The kvm guests' initramfs /init, where the image builder finds it (the
# build dir mirrors an installed prefix: bin/, lib/, share/).
$(B)/share/vhpc/initramfs-init: guest/initramfs/init
	@mkdir -p $(@D)
	$(Q)install -m 0755 $< $@
EXTRA_ALL += $(B)/share/vhpc/initramfs-init

# vhpc-sysexec: static, so that it runs in any image; an imported image's
# /usr/local/bin/vhpc-guestd and vhpc-rsh (images/oci.c).
$(B)/bin/vhpc-sysexec: guest/sysexec.c
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(filter-out -MMD -MP -g,$(CFLAGS)) -static -s -o $@ $<
EXTRA_ALL += $(B)/bin/vhpc-sysexec
INSTALL_BIN += $(B)/bin/vhpc-sysexec
