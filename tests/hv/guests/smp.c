/* SMP: every vCPU in the MADT comes up through INIT/SIPI/SIPI and reports
 * its APIC ID from CPUID (leaves 0x1 and 0xB) and from its LAPIC; all must
 * agree and be the MADT's IDs. */
#include "kit.h"

static volatile uint32_t seen_cpuid[MAX_CPUS], seen_lapic[MAX_CPUS], seen_leaf1[MAX_CPUS];
static volatile int seen;

static void report(int idx)
{
	uint32_t r[4];

	cpuid(1, 0, r);
	seen_leaf1[idx] = r[1] >> 24;
	seen_cpuid[idx] = cpuid_apic_id();
	seen_lapic[idx] = lapic_id();
	printf("CPU %d apic %u\n", idx, seen_cpuid[idx]);
	__atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST);
}

void test_main(void)
{
	uint32_t ids[MAX_CPUS];
	int n = ncpus_madt(ids, MAX_CPUS), up;
	char buf[16];
	int want = cmdline_get("cpus", buf, sizeof(buf)) ? (int)parse_u64(buf) : n;

	check(n == want, "MADT lists %d CPUs (want %d)", n, want);
	report(0);
	up = smp_start(report, n, 50000000);
	for (uint64_t s = 0; s < 50000000 && seen < n; s++)
		cpu_relax();
	check(up == n && seen == n, "%d of %d CPUs came up", seen, n);
	for (int i = 0; i < seen && i < MAX_CPUS; i++) {
		bool in = false;

		for (int j = 0; j < n; j++)
			in |= ids[j] == seen_cpuid[i];
		check(in && seen_lapic[i] == seen_cpuid[i] && seen_leaf1[i] == (seen_cpuid[i] & 0xff),
		      "CPU %d: CPUID APIC ID %u, LAPIC %u, leaf 1 %u, in MADT", i, seen_cpuid[i], seen_lapic[i],
		      seen_leaf1[i]);
	}
	for (int i = 0; i < seen; i++)
		for (int j = i + 1; j < seen; j++)
			if (seen_cpuid[i] == seen_cpuid[j])
				check(false, "CPUs %d and %d share APIC ID %u", i, j, seen_cpuid[i]);
}
