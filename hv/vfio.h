/* A host PCI function given to the guest through VFIO (dev_vfio.c), and
 * the virtual config space it shows (vfio_cfg.c).  Private to hv/. */
#ifndef HV_VFIO_H
#define HV_VFIO_H

#include "lib/err.h"
#include "pci.h"

#include <stdbool.h>
#include <stdint.h>

/* MSI-X vectors the guest may use: pci.c binds at most
 * PCI_MSIX_BOUND_MAX eventfds per function, one per vector. */
#define VFIO_MAX_VECTORS 64
#define VFIO_MAX_LIVE 16

/* A capability whose body the guest reads from the device itself
 * (vendor-specific, PCI Express): where it sits in the real and in the
 * virtual config space.  Writes to it are dropped. */
struct vfio_live {
	unsigned voff, roff, len;
};

/* What the device's own config space (256 bytes, read once) says. */
struct vfio_real {
	uint8_t cfg[256];
	uint64_t bar_size[6];       /* from VFIO's region info; 0: none */
};

/* The virtual function made from it. */
struct vfio_cfg {
	struct vfio_live live[VFIO_MAX_LIVE];
	int nlive;
	unsigned msix_n;            /* vectors shown (0: no MSI-X) */
	int msix_bar;
	uint32_t msix_table, msix_pba;
	bool bar_io[6], bar_64[6], bar_pref[6];
	int nhidden;                /* capabilities not shown (MSI, PM, ...) */
};

/* Fills d (pci_dev_init, BARs, capabilities, MSI-X) from r: the header's
 * identity is the device's, BARs keep their sizes and types (I/O BARs are
 * not shown), MSI-X is pci.c's emulation with the device's table and PBA
 * places, vendor-specific and PCI Express capabilities are shown and read
 * live, everything else (MSI, power management, extended space) is hidden.
 * Every offset and length in r is the device's word and checked: a loop or
 * an out-of-range pointer in its capability list ends the walk.  -1 when
 * the function cannot be given (a bridge, no memory BAR). */
int vfio_cfg_build(struct pci_dev *d, struct vm *vm, const char *name, const struct vfio_real *r,
		   struct vfio_cfg *c, struct verr *err);

/* Where a guest config read of [off, off+len) must come from the device:
 * for each byte i, *roff_of[i] is the real offset or -1 (keep the virtual
 * byte).  Returns how many bytes are live. */
int vfio_cfg_live_map(const struct vfio_cfg *c, unsigned off, unsigned len, int roff_of[4]);

/* The real command register the guest's virtual one asks for: memory
 * decoding and bus mastering follow the guest, I/O stays off (no I/O BAR
 * is shown) and INTx stays disabled (MSI-X only). */
uint16_t vfio_cfg_command(uint16_t real, uint16_t virt);

#endif
