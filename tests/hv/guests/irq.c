/* Interrupt delivery: the LAPIC timer (one-shot) wakes this CPU from hlt,
 * and a fixed IPI sent by another CPU (and one back) reaches its handler. */
#include "kit.h"

#define VEC_TIMER 0x40
#define VEC_IPI   0x41

static volatile int timer_hits, ipi_hits[MAX_CPUS], ap_ready;
static volatile uint32_t ap_apic;

static void on_timer(int v) { (void)v; timer_hits++; lapic_eoi(); }
static void on_ipi(int v)
{
	(void)v;
	__atomic_add_fetch(&ipi_hits[lapic_id() == ap_apic ? 1 : 0], 1, __ATOMIC_SEQ_CST);
	lapic_eoi();
}

static void ap(int idx)
{
	(void)idx;
	/* The AP loads the shared IDT and waits for the BSP's IPI, then answers. */
	idt_init();
	lapic_enable();
	ap_apic = lapic_id();
	__atomic_store_n(&ap_ready, 1, __ATOMIC_SEQ_CST);
	while (!ipi_hits[1])
		sti_hlt();
	cli();
	lapic_send_ipi(0, VEC_IPI);
	for (;;)
		sti_hlt();
}

void test_main(void)
{
	uint64_t spins;

	irq_set(VEC_TIMER, on_timer);
	irq_set(VEC_IPI, on_ipi);
	lapic_enable();
	/* One-shot timer: divide by 1, a short count. */
	mmio_write32(LAPIC_BASE + 0x3e0, 0xb);
	mmio_write32(LAPIC_BASE + 0x320, VEC_TIMER);
	mmio_write32(LAPIC_BASE + 0x380, 100000);
	for (spins = 0; spins < 100 && !timer_hits; spins++)
		sti_hlt();
	cli();
	check(timer_hits == 1, "LAPIC timer interrupt woke hlt (%d hits after %lu halts)", timer_hits, spins);

	if (smp_start(ap, 2, 50000000) < 2) {
		check(false, "second CPU came up for the IPI test");
		return;
	}
	for (spins = 0; spins < 50000000 && !ap_ready; spins++)
		cpu_relax();
	lapic_send_ipi(ap_apic, VEC_IPI);
	for (spins = 0; spins < 1000 && !ipi_hits[0]; spins++)
		sti_hlt();
	cli();
	check(ipi_hits[1] == 1, "IPI from CPU 0 reached CPU 1 (APIC %u)", ap_apic);
	check(ipi_hits[0] == 1, "IPI from CPU 1 reached CPU 0 (woke hlt)");
}
