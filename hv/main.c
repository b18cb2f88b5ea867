/* vhpc-hv: set up one KVM guest, run it, and exit with a status that says
 * how it ended (hv/hv.h). */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/hwvirt.h"
#include "lib/log.h"
#include "fdpath.h"
#include "sandbox.h"
#include "snapshot.h"
#include "vm.h"
#include "layout.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

static int kvm_open(struct vm *vm, struct verr *err)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	int n = 256;

	vm->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0)
		return verr_errno(err, "opening /dev/kvm");
	if (ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		return verr_set(err, "/dev/kvm does not speak KVM API %d", KVM_API_VERSION);
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return verr_errno(err, "KVM_CREATE_VM");
	vm->run_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->run_size <= 0)
		return verr_errno(err, "KVM_GET_VCPU_MMAP_SIZE");
	if (ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IRQCHIP) <= 0)
		return verr_set(err, "KVM here has no in-kernel irqchip (KVM_CAP_IRQCHIP)");
	if (ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) <= 0)
		return verr_set(err, "KVM here lacks KVM_CAP_IMMEDIATE_EXIT");
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)GPA_TSS) < 0)
		return verr_errno(err, "KVM_SET_TSS_ADDR");
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return verr_errno(err, "KVM_CREATE_IRQCHIP");
	/* The PIT gives early Linux a clock to calibrate against. */
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return verr_errno(err, "KVM_CREATE_PIT2");
	for (;;) {
		vm->supported_cpuid = calloc(1, sizeof(struct kvm_cpuid2) + (size_t)n * sizeof(struct kvm_cpuid_entry2));
		if (!vm->supported_cpuid)
			return verr_set(err, "out of memory");
		vm->supported_cpuid->nent = (uint32_t)n;
		if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, vm->supported_cpuid) == 0)
			break;
		free(vm->supported_cpuid);
		vm->supported_cpuid = NULL;
		if (errno != E2BIG || n > 4096)
			return verr_errno(err, "KVM_GET_SUPPORTED_CPUID");
		n *= 2;
	}
	return 0;
}

static int map_slots(struct vm *vm, struct verr *err)
{
	for (int i = 0; i < vm->mem.nslots; i++) {
		struct kvm_userspace_memory_region r = {
			.slot = (uint32_t)i,
			.guest_phys_addr = vm->mem.slot[i].gpa,
			.memory_size = vm->mem.slot[i].size,
			.userspace_addr = (uint64_t)(uintptr_t)(vm->mem.host + vm->mem.slot[i].ram_off),
		};

		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0)
			return verr_errno(err, "KVM_SET_USER_MEMORY_REGION slot %d (0x%llx+0x%llx)", i,
					  (unsigned long long)r.guest_phys_addr, (unsigned long long)r.memory_size);
	}
	return 0;
}

static bool readable(const char *path)
{
	int fd = hv_open(path, O_RDONLY, 0);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int default_prefault_threads(void)
{
	cpu_set_t s;

	if (sched_getaffinity(0, sizeof(s), &s) == 0 && CPU_COUNT(&s) > 0)
		return CPU_COUNT(&s);
	return 1;
}

static void main_loop(struct vm *vm, int sfd)
{
	while (atomic_load(&vm->exit_status) < 0) {
		struct pollfd pfd[2 + 32];
		fd_cb cbs[32];
		void *ops[32];
		int n = 0, nw = vm->nwatch;

		pfd[n++] = (struct pollfd){ .fd = vm->stop_efd, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (int i = 0; i < nw; i++) {
			pfd[n++] = (struct pollfd){ .fd = vm->watch[i].fd, .events = POLLIN };
			cbs[i] = vm->watch[i].cb;
			ops[i] = vm->watch[i].opaque;
		}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			vm_request_exit(vm, HV_EXIT_ERROR, "poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				vm_request_exit(vm, HV_EXIT_KILLED, "stopped by signal %s", strsignal((int)si.ssi_signo));
		}
		for (int i = 0; i < nw; i++)
			if (pfd[2 + i].revents) {
				/* A callback may have removed watches: only call it
				 * while its fd is still watched. */
				bool still = false;

				for (int j = 0; j < vm->nwatch; j++)
					still |= vm->watch[j].fd == pfd[2 + i].fd && vm->watch[j].cb == cbs[i];
				if (still)
					cbs[i](vm, pfd[2 + i].fd, ops[i]);
			}
	}
}

int main(int argc, char **argv)
{
	static struct vm vm;
	static struct hv_config cfg;
	static struct hv_plan plan;
	struct verr err = { { 0 } };
	struct hwvirt hw;
	struct boot_info bi;
	uint64_t pf_ns = 0;
	sigset_t sigs;
	int sfd, r, status, restore_fd = -1, fail_status = HV_EXIT_ERROR;

	vm.t0_ns = now_ns();
	vlog_init("vhpc-hv");
	hv_config_defaults(&cfg);
	r = hv_config_parse(&cfg, argc, argv, &err);
	if (r == 1) {
		hv_usage(stdout);
		return 0;
	}
	if (r < 0 || hv_plan_make(&cfg, &plan, &err) < 0) {
		fprintf(stderr, "vhpc-hv: %s\n", err.msg);
		hv_usage(stderr);
		return HV_EXIT_USAGE;
	}
	/* Before RAM is allocated: a typo should not cost a prefault. */
	if (!readable(cfg.kernel) || (cfg.initrd && !readable(cfg.initrd))) {
		const char *f = !readable(cfg.kernel) ? cfg.kernel : cfg.initrd;

		log_err("%s %s: %s", f == cfg.kernel ? "kernel" : "initrd", f, strerror(errno));
		hv_config_free(&cfg);
		return HV_EXIT_ERROR;
	}
	/* Opened before RAM is allocated, as the kernel is checked: the
	 * snapshot may be a descriptor the caller passed (/dev/fd/N). */
	if (cfg.restore && (restore_fd = hv_open(cfg.restore, O_RDONLY, 0)) < 0) {
		log_err("--restore %s: %s", cfg.restore, strerror(errno));
		hv_config_free(&cfg);
		return HV_EXIT_ERROR;
	}
	hwvirt_detect(&hw);
	if (!hw.kvm) {
		log_err("%s", hw.why);
		return HV_EXIT_NO_HW;
	}
	if (!hw.hw) {
		if (cfg.require_hw) {
			log_err("--require-hw: %s", hw.why);
			return HV_EXIT_NO_HW;
		}
		log_warn("%s", hw.why);
	} else {
		log_info("%s", hw.why);
	}

	vm.cfg = &cfg;
	vm.plan = &plan;
	vm.nvcpus = plan.nvcpus;
	vm.kvm_fd = vm.vm_fd = -1;
	vm.mem.fd = -1;
	atomic_store(&vm.exit_status, -1);
	pthread_mutex_init(&vm.lock, NULL);
	pthread_cond_init(&vm.cond, NULL);
	pthread_mutex_init(&vm.loops_lock, NULL);
	io_bus_init(&vm.pio);
	io_bus_init(&vm.mmio);
	vm.stop_efd = eventfd(0, EFD_CLOEXEC);

	/* Signals go to the main loop only; vCPU threads unblock their kick. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	sigdelset(&sigs, SIGUSR1);
	sigdelset(&sigs, SIGPIPE);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);

	if (vm.stop_efd < 0 || sfd < 0) {
		log_err("eventfd/signalfd: %s", strerror(errno));
		return HV_EXIT_ERROR;
	}
	if (kvm_open(&vm, &err) < 0)
		goto fail;
	if (mem_create(&vm.mem, &plan, cfg.prefault ? (cfg.prefault_threads ? (int)cfg.prefault_threads :
						       default_prefault_threads()) : 0,
		       &pf_ns, &err) < 0)
		goto fail;
	if (pf_ns)
		log_info("guest RAM: %llu MiB in %d node(s)%s, prefaulted in %.1f ms (%.2f GiB/s)",
			 (unsigned long long)(plan.mem >> 20), plan.nnodes,
			 plan.page_size > 4096 ? " on hugepages" : "", pf_ns / 1e6,
			 (double)plan.mem / (1 << 30) / (pf_ns / 1e9));
	if (map_slots(&vm, &err) < 0 || devices_create(&vm, &err) < 0)
		goto fail;
	for (int i = 0; i < vm.nvcpus; i++)
		if (vcpu_create(&vm, i, &err) < 0)
			goto fail;
	if (snap_host_init(&vm, &err) < 0) {
		log_warn("snapshots unavailable: %s", err.msg);
		free(vm.snaph);
		vm.snaph = NULL;
	}
	/* A guest started paused has its device threads held as after a
	 * pause; a restore holds them until RAM is back, since the devices
	 * it loads look at their rings first thing. */
	if (restore_fd >= 0 || cfg.paused)
		evloop_hold_all(&vm, true);
	if (restore_fd >= 0) {
		/* RAM, devices, vCPUs and irqchip come from the snapshot: the
		 * kernel, ACPI tables and boot registers are in it already. */
		struct snap_state st;
		uint64_t t0 = now_ns();

		r = snap_load(&vm, restore_fd, &st, &err);
		if (r == 0) {
			r = snap_apply_kvm(&vm, &st, &err);
			snap_state_free(&st);
		}
		close(restore_fd);
		restore_fd = -1;
		if (r < 0) {
			verr_wrap(&err, "--restore %s", cfg.restore);
			if (r == SNAP_DAMAGED)
				fail_status = HV_EXIT_SNAPSHOT;
			goto fail;
		}
		log_info("restored from %s in %.1f ms", cfg.restore, (now_ns() - t0) / 1e6);
		bi = (struct boot_info){ .pvh = false };
	} else if (acpi_build(&vm, &err) < 0 || boot_load(&vm, &bi, &err) < 0 ||
		   vcpu_boot_regs(&vm.vcpu[0], &bi, &err) < 0) {
		goto fail;
	}
	if (cfg.control && control_start(&vm, cfg.control, &err) < 0)
		goto fail;
	if (cfg.seccomp && sandbox_enter(cfg.seccomp_probe, &err) < 0)
		goto fail;
	/* --paused: the vCPU threads park before their first KVM_RUN, as
	 * after a "pause"; "resume" lets them go. */
	vm.state = cfg.paused ? VM_PAUSED : VM_RUNNING;
	vm.pause_req = cfg.paused;
	if (cfg.restore && !cfg.paused)
		evloop_hold_all(&vm, false);
	if (vcpus_start(&vm, &err) < 0)
		goto fail;
	log_info("guest started%s: %d vCPU(s), %llu MiB, %s, %.1f ms after start", cfg.paused ? " paused" : "",
		 vm.nvcpus, (unsigned long long)(plan.mem >> 20),
		 cfg.restore ? "from a snapshot" : bi.pvh ? "PVH boot" : "Linux 64-bit boot",
		 (now_ns() - vm.t0_ns) / 1e6);

	main_loop(&vm, sfd);
	pthread_mutex_lock(&vm.lock);
	vm.state = VM_STOPPING;
	pthread_mutex_unlock(&vm.lock);
	vcpus_stop(&vm);
	status = atomic_load(&vm.exit_status);
	if (atomic_load(&vm.first_exit_ns))
		log_info("first guest exit %.1f ms after process start",
			 (atomic_load(&vm.first_exit_ns) - vm.t0_ns) / 1e6);
	if (status == HV_EXIT_POWEROFF || status >= HV_EXIT_DEBUG_BASE)
		log_info("%s", vm.exit_reason);
	else
		log_err("%s", vm.exit_reason);
	goto out;
fail:
	log_err("%s", err.msg);
	status = fail_status;
	pthread_mutex_lock(&vm.lock);
	if (atomic_load(&vm.exit_status) < 0)
		atomic_store(&vm.exit_status, fail_status);
	pthread_mutex_unlock(&vm.lock);
	vcpus_stop(&vm);
out:
	if (restore_fd >= 0)
		close(restore_fd);
	free(vm.snaph);
	control_stop();
	devices_destroy(&vm);
	mem_destroy(&vm.mem);
	if (vm.vm_fd >= 0)
		close(vm.vm_fd);
	if (vm.kvm_fd >= 0)
		close(vm.kvm_fd);
	free(vm.supported_cpuid);
	io_bus_free(&vm.pio);
	io_bus_free(&vm.mmio);
	hv_config_free(&cfg);
	return status;
}
