/* MSI delivery through irqfd.  Each MSI-X vector that fires gets a GSI and
 * an eventfd bound to it with KVM_IRQFD; a device thread then interrupts
 * the guest with one eventfd write and no exit.  KVM_SET_GSI_ROUTING
 * replaces the whole routing table, so the table kept here starts with
 * KVM's default entries (PIC and IOAPIC pins) that the UART and the GED
 * use.  Without KVM everything here fails softly and MSIs are only
 * counted (fuzzer, benchmark). */
#include "lib/log.h"
#include "vm.h"
#include "layout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MAX_ROUTES 1024
#define FIRST_MSI_GSI NR_IOAPIC_PINS

struct irq_routes {
	pthread_mutex_t lock;
	int n;
	int next_gsi;
	struct kvm_irq_routing_entry e[MAX_ROUTES];
	int irqfds[MAX_ROUTES];
	int nirqfds;
};

static struct irq_routes *routes(struct vm *vm)
{
	struct irq_routes *r;

	pthread_mutex_lock(&vm->loops_lock);
	r = vm->irqr;
	if (!r && (r = calloc(1, sizeof(*r)))) {
		pthread_mutex_init(&r->lock, NULL);
		r->next_gsi = FIRST_MSI_GSI;
		/* KVM's default x86 routing: GSI 0-15 to both PICs and the
		 * IOAPIC, 16-23 to the IOAPIC only. */
		for (int i = 0; i < NR_IOAPIC_PINS; i++) {
			if (i < 16)
				r->e[r->n++] = (struct kvm_irq_routing_entry){
					.gsi = (uint32_t)i, .type = KVM_IRQ_ROUTING_IRQCHIP,
					.u.irqchip = { .irqchip = i < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE,
						       .pin = (uint32_t)(i % 8) } };
			r->e[r->n++] = (struct kvm_irq_routing_entry){
				.gsi = (uint32_t)i, .type = KVM_IRQ_ROUTING_IRQCHIP,
				.u.irqchip = { .irqchip = KVM_IRQCHIP_IOAPIC, .pin = (uint32_t)i } };
		}
		vm->irqr = r;
	}
	pthread_mutex_unlock(&vm->loops_lock);
	return r;
}

static int commit(struct vm *vm, struct irq_routes *r)
{
	struct kvm_irq_routing *t = calloc(1, sizeof(*t) + (size_t)r->n * sizeof(r->e[0]));
	int rc;

	if (!t)
		return -1;
	t->nr = (uint32_t)r->n;
	memcpy(t->entries, r->e, (size_t)r->n * sizeof(r->e[0]));
	rc = ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, t);
	if (rc < 0)
		log_warn("KVM_SET_GSI_ROUTING (%d entries): %s", r->n, strerror(errno));
	free(t);
	return rc;
}

int irq_msi_gsi(struct vm *vm, int *gsi, int *irqfd)
{
	struct irq_routes *r;
	struct kvm_irqfd f;
	int fd;

	*gsi = *irqfd = -1;
	if (vm->vm_fd < 0 || !(r = routes(vm)))
		return -1;
	pthread_mutex_lock(&r->lock);
	if (r->n == MAX_ROUTES || r->nirqfds == MAX_ROUTES) {
		pthread_mutex_unlock(&r->lock);
		return -1;
	}
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0) {
		pthread_mutex_unlock(&r->lock);
		return -1;
	}
	/* The GSI gets a (masked-off) route at once so the irqfd is never
	 * bound to a GSI KVM does not know. */
	r->e[r->n++] = (struct kvm_irq_routing_entry){ .gsi = (uint32_t)r->next_gsi,
						       .type = KVM_IRQ_ROUTING_MSI,
						       .u.msi = { .address_lo = (uint32_t)GPA_LAPIC } };
	if (commit(vm, r) < 0) {
		r->n--;
		close(fd);
		pthread_mutex_unlock(&r->lock);
		return -1;
	}
	memset(&f, 0, sizeof(f));
	f.fd = (uint32_t)fd;
	f.gsi = (uint32_t)r->next_gsi;
	if (ioctl(vm->vm_fd, KVM_IRQFD, &f) < 0) {
		log_warn("KVM_IRQFD gsi %d: %s; MSIs go through KVM_SIGNAL_MSI", r->next_gsi, strerror(errno));
		r->n--;
		commit(vm, r);
		close(fd);
		pthread_mutex_unlock(&r->lock);
		return -1;
	}
	r->irqfds[r->nirqfds++] = fd;
	*gsi = r->next_gsi++;
	*irqfd = fd;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

int irq_msi_route(struct vm *vm, int gsi, uint64_t addr, uint32_t data)
{
	struct irq_routes *r = vm->irqr;
	int rc = -1;

	if (!r || gsi < FIRST_MSI_GSI)
		return -1;
	pthread_mutex_lock(&r->lock);
	for (int i = 0; i < r->n; i++) {
		if (r->e[i].gsi == (uint32_t)gsi && r->e[i].type == KVM_IRQ_ROUTING_MSI) {
			r->e[i].u.msi.address_lo = (uint32_t)addr;
			r->e[i].u.msi.address_hi = (uint32_t)(addr >> 32);
			r->e[i].u.msi.data = data;
			rc = commit(vm, r);
			break;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int irq_msi_signal(struct vm *vm, uint64_t addr, uint32_t data)
{
	struct kvm_msi m = { .address_lo = (uint32_t)addr, .address_hi = (uint32_t)(addr >> 32), .data = data };

	atomic_fetch_add(&vm->msi_sent, 1);
	if (vm->vm_fd < 0)
		return -1;
	return ioctl(vm->vm_fd, KVM_SIGNAL_MSI, &m) < 0 ? -1 : 0;
}

void irq_routes_free(struct vm *vm)
{
	struct irq_routes *r = vm->irqr;

	if (!r)
		return;
	for (int i = 0; i < r->nirqfds; i++)
		close(r->irqfds[i]);
	pthread_mutex_destroy(&r->lock);
	free(r);
	vm->irqr = NULL;
}

int vm_alloc_slot(struct vm *vm)
{
	int s;

	pthread_mutex_lock(&vm->loops_lock);
	if (vm->next_slot < 8)
		vm->next_slot = 8;
	s = vm->next_slot++;
	pthread_mutex_unlock(&vm->loops_lock);
	return s;
}
