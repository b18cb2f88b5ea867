/* Test-guest kit: serial output, formatted printing, port and MMIO access,
 * ACPI table lookup, LAPIC, SMP bring-up and interrupts.  Guests run under
 * an instruction emulator here (about a million instructions a second), so
 * everything is kept short.  Results are lines on COM1; the exit status goes
 * through the debug-exit port (0 = pass). */
#ifndef KIT_H
#define KIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEBUG_EXIT_PORT 0xf4
#define LAPIC_BASE 0xfee00000ul
#define MAX_CPUS 64

struct hvm_start_info {
	uint32_t magic, version, flags, nr_modules;
	uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
	uint32_t memmap_entries, reserved;
};
struct hvm_modlist_entry { uint64_t paddr, size, cmdline_paddr, reserved; };
struct hvm_memmap_entry { uint64_t addr, size; uint32_t type, reserved; };

struct acpi_hdr {
	char sig[4];
	uint32_t len;
	uint8_t rev, csum;
	char oem[6], oem_table[8];
	uint32_t oem_rev, creator, creator_rev;
} __attribute__((packed));

static inline void outb(uint16_t p, uint8_t v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(p)); }
static inline uint8_t inb(uint16_t p) { uint8_t v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(p)); return v; }
static inline uint32_t mmio_read32(uint64_t a) { return *(volatile uint32_t *)a; }
static inline void mmio_write32(uint64_t a, uint32_t v) { *(volatile uint32_t *)a = v; }
static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	__asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
static inline void cpu_relax(void) { __asm__ volatile("pause"); }

void *memcpy(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
const char *strstr_(const char *h, const char *n);
/* Value of "key=" on the command line, copied into buf; NULL if absent. */
const char *cmdline_get(const char *key, char *buf, size_t len);
uint64_t parse_u64(const char *s);

void putc_(char c);
void printf_(const char *fmt, ...) __attribute__((format(__printf__, 1, 2)));
#define printf printf_
void exit_(int code) __attribute__((noreturn));
/* "ok - what" / "not ok - what"; failures are counted for exit_ok(). */
void check(bool cond, const char *fmt, ...) __attribute__((format(__printf__, 2, 3)));
void finish(void) __attribute__((noreturn));   /* exit 0 if all checks passed */

extern struct hvm_start_info *start_info;
/* Set when booted as a bzImage (Linux 64-bit boot protocol). */
extern const uint8_t *zero_page;
extern const char *cmdline;

uint8_t acpi_sum(const void *p, size_t n);
/* Table by signature through RSDP -> XSDT; NULL if not found. */
struct acpi_hdr *acpi_find(const char *sig);
void *acpi_rsdp(void);

uint32_t lapic_id(void);
uint32_t cpuid_apic_id(void);    /* leaf 0xB EDX (x2APIC ID) */
void lapic_enable(void);
void lapic_eoi(void);
void lapic_send_ipi(uint32_t apic, uint32_t icr_lo);

/* Brings up every AP by INIT/SIPI/SIPI (APIC IDs from MADT); each runs
 * fn(index) with index 1..n-1.  Returns how many came up within the wait. */
typedef void (*ap_fn)(int idx);
int smp_start(ap_fn fn, int expect, uint64_t spins);
int ncpus_madt(uint32_t *ids, int max);

typedef void (*irq_fn)(int vec);
void idt_init(void);
void irq_set(int vec, irq_fn fn);
static inline void sti(void) { __asm__ volatile("sti"); }
static inline void cli(void) { __asm__ volatile("cli"); }
static inline void sti_hlt(void) { __asm__ volatile("sti; hlt"); }

void spin_lock(volatile int *l);
void spin_unlock(volatile int *l);

void kmain(uint32_t start_info_pa);
void test_main(void);   /* each guest's body */
#endif
