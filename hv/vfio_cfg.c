/* The config space a VFIO-assigned function shows its guest.  The device's
 * own config space is the device's word, not ours: its capability list may
 * loop or point anywhere, so it is walked with bounds and a visited set.
 * What could let the guest reprogram the host stays emulated here: the
 * BARs (guest addresses only, the real ones are never written), the
 * command register (only memory decoding and bus mastering reach the
 * device), MSI-X (pci.c's table; the real one is the host kernel's), and
 * everything hidden (MSI, power management, the extended space with its
 * AER, ACS and SR-IOV controls).  What only describes the device
 * (vendor-specific and PCI Express capabilities) is read from it live. */
#include "vfio.h"
#include "lib/log.h"

#include <stdio.h>
#include <string.h>

#define CAP_PM     0x01
#define CAP_MSI    0x05
#define CAP_VENDOR 0x09
#define CAP_EXP    0x10
#define CAP_MSIX   0x11
#define EXP_LEN    0x3c            /* PCI Express capability, version 2 */

static uint16_t r16(const uint8_t *c, unsigned off) { return (uint16_t)(c[off] | c[off + 1] << 8); }
static uint32_t r32(const uint8_t *c, unsigned off) { return r16(c, off) | (uint32_t)r16(c, off + 2) << 16; }

static bool power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

static int add_bars(struct pci_dev *d, const struct vfio_real *r, struct vfio_cfg *c, const char *name,
		    struct verr *err)
{
	int nmem = 0;

	for (int i = 0; i < 6; i++) {
		uint32_t v = r32(r->cfg, PCI_BAR0 + 4 * (unsigned)i);
		uint64_t size = r->bar_size[i];
		unsigned flags = 0;

		if (!size)
			continue;
		if (v & 1) {
			c->bar_io[i] = true;   /* port I/O: not shown (no I/O window passthrough) */
			continue;
		}
		if (((v >> 1) & 3) == 2) {
			if (i == 5)
				return verr_set(err, "%s: BAR5 says it is 64-bit, which needs a BAR6", name);
			c->bar_64[i] = true;
			flags |= PCI_BAR_64 | PCI_BAR_HIGH;
		}
		if (v & 8) {
			c->bar_pref[i] = true;
			flags |= PCI_BAR_PREFETCH;
		}
		if (!power_of_two(size) || size < 16 || size > (1ull << 40))
			return verr_set(err, "%s: BAR%d has %llu bytes, not a power of two from 16 B to 1 TiB", name, i,
					(unsigned long long)size);
		/* Below a page a BAR cannot be a memory slot: it is trapped, and
		 * pci.c's placement wants the page anyway. */
		pci_add_bar(d, i, size, flags);
		nmem++;
		if (c->bar_64[i])
			i++;
	}
	if (!nmem)
		return verr_set(err, "%s: no memory BAR (a function with only port I/O cannot be given)", name);
	return 0;
}

static int add_msix(struct pci_dev *d, const struct vfio_real *r, struct vfio_cfg *c, unsigned off,
		    const char *name, struct verr *err)
{
	unsigned n = (r16(r->cfg, off + 2) & 0x7ff) + 1;
	uint32_t t = r32(r->cfg, off + 4), p = r32(r->cfg, off + 8);
	int bar = (int)(t & 7);

	if (bar > 5 || (p & 7) != (uint32_t)bar || !r->bar_size[bar] || c->bar_io[bar])
		return verr_set(err, "%s: MSI-X table in BAR%u and PBA in BAR%u: both must be the same memory BAR", name,
				t & 7, p & 7);
	t &= ~7u;
	p &= ~7u;
	/* The device's own claim, checked whole: a table that leaves its BAR
	 * is a device (or config space) not to be trusted with the rest. */
	if ((uint64_t)t + 16ull * n > r->bar_size[bar] || (uint64_t)p + 8ull * ((n + 63) / 64) > r->bar_size[bar])
		return verr_set(err, "%s: MSI-X table or PBA lies beyond BAR%d (%llu bytes)", name, bar,
				(unsigned long long)r->bar_size[bar]);
	if (n > VFIO_MAX_VECTORS) {
		log_info("%s: MSI-X has %u vectors; the guest sees %d", name, n, VFIO_MAX_VECTORS);
		n = VFIO_MAX_VECTORS;
	}
	if (pci_add_msix(d, n, bar, t, p) < 0)
		return verr_set(err, "%s: no room for the MSI-X capability", name);
	c->msix_n = n;
	c->msix_bar = bar;
	c->msix_table = t;
	c->msix_pba = p;
	return 0;
}

/* A capability shown with its body read from the device. */
static void add_live(struct pci_dev *d, struct vfio_cfg *c, uint8_t id, unsigned roff, unsigned len,
		     const char *name)
{
	unsigned v;

	if (c->nlive == VFIO_MAX_LIVE || !(v = pci_add_cap(d, id, len))) {
		log_info("%s: capability 0x%02x at 0x%02x not shown (no room)", name, id, roff);
		c->nhidden++;
		return;
	}
	c->live[c->nlive++] = (struct vfio_live){ .voff = v, .roff = roff, .len = len };
}

int vfio_cfg_build(struct pci_dev *d, struct vm *vm, const char *name, const struct vfio_real *r,
		   struct vfio_cfg *c, struct verr *err)
{
	const uint8_t *rc = r->cfg;
	bool seen[256] = { false };
	unsigned off, msix_at = 0;

	memset(c, 0, sizeof(*c));
	c->msix_bar = -1;
	if ((rc[PCI_HEADER_TYPE] & 0x7f) != 0)
		return verr_set(err, "%s: header type %u is not an endpoint (bridges cannot be given)", name,
				rc[PCI_HEADER_TYPE] & 0x7f);
	if (r16(rc, PCI_VENDOR_ID) == 0xffff || r16(rc, PCI_VENDOR_ID) == 0)
		return verr_set(err, "%s: config space reads vendor 0x%04x: no device answers", name,
				r16(rc, PCI_VENDOR_ID));
	pci_dev_init(d, vm, name, r16(rc, PCI_VENDOR_ID), r16(rc, PCI_DEVICE_ID), rc[PCI_REVISION],
		     (uint32_t)rc[PCI_CLASS_PROG] | (uint32_t)r16(rc, PCI_CLASS_PROG + 1) << 8,
		     r16(rc, PCI_SUBSYS_VENDOR), r16(rc, PCI_SUBSYS_ID));
	/* Memory decoding starts off: the guest turns it on (the real one
	 * follows) once it placed the BARs. */
	pci_w16(d, PCI_COMMAND, 0);
	if (add_bars(d, r, c, name, err) < 0)
		return -1;
	/* MSI-X first: a function whose table cannot be emulated is refused
	 * before anything else is shown. */
	off = (rc[PCI_STATUS] & PCI_STATUS_CAPS) ? rc[PCI_CAP_PTR] & 0xfc : 0;
	for (int k = 0; off >= 0x40 && off <= 0xfc && !seen[off] && k < 48; k++) {
		seen[off] = true;
		if (rc[off] == CAP_MSIX && !msix_at && off + 12 <= 256)
			msix_at = off;
		off = rc[off + 1] & 0xfc;
	}
	if (!msix_at)
		return verr_set(err, "%s: no MSI-X capability (vhpc-hv gives neither INTx nor MSI to a host device)",
				name);
	if (add_msix(d, r, c, msix_at, name, err) < 0)
		return -1;
	memset(seen, 0, sizeof(seen));
	off = rc[PCI_CAP_PTR] & 0xfc;
	for (int k = 0; off >= 0x40 && off <= 0xfc && !seen[off] && k < 48; k++) {
		uint8_t id = rc[off];

		seen[off] = true;
		if (id == CAP_VENDOR && rc[off + 2] >= 3 && off + rc[off + 2] <= 256)
			add_live(d, c, id, off, rc[off + 2], name);
		else if (id == CAP_EXP && off + EXP_LEN <= 256)
			add_live(d, c, id, off, EXP_LEN, name);
		else if (id != CAP_MSIX) {
			log_debug("%s: capability 0x%02x at 0x%02x hidden", name, id, off);
			c->nhidden++;
		}
		off = rc[off + 1] & 0xfc;
	}
	return 0;
}

int vfio_cfg_live_map(const struct vfio_cfg *c, unsigned off, unsigned len, int roff_of[4])
{
	int n = 0;

	for (unsigned i = 0; i < len && i < 4; i++) {
		unsigned o = off + i;

		roff_of[i] = -1;
		for (int k = 0; k < c->nlive; k++) {
			const struct vfio_live *l = &c->live[k];

			/* The ID and next pointer are ours: the list is ours. */
			if (o >= l->voff + 2 && o < l->voff + l->len) {
				roff_of[i] = (int)(l->roff + (o - l->voff));
				n++;
				break;
			}
		}
	}
	return n;
}

uint16_t vfio_cfg_command(uint16_t real, uint16_t virt)
{
	uint16_t keep = (uint16_t)~(PCI_CMD_IO | PCI_CMD_MEM | PCI_CMD_MASTER);

	return (uint16_t)((real & keep) | (virt & (PCI_CMD_MEM | PCI_CMD_MASTER)) | PCI_CMD_INTX_OFF);
}
