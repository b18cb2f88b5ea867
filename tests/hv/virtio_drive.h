/* What the unit tests of the virtio devices' snapshots share, on a VM
 * without KVM (vm_nokvm_init): the device and its PCI function found by
 * name, and the register writes a driver makes to bring the queues up. */
#ifndef VHPC_TESTS_HV_VIRTIO_DRIVE_H
#define VHPC_TESTS_HV_VIRTIO_DRIVE_H

#include "hv/snapshot.h"
#include "hv/virtio.h"

/* Queue q's rings: its descriptors at VD_RING(q), the available ring
 * 0x1000 above, the used ring 0x2000 above. */
#define VD_RING(q) (0x10000ull + (q) * 0x3000ull)

/* The registered device called name (hv/vm.h's HV_DEVICE), or NULL. */
const struct hv_device *vd_device(const char *name);
/* The virtio function in the PCI slot called name, or NULL. */
struct virtio_dev *vd_function(struct vm *vm, const char *name);
/* A driver's write of len bytes at off in the function's BAR 0. */
void vd_reg(struct virtio_dev *v, unsigned off, uint64_t val, unsigned len);
/* A driver's notify of queue q; the device threads then run once. */
void vd_kick(struct vm *vm, struct virtio_dev *v, unsigned q);
/* A driver's set-up: VERSION_1 only, queues 0..nq-1 of qs entries at
 * VD_RING(q) on MSI-X vector vector, DRIVER_OK; the device threads run
 * once. */
void vd_driver_up(struct vm *vm, struct virtio_dev *v, unsigned nq, uint16_t qs, uint16_t vector);
/* The device's loader on a saved state, err emptied first. */
int vd_load(const struct hv_device *d, struct vm *vm, const struct snap_buf *b, struct verr *err);
/* The check every hostile-state case makes: saved with len bytes at off
 * replaced by val (or, val NULL, cut at off) is refused by d's loader
 * with an error saying msg, and the device is left as it was. */
void vd_refused(const struct hv_device *d, struct vm *vm, const struct snap_buf *saved, size_t off,
		const void *val, size_t len, const char *msg);

#endif
