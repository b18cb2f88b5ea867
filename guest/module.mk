# vhpc-guestd: the guest agent (guest/PROTOCOL.md).
GUESTD_SRCS := guest/main.c guest/opts.c guest/proto.c guest/info.c guest/spawn.c guest/session.c guest/detached.c
$(eval $(call program,vhpc-guestd,$(GUESTD_SRCS),))
