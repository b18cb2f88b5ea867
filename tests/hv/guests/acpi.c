/* ACPI as a guest finds it: RSDP from hvm_start_info (and by the legacy
 * scan of 0xe0000-0xfffff), checksums of every table, FADT flags and
 * registers, DSDT devices, the MADT's CPUs and interrupt controller, and
 * SRAT/SLIT printed for the host test to compare with --numa.  The CPUID
 * topology of this CPU must agree with the MADT. */
#include "kit.h"

static bool dsdt_has(struct acpi_hdr *d, const char *name)
{
	for (uint32_t i = sizeof(*d); i + 4 <= d->len; i++)
		if (!memcmp((uint8_t *)d + i, name, 4))
			return true;
	return false;
}

void test_main(void)
{
	uint8_t *rsdp = acpi_rsdp(), *scan = 0;
	struct acpi_hdr *x, *t;
	uint32_t ids[MAX_CPUS], r[4];
	int n, tables = 0, bad = 0;

	for (uint64_t a = 0xe0000; a < 0x100000; a += 16)
		if (!memcmp((void *)a, "RSD PTR ", 8)) {
			scan = (uint8_t *)a;
			break;
		}
	check(rsdp && scan == rsdp, "RSDP at 0x%lx from start_info, legacy scan finds 0x%lx",
	      (uint64_t)rsdp, (uint64_t)scan);
	check(rsdp && acpi_sum(rsdp, 20) == 0 && acpi_sum(rsdp, 36) == 0 && rsdp[15] >= 2,
	      "RSDP checksums valid, revision %u", rsdp ? rsdp[15] : 0);
	x = acpi_find("XSDT");
	check(x && !memcmp(x->sig, "XSDT", 4) && acpi_sum(x, x->len) == 0, "XSDT found, checksum valid");
	for (uint32_t off = sizeof(*x); x && off + 8 <= x->len; off += 8) {
		uint64_t a;

		memcpy(&a, (uint8_t *)x + off, 8);
		t = (struct acpi_hdr *)a;
		printf("TABLE %c%c%c%c len %u sum %s\n", t->sig[0], t->sig[1], t->sig[2], t->sig[3],
		       t->len, acpi_sum(t, t->len) ? "BAD" : "ok");
		tables++;
		bad += acpi_sum(t, t->len) != 0;
	}
	check(tables >= 2 && !bad, "%d tables in the XSDT, %d with bad checksums", tables, bad);

	t = acpi_find("FACP");
	if (t) {
		uint32_t flags;
		uint8_t *f = (uint8_t *)t;

		memcpy(&flags, f + 112, 4);
		check(t->len >= 276 && (flags & (1u << 20)), "FADT is hardware-reduced (flags 0x%x)", flags);
		check(f[244] == 1 && f[256] == 1, "FADT has sleep control/status registers in I/O space");
		check((flags & (1u << 10)) && f[116] == 1 && f[128] == 0xfe, "FADT reset register (value 0x%x)", f[128]);
	} else {
		check(false, "FADT present");
	}
	t = acpi_find("DSDT");
	check(t && !memcmp(t->sig, "DSDT", 4) && acpi_sum(t, t->len) == 0, "DSDT via FADT X_DSDT, checksum valid");
	if (t) {
		check(dsdt_has(t, "COM1") && dsdt_has(t, "_S5_"), "DSDT has COM1 and \\_S5");
		check(dsdt_has(t, "PWRB") && dsdt_has(t, "GED0") && dsdt_has(t, "_EVT"),
		      "DSDT has a power button behind a GED");
	}

	t = acpi_find("APIC");
	check(t != 0, "MADT present");
	if (t) {
		uint8_t *p = (uint8_t *)t + sizeof(*t) + 8, *end = (uint8_t *)t + t->len;
		int ioapic = 0, iso = 0, nmi = 0;

		for (; p + 2 <= end && p[1] >= 2; p += p[1]) {
			if (p[0] == 1) {
				uint32_t addr;
				memcpy(&addr, p + 4, 4);
				ioapic++;
				check(addr == 0xfec00000, "IOAPIC at 0x%x", addr);
			} else if (p[0] == 2) {
				uint32_t gsi;
				memcpy(&gsi, p + 4, 4);
				printf("MADT_ISO irq %u gsi %u\n", p[3], gsi);
				iso++;
			} else if (p[0] == 4 || p[0] == 0xa) {
				nmi++;
			}
		}
		check(ioapic == 1 && iso >= 1 && nmi >= 1, "MADT: %d IOAPIC, %d overrides, %d NMI entries", ioapic, iso, nmi);
	}
	n = ncpus_madt(ids, MAX_CPUS);
	for (int i = 0; i < n; i++)
		printf("MADT_CPU %u\n", ids[i]);
	{
		uint32_t me = cpuid_apic_id(), lid = lapic_id();
		bool found = false;

		cpuid(1, 0, r);
		for (int i = 0; i < n; i++)
			found |= ids[i] == me;
		check(found, "this CPU's APIC ID %u (CPUID.0xB) is in the MADT", me);
		check((r[1] >> 24) == (me & 0xff) && lid == me, "CPUID.1 EBX APIC ID %u, LAPIC ID %u agree",
		      r[1] >> 24, lid);
		check(r[2] & (1u << 31), "CPUID.1 hypervisor bit set");
	}
	/* Topology leaves, printed for the host test. */
	cpuid(0xb, 0, r);
	printf("CPUID_B0 shift %u count %u type %u\n", r[0] & 0x1f, r[1] & 0xffff, (r[2] >> 8) & 0xff);
	cpuid(0xb, 1, r);
	printf("CPUID_B1 shift %u count %u type %u\n", r[0] & 0x1f, r[1] & 0xffff, (r[2] >> 8) & 0xff);
	cpuid(0x1f, 1, r);
	printf("CPUID_1F1 shift %u count %u type %u\n", r[0] & 0x1f, r[1] & 0xffff, (r[2] >> 8) & 0xff);
	/* Leaf 4 describes caches only on Intel; AMD's (and the lab's) is
	 * empty, cache type 0, and cores per package are 0x80000008's. */
	cpuid(4, 0, r);
	printf("CPUID_4 cores %u type %u\n", (r[0] >> 26) + 1, r[0] & 0x1f);
	cpuid(0x80000008, 0, r);
	printf("CPUID_80000008 cores %u\n", (r[2] & 0xff) + 1);
	cpuid(1, 0, r);
	printf("CPUID_1 lps %u htt %u\n", (r[1] >> 16) & 0xff, (r[3] >> 28) & 1);

	t = acpi_find("SRAT");
	if (t) {
		uint8_t *p = (uint8_t *)t + sizeof(*t) + 12, *end = (uint8_t *)t + t->len;

		for (; p + 2 <= end && p[1] >= 2; p += p[1]) {
			if (p[0] == 0) {
				uint32_t dom = p[2] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
				printf("SRAT_CPU %u %u\n", p[3], dom);
			} else if (p[0] == 2) {
				uint32_t dom, id;
				memcpy(&dom, p + 4, 4);
				memcpy(&id, p + 8, 4);
				printf("SRAT_CPU %u %u\n", id, dom);
			} else if (p[0] == 1) {
				uint32_t dom;
				uint64_t base, len;
				memcpy(&dom, p + 2, 4);
				memcpy(&base, p + 8, 8);
				memcpy(&len, p + 16, 8);
				printf("SRAT_MEM 0x%lx 0x%lx %u\n", base, len, dom);
			}
		}
	}
	t = acpi_find("SLIT");
	if (t) {
		uint8_t *p = (uint8_t *)t + sizeof(*t);
		uint64_t k;

		memcpy(&k, p, 8);
		for (uint64_t i = 0; i < k; i++)
			for (uint64_t j = 0; j < k; j++)
				printf("SLIT %lu %lu %u\n", i, j, p[8 + i * k + j]);
	}
}
