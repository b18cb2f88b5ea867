/* vCPU and VM state between KVM and a snapshot section: every vCPU's
 * registers, FPU/XSAVE and XCRs, the MSRs KVM lists, LAPIC, pending
 * events, debug registers and MP state; the in-kernel PICs, IOAPIC, PIT
 * and KVM clock.  KVM's own structures are stored as KVM gives them: the
 * snapshot's header pins the host type (snapshot.h), and the parse
 * checks each size and count before anything is used. */
#include "lib/err.h"
#include "snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_IA32_TSC_DEADLINE 0x6e0

#define GET(fd, req, p, what)                                                  \
	do {                                                                   \
		if (ioctl(fd, req, p) < 0)                                     \
			return verr_errno(err, "vCPU %d: " what, i);           \
	} while (0)

int snap_get_vcpu(struct vm *vm, int i, struct snap_buf *b, struct verr *err)
{
	const struct snap_host *h = vm->snaph;
	int fd = vm->vcpu[i].fd;
	struct snap_vcpu v;
	struct kvm_msrs *m;
	struct kvm_xsave *xs;
	int n;

	memset(&v, 0, sizeof(v));
	GET(fd, KVM_GET_REGS, &v.regs, "KVM_GET_REGS");
	GET(fd, KVM_GET_SREGS, &v.sregs, "KVM_GET_SREGS");
	GET(fd, KVM_GET_XCRS, &v.xcrs, "KVM_GET_XCRS");
	GET(fd, KVM_GET_LAPIC, &v.lapic, "KVM_GET_LAPIC");
	GET(fd, KVM_GET_VCPU_EVENTS, &v.events, "KVM_GET_VCPU_EVENTS");
	GET(fd, KVM_GET_DEBUGREGS, &v.debugregs, "KVM_GET_DEBUGREGS");
	GET(fd, KVM_GET_MP_STATE, &v.mp, "KVM_GET_MP_STATE");
	sb_put(b, &v.regs, sizeof(v.regs));
	sb_put(b, &v.sregs, sizeof(v.sregs));
	sb_put(b, &v.xcrs, sizeof(v.xcrs));
	sb_put(b, &v.lapic, sizeof(v.lapic));
	sb_put(b, &v.events, sizeof(v.events));
	sb_put(b, &v.debugregs, sizeof(v.debugregs));
	sb_put(b, &v.mp, sizeof(v.mp));

	xs = calloc(1, h->xsave_size);
	if (!xs)
		return verr_set(err, "out of memory");
	if (ioctl(fd, h->xsave_size > sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE, xs) < 0) {
		free(xs);
		return verr_errno(err, "vCPU %d: KVM_GET_XSAVE", i);
	}
	sb_u32(b, h->xsave_size);
	sb_put(b, xs, h->xsave_size);
	free(xs);

	m = calloc(1, sizeof(*m) + h->nmsrs * sizeof(struct kvm_msr_entry));
	if (!m)
		return verr_set(err, "out of memory");
	m->nmsrs = h->nmsrs;
	for (uint32_t k = 0; k < h->nmsrs; k++)
		m->entries[k].index = h->msr[k];
	n = ioctl(fd, KVM_GET_MSRS, m);
	if (n < 0 || (uint32_t)n != h->nmsrs) {
		uint32_t bad = n >= 0 && (uint32_t)n < h->nmsrs ? h->msr[n] : 0;

		free(m);
		if (n < 0)
			return verr_errno(err, "vCPU %d: KVM_GET_MSRS", i);
		return verr_set(err, "vCPU %d: KVM_GET_MSRS stopped at MSR 0x%x", i, bad);
	}
	sb_u32(b, h->nmsrs);
	for (uint32_t k = 0; k < h->nmsrs; k++) {
		sb_u32(b, m->entries[k].index);
		sb_u64(b, m->entries[k].data);
	}
	free(m);
	return b->oom ? verr_set(err, "out of memory") : 0;
}
#undef GET

int snap_parse_vcpu(const struct vm *vm, struct snap_rd *r, struct snap_vcpu *v, struct verr *err)
{
	const struct snap_host *h = vm->snaph;
	uint32_t xs, n;

	rd_get(r, &v->regs, sizeof(v->regs));
	rd_get(r, &v->sregs, sizeof(v->sregs));
	rd_get(r, &v->xcrs, sizeof(v->xcrs));
	rd_get(r, &v->lapic, sizeof(v->lapic));
	rd_get(r, &v->events, sizeof(v->events));
	rd_get(r, &v->debugregs, sizeof(v->debugregs));
	rd_get(r, &v->mp, sizeof(v->mp));
	xs = rd_u32(r);
	if (r->bad)
		return verr_set(err, "ends inside the registers");
	if (xs != h->xsave_size)
		return verr_set(err, "XSAVE area of %u bytes, this host's is %u", xs, h->xsave_size);
	if (v->xcrs.nr_xcrs > KVM_MAX_XCRS)
		return verr_set(err, "%u XCRs (at most %d)", v->xcrs.nr_xcrs, KVM_MAX_XCRS);
	/* RUNNABLE, UNINITIALIZED, INIT_RECEIVED, HALTED, SIPI_RECEIVED:
	 * the states an x86 vCPU can be in. */
	if (v->mp.mp_state > KVM_MP_STATE_SIPI_RECEIVED)
		return verr_set(err, "MP state %u is not an x86 one", v->mp.mp_state);
	free(v->xsave);
	v->xsave = malloc(xs);
	if (!v->xsave)
		return verr_set(err, "out of memory");
	rd_get(r, v->xsave, xs);
	n = rd_u32(r);
	if (r->bad)
		return verr_set(err, "ends inside the XSAVE area");
	if (n > h->nmsrs)
		return verr_set(err, "%u MSRs, this host saves %u", n, h->nmsrs);
	v->nmsrs = n;
	for (uint32_t k = 0; k < n; k++) {
		bool known = false;

		v->msr[k] = (struct kvm_msr_entry){ .index = rd_u32(r) };
		v->msr[k].data = rd_u64(r);
		if (r->bad)
			return verr_set(err, "ends inside MSR %u of %u", k, n);
		for (uint32_t j = 0; j < h->nmsrs && !known; j++)
			known = h->msr[j] == v->msr[k].index;
		if (!known)
			return verr_set(err, "MSR 0x%x is not one KVM saves here", v->msr[k].index);
	}
	if (!rd_done(r))
		return verr_set(err, "%zu bytes after the MSRs", r->len - r->off);
	return 0;
}

#define SET(req, p, what)                                                      \
	do {                                                                   \
		if (ioctl(fd, req, p) < 0)                                     \
			return verr_errno(err, "vCPU %d: " what, i);           \
	} while (0)

/* The TSC-deadline timer's MSR once more, after the LAPIC: KVM ignores a
 * write of it unless the LAPIC timer is in TSC-deadline mode, which it is
 * not before KVM_SET_LAPIC, so the MSRs' write dropped the deadline a
 * guest had armed when it was saved, and a restored guest idle on that
 * timer (a 1-vCPU guest asleep in nanosleep) could wait forever: lab runs
 * of kvm-ckpt.t stood still after their restart, now and then. */
static int set_tsc_deadline(int fd, int i, const struct snap_vcpu *v, struct verr *err)
{
	union {
		struct kvm_msrs h;
		uint8_t b[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
	} one;

	for (uint32_t k = 0; k < v->nmsrs; k++) {
		if (v->msr[k].index != MSR_IA32_TSC_DEADLINE)
			continue;
		memset(&one, 0, sizeof(one));
		one.h.nmsrs = 1;
		one.h.entries[0] = v->msr[k];
		if (ioctl(fd, KVM_SET_MSRS, &one) != 1)
			return verr_set(err, "vCPU %d: KVM_SET_MSRS: the TSC deadline 0x%llx, after the LAPIC, was refused",
					i, (unsigned long long)v->msr[k].data);
	}
	return 0;
}

/* In the order KVM needs: sregs (APIC base, modes) before the LAPIC and
 * MSRs, events after the LAPIC they may target; the TSC deadline after
 * the LAPIC too (set_tsc_deadline). */
int snap_set_vcpu(struct vm *vm, int i, const struct snap_vcpu *v, struct verr *err)
{
	int fd = vm->vcpu[i].fd, n;
	struct kvm_msrs *m;
	struct kvm_vcpu_events ev = v->events;

	/* KVM_GET_VCPU_EVENTS leaves these flags out; the fields are there. */
	ev.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR;
	SET(KVM_SET_REGS, &v->regs, "KVM_SET_REGS");
	SET(KVM_SET_XSAVE, v->xsave, "KVM_SET_XSAVE");
	SET(KVM_SET_XCRS, &v->xcrs, "KVM_SET_XCRS");
	SET(KVM_SET_SREGS, &v->sregs, "KVM_SET_SREGS");
	m = calloc(1, sizeof(*m) + v->nmsrs * sizeof(struct kvm_msr_entry));
	if (!m)
		return verr_set(err, "out of memory");
	m->nmsrs = v->nmsrs;
	memcpy(m->entries, v->msr, v->nmsrs * sizeof(struct kvm_msr_entry));
	n = ioctl(fd, KVM_SET_MSRS, m);
	free(m);
	if (n < 0)
		return verr_errno(err, "vCPU %d: KVM_SET_MSRS", i);
	if ((uint32_t)n != v->nmsrs)
		return verr_set(err, "vCPU %d: KVM refused MSR 0x%x = 0x%llx", i, v->msr[n].index,
				(unsigned long long)v->msr[n].data);
	SET(KVM_SET_MP_STATE, &v->mp, "KVM_SET_MP_STATE");
	SET(KVM_SET_LAPIC, &v->lapic, "KVM_SET_LAPIC");
	if (set_tsc_deadline(fd, i, v, err) < 0)
		return -1;
	SET(KVM_SET_VCPU_EVENTS, &ev, "KVM_SET_VCPU_EVENTS");
	SET(KVM_SET_DEBUGREGS, &v->debugregs, "KVM_SET_DEBUGREGS");
	return 0;
}
#undef SET

int snap_get_vm(struct vm *vm, struct snap_buf *b, struct verr *err)
{
	struct kvm_irqchip chip;
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;

	for (uint32_t c = 0; c < 3; c++) {
		memset(&chip, 0, sizeof(chip));
		chip.chip_id = c;
		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chip) < 0)
			return verr_errno(err, "KVM_GET_IRQCHIP %u", c);
		sb_put(b, &chip, sizeof(chip));
	}
	if (ioctl(vm->vm_fd, KVM_GET_PIT2, &pit) < 0)
		return verr_errno(err, "KVM_GET_PIT2");
	sb_put(b, &pit, sizeof(pit));
	memset(&clock, 0, sizeof(clock));
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock) < 0)
		return verr_errno(err, "KVM_GET_CLOCK");
	sb_put(b, &clock, sizeof(clock));
	return b->oom ? verr_set(err, "out of memory") : 0;
}

int snap_parse_vm(struct snap_rd *r, struct snap_state *st, struct verr *err)
{
	for (uint32_t c = 0; c < 3; c++) {
		rd_get(r, &st->chip[c], sizeof(st->chip[c]));
		if (!r->bad && st->chip[c].chip_id != c)
			return verr_set(err, "interrupt controller %u says it is chip %u", c, st->chip[c].chip_id);
	}
	rd_get(r, &st->pit, sizeof(st->pit));
	rd_get(r, &st->clock, sizeof(st->clock));
	if (!rd_done(r))
		return verr_set(err, "%zu bytes where the irqchip, PIT and clock take %zu", r->len,
				3 * sizeof(st->chip[0]) + sizeof(st->pit) + sizeof(st->clock));
	if (st->pit.flags & ~(uint32_t)(KVM_PIT_FLAGS_HPET_LEGACY | KVM_PIT_FLAGS_SPEAKER_DATA_ON))
		return verr_set(err, "PIT flags 0x%x", st->pit.flags);
	for (int c = 0; c < 3; c++)
		/* 0xff: a channel never programmed, as KVM resets it. */
		if ((st->pit.channels[c].mode > 5 && st->pit.channels[c].mode != 0xff) || st->pit.channels[c].rw_mode > 3)
			return verr_set(err, "PIT channel %d: mode %u, access %u", c, st->pit.channels[c].mode,
					st->pit.channels[c].rw_mode);
	return 0;
}

int snap_set_vm(struct vm *vm, const struct snap_state *st, struct verr *err)
{
	struct kvm_clock_data clock = { .clock = st->clock.clock };

	for (int c = 0; c < 3; c++)
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &st->chip[c]) < 0)
			return verr_errno(err, "KVM_SET_IRQCHIP %d", c);
	if (ioctl(vm->vm_fd, KVM_SET_PIT2, &st->pit) < 0)
		return verr_errno(err, "KVM_SET_PIT2");
	/* The guest's clock goes on from where it stopped: the time it was
	 * saved does not pass for it. */
	if (ioctl(vm->vm_fd, KVM_SET_CLOCK, &clock) < 0)
		return verr_errno(err, "KVM_SET_CLOCK");
	return 0;
}
