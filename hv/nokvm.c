/* A VM without KVM: guest RAM, the I/O buses and the devices, but no vCPUs
 * and no KVM fd.  Device models run against it exactly as in vhpc-hv
 * (guest memory through gm_*, interrupts counted instead of injected);
 * with manual loops their threads are replaced by evloop_run_all().  Used
 * by the fuzzers and the virtio-net benchmark. */
#include "lib/err.h"
#include "vm.h"

#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int vm_nokvm_init(struct vm *vm, struct hv_config *cfg, struct hv_plan *plan, int argc, char **argv,
		  bool manual_loops, struct verr *err)
{
	memset(vm, 0, sizeof(*vm));
	hv_config_defaults(cfg);
	if (hv_config_parse(cfg, argc, argv, err) != 0 || hv_plan_make(cfg, plan, err) < 0)
		return -1;
	vm->cfg = cfg;
	vm->plan = plan;
	vm->nvcpus = plan->nvcpus;
	vm->vm_fd = vm->kvm_fd = -1;
	vm->manual_loops = manual_loops;
	vm->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	atomic_store(&vm->exit_status, -1);
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	pthread_mutex_init(&vm->loops_lock, NULL);
	io_bus_init(&vm->pio);
	io_bus_init(&vm->mmio);
	for (int i = 0; i < vm->nvcpus; i++)
		vm->vcpu[i].apic_id = plan->apic_id[i];
	if (mem_create(&vm->mem, plan, 0, NULL, err) < 0)
		return -1;
	return devices_create(vm, err);
}

void vm_nokvm_free(struct vm *vm, struct hv_config *cfg)
{
	devices_destroy(vm);
	mem_destroy(&vm->mem);
	io_bus_free(&vm->pio);
	io_bus_free(&vm->mmio);
	if (vm->stop_efd >= 0)
		close(vm->stop_efd);
	hv_config_free(cfg);
}
