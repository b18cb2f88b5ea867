/* CPUID for each vCPU: what KVM supports, with the hypervisor bit, features
 * the user hid, and one topology (sockets/cores/threads) told the same way
 * in every leaf a guest may read it from: 0x1, 0x4, 0xB, 0x1F, 0x80000008,
 * 0x8000001D and 0x8000001E.  The APIC IDs are the ones MADT and SRAT carry
 * (seed 001: a guest scheduler needs a topology it can trust). */
#include "lib/err.h"
#include "vm.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MAX_ENT 256

static struct kvm_cpuid_entry2 *find(struct kvm_cpuid2 *c, uint32_t fn, uint32_t idx)
{
	for (uint32_t i = 0; i < c->nent; i++)
		if (c->entries[i].function == fn && c->entries[i].index == idx)
			return &c->entries[i];
	return NULL;
}

static void drop(struct kvm_cpuid2 *c, uint32_t fn)
{
	uint32_t o = 0;

	for (uint32_t i = 0; i < c->nent; i++)
		if (c->entries[i].function != fn)
			c->entries[o++] = c->entries[i];
	c->nent = o;
}

static struct kvm_cpuid_entry2 *add(struct kvm_cpuid2 *c, uint32_t fn, uint32_t idx, uint32_t flags)
{
	struct kvm_cpuid_entry2 *e;

	if (c->nent >= MAX_ENT)
		return NULL;
	e = &c->entries[c->nent++];
	memset(e, 0, sizeof(*e));
	e->function = fn;
	e->index = idx;
	e->flags = flags;
	return e;
}

/* Leaves 0xB and 0x1F: SMT level, then core level, then the invalid level. */
static int ext_topology(struct kvm_cpuid2 *c, uint32_t fn, const struct hv_plan *p, uint32_t apic)
{
	struct kvm_cpuid_entry2 *e;

	drop(c, fn);
	for (uint32_t i = 0; i < 3; i++) {
		e = add(c, fn, i, KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
		if (!e)
			return -1;
		e->edx = apic;
		if (i == 0) {
			e->eax = (uint32_t)p->thread_bits;
			e->ebx = (uint32_t)p->threads;
			e->ecx = (1u << 8) | i;
		} else if (i == 1) {
			e->eax = (uint32_t)(p->thread_bits + p->core_bits);
			e->ebx = (uint32_t)(p->threads * p->cores);
			e->ecx = (2u << 8) | i;
		} else {
			e->ecx = i;
		}
	}
	return 0;
}

/* Cache descriptors (leaf 4 and AMD 0x8000001D share a layout): L1/L2 are
 * per core, L3 per socket. */
static void cache_sharing(struct kvm_cpuid_entry2 *e, const struct hv_plan *p, bool leaf4)
{
	uint32_t level = (e->eax >> 5) & 7, sharing;

	if ((e->eax & 0x1f) == 0)
		return;
	sharing = level >= 3 ? (uint32_t)(p->cores * p->threads) : (uint32_t)p->threads;
	e->eax &= ~(0xfffu << 14);
	e->eax |= ((sharing - 1) & 0xfff) << 14;
	if (leaf4) {
		e->eax &= ~(0x3fu << 26);
		e->eax |= (((uint32_t)p->cores - 1) & 0x3f) << 26;
	}
}

int cpuid_setup(struct vm *vm, struct vcpu *vc, struct verr *err)
{
	const struct hv_plan *p = vm->plan;
	struct kvm_cpuid2 *c;
	struct kvm_cpuid_entry2 *e;
	uint32_t apic = vc->apic_id, lps = (uint32_t)(p->cores * p->threads);
	bool amd;
	int r;

	c = calloc(1, sizeof(*c) + MAX_ENT * sizeof(struct kvm_cpuid_entry2));
	if (!c)
		return verr_set(err, "out of memory");
	c->nent = vm->supported_cpuid->nent;
	memcpy(c->entries, vm->supported_cpuid->entries, c->nent * sizeof(c->entries[0]));

	e = find(c, 0, 0);
	amd = e && e->ebx == 0x68747541;   /* "Auth"enticAMD */
	if (e && e->eax < 0x1f)
		e->eax = 0x1f;

	if ((e = find(c, 1, 0))) {
		e->ebx = (e->ebx & 0x0000ffff) | ((apic & 0xff) << 24) | ((lps > 255 ? 255 : lps) << 16);
		e->ecx |= 1u << 31;                    /* hypervisor */
		e->ecx &= ~(uint32_t)p->hide_ecx1;
		if (p->hide_ecx1 & (1 << 26))
			e->ecx &= ~(1u << 27);         /* no OSXSAVE without XSAVE */
		e->edx &= ~(uint32_t)p->hide_edx1;
		if (lps > 1)
			e->edx |= 1u << 28;            /* HTT: more than one logical CPU per package */
		else
			e->edx &= ~(1u << 28);
	}
	if ((e = find(c, 7, 0)))
		e->ebx &= ~(uint32_t)p->hide_ebx7;

	/* Leaf 4: Intel fills it; on AMD KVM leaves it empty, so it is built
	 * from 0x8000001D, which has the same layout. */
	e = find(c, 4, 0);
	if (!e || (e->eax & 0x1f) == 0) {
		drop(c, 4);
		for (uint32_t i = 0; i < 8; i++) {
			struct kvm_cpuid_entry2 *s = find(c, 0x8000001d, i), *d;

			d = add(c, 4, i, KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
			if (!d)
				break;
			if (s) {
				d->eax = s->eax;
				d->ebx = s->ebx;
				d->ecx = s->ecx;
				d->edx = s->edx;
			}
			if (!s || (s->eax & 0x1f) == 0)
				break;
		}
	}
	for (uint32_t i = 0; i < c->nent; i++) {
		if (c->entries[i].function == 4)
			cache_sharing(&c->entries[i], p, true);
		if (c->entries[i].function == 0x8000001d)
			cache_sharing(&c->entries[i], p, false);
	}
	if (ext_topology(c, 0xb, p, apic) < 0 || ext_topology(c, 0x1f, p, apic) < 0) {
		free(c);
		return verr_set(err, "too many CPUID entries");
	}
	if ((e = find(c, 0x80000008, 0))) {
		e->ecx &= ~0xf0ffu;
		e->ecx |= (lps - 1) & 0xff;
		e->ecx |= (uint32_t)((p->core_bits + p->thread_bits) & 0xf) << 12;
	}
	if (amd) {
		if (!(e = find(c, 0x8000001e, 0)) && !(e = add(c, 0x8000001e, 0, 0))) {
			free(c);
			return verr_set(err, "too many CPUID entries");
		}
		e->eax = apic;
		e->ebx = (((uint32_t)p->threads - 1) << 8) | ((apic >> p->thread_bits) & 0xff);
		e->ecx = (uint32_t)p->vcpu_node[vc->idx] & 0xff;   /* one node per processor */
		e->edx = 0;
	}
	r = ioctl(vc->fd, KVM_SET_CPUID2, c);
	free(c);
	if (r < 0)
		return verr_errno(err, "KVM_SET_CPUID2 on vCPU %d", vc->idx);
	return 0;
}
