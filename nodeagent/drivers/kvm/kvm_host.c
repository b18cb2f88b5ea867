/* Whether this host can run kvm guests, and whether "auto" should pick
 * them: only with hardware virtualization, since on a software-only KVM
 * guests start but do not finish booting. */
#include "lib/err.h"
#include "lib/hwvirt.h"
#include "nodeagent/drivers/kvm/kvm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool na_kvm_auto_pick(char *why, size_t len)
{
	struct hwvirt h;

	hwvirt_detect(&h);
	snprintf(why, len, "%s", h.why);
	return h.hw;
}

int na_kvm_host_check(bool allow_emulated, bool *emulated, struct verr *err)
{
	const char *env = getenv("VHPC_KVM_ALLOW_EMULATION");
	struct hwvirt h;

	*emulated = false;
	if (env && *env) {
		if (!strcmp(env, "1"))
			allow_emulated = true;
		else if (strcmp(env, "0"))
			return verr_set(err, "VHPC_KVM_ALLOW_EMULATION='%.40s': expected 0 or 1", env);
	}
	hwvirt_detect(&h);
	if (!h.kvm)
		return verr_set(err, "driver kvm: %s; use --driver container (or auto)", h.why);
	if (h.hw)
		return 0;
	if (!allow_emulated)
		return verr_set(err, "driver kvm: %s, so guests would not finish booting; use --driver container "
				"(or auto), or --allow-emulated-kvm to start them anyway (tests)", h.why);
	*emulated = true;
	return 0;
}
