/* Inter-guest shared memory, compatible with QEMU's ivshmem-plain: PCI
 * 1af4:1110, class "RAM", BAR0 = the (unused) ivshmem registers, BAR2 = the
 * region, 64-bit and prefetchable, placed in the 64-bit window above RAM.
 * The region is a named file in /dev/shm (or on hugetlbfs) that every
 * vhpc-hv of the co-located guests of a job maps MAP_SHARED; BAR2 is a KVM
 * memory slot on that mapping, so guest accesses never exit and writes of
 * one guest are visible to the others at memory speed.  The slot follows
 * BAR2 when the guest moves it.
 *
 * The file is created (0600) when it does not exist and size= is given;
 * vhpc-hv never removes it: its owner (the node agent) does.
 *
 *   --shm path=FILE[,size=SIZE]          (YAML: shm: [{path:, size:}])
 *
 * Write-back caching in the guest: see hv/README.md ("Shared memory"). */
#include "fdpath.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/log.h"
#include "pci.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_MAX 4

struct shm_cfg {
	char *path;
	uint64_t size;
};

static const struct cf_field shm_fields[] = {
	{ .key = "path", .kind = CF_STR, .off = offsetof(struct shm_cfg, path), .flags = CF_REQUIRED },
	{ .key = "size", .kind = CF_SIZE, .off = offsetof(struct shm_cfg, size), .min = 4096,
	  .max = 1ll << 40, .what = "a power of two from 4K to 1T" },
	{ 0 }
};
static const struct cf_schema shm_schema = { "shm", sizeof(struct shm_cfg), shm_fields };

static int shm_check(void *inst, const char *where, struct verr *err)
{
	struct shm_cfg *c = inst;

	if (!c->path || !c->path[0])
		return verr_set(err, "%s: path= (the shared file) is required", where);
	if (c->size && (c->size & (c->size - 1)))
		return verr_set(err, "%s: size=%llu is not a power of two (a PCI BAR is)", where,
				(unsigned long long)c->size);
	return 0;
}

static const struct hv_devopt shm_opt = {
	.name = "shm", .usage = "path=FILE[,size=SIZE]", .schema = &shm_schema, .max = SHM_MAX,
	.positional = "path", .check = shm_check,
};
HV_DEVICE_OPTION(shm_opt);

struct ivshmem {
	struct pci_dev pci;
	char name[16];
	int fd;
	void *map;
	uint64_t size;
	int slot;
	uint32_t intr_mask;
	struct ivshmem *prev;      /* created before it; the VM's slot holds the newest */
};

HV_DEVICE_DECLARE(ivshmem);

/* BAR0: IntrMask, IntrStatus, IVPosition, Doorbell.  Without a doorbell
 * server (ivshmem-plain) only the mask is kept; the position reads 0. */
static void regs_read(struct pci_dev *d, int bar, uint64_t off, void *data, unsigned len)
{
	struct ivshmem *s = d->opaque;
	uint32_t v = 0;

	if (bar == 0 && off == 0)
		v = __atomic_load_n(&s->intr_mask, __ATOMIC_RELAXED);
	memset(data, 0, len);
	memcpy(data, &v, len < 4 ? len : 4);
}

static void regs_write(struct pci_dev *d, int bar, uint64_t off, const void *data, unsigned len)
{
	struct ivshmem *s = d->opaque;
	uint32_t v = 0;

	if (bar != 0 || off != 0)
		return;
	memcpy(&v, data, len < 4 ? len : 4);
	__atomic_store_n(&s->intr_mask, v, __ATOMIC_RELAXED);
}

static void region_map(struct pci_dev *d, int bar, uint64_t addr, bool mapped)
{
	struct ivshmem *s = d->opaque;
	struct kvm_userspace_memory_region r = {
		.slot = (uint32_t)s->slot,
		.guest_phys_addr = addr,
		.memory_size = mapped ? s->size : 0,
		.userspace_addr = (uint64_t)(uintptr_t)s->map,
	};

	if (bar != 2 || d->vm->vm_fd < 0)
		return;
	if (ioctl(d->vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0 && mapped)
		/* e.g. the guest put the BAR over RAM: it simply is not there */
		log_warn("%s: cannot map the region at 0x%llx: %s", s->name, (unsigned long long)addr, strerror(errno));
}

static const struct pci_dev_ops shm_ops = { .bar_read = regs_read, .bar_write = regs_write, .bar_map = region_map };

/* A file that appears under its name already has its size: it is made and
 * sized under a temporary name and linked into place.  Created in place
 * with O_EXCL, a second vhpc-hv starting at the same moment could open it
 * between creation and ftruncate and find 0 bytes (seen in CI).  Returns
 * the fd, or -1 with errno EEXIST when another vhpc-hv linked it first. */
static int create_sized(const char *path, uint64_t size)
{
	char tmp[PATH_MAX];
	int fd, e;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);   /* mode 0600 */
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) < 0 || link(tmp, path) < 0) {
		e = errno;
		unlink(tmp);
		close(fd);
		errno = e;
		return -1;
	}
	unlink(tmp);
	return fd;
}

static int shm_open_file(struct ivshmem *s, const struct shm_cfg *c, const char *where, struct verr *err)
{
	struct stat st;

	for (int tries = 0; tries < 2; tries++) {
		s->fd = hv_open(c->path, O_RDWR, 0);
		if (s->fd >= 0 || errno != ENOENT)
			break;
		if (!c->size)
			return verr_set(err, "%s: %s does not exist; give size= to create it", where, c->path);
		s->fd = create_sized(c->path, c->size);
		if (s->fd >= 0)
			break;
		if (errno != EEXIST)  /* else another vhpc-hv was quicker: open it */
			return verr_errno(err, "%s: creating %s with %llu bytes", where, c->path,
					  (unsigned long long)c->size);
	}
	if (s->fd < 0)
		return verr_errno(err, "%s: opening %s", where, c->path);
	if (fstat(s->fd, &st) < 0)
		return verr_errno(err, "%s: %s", where, c->path);
	if (!S_ISREG(st.st_mode))
		return verr_set(err, "%s: %s is not a regular file", where, c->path);
	s->size = (uint64_t)st.st_size;
	if (c->size && s->size != c->size)
		return verr_set(err, "%s: %s is %llu bytes, not size=%llu", where, c->path,
				(unsigned long long)s->size, (unsigned long long)c->size);
	if (s->size < 4096 || (s->size & (s->size - 1)))
		return verr_set(err, "%s: %s is %llu bytes; a region must be a power of two of at least 4 KiB", where,
				c->path, (unsigned long long)s->size);
	s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return verr_errno(err, "%s: mapping %s (%llu bytes; on hugetlbfs the size must be whole hugepages)",
				  where, c->path, (unsigned long long)s->size);
	}
	return 0;
}

static int shm_create(struct vm *vm, struct verr *err)
{
	size_t n = hv_dev_count(vm->cfg, &shm_opt);

	for (size_t i = 0; i < n; i++) {
		const struct shm_cfg *c = hv_dev_get(vm->cfg, &shm_opt, i);
		const char *where = hv_dev_where(vm->cfg, &shm_opt, i);
		struct ivshmem *s = calloc(1, sizeof(*s));

		if (!s)
			return verr_set(err, "out of memory");
		s->prev = vm_device(vm, &hv_dev_ivshmem);
		vm_device_set(vm, &hv_dev_ivshmem, s);
		s->fd = -1;
		snprintf(s->name, sizeof(s->name), "ivshmem%zu", i);
		if (shm_open_file(s, c, where, err) < 0)
			return -1;
		s->slot = vm_alloc_slot(vm);
		pci_dev_init(&s->pci, vm, s->name, PCI_VENDOR_REDHAT_QUMRANET, 0x1110, 1, 0x050000,
			     PCI_VENDOR_REDHAT_QUMRANET, 0x1100);
		s->pci.cfg[PCI_STATUS] = 0;        /* no capabilities */
		s->pci.ops = &shm_ops;
		s->pci.opaque = s;
		pci_add_bar(&s->pci, 0, 256, 0);
		pci_add_bar(&s->pci, 2, s->size, PCI_BAR_64 | PCI_BAR_PREFETCH | PCI_BAR_HIGH | PCI_BAR_RAM);
		if (pci_register(vm, &s->pci, err) < 0)
			return verr_wrap(err, "%s", where);
		log_info("%s: %s, %llu KiB at 0x%llx", s->name, c->path, (unsigned long long)(s->size >> 10),
			 (unsigned long long)pci_bar_addr(&s->pci, 2));
	}
	return 0;
}

/* Newest first, like the devices themselves. */
static void shm_destroy(struct vm *vm)
{
	for (struct ivshmem *s = vm_device(vm, &hv_dev_ivshmem), *prev; s; s = prev) {
		prev = s->prev;
		if (s->pci.slot > 0)
			pci_unregister(&s->pci);
		if (s->map)
			munmap(s->map, s->size);
		if (s->fd >= 0)
			close(s->fd);
		free(s);
	}
}

/* Snapshots: each region's size and the interrupt mask, newest first.
 * Where the guest put the region (BAR2) is PCI config space, which the
 * bus saves and maps again on load; the region's contents are the file's,
 * the caller's to keep (hv.h). */
static int shm_save(struct vm *vm, struct snap_buf *sb, struct verr *err)
{
	(void)err;
	for (struct ivshmem *s = vm_device(vm, &hv_dev_ivshmem); s; s = s->prev) {
		sb_u64(sb, s->size);
		sb_u32(sb, __atomic_load_n(&s->intr_mask, __ATOMIC_RELAXED));
	}
	return 0;
}

static int shm_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct snap_rd start = *r;

	for (int pass = 0; pass < 2; pass++) {
		*r = start;
		for (struct ivshmem *s = vm_device(vm, &hv_dev_ivshmem); s; s = s->prev) {
			uint64_t size = rd_u64(r);
			uint32_t mask = rd_u32(r);

			if (r->bad)
				return verr_set(err, "%s: state cut short", s->name);
			if (size != s->size)
				return verr_set(err, "%s: the snapshot's region has %llu bytes, this one %llu", s->name,
						(unsigned long long)size, (unsigned long long)s->size);
			if (pass == 1)
				__atomic_store_n(&s->intr_mask, mask, __ATOMIC_RELAXED);
		}
		if (!rd_done(r))
			return verr_set(err, "%zu bytes after the last region's state", r->len - r->off);
	}
	return 0;
}

HV_DEVICE_SNAP(ivshmem, shm_create, shm_destroy, shm_save, shm_load);
