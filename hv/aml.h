/* A small AML (ACPI Machine Language) writer for the DSDT: enough for
 * devices with _HID/_UID/_CRS, operation regions, fields and simple methods.
 * Scopes, devices, methods and packages are opened and closed; closing
 * inserts the package length in front of what was written. */
#ifndef HV_AML_H
#define HV_AML_H

#include <stddef.h>
#include <stdint.h>

struct aml {
	uint8_t *buf;
	size_t len, cap;
	int depth;
	size_t open[16];
	int err;                   /* set on overflow or bad nesting */
};

void aml_init(struct aml *a);
void aml_free(struct aml *a);
void aml_bytes(struct aml *a, const void *p, size_t n);
void aml_byte(struct aml *a, uint8_t b);
/* "\\_SB_.PWRB", "COM1", "_HID"; segments shorter than 4 are padded with '_'. */
void aml_name(struct aml *a, const char *path);
void aml_int(struct aml *a, uint64_t v);
void aml_string(struct aml *a, const char *s);
uint32_t aml_eisaid(const char *id);

void aml_scope(struct aml *a, const char *name);    /* then aml_close */
void aml_device(struct aml *a, const char *name);   /* then aml_close */
void aml_method(struct aml *a, const char *name, int nargs, int serialized);
void aml_if(struct aml *a);                         /* predicate, body, close */
void aml_package(struct aml *a, int nelem);         /* elements, close */
void aml_close(struct aml *a);

/* Name(NAME, value) for the common kinds. */
void aml_name_int(struct aml *a, const char *name, uint64_t v);
void aml_name_str(struct aml *a, const char *name, const char *s);
void aml_name_eisaid(struct aml *a, const char *name, const char *id);
/* Name(NAME, Buffer{bytes}) for resource templates. */
void aml_name_buffer(struct aml *a, const char *name, const uint8_t *p, size_t n);

/* OperationRegion(NAME, SystemIO=1, base, len) and a byte-access field
 * with one or more named fields of the given bit widths. */
void aml_opregion(struct aml *a, const char *name, int space, uint64_t base, uint64_t len);
void aml_field(struct aml *a, const char *region, const char *const *names, const int *bits, int n);

/* Opcodes and targets for hand-written method bodies. */
#define AML_LOCAL0 0x60
#define AML_ARG0   0x68
#define AML_STORE  0x70
#define AML_AND    0x7b
#define AML_LEQUAL 0x93
#define AML_NOTIFY 0x86
#define AML_RETURN 0xa4
#define AML_ZERO   0x00

/* Resource descriptors, appended to a byte array for aml_name_buffer. */
size_t res_io(uint8_t *p, uint16_t base, uint8_t len);
size_t res_irq(uint8_t *p, int irq);
size_t res_interrupt(uint8_t *p, uint32_t gsi, int level, int active_low);
size_t res_mem32(uint8_t *p, uint32_t base, uint32_t len);
size_t res_end(uint8_t *p);

#endif
