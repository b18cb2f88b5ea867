/* libFuzzer target for what a guest or a kernel file controls in vhpc-hv.
 * The first byte picks the target:
 *   0: the input is a kernel file (bzImage or ELF) for boot_load
 *   1: the input is a list of port accesses to the devices (UART, i8042,
 *      ACPI PM/GED, debug exit) through the I/O dispatch
 *   2: the input is control-socket request lines
 * No KVM is needed: the VM has RAM and devices but no vCPUs. */
#include "lib/err.h"
#include "lib/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hv/vm.h"

static struct vm vm;
static struct hv_config cfg;
static struct hv_plan plan;
static int kfd = -1;
static char kpath[64];

static void setup(void)
{
	struct verr err;

	vlog_init("fuzz-hv");
	vlog_set_level(VLOG_ERR);
	hv_config_defaults(&cfg);
	cfg.vcpus = 2;
	cfg.mem = 32 << 20;
	cfg.serial = strdup("none");
	cfg.debug_exit = true;
	kfd = memfd_create("fuzz-kernel", 0);
	snprintf(kpath, sizeof(kpath), "/proc/self/fd/%d", kfd);
	cfg.kernel = strdup(kpath);
	if (hv_plan_make(&cfg, &plan, &err) < 0)
		abort();
	vm.cfg = &cfg;
	vm.plan = &plan;
	vm.nvcpus = 2;
	vm.vm_fd = -1;
	vm.kvm_fd = -1;
	vm.stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	atomic_store(&vm.exit_status, -1);
	pthread_mutex_init(&vm.lock, NULL);
	pthread_cond_init(&vm.cond, NULL);
	io_bus_init(&vm.pio);
	io_bus_init(&vm.mmio);
	if (mem_create(&vm.mem, &plan, 0, NULL, &err) < 0 || devices_create(&vm, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		abort();
	}
}

static const uint16_t ports[] = { 0x3f8, 0x3f9, 0x3fa, 0x3fb, 0x3fc, 0x3fd, 0x3fe, 0x3ff,
				  0x60, 0x64, 0x600, 0x601, 0x602, 0xf4, 0x80, 0x3f7 };

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static bool init;
	struct verr err;

	if (!init) {
		setup();
		init = true;
	}
	if (n < 1)
		return 0;
	atomic_store(&vm.exit_status, -1);
	switch (d[0] % 3) {
	case 0: {
		struct boot_info bi;

		if (ftruncate(kfd, 0) < 0 || pwrite(kfd, d + 1, n - 1, 0) != (ssize_t)(n - 1))
			abort();
		(void)boot_load(&vm, &bi, &err);
		break;
	}
	case 1:
		for (size_t i = 1; i + 3 <= n; i += 3) {
			uint8_t v[8] = { d[i + 2] };
			unsigned len = 1u << (d[i] >> 6 & 3);

			io_dispatch(&vm.pio, ports[d[i + 1] % 16], v, len > 4 ? 4 : len, d[i] & 1);
		}
		break;
	case 2: {
		char *s = strndup((const char *)d + 1, n - 1), *save = NULL;

		/* pause/resume/kill change state; reset it around each line. */
		for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			vm.state = VM_RUNNING;
			free(control_reply(&vm, l));
			vm.pause_req = false;
		}
		free(s);
		break;
	}
	}
	return 0;
}
