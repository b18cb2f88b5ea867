/*
 * A guest of either driver behind one handle, so the scheduler's job flow
 * (start, wait for the agent, run, stop) does not care which it is: the
 * container's guestd answers on a control socket in a bind-mounted dir,
 * the kvm guest's over vsock through vhpc-hv's bridge.
 */
#include "na.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool na_guest_started(const struct na_guest *g)
{
	return g->driver == DRIVER_KVM ? g->kvm != NULL : g->ctr != NULL;
}

bool na_guest_running(struct na_guest *g, char *why, size_t len)
{
	if (g->driver == DRIVER_KVM)
		return g->kvm && na_kvm_running(g->kvm, why, len);
	if (g->ctr && na_ctr_running(g->ctr))
		return true;
	if (why)
		snprintf(why, len, "its init has exited");
	return false;
}

int na_guest_connect(struct na_guest *g, struct chan *c, const uint8_t key[CHAN_KEY_LEN],
		     int timeout_ms, struct verr *err)
{
	if (!na_guest_started(g))
		return verr_set(err, "the guest was not started");
	if (g->driver == DRIVER_KVM)
		return na_kvm_connect(g->kvm, c, key, timeout_ms, err);
	return gexec_connect_unix(c, g->ctl_sock, key, timeout_ms, err);
}

const char *na_guest_log(const struct na_guest *g)
{
	if (g->driver == DRIVER_KVM)
		return g->kvm ? na_kvm_serial(g->kvm) : "";
	return g->log;
}

int na_guest_stop_all(struct na_guest *gs, int n, int grace_ms, struct verr *err)
{
	struct na_ctr **cs = calloc((size_t)n + 1, sizeof(*cs));
	struct na_kvm **ks = calloc((size_t)n + 1, sizeof(*ks));
	int nc = 0, nk = 0, rc = 0;
	struct verr e;

	if (!cs || !ks) {
		free(cs);
		free(ks);
		return verr_set(err, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		if (gs[i].ctr)
			cs[nc++] = gs[i].ctr;
		if (gs[i].kvm)
			ks[nk++] = gs[i].kvm;
		gs[i].ctr = NULL;
		gs[i].kvm = NULL;
	}
	if (nc && na_ctr_stop_all(cs, nc, grace_ms, &e) < 0) {
		*err = e;
		rc = -1;
	}
	if (nk && na_kvm_stop_all(ks, nk, grace_ms, &e) < 0 && rc == 0) {
		*err = e;
		rc = -1;
	}
	free(cs);
	free(ks);
	return rc;
}
