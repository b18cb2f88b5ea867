/* Unit tests of the config space a VFIO-assigned function shows its guest
 * (hv/vfio_cfg.c), from device config spaces made here: a virtio-net as
 * QEMU makes it on PCI Express, and hostile ones (a capability loop, a
 * pointer into the header, an MSI-X table beyond its BAR, no MSI-X, a
 * bridge).  No KVM and no device needed. */
#include "lib/err.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "hv/vfio.h"

static struct vm vm;

static void w16(uint8_t *c, unsigned o, uint16_t v) { c[o] = (uint8_t)v; c[o + 1] = (uint8_t)(v >> 8); }
static void w32(uint8_t *c, unsigned o, uint32_t v) { w16(c, o, (uint16_t)v); w16(c, o + 2, (uint16_t)(v >> 16)); }

/* Capabilities at the given offsets, chained in that order. */
static void cap(struct vfio_real *r, unsigned off, uint8_t id, unsigned next)
{
	r->cfg[off] = id;
	r->cfg[off + 1] = (uint8_t)next;
}

/* QEMU's virtio-net-pci behind a PCIe port: BAR1 4 KiB (MSI-X table at 0,
 * PBA at 0x800), BAR4 16 KiB 64-bit prefetchable (virtio's structures);
 * capabilities: vendor x4, MSI-X, PCIe, PM. */
static void virtio_net(struct vfio_real *r)
{
	memset(r, 0, sizeof(*r));
	w16(r->cfg, PCI_VENDOR_ID, 0x1af4);
	w16(r->cfg, PCI_DEVICE_ID, 0x1041);
	r->cfg[PCI_REVISION] = 1;
	r->cfg[PCI_CLASS_PROG + 2] = 0x02;
	w16(r->cfg, PCI_STATUS, PCI_STATUS_CAPS);
	w32(r->cfg, PCI_BAR0 + 4, 0);                    /* BAR1: 32-bit memory */
	w32(r->cfg, PCI_BAR0 + 16, 0xc);                 /* BAR4: 64-bit prefetchable */
	r->bar_size[1] = 4096;
	r->bar_size[4] = 16384;
	r->cfg[PCI_CAP_PTR] = 0x98;
	cap(r, 0x98, 0x11, 0x84);                        /* MSI-X */
	w16(r->cfg, 0x9a, 3);                            /* 4 vectors */
	w32(r->cfg, 0x9c, 0x000 | 1);                    /* table: BAR1 + 0 */
	w32(r->cfg, 0xa0, 0x800 | 1);                    /* PBA: BAR1 + 0x800 */
	for (unsigned o = 0x84, k = 0; k < 4; o -= 0x14, k++) {
		cap(r, o, 0x09, k < 3 ? o - 0x14 : 0xa4);
		r->cfg[o + 2] = 0x14;                    /* cap_len */
		r->cfg[o + 3] = (uint8_t)(k + 1);        /* cfg_type */
		r->cfg[o + 4] = 4;                       /* bar */
	}
	cap(r, 0xa4, 0x01, 0xc4);                        /* PM: hidden */
	cap(r, 0xc4, 0x10, 0xb0);                        /* PCI Express: live */
	cap(r, 0xb0, 0x05, 0);                           /* MSI: hidden */
}

/* Walks the virtual capability list: each once, in the capability area. */
static int walk(const struct pci_dev *d, uint8_t *ids, int max)
{
	unsigned off = d->cfg[PCI_CAP_PTR];
	int n = 0;

	while (off) {
		assert_true(off >= 0x40 && off < 0x100);
		assert_true(n < max);
		ids[n++] = d->cfg[off];
		off = d->cfg[off + 1];
	}
	return n;
}

static void test_virtio_net(void **state)
{
	struct vfio_real r;
	struct vfio_cfg c;
	struct pci_dev d;
	struct verr err;
	uint8_t ids[32];
	int n, live = 0, roff[4];

	(void)state;
	virtio_net(&r);
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), 0);
	assert_int_equal(pci_r16(&d, PCI_VENDOR_ID), 0x1af4);
	assert_int_equal(pci_r16(&d, PCI_DEVICE_ID), 0x1041);
	assert_int_equal(d.cfg[PCI_CLASS_PROG + 2], 0x02);
	/* Memory decoding starts off; the BARs keep sizes and types. */
	assert_int_equal(pci_r16(&d, PCI_COMMAND), 0);
	assert_int_equal(d.bar[1].size, 4096);
	assert_int_equal(d.bar[4].size, 16384);
	assert_true(d.bar[4].flags & PCI_BAR_64);
	assert_true(d.bar[4].flags & PCI_BAR_PREFETCH);
	assert_int_equal(d.bar[5].size, 0);
	/* MSI-X is pci.c's, at the device's table and PBA places. */
	assert_int_equal(c.msix_n, 4);
	assert_int_equal(c.msix_bar, 1);
	assert_int_equal(d.msix.n, 4);
	assert_int_equal(d.msix.table_off, 0);
	assert_int_equal(d.msix.pba_off, 0x800);
	/* MSI-X, four vendor capabilities and PCI Express shown; PM and MSI not. */
	n = walk(&d, ids, 32);
	assert_int_equal(n, 6);
	for (int i = 0; i < n; i++) {
		assert_true(ids[i] == 0x11 || ids[i] == 0x09 || ids[i] == 0x10);
		live += ids[i] != 0x11;
	}
	assert_int_equal(live, 5);
	assert_int_equal(c.nlive, 5);
	assert_int_equal(c.nhidden, 2);
	/* A vendor capability's body comes from the device, its ID and next
	 * pointer are ours. */
	for (int k = 0; k < c.nlive; k++) {
		const struct vfio_live *l = &c.live[k];

		assert_int_equal(vfio_cfg_live_map(&c, l->voff, 2, roff), 0);
		assert_int_equal(vfio_cfg_live_map(&c, l->voff + 2, 2, roff), 2);
		assert_int_equal(roff[0], (int)l->roff + 2);
		assert_int_equal(roff[1], (int)l->roff + 3);
	}
	/* The header and MSI-X are never read from the device. */
	assert_int_equal(vfio_cfg_live_map(&c, PCI_BAR0, 4, roff), 0);
	assert_int_equal(vfio_cfg_live_map(&c, PCI_COMMAND, 2, roff), 0);
	assert_int_equal(vfio_cfg_live_map(&c, d.msix.cap, 4, roff), 0);
	pci_dev_free(&d);
}

static void test_command(void **state)
{
	(void)state;
	/* Memory and bus mastering follow the guest; I/O never; INTx off. */
	assert_int_equal(vfio_cfg_command(0, PCI_CMD_MEM | PCI_CMD_MASTER | PCI_CMD_IO),
			 PCI_CMD_MEM | PCI_CMD_MASTER | PCI_CMD_INTX_OFF);
	assert_int_equal(vfio_cfg_command(PCI_CMD_MEM | PCI_CMD_MASTER | PCI_CMD_IO, 0), PCI_CMD_INTX_OFF);
	/* Other bits (SERR, parity) stay the host's. */
	assert_int_equal(vfio_cfg_command(0x140, PCI_CMD_MEM), 0x140 | PCI_CMD_MEM | PCI_CMD_INTX_OFF);
}

static void test_cap_loop(void **state)
{
	struct vfio_real r;
	struct vfio_cfg c;
	struct pci_dev d;
	struct verr err;
	uint8_t ids[32];

	(void)state;
	virtio_net(&r);
	cap(&r, 0xb0, 0x05, 0x98);       /* MSI points back to MSI-X: a loop */
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), 0);
	assert_int_equal(walk(&d, ids, 32), 6);
	pci_dev_free(&d);
	/* A pointer into the header ends the walk. */
	virtio_net(&r);
	cap(&r, 0xc4, 0x10, 0x10);
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), 0);
	assert_int_equal(c.nlive, 5);
	pci_dev_free(&d);
	/* A vendor capability longer than config space is not shown. */
	virtio_net(&r);
	r.cfg[0x84 + 2] = 0xf0;
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), 0);
	for (int k = 0; k < c.nlive; k++)
		assert_true(c.live[k].roff + c.live[k].len <= 256);
	assert_int_equal(c.nlive, 4);
	pci_dev_free(&d);
}

static void test_refused(void **state)
{
	struct vfio_real r;
	struct vfio_cfg c;
	struct pci_dev d;
	struct verr err;

	(void)state;
	virtio_net(&r);
	w16(r.cfg, 0x9a, 0x7ff);         /* 2048 vectors: the table leaves BAR1 */
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), -1);
	assert_non_null(strstr(err.msg, "MSI-X table or PBA lies beyond BAR1"));
	pci_dev_free(&d);

	/* 2048 vectors in a BAR that holds them: the guest sees 64. */
	virtio_net(&r);
	w16(r.cfg, 0x9a, 0x7ff);
	w32(r.cfg, 0xa0, 0x8000 | 1);
	r.bar_size[1] = 65536;
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), 0);
	assert_int_equal(c.msix_n, VFIO_MAX_VECTORS);
	assert_int_equal(pci_r16(&d, d.msix.cap + 2) & 0x7ff, VFIO_MAX_VECTORS - 1);
	pci_dev_free(&d);

	virtio_net(&r);
	w32(r.cfg, 0xa0, 0x800 | 4);     /* PBA in another BAR */
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), -1);
	assert_non_null(strstr(err.msg, "both must be the same memory BAR"));
	pci_dev_free(&d);

	virtio_net(&r);
	r.cfg[0x98] = 0x05;              /* no MSI-X at all */
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), -1);
	assert_non_null(strstr(err.msg, "no MSI-X capability"));
	pci_dev_free(&d);

	virtio_net(&r);
	r.cfg[PCI_HEADER_TYPE] = 1;      /* a bridge */
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), -1);
	assert_non_null(strstr(err.msg, "not an endpoint"));

	virtio_net(&r);
	r.bar_size[4] = 12288;           /* not a power of two */
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), -1);
	assert_non_null(strstr(err.msg, "BAR4 has 12288 bytes"));
	pci_dev_free(&d);

	virtio_net(&r);
	w32(r.cfg, PCI_BAR0 + 16, 0x8);  /* BAR4 32-bit, BAR5 says 64-bit */
	w32(r.cfg, PCI_BAR0 + 20, 0x4);
	r.bar_size[5] = 4096;
	assert_int_equal(vfio_cfg_build(&d, &vm, "t", &r, &c, &err), -1);
	assert_non_null(strstr(err.msg, "BAR5 says it is 64-bit"));
	pci_dev_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_virtio_net),
		cmocka_unit_test(test_command),
		cmocka_unit_test(test_cap_loop),
		cmocka_unit_test(test_refused),
	};

	vm.vm_fd = vm.kvm_fd = -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
