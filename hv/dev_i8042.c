/* The i8042 keyboard controller, only as far as resets go: the 0xfe pulse
 * command on port 0x64 (also the FADT reset register), and writing the
 * output port with the reset line low.  No keyboard is attached. */
#include "lib/err.h"
#include "vm.h"
#include "layout.h"
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>

struct i8042 {
	struct vm *vm;
	pthread_mutex_t lock;
	uint8_t pending_cmd;
};

HV_DEVICE_DECLARE(i8042);

static void kbc_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	(void)opaque;
	memset(data, 0, len);
	/* Status: input and output buffers empty, system flag set. */
	if (off == PORT_I8042_CMD - PORT_I8042_DATA)
		*(uint8_t *)data = 0x04;
}

static void kbc_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct i8042 *k = opaque;
	uint8_t v = *(const uint8_t *)data;

	(void)len;
	pthread_mutex_lock(&k->lock);
	if (off == PORT_I8042_CMD - PORT_I8042_DATA) {
		if (v == 0xfe)
			vm_request_exit(k->vm, HV_EXIT_RESET, "guest requested a reset (i8042 pulse)");
		k->pending_cmd = v == 0xd1 ? v : 0;
	} else if (k->pending_cmd == 0xd1) {
		k->pending_cmd = 0;
		if (!(v & 1))
			vm_request_exit(k->vm, HV_EXIT_RESET, "guest requested a reset (i8042 output port)");
	}
	pthread_mutex_unlock(&k->lock);
}

static const struct io_ops kbc_ops = { .read = kbc_read, .write = kbc_write };

static int kbc_create(struct vm *vm, struct verr *err)
{
	struct i8042 *k = calloc(1, sizeof(*k));

	if (!k)
		return verr_set(err, "out of memory");
	k->vm = vm;
	pthread_mutex_init(&k->lock, NULL);
	vm_device_set(vm, &hv_dev_i8042, k);
	return io_register(&vm->pio, PORT_I8042_DATA, PORT_I8042_CMD - PORT_I8042_DATA + 1, &kbc_ops,
			   k, "i8042", err);
}

static void kbc_destroy(struct vm *vm)
{
	struct i8042 *k = vm_device(vm, &hv_dev_i8042);

	if (!k)
		return;
	pthread_mutex_destroy(&k->lock);
	free(k);
}

static int kbc_save(struct vm *vm, struct snap_buf *b, struct verr *err)
{
	struct i8042 *k = vm_device(vm, &hv_dev_i8042);

	(void)err;
	pthread_mutex_lock(&k->lock);
	sb_u32(b, k->pending_cmd);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

static int kbc_load(struct vm *vm, struct snap_rd *r, struct verr *err)
{
	struct i8042 *k = vm_device(vm, &hv_dev_i8042);
	uint32_t cmd = rd_u32(r);

	if (!rd_done(r))
		return verr_set(err, "state of %zu bytes, not 4", r->len);
	if (cmd != 0 && cmd != 0xd1)
		return verr_set(err, "pending command 0x%x (only 0xd1 waits for data)", cmd);
	pthread_mutex_lock(&k->lock);
	k->pending_cmd = (uint8_t)cmd;
	pthread_mutex_unlock(&k->lock);
	return 0;
}

HV_DEVICE_SNAP(i8042, kbc_create, kbc_destroy, kbc_save, kbc_load);
