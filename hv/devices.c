/* The device registry: each HV_DEVICE's slot in the VM, the order devices
 * were created in, and teardown in reverse of it, so a device is gone
 * before anything it was built on (the PCI bus under its functions). */
#include "lib/err.h"
#include "lib/log.h"
#include "vm.h"

extern const struct hv_device __start_hv_devices[], __stop_hv_devices[];

enum { DEV_NONE, DEV_CREATING, DEV_CREATED };

static size_t slot_of(const struct hv_device *d)
{
	return (size_t)(d - __start_hv_devices);
}

const struct hv_device *devices_list(size_t *n)
{
	*n = (size_t)(__stop_hv_devices - __start_hv_devices);
	return __start_hv_devices;
}

void *vm_device(struct vm *vm, const struct hv_device *d)
{
	return vm->dev[slot_of(d)];
}

void vm_device_set(struct vm *vm, const struct hv_device *d, void *inst)
{
	vm->dev[slot_of(d)] = inst;
}

int vm_device_need(struct vm *vm, const struct hv_device *d, struct verr *err)
{
	size_t i = slot_of(d);
	int r;

	if (vm->dev_state[i] == DEV_CREATED)
		return 0;
	if (vm->dev_state[i] == DEV_CREATING)
		return verr_set(err, "device %s needs itself while it is being created", d->name);
	vm->dev_state[i] = DEV_CREATING;
	r = d->create ? d->create(vm, err) : 0;
	/* Recorded after create, failed or not: a device it needed was
	 * recorded first and so is torn down after it. */
	vm->dev_state[i] = DEV_CREATED;
	vm->dev_order[vm->ndev++] = (uint8_t)i;
	if (r == 0)
		log_debug("device %s created", d->name);
	return r;
}

int devices_create(struct vm *vm, struct verr *err)
{
	if (__stop_hv_devices - __start_hv_devices > HV_MAX_DEVICES)
		return verr_set(err, "%d devices are registered; struct vm has room for %d (HV_MAX_DEVICES)",
				(int)(__stop_hv_devices - __start_hv_devices), HV_MAX_DEVICES);
	for (const struct hv_device *d = __start_hv_devices; d < __stop_hv_devices; d++) {
		if (vm_device_need(vm, d, err) < 0) {
			verr_wrap(err, "device %s", d->name);
			devices_destroy(vm);
			return -1;
		}
	}
	return 0;
}

void devices_destroy(struct vm *vm)
{
	while (vm->ndev > 0) {
		size_t i = vm->dev_order[--vm->ndev];
		const struct hv_device *d = &__start_hv_devices[i];

		if (d->destroy)
			d->destroy(vm);
		vm->dev[i] = NULL;
		vm->dev_state[i] = DEV_NONE;
	}
}
