/* PCI for devices: one host bridge with bus 0, config space through
 * 0xCF8/0xCFC and ECAM, BARs allocated at start (like firmware would) and
 * followed when the guest moves them, MSI-X.  A device fills a struct
 * pci_dev (header, capabilities, BARs) and calls pci_register. */
#ifndef HV_PCI_H
#define HV_PCI_H

#include "lib/err.h"
#include "vm.h"

#define PCI_CFG_SIZE      4096
#define PCI_MAX_SLOTS     32
#define PCI_VENDOR_REDHAT_QUMRANET 0x1af4

/* Config space offsets. */
#define PCI_VENDOR_ID     0x00
#define PCI_DEVICE_ID     0x02
#define PCI_COMMAND       0x04
#define PCI_STATUS        0x06
#define PCI_REVISION      0x08
#define PCI_CLASS_PROG    0x09
#define PCI_HEADER_TYPE   0x0e
#define PCI_BAR0          0x10
#define PCI_SUBSYS_VENDOR 0x2c
#define PCI_SUBSYS_ID     0x2e
#define PCI_CAP_PTR       0x34
#define PCI_INT_LINE      0x3c
#define PCI_INT_PIN       0x3d

#define PCI_CMD_IO        0x1
#define PCI_CMD_MEM       0x2
#define PCI_CMD_MASTER    0x4
#define PCI_CMD_INTX_OFF  0x400
#define PCI_STATUS_CAPS   0x10

#define PCI_CAP_MSIX      0x11
#define PCI_CAP_VENDOR    0x09

/* BAR flags for pci_add_bar. */
#define PCI_BAR_64        1u
#define PCI_BAR_PREFETCH  2u
#define PCI_BAR_HIGH      4u   /* place in the 64-bit window above RAM */
#define PCI_BAR_RAM       8u   /* no MMIO handlers: the device maps memory itself */

struct pci_dev;

struct pci_dev_ops {
	/* MMIO on a BAR (not the MSI-X table/PBA, which pci.c handles). */
	void (*bar_read)(struct pci_dev *d, int bar, uint64_t off, void *data, unsigned len);
	void (*bar_write)(struct pci_dev *d, int bar, uint64_t off, const void *data, unsigned len);
	/* Called after a BAR appears at addr (mapped) or goes away. */
	void (*bar_map)(struct pci_dev *d, int bar, uint64_t addr, bool mapped);
	/* Device-specific config registers: cfg_read returns true when it
	 * produced *val; cfg_write runs after the generic write. */
	bool (*cfg_read)(struct pci_dev *d, unsigned off, unsigned len, uint32_t *val);
	void (*cfg_write)(struct pci_dev *d, unsigned off, unsigned len, uint32_t val);
};

struct pci_bar {
	struct pci_dev *dev;       /* back pointers for the MMIO handlers */
	int idx;
	uint64_t size;             /* 0: unused */
	unsigned flags;
	bool mapped;
	uint64_t mapped_addr;
};

struct msix_vec {
	uint32_t addr_lo, addr_hi, data, ctrl;
	bool pending;
	int gsi, irqfd;            /* -1: not yet / no irqfd */
	uint64_t r_addr;           /* what the GSI route points at */
	uint32_t r_data;
	bool routed;
};

/* An eventfd another process writes to interrupt a vector (vhost-user's
 * call fd), handed to KVM as a second irqfd of the vector's GSI. */
struct msix_bound {
	int fd;
	unsigned vec;
	int gsi;                   /* the GSI it is assigned to while assigned */
	bool assigned;
};

#define PCI_MSIX_BOUND_MAX 64

struct pci_msix {
	unsigned n;                /* table size; 0: no MSI-X */
	int bar;
	uint32_t table_off, pba_off;
	unsigned cap;              /* config-space offset of the capability */
	pthread_mutex_t lock;
	struct msix_vec *v;
	struct msix_bound bound[PCI_MSIX_BOUND_MAX];
	unsigned nbound;
};

struct pci_dev {
	struct vm *vm;
	char name[24];
	int slot;                  /* device number on bus 0 */
	uint8_t cfg[PCI_CFG_SIZE];
	uint8_t wmask[PCI_CFG_SIZE];
	unsigned last_cap, last_cap_len;
	struct pci_bar bar[6];
	struct pci_msix msix;
	const struct pci_dev_ops *ops;
	void *opaque;
};

/* Header type 0 with the given IDs; capabilities list enabled. */
void pci_dev_init(struct pci_dev *d, struct vm *vm, const char *name, uint16_t vendor, uint16_t device,
		  uint8_t revision, uint32_t class_code, uint16_t subsys_vendor, uint16_t subsys_id);
/* size must be a power of two (at least 16; 4096 for PCI_BAR_RAM). */
void pci_add_bar(struct pci_dev *d, int bar, uint64_t size, unsigned flags);
/* Appends a capability of len bytes (id, next pointer filled); returns its
 * config-space offset. */
unsigned pci_add_cap(struct pci_dev *d, uint8_t id, unsigned len);
/* MSI-X with n vectors, table and PBA inside BAR `bar`. */
int pci_add_msix(struct pci_dev *d, unsigned n, int bar, uint32_t table_off, uint32_t pba_off);
/* Puts the device on bus 0, gives its BARs addresses and maps them. */
int pci_register(struct vm *vm, struct pci_dev *d, struct verr *err);
void pci_unregister(struct pci_dev *d);
void pci_dev_free(struct pci_dev *d);

/* Interrupts vector vec; false when MSI-X is off (the caller may use
 * INTx; vhpc-hv's devices have none).  Masked vectors become pending. */
bool pci_msix_notify(struct pci_dev *d, unsigned vec);
bool pci_msix_enabled(struct pci_dev *d);
/* Lets eventfd fd interrupt vector vec without vhpc-hv: KVM_IRQFD binds it
 * to the vector's GSI whenever the vector can deliver (MSI-X on, function
 * and vector unmasked, an interrupt address), with the GSI's route kept
 * equal to the table entry; otherwise it is unbound, its count waits in
 * the eventfd, and KVM delivers that count when the fd is bound again
 * (KVM polls an irqfd as it assigns it), which is what a masked vector's
 * pending bit would have done.  The PBA does not show such a pending
 * count.  -1 without KVM irqfds (or out of GSIs): the caller must read fd
 * itself and call pci_msix_notify. */
int pci_msix_bind_eventfd(struct pci_dev *d, unsigned vec, int fd);
void pci_msix_unbind_eventfd(struct pci_dev *d, int fd);

/* Config access by bus/device/function (for the fuzzer and tests). */
void pci_cfg_access(struct vm *vm, unsigned bdf, unsigned off, void *data, unsigned len, bool write);
/* The devices on the bus, for tests: slot -> device or NULL. */
struct pci_dev *pci_slot(struct vm *vm, int slot);
/* The BAR's current guest address (from config space). */
uint64_t pci_bar_addr(const struct pci_dev *d, int bar);

static inline void pci_w8(struct pci_dev *d, unsigned off, uint8_t v) { d->cfg[off] = v; }
static inline void pci_w16(struct pci_dev *d, unsigned off, uint16_t v) { d->cfg[off] = (uint8_t)v; d->cfg[off + 1] = (uint8_t)(v >> 8); }
static inline void pci_w32(struct pci_dev *d, unsigned off, uint32_t v) { pci_w16(d, off, (uint16_t)v); pci_w16(d, off + 2, (uint16_t)(v >> 16)); }
static inline uint16_t pci_r16(const struct pci_dev *d, unsigned off) { return (uint16_t)(d->cfg[off] | d->cfg[off + 1] << 8); }
static inline uint32_t pci_r32(const struct pci_dev *d, unsigned off) { return pci_r16(d, off) | (uint32_t)pci_r16(d, off + 2) << 16; }

#endif
