/* Ways out of a guest, chosen by the command line:
 *   mode=poweroff   SLP_TYP(S5)|SLP_EN to the FADT sleep control register
 *   mode=reset      the FADT reset register's value to its port
 *   mode=triple     a fault with no usable IDT
 *   mode=button     wait for the power-button GED interrupt, then power off
 *   mode=spin       keep every vCPU busy until the host ends the guest
 * Each must end vhpc-hv with its own status; reaching the end is a failure. */
#include "kit.h"

static volatile int ged_hits;

static void on_ged(int v)
{
	(void)v;
	ged_hits++;
	(void)inb(0x602);                    /* read the event register: clears the line */
	mmio_write32(LAPIC_BASE + 0xb0, 0);
}

static void sleep_s5(uint8_t *f)
{
	uint64_t port;

	memcpy(&port, f + 244 + 4, 8);
	printf("writing S5 to port 0x%lx\n", port);
	outb((uint16_t)port, (5 << 2) | 0x20);
}

static void spin(int idx)
{
	(void)idx;
	for (;;)
		cpu_relax();
}

void test_main(void)
{
	char mode[16];
	uint8_t *f = (uint8_t *)acpi_find("FACP");

	if (!cmdline_get("mode", mode, sizeof(mode)) || !f) {
		check(false, "mode= on the command line and an FADT");
		return;
	}
	printf("GUEST mode %s\n", mode);
	if (!memcmp(mode, "poweroff", 9)) {
		sleep_s5(f);
	} else if (!memcmp(mode, "reset", 6)) {
		uint64_t port;

		memcpy(&port, f + 116 + 4, 8);
		outb((uint16_t)port, f[128]);
	} else if (!memcmp(mode, "triple", 7)) {
		struct { uint16_t limit; uint64_t base; } __attribute__((packed)) p = { 0, 0 };

		__asm__ volatile("lidt %0; ud2" : : "m"(p));
	} else if (!memcmp(mode, "spin", 5)) {
		int n = smp_start(spin, 64, 0);

		printf("GUEST spinning\n");
		(void)n;
		spin(0);
	} else if (!memcmp(mode, "button", 7)) {
		/* IOAPIC pin 9 -> vector 0x50, level, active high, to APIC 0. */
		volatile uint32_t *sel = (uint32_t *)0xfec00000, *win = (uint32_t *)0xfec00010;

		irq_set(0x50, on_ged);
		lapic_enable();
		*sel = 0x10 + 2 * 9 + 1;
		*win = 0;
		*sel = 0x10 + 2 * 9;
		*win = 0x50 | (1u << 15);
		printf("GUEST waiting for the power button\n");
		while (!ged_hits)
			sti_hlt();
		cli();
		printf("GUEST power button pressed\n");
		sleep_s5(f);
	}
	for (volatile int i = 0; i < 100000; i++)
		;
	check(false, "still running after mode=%s", mode);
}
