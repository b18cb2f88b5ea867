/* Whether /dev/kvm is backed by hardware virtualization.  The machines here
 * have a software KVM (kvm_pvm), under which ordinary guest code runs through
 * the instruction emulator; the kvm driver must know before it promises a
 * guest that boots in seconds. */
#include "lib/hwvirt.h"
#include "lib/err.h"
#include "lib/fsutil.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static bool cpu_flag(const char *cpuinfo, const char *flag)
{
	const char *line = strstr(cpuinfo, "\nflags");
	const char *end;
	size_t n = strlen(flag);

	if (!line)
		return false;
	end = strchr(line + 1, '\n');
	for (const char *p = strchr(line, ':'); p && (!end || p < end); p++) {
		if ((p[-1] == ' ' || p[-1] == ':') && !strncmp(p, flag, n) &&
		    (p[n] == ' ' || p[n] == '\n' || p[n] == 0))
			return true;
	}
	return false;
}

static bool module_loaded(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	return access(path, F_OK) == 0;
}

int hwvirt_detect(struct hwvirt *h)
{
	char *cpuinfo = NULL;
	size_t len;
	struct verr err;
	bool vmx, svm;
	int fd;

	memset(h, 0, sizeof(*h));
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(h->why, sizeof(h->why), "/dev/kvm cannot be opened (no KVM on this host)");
		return 0;
	}
	h->kvm = ioctl(fd, KVM_GET_API_VERSION, 0) == KVM_API_VERSION;
	close(fd);
	if (!h->kvm) {
		snprintf(h->why, sizeof(h->why), "/dev/kvm does not speak KVM API version %d", KVM_API_VERSION);
		return 0;
	}
	if (read_file("/proc/cpuinfo", &cpuinfo, &len, 1 << 22, &err) < 0) {
		snprintf(h->why, sizeof(h->why), "%s", err.msg);
		return 0;
	}
	vmx = cpu_flag(cpuinfo, "vmx");
	svm = cpu_flag(cpuinfo, "svm");
	free(cpuinfo);
	if (module_loaded("kvm_intel") && vmx) {
		h->hw = true;
		snprintf(h->module, sizeof(h->module), "kvm_intel");
		snprintf(h->why, sizeof(h->why), "KVM with Intel VT-x (kvm_intel)");
	} else if (module_loaded("kvm_amd") && svm) {
		h->hw = true;
		snprintf(h->module, sizeof(h->module), "kvm_amd");
		snprintf(h->why, sizeof(h->why), "KVM with AMD-V (kvm_amd)");
	} else {
		snprintf(h->module, sizeof(h->module), "%s",
			 module_loaded("kvm_pvm") ? "kvm_pvm" : "unknown");
		snprintf(h->why, sizeof(h->why),
			 "KVM here is software-only (%s, no %s in /proc/cpuinfo): guests run under instruction emulation, about 1000x slower",
			 h->module, vmx || svm ? "VT-x/AMD-V module" : "vmx/svm flag");
	}
	return 0;
}
