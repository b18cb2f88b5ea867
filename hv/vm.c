/* VM-wide helpers shared by devices and vCPUs: the exit decision, main-loop
 * fd watches, interrupt lines and DSDT hooks. */
#include "lib/err.h"
#include "lib/log.h"
#include "vm.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

const char *vm_state_name(enum vm_state s)
{
	switch (s) {
	case VM_STARTING: return "starting";
	case VM_RUNNING: return "running";
	case VM_PAUSED: return "paused";
	case VM_STOPPING: return "stopping";
	}
	return "unknown";
}

void vm_request_exit(struct vm *vm, int status, const char *fmt, ...)
{
	int expect = -1;
	va_list ap;
	uint64_t one = 1;

	pthread_mutex_lock(&vm->lock);
	if (atomic_compare_exchange_strong(&vm->exit_status, &expect, status)) {
		va_start(ap, fmt);
		vsnprintf(vm->exit_reason, sizeof(vm->exit_reason), fmt, ap);
		va_end(ap);
		if (write(vm->stop_efd, &one, sizeof(one)) < 0) {
			/* An eventfd counter cannot overflow from one write. */
		}
		pthread_cond_broadcast(&vm->cond);
	}
	pthread_mutex_unlock(&vm->lock);
}

int vm_watch_fd(struct vm *vm, int fd, fd_cb cb, void *opaque)
{
	if (vm->nwatch == (int)(sizeof(vm->watch) / sizeof(vm->watch[0])))
		return -1;
	vm->watch[vm->nwatch].fd = fd;
	vm->watch[vm->nwatch].cb = cb;
	vm->watch[vm->nwatch].opaque = opaque;
	vm->nwatch++;
	return 0;
}

void vm_unwatch_fd(struct vm *vm, int fd)
{
	for (int i = 0; i < vm->nwatch; i++) {
		if (vm->watch[i].fd == fd) {
			memmove(&vm->watch[i], &vm->watch[i + 1], (size_t)(vm->nwatch - i - 1) * sizeof(vm->watch[0]));
			vm->nwatch--;
			return;
		}
	}
}

void vm_set_irq(struct vm *vm, int gsi, int level)
{
	struct kvm_irq_level l = { .irq = (uint32_t)gsi, .level = (uint32_t)level };

	if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) < 0)
		log_warn("KVM_IRQ_LINE %d=%d failed", gsi, level);
}

int vm_add_dsdt(struct vm *vm, dsdt_emit_fn fn, void *opaque)
{
	if (vm->ndsdt == (int)(sizeof(vm->dsdt) / sizeof(vm->dsdt[0])))
		return -1;
	vm->dsdt[vm->ndsdt].fn = fn;
	vm->dsdt[vm->ndsdt].opaque = opaque;
	vm->ndsdt++;
	return 0;
}
