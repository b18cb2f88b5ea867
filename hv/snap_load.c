/* Reading a snapshot: a hostile file.  The header must name this format,
 * this vhpc version and this host type; the sections must come in their
 * order, each within the file and its checksum right before its payload
 * is parsed; the machine's fingerprint must match the command line's; RAM
 * extents must be page-aligned, ascending and inside RAM.  Nothing here
 * needs KVM: vCPU and irqchip state is only parsed into snap_state, which
 * snap_apply_kvm hands over.  Every error names the section. */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/log.h"
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* No section but RAM is near this; a larger length is a lie. */
#define SECTION_MAX (16u << 20)

struct in {
	int fd;
	uint64_t off, size;
};

/* An error that only a file other than the one written can cause (cut
 * short, a checksum wrong, a section out of place): SNAP_DAMAGED, which
 * no retry, here or on another host, gets past.  The rest (another
 * format version or host type, a machine short of memory) is -1. */
static int damaged(int rc)
{
	(void)rc;
	return SNAP_DAMAGED;
}

static int get(struct in *f, void *p, uint64_t n, const char *what, struct verr *err)
{
	uint8_t *b = p;

	if (n > f->size - f->off)
		return damaged(verr_set(err, "%s: the file ends at byte %llu, %llu bytes early (truncated)", what,
					(unsigned long long)f->size, (unsigned long long)(f->off + n - f->size)));
	while (n) {
		ssize_t r = pread(f->fd, b, n, (off_t)f->off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? verr_errno(err, "%s: reading the snapshot", what)
				     : damaged(verr_set(err, "%s: the file ended early (truncated)", what));
		b += r;
		n -= (uint64_t)r;
		f->off += (uint64_t)r;
	}
	return 0;
}

static int check_header(const struct vm *vm, const uint8_t *h, struct verr *err)
{
	const struct snap_host *me = vm->snaph;
	uint32_t version, hsize, crc, api, xs, cpuid, nmsrs, msrs;
	uint64_t mem;
	char ver[33] = { 0 }, vendor[13] = { 0 };

	if (memcmp(h, SNAP_MAGIC, 8))
		return damaged(verr_set(err, "header: not a vhpc-hv snapshot (no %s magic)", SNAP_MAGIC));
	memcpy(&version, h + 8, 4);
	if (version != SNAP_VERSION)
		return verr_set(err, "header: snapshot format version %u; this vhpc-hv reads version %d", version,
				SNAP_VERSION);
	memcpy(&crc, h + SNAP_HEADER_SIZE - 4, 4);
	if (crc != crc32c(0, h, SNAP_HEADER_SIZE - 4))
		return damaged(verr_set(err, "header: checksum mismatch (corrupted)"));
	memcpy(&hsize, h + 12, 4);
	if (hsize != SNAP_HEADER_SIZE)
		return damaged(verr_set(err, "header: %u bytes, format %d has %d", hsize, SNAP_VERSION,
					SNAP_HEADER_SIZE));
	memcpy(ver, h + 16, 32);
	if (strcmp(ver, VHPC_VERSION))
		return verr_set(err, "header: made by vhpc %.32s; this is vhpc %s", ver, VHPC_VERSION);
	memcpy(vendor, h + 48, 12);
	memcpy(&api, h + 60, 4);
	memcpy(&xs, h + 64, 4);
	memcpy(&cpuid, h + 68, 4);
	memcpy(&nmsrs, h + 72, 4);
	memcpy(&msrs, h + 76, 4);
	memcpy(&mem, h + 80, 8);
	if (strcmp(vendor, me->vendor))
		return verr_set(err, "header: made on another host type (CPU vendor %s; this host's is %s)", vendor,
				me->vendor);
	if (api != me->kvm_api || xs != me->xsave_size)
		return verr_set(err, "header: made on another host type (KVM API %u, XSAVE %u bytes; here %u, %u)", api,
				xs, me->kvm_api, me->xsave_size);
	if (cpuid != me->cpuid_crc)
		return verr_set(err, "header: made on another host type (the CPUID KVM offers differs: "
			       "crc32c 0x%08x, here 0x%08x)", cpuid, me->cpuid_crc);
	if (nmsrs != me->nmsrs || msrs != me->msrs_crc)
		return verr_set(err, "header: made on another host type (KVM saves %u MSRs there, %u here, "
			       "or other ones)", nmsrs, me->nmsrs);
	if (mem != vm->mem.size)
		return verr_set(err, "header: the snapshot's guest has %llu MiB of RAM; this command line gives %llu MiB",
				(unsigned long long)(mem >> 20), (unsigned long long)(vm->mem.size >> 20));
	return 0;
}

/* The first line that differs, as "KEY: snapshot V1, command line V2". */
static int compare_fingerprint(const char *snap, size_t slen, const char *mine, struct verr *err)
{
	const char *a = snap, *ae = snap + slen, *b = mine, *be = mine + strlen(mine);

	while (a < ae || b < be) {
		const char *an = memchr(a, '\n', (size_t)(ae - a)), *bn = memchr(b, '\n', (size_t)(be - b));
		size_t al = an ? (size_t)(an - a) : (size_t)(ae - a), bl = bn ? (size_t)(bn - b) : (size_t)(be - b);

		if (al != bl || memcmp(a, b, al)) {
			char sa[160], sb[160];

			snprintf(sa, sizeof(sa), "%.*s", (int)(al < 150 ? al : 150), a);
			snprintf(sb, sizeof(sb), "%.*s", (int)(bl < 150 ? bl : 150), b);
			for (char *p = sa; *p; p++)
				if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
					*p = '?';
			return verr_set(err, "configuration: the snapshot's machine differs from this command line's: "
				       "snapshot has '%s', command line '%s'", a < ae ? sa : "(nothing)",
				       b < be ? sb : "(nothing)");
		}
		a += al + (an ? 1 : 0);
		b += bl + (bn ? 1 : 0);
	}
	return 0;
}

struct sec {
	uint32_t tag, idx, crc;
	uint64_t len;
};

static const char *tag_name(uint32_t tag)
{
	switch (tag) {
	case SNAP_CONF: return "configuration";
	case SNAP_VMST: return "irqchip";
	case SNAP_VCPU: return "vCPU";
	case SNAP_RAM: return "RAM";
	case SNAP_DEV: return "device";
	case SNAP_END: return "end";
	}
	return "unknown";
}

static int next_section(struct in *f, uint32_t want, uint32_t idx, struct sec *s, const char *what,
			struct verr *err)
{
	uint8_t h[SNAP_SECTION_HDR];
	uint32_t pad;

	int rc = get(f, h, sizeof(h), what, err);

	if (rc < 0)
		return rc;
	memcpy(&s->tag, h, 4);
	memcpy(&s->idx, h + 4, 4);
	memcpy(&s->len, h + 8, 8);
	memcpy(&s->crc, h + 16, 4);
	memcpy(&pad, h + 20, 4);
	if (s->tag != want)
		return damaged(verr_set(err, "%s: found a section tagged '%s' (0x%08x) at byte %llu", what,
					tag_name(s->tag), s->tag, (unsigned long long)(f->off - sizeof(h))));
	if (s->idx != idx || pad)
		return damaged(verr_set(err, "%s: section numbered %u, expected %u", what, s->idx, idx));
	if (s->len > f->size - f->off)
		return damaged(verr_set(err, "%s: section of %llu bytes runs past the end of the file (truncated)",
					what, (unsigned long long)s->len));
	if (want != SNAP_RAM && s->len > SECTION_MAX)
		return damaged(verr_set(err, "%s: section of %llu bytes (at most %u)", what,
					(unsigned long long)s->len, SECTION_MAX));
	return 0;
}

/* A whole small section, checksum verified. */
static int read_section(struct in *f, uint32_t want, uint32_t idx, uint8_t **p, size_t *len, const char *what,
			struct verr *err)
{
	struct sec s;
	int rc;

	*p = NULL;
	if ((rc = next_section(f, want, idx, &s, what, err)) < 0)
		return rc;
	*p = malloc(s.len ? s.len : 1);
	if (!*p)
		return verr_set(err, "%s: out of memory", what);
	*len = s.len;
	if ((rc = get(f, *p, s.len, what, err)) < 0)
		return rc;
	if (crc32c(0, *p, s.len) != s.crc)
		return damaged(verr_set(err, "%s: checksum mismatch (corrupted)", what));
	return 0;
}

static int load_ram(struct vm *vm, struct in *f, struct verr *err)
{
	struct sec s;
	uint64_t end, next = 0;
	uint32_t crc = 0;
	int rc;

	if ((rc = next_section(f, SNAP_RAM, 0, &s, "RAM", err)) < 0)
		return rc;
	end = f->off + s.len;
	while (f->off < end) {
		uint64_t h[2];
		void *dst;

		if (end - f->off < sizeof(h))
			return damaged(verr_set(err, "RAM: an extent header crosses the section's end"));
		if ((rc = get(f, h, sizeof(h), "RAM", err)) < 0)
			return rc;
		crc = crc32c(crc, h, sizeof(h));
		if (!h[1] || (h[0] | h[1]) & (SNAP_PAGE - 1) || h[0] < next || h[0] > vm->mem.size ||
		    h[1] > vm->mem.size - h[0])
			return damaged(verr_set(err, "RAM: extent [0x%llx, +0x%llx) is not page-aligned, ascending "
						"and inside the %llu MiB of RAM", (unsigned long long)h[0],
						(unsigned long long)h[1], (unsigned long long)(vm->mem.size >> 20)));
		if (h[1] > end - f->off)
			return damaged(verr_set(err, "RAM: an extent of %llu bytes crosses the section's end",
						(unsigned long long)h[1]));
		dst = vm->mem.host + h[0];
		if ((rc = get(f, dst, h[1], "RAM", err)) < 0)
			return rc;
		crc = crc32c(crc, dst, h[1]);
		next = h[0] + h[1];
	}
	if (crc != s.crc)
		return damaged(verr_set(err, "RAM: checksum mismatch (corrupted)"));
	return 0;
}

static int load_devices(struct vm *vm, struct in *f, struct verr *err)
{
	size_t nd;
	const struct hv_device *devs = devices_list(&nd);

	for (size_t i = 0; i < nd; i++) {
		struct snap_rd r;
		uint8_t *p;
		size_t len;
		char what[64];
		int rc;

		if (!vm->dev[i])
			continue;
		snprintf(what, sizeof(what), "device %s", devs[i].name);
		if (!devs[i].load)
			return verr_set(err, "%s: cannot be restored (it saves no state)", what);
		if ((rc = read_section(f, SNAP_DEV, (uint32_t)i, &p, &len, what, err)) < 0) {
			free(p);
			return rc;
		}
		if (len < 32 || strnlen((char *)p, 32) == 32 || strcmp((char *)p, devs[i].name)) {
			free(p);
			return damaged(verr_set(err, "%s: the section names another device", what));
		}
		r = (struct snap_rd){ .p = p + 32, .len = len - 32 };
		rc = devs[i].load(vm, &r, err);
		free(p);
		if (rc < 0)
			return verr_wrap(err, "%s", what);
	}
	return 0;
}

int snap_load(struct vm *vm, int fd, struct snap_state *st, struct verr *err)
{
	uint8_t hdr[SNAP_HEADER_SIZE], *p = NULL;
	struct in f = { .fd = fd };
	struct stat sb;
	struct snap_rd r;
	size_t len;
	char *fp;
	int rc;

	memset(st, 0, sizeof(*st));
	if (!vm->snaph)
		return verr_set(err, "snapshots need KVM's host type, which this VM does not have");
	if (fstat(fd, &sb) < 0)
		return verr_errno(err, "the snapshot");
	if (!S_ISREG(sb.st_mode))
		return verr_set(err, "the snapshot is no regular file");
	f.size = (uint64_t)sb.st_size;
	if ((rc = get(&f, hdr, sizeof(hdr), "header", err)) < 0 || (rc = check_header(vm, hdr, err)) < 0)
		return rc;

	if ((rc = read_section(&f, SNAP_CONF, 0, &p, &len, "configuration", err)) < 0)
		goto fail;
	fp = snap_fingerprint(vm);
	if (!fp) {
		rc = verr_set(err, "out of memory");
		goto fail;
	}
	rc = compare_fingerprint((char *)p, len, fp, err);
	free(fp);
	free(p);
	p = NULL;
	if (rc < 0)
		return rc;

	if ((rc = read_section(&f, SNAP_VMST, 0, &p, &len, "irqchip", err)) < 0)
		goto fail;
	r = (struct snap_rd){ .p = p, .len = len };
	/* A section whose checksum was right yet does not parse was written
	 * wrong: damaged, as a file changed afterwards is. */
	if (snap_parse_vm(&r, st, err) < 0) {
		rc = damaged(verr_wrap(err, "irqchip"));
		goto fail;
	}
	free(p);
	p = NULL;

	st->vcpu = calloc((size_t)vm->nvcpus, sizeof(*st->vcpu));
	if (!st->vcpu) {
		rc = verr_set(err, "out of memory");
		goto fail;
	}
	st->nvcpus = vm->nvcpus;
	for (int i = 0; i < vm->nvcpus; i++) {
		char what[32];

		snprintf(what, sizeof(what), "vCPU %d", i);
		if ((rc = read_section(&f, SNAP_VCPU, (uint32_t)i, &p, &len, what, err)) < 0)
			goto fail;
		r = (struct snap_rd){ .p = p, .len = len };
		if (snap_parse_vcpu(vm, &r, &st->vcpu[i], err) < 0) {
			rc = damaged(verr_wrap(err, "%s", what));
			goto fail;
		}
		free(p);
		p = NULL;
	}
	if ((rc = load_devices(vm, &f, err)) < 0 || (rc = load_ram(vm, &f, err)) < 0)
		goto fail;
	if ((rc = read_section(&f, SNAP_END, 0, &p, &len, "end", err)) < 0)
		goto fail;
	free(p);
	p = NULL;
	if (len || f.off != f.size) {
		rc = damaged(verr_set(err, "end: %llu bytes after the end section",
				      (unsigned long long)(f.size - f.off + len)));
		goto fail;
	}
	return 0;
fail:
	free(p);
	snap_state_free(st);
	return rc;
}

int snap_apply_kvm(struct vm *vm, const struct snap_state *st, struct verr *err)
{
	if (snap_set_vm(vm, st, err) < 0)
		return -1;
	for (int i = 0; i < st->nvcpus; i++)
		if (snap_set_vcpu(vm, i, &st->vcpu[i], err) < 0)
			return -1;
	return 0;
}

void snap_state_free(struct snap_state *st)
{
	for (int i = 0; i < st->nvcpus; i++)
		free(st->vcpu[i].xsave);
	free(st->vcpu);
	st->vcpu = NULL;
	st->nvcpus = 0;
}
