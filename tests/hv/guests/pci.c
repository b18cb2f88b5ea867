/* The PCI host bridge as a test guest sees it, with one virtio-blk device:
 * MCFG and the e820 reservation of ECAM, the DSDT's host bridge, the host
 * bridge function, ECAM and 0xCF8/0xCFC agreeing on every slot, BAR sizing
 * and moving a BAR (the device follows, the old address goes dark), MSI-X
 * masking (pending bit, delivery on unmask), the virtio PCI-cfg window, and
 * the transport refusing what a driver may not do. */
#include "virtio.h"

static struct kvdev dev;

static bool dsdt_has(const uint8_t *p, uint32_t n, const void *pat, uint32_t pl)
{
	for (uint32_t i = 0; i + pl <= n; i++)
		if (!memcmp(p + i, pat, pl))
			return true;
	return false;
}

static void blk_read(uint8_t *st)
{
	struct { uint32_t t, r; uint64_t s; } *h = kalloc(16, 16);
	uint8_t *buf = kalloc(512, 512);
	struct kbuf b[3] = { { h, 16, false }, { buf, 512, true }, { st, 1, true } };

	*st = 0xee;
	vq_add(&dev.q[0], b, 3, false);
	vq_kick(&dev.q[0]);
}

void test_main(void)
{
	struct acpi_hdr *m = acpi_find("MCFG"), *d = acpi_find("DSDT");
	uint64_t ecam = 0;
	bool e820 = false, agree = true;
	int s;

	msix_handlers_install(4);
	check(m && m->len == 60, "MCFG present");
	if (m) {
		uint8_t *e = (uint8_t *)m + 44;

		memcpy(&ecam, e, 8);
		check(ecam == 0xe0000000ull && e[8] == 0 && e[9] == 0 && e[10] == 0 && e[11] == 255,
		      "MCFG: ECAM at 0x%lx, segment 0, buses 0-255", ecam);
	}
	for (uint32_t i = 0; i < start_info->memmap_entries; i++) {
		struct hvm_memmap_entry *e = (struct hvm_memmap_entry *)start_info->memmap_paddr + i;

		e820 |= e->addr == ecam && e->size == 0x10000000 && e->type == 2;
	}
	check(e820, "ECAM reserved in the memory map");
	{
		static const uint8_t pnp0a08[] = { 0x41, 0xd0, 0x0a, 0x08 }, pnp0c02[] = { 0x41, 0xd0, 0x0c, 0x02 };

		check(d && dsdt_has((uint8_t *)d, d->len, "PCI0", 4) && dsdt_has((uint8_t *)d, d->len, pnp0a08, 4),
		      "DSDT: PCI0 host bridge (PNP0A08)");
		check(d && dsdt_has((uint8_t *)d, d->len, pnp0c02, 4), "DSDT: ECAM claimed by a PNP0C02 device");
	}
	check(pci_read(0, 0, 4) == 0x00081b36 && pci_read(0, 8, 4) >> 8 == 0x060000,
	      "00:00.0 is the host bridge (0x%x)", pci_read(0, 0, 4));
	for (int sl = 0; sl < 32; sl++)
		for (unsigned off = 0; off < 64; off += 4) {
			uint32_t a, b;

			pci_use_cf8 = false;
			a = pci_read(sl, off, 4);
			pci_use_cf8 = true;
			b = pci_read(sl, off, 4);
			agree &= a == b;
		}
	pci_use_cf8 = false;
	check(agree, "ECAM and 0xCF8/0xCFC agree on every slot");
	check(pci_read(31, 0, 4) == 0xffffffff, "an empty slot reads all ones");
	check(mmio_read32(ecam + (1u << 20)) == 0xffffffff, "bus 1 is empty");

	s = pci_find(0x1af4, 0x1042, 0);
	check(s > 0, "virtio-blk at slot %d", s);
	if (s <= 0)
		return;
	pci_use_cf8 = true;
	check(pci_bar_size(s, 0) == 0x8000, "BAR0 sizes to 32 KiB through 0xCF8 (%lu)", pci_bar_size(s, 0));
	pci_use_cf8 = false;
	{
		uint64_t old = pci_bar(s, 0), nb = old + 0x100000;
		uint16_t cmd = (uint16_t)pci_read(s, 4, 2);

		check(old >= 0xc0000000ull && old < 0xe0000000ull, "BAR0 at 0x%lx in the 32-bit window", old);
		pci_write(s, 4, 2, cmd & ~2u);
		check(mmio_read32(old + 0x10) == 0xffffffff, "memory decoding off: BAR0 is dark");
		pci_write(s, 0x10, 4, (uint32_t)nb | 4);
		pci_write(s, 0x14, 4, 0);
		pci_write(s, 4, 2, cmd);
		check(mmio_read16(nb + 0x12) == 1 && mmio_read32(old + 0x10) == 0xffffffff,
		      "BAR0 moved to 0x%lx: the device is there, not at the old address", nb);
	}
	check(vdev_open(&dev, 2, 0, 1ull << 29) == 0, "virtio-blk opened at the new address");
	/* The PCI-cfg window reads num_queues (BAR0 + 0x12) through config space. */
	{
		unsigned c = 0;

		for (unsigned x = pci_cap(s, 9, 0); x; x = pci_cap(s, 9, x))
			if (pci_read(s, x + 3, 1) == 5)
				c = x;
		check(c != 0, "virtio PCI-cfg capability present");
		pci_write(s, c + 4, 1, 0);
		pci_write(s, c + 8, 4, 0x12);
		pci_write(s, c + 12, 4, 2);
		check((pci_read(s, c + 16, 4) & 0xffff) == 1, "num_queues read through the PCI-cfg window");
		pci_write(s, c + 8, 4, 0x7ffe);              /* misaligned, runs past BAR0 */
		pci_write(s, c + 12, 4, 4);
		pci_write(s, c + 16, 4, 0xdeadbeef);
		check(pci_read(s, c + 16, 4) == 0xdeadbeef, "a bad window reaches nothing: data reads back as written");
	}
	msix_enable(s, 2, VIRTIO_VEC_BASE);
	mmio_write16(dev.common + 0x16, 0);
	mmio_write16(dev.common + 0x1a, 7);
	check(mmio_read16(dev.common + 0x1a) == 0xffff, "a vector beyond the MSI-X table reads back as none");
	mmio_write16(dev.common + 0x18, 8);
	mmio_write64(dev.common + 0x20, 0x7ffffff000ull);
	mmio_write16(dev.common + 0x1c, 1);
	check(mmio_read16(dev.common + 0x1c) == 0, "a queue with rings outside RAM is not enabled");
	check(vq_setup_(&dev, 0, 8, 1) == 0, "a proper queue is");
	vdev_driver_ok(&dev);

	/* Mask vector 1, complete a request: pending, no interrupt; unmask:
	 * it arrives and the pending bit clears. */
	{
		unsigned c = pci_cap(s, 0x11, 0);
		uint32_t t = pci_read(s, c + 4, 4), p = pci_read(s, c + 8, 4);
		uint64_t tbl = pci_bar(s, 0) + (t & ~7u), pba = pci_bar(s, 0) + (p & ~7u);
		volatile uint8_t *st = kalloc(1, 1);
		int before = msix_hits[1];

		mmio_write32(tbl + 16 + 12, 1);
		blk_read((uint8_t *)st);
		for (int i = 0; i < 200 && *st == 0xee; i++)
			sti_hlt();
		check(*st == 0 && msix_hits[1] == before, "completion while masked: no interrupt");
		check(mmio_read32(pba) & 2, "... and vector 1 pending in the PBA");
		mmio_write32(tbl + 16 + 12, 0);
		for (int i = 0; i < 50 && msix_hits[1] == before; i++)
			sti_hlt();
		check(msix_hits[1] == before + 1 && !(mmio_read32(pba) & 2), "unmasking delivers it and clears the bit");
	}
	vdev_reset(&dev);
	mmio_write8(dev.common + 0x14, 1 | 2);
	mmio_write32(dev.common + 0x08, 1);
	mmio_write32(dev.common + 0x0c, 1u << 31);     /* feature 63: never offered */
	mmio_write32(dev.common + 0x08, 0);
	mmio_write8(dev.common + 0x14, 1 | 2 | 8);
	check(!(mmio_read8(dev.common + 0x14) & 8), "FEATURES_OK refused for a feature never offered");
	mmio_write8(dev.common + 0x14, 1 | 2 | 8 | 4);
	check(!(mmio_read8(dev.common + 0x14) & 4), "DRIVER_OK without FEATURES_OK refused");
}
