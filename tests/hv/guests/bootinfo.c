/* Boot information a PVH guest gets: the memory map (printed for the host
 * test to compare with the configured layout), the command line, and the
 * initrd module, whose size and CRC32 must match what the host put on the
 * command line (initrd_size=, initrd_crc=).  Built as a bzImage too
 * (bootinfo.bz): then the kit turns the zero page into the same start
 * info, and the zero page's own fields are checked here. */
#include "kit.h"

/* CRC-32 (IEEE, as gzip), table-driven: about 5 instructions a byte. */
static uint32_t crc32(const uint8_t *p, uint64_t n)
{
	static uint32_t table[256];
	uint32_t c = 0xffffffffu;

	for (uint32_t i = 0; i < 256; i++) {
		uint32_t v = i;

		for (int k = 0; k < 8; k++)
			v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
		table[i] = v;
	}
	while (n--)
		c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static void zero_page_fields(void)
{
	const uint8_t *z = zero_page;
	uint64_t rsdp;

	printf("BOOT bzImage\n");
	check(z[0x1fe] == 0x55 && z[0x1ff] == 0xaa, "zero page: boot_flag 0xAA55 copied from the header");
	check(!memcmp(z + 0x202, "HdrS", 4), "zero page: header magic HdrS");
	check((z[0x206] | z[0x207] << 8) >= 0x020c, "zero page: boot protocol 2.%u", z[0x206]);
	check(z[0x210] == 0xff, "zero page: type_of_loader 0xff (undefined loader)");
	check((z[0x211] & 0x81) == 0x81, "zero page: loadflags LOADED_HIGH and CAN_USE_HEAP (0x%x)", z[0x211]);
	check((z[0x1fa] | z[0x1fb] << 8) == 0xffff, "zero page: vid_mode normal");
	memcpy(&rsdp, z + 0x70, 8);
	check(rsdp && !memcmp((void *)rsdp, "RSD PTR ", 8), "zero page: acpi_rsdp_addr 0x%lx points at the RSDP", rsdp);
	check(acpi_find("XSDT") != 0, "ACPI tables reachable from it");
}

void test_main(void)
{
	char buf[64];

	if (zero_page)
		zero_page_fields();

	check(start_info->version >= 1, "hvm_start_info version %u has a memory map", start_info->version);
	for (uint32_t i = 0; i < start_info->memmap_entries; i++) {
		struct hvm_memmap_entry *e = (struct hvm_memmap_entry *)start_info->memmap_paddr + i;

		printf("E820 0x%lx 0x%lx %u\n", e->addr, e->size, e->type);
	}
	printf("CMDLINE %s\n", cmdline);
	check(cmdline_get("marker", buf, sizeof(buf)) != 0, "cmdline has marker=%s", buf);
	if (cmdline_get("initrd_size", buf, sizeof(buf))) {
		uint64_t want_size = parse_u64(buf), want_hash;
		struct hvm_modlist_entry *m = (struct hvm_modlist_entry *)start_info->modlist_paddr;

		cmdline_get("initrd_crc", buf, sizeof(buf));
		want_hash = parse_u64(buf);
		check(start_info->nr_modules == 1, "one module (initrd): %u", start_info->nr_modules);
		if (start_info->nr_modules == 1) {
			uint64_t h = crc32((const uint8_t *)m->paddr, m->size);

			printf("INITRD 0x%lx %lu 0x%lx\n", m->paddr, m->size, h);
			check(m->size == want_size, "initrd size %lu (want %lu)", m->size, want_size);
			check(h == want_hash, "initrd CRC32 0x%lx (want 0x%lx)", h, want_hash);
			check((m->paddr & 0xfff) == 0, "initrd page aligned");
		}
	} else {
		check(start_info->nr_modules == 0, "no modules without an initrd");
	}
}
