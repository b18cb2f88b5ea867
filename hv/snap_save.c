/* Writing a snapshot of a paused VM into a descriptor the caller opened
 * (vhpc-hv is jailed and opens no paths): header, fingerprint, VM and
 * vCPU state, each device's own state, then RAM as extents of the pages
 * that hold data, each section with its length and crc32c. */
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/log.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Extents are cut at this size so one pwrite stays bounded. */
#define EXTENT_MAX (64ull << 20)

struct out {
	int fd;
	uint64_t off;
	const char *what;          /* section being written, for errors */
};

static int put(struct out *o, const void *p, size_t n, struct verr *err)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = pwrite(o->fd, b, n, (off_t)o->off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return verr_errno(err, "writing the snapshot (%s section, offset %llu)", o->what,
					  (unsigned long long)o->off);
		}
		b += w;
		n -= (size_t)w;
		o->off += (uint64_t)w;
	}
	return 0;
}

static void sec_hdr(uint8_t h[SNAP_SECTION_HDR], uint32_t tag, uint32_t idx, uint64_t len, uint32_t crc)
{
	uint32_t zero = 0;

	memcpy(h, &tag, 4);
	memcpy(h + 4, &idx, 4);
	memcpy(h + 8, &len, 8);
	memcpy(h + 16, &crc, 4);
	memcpy(h + 20, &zero, 4);
}

static int section(struct out *o, uint32_t tag, uint32_t idx, const struct snap_buf *b, const char *what,
		   struct verr *err)
{
	uint8_t h[SNAP_SECTION_HDR];

	if (b->oom)
		return verr_set(err, "out of memory building the %s section", what);
	o->what = what;
	sec_hdr(h, tag, idx, b->len, crc32c(0, b->p, b->len));
	return put(o, h, sizeof(h), err) < 0 || put(o, b->p, b->len, err) < 0 ? -1 : 0;
}

static bool page_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)p;
	uint64_t acc = 0;

	for (size_t i = 0; i < SNAP_PAGE / 8; i++)
		acc |= q[i];
	return acc == 0;
}

static int ram_extent(struct out *o, const struct guest_mem *m, uint64_t a, uint64_t len, uint32_t *crc,
		      uint64_t *ram_bytes, struct verr *err)
{
	uint64_t h[2] = { a, len };

	*crc = crc32c(*crc, h, sizeof(h));
	*crc = crc32c(*crc, m->host + a, len);
	*ram_bytes += len;
	return put(o, h, sizeof(h), err) < 0 || put(o, m->host + a, len, err) < 0 ? -1 : 0;
}

/* Pages never touched are holes in the memfd (SEEK_DATA skips them);
 * pages touched but zero (prefaulted RAM is all "data") are skipped one
 * by one. */
static int save_ram(struct out *o, const struct guest_mem *m, uint64_t *ram_bytes, struct verr *err)
{
	uint8_t h[SNAP_SECTION_HDR];
	uint64_t start = o->off, pos = 0;
	uint32_t crc = 0;

	o->what = "RAM";
	memset(h, 0, sizeof(h));
	if (put(o, h, sizeof(h), err) < 0)
		return -1;
	while (pos < m->size) {
		off_t d = lseek(m->fd, (off_t)pos, SEEK_DATA), e;
		uint64_t run = 0, end;

		if (d < 0 && errno == ENXIO)
			break;
		if (d < 0)
			d = (off_t)pos;       /* no SEEK_DATA here: scan it all */
		e = lseek(m->fd, d, SEEK_HOLE);
		end = e < 0 || (uint64_t)e > m->size ? m->size : (uint64_t)e;
		for (uint64_t p = (uint64_t)d & ~(SNAP_PAGE - 1); p < end; p += SNAP_PAGE) {
			bool z = page_zero(m->host + p);

			if (!z && !run)
				run = p + 1;     /* start + 1: 0 means none */
			if (run && (z || p + SNAP_PAGE - (run - 1) >= EXTENT_MAX || p + SNAP_PAGE >= end)) {
				uint64_t s = run - 1, stop = z ? p : p + SNAP_PAGE;

				if (ram_extent(o, m, s, stop - s, &crc, ram_bytes, err) < 0)
					return -1;
				run = 0;
			}
		}
		pos = end;
	}
	sec_hdr(h, SNAP_RAM, 0, o->off - start - SNAP_SECTION_HDR, crc);
	if (pwrite(o->fd, h, sizeof(h), (off_t)start) != (ssize_t)sizeof(h))
		return verr_errno(err, "writing the snapshot (RAM section header)");
	return 0;
}

int snap_check(const struct vm *vm, struct verr *err)
{
	size_t n;
	const struct hv_device *d = devices_list(&n);

	for (size_t i = 0; i < n; i++) {
		if (!vm->dev[i] || d[i].save)
			continue;
		if (!strcmp(d[i].name, "vfio"))
			return verr_set(err, "a passed-through PCI function (--vfio) cannot be snapshotted: "
				       "its state is in the hardware");
		return verr_set(err, "device %s cannot be snapshotted (it saves no state)", d[i].name);
	}
	return 0;
}

static int save_all(struct vm *vm, int fd, struct snap_stats *st, struct verr *err)
{
	uint64_t t0 = now_ns();
	const struct snap_host *h = vm->snaph;
	uint8_t hdr[SNAP_HEADER_SIZE];
	struct out o = { .fd = fd, .what = "header" };
	struct snap_buf b = { 0 };
	struct stat sb;
	char *fp;
	uint32_t v, crc;
	size_t nd;
	const struct hv_device *devs = devices_list(&nd);
	enum vm_state s;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&vm->lock);
	s = vm->state;
	pthread_mutex_unlock(&vm->lock);
	if (s != VM_PAUSED)
		return verr_set(err, "the guest is %s: pause it first", vm_state_name(s));
	if (!h)
		return verr_set(err, "snapshots need KVM's host type, which this VM does not have");
	if (fstat(fd, &sb) < 0)
		return verr_errno(err, "the snapshot descriptor");
	if (!S_ISREG(sb.st_mode) || sb.st_size != 0)
		return verr_set(err, "the snapshot descriptor must be an empty regular file (it is %s of %lld bytes)",
				S_ISREG(sb.st_mode) ? "a file" : "no regular file", (long long)sb.st_size);
	if ((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return verr_set(err, "the snapshot descriptor is open read-only");
	if (snap_check(vm, err) < 0)
		return -1;

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, SNAP_MAGIC, 8);
	v = SNAP_VERSION;
	memcpy(hdr + 8, &v, 4);
	v = SNAP_HEADER_SIZE;
	memcpy(hdr + 12, &v, 4);
	snprintf((char *)hdr + 16, 32, "%s", VHPC_VERSION);
	memcpy(hdr + 48, h->vendor, 12);
	memcpy(hdr + 60, &h->kvm_api, 4);
	memcpy(hdr + 64, &h->xsave_size, 4);
	memcpy(hdr + 68, &h->cpuid_crc, 4);
	memcpy(hdr + 72, &h->nmsrs, 4);
	memcpy(hdr + 76, &h->msrs_crc, 4);
	memcpy(hdr + 80, &vm->mem.size, 8);
	crc = crc32c(0, hdr, SNAP_HEADER_SIZE - 4);
	memcpy(hdr + SNAP_HEADER_SIZE - 4, &crc, 4);
	if (put(&o, hdr, sizeof(hdr), err) < 0)
		return -1;

	fp = snap_fingerprint(vm);
	if (!fp)
		return verr_set(err, "out of memory");
	sb_put(&b, fp, strlen(fp));
	free(fp);
	if (section(&o, SNAP_CONF, 0, &b, "configuration", err) < 0)
		goto fail;
	b.len = 0;
	if (snap_get_vm(vm, &b, err) < 0 || section(&o, SNAP_VMST, 0, &b, "irqchip", err) < 0)
		goto fail;
	for (int i = 0; i < vm->nvcpus; i++) {
		b.len = 0;
		if (snap_get_vcpu(vm, i, &b, err) < 0 || section(&o, SNAP_VCPU, (uint32_t)i, &b, "vCPU", err) < 0)
			goto fail;
	}
	for (size_t i = 0; i < nd; i++) {
		char name[32] = { 0 };

		if (!vm->dev[i])
			continue;
		b.len = 0;
		snprintf(name, sizeof(name), "%s", devs[i].name);
		sb_put(&b, name, sizeof(name));
		if (devs[i].save(vm, &b, err) < 0) {
			verr_wrap(err, "device %s", devs[i].name);
			goto fail;
		}
		if (section(&o, SNAP_DEV, (uint32_t)i, &b, devs[i].name, err) < 0)
			goto fail;
	}
	sb_free(&b);
	if (save_ram(&o, &vm->mem, &st->ram_bytes, err) < 0 || section(&o, SNAP_END, 0, &b, "end", err) < 0)
		goto fail;
	st->bytes = o.off;
	st->ms = (now_ns() - t0) / 1000000;
	log_info("snapshot: %llu bytes (%llu of %llu MiB of RAM hold data) in %llu ms",
		 (unsigned long long)st->bytes, (unsigned long long)(st->ram_bytes >> 20),
		 (unsigned long long)(vm->mem.size >> 20), (unsigned long long)st->ms);
	return 0;
fail:
	sb_free(&b);
	return -1;
}

int snap_save(struct vm *vm, int fd, struct snap_stats *st, struct verr *err)
{
	size_t nd;
	const struct hv_device *devs = devices_list(&nd);
	int rc = save_all(vm, fd, st, err);

	/* RAM is written: what a device's save held still may go on. */
	for (size_t i = 0; i < nd; i++)
		if (vm->dev[i] && devs[i].saved)
			devs[i].saved(vm);
	return rc;
}
