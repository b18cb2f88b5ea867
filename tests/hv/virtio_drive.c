#include "virtio_drive.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

const struct hv_device *vd_device(const char *name)
{
	size_t nd;
	const struct hv_device *devs = devices_list(&nd);

	for (size_t i = 0; i < nd; i++)
		if (!strcmp(devs[i].name, name))
			return &devs[i];
	return NULL;
}

struct virtio_dev *vd_function(struct vm *vm, const char *name)
{
	for (int s = 0; s < PCI_MAX_SLOTS; s++)
		if (pci_slot(vm, s) && !strcmp(pci_slot(vm, s)->name, name))
			return pci_slot(vm, s)->opaque;
	return NULL;
}

void vd_reg(struct virtio_dev *v, unsigned off, uint64_t val, unsigned len)
{
	v->pci.ops->bar_write(&v->pci, 0, off, &val, len);
}

void vd_kick(struct vm *vm, struct virtio_dev *v, unsigned q)
{
	vd_reg(v, VIRTIO_BAR_NOTIFY + VIRTIO_NOTIFY_MULT * q, q, 2);
	evloop_run_all(vm);
}

void vd_driver_up(struct vm *vm, struct virtio_dev *v, unsigned nq, uint16_t qs, uint16_t vector)
{
	const unsigned st = VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER;

	vd_reg(v, 0x14, st, 1);
	vd_reg(v, 0x08, 1, 4);
	vd_reg(v, 0x0c, 1, 4);         /* VERSION_1 */
	vd_reg(v, 0x14, st | VIRTIO_STATUS_FEATURES_OK, 1);
	for (unsigned q = 0; q < nq; q++) {
		vd_reg(v, 0x16, q, 2);
		vd_reg(v, 0x18, qs, 2);
		vd_reg(v, 0x1a, vector, 2);
		vd_reg(v, 0x20, VD_RING(q), 8);
		vd_reg(v, 0x28, VD_RING(q) + 0x1000, 8);
		vd_reg(v, 0x30, VD_RING(q) + 0x2000, 8);
		vd_reg(v, 0x1c, 1, 2);
	}
	vd_reg(v, 0x14, st | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK, 1);
	evloop_run_all(vm);
}

int vd_load(const struct hv_device *d, struct vm *vm, const struct snap_buf *b, struct verr *err)
{
	struct snap_rd r = { .p = b->p, .len = b->len };

	err->msg[0] = 0;
	return d->load(vm, &r, err);
}

void vd_refused(const struct hv_device *d, struct vm *vm, const struct snap_buf *saved, size_t off,
		const void *val, size_t len, const char *msg)
{
	struct snap_buf b = { 0 }, before = { 0 }, after = { 0 };
	struct verr err;

	assert_int_equal(d->save(vm, &before, &err), 0);
	sb_put(&b, saved->p, saved->len);
	if (!val)
		b.len = off;
	else
		memcpy(b.p + off, val, len);
	assert_int_equal(vd_load(d, vm, &b, &err), -1);
	if (!strstr(err.msg, msg))
		fail_msg("refusal '%s' does not say '%s'", err.msg, msg);
	assert_int_equal(d->save(vm, &after, &err), 0);
	assert_int_equal(after.len, before.len);
	assert_memory_equal(after.p, before.p, before.len);
	sb_free(&b);
	sb_free(&before);
	sb_free(&after);
}
