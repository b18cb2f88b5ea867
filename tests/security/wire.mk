# tests/security: helper programs of the wire's attacks (hole 3, and munge
# in hole 4): a man in the middle and a connection flood, both ignorant of
# the wire's framing, so each attack runs against any version of it.
WIRE_SEC_PROGS := $(B)/testbin/wirerelay $(B)/testbin/connflood

$(WIRE_SEC_PROGS): $(B)/testbin/%: $(B)/obj/tests/security/%.o $(B)/lib/libvhpc.a
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(B)/lib/libvhpc.a $(LIBVHPC_LIBS)

EXTRA_ALL += $(WIRE_SEC_PROGS)
EXTRA_TESTS += $(WIRE_SEC_PROGS)
