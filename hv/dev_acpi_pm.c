/* Hardware-reduced ACPI power management: the FADT sleep control/status
 * registers (S5 = power off) and a Generic Event Device whose interrupt
 * carries power-button presses, plus their DSDT entries. */
#include "lib/err.h"
#include "lib/log.h"
#include "vm.h"
#include "aml.h"
#include "layout.h"
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>

#define SLP_EN 0x20

struct ged {
	struct vm *vm;
	pthread_mutex_t lock;
	uint8_t events;            /* bit 0: power button */
};

HV_DEVICE_DECLARE(acpi_pm);

static void sleep_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct vm *vm = opaque;
	uint8_t v = *(const uint8_t *)data;

	(void)len;
	if (off != 0 || !(v & SLP_EN))
		return;
	if (((v >> 2) & 7) == ACPI_S5_TYP)
		vm_request_exit(vm, HV_EXIT_POWEROFF, "guest powered off (ACPI S5)");
	else
		log_info("guest asked for sleep state type %u; not supported, ignored", (v >> 2) & 7);
}

static void sleep_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	(void)opaque;
	(void)off;
	memset(data, 0, len);
}

static const struct io_ops sleep_ops = { .read = sleep_read, .write = sleep_write };

/* Reading the event register returns and clears the pending events and
 * lowers the level-triggered line. */
static void ged_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct ged *g = opaque;

	(void)off;
	memset(data, 0, len);
	pthread_mutex_lock(&g->lock);
	*(uint8_t *)data = g->events;
	g->events = 0;
	vm_set_irq(g->vm, GSI_GED, 0);
	pthread_mutex_unlock(&g->lock);
}

static const struct io_ops ged_ops = { .read = ged_read };

void ged_power_button(struct vm *vm)
{
	struct ged *g = vm_device(vm, &hv_dev_acpi_pm);

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->events |= 1;
	vm_set_irq(vm, GSI_GED, 1);
	pthread_mutex_unlock(&g->lock);
}

static void ged_dsdt(struct aml *a, struct vm *vm, void *opaque)
{
	static const char *const fields[] = { "EVTS" };
	static const int bits[] = { 8 };
	uint8_t res[32];
	size_t n;

	(void)vm;
	(void)opaque;
	aml_device(a, "PWRB");
	aml_name_eisaid(a, "_HID", "PNP0C0C");
	aml_name_int(a, "_UID", 0);
	aml_close(a);

	aml_device(a, "GED0");
	aml_name_str(a, "_HID", "ACPI0013");
	aml_name_int(a, "_UID", 0);
	n = res_interrupt(res, GSI_GED, 1, 0);
	n += res_end(res + n);
	aml_name_buffer(a, "_CRS", res, n);
	aml_opregion(a, "GEDR", 1, PORT_ACPI_GED, 1);
	aml_field(a, "GEDR", fields, bits, 1);
	/* Method(_EVT, 1) { If (And(EVTS, 1)) { Notify(\_SB.PWRB, 0x80) } } */
	aml_method(a, "_EVT", 1, 1);
	aml_if(a);
	aml_byte(a, AML_AND);
	aml_name(a, "EVTS");
	aml_int(a, 1);
	aml_byte(a, AML_ZERO);             /* no target */
	aml_byte(a, AML_NOTIFY);
	aml_name(a, "\\_SB_.PWRB");
	aml_int(a, 0x80);
	aml_close(a);                      /* If */
	aml_close(a);                      /* Method */
	aml_close(a);                      /* Device */
}

static int pm_create(struct vm *vm, struct verr *err)
{
	struct ged *g = calloc(1, sizeof(*g));

	if (!g)
		return verr_set(err, "out of memory");
	g->vm = vm;
	pthread_mutex_init(&g->lock, NULL);
	vm_device_set(vm, &hv_dev_acpi_pm, g);
	if (io_register(&vm->pio, PORT_ACPI_SLEEP_CTL, 2, &sleep_ops, vm, "acpi-sleep", err) < 0 ||
	    io_register(&vm->pio, PORT_ACPI_GED, 1, &ged_ops, g, "acpi-ged", err) < 0)
		return -1;
	return vm_add_dsdt(vm, ged_dsdt, g);
}

static void pm_destroy(struct vm *vm)
{
	struct ged *g = vm_device(vm, &hv_dev_acpi_pm);

	if (!g)
		return;
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* The pending GED events; the line's level is in the restored irqchip. */
static int pm_save(struct vm *vm, struct snap_buf *b, struct verr *err)
{
	struct ged *g = vm_device(vm, &hv_dev_acpi_pm);

	(void)err;
	pthread_mutex_lock(&g->lock);
	sb_u32(b, g->events);
	pthread_mutex_unlock(&g->lock);
	return 0;
}

static int pm_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct ged *g = vm_device(vm, &hv_dev_acpi_pm);
	uint32_t ev = rd_u32(r);

	if (!rd_done(r))
		return verr_set(err, "state of %zu bytes, not 4", r->len);
	if (ev & ~1u)
		return verr_set(err, "GED events 0x%x (only bit 0, the power button, exists)", ev);
	pthread_mutex_lock(&g->lock);
	g->events = (uint8_t)ev;
	pthread_mutex_unlock(&g->lock);
	return 0;
}

HV_DEVICE_SNAP(acpi_pm, pm_create, pm_destroy, pm_save, pm_load);
