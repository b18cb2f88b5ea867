/* A computation over many rounds for the snapshot tests: each round
 * waits for a LAPIC timer tick (so interrupts must go on working after a
 * restore), then folds a window of a 1 MiB array into a running value
 * and writes the window back (so RAM must come back whole); the second
 * CPU folds a sum of its own meanwhile.  The result line depends on every
 * step; a run restored from a snapshot taken mid-way must print the same
 * one as a run left alone.  rounds=N on the command line (default 48),
 * tick=N the timer's count (default 20000000: 20 ms at KVM's 1 GHz APIC
 * bus), so a test has time to act between rounds. */
#include "kit.h"

#define VEC_TIMER 0x40
#define WORDS (128 * 1024)
#define WINDOW (8 * 1024)

static uint64_t data[WORDS];
static volatile int ticks, ap_done;
static volatile uint64_t ap_sum;

static void on_timer(int v)
{
	(void)v;
	ticks++;
	lapic_eoi();
}

static void ap(int idx)
{
	uint64_t x = (uint64_t)idx;

	for (uint64_t i = 0; i < 3000000; i++)
		x = x * 6364136223846793005ull + i;
	ap_sum = x;
	__atomic_store_n(&ap_done, 1, __ATOMIC_SEQ_CST);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void test_main(void)
{
	char buf[16];
	int rounds = cmdline_get("rounds", buf, sizeof(buf)) ? (int)parse_u64(buf) : 48;
	uint32_t tick = cmdline_get("tick", buf, sizeof(buf)) ? (uint32_t)parse_u64(buf) : 20000000;
	uint64_t x = 0x9e3779b97f4a7c15ull, fold = 0;

	for (int i = 0; i < WORDS; i++)
		data[i] = (uint64_t)i * 0x100000001b3ull;
	if (smp_start(ap, 2, 50000000) < 2)
		check(false, "second CPU came up");
	irq_set(VEC_TIMER, on_timer);
	lapic_enable();
	/* Periodic, divide by 1. */
	mmio_write32(LAPIC_BASE + 0x3e0, 0xb);
	mmio_write32(LAPIC_BASE + 0x320, VEC_TIMER | (1u << 17));
	mmio_write32(LAPIC_BASE + 0x380, tick);
	for (int r = 0; r < rounds; r++) {
		int t = ticks;
		uint64_t base = (uint64_t)r * WINDOW * 5 % WORDS;

		while (ticks == t)
			sti_hlt();
		cli();
		for (uint64_t i = 0; i < WINDOW; i++) {
			uint64_t *w = &data[(base + i) % WORDS];

			x = (x ^ *w) * 0xff51afd7ed558ccdull;
			x ^= x >> 29;
			*w = x;
		}
		printf("GUEST round %d\n", r);
	}
	mmio_write32(LAPIC_BASE + 0x320, 1u << 16);   /* timer off */
	for (uint64_t s = 0; s < 500000000 && !ap_done; s++)
		cpu_relax();
	check(ap_done, "second CPU finished its sum");
	for (int i = 0; i < WORDS; i++)
		fold = (fold + data[i]) * 31;
	printf("GUEST result %lx %lx %lx\n", x, fold, ap_sum);
}
