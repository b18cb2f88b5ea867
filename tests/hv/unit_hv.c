/* Unit tests of vhpc-hv pieces that need no KVM: the guest-memory bounds
 * checks, I/O dispatch, the AML writer, ACPI checksums and layout, e820,
 * kernel loading from hostile files, and the config plan (APIC IDs). */
#include "lib/err.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "hv/vm.h"
#include "hv/aml.h"
#include "hv/layout.h"

/* A vm with RAM but no KVM, enough for boot and ACPI code. */
static struct vm *fake_vm(uint64_t mem, int nvcpus, struct hv_plan *p, struct hv_config *c)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct verr err;

	hv_config_defaults(c);
	c->vcpus = nvcpus;
	c->mem = mem;
	c->kernel = strdup("/nonexistent");
	assert_int_equal(hv_plan_make(c, p, &err), 0);
	vm->cfg = c;
	vm->plan = p;
	vm->nvcpus = nvcpus;
	for (int i = 0; i < nvcpus; i++)
		vm->vcpu[i].apic_id = p->apic_id[i];
	assert_int_equal(mem_create(&vm->mem, p, 0, NULL, &err), 0);
	return vm;
}

static void free_vm(struct vm *vm, struct hv_config *c)
{
	mem_destroy(&vm->mem);
	hv_config_free(c);
	free(vm);
}

static void guest_memory_bounds_are_overflow_safe(void **state)
{
	struct hv_config c;
	struct hv_plan p;
	struct vm *vm;
	uint8_t b[16];

	(void)state;
	vm = fake_vm(32 << 20, 1, &p, &c);
	assert_non_null(gm_ptr(&vm->mem, 0, 32 << 20));
	assert_non_null(gm_ptr(&vm->mem, (32 << 20) - 1, 1));
	assert_non_null(gm_ptr(&vm->mem, 32 << 20, 0));
	assert_null(gm_ptr(&vm->mem, (32 << 20) - 1, 2));
	assert_null(gm_ptr(&vm->mem, 32 << 20, 1));
	assert_null(gm_ptr(&vm->mem, UINT64_MAX, 2));
	assert_null(gm_ptr(&vm->mem, 16, UINT64_MAX));
	assert_null(gm_ptr(&vm->mem, UINT64_MAX - 5, 10));
	assert_int_equal(gm_write(&vm->mem, 100, "hello", 5), 0);
	assert_int_equal(gm_read(&vm->mem, 100, b, 5), 0);
	assert_memory_equal(b, "hello", 5);
	assert_int_equal(gm_read(&vm->mem, (32 << 20) - 4, b, 8), -1);
	free_vm(vm, &c);
}

static void layout_splits_at_the_hole(void **state)
{
	struct mem_slot s[2];
	int n;
	struct guest_mem m = { 0 };
	uint64_t gpa[2], len[2];

	(void)state;
	mem_layout(64 << 20, s, &n);
	assert_int_equal(n, 1);
	assert_int_equal(s[0].size, 64 << 20);
	mem_layout(4ull << 30, s, &n);
	assert_int_equal(n, 2);
	assert_int_equal(s[0].size, GPA_HOLE_START);
	assert_int_equal(s[1].gpa, GPA_4G);
	assert_int_equal(s[1].size, (4ull << 30) - GPA_HOLE_START);
	assert_int_equal(s[1].ram_off, GPA_HOLE_START);
	m.size = 4ull << 30;
	memcpy(m.slot, s, sizeof(s));
	m.nslots = n;
	/* A range crossing the hole comes back as two pieces. */
	assert_int_equal(mem_range_gpa(&m, 2ull << 30, 2ull << 30, gpa, len), 2);
	assert_int_equal(gpa[0], 2ull << 30);
	assert_int_equal(len[0], 1ull << 30);
	assert_int_equal(gpa[1], GPA_4G);
	assert_int_equal(len[1], 1ull << 30);
}

static int reads, writes;
static uint8_t last;
static void t_read(void *o, uint64_t off, void *d, unsigned len) { (void)o; reads++; memset(d, (int)off, len); }
static void t_write(void *o, uint64_t off, const void *d, unsigned len) { (void)o; (void)off; (void)len; writes++; last = *(const uint8_t *)d; }
static const struct io_ops t_ops = { .read = t_read, .write = t_write };

static void io_dispatch_finds_regions_and_refuses_overlaps(void **state)
{
	struct io_bus b;
	struct verr err;
	uint8_t d[8];

	(void)state;
	io_bus_init(&b);
	assert_int_equal(io_register(&b, 0x3f8, 8, &t_ops, NULL, "uart", &err), 0);
	assert_int_equal(io_register(&b, 0x60, 5, &t_ops, NULL, "kbc", &err), 0);
	assert_int_equal(io_register(&b, 0x3fc, 8, &t_ops, NULL, "clash", &err), -1);
	assert_non_null(strstr(err.msg, "overlaps uart"));
	assert_int_equal(io_register(&b, 0x3f0, 9, &t_ops, NULL, "clash", &err), -1);
	assert_int_equal(io_register(&b, UINT64_MAX - 2, 8, &t_ops, NULL, "wrap", &err), -1);
	assert_true(io_dispatch(&b, 0x3fd, d, 1, false));
	assert_int_equal(d[0], 5);
	assert_true(io_dispatch(&b, 0x3f8, (uint8_t[]){ 'x' }, 1, true));
	assert_int_equal(last, 'x');
	/* Unclaimed reads are all ones; an access running off a region's end
	 * is not the region's. */
	assert_false(io_dispatch(&b, 0x400, d, 4, false));
	assert_int_equal(d[0], 0xff);
	assert_false(io_dispatch(&b, 0x3fe, d, 4, false));
	assert_int_equal(io_unregister(&b, 0x3f8), 0);
	assert_false(io_dispatch(&b, 0x3f8, d, 1, false));
	io_bus_free(&b);
}

static void aml_package_lengths_encode_every_size(void **state)
{
	struct aml a;
	uint8_t zeros[5000] = { 0 };

	(void)state;
	aml_init(&a);
	aml_scope(&a, "\\_SB_");
	aml_close(&a);
	/* ScopeOp, PkgLength 6 (1 byte + "\_SB_"), name */
	assert_int_equal(a.len, 7);
	assert_int_equal(a.buf[1], 6);
	aml_free(&a);

	aml_init(&a);
	aml_scope(&a, "S");
	aml_bytes(&a, zeros, 100);
	aml_close(&a);
	/* two-byte PkgLength: 104 body + 2 = 106 = 0x6a */
	assert_int_equal(a.buf[1], 0x40 | 0xa);
	assert_int_equal(a.buf[2], 0x6);
	aml_free(&a);

	aml_init(&a);
	aml_scope(&a, "S");
	aml_bytes(&a, zeros, 5000);
	aml_close(&a);
	assert_int_equal(a.buf[1] >> 6, 2);
	assert_int_equal((a.buf[1] & 0xf) | a.buf[2] << 4 | a.buf[3] << 12, 4 + 5000 + 3);
	assert_int_equal(a.err, 0);
	aml_close(&a);      /* nothing open */
	assert_int_equal(a.err, 1);
	aml_free(&a);
	assert_int_equal(aml_eisaid("PNP0501"), 0x0105d041);
	assert_int_equal(aml_eisaid("PNP0C0C"), 0x0c0cd041);
}

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s = (uint8_t)(s + *p++);
	return s;
}

static void acpi_tables_have_valid_checksums(void **state)
{
	struct hv_config c;
	struct hv_plan p;
	struct vm *vm;
	struct verr err;
	uint8_t *r;
	uint64_t xsdt;

	(void)state;
	vm = fake_vm(64 << 20, 4, &p, &c);
	assert_int_equal(acpi_build(vm, &err), 0);
	r = gm_ptr(&vm->mem, vm->acpi_rsdp, 36);
	assert_memory_equal(r, "RSD PTR ", 8);
	assert_int_equal(sum(r, 20), 0);
	assert_int_equal(sum(r, 36), 0);
	memcpy(&xsdt, r + 24, 8);
	uint8_t *x = gm_ptr(&vm->mem, xsdt, 36);
	uint32_t xl;
	memcpy(&xl, x + 4, 4);
	assert_int_equal(sum(x, xl), 0);
	assert_int_equal(xl, 36 + 2 * 8);   /* FADT, MADT */
	for (uint32_t o = 36; o < xl; o += 8) {
		uint64_t t;
		uint32_t tl;

		memcpy(&t, x + o, 8);
		memcpy(&tl, gm_ptr(&vm->mem, t + 4, 4), 4);
		assert_int_equal(sum(gm_ptr(&vm->mem, t, tl), tl), 0);
	}
	free_vm(vm, &c);
}

static size_t test_table(struct vm *vm, uint8_t *buf, size_t cap, void *opaque)
{
	(void)vm;
	(void)opaque;
	if (cap < 44)
		return 0;
	acpi_table_header(buf, "TEST", 1);
	memcpy(buf + 36, "payload!", 8);
	return 44;
}

/* The hooks the PCI issue uses: an extra table (MCFG) and an e820 hole. */
static void extra_tables_and_reservations_are_added(void **state)
{
	struct hv_config c;
	struct hv_plan p;
	struct vm *vm;
	struct verr err;
	struct e820e e[16];
	uint64_t xsdt, t;
	uint32_t xl;

	(void)state;
	vm = fake_vm(4ull << 30, 1, &p, &c);
	assert_int_equal(vm_add_acpi_table(vm, test_table, NULL), 0);
	assert_int_equal(vm_reserve_e820(vm, GPA_ECAM, ECAM_SIZE), 0);
	assert_int_equal(acpi_build(vm, &err), 0);
	memcpy(&xsdt, gm_ptr(&vm->mem, vm->acpi_rsdp + 24, 8), 8);
	memcpy(&xl, gm_ptr(&vm->mem, xsdt + 4, 4), 4);
	assert_int_equal(xl, 36 + 3 * 8);
	memcpy(&t, gm_ptr(&vm->mem, xsdt + 36 + 16, 8), 8);
	assert_memory_equal(gm_ptr(&vm->mem, t, 44), "TEST", 4);
	assert_int_equal(sum(gm_ptr(&vm->mem, t, 44), 44), 0);
	assert_int_equal(e820_build(vm, e, 16), 5);
	assert_int_equal(e[3].addr, GPA_ECAM);
	assert_int_equal(e[3].type, E820_RESERVED);
	assert_int_equal(e[4].addr, GPA_4G);
	free_vm(vm, &c);
}

static void e820_matches_layout(void **state)
{
	struct hv_config c;
	struct hv_plan p;
	struct vm *vm;
	struct e820e e[8];

	(void)state;
	vm = fake_vm(64 << 20, 1, &p, &c);
	assert_int_equal(e820_build(vm, e, 8), 3);
	assert_int_equal(e[0].size, GPA_EBDA);
	assert_int_equal(e[1].type, E820_RESERVED);
	assert_int_equal(e[2].addr + e[2].size, 64 << 20);
	free_vm(vm, &c);
}

static void write_tmp(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, n, f), n);
	fclose(f);
}

static void hostile_kernels_are_refused(void **state)
{
	struct hv_config c;
	struct hv_plan p;
	struct vm *vm;
	struct boot_info bi;
	struct verr err;
	char path[] = "/tmp/vhpc-hv-unit-XXXXXX";
	int fd = mkstemp(path);
	uint8_t k[8192] = { 0 };

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	vm = fake_vm(32 << 20, 1, &p, &c);
	free(c.kernel);
	c.kernel = strdup(path);

	/* bzImage whose setup_sects points past the end. */
	memcpy(k + 0x202, "HdrS", 4);
	k[0x206] = 0x0f, k[0x207] = 0x02;      /* 2.15 */
	k[0x236] = 1;                           /* XLF_KERNEL_64 */
	k[0x1f1] = 200;
	write_tmp(path, k, sizeof(k));
	assert_int_equal(boot_load(vm, &bi, &err), -1);
	assert_non_null(strstr(err.msg, "setup_sects 200 runs past the end"));

	/* bzImage asking for more memory than the guest has. */
	k[0x1f1] = 4;
	k[0x260] = 0, k[0x261] = 0, k[0x262] = 0, k[0x263] = 0x10;   /* init_size 256 MiB */
	write_tmp(path, k, sizeof(k));
	assert_int_equal(boot_load(vm, &bi, &err), -1);
	assert_non_null(strstr(err.msg, "does not fit"));

	/* ELF with program headers beyond the file. */
	memset(k, 0, sizeof(k));
	memcpy(k, "\177ELF", 4);
	k[4] = 2, k[5] = 1;
	Elf64_Ehdr *h = (Elf64_Ehdr *)k;
	h->e_phoff = 8000;
	h->e_phnum = 10;
	h->e_phentsize = sizeof(Elf64_Phdr);
	write_tmp(path, k, sizeof(k));
	assert_int_equal(boot_load(vm, &bi, &err), -1);
	assert_non_null(strstr(err.msg, "program headers lie outside"));

	/* ELF with a PVH note and a segment aimed outside guest RAM. */
	h->e_phoff = 64;
	h->e_phnum = 2;
	Elf64_Phdr *ph = (Elf64_Phdr *)(k + 64);
	ph[0] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = 512, .p_filesz = 20 };
	uint32_t note[5] = { 4, 4, 18, 0x006e6558, 0x100000 };
	memcpy(k + 512, note, sizeof(note));
	ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 1024, .p_paddr = 0xfffffffffffff000ull,
			      .p_filesz = 16, .p_memsz = 0x2000 };
	write_tmp(path, k, sizeof(k));
	assert_int_equal(boot_load(vm, &bi, &err), -1);
	assert_non_null(strstr(err.msg, "is not inside guest RAM"));

	/* ...and a sane one is loaded. */
	ph[1].p_paddr = 0x100000;
	write_tmp(path, k, sizeof(k));
	assert_int_equal(boot_load(vm, &bi, &err), 0);
	assert_true(bi.pvh);
	assert_int_equal(bi.entry, 0x100000);
	unlink(path);
	free_vm(vm, &c);
}

static void plan_gives_apic_ids_of_the_topology(void **state)
{
	struct hv_config c;
	struct hv_plan p;
	struct verr err;
	char *argv[] = { "vhpc-hv", "--kernel", "k", "--vcpus", "6", "--topology", "2x3x1",
			 "--numa", "mem=32M,cpus=0-2,host-node=0", "--numa", "mem=32M,cpus=3,4,5", NULL };

	(void)state;
	hv_config_defaults(&c);
	assert_int_equal(hv_config_parse(&c, 11, argv, &err), 0);
	assert_int_equal(hv_plan_make(&c, &p, &err), 0);
	assert_int_equal(p.mem, 64 << 20);
	assert_int_equal(p.core_bits, 2);
	uint32_t want[] = { 0, 1, 2, 4, 5, 6 };
	for (int i = 0; i < 6; i++)
		assert_int_equal(p.apic_id[i], want[i]);
	assert_int_equal(p.vcpu_node[4], 1);
	assert_int_equal(p.node[0].host_node, 0);
	assert_int_equal(p.node[1].host_node, -1);
	assert_int_equal(p.node[1].ram_off, 32 << 20);
	hv_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(guest_memory_bounds_are_overflow_safe),
		cmocka_unit_test(layout_splits_at_the_hole),
		cmocka_unit_test(io_dispatch_finds_regions_and_refuses_overlaps),
		cmocka_unit_test(aml_package_lengths_encode_every_size),
		cmocka_unit_test(acpi_tables_have_valid_checksums),
		cmocka_unit_test(e820_matches_layout),
		cmocka_unit_test(extra_tables_and_reservations_are_added),
		cmocka_unit_test(hostile_kernels_are_refused),
		cmocka_unit_test(plan_gives_apic_ids_of_the_topology),
	};

	vlog_init("unit-hv");
	vlog_set_level(VLOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
