/* Which guest driver a job gets (DESIGN.md "Guest drivers"). */
#include "na.h"

#include <stdio.h>

/* The kvm driver (vhpc-hv under the agent) arrives in a later issue. */
static const bool kvm_driver_built = false;

/* Why kvm cannot run here, or NULL when it can. */
static const char *kvm_unusable(const struct hwvirt *h, char *buf, size_t len)
{
	if (!h->hw) {
		snprintf(buf, len, "%s; use --driver container (or auto)", h->why);
		return buf;
	}
	if (!kvm_driver_built) {
		snprintf(buf, len, "%s, but the kvm driver is not built yet; use --driver container (or auto)", h->why);
		return buf;
	}
	return NULL;
}

enum vhpc_driver na_driver_resolve(enum vhpc_driver want, const char **why)
{
	static __thread char buf[512];
	struct hwvirt h;

	hwvirt_detect(&h);
	*why = buf;
	switch (want) {
	case DRIVER_AUTO:
		if (!kvm_unusable(&h, buf, sizeof(buf))) {
			snprintf(buf, sizeof(buf), "auto picked kvm: %s", h.why);
			return DRIVER_KVM;
		}
		if (h.hw)
			snprintf(buf, sizeof(buf), "auto picked container: %s, but the kvm driver is not built yet", h.why);
		else
			snprintf(buf, sizeof(buf), "auto picked container: %s", h.why);
		return DRIVER_CONTAINER;
	case DRIVER_KVM:
		if (!kvm_unusable(&h, buf, sizeof(buf)))
			snprintf(buf, sizeof(buf), "kvm, as asked: %s", h.why);
		return DRIVER_KVM;
	case DRIVER_CONTAINER:
	default:
		snprintf(buf, sizeof(buf), "container, as asked");
		return DRIVER_CONTAINER;
	}
}

int na_driver_check(enum vhpc_driver d, struct verr *err)
{
	struct hwvirt h;
	char buf[512];

	switch (d) {
	case DRIVER_CONTAINER:
		if (!na_runc_path())
			return verr_set(err, "driver container: runc not found ($VHPC_RUNC, /usr/sbin/runc, PATH): install the Debian package runc");
		return 0;
	case DRIVER_KVM:
		hwvirt_detect(&h);
		if (kvm_unusable(&h, buf, sizeof(buf)))
			return verr_set(err, "driver kvm: %s", buf);
		return 0;
	default:
		return verr_set(err, "driver %d: resolve 'auto' first (na_driver_resolve)", (int)d);
	}
}
