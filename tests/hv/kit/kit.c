/* Test-guest kit implementation (see kit.h). */
#include "kit.h"

#include <stdarg.h>

struct hvm_start_info *start_info;
const char *cmdline = "";
static int failures, checks;
static volatile int print_lock;

void *memcpy(void *d, const void *s, size_t n)
{
	uint8_t *a = d;
	const uint8_t *b = s;

	while (n--)
		*a++ = *b++;
	return d;
}

void *memset(void *d, int c, size_t n)
{
	uint8_t *a = d;

	while (n--)
		*a++ = (uint8_t)c;
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

const char *strstr_(const char *h, const char *n)
{
	size_t l = strlen(n);

	for (; *h; h++)
		if (!memcmp(h, n, l))
			return h;
	return 0;
}

const char *cmdline_get(const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key);
	const char *p = cmdline;

	while (*p) {
		while (*p == ' ')
			p++;
		if (!memcmp(p, key, kl) && p[kl] == '=') {
			size_t i = 0;

			p += kl + 1;
			while (*p && *p != ' ' && i + 1 < len)
				buf[i++] = *p++;
			buf[i] = 0;
			return buf;
		}
		while (*p && *p != ' ')
			p++;
	}
	return 0;
}

uint64_t parse_u64(const char *s)
{
	uint64_t v = 0;
	int base = 10;

	if (s[0] == '0' && s[1] == 'x') {
		base = 16;
		s += 2;
	}
	for (; *s; s++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else
			break;
		if (d >= base)
			break;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	return v;
}

void putc_(char c)
{
	/* Wait for THR empty like a real driver would. */
	while (!(inb(0x3f8 + 5) & 0x20))
		cpu_relax();
	outb(0x3f8, (uint8_t)c);
}

static void put_u(uint64_t v, unsigned base, int width, char pad)
{
	char buf[24];
	int n = 0;

	do {
		unsigned d = (unsigned)(v % base);
		buf[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v);
	while (n < width--)
		putc_(pad);
	while (n)
		putc_(buf[--n]);
}

static void vprintf_(const char *fmt, va_list ap)
{
	for (; *fmt; fmt++) {
		int width = 0, lng = 0;
		char pad = ' ';

		if (*fmt != '%') {
			putc_(*fmt);
			continue;
		}
		fmt++;
		if (*fmt == '0') {
			pad = '0';
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd': {
			int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);
			if (v < 0) {
				putc_('-');
				v = -v;
			}
			put_u((uint64_t)v, 10, width, pad);
			break;
		}
		case 'u':
			put_u(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 10, width, pad);
			break;
		case 'x':
			put_u(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 16, width, pad);
			break;
		case 'p':
			put_u((uint64_t)va_arg(ap, void *), 16, width, pad);
			break;
		case 'c':
			putc_((char)va_arg(ap, int));
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			while (s && *s)
				putc_(*s++);
			break;
		}
		case '%':
			putc_('%');
			break;
		default:
			putc_('?');
		}
	}
}

void printf_(const char *fmt, ...)
{
	va_list ap;

	spin_lock(&print_lock);
	va_start(ap, fmt);
	vprintf_(fmt, ap);
	va_end(ap);
	spin_unlock(&print_lock);
}

void check(bool cond, const char *fmt, ...)
{
	va_list ap;

	spin_lock(&print_lock);
	checks++;
	if (!cond)
		failures++;
	for (const char *s = cond ? "GUEST ok - " : "GUEST not ok - "; *s; s++)
		putc_(*s);
	va_start(ap, fmt);
	vprintf_(fmt, ap);
	va_end(ap);
	putc_('\n');
	spin_unlock(&print_lock);
}

void exit_(int code)
{
	outb(DEBUG_EXIT_PORT, (uint8_t)code);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void finish(void)
{
	printf("GUEST done: %d checks, %d failed\n", checks, failures);
	exit_(failures ? 1 : 0);
}

void spin_lock(volatile int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		cpu_relax();
}

void spin_unlock(volatile int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

uint8_t acpi_sum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t s = 0;

	while (n--)
		s = (uint8_t)(s + *b++);
	return s;
}

void *acpi_rsdp(void)
{
	return (void *)start_info->rsdp_paddr;
}

struct acpi_hdr *acpi_find(const char *sig)
{
	uint8_t *rsdp = acpi_rsdp();
	struct acpi_hdr *x;
	uint64_t xsdt;

	if (!rsdp)
		return 0;
	memcpy(&xsdt, rsdp + 24, 8);
	x = (struct acpi_hdr *)xsdt;
	if (!memcmp(sig, "XSDT", 4))
		return x;
	for (uint32_t off = sizeof(*x); off + 8 <= x->len; off += 8) {
		uint64_t a;
		struct acpi_hdr *t;

		memcpy(&a, (uint8_t *)x + off, 8);
		t = (struct acpi_hdr *)a;
		if (!memcmp(t->sig, sig, 4))
			return t;
		if (!memcmp(sig, "DSDT", 4) && !memcmp(t->sig, "FACP", 4)) {
			uint64_t d;

			memcpy(&d, (uint8_t *)t + 140, 8);
			return (struct acpi_hdr *)d;
		}
	}
	return 0;
}

uint32_t lapic_id(void)
{
	return mmio_read32(LAPIC_BASE + 0x20) >> 24;
}

uint32_t cpuid_apic_id(void)
{
	uint32_t r[4];

	cpuid(0xb, 0, r);
	return r[3];
}

void lapic_enable(void)
{
	mmio_write32(LAPIC_BASE + 0xf0, 0x100 | 0xff);   /* software enable, spurious 0xff */
	mmio_write32(LAPIC_BASE + 0x80, 0);              /* TPR: accept everything */
}

void lapic_eoi(void)
{
	mmio_write32(LAPIC_BASE + 0xb0, 0);
}

void lapic_send_ipi(uint32_t apic, uint32_t icr_lo)
{
	mmio_write32(LAPIC_BASE + 0x310, apic << 24);
	mmio_write32(LAPIC_BASE + 0x300, icr_lo);
	while (mmio_read32(LAPIC_BASE + 0x300) & (1u << 12))
		cpu_relax();
}

int ncpus_madt(uint32_t *ids, int max)
{
	struct acpi_hdr *m = acpi_find("APIC");
	uint8_t *p, *end;
	int n = 0;

	if (!m)
		return 0;
	p = (uint8_t *)m + sizeof(*m) + 8;
	end = (uint8_t *)m + m->len;
	while (p + 2 <= end && p[1] >= 2) {
		uint32_t id = 0, flags = 0;
		bool cpu = false;

		if (p[0] == 0) {
			id = p[3];
			memcpy(&flags, p + 4, 4);
			cpu = true;
		} else if (p[0] == 9) {
			memcpy(&id, p + 4, 4);
			memcpy(&flags, p + 8, 4);
			cpu = true;
		}
		if (cpu && (flags & 1) && n < max)
			ids[n++] = id;
		p += p[1];
	}
	return n;
}

extern char trampoline_start[], trampoline_end[];
extern volatile int ap_mode, ap_count;
static ap_fn ap_func;
static volatile int ap_up;

void ap_main(int idx);
void ap_main(int idx)
{
	__atomic_add_fetch(&ap_up, 1, __ATOMIC_SEQ_CST);
	if (ap_func)
		ap_func(idx);
	for (;;)
		__asm__ volatile("cli; hlt");
}

int smp_start(ap_fn fn, int expect, uint64_t spins)
{
	uint32_t ids[MAX_CPUS];
	int n = ncpus_madt(ids, MAX_CPUS);
	uint32_t self = lapic_id();

	/* The in-kernel LAPIC sends no IPIs while software-disabled. */
	lapic_enable();
	ap_func = fn;
	ap_mode = 1;
	memcpy((void *)0x8000, trampoline_start, (size_t)(trampoline_end - trampoline_start));
	for (int i = 0; i < n; i++) {
		if (ids[i] == self)
			continue;
		lapic_send_ipi(ids[i], 0x4500);            /* INIT */
		lapic_send_ipi(ids[i], 0x4600 | 0x08);     /* SIPI, vector 0x08 -> 0x8000 */
		lapic_send_ipi(ids[i], 0x4600 | 0x08);
	}
	for (uint64_t s = 0; s < spins && ap_up < expect - 1; s++)
		cpu_relax();
	return ap_up + 1;
}

struct idt_gate {
	uint16_t off0, sel;
	uint8_t ist, type;
	uint16_t off1;
	uint32_t off2, zero;
} __attribute__((packed));

static struct idt_gate idt[256] __attribute__((aligned(16)));
static irq_fn handlers[256];
extern char isr_entries[];

void idt_init(void)
{
	struct { uint16_t limit; uint64_t base; } __attribute__((packed)) p;

	for (int v = 0; v < 256; v++) {
		uint64_t a = (uint64_t)(isr_entries + v * 16);

		idt[v] = (struct idt_gate){ (uint16_t)a, 0x18, 0, 0x8e, (uint16_t)(a >> 16), (uint32_t)(a >> 32), 0 };
	}
	p.limit = sizeof(idt) - 1;
	p.base = (uint64_t)idt;
	__asm__ volatile("lidt %0" : : "m"(p));
}

void irq_set(int vec, irq_fn fn)
{
	handlers[vec] = fn;
}

void isr_dispatch(uint64_t vec, uint64_t *frame);
void isr_dispatch(uint64_t vec, uint64_t *frame)
{
	if (handlers[vec & 0xff]) {
		handlers[vec & 0xff]((int)(vec & 0xff));
		return;
	}
	if (vec < 32) {
		printf("GUEST not ok - exception %u at 0x%lx\n", (unsigned)vec, frame[0]);
		exit_(2);
	}
}

/* Linux 64-bit boot protocol: the zero page becomes a start_info, so the
 * rest of the kit (and the test) works the same either way. */
const uint8_t *zero_page;
static struct hvm_start_info bz_si;
static struct hvm_memmap_entry bz_map[128];
static struct hvm_modlist_entry bz_mod;

void kmain_bz(uint64_t zp);
void kmain_bz(uint64_t zp)
{
	const uint8_t *z = (const uint8_t *)zp;
	uint32_t v;
	int n = z[0x1e8];

	zero_page = z;
	bz_si.magic = 0x336ec578;
	bz_si.version = 1;
	memcpy(&v, z + 0x228, 4);
	bz_si.cmdline_paddr = v;
	memcpy(&bz_si.rsdp_paddr, z + 0x70, 8);
	for (int i = 0; i < n && i < 128; i++) {
		memcpy(&bz_map[i].addr, z + 0x2d0 + 20 * i, 8);
		memcpy(&bz_map[i].size, z + 0x2d0 + 20 * i + 8, 8);
		memcpy(&bz_map[i].type, z + 0x2d0 + 20 * i + 16, 4);
	}
	bz_si.memmap_paddr = (uint64_t)bz_map;
	bz_si.memmap_entries = (uint32_t)n;
	memcpy(&v, z + 0x21c, 4);
	if (v) {
		bz_mod.size = v;
		memcpy(&v, z + 0x218, 4);
		bz_mod.paddr = v;
		bz_si.modlist_paddr = (uint64_t)&bz_mod;
		bz_si.nr_modules = 1;
	}
	kmain((uint32_t)(uint64_t)&bz_si);
}

void kmain(uint32_t si)
{
	start_info = (struct hvm_start_info *)(uint64_t)si;
	if (start_info->magic != 0x336ec578) {
		printf("GUEST not ok - bad hvm_start_info magic 0x%x\n", start_info->magic);
		exit_(3);
	}
	if (start_info->cmdline_paddr)
		cmdline = (const char *)start_info->cmdline_paddr;
	/* KVM's BSP LAPIC starts in virtual-wire mode: mask the 8259s so that
	 * ISA lines reach the CPU only through the IOAPIC. */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
	idt_init();
	test_main();
	finish();
}
