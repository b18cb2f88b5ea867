/* Which guest driver a job gets (DESIGN.md "Guest drivers"), and the
 * table of drivers (drivers.h). */
#include "lib/err.h"
#include "lib/hwvirt.h"
#include "lib/jobspec.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/nodeagent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why kvm cannot run here, or NULL when it can. */
static const char *kvm_unusable(const struct hwvirt *h, char *buf, size_t len)
{
	if (!h->hw) {
		snprintf(buf, len, "%s; use --driver container (or auto)", h->why);
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
		snprintf(buf, sizeof(buf), "auto picked container: %s", h.why);
		return DRIVER_CONTAINER;
	case DRIVER_KVM:
		/* Whether it may run here is na_driver_check's to say. */
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
	const struct na_driver *drv = na_driver_get(d);
	bool emulated;

	if (!drv)
		return verr_set(err, "driver %d: resolve 'auto' first (na_driver_resolve)", (int)d);
	return drv->check(false, &emulated, err);
}

int na_driver_check_kvm(bool allow_emulated, bool *emulated, struct verr *err)
{
	const char *env = getenv("VHPC_KVM_ALLOW_EMULATION");
	struct hwvirt h;
	char buf[512];

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
	if (!kvm_unusable(&h, buf, sizeof(buf)))
		return 0;
	if (!allow_emulated)
		return verr_set(err, "driver kvm: %s, so guests would not finish booting; use --driver container "
				"(or auto), or --allow-emulated-kvm to start them anyway (tests)", h.why);
	*emulated = true;
	return 0;
}

/* Every driver, by its enum vhpc_driver: a new one is its file plus a line here. */
static const struct na_driver *const drivers[] = {
	[DRIVER_CONTAINER] = &na_driver_container,
	[DRIVER_KVM] = &na_driver_kvm,
};

const struct na_driver *na_driver_get(enum vhpc_driver d)
{
	if ((int)d < 0 || (size_t)d >= sizeof(drivers) / sizeof(drivers[0]))
		return NULL;
	return drivers[d];
}

const char *na_driver_name(const struct na_driver *d)
{
	return d ? d->name : "?";
}

int na_drivers_sweep(const char *job, const char *why, int *removed, struct verr *err)
{
	int rc = 0;

	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
		struct verr e;

		if (drivers[i] && drivers[i]->sweep && drivers[i]->sweep(job, why, removed, &e) < 0 && rc == 0) {
			*err = e;
			rc = -1;
		}
	}
	return rc;
}
