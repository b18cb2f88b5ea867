/* The test-guest exit port (only with --debug-exit): a byte V written to
 * HV_DEBUG_EXIT_PORT ends vhpc-hv with HV_EXIT_DEBUG_BASE + (V & 63). */
#include "lib/err.h"
#include "vm.h"
#include "layout.h"

static void dbg_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct vm *vm = opaque;
	uint8_t v = *(const uint8_t *)data;

	(void)off;
	(void)len;
	vm_request_exit(vm, HV_EXIT_DEBUG_BASE + (v & 63), "test guest exited with code %u", v & 63);
}

static const struct io_ops dbg_ops = { .write = dbg_write };

static int dbg_create(struct vm *vm, struct verr *err)
{
	if (!vm->cfg->debug_exit)
		return 0;
	return io_register(&vm->pio, PORT_DEBUG_EXIT, 1, &dbg_ops, vm, "debug-exit", err);
}

HV_DEVICE(debug_exit, dbg_create, NULL);
