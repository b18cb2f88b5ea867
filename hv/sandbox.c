/*
 * The allowlist is what vhpc-hv does once the guest runs, not what set-up
 * does: set-up (opening files, memfd_create, mbind, binding and connecting
 * sockets) is over before sandbox_enter, so a guest that takes over a
 * device model cannot open a file, exec, make or connect a socket, trace or
 * signal another process, or change its own mappings' backing.  libseccomp
 * builds the BPF program: its argument comparisons and per-arch syscall
 * tables are easy to get wrong by hand.
 *
 * ioctl is allowed for the requests a running guest's devices make, each
 * by name (ioctl_reqs below, read from every ioctl() in hv/ that can run
 * after set-up), not by family: the whole 'T' family would let a guest
 * that owns vhpc-hv push keystrokes into the terminal it was started from
 * (TIOCSTI), and the whole KVM family would let it make VMs and vCPUs.
 * No connect, and no socket: a guest-initiated vsock stream, the one
 * connection vhpc-hv made after set-up, is refused under the allowlist
 * (dev_virtio_vsock.c); vhpc's guests only listen.
 *
 * The action is SCMP_ACT_TRAP rather than a silent kill so that the log
 * names the call (and an ioctl's request); the call itself never runs
 * either way.
 */
#include "sandbox.h"
#include "config.h"
#include "hv.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/vfio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/vhost.h>

#define NAMES 512
/* Resolved before the filter: the SIGSYS handler must not allocate. */
static char *names[NAMES];

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	char msg[200], req[40] = "";
	int nr = si->si_syscall, n;

	(void)sig;
#ifdef __x86_64__
	/* The registers hold the call's arguments: ioctl's request is the
	 * second (RSI). */
	if (nr == SYS_ioctl && uc)
		snprintf(req, sizeof(req), ", request 0x%llx",
			 (unsigned long long)(unsigned)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSI]);
#else
	(void)uc;
#endif
	n = snprintf(msg, sizeof(msg),
		     "vhpc-hv: error: system call %d (%s%s) is outside the seccomp allowlist; stopping the guest\n",
		     nr, nr >= 0 && nr < NAMES && names[nr] ? names[nr] : "?", req);
	if (n > 0 && write(2, msg, (size_t)n) < 0) {
		/* nowhere else to tell it */
	}
	_exit(HV_EXIT_SECCOMP);
}

/* Calls allowed with any arguments. */
static const int plain[] = {
	/* I/O on descriptors opened during set-up */
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
	SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(preadv), SCMP_SYS(pwritev),
	SCMP_SYS(preadv2), SCMP_SYS(pwritev2), SCMP_SYS(lseek), SCMP_SYS(close),
	SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(fcntl),
	SCMP_SYS(dup), SCMP_SYS(dup3), SCMP_SYS(fdatasync), SCMP_SYS(fsync), SCMP_SYS(fallocate),
	/* event loops and their wake-ups */
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait),
	SCMP_SYS(epoll_pwait2), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_create1), SCMP_SYS(eventfd2),
	SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime), SCMP_SYS(timerfd_gettime),
	/* sockets already there: the control socket's clients and the
	 * host-initiated vsock streams (accept4 on sockets listening since
	 * set-up), the vhost-user back-end's connection (sendmsg/recvmsg with
	 * SCM_RIGHTS carry guest RAM's memfd and the ring eventfds at every
	 * device start; recvfrom peeks when the back-end hangs up).  No
	 * socket, no connect: nothing new is reached. */
	SCMP_SYS(accept4), SCMP_SYS(sendmsg),
	SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(recvfrom), SCMP_SYS(shutdown),
	SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
	/* memory: malloc, thread stacks */
	SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(madvise),
	SCMP_SYS(mremap), SCMP_SYS(brk),
	/* threads, signals, time */
	SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
	SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(sched_setaffinity),
	SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall), SCMP_SYS(nanosleep),
	SCMP_SYS(clock_nanosleep), SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres),
	SCMP_SYS(gettimeofday), SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getuid),
	SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid), SCMP_SYS(getrandom),
	SCMP_SYS(exit), SCMP_SYS(exit_group),
	/* its own sockets go at exit */
	SCMP_SYS(unlink), SCMP_SYS(unlinkat),
};
/* The ioctl requests of a running guest, each with the code that makes it.
 * Anything else (set-up's KVM_CREATE_*, KVM_SET_CPUID2, TUNSETIFF, any tty
 * request) traps. */
static const struct {
	unsigned long req;
	const char *why;
} ioctl_reqs[] = {
	{ KVM_RUN, "vcpu.c: every vCPU" },
	{ KVM_GET_REGS, "vcpu.c report_regs: a crashed guest's registers in the log" },
	{ KVM_GET_SREGS, "vcpu.c report_regs; snap_kvm.c: a snapshot" },
	/* A snapshot of the paused guest (control "snapshot", snap_kvm.c):
	 * reads only; restoring sets state before the filter is loaded. */
	{ KVM_GET_XSAVE, "snap_kvm.c: FPU/SSE/AVX state" },
	{ KVM_GET_XSAVE2, "snap_kvm.c: XSAVE state larger than 4 KiB" },
	{ KVM_GET_XCRS, "snap_kvm.c: XCR0" },
	{ KVM_GET_MSRS, "snap_kvm.c: the MSRs KVM lists, the TSC among them" },
	{ KVM_GET_LAPIC, "snap_kvm.c: the local APIC's registers" },
	{ KVM_GET_VCPU_EVENTS, "snap_kvm.c: pending exceptions, interrupts and NMIs" },
	{ KVM_GET_DEBUGREGS, "snap_kvm.c: DR0-DR7" },
	{ KVM_GET_MP_STATE, "snap_kvm.c: halted, waiting for SIPI, ..." },
	{ KVM_GET_IRQCHIP, "snap_kvm.c: PICs and IOAPIC" },
	{ KVM_GET_PIT2, "snap_kvm.c: the PIT" },
	{ KVM_GET_CLOCK, "snap_kvm.c: the KVM clock" },
	{ KVM_IRQ_LINE, "vm.c vm_set_irq: UART, i8042, ACPI and legacy INTx lines" },
	{ KVM_SIGNAL_MSI, "irq.c: MSIs without an irqfd" },
	{ KVM_IRQFD, "irq.c, pci.c: MSI-X vectors bound and unbound as the guest masks them" },
	{ KVM_SET_GSI_ROUTING, "irq.c: MSI routes as the guest programs its MSI-X tables" },
	{ KVM_IOEVENTFD, "virtio_pci.c: queue notifications follow BAR 0 where the guest puts it" },
	{ KVM_SET_USER_MEMORY_REGION, "dev_ivshmem.c: the region follows BAR 2" },
	{ TUNSETOFFLOAD, "dev_virtio_net.c: the offloads the guest's driver accepted" },
	{ TUNSETQUEUE, "dev_virtio_net.c: tap queues follow the guest's queue pairs" },
	/* vhost-net at DRIVER_OK and reset (vhost_net.c vhn_start, vhn_stop);
	 * owner, memory table, kick and call eventfds are set-up's only. */
	{ VHOST_SET_FEATURES, "vhost_net.c vhn_start: the ring features the driver took" },
	{ VHOST_SET_VRING_NUM, "vhost_net.c vhn_start: ring sizes" },
	{ VHOST_SET_VRING_BASE, "vhost_net.c vhn_start: rings start at 0 after a reset, at a snapshot's indexes after a restore" },
	{ VHOST_SET_VRING_ADDR, "vhost_net.c vhn_start: where the driver put the rings" },
	{ VHOST_NET_SET_BACKEND, "vhost_net.c vhn_start/vhn_stop/vhn_bases: the tap queue attached, detached at reset and for a snapshot" },
	{ VHOST_GET_VRING_BASE, "vhost_net.c vhn_stop/vhn_bases: where the rings stopped" },
	{ VFIO_DEVICE_SET_IRQS, "vfio_dev.c: the host's MSI-X vectors follow the guest's enable bit" },
	{ VFIO_DEVICE_RESET, "vfio_dev.c: an assigned function is reset at teardown" },
};
#define NREQS (sizeof(ioctl_reqs) / sizeof(ioctl_reqs[0]))
/* The calls allowed with argument checks in rules(), ioctl once; clone3's
 * ENOSYS is not an allowance. */
#define CHECKED 6

static int add(scmp_filter_ctx c, int nr, unsigned n, const struct scmp_arg_cmp *a)
{
	return seccomp_rule_add_array(c, SCMP_ACT_ALLOW, nr, n, a);
}

static int rules(scmp_filter_ctx c)
{
	int rc = 0;

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]) && rc == 0; i++)
		rc = add(c, plain[i], 0, NULL);
	/* The kernel reads the request as 32 bits: the upper half of the
	 * register is not compared. */
	for (size_t i = 0; i < NREQS && rc == 0; i++) {
		struct scmp_arg_cmp r = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)ioctl_reqs[i].req);

		rc = add(c, SCMP_SYS(ioctl), 1, &r);
	}
	if (rc)
		return rc;
	{
		/* Threads only: no fork.  glibc falls back from clone3, whose
		 * flags sit in memory a filter cannot read, to clone on ENOSYS. */
		struct scmp_arg_cmp thr = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
		/* /proc/self/task/N/stat for the control socket's status; nothing
		 * is ever opened for writing. */
		struct scmp_arg_cmp rdonly = SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND, 0);
		/* Where guest pages are (nodes NULL: a query, never a move). */
		struct scmp_arg_cmp query = SCMP_A3(SCMP_CMP_EQ, 0);
		/* Kicking one of our own vCPU threads. */
		struct scmp_arg_cmp self = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid());
		/* A thread naming itself. */
		struct scmp_arg_cmp name = SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME);

		if ((rc = add(c, SCMP_SYS(clone), 1, &thr)) || (rc = add(c, SCMP_SYS(openat), 1, &rdonly)) ||
		    (rc = add(c, SCMP_SYS(move_pages), 1, &query)) || (rc = add(c, SCMP_SYS(tgkill), 1, &self)) ||
		    (rc = add(c, SCMP_SYS(prctl), 1, &name)))
			return rc;
		rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	}
	return rc;
}

/* One call the allowlist must stop (--seccomp-probe[=CALL]); returning
 * means it did not. */
static int probe_call(int probe, int sock, struct verr *err)
{
	switch (probe) {
	case HV_PROBE_TIOCSTI: {
		char c = '\n';

		log_info("seccomp: probing with ioctl TIOCSTI, which must end this process");
		ioctl(STDIN_FILENO, TIOCSTI, &c);
		return verr_set(err, "seccomp: ioctl TIOCSTI was not stopped by the allowlist");
	}
	case HV_PROBE_CONNECT: {
		/* An abstract name: reachable from any mount namespace. */
		struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "\0vhpc-hv-probe" };

		log_info("seccomp: probing with connect, which must end this process");
		connect(sock, (struct sockaddr *)&a, sizeof(a));
		return verr_set(err, "seccomp: connect was not stopped by the allowlist");
	}
	default: {
		char *const argv[] = { (char *)"/bin/sh", NULL };

		log_info("seccomp: probing with execve, which must end this process");
		syscall(SYS_execve, argv[0], argv, NULL);
		return verr_set(err, "seccomp: execve was not stopped by the allowlist");
	}
	}
}

int sandbox_enter(int probe, struct verr *err)
{
	struct sigaction sa;
	scmp_filter_ctx c;
	int rc, sock = -1;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return verr_errno(err, "seccomp: PR_SET_DUMPABLE");
	for (int i = 0; i < NAMES; i++)
		if (!names[i])
			names[i] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, i);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return verr_errno(err, "seccomp: SIGSYS handler");
	/* The connect probe's socket: making one is refused as well. */
	if (probe == HV_PROBE_CONNECT && (sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return verr_errno(err, "seccomp: the probe's socket");
	c = seccomp_init(SCMP_ACT_TRAP);
	if (!c)
		return verr_set(err, "seccomp: seccomp_init failed");
	/* Every thread (event loops, the control thread) gets the filter, not
	 * only the ones started after it. */
	rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc == 0)
		rc = rules(c);
	if (rc == 0)
		rc = seccomp_load(c);
	seccomp_release(c);
	if (rc < 0) {
		errno = -rc;
		return verr_errno(err, "seccomp: loading the allowlist");
	}
	log_info("seccomp: allowlist of %zu system calls in force, ioctl for %zu requests",
		 sizeof(plain) / sizeof(plain[0]) + CHECKED, NREQS);
	if (probe != HV_PROBE_NONE)
		return probe_call(probe, sock, err);
	return 0;
}
