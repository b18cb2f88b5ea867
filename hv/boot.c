/* Loading the kernel, both ways: a bzImage through the Linux 64-bit boot
 * protocol (zero page, e820, cmdline, initrd, RSDP), or an ELF vmlinux
 * through PVH (hvm_start_info).  Every byte goes through the bounds-checked
 * guest-memory API, and every file offset is checked against the file. */
#include "lib/err.h"
#include "fdpath.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "vm.h"
#include "layout.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_MAX (512u << 20)
#define XEN_ELFNOTE_PHYS32_ENTRY 18

/* Zero page (boot_params) offsets, Documentation/arch/x86/zero-page.rst */
#define ZP_ACPI_RSDP   0x070
#define ZP_EXT_RD_IMG  0x0c0
#define ZP_EXT_RD_SIZE 0x0c4
#define ZP_EXT_CMDLINE 0x0c8
#define ZP_E820_NR     0x1e8
#define ZP_SETUP_SECTS 0x1f1
#define ZP_VID_MODE    0x1fa
#define ZP_JUMP        0x200
#define ZP_HDR_MAGIC   0x202
#define ZP_VERSION     0x206
#define ZP_LOADER_TYPE 0x210
#define ZP_LOADFLAGS   0x211
#define ZP_RD_IMAGE    0x218
#define ZP_RD_SIZE     0x21c
#define ZP_HEAP_END    0x224
#define ZP_CMDLINE_PTR 0x228
#define ZP_INITRD_MAX  0x22c
#define ZP_XLOADFLAGS  0x236
#define ZP_CMDLINE_SZ  0x238
#define ZP_INIT_SIZE   0x260
#define ZP_E820_TABLE  0x2d0
#define E820_MAX_ZP    128

struct blob { uint8_t *p; size_t n; };

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void wr32(uint8_t *p, uint32_t v) { wr16(p, (uint16_t)v); wr16(p + 2, (uint16_t)(v >> 16)); }
static void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }

int vm_reserve_e820(struct vm *vm, uint64_t addr, uint64_t size)
{
	if (vm->ne820_resv == (int)(sizeof(vm->e820_resv) / sizeof(vm->e820_resv[0])))
		return -1;
	vm->e820_resv[vm->ne820_resv].addr = addr;
	vm->e820_resv[vm->ne820_resv].size = size;
	vm->ne820_resv++;
	return 0;
}

int e820_build(const struct vm *vm, struct e820e *e, int max)
{
	const struct guest_mem *m = &vm->mem;
	int n = 0;

	if (max < 5)
		return -1;
	e[n++] = (struct e820e){ 0, GPA_EBDA, E820_RAM };
	e[n++] = (struct e820e){ GPA_EBDA, GPA_HIGH_START - GPA_EBDA, E820_RESERVED };
	e[n++] = (struct e820e){ GPA_HIGH_START, m->slot[0].size - GPA_HIGH_START, E820_RAM };
	/* Device ranges in the 32-bit hole come before RAM above 4 GiB, so the
	 * map stays sorted. */
	for (int i = 0; i < vm->ne820_resv && n < max - 1; i++)
		e[n++] = (struct e820e){ vm->e820_resv[i].addr, vm->e820_resv[i].size, E820_RESERVED };
	if (m->nslots > 1)
		e[n++] = (struct e820e){ m->slot[1].gpa, m->slot[1].size, E820_RAM };
	return n;
}

static int load_file(const char *path, const char *what, struct blob *b, struct verr *err)
{
	char *buf;

	if (hv_read_whole(path, what, &buf, &b->n, KERNEL_MAX, err) < 0)
		return -1;
	b->p = (uint8_t *)buf;
	return 0;
}

static uint64_t low_ram_end(const struct vm *vm)
{
	return vm->mem.slot[0].size;
}

/* The initrd goes as high in low RAM as it fits (page aligned), below
 * `limit`, and above `floor` (the end of what the kernel occupies). */
static int place_initrd(struct vm *vm, uint64_t floor, uint64_t limit, uint64_t *addr, uint64_t *size,
			struct verr *err)
{
	struct blob rd;
	uint64_t top = low_ram_end(vm), a;

	*addr = *size = 0;
	if (!vm->cfg->initrd)
		return 0;
	if (load_file(vm->cfg->initrd, "initrd", &rd, err) < 0)
		return -1;
	if (limit && limit < top)
		top = limit;
	if (rd.n > top || (a = (top - rd.n) & ~0xfffull) < floor) {
		free(rd.p);
		return verr_set(err, "initrd %s (%zu MiB) does not fit in guest RAM below %llu MiB above the kernel; "
				"give the guest more memory", vm->cfg->initrd, rd.n >> 20,
				(unsigned long long)(top >> 20));
	}
	if (gm_write(&vm->mem, a, rd.p, rd.n) < 0) {
		free(rd.p);
		return verr_set(err, "initrd does not fit guest RAM");
	}
	free(rd.p);
	*addr = a;
	*size = rd.n;
	return 0;
}

static int put_cmdline(struct vm *vm, uint64_t max, struct verr *err)
{
	const char *cl = vm->cfg->cmdline ? vm->cfg->cmdline : "";
	size_t n = strlen(cl);

	if (n + 1 > max || n + 1 > CMDLINE_MAX)
		return verr_set(err, "cmdline is %zu bytes; this kernel takes at most %llu", n,
				(unsigned long long)(max < CMDLINE_MAX ? max : CMDLINE_MAX) - 1);
	return gm_write(&vm->mem, GPA_CMDLINE, cl, n + 1) < 0 ? verr_set(err, "cmdline: no RAM") : 0;
}

/* Identity map of the first 4 GiB with 2 MiB pages, and the boot GDT. */
static int page_tables(struct vm *vm, struct verr *err)
{
	uint64_t *pml4 = gm_ptr(&vm->mem, GPA_PML4, 4096);
	uint64_t *pdpt = gm_ptr(&vm->mem, GPA_PDPT, 4096);
	uint64_t *pd = gm_ptr(&vm->mem, GPA_PD, 4 * 4096);
	uint64_t *gdt = gm_ptr(&vm->mem, GPA_GDT, 5 * 8);

	if (!pml4 || !pdpt || !pd || !gdt)
		return verr_set(err, "boot page tables do not fit guest RAM");
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = GPA_PDPT | 3;
	for (int i = 0; i < 4; i++)
		pdpt[i] = (GPA_PD + (uint64_t)i * 4096) | 3;
	for (uint64_t i = 0; i < 4 * 512; i++)
		pd[i] = (i << 21) | 0x83;   /* present, writable, 2 MiB */
	gdt[0] = 0;
	gdt[1] = 0;
	gdt[2] = 0x00af9b000000ffffull;   /* 0x10: 64-bit code */
	gdt[3] = 0x00cf93000000ffffull;   /* 0x18: data */
	gdt[4] = 0x00008b0000000067ull;   /* 0x20: TSS */
	return 0;
}

static int boot_bzimage(struct vm *vm, struct blob *k, struct boot_info *bi, struct verr *err)
{
	uint8_t *zp = gm_ptr(&vm->mem, GPA_ZERO_PAGE, 4096);
	unsigned setup_sects, hdr_end;
	uint16_t version;
	uint64_t kbytes, kend, rd_addr, rd_size, init_size;
	uint32_t cmdline_size = 255, initrd_max;
	struct e820e e[16];
	int ne;

	if (!zp)
		return verr_set(err, "zero page does not fit guest RAM");
	version = rd16(k->p + ZP_VERSION);
	if (version < 0x020c || !(rd16(k->p + ZP_XLOADFLAGS) & 1))
		return verr_set(err, "kernel %s: boot protocol %u.%02u has no 64-bit entry (needs 2.12 and XLF_KERNEL_64)",
				vm->cfg->kernel, version >> 8, version & 0xff);
	setup_sects = k->p[ZP_SETUP_SECTS] ? k->p[ZP_SETUP_SECTS] : 4;
	if ((size_t)(setup_sects + 1) * 512 >= k->n)
		return verr_set(err, "kernel %s: setup_sects %u runs past the end of the file", vm->cfg->kernel, setup_sects);
	kbytes = k->n - (size_t)(setup_sects + 1) * 512;
	init_size = rd32(k->p + ZP_INIT_SIZE);
	kend = GPA_KERNEL + (kbytes > init_size ? kbytes : init_size);
	if (gm_write(&vm->mem, GPA_KERNEL, k->p + (setup_sects + 1) * 512, kbytes) < 0 ||
	    !gm_ptr(&vm->mem, GPA_KERNEL, kend - GPA_KERNEL))
		return verr_set(err, "kernel %s (%llu MiB to decompress into) does not fit in %llu MiB of low guest RAM",
				vm->cfg->kernel, (unsigned long long)(kend >> 20),
				(unsigned long long)(low_ram_end(vm) >> 20));

	memset(zp, 0, 4096);
	hdr_end = 0x202 + k->p[ZP_JUMP + 1];
	if (hdr_end > 4096 || hdr_end > k->n)
		return verr_set(err, "kernel %s: setup header length %u is bad", vm->cfg->kernel, hdr_end);
	memcpy(zp + ZP_SETUP_SECTS, k->p + ZP_SETUP_SECTS, hdr_end - ZP_SETUP_SECTS);
	if (version >= 0x0206)
		cmdline_size = rd32(k->p + ZP_CMDLINE_SZ);
	initrd_max = rd32(k->p + ZP_INITRD_MAX);
	wr16(zp + ZP_VID_MODE, 0xffff);
	zp[ZP_LOADER_TYPE] = 0xff;
	zp[ZP_LOADFLAGS] |= 0x01 | 0x80;       /* LOADED_HIGH, CAN_USE_HEAP */
	wr16(zp + ZP_HEAP_END, 0xfe00);
	wr32(zp + ZP_CMDLINE_PTR, (uint32_t)GPA_CMDLINE);
	if (put_cmdline(vm, (uint64_t)cmdline_size + 1, err) < 0)
		return -1;
	/* The decompressor runs at 16 MiB or above; keep the initrd clear of
	 * it by a generous margin. */
	if (place_initrd(vm, (kend > (16u << 20) ? kend : (16u << 20)) + init_size, (uint64_t)initrd_max + 1,
			 &rd_addr, &rd_size, err) < 0)
		return -1;
	wr32(zp + ZP_RD_IMAGE, (uint32_t)rd_addr);
	wr32(zp + ZP_RD_SIZE, (uint32_t)rd_size);
	wr64(zp + ZP_ACPI_RSDP, vm->acpi_rsdp);
	ne = e820_build(vm, e, 16);
	for (int i = 0; i < ne; i++) {
		wr64(zp + ZP_E820_TABLE + i * 20, e[i].addr);
		wr64(zp + ZP_E820_TABLE + i * 20 + 8, e[i].size);
		wr32(zp + ZP_E820_TABLE + i * 20 + 16, e[i].type);
	}
	zp[ZP_E820_NR] = (uint8_t)ne;
	if (page_tables(vm, err) < 0)
		return -1;
	bi->pvh = false;
	bi->entry = GPA_KERNEL + 0x200;
	bi->zero_page = GPA_ZERO_PAGE;
	log_info("bzImage: boot protocol %u.%02u, %llu KiB at 0x%llx, cmdline %zu bytes, initrd %llu bytes at 0x%llx",
		 version >> 8, version & 0xff, (unsigned long long)(kbytes >> 10), (unsigned long long)GPA_KERNEL,
		 strlen(vm->cfg->cmdline ? vm->cfg->cmdline : ""), (unsigned long long)rd_size,
		 (unsigned long long)rd_addr);
	return 0;
}

/* Finds XEN_ELFNOTE_PHYS32_ENTRY in one note area [off, off+len). */
static bool pvh_note(const struct blob *k, uint64_t off, uint64_t len, uint64_t *entry)
{
	if (off > k->n || len > k->n - off)
		return false;
	while (len >= 12) {
		uint32_t nsz = rd32(k->p + off), dsz = rd32(k->p + off + 4), type = rd32(k->p + off + 8);
		uint64_t na = ((uint64_t)nsz + 3) & ~3ull, da = ((uint64_t)dsz + 3) & ~3ull;

		if (12 + na + da > len)
			return false;
		if (type == XEN_ELFNOTE_PHYS32_ENTRY && nsz == 4 && !memcmp(k->p + off + 12, "Xen", 4) &&
		    (dsz == 4 || dsz == 8)) {
			*entry = dsz == 4 ? rd32(k->p + off + 12 + na) :
				 (rd32(k->p + off + 12 + na) | (uint64_t)rd32(k->p + off + 16 + na) << 32);
			return true;
		}
		off += 12 + na + da;
		len -= 12 + na + da;
	}
	return false;
}

/* ELF32 and ELF64 differ only in field widths; read both into one shape. */
struct phdr { uint32_t type; uint64_t off, paddr, filesz, memsz; };

static int elf_phdrs(const struct blob *k, struct phdr *ph, int max, int *n, struct verr *err, const char *path)
{
	bool is64 = k->p[EI_CLASS] == ELFCLASS64;
	uint64_t phoff;
	unsigned phnum, phentsz;

	if (k->n < sizeof(Elf64_Ehdr) || (k->p[EI_CLASS] != ELFCLASS64 && k->p[EI_CLASS] != ELFCLASS32) ||
	    k->p[EI_DATA] != ELFDATA2LSB)
		return verr_set(err, "kernel %s: not a little-endian ELF32/ELF64 file", path);
	if (is64) {
		const Elf64_Ehdr *h = (const Elf64_Ehdr *)k->p;
		phoff = h->e_phoff, phnum = h->e_phnum, phentsz = h->e_phentsize;
		if (phentsz != sizeof(Elf64_Phdr))
			return verr_set(err, "kernel %s: odd ELF program header size %u", path, phentsz);
	} else {
		const Elf32_Ehdr *h = (const Elf32_Ehdr *)k->p;
		phoff = h->e_phoff, phnum = h->e_phnum, phentsz = h->e_phentsize;
		if (phentsz != sizeof(Elf32_Phdr))
			return verr_set(err, "kernel %s: odd ELF program header size %u", path, phentsz);
	}
	if ((int)phnum > max || phoff > k->n || (uint64_t)phnum * phentsz > k->n - phoff)
		return verr_set(err, "kernel %s: ELF program headers lie outside the file", path);
	for (unsigned i = 0; i < phnum; i++) {
		if (is64) {
			Elf64_Phdr p;
			memcpy(&p, k->p + phoff + (uint64_t)i * phentsz, sizeof(p));
			ph[i] = (struct phdr){ p.p_type, p.p_offset, p.p_paddr, p.p_filesz, p.p_memsz };
		} else {
			Elf32_Phdr p;
			memcpy(&p, k->p + phoff + (uint64_t)i * phentsz, sizeof(p));
			ph[i] = (struct phdr){ p.p_type, p.p_offset, p.p_paddr, p.p_filesz, p.p_memsz };
		}
	}
	*n = (int)phnum;
	return 0;
}

static int boot_pvh(struct vm *vm, struct blob *k, struct boot_info *bi, struct verr *err)
{
	const char *path = vm->cfg->kernel;
	struct phdr ph[64];
	int nph = 0;
	uint64_t entry = 0, kend = 0, rd_addr, rd_size;
	bool found = false;
	uint8_t *si, *ml, *mm;
	struct e820e e[16];
	int ne;

	if (elf_phdrs(k, ph, 64, &nph, err, path) < 0)
		return -1;
	for (int i = 0; i < nph && !found; i++)
		if (ph[i].type == PT_NOTE)
			found = pvh_note(k, ph[i].off, ph[i].filesz, &entry);
	if (!found)
		return verr_set(err, "kernel %s: ELF file without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY); "
				"build the kernel with CONFIG_PVH=y or give a bzImage", path);
	for (int i = 0; i < nph; i++) {
		uint8_t *dst;

		if (ph[i].type != PT_LOAD)
			continue;
		if (ph[i].filesz > ph[i].memsz || ph[i].off > k->n || ph[i].filesz > k->n - ph[i].off)
			return verr_set(err, "kernel %s: ELF segment %d lies outside the file", path, i);
		if (ph[i].paddr < GPA_HIGH_START ||
		    !(dst = gm_ptr(&vm->mem, ph[i].paddr, ph[i].memsz)))
			return verr_set(err, "kernel %s: ELF segment %d (0x%llx+0x%llx) is not inside guest RAM above 1 MiB",
					path, i, (unsigned long long)ph[i].paddr, (unsigned long long)ph[i].memsz);
		memcpy(dst, k->p + ph[i].off, ph[i].filesz);
		memset(dst + ph[i].filesz, 0, ph[i].memsz - ph[i].filesz);
		if (ph[i].paddr + ph[i].memsz > kend)
			kend = ph[i].paddr + ph[i].memsz;
	}
	if (put_cmdline(vm, CMDLINE_MAX, err) < 0)
		return -1;
	if (place_initrd(vm, kend, GPA_4G, &rd_addr, &rd_size, err) < 0)
		return -1;

	si = gm_ptr(&vm->mem, GPA_PVH_INFO, 56);
	ml = gm_ptr(&vm->mem, GPA_PVH_MODLIST, 32);
	mm = gm_ptr(&vm->mem, GPA_PVH_MEMMAP, 16 * 24);
	if (!si || !ml || !mm)
		return verr_set(err, "PVH start info does not fit guest RAM");
	memset(si, 0, 56);
	wr32(si + 0, 0x336ec578);          /* XEN_HVM_START_MAGIC_VALUE */
	wr32(si + 4, 1);                   /* version 1: has the memory map */
	if (rd_size) {
		memset(ml, 0, 32);
		wr64(ml + 0, rd_addr);
		wr64(ml + 8, rd_size);
		wr32(si + 12, 1);
		wr64(si + 16, GPA_PVH_MODLIST);
	}
	wr64(si + 24, GPA_CMDLINE);
	wr64(si + 32, vm->acpi_rsdp);
	ne = e820_build(vm, e, 16);
	for (int i = 0; i < ne; i++) {
		wr64(mm + i * 24, e[i].addr);
		wr64(mm + i * 24 + 8, e[i].size);
		wr32(mm + i * 24 + 16, e[i].type);
		wr32(mm + i * 24 + 20, 0);
	}
	wr64(si + 40, GPA_PVH_MEMMAP);
	wr32(si + 48, (uint32_t)ne);
	bi->pvh = true;
	bi->entry = entry;
	bi->start_info = GPA_PVH_INFO;
	log_info("PVH: entry 0x%llx, kernel ends at 0x%llx, initrd %llu bytes at 0x%llx",
		 (unsigned long long)entry, (unsigned long long)kend, (unsigned long long)rd_size,
		 (unsigned long long)rd_addr);
	return 0;
}

int boot_load(struct vm *vm, struct boot_info *bi, struct verr *err)
{
	struct blob k;
	int rc;

	memset(bi, 0, sizeof(*bi));
	if (load_file(vm->cfg->kernel, "kernel", &k, err) < 0)
		return -1;
	if (k.n >= 4 && !memcmp(k.p, ELFMAG, SELFMAG))
		rc = boot_pvh(vm, &k, bi, err);
	else if (k.n > 0x240 && !memcmp(k.p + ZP_HDR_MAGIC, "HdrS", 4))
		rc = boot_bzimage(vm, &k, bi, err);
	else
		rc = verr_set(err, "kernel %s: neither a bzImage (no HdrS header) nor an ELF vmlinux", vm->cfg->kernel);
	free(k.p);
	return rc;
}
