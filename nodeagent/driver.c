/* Which guest driver a job gets (DESIGN.md "Guest drivers"). */
#include "na.h"

#include <stdio.h>

/* The kvm driver (vhpc-hv under the agent) arrives in a later issue. */
static const bool kvm_driver_built = false;

int na_driver_resolve(enum vhpc_driver want, enum vhpc_driver *got,
		      char *why, size_t whylen, struct verr *err)
{
	struct hwvirt h;

	hwvirt_detect(&h);
	switch (want) {
	case DRIVER_AUTO:
		if (h.hw && kvm_driver_built) {
			*got = DRIVER_KVM;
			snprintf(why, whylen, "auto picked kvm: %s", h.why);
			return 0;
		}
		if (!na_runc_path())
			return verr_set(err, "driver auto: no usable driver: %s, and runc (for the container driver) is not installed",
					h.hw ? "the kvm driver is not built yet" : h.why);
		*got = DRIVER_CONTAINER;
		if (h.hw)
			snprintf(why, whylen, "auto picked container: %s, but the kvm driver is not built yet", h.why);
		else
			snprintf(why, whylen, "auto picked container: %s", h.why);
		return 0;
	case DRIVER_CONTAINER:
		if (!na_runc_path())
			return verr_set(err, "driver container: runc not found ($VHPC_RUNC, /usr/sbin/runc, PATH): install the Debian package runc");
		*got = DRIVER_CONTAINER;
		snprintf(why, whylen, "container driver, as asked");
		return 0;
	case DRIVER_KVM:
		if (!h.hw)
			return verr_set(err, "driver kvm: %s; use --driver container (or auto)", h.why);
		if (!kvm_driver_built)
			return verr_set(err, "driver kvm: %s, but the kvm driver is not built yet; use --driver container (or auto)", h.why);
		*got = DRIVER_KVM;
		snprintf(why, whylen, "kvm driver, as asked: %s", h.why);
		return 0;
	}
	return verr_set(err, "unknown driver %d", (int)want);
}
