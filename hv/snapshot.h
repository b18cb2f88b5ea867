/* VM snapshots (hv/README.md, "Snapshots"): the file format, its writer
 * and its reader, and what devices implement to save and load their own
 * state.  The reader is split in two: snap_load parses and validates the
 * whole file (every length, index, address and count) and loads RAM and
 * device state, with or without KVM, so the fuzzer runs it on a VM
 * without KVM; snap_apply_kvm then hands the checked vCPU and irqchip
 * state to KVM. */
#ifndef HV_SNAPSHOT_H
#define HV_SNAPSHOT_H

#include "vm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC "VHPCSNAP"
#define SNAP_VERSION 1
#define SNAP_HEADER_SIZE 128
#define SNAP_SECTION_HDR 24
#define SNAP_PAGE 4096ull
#define SNAP_MAX_MSRS 512

/* Section tags (four characters, little-endian in the file). */
#define SNAP_TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define SNAP_CONF SNAP_TAG('C', 'O', 'N', 'F')   /* the machine's fingerprint */
#define SNAP_VMST SNAP_TAG('V', 'M', 'S', 'T')   /* irqchip, PIT, KVM clock */
#define SNAP_VCPU SNAP_TAG('V', 'C', 'P', 'U')   /* one per vCPU, index = vCPU */
#define SNAP_RAM  SNAP_TAG('R', 'A', 'M', ' ')   /* extents of RAM holding data */
#define SNAP_DEV  SNAP_TAG('D', 'E', 'V', ' ')   /* one per device instance: name, then its state */
#define SNAP_END  SNAP_TAG('E', 'N', 'D', ' ')

/* What the host must share with the one that saved: KVM hands back its
 * own structures (XSAVE layout, MSR list, CPUID the guest saw). */
struct snap_host {
	char vendor[13];            /* CPUID 0 */
	uint32_t kvm_api;
	uint32_t xsave_size;        /* KVM_CAP_XSAVE2, or 4096 */
	uint32_t cpuid_crc;         /* crc32c over KVM_GET_SUPPORTED_CPUID */
	uint32_t nmsrs;             /* MSRs each vCPU saves: KVM's list, those it reads */
	uint32_t msrs_crc;
	uint32_t msr[SNAP_MAX_MSRS];
};

uint32_t crc32c(uint32_t crc, const void *p, size_t n);

/* A growing buffer a section is built in; oom is sticky. */
struct snap_buf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};
void sb_put(struct snap_buf *b, const void *p, size_t n);
void sb_u32(struct snap_buf *b, uint32_t v);
void sb_u64(struct snap_buf *b, uint64_t v);
void sb_free(struct snap_buf *b);

/* A cursor over one section's payload; any read past its end sets bad
 * and returns zeros, so a loader checks once at the end. */
struct snap_rd {
	const uint8_t *p;
	size_t len, off;
	bool bad;
};
bool rd_get(struct snap_rd *r, void *dst, size_t n);
uint32_t rd_u32(struct snap_rd *r);
uint64_t rd_u64(struct snap_rd *r);
/* The rest of the payload must have been read. */
bool rd_done(const struct snap_rd *r);

/* Devices with state give HV_DEVICE_SNAP save/load (vm.h): save appends
 * the instance's state to b; load validates everything in r before it
 * changes anything, like a guest's register writes, then applies it. */

/* The host type of this process (vm->snaph, filled by snap_host_init
 * after the vCPUs exist). */
int snap_host_init(struct vm *vm, struct verr *err);
/* The machine's fingerprint, one "key=value" line each (vCPUs, memory,
 * topology, devices): a restore's command line must give the same. */
char *snap_fingerprint(const struct vm *vm);

/* Whether every device of the VM can be saved (the caller's question
 * before it pauses anything); the first that cannot, named, otherwise. */
int snap_check(const struct vm *vm, struct verr *err);

/* Saves the paused VM into fd (an empty regular file open for writing). */
struct snap_stats {
	uint64_t bytes, ram_bytes, ms;
};
int snap_save(struct vm *vm, int fd, struct snap_stats *st, struct verr *err);

/* The checked vCPU and VM state a snapshot holds, to hand to KVM. */
struct snap_vcpu {
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	struct kvm_debugregs debugregs;
	struct kvm_mp_state mp;
	uint32_t nmsrs;
	struct kvm_msr_entry msr[SNAP_MAX_MSRS];
	uint8_t *xsave;             /* host->xsave_size bytes */
};
struct snap_state {
	struct kvm_irqchip chip[3]; /* PIC master, PIC slave, IOAPIC */
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
	int nvcpus;
	struct snap_vcpu *vcpu;
};
/* Parses and checks the whole snapshot in fd against vm (host type,
 * fingerprint, checksums), loads RAM and every device's state, and fills
 * st.  Errors name the section and what is wrong.  Returns SNAP_DAMAGED
 * for a file that is not a whole snapshot as one was written (cut short,
 * a checksum wrong, a section out of place or malformed): no host can
 * restore it.  -1 for the rest: another format version, vhpc version,
 * host type or machine, a device that cannot take its state here, or
 * memory or a read that failed. */
#define SNAP_DAMAGED (-2)
int snap_load(struct vm *vm, int fd, struct snap_state *st, struct verr *err);
int snap_apply_kvm(struct vm *vm, const struct snap_state *st, struct verr *err);
void snap_state_free(struct snap_state *st);

/* vCPU and VM state from and to KVM (snap_kvm.c). */
int snap_get_vcpu(struct vm *vm, int i, struct snap_buf *b, struct verr *err);
int snap_get_vm(struct vm *vm, struct snap_buf *b, struct verr *err);
int snap_parse_vcpu(const struct vm *vm, struct snap_rd *r, struct snap_vcpu *v, struct verr *err);
int snap_parse_vm(struct snap_rd *r, struct snap_state *st, struct verr *err);
int snap_set_vcpu(struct vm *vm, int i, const struct snap_vcpu *v, struct verr *err);
int snap_set_vm(struct vm *vm, const struct snap_state *st, struct verr *err);

#endif
