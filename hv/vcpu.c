/* vCPU threads: creation, boot registers and MSRs, pinning, the KVM_RUN
 * loop with its exits, and the kick/park machinery for pause and stop. */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "vm.h"
#include "layout.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIG_KICK SIGUSR1

#define MSR_IA32_TSC             0x10
#define MSR_IA32_SYSENTER_CS     0x174
#define MSR_IA32_SYSENTER_ESP    0x175
#define MSR_IA32_SYSENTER_EIP    0x176
#define MSR_IA32_MISC_ENABLE     0x1a0
#define MSR_MTRR_DEF_TYPE        0x2ff
#define MSR_STAR                 0xc0000081
#define MSR_LSTAR                0xc0000082
#define MSR_CSTAR                0xc0000083
#define MSR_SYSCALL_MASK         0xc0000084
#define MSR_KERNEL_GS_BASE       0xc0000102

static void kick_handler(int sig)
{
	(void)sig;
}

int vcpu_create(struct vm *vm, int idx, struct verr *err)
{
	struct vcpu *c = &vm->vcpu[idx];
	union {
		struct kvm_msrs h;
		uint8_t buf[sizeof(struct kvm_msrs) + 16 * sizeof(struct kvm_msr_entry)];
	} msrs;
	struct kvm_msr_entry *ent = msrs.h.entries;
	uint32_t n = 0;
	struct kvm_cpuid_entry2 *v0 = NULL;

	c->vm = vm;
	c->idx = idx;
	c->apic_id = vm->plan->apic_id[idx];
	c->host_cpu = vm->plan->vcpu_host_cpu[idx];
	/* KVM takes the vCPU id as the initial APIC ID. */
	c->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)c->apic_id);
	if (c->fd < 0)
		return verr_errno(err, "KVM_CREATE_VCPU %d (APIC ID %u)", idx, c->apic_id);
	c->run = mmap(NULL, (size_t)vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->run == MAP_FAILED) {
		c->run = NULL;
		return verr_errno(err, "mapping kvm_run of vCPU %d", idx);
	}
	if (cpuid_setup(vm, c, err) < 0)
		return -1;

	for (uint32_t i = 0; i < vm->supported_cpuid->nent; i++)
		if (vm->supported_cpuid->entries[i].function == 0)
			v0 = &vm->supported_cpuid->entries[i];
	memset(&msrs, 0, sizeof(msrs));
#define M(i, v) ent[n++] = (struct kvm_msr_entry){ .index = (i), .data = (v) }
	M(MSR_IA32_SYSENTER_CS, 0);
	M(MSR_IA32_SYSENTER_ESP, 0);
	M(MSR_IA32_SYSENTER_EIP, 0);
	M(MSR_STAR, 0);
	M(MSR_LSTAR, 0);
	M(MSR_CSTAR, 0);
	M(MSR_SYSCALL_MASK, 0);
	M(MSR_KERNEL_GS_BASE, 0);
	/* MTRRs on, write-back by default: without this every access would be
	 * uncached from the guest's point of view. */
	M(MSR_MTRR_DEF_TYPE, (1u << 11) | 6);
	if (v0 && v0->ebx == 0x756e6547)   /* "Genu"ineIntel: fast strings */
		M(MSR_IA32_MISC_ENABLE, 1);
#undef M
	msrs.h.nmsrs = n;
	int r = ioctl(c->fd, KVM_SET_MSRS, &msrs);
	if (r < 0)
		return verr_errno(err, "KVM_SET_MSRS on vCPU %d", idx);
	if ((uint32_t)r != n)
		return verr_set(err, "KVM_SET_MSRS on vCPU %d: MSR 0x%x refused", idx, ent[r].index);
	return 0;
}

static void seg(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code64, bool db)
{
	*s = (struct kvm_segment){ .base = 0, .limit = 0xffffffff, .selector = sel, .type = type,
				   .present = 1, .dpl = 0, .db = db, .s = 1, .l = code64, .g = 1 };
}

/* The BSP's state at the kernel's entry point; APs wait for INIT/SIPI in
 * the in-kernel LAPIC. */
int vcpu_boot_regs(struct vcpu *c, const struct boot_info *bi, struct verr *err)
{
	struct kvm_sregs s;
	struct kvm_regs r;

	if (ioctl(c->fd, KVM_GET_SREGS, &s) < 0)
		return verr_errno(err, "KVM_GET_SREGS");
	memset(&r, 0, sizeof(r));
	r.rflags = 2;
	if (bi->pvh) {
		/* PVH: 32-bit protected mode, paging off, EBX = start_info. */
		seg(&s.cs, 0x8, 11, false, true);
		seg(&s.ds, 0x10, 3, false, true);
		s.tr = (struct kvm_segment){ .base = 0, .limit = 0x67, .selector = 0x18, .type = 11, .present = 1 };
		s.cr0 = 0x11;      /* PE | ET */
		s.cr4 = 0;
		s.efer = 0;
		r.rip = bi->entry;
		r.rbx = bi->start_info;
	} else {
		/* Linux 64-bit boot protocol: long mode, identity map, __BOOT_CS
		 * 0x10 and __BOOT_DS 0x18 from our GDT, RSI = zero page. */
		seg(&s.cs, 0x10, 11, true, false);
		seg(&s.ds, 0x18, 3, false, true);
		s.tr = (struct kvm_segment){ .base = 0, .limit = 0x67, .selector = 0x20, .type = 11, .present = 1 };
		s.gdt.base = GPA_GDT;
		s.gdt.limit = 5 * 8 - 1;
		s.cr3 = GPA_PML4;
		s.cr4 = 0x20;               /* PAE */
		s.cr0 = 0x80000011;         /* PG | ET | PE */
		s.efer = 0x500;             /* LME | LMA */
		r.rip = bi->entry;
		r.rsi = bi->zero_page;
	}
	s.es = s.fs = s.gs = s.ss = s.ds;
	if (ioctl(c->fd, KVM_SET_SREGS, &s) < 0)
		return verr_errno(err, "KVM_SET_SREGS");
	if (ioctl(c->fd, KVM_SET_REGS, &r) < 0)
		return verr_errno(err, "KVM_SET_REGS");
	return 0;
}

static void park(struct vcpu *c)
{
	struct vm *vm = c->vm;

	pthread_mutex_lock(&vm->lock);
	c->paused = true;
	vm->nparked++;
	pthread_cond_broadcast(&vm->cond);
	while (vm->pause_req && atomic_load(&vm->exit_status) < 0)
		pthread_cond_wait(&vm->cond, &vm->lock);
	vm->nparked--;
	c->paused = false;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

static void report_regs(struct vcpu *c, char *buf, size_t len)
{
	struct kvm_regs r;
	struct kvm_sregs s;

	buf[0] = 0;
	if (ioctl(c->fd, KVM_GET_REGS, &r) == 0 && ioctl(c->fd, KVM_GET_SREGS, &s) == 0)
		snprintf(buf, len, " (RIP 0x%llx, RSP 0x%llx, CR0 0x%llx, CR3 0x%llx, EFER 0x%llx%s)",
			 (unsigned long long)r.rip, (unsigned long long)r.rsp, (unsigned long long)s.cr0,
			 (unsigned long long)s.cr3, (unsigned long long)s.efer,
			 /* KVM on AMD reinitialises the VMCB on a shutdown intercept. */
			 r.rip == 0xfff0 && s.cr0 == 0x10 ?
			 ": the reset state, as KVM on AMD leaves a vCPU that shut down, not where it faulted" : "");
}

static void handle_io(struct vcpu *c)
{
	struct kvm_run *run = c->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;

	/* data_offset and count come from KVM, but check the page bound anyway. */
	if (run->io.data_offset + (uint64_t)run->io.size * run->io.count > (uint64_t)c->vm->run_size)
		return;
	for (uint32_t i = 0; i < run->io.count; i++) {
		bool w = run->io.direction == KVM_EXIT_IO_OUT;

		if (!io_dispatch(&c->vm->pio, run->io.port, data + i * run->io.size, run->io.size, w))
			log_debug("vCPU %d: unhandled port %s 0x%x size %u", c->idx, w ? "write" : "read",
				  run->io.port, run->io.size);
	}
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *c = arg;
	struct vm *vm = c->vm;
	sigset_t set;
	char regs[200];

	if (c->host_cpu >= 0) {
		cpu_set_t cs;

		CPU_ZERO(&cs);
		CPU_SET(c->host_cpu, &cs);
		if (sched_setaffinity(0, sizeof(cs), &cs) < 0) {
			vm_request_exit(vm, HV_EXIT_ERROR, "pinning vCPU %d to host CPU %d: %s",
					c->idx, c->host_cpu, strerror(errno));
			atomic_store(&c->tid, -1);
			return NULL;
		}
	}
	{
		/* Named so that host tools (and tests) can find vCPU threads; by
		 * the thread itself, which is a prctl (another thread's name is
		 * a write to /proc, which --seccomp forbids). */
		char name[16];

		snprintf(name, sizeof(name), "vcpu%d", c->idx);
		pthread_setname_np(pthread_self(), name);
	}
	/* Published once pinned and named: a status request never sees the
	 * thread on the CPUs it inherited. */
	atomic_store(&c->tid, (int)syscall(SYS_gettid));
	sigemptyset(&set);
	sigaddset(&set, SIG_KICK);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	while (atomic_load(&vm->exit_status) < 0) {
		if (__atomic_load_n(&vm->pause_req, __ATOMIC_SEQ_CST)) {
			/* An I/O exit's instruction completes (an IN's value
			 * reaches its register) only on the next KVM_RUN: one
			 * that returns at once, so a paused vCPU's registers,
			 * which a snapshot takes, are whole. */
			if (c->io_pending) {
				__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
				ioctl(c->fd, KVM_RUN, 0);
				__atomic_store_n(&c->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
				c->io_pending = false;
			}
			park(c);
			continue;
		}
		int r = ioctl(c->fd, KVM_RUN, 0);

		__atomic_store_n(&c->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_request_exit(vm, HV_EXIT_CRASH, "KVM_RUN on vCPU %d failed: %s", c->idx, strerror(errno));
			break;
		}
		if (c->idx == 0 && !atomic_load(&vm->first_exit_ns))
			atomic_store(&vm->first_exit_ns, now_ns());
		c->io_pending = c->run->exit_reason == KVM_EXIT_IO || c->run->exit_reason == KVM_EXIT_MMIO;
		switch (c->run->exit_reason) {
		case KVM_EXIT_IO:
			handle_io(c);
			break;
		case KVM_EXIT_MMIO: {
			struct kvm_run *run = c->run;
			unsigned len = run->mmio.len <= 8 ? run->mmio.len : 8;

			if (!io_dispatch(&vm->mmio, run->mmio.phys_addr, run->mmio.data, len, run->mmio.is_write))
				log_debug("vCPU %d: unhandled MMIO %s 0x%llx len %u", c->idx,
					  run->mmio.is_write ? "write" : "read",
					  (unsigned long long)run->mmio.phys_addr, run->mmio.len);
			break;
		}
		case KVM_EXIT_HLT:
		case KVM_EXIT_INTR:
		case KVM_EXIT_IRQ_WINDOW_OPEN:
			break;
		case KVM_EXIT_SHUTDOWN:
			report_regs(c, regs, sizeof(regs));
			vm_request_exit(vm, HV_EXIT_CRASH, "guest triple fault on vCPU %d%s", c->idx, regs);
			break;
		case KVM_EXIT_SYSTEM_EVENT:
			switch (c->run->system_event.type) {
			case KVM_SYSTEM_EVENT_SHUTDOWN:
				vm_request_exit(vm, HV_EXIT_POWEROFF, "guest powered off");
				break;
			case KVM_SYSTEM_EVENT_RESET:
				vm_request_exit(vm, HV_EXIT_RESET, "guest requested a reset");
				break;
			default:
				vm_request_exit(vm, HV_EXIT_CRASH, "guest crashed (system event %u on vCPU %d)",
						c->run->system_event.type, c->idx);
			}
			break;
		case KVM_EXIT_INTERNAL_ERROR:
			report_regs(c, regs, sizeof(regs));
			vm_request_exit(vm, HV_EXIT_CRASH,
					"KVM internal error on vCPU %d (suberror %u%s)%s", c->idx,
					c->run->internal.suberror,
					c->run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION ?
					", an instruction KVM cannot emulate" : "", regs);
			break;
		case KVM_EXIT_FAIL_ENTRY:
			vm_request_exit(vm, HV_EXIT_CRASH, "vCPU %d failed to enter the guest (reason 0x%llx)",
					c->idx, (unsigned long long)c->run->fail_entry.hardware_entry_failure_reason);
			break;
		default:
			report_regs(c, regs, sizeof(regs));
			vm_request_exit(vm, HV_EXIT_CRASH, "vCPU %d: unexpected KVM exit %u%s", c->idx,
					c->run->exit_reason, regs);
		}
	}
	return NULL;
}

static void kick(struct vcpu *c)
{
	if (!c->started)
		return;
	__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(c->thread, SIG_KICK);
}

int vcpus_start(struct vm *vm, struct verr *err)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;   /* no SA_RESTART: KVM_RUN must return EINTR */
	sigaction(SIG_KICK, &sa, NULL);
	for (int i = 0; i < vm->nvcpus; i++) {
		int e = pthread_create(&vm->vcpu[i].thread, NULL, vcpu_thread, &vm->vcpu[i]);

		if (e) {
			errno = e;
			return verr_errno(err, "starting the thread of vCPU %d", i);
		}
		vm->vcpu[i].started = true;
	}
	/* Started means running where it was pinned: whoever reads the status
	 * next (the node agent checks pinning) sees every vCPU thread. */
	for (int i = 0; i < vm->nvcpus; i++)
		while (atomic_load(&vm->vcpu[i].tid) == 0 && atomic_load(&vm->exit_status) < 0)
			usleep(1000);
	return 0;
}

int vm_pause(struct vm *vm, struct verr *err)
{
	int running = 0;

	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		pthread_mutex_unlock(&vm->lock);
		return verr_set(err, "the guest is %s", vm_state_name(vm->state));
	}
	__atomic_store_n(&vm->pause_req, true, __ATOMIC_SEQ_CST);
	for (int i = 0; i < vm->nvcpus; i++) {
		kick(&vm->vcpu[i]);
		running += vm->vcpu[i].started;
	}
	while (vm->nparked < running && atomic_load(&vm->exit_status) < 0)
		pthread_cond_wait(&vm->cond, &vm->lock);
	vm->state = VM_PAUSED;
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

int vm_resume(struct vm *vm, struct verr *err)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_PAUSED && vm->state != VM_RUNNING) {
		pthread_mutex_unlock(&vm->lock);
		return verr_set(err, "the guest is %s", vm_state_name(vm->state));
	}
	__atomic_store_n(&vm->pause_req, false, __ATOMIC_SEQ_CST);
	vm->state = VM_RUNNING;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

void vcpus_stop(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	pthread_cond_broadcast(&vm->cond);   /* parked vCPUs see exit_status */
	pthread_mutex_unlock(&vm->lock);
	for (int i = 0; i < vm->nvcpus; i++)
		kick(&vm->vcpu[i]);
	for (int i = 0; i < vm->nvcpus; i++) {
		if (vm->vcpu[i].started) {
			/* A vCPU may sit in KVM_RUN waiting for SIPI: keep kicking
			 * until it leaves. */
			while (pthread_tryjoin_np(vm->vcpu[i].thread, NULL) == EBUSY) {
				kick(&vm->vcpu[i]);
				usleep(1000);
			}
			vm->vcpu[i].started = false;
			if (vlog_get_level() >= VLOG_DEBUG) {
				char regs[200];

				report_regs(&vm->vcpu[i], regs, sizeof(regs));
				log_debug("vCPU %d stopped%s", i, regs);
			}
		}
		if (vm->vcpu[i].run)
			munmap(vm->vcpu[i].run, (size_t)vm->run_size);
		if (vm->vcpu[i].fd > 0)
			close(vm->vcpu[i].fd);
		vm->vcpu[i].run = NULL;
		vm->vcpu[i].fd = -1;
	}
}
