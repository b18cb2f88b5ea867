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
#include <unistd.h>

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

const char *na_boot_id(void)
{
	static char id[64];

	if (!id[0]) {
		char *buf = NULL;
		size_t len;
		struct verr e;

		if (read_file("/proc/sys/kernel/random/boot_id", &buf, &len, 64, &e) == 0) {
			buf[strcspn(buf, "\n")] = 0;
			snprintf(id, sizeof(id), "%s", buf);
		} else {
			gethostname(id, sizeof(id) - 1);
		}
		free(buf);
	}
	return id;
}

const char *const *na_guest_env(struct na_guest_env *e, const char *job, int index,
				const char *host_id, int vmshm_slots)
{
	int n = 0;

	e->v[n++] = "PATH=" NA_GUEST_BIN ":/usr/bin:/usr/sbin:/bin:/sbin";
	e->v[n++] = "HOME=/tmp";
	e->v[n++] = "TMPDIR=/tmp";
	e->v[n++] = "VHPC_JOB_KEY=/vhpc/job.key";
	snprintf(e->job, sizeof(e->job), "VHPC_JOB=%s", job);
	e->v[n++] = e->job;
	if (index >= 0) {
		snprintf(e->index, sizeof(e->index), "VHPC_GUEST_INDEX=%d", index);
		e->v[n++] = e->index;
	}
	if (host_id) {
		snprintf(e->host, sizeof(e->host), "VHPC_HOST_ID=%s", host_id);
		snprintf(e->slots, sizeof(e->slots), "VHPC_VMSHM_SLOTS=%d", vmshm_slots);
		e->v[n++] = e->host;
		e->v[n++] = "VHPC_VMSHM_PATH=" NA_VMSHM_GUEST_PATH;
		e->v[n++] = e->slots;
	}
	e->v[n] = NULL;
	return e->v;
}

int na_job_guest_start(const struct na_job_guest *jg, struct na_guest *g, struct verr *err)
{
	char name[16], listen[48], ip[20], hosts[600];
	const char *argv[14] = {
		NA_GUEST_BIN "/vhpc-guestd", "--init", "--name", name, "--listen", listen,
		"--control", "/vhpc/run/ctl.sock", "--key", "/vhpc/job.key", NULL
	};
	struct na_guest_env env;
	struct na_bind binds[5];
	struct na_ctr_spec s = { 0 };
	bool vmshm = jg->vmshm && jg->vmshm[0];

	snprintf(name, sizeof(name), "g%d", jg->index);
	snprintf(listen, sizeof(listen), "%s:%d", ipv4_format(jg->addr, ip, sizeof(ip)), jg->port);
	snprintf(hosts, sizeof(hosts), "%s/hosts", jg->shared_dir);
	binds[0] = (struct na_bind){ jg->shared_dir, "/vhpc", true };
	binds[1] = (struct na_bind){ jg->ctl_dir, "/vhpc/run", false };
	binds[2] = (struct na_bind){ hosts, "/etc/hosts", true };
	s.nbinds = 3;
	if (jg->spool_dir) {
		/* Detached commands (the job's mpirun) write their output here. */
		binds[s.nbinds++] = (struct na_bind){ jg->spool_dir, "/vhpc/spool", false };
		argv[10] = "--spool";
		argv[11] = "/vhpc/spool";
		argv[12] = NULL;
	}
	if (vmshm)
		binds[s.nbinds++] = (struct na_bind){ jg->vmshm, NA_VMSHM_GUEST_PATH, false };
	s.job = jg->job;
	s.index = jg->index;
	s.hostname = name;
	s.rootfs = jg->rootfs;
	s.argv = argv;
	s.env = na_guest_env(&env, jg->job_label, jg->index, vmshm ? jg->host_id : NULL, jg->vmshm_slots);
	s.binds = binds;
	s.netns = jg->netns;
	s.place = jg->place;
	s.mem_limit = jg->mem;
	s.tmpfs_size = jg->mem / 4;
	s.log_path = jg->log_path;
	memset(g, 0, sizeof(*g));
	g->driver = DRIVER_CONTAINER;
	snprintf(g->ctl_sock, sizeof(g->ctl_sock), "%s/ctl.sock", jg->ctl_dir);
	snprintf(g->log, sizeof(g->log), "%s", jg->log_path);
	if (na_ctr_start(&s, &g->ctr, err) < 0)
		return verr_wrap(err, "starting guest %s", name);
	return 0;
}
