/* ACPI tables: RSDP -> XSDT -> FADT (hardware-reduced) -> DSDT, MADT, and
 * SRAT/SLIT when the guest has more than one node.  They are written at
 * GPA_ACPI, inside the reserved e820 range below 1 MiB, so legacy RSDP
 * scans find them too. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "vm.h"
#include "aml.h"
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OEM_ID    "VHPC  "
#define OEM_TABLE "VHPC-HV "

struct tbuf {
	uint8_t *p;
	size_t len, cap;
};

static uint8_t *tb_put(struct tbuf *t, size_t n)
{
	if (grow(&t->p, &t->cap, t->len + n, 1, 4096) < 0)
		return NULL;
	uint8_t *r = t->p + t->len;
	memset(r, 0, n);
	t->len += n;
	return r;
}

/* Appends table s at the next 8-byte boundary (where the XSDT points) and
 * frees it; returns its offset. */
static size_t tb_append8(struct tbuf *t, struct tbuf *s)
{
	size_t at;
	uint8_t *dst;

	while (t->len % 8 && tb_put(t, 1))
		;
	at = t->len;
	dst = tb_put(t, s->len);
	if (dst)
		memcpy(dst, s->p, s->len);
	free(s->p);
	return at;
}

static void w16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void w32(uint8_t *p, uint32_t v) { w16(p, (uint16_t)v); w16(p + 2, (uint16_t)(v >> 16)); }
static void w64(uint8_t *p, uint64_t v) { w32(p, (uint32_t)v); w32(p + 4, (uint32_t)(v >> 32)); }

static uint8_t csum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	for (size_t i = 0; i < n; i++)
		s = (uint8_t)(s + p[i]);
	return (uint8_t)(0 - s);
}

void acpi_table_header(uint8_t *h, const char *sig, uint8_t rev)
{
	memset(h, 0, 36);
	memcpy(h, sig, 4);
	h[8] = rev;
	memcpy(h + 10, OEM_ID, 6);
	memcpy(h + 16, OEM_TABLE, 8);
	w32(h + 24, 1);
	memcpy(h + 28, "VHPC", 4);
	w32(h + 32, 1);
}

/* Standard 36-byte header; the caller fills length and checksum at the end. */
static void header(struct tbuf *t, const char *sig, uint8_t rev)
{
	uint8_t *h = tb_put(t, 36);

	if (h)
		acpi_table_header(h, sig, rev);
}

static void finish(struct tbuf *t)
{
	if (!t->p)
		return;
	w32(t->p + 4, (uint32_t)t->len);
	t->p[9] = 0;
	t->p[9] = csum(t->p, t->len);
}

/* Generic Address Structure: system I/O, byte access. */
static void gas_io(uint8_t *p, uint16_t port, uint8_t bits)
{
	p[0] = 1;            /* SystemIO */
	p[1] = bits;
	p[2] = 0;
	p[3] = 1;            /* byte access */
	w64(p + 4, port);
}

static void build_dsdt(struct vm *vm, struct aml *a)
{
	uint8_t res[64];
	size_t n;

	aml_scope(a, "\\_SB_");

	aml_device(a, "COM1");
	aml_name_eisaid(a, "_HID", "PNP0501");
	aml_name_int(a, "_UID", 1);
	n = res_io(res, PORT_COM1, 8);
	n += res_irq(res + n, IRQ_COM1);
	n += res_end(res + n);
	aml_name_buffer(a, "_CRS", res, n);
	aml_close(a);

	/* Devices of other files (power button, PCI host bridge, ...). */
	for (int i = 0; i < vm->ndsdt; i++)
		vm->dsdt[i].fn(a, vm, vm->dsdt[i].opaque);

	aml_close(a);

	/* \_S5: SLP_TYP for the hardware-reduced sleep control register. */
	aml_byte(a, 0x08);
	aml_name(a, "\\_S5_");
	aml_package(a, 4);
	aml_int(a, ACPI_S5_TYP);
	aml_int(a, ACPI_S5_TYP);
	aml_int(a, 0);
	aml_int(a, 0);
	aml_close(a);
}

static void build_fadt(struct tbuf *t, uint64_t dsdt)
{
	uint8_t *f;

	header(t, "FACP", 6);
	f = tb_put(t, 276 - 36);
	if (!f)
		return;
	f -= 36;
	w32(f + 40, (uint32_t)dsdt);
	w16(f + 46, GSI_GED);                 /* SCI_INT: unused when hardware-reduced */
	w16(f + 109, (1u << 2) | (1u << 5));  /* IAPC_BOOT_ARCH: no VGA, no CMOS RTC, no 8042 */
	/* Flags: WBINVD, PWR_BUTTON and SLP_BUTTON as control-method devices,
	 * RESET_REG_SUP, HW_REDUCED_ACPI. */
	w32(f + 112, (1u << 0) | (1u << 4) | (1u << 5) | (1u << 10) | (1u << 20));
	gas_io(f + 116, PORT_I8042_CMD, 8);   /* RESET_REG: the i8042 pulse */
	f[128] = 0xfe;                        /* RESET_VALUE */
	f[131] = 0;                           /* FADT minor version */
	w64(f + 140, dsdt);                   /* X_DSDT */
	gas_io(f + 244, PORT_ACPI_SLEEP_CTL, 8);
	gas_io(f + 256, PORT_ACPI_SLEEP_STS, 8);
	memcpy(f + 268, "VHPC-HV ", 8);       /* hypervisor vendor identity */
	finish(t);
}

static void build_madt(struct tbuf *t, const struct vm *vm)
{
	uint8_t *e;
	bool x2 = false;

	header(t, "APIC", 5);
	e = tb_put(t, 8);
	if (!e)
		return;
	w32(e, (uint32_t)GPA_LAPIC);
	w32(e + 4, 1);                        /* PCAT_COMPAT: there is an 8259 (masked by Linux) */
	for (int i = 0; i < vm->nvcpus; i++) {
		uint32_t id = vm->vcpu[i].apic_id;

		if (id < 255) {
			if (!(e = tb_put(t, 8)))
				return;
			e[0] = 0;                 /* Processor Local APIC */
			e[1] = 8;
			e[2] = (uint8_t)i;        /* ACPI processor UID */
			e[3] = (uint8_t)id;
			w32(e + 4, 1);            /* enabled */
		} else {
			x2 = true;
			if (!(e = tb_put(t, 16)))
				return;
			e[0] = 9;                 /* Processor Local x2APIC */
			e[1] = 16;
			w32(e + 4, id);
			w32(e + 8, 1);
			w32(e + 12, (uint32_t)i);
		}
	}
	if (!(e = tb_put(t, 12)))
		return;
	e[0] = 1;                             /* I/O APIC */
	e[1] = 12;
	e[2] = 0;                             /* IOAPIC ID (KVM's default) */
	w32(e + 4, (uint32_t)GPA_IOAPIC);
	w32(e + 8, 0);                        /* GSI base */
	/* ISA IRQ 0 (PIT) is wired to pin 2; the GED/SCI line is level, high. */
	if (!(e = tb_put(t, 10)))
		return;
	e[0] = 2, e[1] = 10, e[2] = 0, e[3] = 0;
	w32(e + 4, 2);
	w16(e + 8, 0);
	if (!(e = tb_put(t, 10)))
		return;
	e[0] = 2, e[1] = 10, e[2] = 0, e[3] = GSI_GED;
	w32(e + 4, GSI_GED);
	w16(e + 8, 0x000d);                   /* level-triggered, active high */
	if (!(e = tb_put(t, 6)))              /* LINT1 is NMI on every processor */
		return;
	e[0] = 4, e[1] = 6, e[2] = 0xff;
	w16(e + 3, 0);
	e[5] = 1;
	if (x2) {
		if (!(e = tb_put(t, 12)))
			return;
		e[0] = 0xa, e[1] = 12;
		w16(e + 2, 0);
		w32(e + 4, 0xffffffff);
		e[8] = 1;
	}
	finish(t);
}

static void build_srat(struct tbuf *t, const struct vm *vm)
{
	const struct hv_plan *p = vm->plan;
	uint8_t *e;

	header(t, "SRAT", 3);
	if (!(e = tb_put(t, 12)))
		return;
	w32(e, 1);                            /* reserved, 1 for compatibility */
	for (int i = 0; i < vm->nvcpus; i++) {
		uint32_t id = vm->vcpu[i].apic_id, dom = (uint32_t)p->vcpu_node[i];

		if (id < 255) {
			if (!(e = tb_put(t, 16)))
				return;
			e[0] = 0, e[1] = 16;
			e[2] = (uint8_t)dom;
			e[3] = (uint8_t)id;
			w32(e + 4, 1);
			e[9] = (uint8_t)(dom >> 8), e[10] = (uint8_t)(dom >> 16), e[11] = (uint8_t)(dom >> 24);
		} else {
			if (!(e = tb_put(t, 24)))
				return;
			e[0] = 2, e[1] = 24;
			w32(e + 4, dom);
			w32(e + 8, id);
			w32(e + 12, 1);
		}
	}
	for (int n = 0; n < p->nnodes; n++) {
		uint64_t gpa[2], len[2];
		int k = mem_range_gpa(&vm->mem, p->node[n].ram_off, p->node[n].size, gpa, len);

		for (int j = 0; j < k; j++) {
			if (!(e = tb_put(t, 40)))
				return;
			e[0] = 1, e[1] = 40;
			w32(e + 2, (uint32_t)n);
			w64(e + 8, gpa[j]);
			w64(e + 16, len[j]);
			w32(e + 28, 1);           /* enabled */
		}
	}
	finish(t);
}

/* Host distance between the nodes' host nodes where known; distinct guest
 * nodes are never 10 apart (Linux rejects such a SLIT). */
static int host_distance(int a, int b)
{
	char path[96], *buf;
	size_t len;
	struct verr e;
	int d = -1;

	if (a < 0 || b < 0)
		return -1;
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/distance", a);
	if (read_file(path, &buf, &len, 4096, &e) < 0)
		return -1;
	char *s = buf;
	for (int i = 0; i <= b && s; i++) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s)
			break;
		if (i == b)
			d = (int)v;
		s = end;
	}
	free(buf);
	return d;
}

static void build_slit(struct tbuf *t, const struct vm *vm)
{
	const struct hv_plan *p = vm->plan;
	uint8_t *e;

	header(t, "SLIT", 1);
	if (!(e = tb_put(t, 8 + (size_t)p->nnodes * p->nnodes)))
		return;
	w64(e, (uint64_t)p->nnodes);
	for (int i = 0; i < p->nnodes; i++)
		for (int j = 0; j < p->nnodes; j++) {
			int d = 10;

			if (i != j) {
				d = host_distance(p->node[i].host_node, p->node[j].host_node);
				if (d <= 10 || d > 254)
					d = 20;
			}
			e[8 + i * p->nnodes + j] = (uint8_t)d;
		}
	finish(t);
}

int vm_add_acpi_table(struct vm *vm, acpi_table_fn fn, void *opaque)
{
	if (vm->ntables == (int)(sizeof(vm->tables) / sizeof(vm->tables[0])))
		return -1;
	vm->tables[vm->ntables].fn = fn;
	vm->tables[vm->ntables].opaque = opaque;
	vm->ntables++;
	return 0;
}

int acpi_build(struct vm *vm, struct verr *err)
{
	struct tbuf t = { 0 };
	struct aml a;
	uint64_t off[16], xsdt_off, rsdp = GPA_ACPI;
	int ntab = 0;
	size_t dsdt_off;

	/* RSDP first (fixed 36 bytes, padded to 64), then the tables. */
	if (!tb_put(&t, 64))
		return verr_set(err, "out of memory");

	dsdt_off = t.len;
	header(&t, "DSDT", 2);
	aml_init(&a);
	build_dsdt(vm, &a);
	if (a.err || a.depth) {
		aml_free(&a);
		free(t.p);
		return verr_set(err, "building the DSDT failed (AML nesting)");
	}
	uint8_t *body = tb_put(&t, a.len);
	if (body)
		memcpy(body, a.buf, a.len);
	aml_free(&a);
	{
		struct tbuf d = { t.p + dsdt_off, t.len - dsdt_off, 0 };
		finish(&d);
	}

	/* Each table is built in its own buffer and appended, 8-byte aligned. */
	const char *names[4] = { "FACP", "APIC", "SRAT", "SLIT" };
	for (int k = 0; k < 4; k++) {
		struct tbuf s = { 0 };

		if (k >= 2 && vm->plan->nnodes < 2)
			continue;
		if (k == 0)
			build_fadt(&s, GPA_ACPI + dsdt_off);
		else if (k == 1)
			build_madt(&s, vm);
		else if (k == 2)
			build_srat(&s, vm);
		else
			build_slit(&s, vm);
		if (!s.p) {
			free(t.p);
			return verr_set(err, "out of memory building %s", names[k]);
		}
		off[ntab++] = tb_append8(&t, &s);
	}
	/* Tables of other files (MCFG, ...). */
	for (int k = 0; k < vm->ntables && ntab < 16; k++) {
		struct tbuf s = { 0 };
		size_t n;

		if (!tb_put(&s, 65536)) {
			free(t.p);
			return verr_set(err, "out of memory");
		}
		n = vm->tables[k].fn(vm, s.p, s.len, vm->tables[k].opaque);
		if (n < 36 || n > s.len) {
			free(s.p);
			free(t.p);
			return verr_set(err, "an extra ACPI table (#%d) could not be built", k);
		}
		s.len = n;
		finish(&s);
		off[ntab++] = tb_append8(&t, &s);
	}
	while (t.len % 8 && tb_put(&t, 1))
		;
	xsdt_off = t.len;
	{
		struct tbuf x = { 0 };

		header(&x, "XSDT", 1);
		for (int i = 0; i < ntab; i++) {
			uint8_t *e = tb_put(&x, 8);
			if (e)
				w64(e, GPA_ACPI + off[i]);
		}
		finish(&x);
		uint8_t *dst = x.p ? tb_put(&t, x.len) : NULL;
		if (dst)
			memcpy(dst, x.p, x.len);
		free(x.p);
	}
	if (!t.p || t.len > ACPI_MAX) {
		free(t.p);
		return verr_set(err, "ACPI tables need %zu bytes, more than the %llu reserved", t.len,
				(unsigned long long)ACPI_MAX);
	}
	uint8_t *r = t.p;
	memcpy(r, "RSD PTR ", 8);
	memcpy(r + 9, OEM_ID, 6);
	r[15] = 2;                            /* ACPI 2.0+: use the XSDT */
	w32(r + 20, 36);
	w64(r + 24, GPA_ACPI + xsdt_off);
	r[8] = csum(r, 20);
	r[32] = csum(r, 36);
	if (gm_write(&vm->mem, GPA_ACPI, t.p, t.len) < 0) {
		free(t.p);
		return verr_set(err, "ACPI tables do not fit guest RAM");
	}
	vm->acpi_rsdp = rsdp;
	log_debug("ACPI: %zu bytes at 0x%llx", t.len, (unsigned long long)GPA_ACPI);
	free(t.p);
	return 0;
}
