/*
 * How much longer than on hardware the kvm driver's waits may take here.
 *
 * Starting a VM is dominated by faulting in memory: prefaulting guest RAM
 * before vhpc-hv listens, then the guest kernel touching its own.  Under
 * the nested lab (QEMU TCG emulating AMD-V) that costs 10-20 times what it
 * costs on hardware, while plain arithmetic runs at native speed, so the
 * scale is measured by faulting in and writing a small buffer and comparing
 * with what that takes on an ordinary x86 server.  VHPC_KVM_TIME_SCALE
 * overrides the measurement (a number >= 1).
 */
#include "nodeagent/job.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "kvm_int.h"
#include "nodeagent/drivers/kvm/kvm.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PACE_BYTES  (16u << 20)
/* 16 MiB faulted in and written: 6-7 ms on the development machines'
 * cores (Debian 12, 2026), a little less on a current server. */
#define PACE_REF_MS 8.0
#define PACE_MAX    100.0

static double measure(void)
{
	double best = 0;

	for (int r = 0; r < 3; r++) {
		double t0 = now_s(), ms;
		char *p = mmap(NULL, PACE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return 1;
		for (size_t i = 0; i < PACE_BYTES; i += 4096)
			((volatile char *)p)[i] = 1;
		memset(p, 2, PACE_BYTES);
		munmap(p, PACE_BYTES);
		ms = (now_s() - t0) * 1000;
		if (r == 0 || ms < best)
			best = ms;
	}
	return best / PACE_REF_MS;
}

double na_kvm_time_scale(void)
{
	static double scale;
	const char *e = getenv("VHPC_KVM_TIME_SCALE");

	if (scale > 0)
		return scale;
	if (e && *e) {
		char *end;
		double v = strtod(e, &end);

		if (*end == 0 && v >= 1 && v <= PACE_MAX) {
			scale = v;
			return scale;
		}
		log_warn("VHPC_KVM_TIME_SCALE='%s' is not a number from 1 to %.0f: measuring instead", e, PACE_MAX);
	}
	scale = measure();
	if (scale < 1)
		scale = 1;
	if (scale > PACE_MAX)
		scale = PACE_MAX;
	if (scale > 1.5)
		log_info("kvm driver: this machine faults memory in %.1fx slower than hardware; start and ready deadlines scaled to match",
			 scale);
	return scale;
}
