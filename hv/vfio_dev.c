/* A host PCI function assigned to the guest through VFIO.  vhpc-hv opens
 * nothing itself: the node agent binds the function to vfio-pci, opens
 * the container and the group, sets type1v2 and passes the descriptors
 * (the jail has no /dev/vfio, /sys or privileges):
 *
 *   --vfio container=N,device=N[,group=N][,name=DDDD:BB:DD.F]
 *
 * Guest RAM is mapped for the device's DMA (VFIO_IOMMU_MAP_DMA, IOVA =
 * guest-physical address) before the guest runs.  BARs that VFIO lets us
 * mmap are KVM memory slots that follow the BAR; the BAR holding the MSI-X
 * table and PBA, and BARs VFIO will not map, are trapped and forwarded
 * with pread/pwrite.  MSI-X is pci.c's emulated table: each vector has an
 * eventfd that VFIO signals (VFIO_DEVICE_SET_IRQS, once the guest enables
 * MSI-X) and that pci.c binds to the vector's GSI as a KVM irqfd while the
 * vector can deliver, so an interrupt reaches the guest without vhpc-hv.
 * Config space: vfio_cfg.c.  On teardown interrupts are switched off and
 * the function is reset (VFIO_DEVICE_RESET); when vhpc-hv dies instead,
 * the kernel's vfio-pci resets it as the last descriptor closes, and the
 * node agent gives it back to its driver.
 *
 * Named vfio_dev.c rather than dev_vfio.c so that it links, and so is
 * created, after every dev_*.c: the guest's own devices take the lower
 * PCI slots, and a passed-through NIC never becomes the guest's eth0 (the
 * job network, guest/initramfs/init).  Guest RAM stays mapped for DMA
 * until the container closes, which unmaps it. */
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/log.h"
#include "vfio.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define VFIO_DEV_MAX 4

struct vfio_opt {
	long long container, device, group;
	char *name;
};

static const struct cf_field vfio_fields[] = {
	{ .key = "container", .kind = CF_INT, .off = offsetof(struct vfio_opt, container), .min = 3, .max = 65535,
	  .flags = CF_REQUIRED },
	{ .key = "device", .kind = CF_INT, .off = offsetof(struct vfio_opt, device), .min = 3, .max = 65535,
	  .flags = CF_REQUIRED },
	{ .key = "group", .kind = CF_INT, .off = offsetof(struct vfio_opt, group), .min = 3, .max = 65535 },
	{ .key = "name", .kind = CF_STR, .off = offsetof(struct vfio_opt, name) },
	{ 0 }
};
static const struct cf_schema vfio_schema = { "vfio", sizeof(struct vfio_opt), vfio_fields };

static int vfio_check(void *inst, const char *where, struct verr *err)
{
	struct vfio_opt *o = inst;

	if (o->container == o->device || (o->group && (o->group == o->container || o->group == o->device)))
		return verr_set(err, "%s: container=, device= and group= must be three different descriptors", where);
	if (o->name && (!o->name[0] || strlen(o->name) > 16 || strspn(o->name, "0123456789abcdef:.") != strlen(o->name)))
		return verr_set(err, "%s: name=%s is not a PCI address (DDDD:BB:DD.F)", where, o->name);
	return 0;
}

static const struct hv_devopt vfio_opt = {
	.name = "vfio", .usage = "container=N,device=N[,group=N][,name=DDDD:BB:DD.F]", .schema = &vfio_schema,
	.max = VFIO_DEV_MAX, .check = vfio_check,
};
HV_DEVICE_OPTION(vfio_opt);

struct vbar {
	uint64_t off, size;        /* in the device fd */
	void *map;                 /* mmapped (a memory slot), or NULL: trapped */
	int slot;
};

struct vfio_dev {
	struct pci_dev pci;
	char name[24];
	int container, device, group;
	struct vfio_cfg c;
	uint64_t cfg_off;          /* the config region in the device fd */
	struct vbar bar[6];
	int efd[VFIO_MAX_VECTORS];
	bool irqs_on, can_reset;
	uint64_t dma_mapped;       /* bytes of guest RAM mapped for DMA */
	struct vfio_dev *prev;
};

HV_DEVICE_DECLARE(vfio);

static int region_info(struct vfio_dev *v, unsigned idx, struct vfio_region_info *ri)
{
	memset(ri, 0, sizeof(*ri));
	ri->argsz = sizeof(*ri);
	ri->index = idx;
	return ioctl(v->device, VFIO_DEVICE_GET_REGION_INFO, ri);
}

/* ------------------------------------------------------ guest's accesses */

static void bar_rw(struct pci_dev *d, int bar, uint64_t off, void *data, unsigned len, bool write)
{
	struct vfio_dev *v = d->opaque;
	struct vbar *b = &v->bar[bar];
	ssize_t n;

	if (off >= b->size || len > b->size - off) {
		if (!write)
			memset(data, 0xff, len);
		return;
	}
	n = write ? pwrite(v->device, data, len, (off_t)(b->off + off)) : pread(v->device, data, len, (off_t)(b->off + off));
	if (n != (ssize_t)len && !write)
		memset(data, 0xff, len);
}

static void bar_read(struct pci_dev *d, int bar, uint64_t off, void *data, unsigned len)
{
	bar_rw(d, bar, off, data, len, false);
}

static void bar_write(struct pci_dev *d, int bar, uint64_t off, const void *data, unsigned len)
{
	bar_rw(d, bar, off, (void *)(uintptr_t)data, len, true);
}

static void bar_map(struct pci_dev *d, int bar, uint64_t addr, bool mapped)
{
	struct vfio_dev *v = d->opaque;
	struct vbar *b = &v->bar[bar];
	struct kvm_userspace_memory_region r = {
		.slot = (uint32_t)b->slot, .guest_phys_addr = addr,
		.memory_size = mapped ? b->size : 0, .userspace_addr = (uint64_t)(uintptr_t)b->map,
	};

	if (!b->map || d->vm->vm_fd < 0)
		return;
	if (ioctl(d->vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0 && mapped)
		log_warn("%s: cannot map BAR%d at 0x%llx: %s", v->name, bar, (unsigned long long)addr, strerror(errno));
}

static bool cfg_read(struct pci_dev *d, unsigned off, unsigned len, uint32_t *val)
{
	struct vfio_dev *v = d->opaque;
	int roff[4];

	if (!vfio_cfg_live_map(&v->c, off, len, roff))
		return false;
	for (unsigned i = 0; i < len; i++) {
		uint8_t b;

		if (roff[i] < 0 || pread(v->device, &b, 1, (off_t)(v->cfg_off + (unsigned)roff[i])) != 1)
			continue;
		*val = (*val & ~(0xffu << (8 * i))) | (uint32_t)b << (8 * i);
	}
	return true;
}

/* MSI-X on: VFIO signals each vector's eventfd, which pci.c has bound to
 * the vector's GSI.  Off: the host's vectors go. */
static void set_irqs(struct vfio_dev *v, bool on)
{
	size_t sz = sizeof(struct vfio_irq_set) + sizeof(int) * VFIO_MAX_VECTORS;
	union {
		struct vfio_irq_set s;
		uint8_t b[sizeof(struct vfio_irq_set) + sizeof(int) * VFIO_MAX_VECTORS];
	} u;

	if (on == v->irqs_on)
		return;
	memset(&u, 0, sizeof(u));
	u.s.argsz = (uint32_t)sz;
	u.s.index = VFIO_PCI_MSIX_IRQ_INDEX;
	u.s.flags = VFIO_IRQ_SET_ACTION_TRIGGER | (on ? VFIO_IRQ_SET_DATA_EVENTFD : VFIO_IRQ_SET_DATA_NONE);
	if (on) {
		u.s.count = v->c.msix_n;
		memcpy(u.s.data, v->efd, sizeof(int) * v->c.msix_n);
	}
	if (ioctl(v->device, VFIO_DEVICE_SET_IRQS, &u.s) < 0) {
		log_warn("%s: VFIO_DEVICE_SET_IRQS (MSI-X %s, %u vectors): %s", v->name, on ? "on" : "off",
			 v->c.msix_n, strerror(errno));
		return;
	}
	v->irqs_on = on;
	log_debug("%s: MSI-X %s", v->name, on ? "on" : "off");
}

static void cfg_write(struct pci_dev *d, unsigned off, unsigned len, uint32_t val)
{
	struct vfio_dev *v = d->opaque;

	(void)val;
	if (off <= PCI_COMMAND + 1 && off + len > PCI_COMMAND) {
		uint16_t real = 0, want;

		if (pread(v->device, &real, 2, (off_t)(v->cfg_off + PCI_COMMAND)) == 2) {
			want = vfio_cfg_command(real, pci_r16(d, PCI_COMMAND));
			if (want != real && pwrite(v->device, &want, 2, (off_t)(v->cfg_off + PCI_COMMAND)) != 2)
				log_warn("%s: command register: %s", v->name, strerror(errno));
		}
	}
	if (off <= d->msix.cap + 3 && off + len > d->msix.cap + 3)
		set_irqs(v, pci_msix_enabled(d));
}

static const struct pci_dev_ops vfio_ops = {
	.bar_read = bar_read, .bar_write = bar_write, .bar_map = bar_map,
	.cfg_read = cfg_read, .cfg_write = cfg_write,
};

/* --------------------------------------------------------------- set-up */

static int check_fds(struct vfio_dev *v, struct verr *err)
{
	struct vfio_device_info di = { .argsz = sizeof(di) };

	/* The agent made the container type1v2 with the group in it; a
	 * container that is not set up fails the first MAP_DMA instead. */
	if (ioctl(v->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION)
		return verr_set(err, "%s: container= is not a VFIO container descriptor", v->name);
	if (ioctl(v->device, VFIO_DEVICE_GET_INFO, &di) < 0)
		return verr_errno(err, "%s: device= is not a VFIO device descriptor", v->name);
	if (!(di.flags & VFIO_DEVICE_FLAGS_PCI) || di.num_regions <= VFIO_PCI_CONFIG_REGION_INDEX)
		return verr_set(err, "%s: the VFIO device is not a PCI function", v->name);
	v->can_reset = di.flags & VFIO_DEVICE_FLAGS_RESET;
	if (!v->can_reset)
		log_warn("%s: VFIO has no reset for this function (no FLR, PM or bus reset): its state is what the "
			 "guest left until its host driver probes it again", v->name);
	return 0;
}

static int read_real(struct vfio_dev *v, struct vfio_real *r, struct verr *err)
{
	struct vfio_region_info ri;

	memset(r, 0, sizeof(*r));
	if (region_info(v, VFIO_PCI_CONFIG_REGION_INDEX, &ri) < 0 || ri.size < 256)
		return verr_errno(err, "%s: no config region", v->name);
	v->cfg_off = ri.offset;
	if (pread(v->device, r->cfg, sizeof(r->cfg), (off_t)ri.offset) != (ssize_t)sizeof(r->cfg))
		return verr_errno(err, "%s: reading its config space", v->name);
	for (unsigned i = 0; i < 6; i++) {
		if (region_info(v, VFIO_PCI_BAR0_REGION_INDEX + i, &ri) < 0)
			return verr_errno(err, "%s: BAR%u region", v->name, i);
		r->bar_size[i] = ri.size;
		v->bar[i].off = ri.offset;
		v->bar[i].size = ri.size;
		v->bar[i].slot = -1;
	}
	return 0;
}

/* Maps what VFIO lets us map, except the MSI-X BAR (its table must trap). */
static int map_bars(struct vfio_dev *v, struct vm *vm, struct verr *err)
{
	for (int i = 0; i < 6; i++) {
		struct vbar *b = &v->bar[i];
		struct vfio_region_info ri;
		void *m;

		if (!v->pci.bar[i].size || i == v->c.msix_bar || b->size < 4096 || region_info(v, (unsigned)i, &ri) < 0 ||
		    !(ri.flags & VFIO_REGION_INFO_FLAG_MMAP))
			continue;
		m = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, v->device, (off_t)b->off);
		if (m == MAP_FAILED) {
			log_info("%s: BAR%d not mappable (%s); trapped", v->name, i, strerror(errno));
			continue;
		}
		b->map = m;
		b->slot = vm_alloc_slot(vm);
		v->pci.bar[i].flags |= PCI_BAR_RAM;
	}
	(void)err;
	return 0;
}

/* Guest RAM for the device's DMA: IOVA is the guest-physical address, so
 * the guest's own driver programs the device with addresses it knows. */
static int map_dma(struct vfio_dev *v, struct vm *vm, struct verr *err)
{
	uint64_t t0 = now_ns();

	for (int i = 0; i < vm->mem.nslots; i++) {
		const struct mem_slot *s = &vm->mem.slot[i];
		struct vfio_iommu_type1_dma_map m = {
			.argsz = sizeof(m), .flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
			.vaddr = (uint64_t)(uintptr_t)(vm->mem.host + s->ram_off), .iova = s->gpa, .size = s->size,
		};

		if (ioctl(v->container, VFIO_IOMMU_MAP_DMA, &m) < 0)
			return verr_errno(err, "%s: mapping guest RAM 0x%llx+%llu MiB for DMA%s", v->name,
					  (unsigned long long)s->gpa, (unsigned long long)(s->size >> 20),
					  errno == ENOMEM ? " (RLIMIT_MEMLOCK below the guest's RAM?)" : "");
		v->dma_mapped += s->size;
	}
	log_info("%s: %llu MiB of guest RAM mapped for DMA in %.1f ms", v->name,
		 (unsigned long long)(v->dma_mapped >> 20), (double)(now_ns() - t0) / 1e6);
	return 0;
}

static int irq_fds(struct vfio_dev *v, struct verr *err)
{
	for (unsigned i = 0; i < v->c.msix_n; i++) {
		v->efd[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (v->efd[i] < 0)
			return verr_errno(err, "%s: eventfd", v->name);
		if (pci_msix_bind_eventfd(&v->pci, i, v->efd[i]) < 0)
			return verr_set(err, "%s: MSI-X vector %u cannot be bound to a KVM irqfd", v->name, i);
	}
	return 0;
}

static int vfio_one(struct vm *vm, const struct vfio_opt *o, const char *where, struct vfio_dev *v,
		    struct verr *err)
{
	struct vfio_real r;

	v->container = (int)o->container;
	v->device = (int)o->device;
	v->group = o->group ? (int)o->group : -1;
	if (check_fds(v, err) < 0 || read_real(v, &r, err) < 0 ||
	    vfio_cfg_build(&v->pci, vm, v->name, &r, &v->c, err) < 0)
		return verr_wrap(err, "%s", where);
	v->pci.ops = &vfio_ops;
	v->pci.opaque = v;
	if (map_bars(v, vm, err) < 0 || map_dma(v, vm, err) < 0 || pci_register(vm, &v->pci, err) < 0 ||
	    irq_fds(v, err) < 0)
		return verr_wrap(err, "%s", where);
	log_info("%s: %04x:%04x class %06x, %u MSI-X vectors, %d capabilities read live, %d hidden", v->name,
		 pci_r16(&v->pci, PCI_VENDOR_ID), pci_r16(&v->pci, PCI_DEVICE_ID),
		 pci_r32(&v->pci, PCI_REVISION) >> 8, v->c.msix_n, v->c.nlive, v->c.nhidden);
	for (int i = 0; i < 6; i++)
		if (v->pci.bar[i].size)
			log_info("%s: BAR%d %llu KiB at 0x%llx, %s", v->name, i,
				 (unsigned long long)(v->pci.bar[i].size >> 10),
				 (unsigned long long)pci_bar_addr(&v->pci, i),
				 v->bar[i].map ? "mapped" : i == v->c.msix_bar ? "trapped (MSI-X)" : "trapped");
	return 0;
}

static int vfio_create(struct vm *vm, struct verr *err)
{
	size_t n = hv_dev_count(vm->cfg, &vfio_opt);

	for (size_t i = 0; i < n; i++) {
		const struct vfio_opt *o = hv_dev_get(vm->cfg, &vfio_opt, i);
		struct vfio_dev *v = calloc(1, sizeof(*v));

		if (!v)
			return verr_set(err, "out of memory");
		v->prev = vm_device(vm, &hv_dev_vfio);
		vm_device_set(vm, &hv_dev_vfio, v);
		v->container = v->device = v->group = -1;
		for (int k = 0; k < VFIO_MAX_VECTORS; k++)
			v->efd[k] = -1;
		for (int k = 0; k < 6; k++)
			v->bar[k].slot = -1;
		snprintf(v->name, sizeof(v->name), "vfio%zu%s%s", i, o->name ? " " : "", o->name ? o->name : "");
		if (vfio_one(vm, o, hv_dev_where(vm->cfg, &vfio_opt, i), v, err) < 0)
			return -1;
	}
	return 0;
}

/* Interrupts off, the function reset, DMA unmapped: what the next user
 * of the function (its host driver) finds is a function at rest. */
static void vfio_destroy(struct vm *vm)
{
	(void)vm;
	for (struct vfio_dev *v = vm_device(vm, &hv_dev_vfio), *prev; v; v = prev) {
		prev = v->prev;
		if (v->pci.slot > 0)
			pci_unregister(&v->pci);
		if (v->irqs_on)
			set_irqs(v, false);
		if (v->device >= 0 && v->pci.slot > 0) {
			uint16_t cmd = 0;

			/* No more DMA from here, whatever the reset does. */
			if (pread(v->device, &cmd, 2, (off_t)(v->cfg_off + PCI_COMMAND)) == 2) {
				cmd = (uint16_t)(cmd & ~PCI_CMD_MASTER);
				(void)!pwrite(v->device, &cmd, 2, (off_t)(v->cfg_off + PCI_COMMAND));
			}
		}
		if (v->device >= 0 && v->can_reset) {
			uint64_t t0 = now_ns();

			if (ioctl(v->device, VFIO_DEVICE_RESET) < 0)
				log_warn("%s: VFIO_DEVICE_RESET: %s", v->name, strerror(errno));
			else
				log_info("%s: reset in %.1f ms", v->name, (double)(now_ns() - t0) / 1e6);
		}
		pci_dev_free(&v->pci);
		for (int i = 0; i < 6; i++)
			if (v->bar[i].map)
				munmap(v->bar[i].map, v->bar[i].size);
		for (int i = 0; i < VFIO_MAX_VECTORS; i++)
			if (v->efd[i] >= 0)
				close(v->efd[i]);
		if (v->device >= 0)
			close(v->device);
		if (v->group >= 0)
			close(v->group);
		if (v->container >= 0)
			close(v->container);
		free(v);
	}
}

HV_DEVICE(vfio, vfio_create, vfio_destroy);
