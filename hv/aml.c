/* AML writer (ACPI 6.x, section 20: AML encoding). */
#include "lib/grow.h"
#include "aml.h"

#include <stdlib.h>
#include <string.h>

void aml_init(struct aml *a)
{
	memset(a, 0, sizeof(*a));
}

void aml_free(struct aml *a)
{
	free(a->buf);
	memset(a, 0, sizeof(*a));
}

static int aml_room(struct aml *a, size_t n)
{
	if (grow(&a->buf, &a->cap, a->len + n, 1, 1024) < 0) {
		a->err = 1;
		return -1;
	}
	return 0;
}

void aml_bytes(struct aml *a, const void *p, size_t n)
{
	if (aml_room(a, n) < 0)
		return;
	memcpy(a->buf + a->len, p, n);
	a->len += n;
}

void aml_byte(struct aml *a, uint8_t b)
{
	aml_bytes(a, &b, 1);
}

static void nameseg(struct aml *a, const char *s, size_t n)
{
	char seg[4] = { '_', '_', '_', '_' };

	if (n > 4)
		n = 4;
	memcpy(seg, s, n);
	aml_bytes(a, seg, 4);
}

void aml_name(struct aml *a, const char *path)
{
	const char *p = path;
	int nseg = 1;

	if (*p == '\\') {
		aml_byte(a, '\\');
		p++;
	}
	for (const char *q = p; *q; q++)
		nseg += *q == '.';
	if (nseg == 2)
		aml_byte(a, 0x2e);             /* DualNamePrefix */
	else if (nseg > 2) {
		aml_byte(a, 0x2f);             /* MultiNamePrefix */
		aml_byte(a, (uint8_t)nseg);
	}
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);

		nameseg(a, p, n);
		p += n + (dot != NULL);
	}
}

void aml_int(struct aml *a, uint64_t v)
{
	if (v == 0) {
		aml_byte(a, 0x00);
	} else if (v == 1) {
		aml_byte(a, 0x01);
	} else if (v <= 0xff) {
		aml_byte(a, 0x0a);
		aml_byte(a, (uint8_t)v);
	} else if (v <= 0xffff) {
		aml_byte(a, 0x0b);
		aml_byte(a, (uint8_t)v);
		aml_byte(a, (uint8_t)(v >> 8));
	} else if (v <= 0xffffffffu) {
		aml_byte(a, 0x0c);
		for (int i = 0; i < 4; i++)
			aml_byte(a, (uint8_t)(v >> (8 * i)));
	} else {
		aml_byte(a, 0x0e);
		for (int i = 0; i < 8; i++)
			aml_byte(a, (uint8_t)(v >> (8 * i)));
	}
}

void aml_string(struct aml *a, const char *s)
{
	aml_byte(a, 0x0d);
	aml_bytes(a, s, strlen(s) + 1);
}

uint32_t aml_eisaid(const char *id)
{
	uint32_t v = 0;

	if (strlen(id) != 7)
		return 0;
	uint16_t vendor = (uint16_t)(((id[0] - 0x40) & 0x1f) << 10 | ((id[1] - 0x40) & 0x1f) << 5 |
				     ((id[2] - 0x40) & 0x1f));
	uint16_t prod = (uint16_t)strtoul(id + 3, NULL, 16);
	/* Stored big-endian: vendor bytes first. */
	v = (uint32_t)(vendor >> 8) | (uint32_t)(vendor & 0xff) << 8 |
	    (uint32_t)(prod >> 8) << 16 | (uint32_t)(prod & 0xff) << 24;
	return v;
}

static void open_pkg(struct aml *a)
{
	if (a->depth >= 16) {
		a->err = 1;
		return;
	}
	a->open[a->depth++] = a->len;
}

void aml_close(struct aml *a)
{
	size_t start, body;
	uint8_t pl[4];
	int n;

	if (a->depth <= 0) {
		a->err = 1;
		return;
	}
	start = a->open[--a->depth];
	body = a->len - start;
	/* PkgLength counts its own bytes. */
	if (body + 1 < 0x40) {
		pl[0] = (uint8_t)(body + 1);
		n = 1;
	} else if (body + 2 < 0x1000) {
		size_t t = body + 2;
		pl[0] = (uint8_t)(0x40 | (t & 0xf));
		pl[1] = (uint8_t)(t >> 4);
		n = 2;
	} else if (body + 3 < 0x100000) {
		size_t t = body + 3;
		pl[0] = (uint8_t)(0x80 | (t & 0xf));
		pl[1] = (uint8_t)(t >> 4);
		pl[2] = (uint8_t)(t >> 12);
		n = 3;
	} else {
		size_t t = body + 4;
		pl[0] = (uint8_t)(0xc0 | (t & 0xf));
		pl[1] = (uint8_t)(t >> 4);
		pl[2] = (uint8_t)(t >> 12);
		pl[3] = (uint8_t)(t >> 20);
		n = 4;
	}
	if (aml_room(a, (size_t)n) < 0)
		return;
	memmove(a->buf + start + n, a->buf + start, body);
	memcpy(a->buf + start, pl, (size_t)n);
	a->len += (size_t)n;
	/* Packages opened before this one start before it: unaffected. */
}

void aml_scope(struct aml *a, const char *name)
{
	aml_byte(a, 0x10);
	open_pkg(a);
	aml_name(a, name);
}

void aml_device(struct aml *a, const char *name)
{
	aml_byte(a, 0x5b);
	aml_byte(a, 0x82);
	open_pkg(a);
	aml_name(a, name);
}

void aml_method(struct aml *a, const char *name, int nargs, int serialized)
{
	aml_byte(a, 0x14);
	open_pkg(a);
	aml_name(a, name);
	aml_byte(a, (uint8_t)((nargs & 7) | (serialized ? 8 : 0)));
}

void aml_if(struct aml *a)
{
	aml_byte(a, 0xa0);
	open_pkg(a);
}

void aml_package(struct aml *a, int nelem)
{
	aml_byte(a, 0x12);
	open_pkg(a);
	aml_byte(a, (uint8_t)nelem);
}

void aml_name_int(struct aml *a, const char *name, uint64_t v)
{
	aml_byte(a, 0x08);
	aml_name(a, name);
	aml_int(a, v);
}

void aml_name_str(struct aml *a, const char *name, const char *s)
{
	aml_byte(a, 0x08);
	aml_name(a, name);
	aml_string(a, s);
}

void aml_name_eisaid(struct aml *a, const char *name, const char *id)
{
	uint32_t v = aml_eisaid(id);

	aml_byte(a, 0x08);
	aml_name(a, name);
	aml_byte(a, 0x0c);
	for (int i = 0; i < 4; i++)
		aml_byte(a, (uint8_t)(v >> (8 * i)));
}

void aml_name_buffer(struct aml *a, const char *name, const uint8_t *p, size_t n)
{
	aml_byte(a, 0x08);
	aml_name(a, name);
	aml_byte(a, 0x11);
	open_pkg(a);
	aml_int(a, n);
	aml_bytes(a, p, n);
	aml_close(a);
}

void aml_opregion(struct aml *a, const char *name, int space, uint64_t base, uint64_t len)
{
	aml_byte(a, 0x5b);
	aml_byte(a, 0x80);
	aml_name(a, name);
	aml_byte(a, (uint8_t)space);
	aml_int(a, base);
	aml_int(a, len);
}

void aml_field(struct aml *a, const char *region, const char *const *names, const int *bits, int n)
{
	aml_byte(a, 0x5b);
	aml_byte(a, 0x81);
	open_pkg(a);
	aml_name(a, region);
	aml_byte(a, 0x01);                 /* ByteAcc, NoLock, Preserve */
	for (int i = 0; i < n; i++) {
		nameseg(a, names[i], strlen(names[i]));
		/* A field's width is a PkgLength too (bits < 0x40 here). */
		aml_byte(a, (uint8_t)bits[i]);
	}
	aml_close(a);
}

size_t res_io(uint8_t *p, uint16_t base, uint8_t len)
{
	p[0] = 0x47;                       /* I/O port descriptor */
	p[1] = 0x01;                       /* 16-bit decode */
	p[2] = (uint8_t)base;
	p[3] = (uint8_t)(base >> 8);
	p[4] = (uint8_t)base;
	p[5] = (uint8_t)(base >> 8);
	p[6] = 1;                          /* alignment */
	p[7] = len;
	return 8;
}

size_t res_irq(uint8_t *p, int irq)
{
	p[0] = 0x22;                       /* IRQ descriptor, no flags: edge, high */
	p[1] = (uint8_t)(1u << irq);
	p[2] = (uint8_t)((1u << irq) >> 8);
	return 3;
}

size_t res_interrupt(uint8_t *p, uint32_t gsi, int level, int active_low)
{
	p[0] = 0x89;                       /* Extended Interrupt descriptor */
	p[1] = 6;
	p[2] = 0;
	p[3] = (uint8_t)(0x01 | (level ? 0 : 0x02) | (active_low ? 0x04 : 0));   /* consumer */
	p[4] = 1;
	for (int i = 0; i < 4; i++)
		p[5 + i] = (uint8_t)(gsi >> (8 * i));
	return 9;
}

size_t res_mem32(uint8_t *p, uint32_t base, uint32_t len)
{
	p[0] = 0x86;                       /* 32-bit fixed memory range */
	p[1] = 9;
	p[2] = 0;
	p[3] = 1;                          /* read/write */
	for (int i = 0; i < 4; i++) {
		p[4 + i] = (uint8_t)(base >> (8 * i));
		p[8 + i] = (uint8_t)(len >> (8 * i));
	}
	return 12;
}

size_t res_end(uint8_t *p)
{
	p[0] = 0x79;
	p[1] = 0;                          /* checksum 0: "treat as correct" */
	return 2;
}
