/* The table of guest drivers (drivers.h), and which one a job gets
 * (nodeagent/README.md): by name, or for "auto" the first in the
 * table that says it suits this host. */
#include "lib/drivers.h"
#include "lib/err.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/nodeagent.h"

#include <stdio.h>
#include <string.h>

/* Every driver, in the order "auto" tries them: a new one is its folder
 * (whose driver.c defines na_driver_<name>) plus its two lines here;
 * lib/drivers.h learns its name from the folder. */
extern const struct na_driver na_driver_container;
extern const struct na_driver na_driver_kvm;
static const struct na_driver *const drivers[] = {
	&na_driver_kvm,
	&na_driver_container,
	NULL,
};

static const struct na_driver *find(const char *name)
{
	for (int i = 0; drivers[i]; i++)
		if (!strcmp(drivers[i]->name, name))
			return drivers[i];
	return NULL;
}

/* auto: the first driver whose auto_pick takes this host (and, for a
 * job on the fabric, gives its guests a network namespace to put it in);
 * the words of the last one that did not say why the pick went further. */
static const struct na_driver *pick(bool fabric, char *buf, size_t len)
{
	char last[256] = "", why[256];

	for (int i = 0; drivers[i]; i++) {
		why[0] = '\0';
		if (!drivers[i]->auto_pick)
			continue;
		if (fabric && !drivers[i]->guest_netns) {
			snprintf(last, sizeof(last), "the job uses the RDMA fabric, which %s guests do not get", drivers[i]->name);
			continue;
		}
		if (drivers[i]->auto_pick(why, sizeof(why))) {
			snprintf(buf, len, "auto picked %s: %s", drivers[i]->name, why[0] ? why : last);
			return drivers[i];
		}
		if (why[0])
			snprintf(last, sizeof(last), "%s", why);
	}
	return NULL;
}

const struct na_driver *na_driver_resolve(const char *want, const char **why, struct verr *err)
{
	return na_driver_resolve_for(want, false, why, err);
}

const struct na_driver *na_driver_resolve_for(const char *want, bool fabric, const char **why, struct verr *err)
{
	static __thread char buf[512];
	const struct na_driver *d;
	char host[256] = "";

	*why = buf;
	buf[0] = '\0';
	if (!want || !strcmp(want, vhpc_driver_names[DRIVER_AUTO])) {
		if (!(d = pick(fabric, buf, sizeof(buf))))
			verr_set(err, "driver auto: no driver suits this host");
		return d;
	}
	if (!(d = find(want))) {
		verr_set(err, "driver '%.32s': no such driver (expected " VHPC_DRIVER_CHOICES ")", want);
		return NULL;
	}
	/* Whether it may run here is na_driver_check's to say. */
	if (d->auto_pick)
		d->auto_pick(host, sizeof(host));
	snprintf(buf, sizeof(buf), "%s, as asked%s%s", d->name, host[0] ? ": " : "", host);
	return d;
}

int na_driver_check_with(const struct na_driver *d, bool allow_emulated, bool *emulated, struct verr *err)
{
	*emulated = false;
	return d->check(allow_emulated && d->emulation, emulated, err);
}

int na_driver_check(const struct na_driver *d, struct verr *err)
{
	bool emulated;

	return na_driver_check_with(d, false, &emulated, err);
}

const char *na_driver_name(const struct na_driver *d)
{
	return d ? d->name : "?";
}

int na_drivers_sweep(const char *job, const char *why, int *removed, struct verr *err)
{
	int rc = 0;

	for (int i = 0; drivers[i]; i++) {
		struct verr e;

		if (drivers[i]->sweep && drivers[i]->sweep(job, why, removed, &e) < 0 && rc == 0) {
			*err = e;
			rc = -1;
		}
	}
	return rc;
}
