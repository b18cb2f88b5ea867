/*
 * vhpc-hv's allowlist (hv/sandbox.c) on its own, without KVM: each case
 * forks, loads the filter in the child and makes one call.  A call on the
 * list runs (here on descriptor -1: EBADF, and the child exits 0); any
 * other ends the child with HV_EXIT_SECCOMP and a line naming the call.
 * What a running guest's devices need is proven by the hv tests, which
 * boot every guest under --seccomp (tests/hv/hvlib.sh) in the lab.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/vhost.h>
#include <linux/vfio.h>
#include <cmocka.h>

#include "hv/hv.h"
#include "hv/config.h"
#include "hv/sandbox.h"

enum what { IOCTL, SOCKET, CONNECT };

/* The child's exit status; its stderr in out. */
static int under_filter(enum what w, unsigned long req, char *out, size_t len)
{
	int p[2], st, sock = -1;
	ssize_t n, got = 0;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct verr err;

		dup2(p[1], 2);
		if (w == CONNECT)
			sock = socket(AF_UNIX, SOCK_STREAM, 0);
		if (sandbox_enter(HV_PROBE_NONE, &err) < 0)
			_exit(100);
		if (w == IOCTL) {
			char c = 'x';

			errno = 0;
			if (ioctl(-1, req, &c) == 0 || errno != EBADF)
				_exit(101);
		} else if (w == SOCKET) {
			socket(AF_UNIX, SOCK_STREAM, 0);
		} else {
			struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "\0vhpc-unit-sandbox" };

			connect(sock, (struct sockaddr *)&a, sizeof(a));
		}
		_exit(0);
	}
	close(p[1]);
	while (got < (ssize_t)len - 1 && (n = read(p[0], out + got, len - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = 0;
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void running_guests_ioctls_run(void **state)
{
	const unsigned long reqs[] = { KVM_RUN, KVM_GET_REGS, KVM_GET_SREGS, KVM_IRQ_LINE, KVM_SIGNAL_MSI, KVM_IRQFD,
				       KVM_SET_GSI_ROUTING, KVM_IOEVENTFD, KVM_SET_USER_MEMORY_REGION,
				       TUNSETOFFLOAD, TUNSETQUEUE, VHOST_SET_FEATURES, VHOST_SET_VRING_NUM,
				       VHOST_SET_VRING_BASE, VHOST_SET_VRING_ADDR, VHOST_NET_SET_BACKEND,
				       VHOST_GET_VRING_BASE,
				       VFIO_DEVICE_SET_IRQS, VFIO_DEVICE_RESET,
				       /* a snapshot's reads (snap_kvm.c) */
				       KVM_GET_XSAVE, KVM_GET_XSAVE2, KVM_GET_XCRS, KVM_GET_MSRS, KVM_GET_LAPIC,
				       KVM_GET_VCPU_EVENTS, KVM_GET_DEBUGREGS, KVM_GET_MP_STATE, KVM_GET_IRQCHIP,
				       KVM_GET_PIT2, KVM_GET_CLOCK };
	char out[512];

	(void)state;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		int rc = under_filter(IOCTL, reqs[i], out, sizeof(out));

		if (rc != 0)
			fail_msg("ioctl 0x%lx: exit %d, %s", reqs[i], rc, out);
	}
}

/* TIOCSTI would push input into the terminal vhpc-hv was started from. */
static void tiocsti_is_refused(void **state)
{
	char out[512];

	(void)state;
	assert_int_equal(under_filter(IOCTL, TIOCSTI, out, sizeof(out)), HV_EXIT_SECCOMP);
	assert_non_null(strstr(out, "system call 16 (ioctl, request 0x5412) is outside the seccomp allowlist"));
}

/* The rest of the families the old filter allowed whole, and set-up's own
 * requests. */
static void other_ioctls_are_refused(void **state)
{
	const unsigned long reqs[] = { TCGETS, TIOCSCTTY, FIONREAD, KVM_CREATE_VM, KVM_CREATE_VCPU, KVM_SET_CPUID2,
				       KVM_SET_MSRS, KVM_SET_REGS, TUNSETIFF, TUNSETPERSIST,
				       /* a restore's writes happen before the filter */
				       KVM_SET_XSAVE, KVM_SET_LAPIC, KVM_SET_IRQCHIP, KVM_SET_CLOCK,
				       KVM_SET_VCPU_EVENTS, KVM_SET_MP_STATE,
				       /* vhost-net's set-up: a guest that owns vhpc-hv must not
				        * point the kernel at other memory or other eventfds */
				       VHOST_SET_OWNER, VHOST_RESET_OWNER, VHOST_SET_MEM_TABLE,
				       VHOST_SET_VRING_KICK, VHOST_SET_VRING_CALL, VHOST_SET_VRING_ERR,
				       VHOST_SET_LOG_BASE, VHOST_SET_LOG_FD, VHOST_GET_FEATURES,
				       /* VFIO's set-up: the agent's and vhpc-hv's before the filter */
				       VFIO_GROUP_SET_CONTAINER, VFIO_SET_IOMMU, VFIO_GROUP_GET_DEVICE_FD,
				       VFIO_IOMMU_MAP_DMA, VFIO_IOMMU_UNMAP_DMA, VFIO_DEVICE_GET_REGION_INFO };
	char out[512];

	(void)state;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		int rc = under_filter(IOCTL, reqs[i], out, sizeof(out));

		if (rc != HV_EXIT_SECCOMP)
			fail_msg("ioctl 0x%lx: exit %d (wanted %d), %s", reqs[i], rc, HV_EXIT_SECCOMP, out);
	}
}

static void no_socket_no_connect(void **state)
{
	char out[512];

	(void)state;
	assert_int_equal(under_filter(SOCKET, 0, out, sizeof(out)), HV_EXIT_SECCOMP);
	assert_non_null(strstr(out, "(socket) is outside the seccomp allowlist"));
	assert_int_equal(under_filter(CONNECT, 0, out, sizeof(out)), HV_EXIT_SECCOMP);
	assert_non_null(strstr(out, "(connect) is outside the seccomp allowlist"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(running_guests_ioctls_run),
		cmocka_unit_test(tiocsti_is_refused),
		cmocka_unit_test(other_ioctls_are_refused),
		cmocka_unit_test(no_socket_no_connect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
