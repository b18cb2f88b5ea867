/* Test-guest kit: PCI (ECAM from the MCFG table, or 0xCF8/0xCFC), BARs,
 * capabilities, MSI-X, and a minimal virtio 1.x driver (modern PCI
 * transport, split queues, direct or indirect chains).  Everything is
 * polled or interrupt-driven through the kit's IDT; memory for rings and
 * buffers comes from a bump allocator (identity-mapped, so guest-physical
 * equals virtual). */
#ifndef KIT_VIRTIO_H
#define KIT_VIRTIO_H

#include "kit.h"

/* ------------------------------------------------------------------ PCI */
uint64_t pci_ecam(void);                  /* from MCFG; 0 if none */
/* Config access through ECAM (use_cf8 false) or 0xCF8/0xCFC. */
uint32_t pci_read(int slot, unsigned off, unsigned len);
void pci_write(int slot, unsigned off, unsigned len, uint32_t v);
extern bool pci_use_cf8;
int pci_find(uint16_t vendor, uint16_t device, int from_slot);   /* slot or -1 */
uint64_t pci_bar(int slot, int bar);      /* memory BAR address (64-bit aware) */
uint64_t pci_bar_size(int slot, int bar); /* by the usual all-ones probe */
unsigned pci_cap(int slot, uint8_t id, unsigned from);   /* offset or 0 */
/* MSI-X: enable with every vector aimed at this CPU, vector base+i. */
int msix_enable(int slot, int nvec, int base_vector);

/* Identity-maps [gpa, gpa+size) above 4 GiB with 2 MiB pages. */
void map_high(uint64_t gpa, uint64_t size);

void *kalloc(size_t size, size_t align);  /* zeroed, never freed */

/* --------------------------------------------------------------- virtio */
struct vring_desc { uint64_t addr; uint32_t len; uint16_t flags, next; };
#define VRING_DESC_F_NEXT 1
#define VRING_DESC_F_WRITE 2
#define VRING_DESC_F_INDIRECT 4

struct kvq {
	int idx;
	uint16_t size;
	struct vring_desc *desc;
	volatile uint16_t *avail;        /* flags, idx, ring[], used_event */
	volatile uint16_t *used;         /* flags, idx, elems..., avail_event */
	uint16_t next_desc, avail_idx, last_used;
	uint64_t notify;                 /* MMIO address to write the index to */
	volatile int irqs;
};

struct kvdev {
	int slot;
	uint64_t bar;
	uint64_t common, isr, devcfg, notify_base;
	uint32_t notify_mult;
	uint64_t features;               /* negotiated */
	int nq;
	struct kvq q[20];
};

struct kbuf { void *p; uint32_t len; bool write; };

/* Finds device 0x1040+type (the n-th one), parses the capabilities and
 * negotiates want & offered (VERSION_1 always).  0 on success. */
int vdev_open(struct kvdev *d, unsigned type, int nth, uint64_t want);
uint64_t vdev_offered(struct kvdev *d);
/* Queue qi with size entries (0: the device's maximum) and MSI-X vector
 * vec (0xffff: none).  Returns 0, or -1 if the device refused. */
int vq_setup_(struct kvdev *d, int qi, uint16_t size, uint16_t vec);
void vdev_driver_ok(struct kvdev *d);
uint8_t vdev_status(struct kvdev *d);
void vdev_reset(struct kvdev *d);
/* Adds a direct chain (or one indirect descriptor when indirect is set);
 * returns its head.  Publishes it (avail idx) but does not notify. */
int vq_add(struct kvq *q, const struct kbuf *b, int n, bool indirect);
void vq_kick(struct kvq *q);
/* Next used element: its head, and *len; -1 if none yet. */
int vq_get(struct kvq *q, uint32_t *len);
/* Waits (hlt, interrupts on) until a used element arrives or spins run out. */
int vq_wait(struct kvq *q, uint32_t *len, uint64_t spins);
/* The same over n queues; *which (if not NULL) says whose element it is. */
int vq_wait_any(struct kvq *const *qs, int n, uint32_t *len, uint64_t spins, int *which);
uint8_t vcfg8(struct kvdev *d, unsigned off);
uint16_t vcfg16(struct kvdev *d, unsigned off);
uint32_t vcfg32(struct kvdev *d, unsigned off);
uint64_t vcfg64(struct kvdev *d, unsigned off);
/* Raw ring access for hostile-chain tests: write descriptor i of q and
 * publish head h. */
void vq_raw_desc(struct kvq *q, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next);
void vq_raw_publish(struct kvq *q, uint16_t head);

/* MSI-X interrupt counters per vector (0x50 + i). */
#define VIRTIO_VEC_BASE 0x50
extern volatile int msix_hits[32];
void msix_handlers_install(int n);

/* Test data both sides can regenerate: byte at offset o for a seed
 * (tests/hv/tools/hvt.c uses the same formula). */
static inline uint8_t pattern_byte(uint64_t o, unsigned seed)
{
	uint32_t x = (uint32_t)o * 2654435761u + seed * 40503u + (uint32_t)(o >> 32);

	return (uint8_t)(x >> 24 ^ x >> 11);
}

static inline uint8_t mmio_read8(uint64_t a) { return *(volatile uint8_t *)a; }
static inline void mmio_write8(uint64_t a, uint8_t v) { *(volatile uint8_t *)a = v; }
static inline uint16_t mmio_read16(uint64_t a) { return *(volatile uint16_t *)a; }
static inline void mmio_write16(uint64_t a, uint16_t v) { *(volatile uint16_t *)a = v; }
static inline uint64_t mmio_read64(uint64_t a) { return *(volatile uint64_t *)a; }
static inline void mmio_write64(uint64_t a, uint64_t v) { *(volatile uint64_t *)a = v; }
static inline void outl(uint16_t p, uint32_t v) { __asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(p)); }
static inline uint32_t inl(uint16_t p) { uint32_t v; __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(p)); return v; }
static inline void outw(uint16_t p, uint16_t v) { __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(p)); }
static inline uint16_t inw(uint16_t p) { uint16_t v; __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(p)); return v; }
static inline void mb_(void) { __asm__ volatile("mfence" ::: "memory"); }

#endif
