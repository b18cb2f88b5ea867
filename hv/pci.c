/* The PCI host bridge: bus 0 behind 0xCF8/0xCFC and ECAM (MCFG table,
 * reserved in e820 and by a PNP0C02 device), a DSDT entry (PNP0A08) with
 * its bus, I/O and memory windows so Linux enumerates it without firmware,
 * BARs placed at start the way firmware would and followed when the guest
 * moves them, and MSI-X tables.  Everything a guest writes here is a
 * config register or a table entry: widths, offsets and BAR values are
 * masked, never trusted. */
#include "lib/err.h"
#include "lib/log.h"
#include "pci.h"
#include "snapshot.h"
#include "aml.h"
#include "layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define HOST_VENDOR 0x1b36       /* Red Hat: generic PCIe host bridge */
#define HOST_DEVICE 0x0008

struct pci_bus {
	struct vm *vm;
	pthread_mutex_t lock;      /* config space of every device */
	struct pci_dev *slot[PCI_MAX_SLOTS];
	struct pci_dev host;
	uint32_t cf8;
	uint64_t mmio32_next, mmio64_base, mmio64_next, mmio64_end;
};

HV_DEVICE_DECLARE(pci);

static struct pci_bus *bus_of(struct vm *vm)
{
	return vm_device(vm, &hv_dev_pci);
}

/* ------------------------------------------------------------ the device */

void pci_dev_init(struct pci_dev *d, struct vm *vm, const char *name, uint16_t vendor, uint16_t device,
		  uint8_t revision, uint32_t class_code, uint16_t subsys_vendor, uint16_t subsys_id)
{
	memset(d, 0, sizeof(*d));
	d->vm = vm;
	d->slot = -1;
	d->msix.bar = -1;
	snprintf(d->name, sizeof(d->name), "%s", name);
	pci_w16(d, PCI_VENDOR_ID, vendor);
	pci_w16(d, PCI_DEVICE_ID, device);
	pci_w16(d, PCI_COMMAND, PCI_CMD_MEM);      /* decoding on, as firmware leaves it */
	pci_w16(d, PCI_STATUS, PCI_STATUS_CAPS);
	pci_w8(d, PCI_REVISION, revision);
	pci_w8(d, PCI_CLASS_PROG, (uint8_t)class_code);
	pci_w16(d, PCI_CLASS_PROG + 1, (uint16_t)(class_code >> 8));
	pci_w16(d, PCI_SUBSYS_VENDOR, subsys_vendor);
	pci_w16(d, PCI_SUBSYS_ID, subsys_id);
	/* Writable: command (I/O, memory, bus master, INTx disable), cache
	 * line size, latency timer, interrupt line. */
	d->wmask[PCI_COMMAND] = PCI_CMD_IO | PCI_CMD_MEM | PCI_CMD_MASTER;
	d->wmask[PCI_COMMAND + 1] = PCI_CMD_INTX_OFF >> 8;
	d->wmask[0x0c] = 0xff;
	d->wmask[0x0d] = 0xff;
	d->wmask[PCI_INT_LINE] = 0xff;
	for (int i = 0; i < 6; i++) {
		d->bar[i].dev = d;
		d->bar[i].idx = i;
	}
}

void pci_add_bar(struct pci_dev *d, int bar, uint64_t size, unsigned flags)
{
	unsigned off = PCI_BAR0 + 4 * (unsigned)bar;
	uint32_t lo = (flags & PCI_BAR_64 ? 0x4 : 0) | (flags & PCI_BAR_PREFETCH ? 0x8 : 0);
	uint64_t mask = ~(size - 1);

	d->bar[bar].size = size;
	d->bar[bar].flags = flags;
	pci_w32(d, off, lo);
	for (int i = 0; i < 4; i++)
		d->wmask[off + i] = (uint8_t)((mask & 0xfffffff0u) >> (8 * i));
	if (flags & PCI_BAR_64)
		for (int i = 0; i < 4; i++)
			d->wmask[off + 4 + i] = (uint8_t)((mask >> 32) >> (8 * i));
}

uint64_t pci_bar_addr(const struct pci_dev *d, int bar)
{
	uint64_t a = pci_r32(d, PCI_BAR0 + 4 * (unsigned)bar) & ~0xfull;

	if (d->bar[bar].flags & PCI_BAR_64)
		a |= (uint64_t)pci_r32(d, PCI_BAR0 + 4 * (unsigned)bar + 4) << 32;
	return a;
}

unsigned pci_add_cap(struct pci_dev *d, uint8_t id, unsigned len)
{
	/* Packed from 0x40, dword aligned. */
	unsigned off = d->last_cap ? (d->last_cap + d->last_cap_len + 3) & ~3u : 0x40;

	if (off + len > 0x100)
		return 0;
	d->cfg[off] = id;
	d->cfg[off + 1] = 0;
	if (d->last_cap)
		d->cfg[d->last_cap + 1] = (uint8_t)off;
	else
		d->cfg[PCI_CAP_PTR] = (uint8_t)off;
	d->last_cap = off;
	d->last_cap_len = len;
	return off;
}

int pci_add_msix(struct pci_dev *d, unsigned n, int bar, uint32_t table_off, uint32_t pba_off)
{
	struct pci_msix *m = &d->msix;
	unsigned c;

	if (!n || n > 2048 || !(c = pci_add_cap(d, PCI_CAP_MSIX, 12)))
		return -1;
	m->v = calloc(n, sizeof(*m->v));
	if (!m->v)
		return -1;
	m->n = n;
	m->bar = bar;
	m->table_off = table_off;
	m->pba_off = pba_off;
	m->cap = c;
	pthread_mutex_init(&m->lock, NULL);
	for (unsigned i = 0; i < n; i++) {
		m->v[i].ctrl = 1;          /* masked after reset */
		m->v[i].gsi = m->v[i].irqfd = -1;
	}
	pci_w16(d, c + 2, (uint16_t)(n - 1));
	pci_w32(d, c + 4, table_off | (uint32_t)bar);
	pci_w32(d, c + 8, pba_off | (uint32_t)bar);
	d->wmask[c + 3] = 0xc0;        /* enable, function mask */
	return 0;
}

/* ---------------------------------------------------------------- MSI-X */

static bool msix_on(const struct pci_dev *d, bool *masked)
{
	uint16_t ctl = pci_r16(d, d->msix.cap + 2);

	*masked = ctl & 0x4000;
	return d->msix.n && (ctl & 0x8000);
}

/* Gives the vector a GSI with an irqfd (once) and points the GSI's route
 * at what the table says now.  false: no irqfd for it (KVM_SIGNAL_MSI). */
static bool msix_route(struct pci_dev *d, struct msix_vec *v)
{
	uint64_t addr = (uint64_t)v->addr_hi << 32 | v->addr_lo;

	if (v->gsi == -1) {
		if (irq_msi_gsi(d->vm, &v->gsi, &v->irqfd) < 0)
			v->gsi = -2;       /* no irqfd: KVM_SIGNAL_MSI from now on */
		else
			log_debug("%s: MSI-X vector %u through irqfd (GSI %d)", d->name,
				  (unsigned)(v - d->msix.v), v->gsi);
	}
	if (v->irqfd < 0)
		return false;
	if (!v->routed || v->r_addr != addr || v->r_data != v->data) {
		if (irq_msi_route(d->vm, v->gsi, addr, v->data) < 0)
			return false;
		v->routed = true;
		v->r_addr = addr;
		v->r_data = v->data;
	}
	return true;
}

static void msix_fire(struct pci_dev *d, struct msix_vec *v)
{
	struct vm *vm = d->vm;
	uint64_t addr = (uint64_t)v->addr_hi << 32 | v->addr_lo;
	uint64_t one = 1;

	/* Only the LAPIC window is an interrupt; anything else would be a DMA
	 * write to memory, which this bus does not do. */
	if ((addr >> 20) != (GPA_LAPIC >> 20))
		return;
	if (msix_route(d, v)) {
		atomic_fetch_add(&vm->msi_sent, 1);
		if (write(v->irqfd, &one, sizeof(one)) < 0)
			irq_msi_signal(vm, addr, v->data);
		return;
	}
	irq_msi_signal(vm, addr, v->data);
}

static bool irqfd_set(struct pci_dev *d, int fd, int gsi, bool assign)
{
	struct kvm_irqfd f = { .fd = (uint32_t)fd, .gsi = (uint32_t)gsi,
			       .flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN };

	if (ioctl(d->vm->vm_fd, KVM_IRQFD, &f) < 0) {
		log_warn("%s: KVM_IRQFD %s fd %d, GSI %d: %s", d->name, assign ? "assign" : "deassign", fd, gsi,
			 strerror(errno));
		return false;
	}
	return true;
}

/* Binds or unbinds each external eventfd as its vector can or cannot
 * deliver right now.  Called with the lock held after anything that may
 * change that: the table, the enable and function-mask bits. */
static void msix_sync_bound(struct pci_dev *d)
{
	struct pci_msix *m = &d->msix;
	bool masked, on = msix_on(d, &masked);

	for (unsigned i = 0; i < m->nbound; i++) {
		struct msix_bound *b = &m->bound[i];
		struct msix_vec *v = &m->v[b->vec];
		uint64_t addr = (uint64_t)v->addr_hi << 32 | v->addr_lo;
		bool want = on && !masked && !(v->ctrl & 1) && (addr >> 20) == (GPA_LAPIC >> 20) &&
			    msix_route(d, v);

		if (b->assigned && (!want || b->gsi != v->gsi)) {
			irqfd_set(d, b->fd, b->gsi, false);
			b->assigned = false;
		}
		if (want && !b->assigned && irqfd_set(d, b->fd, v->gsi, true)) {
			b->assigned = true;
			b->gsi = v->gsi;
		}
	}
}

int pci_msix_bind_eventfd(struct pci_dev *d, unsigned vec, int fd)
{
	struct pci_msix *m = &d->msix;
	struct msix_vec *v;

	if (!m->n || vec >= m->n || d->vm->vm_fd < 0 || fd < 0)
		return -1;
	pthread_mutex_lock(&m->lock);
	v = &m->v[vec];
	/* The GSI now, not when the vector first fires, so that a failure
	 * to get one is the caller's to handle (by relaying). */
	if (v->gsi == -1 && irq_msi_gsi(d->vm, &v->gsi, &v->irqfd) < 0)
		v->gsi = -2;
	if (v->gsi < 0 || m->nbound == PCI_MSIX_BOUND_MAX) {
		pthread_mutex_unlock(&m->lock);
		return -1;
	}
	m->bound[m->nbound++] = (struct msix_bound){ .fd = fd, .vec = vec, .gsi = -1 };
	msix_sync_bound(d);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void pci_msix_unbind_eventfd(struct pci_dev *d, int fd)
{
	struct pci_msix *m = &d->msix;

	if (!m->n)
		return;
	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < m->nbound; i++) {
		if (m->bound[i].fd != fd)
			continue;
		if (m->bound[i].assigned)
			irqfd_set(d, fd, m->bound[i].gsi, false);
		m->bound[i] = m->bound[--m->nbound];
		break;
	}
	pthread_mutex_unlock(&m->lock);
}

bool pci_msix_enabled(struct pci_dev *d)
{
	bool masked;

	return msix_on(d, &masked);
}

bool pci_msix_notify(struct pci_dev *d, unsigned vec)
{
	struct pci_msix *m = &d->msix;
	bool masked;

	if (!m->n)
		return false;
	pthread_mutex_lock(&m->lock);
	if (!msix_on(d, &masked)) {
		pthread_mutex_unlock(&m->lock);
		return false;
	}
	if (vec < m->n) {
		struct msix_vec *v = &m->v[vec];

		if (masked || (v->ctrl & 1))
			v->pending = true;
		else
			msix_fire(d, v);
	}
	pthread_mutex_unlock(&m->lock);
	return true;
}

/* Delivers what became deliverable after an unmask. */
static void msix_flush_pending(struct pci_dev *d)
{
	bool masked;

	if (!msix_on(d, &masked) || masked)
		return;
	for (unsigned i = 0; i < d->msix.n; i++) {
		struct msix_vec *v = &d->msix.v[i];

		if (v->pending && !(v->ctrl & 1)) {
			v->pending = false;
			msix_fire(d, v);
		}
	}
}

static void msix_table_rw(struct pci_dev *d, uint64_t off, uint8_t *data, unsigned len, bool write)
{
	struct pci_msix *m = &d->msix;

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < len; i++) {
		uint64_t o = off + i;
		unsigned e = (unsigned)(o / 16), b = (unsigned)(o % 16);
		uint32_t *w;

		if (e >= m->n) {
			if (!write)
				data[i] = 0;
			continue;
		}
		w = b < 4 ? &m->v[e].addr_lo : b < 8 ? &m->v[e].addr_hi : b < 12 ? &m->v[e].data : &m->v[e].ctrl;
		if (!write) {
			data[i] = (uint8_t)(*w >> (8 * (b % 4)));
			continue;
		}
		if (b >= 12) {
			if (b == 12)       /* only the mask bit of vector control */
				*w = (*w & ~1u) | (data[i] & 1u);
		} else if (b < 4) {
			/* the low two address bits are reserved (dword aligned) */
			uint32_t v = (uint32_t)data[i] << (8 * b);
			*w = (*w & ~(0xffu << (8 * b))) | (b == 0 ? v & ~3u : v);
		} else {
			*w = (*w & ~(0xffu << (8 * (b % 4)))) | ((uint32_t)data[i] << (8 * (b % 4)));
		}
	}
	if (write) {
		msix_flush_pending(d);
		msix_sync_bound(d);
	}
	pthread_mutex_unlock(&m->lock);
}

static void msix_pba_read(struct pci_dev *d, uint64_t off, uint8_t *data, unsigned len)
{
	struct pci_msix *m = &d->msix;

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < len; i++) {
		uint8_t v = 0;

		for (unsigned bit = 0; bit < 8; bit++) {
			uint64_t vec = (off + i) * 8 + bit;

			if (vec < m->n && m->v[vec].pending)
				v |= (uint8_t)(1u << bit);
		}
		data[i] = v;
	}
	pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------------ BARs */

static void bar_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_bar *b = opaque;
	struct pci_dev *d = b->dev;
	struct pci_msix *m = &d->msix;

	if (m->n && m->bar == b->idx) {
		if (off >= m->table_off && off - m->table_off < 16ull * m->n) {
			msix_table_rw(d, off - m->table_off, data, len, false);
			return;
		}
		if (off >= m->pba_off && off - m->pba_off < 8ull * ((m->n + 63) / 64)) {
			msix_pba_read(d, off - m->pba_off, data, len);
			return;
		}
	}
	if (d->ops && d->ops->bar_read)
		d->ops->bar_read(d, b->idx, off, data, len);
	else
		memset(data, 0, len);
}

static void bar_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_bar *b = opaque;
	struct pci_dev *d = b->dev;
	struct pci_msix *m = &d->msix;

	if (m->n && m->bar == b->idx) {
		if (off >= m->table_off && off - m->table_off < 16ull * m->n) {
			msix_table_rw(d, off - m->table_off, (uint8_t *)(uintptr_t)data, len, true);
			return;
		}
		if (off >= m->pba_off && off - m->pba_off < 8ull * ((m->n + 63) / 64))
			return;                /* the PBA is read-only */
	}
	if (d->ops && d->ops->bar_write)
		d->ops->bar_write(d, b->idx, off, data, len);
}

static const struct io_ops bar_ops = { .read = bar_read, .write = bar_write };

/* Maps and unmaps BARs after the command register or a BAR changed. */
static void update_mappings(struct pci_dev *d)
{
	bool mem_on = pci_r16(d, PCI_COMMAND) & PCI_CMD_MEM;

	for (int i = 0; i < 6; i++) {
		struct pci_bar *b = &d->bar[i];
		uint64_t addr = pci_bar_addr(d, i);
		bool want = mem_on && b->size && addr && addr + b->size > addr &&
			    addr + b->size <= (1ull << 52);
		struct verr err;

		if (!b->size)
			continue;
		if (b->mapped && (!want || b->mapped_addr != addr)) {
			if (!(b->flags & PCI_BAR_RAM))
				io_unregister(&d->vm->mmio, b->mapped_addr);
			b->mapped = false;
			if (d->ops && d->ops->bar_map)
				d->ops->bar_map(d, i, b->mapped_addr, false);
		}
		if (want && !b->mapped) {
			if (!(b->flags & PCI_BAR_RAM) &&
			    io_register(&d->vm->mmio, addr, b->size, &bar_ops, b, d->name, &err) < 0) {
				log_debug("%s: BAR%d not mapped: %s", d->name, i, err.msg);
				continue;
			}
			b->mapped = true;
			b->mapped_addr = addr;
			if (d->ops && d->ops->bar_map)
				d->ops->bar_map(d, i, addr, true);
		}
	}
}

/* ---------------------------------------------------------- config space */

static void cfg_read(struct pci_dev *d, unsigned off, uint8_t *data, unsigned len)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < len; i++)
		v |= (uint32_t)d->cfg[off + i] << (8 * i);
	if (d->ops && d->ops->cfg_read)
		d->ops->cfg_read(d, off, len, &v);
	for (unsigned i = 0; i < len; i++)
		data[i] = (uint8_t)(v >> (8 * i));
}

static void cfg_write(struct pci_dev *d, unsigned off, const uint8_t *data, unsigned len)
{
	bool remap = false, msix = false;
	uint32_t v = 0;

	for (unsigned i = 0; i < len; i++) {
		unsigned o = off + i;

		d->cfg[o] = (uint8_t)((d->cfg[o] & ~d->wmask[o]) | (data[i] & d->wmask[o]));
		v |= (uint32_t)data[i] << (8 * i);
		remap |= (o >= PCI_BAR0 && o < PCI_BAR0 + 24) || o == PCI_COMMAND;
		msix |= d->msix.n && (o == d->msix.cap + 3);
	}
	if (remap)
		update_mappings(d);
	if (msix) {
		pthread_mutex_lock(&d->msix.lock);
		msix_flush_pending(d);
		msix_sync_bound(d);
		pthread_mutex_unlock(&d->msix.lock);
	}
	if (d->ops && d->ops->cfg_write)
		d->ops->cfg_write(d, off, len, v);
}

void pci_cfg_access(struct vm *vm, unsigned bdf, unsigned off, void *data, unsigned len, bool write)
{
	struct pci_bus *b = bus_of(vm);
	struct pci_dev *d = NULL;

	/* Bus 0, function 0 only; naturally aligned accesses of 1, 2 or 4. */
	if (b && bdf < 0x100 && !(bdf & 7) && (len == 1 || len == 2 || len == 4) &&
	    !(off & (len - 1)) && off + len <= PCI_CFG_SIZE)
		d = b->slot[bdf >> 3];
	if (!d) {
		if (!write)
			memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&b->lock);
	if (write)
		cfg_write(d, off, data, len);
	else
		cfg_read(d, off, data, len);
	pthread_mutex_unlock(&b->lock);
}

static void ecam_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_bus *b = opaque;

	if (len == 8) {            /* two dwords */
		pci_cfg_access(b->vm, (unsigned)(off >> 12), (unsigned)(off & 0xfff), data, 4, false);
		pci_cfg_access(b->vm, (unsigned)(off >> 12), (unsigned)(off & 0xfff) + 4, (uint8_t *)data + 4, 4, false);
		return;
	}
	pci_cfg_access(b->vm, (unsigned)(off >> 12), (unsigned)(off & 0xfff), data, len, false);
}

static void ecam_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_bus *b = opaque;

	if (len == 8) {
		pci_cfg_access(b->vm, (unsigned)(off >> 12), (unsigned)(off & 0xfff), (void *)(uintptr_t)data, 4, true);
		pci_cfg_access(b->vm, (unsigned)(off >> 12), (unsigned)(off & 0xfff) + 4,
			       (uint8_t *)(uintptr_t)data + 4, 4, true);
		return;
	}
	pci_cfg_access(b->vm, (unsigned)(off >> 12), (unsigned)(off & 0xfff), (void *)(uintptr_t)data, len, true);
}

static const struct io_ops ecam_ops = { .read = ecam_read, .write = ecam_write };

/* The address latch: vCPUs write it and read through it concurrently. */
static uint32_t cf8_latch(struct pci_bus *b)
{
	uint32_t a;

	pthread_mutex_lock(&b->lock);
	a = b->cf8;
	pthread_mutex_unlock(&b->lock);
	return a;
}

/* 0xcfc-0xcff (off 4-7 of the port range): the register the latch points
 * at, when its enable bit is set. */
static void cfc_access(struct pci_bus *b, uint64_t off, void *data, unsigned len, bool write)
{
	uint32_t a;

	if (off < 4 || off - 4 + len > 4)
		return;
	a = cf8_latch(b);
	if (a & 0x80000000u)
		pci_cfg_access(b->vm, (a >> 8) & 0xffff, (a & 0xfc) + (unsigned)(off - 4), data, len, write);
}

/* 0xcf8: address (dword only); 0xcf9: reset control (byte); 0xcfc-0xcff: data. */
static void cf8_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	uint32_t a;

	memset(data, 0xff, len);
	if (off == 0 && len == 4) {
		a = cf8_latch(b);
		memcpy(data, &a, 4);
		return;
	}
	cfc_access(b, off, data, len, false);
}

static void cf8_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	uint32_t a;

	if (off == 0 && len == 4) {
		memcpy(&a, data, 4);
		pthread_mutex_lock(&b->lock);
		b->cf8 = a & 0x80fffffcu;
		pthread_mutex_unlock(&b->lock);
		return;
	}
	if (off == 1 && len == 1) {
		if (*(const uint8_t *)data & 4)
			vm_request_exit(b->vm, HV_EXIT_RESET, "guest requested a reset (0xcf9)");
		return;
	}
	cfc_access(b, off, (void *)(uintptr_t)data, len, true);
}

static const struct io_ops cf8_ops = { .read = cf8_read, .write = cf8_write };

/* ------------------------------------------------------------ ACPI, e820 */

static size_t res_addr(uint8_t *p, uint8_t type, uint8_t tflags, uint64_t min, uint64_t max)
{
	uint64_t len = max - min + 1;

	if (max <= 0xffff && type != 0) {          /* Word Address Space */
		uint16_t f[5] = { 0, (uint16_t)min, (uint16_t)max, 0, (uint16_t)len };

		p[0] = 0x88, p[1] = 13, p[2] = 0, p[3] = type, p[4] = 0x0c, p[5] = tflags;
		for (int i = 0; i < 5; i++)
			p[6 + 2 * i] = (uint8_t)f[i], p[7 + 2 * i] = (uint8_t)(f[i] >> 8);
		return 16;
	}
	if (max <= 0xffffffffull) {                  /* DWord Address Space */
		uint32_t f[5] = { 0, (uint32_t)min, (uint32_t)max, 0, (uint32_t)len };

		p[0] = 0x87, p[1] = 23, p[2] = 0, p[3] = type, p[4] = 0x0c, p[5] = tflags;
		for (int i = 0; i < 5; i++)
			for (int k = 0; k < 4; k++)
				p[6 + 4 * i + k] = (uint8_t)(f[i] >> (8 * k));
		return 26;
	}
	{                                            /* QWord Address Space */
		uint64_t f[5] = { 0, min, max, 0, len };

		p[0] = 0x8a, p[1] = 43, p[2] = 0, p[3] = type, p[4] = 0x0c, p[5] = tflags;
		for (int i = 0; i < 5; i++)
			for (int k = 0; k < 8; k++)
				p[6 + 8 * i + k] = (uint8_t)(f[i] >> (8 * k));
		return 46;
	}
}

static void pci_dsdt(struct aml *a, struct vm *vm, void *opaque)
{
	struct pci_bus *b = opaque;
	uint8_t res[256];
	size_t n = 0;

	(void)vm;
	aml_device(a, "PCI0");
	aml_name_eisaid(a, "_HID", "PNP0A08");
	aml_name_eisaid(a, "_CID", "PNP0A03");
	aml_name_int(a, "_SEG", 0);
	aml_name_int(a, "_BBN", 0);
	aml_name_int(a, "_UID", 0);
	n += res_addr(res + n, 2, 0, 0, 0xff);                       /* buses */
	n += res_addr(res + n, 1, 3, 0, PORT_PCI_CONFIG - 1);        /* I/O below 0xcf8 */
	n += res_io(res + n, PORT_PCI_CONFIG, 8);
	n += res_addr(res + n, 1, 3, 0xd00, 0xffff);                 /* I/O above */
	n += res_addr(res + n, 0, 1, GPA_PCI_MMIO, GPA_PCI_MMIO + PCI_MMIO_SIZE - 1);
	if (b->mmio64_end > b->mmio64_base)
		n += res_addr(res + n, 0, 3, b->mmio64_base, b->mmio64_end - 1);
	n += res_end(res + n);
	aml_name_buffer(a, "_CRS", res, n);
	aml_close(a);

	/* The ECAM range belongs to the motherboard: Linux checks that MCFG's
	 * area is reserved before it uses it. */
	aml_device(a, "MRES");
	aml_name_eisaid(a, "_HID", "PNP0C02");
	aml_name_int(a, "_UID", 1);
	n = res_mem32(res, (uint32_t)GPA_ECAM, (uint32_t)ECAM_SIZE);
	n += res_end(res + n);
	aml_name_buffer(a, "_CRS", res, n);
	aml_close(a);
}

static size_t mcfg_table(struct vm *vm, uint8_t *buf, size_t cap, void *opaque)
{
	uint64_t base = GPA_ECAM;

	(void)vm;
	(void)opaque;
	if (cap < 60)
		return 0;
	memset(buf, 0, 60);
	acpi_table_header(buf, "MCFG", 1);
	for (int k = 0; k < 8; k++)
		buf[44 + k] = (uint8_t)(base >> (8 * k));
	buf[52] = buf[53] = 0;         /* segment 0 */
	buf[54] = 0;                   /* buses 0..255 */
	buf[55] = 0xff;
	return 60;
}

/* Guest physical address bits from KVM's CPUID (0x80000008), 36 if absent. */
static unsigned phys_bits(const struct vm *vm)
{
	if (vm->supported_cpuid)
		for (uint32_t i = 0; i < vm->supported_cpuid->nent; i++)
			if (vm->supported_cpuid->entries[i].function == 0x80000008)
				return vm->supported_cpuid->entries[i].eax & 0xff;
	return 40;
}

/* The host bridge is always there, devices or not.  The first device's
 * pci_register creates it (vm_device_need): pci.c links after the dev_*.c
 * files, and the bus must come before its functions and go after them. */
static int pci_create(struct vm *vm, struct verr *err)
{
	struct pci_bus *b = calloc(1, sizeof(*b));
	uint64_t ram_top = vm->mem.nslots > 1 ? vm->mem.slot[1].gpa + vm->mem.slot[1].size : GPA_4G;
	unsigned bits;

	if (!b)
		return verr_set(err, "out of memory");
	vm_device_set(vm, &hv_dev_pci, b);
	b->vm = vm;
	pthread_mutex_init(&b->lock, NULL);
	b->mmio32_next = GPA_PCI_MMIO;
	b->mmio64_base = b->mmio64_next = (ram_top + PCI_MMIO64_ALIGN - 1) & ~(PCI_MMIO64_ALIGN - 1);
	b->mmio64_end = b->mmio64_base + PCI_MMIO64_ALIGN;
	bits = phys_bits(vm);
	if (bits < 64 && b->mmio64_end > (1ull << bits)) {
		log_warn("PCI: no room for a 64-bit window below 2^%u; large BARs go below 4 GiB", bits);
		b->mmio64_end = b->mmio64_base;
	}
	pci_dev_init(&b->host, vm, "pci-host", HOST_VENDOR, HOST_DEVICE, 0, 0x060000, HOST_VENDOR, 0x1100);
	b->host.cfg[PCI_STATUS] = 0;
	b->host.slot = 0;
	b->slot[0] = &b->host;
	if (io_register(&vm->pio, PORT_PCI_CONFIG, 8, &cf8_ops, b, "pci-cf8", err) < 0 ||
	    io_register(&vm->mmio, GPA_ECAM, ECAM_SIZE, &ecam_ops, b, "pci-ecam", err) < 0)
		return -1;
	if (vm_add_dsdt(vm, pci_dsdt, b) < 0 || vm_add_acpi_table(vm, mcfg_table, b) < 0 ||
	    vm_reserve_e820(vm, GPA_ECAM, ECAM_SIZE) < 0)
		return verr_set(err, "PCI: no room for the DSDT entry, MCFG or the e820 reservation");
	return 0;
}

static void pci_destroy(struct vm *vm)
{
	struct pci_bus *b = bus_of(vm);

	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
	irq_routes_free(vm);
}

static int alloc_bar(struct pci_bus *b, struct pci_dev *d, int i, struct verr *err)
{
	struct pci_bar *bar = &d->bar[i];
	uint64_t align = bar->size < 4096 ? 4096 : bar->size, a;
	bool high = (bar->flags & PCI_BAR_HIGH) && (bar->flags & PCI_BAR_64);

	if (high) {
		a = (b->mmio64_next + align - 1) & ~(align - 1);
		if (a + bar->size <= b->mmio64_end && a + bar->size > a) {
			b->mmio64_next = a + bar->size;
			goto got;
		}
	}
	a = (b->mmio32_next + align - 1) & ~(align - 1);
	if (a + bar->size > GPA_PCI_MMIO + PCI_MMIO_SIZE)
		return verr_set(err, "%s: BAR%d of %llu MiB does not fit the PCI MMIO window", d->name, i,
				(unsigned long long)(bar->size >> 20));
	b->mmio32_next = a + bar->size;
got:
	pci_w32(d, PCI_BAR0 + 4 * (unsigned)i, (pci_r32(d, PCI_BAR0 + 4 * (unsigned)i) & 0xf) | (uint32_t)a);
	if (bar->flags & PCI_BAR_64)
		pci_w32(d, PCI_BAR0 + 4 * (unsigned)i + 4, (uint32_t)(a >> 32));
	else if (a >> 32)
		return verr_set(err, "%s: 32-bit BAR%d above 4 GiB", d->name, i);
	return 0;
}

int pci_register(struct vm *vm, struct pci_dev *d, struct verr *err)
{
	struct pci_bus *b;
	int s;

	if (vm_device_need(vm, &hv_dev_pci, err) < 0)
		return -1;
	b = bus_of(vm);
	for (s = 1; s < PCI_MAX_SLOTS && b->slot[s]; s++)
		;
	if (s == PCI_MAX_SLOTS)
		return verr_set(err, "%s: PCI bus 0 is full (%d devices)", d->name, PCI_MAX_SLOTS - 1);
	for (int i = 0; i < 6; i++)
		if (d->bar[i].size && alloc_bar(b, d, i, err) < 0)
			return -1;
	d->slot = s;
	pthread_mutex_lock(&b->lock);
	b->slot[s] = d;
	update_mappings(d);
	pthread_mutex_unlock(&b->lock);
	log_debug("PCI 00:%02x.0 %s %04x:%04x", s, d->name, pci_r16(d, PCI_VENDOR_ID), pci_r16(d, PCI_DEVICE_ID));
	return 0;
}

void pci_unregister(struct pci_dev *d)
{
	struct pci_bus *b = bus_of(d->vm);

	if (!b || d->slot < 1 || b->slot[d->slot] != d)
		return;
	pthread_mutex_lock(&b->lock);
	pci_w16(d, PCI_COMMAND, 0);
	update_mappings(d);
	b->slot[d->slot] = NULL;
	pthread_mutex_unlock(&b->lock);
}

void pci_dev_free(struct pci_dev *d)
{
	while (d->msix.nbound)
		pci_msix_unbind_eventfd(d, d->msix.bound[0].fd);
	if (d->msix.n) {
		pthread_mutex_destroy(&d->msix.lock);
		free(d->msix.v);
		d->msix.v = NULL;
		d->msix.n = 0;
	}
}

struct pci_dev *pci_slot(struct vm *vm, int slot)
{
	struct pci_bus *b = bus_of(vm);

	return b && slot >= 0 && slot < PCI_MAX_SLOTS ? b->slot[slot] : NULL;
}

/* Snapshots: the 0xCF8 latch, and per function its config space and
 * MSI-X table.  A loaded config space may differ from this build's only
 * in the bits a guest can write (wmask), and goes through the mappings a
 * guest's write would, so a snapshot can put nothing where a guest could
 * not. */
static int pci_save(struct vm *vm, struct snap_buf *sb, struct verr *err)
{
	struct pci_bus *b = bus_of(vm);

	(void)err;
	pthread_mutex_lock(&b->lock);
	sb_u32(sb, b->cf8);
	for (int s = 0; s < PCI_MAX_SLOTS; s++) {
		struct pci_dev *d = b->slot[s];

		if (!d)
			continue;
		sb_u32(sb, (uint32_t)s);
		sb_put(sb, d->name, sizeof(d->name));
		sb_put(sb, d->cfg, sizeof(d->cfg));
		sb_u32(sb, d->msix.n);
		if (d->msix.n)
			pthread_mutex_lock(&d->msix.lock);
		for (unsigned i = 0; i < d->msix.n; i++) {
			const struct msix_vec *v = &d->msix.v[i];

			sb_u32(sb, v->addr_lo);
			sb_u32(sb, v->addr_hi);
			sb_u32(sb, v->data);
			sb_u32(sb, v->ctrl);
			sb_u32(sb, v->pending);
		}
		if (d->msix.n)
			pthread_mutex_unlock(&d->msix.lock);
	}
	pthread_mutex_unlock(&b->lock);
	return 0;
}

/* Checks one function's state at r without applying it (apply false) or
 * applies what was checked. */
static int pci_load_dev(struct pci_bus *b, struct snap_rd *r, bool apply, struct verr *err)
{
	uint32_t s = rd_u32(r), n;
	char name[24];
	uint8_t *cfg = malloc(PCI_CFG_SIZE);
	struct pci_dev *d;

	if (!cfg)
		return verr_set(err, "out of memory");
	rd_get(r, name, sizeof(name));
	rd_get(r, cfg, PCI_CFG_SIZE);
	n = rd_u32(r);
	if (r->bad) {
		free(cfg);
		return verr_set(err, "ends inside a function's state");
	}
	d = s < PCI_MAX_SLOTS ? b->slot[s] : NULL;
	if (!d || memcmp(name, d->name, sizeof(name))) {
		free(cfg);
		return verr_set(err, "slot %u: the snapshot has a function named '%.23s' there, this machine %s%s", s,
				memchr(name, 0, sizeof(name)) ? name : "?", d ? d->name : "none", d ? "" : " at all");
	}
	for (unsigned o = 0; o < PCI_CFG_SIZE; o++)
		if ((cfg[o] ^ d->cfg[o]) & ~d->wmask[o]) {
			unsigned got = cfg[o] & ~d->wmask[o], want = d->cfg[o] & ~d->wmask[o];

			free(cfg);
			return verr_set(err, "%s: config byte 0x%x is 0x%02x, which no guest can write (read-only 0x%02x)",
					d->name, o, got, want);
		}
	if (n != d->msix.n) {
		free(cfg);
		return verr_set(err, "%s: %u MSI-X vectors, this function has %u", d->name, n, d->msix.n);
	}
	if (apply) {
		memcpy(d->cfg, cfg, PCI_CFG_SIZE);
		update_mappings(d);
	}
	free(cfg);
	if (n)
		pthread_mutex_lock(&d->msix.lock);
	for (unsigned i = 0; i < n; i++) {
		uint32_t lo = rd_u32(r), hi = rd_u32(r), data = rd_u32(r), ctrl = rd_u32(r), pend = rd_u32(r);

		if (r->bad || (lo & 3) || (ctrl & ~1u) || pend > 1) {
			pthread_mutex_unlock(&d->msix.lock);
			return verr_set(err, "%s: MSI-X vector %u: %s", d->name, i,
					r->bad ? "cut short" : "address, control or pending bits no table holds");
		}
		if (apply)
			d->msix.v[i] = (struct msix_vec){ .addr_lo = lo, .addr_hi = hi, .data = data, .ctrl = ctrl,
							  .pending = pend, .gsi = d->msix.v[i].gsi,
							  .irqfd = d->msix.v[i].irqfd };
	}
	if (n) {
		if (apply) {
			msix_flush_pending(d);
			msix_sync_bound(d);
		}
		pthread_mutex_unlock(&d->msix.lock);
	}
	return 0;
}

static int pci_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct pci_bus *b = bus_of(vm);
	struct snap_rd start;
	uint32_t cf8 = rd_u32(r);
	int nfound = 0, nhere = 0;

	for (int s = 0; s < PCI_MAX_SLOTS; s++)
		nhere += b->slot[s] != NULL;
	start = *r;
	/* Everything checked first, then applied: a refused snapshot leaves
	 * the bus as it was. */
	for (int pass = 0; pass < 2; pass++) {
		*r = start;
		nfound = 0;
		pthread_mutex_lock(&b->lock);
		while (!r->bad && r->off < r->len) {
			if (pci_load_dev(b, r, pass == 1, err) < 0) {
				pthread_mutex_unlock(&b->lock);
				return -1;
			}
			nfound++;
		}
		if (pass == 1)
			b->cf8 = cf8;
		pthread_mutex_unlock(&b->lock);
		if (r->bad)
			return verr_set(err, "state cut short");
		if (nfound != nhere)
			return verr_set(err, "%d functions in the snapshot, %d on this bus", nfound, nhere);
	}
	return 0;
}

HV_DEVICE_SNAP(pci, pci_create, pci_destroy, pci_save, pci_load);
