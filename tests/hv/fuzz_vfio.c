/* libFuzzer target for a VFIO function's config space as its device
 * reports it (hv/vfio_cfg.c): the input is the device's 256 bytes of
 * config space, six BAR sizes (log2, 0: none) and then guest config
 * accesses (offset, length).  Whatever the device says, building either
 * refuses it or gives a capability list that ends inside the capability
 * area, and no guest access maps to a device offset outside the 256 bytes
 * or to the header or MSI-X (which stay emulated).  No KVM, no device. */
#include "lib/err.h"
#include "lib/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hv/vfio.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct vm vm = { .vm_fd = -1, .kvm_fd = -1 };
	static bool init;
	struct vfio_real r;
	struct vfio_cfg c;
	struct pci_dev pd;
	struct verr err;
	unsigned off;
	int steps = 0;

	if (!init) {
		vlog_init("fuzz-hv-vfio");
		vlog_set_level(VLOG_ERR);
		init = true;
	}
	if (n < 256 + 6)
		return 0;
	memset(&r, 0, sizeof(r));
	memcpy(r.cfg, d, 256);
	for (int i = 0; i < 6; i++)
		r.bar_size[i] = d[256 + i] ? 1ull << (d[256 + i] % 48) : 0;
	d += 262;
	n -= 262;
	memset(&pd, 0, sizeof(pd));
	if (vfio_cfg_build(&pd, &vm, "fuzz", &r, &c, &err) < 0) {
		pci_dev_free(&pd);
		return 0;
	}
	for (off = pd.cfg[PCI_CAP_PTR]; off; off = pd.cfg[off + 1])
		if (off < 0x40 || off > 0xfc || ++steps > 48)
			abort();
	if (c.msix_n == 0 || c.msix_n > VFIO_MAX_VECTORS || pd.msix.n != c.msix_n)
		abort();
	for (; n >= 2; d += 2, n -= 2) {
		unsigned o = d[0] | (d[1] & 0x0f) << 8, len = 1u << ((d[1] >> 4) % 3);
		int roff[4], live = vfio_cfg_live_map(&c, o, len, roff), seen = 0;

		for (unsigned i = 0; i < len; i++) {
			if (roff[i] < 0)
				continue;
			seen++;
			if (roff[i] < 0x40 || roff[i] > 255 || o + i < 0x40 ||
			    (o + i >= pd.msix.cap && o + i < pd.msix.cap + 12))
				abort();
		}
		if (seen != live)
			abort();
		(void)vfio_cfg_command((uint16_t)o, (uint16_t)(o >> 1));
	}
	pci_dev_free(&pd);
	return 0;
}
