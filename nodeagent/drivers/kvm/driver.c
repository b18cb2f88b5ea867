/*
 * The kvm driver (nodeagent/README.md, "The kvm driver"): each
 * guest a vhpc-hv process booting the image's kernel, on the job bridge
 * through a tap.  What only VMs need happens here: the minimum memory, the
 * hugepage plan, the vmshm region as a power-of-two BAR, the job's config
 * disk, a scratch disk per guest.
 */
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/jobspec.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "kvm_int.h"
#include "images/images.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/drivers/kvm/kvm.h"
#include "nodeagent/job.h"
#include "nodeagent/place/place.h"

#include "lib/clock.h"
#include "nodeagent/jobdir/jobdir.h"

#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KVM_GUEST_SPOOL "/run/vhpc-spool"

struct kvm_job {
	char config_disk[PATH_MAX];
	char scratch_dir[PATH_MAX]; /* when the job has --scratch */
	int *cpu_node;             /* host node of each placed CPU, VHPC_MAX_VCPUS per guest */
	bool *huge;                /* guest k's RAM in hugepages */
	const char **pci;          /* guest k's PCI functions: NA_KVM_MAX_PCI from k * NA_KVM_MAX_PCI */
	int *npci;
};

static int check(bool allow_emulated, bool *emulated, struct verr *err)
{
	if (na_kvm_host_check(allow_emulated, emulated, err) < 0)
		return -1;
	if (*emulated)
		log_warn("driver kvm on a software-only KVM (--allow-emulated-kvm): the guests start, "
			 "but under instruction emulation they will not finish booting; their consoles show how far they get");
	return 0;
}

static int check_job(const struct na_job *j, struct verr *err)
{
	if (j->s.mem < NA_KVM_MIN_MEM || j->s.mem % (1u << 20))
		return verr_set(err, "--mem %llu MiB: a kvm guest needs whole MiB, at least %llu MiB (kernel, initramfs, tmpfs)",
				(unsigned long long)(j->s.mem >> 20), (unsigned long long)(NA_KVM_MIN_MEM >> 20));
	return 0;
}

/* Deadlines scale with how much slower than hardware VMs start here. */
static double ready_seconds(const struct na_job *j, double on_hardware)
{
	(void)j;
	return on_hardware * na_kvm_time_scale();
}

/* Guest k's functions, in the order the job gave them. */
static int pci_of_guests(const struct na_job *j, struct kvm_job *kj, struct verr *err)
{
	for (int i = 0; i < j->s.npci; i++) {
		int k = j->s.pci_guest ? j->s.pci_guest[i] : -1;
		const char *a = j->s.pci[i];

		if (k < 0 || k >= j->s.nguests)
			return verr_set(err, "PCI function %.40s: guest %d is not one of this node's %d", a, k, j->s.nguests);
		if (!kvm_vfio_addr_ok(a))
			return verr_set(err, "'%.40s' is not a PCI address (DDDD:BB:DD.F, lower-case hex)", a);
		for (int o = 0; o < i; o++)
			if (!strcmp(j->s.pci[o], a))
				return verr_set(err, "PCI function %s is given twice", a);
		if (kj->npci[k] == NA_KVM_MAX_PCI)
			return verr_set(err, "guest %d: more than %d PCI functions", k, NA_KVM_MAX_PCI);
		kj->pci[k * NA_KVM_MAX_PCI + kj->npci[k]++] = a;
	}
	return 0;
}

static void place_near(struct na_job *j, struct kvm_job *kj, int k, int node)
{
	int o = kvm_vfio_place_near(j->place, kj->cpu_node, kj->npci, j->s.nguests, k, node);

	if (o >= 0)
		log_info("guest g%d: placed on NUMA node %d with its PCI function (traded places with g%d)",
			 j->g[k].index, node, j->g[o].index);
	else if (node >= 0 && j->place[k].mems[0] != node)
		log_warn("guest g%d: its PCI function is on NUMA node %d, the guest on node %d (no room there)",
			 j->g[k].index, node, j->place[k].mems[0]);
}

/* Every function checked before any is moved; each recorded before it is. */
static int claim_pci(struct na_job *j, struct kvm_job *kj, struct verr *err)
{
	double t0;

	if (pci_of_guests(j, kj, err) < 0)
		return -1;
	for (int k = 0; k < j->s.nguests; k++) {
		const char *const *mine = kj->pci + k * NA_KVM_MAX_PCI;

		for (int i = 0; i < kj->npci[k]; i++) {
			int node;

			if (kvm_vfio_check(mine[i], j->s.fabric_node, mine, kj->npci[k], &node, err) < 0)
				return -1;
			if (i == 0)
				place_near(j, kj, k, node);
		}
	}
	t0 = now_s();
	for (int i = 0; i < j->s.npci; i++)
		if (kvm_vfio_bind(j->jd.job, j->s.pci[i], err) < 0)
			return -1;
	if (j->s.npci)
		log_info("job %s: %d PCI function%s moved to vfio-pci in %.1f ms", j->jd.job, j->s.npci,
			 j->s.npci > 1 ? "s" : "", (now_s() - t0) * 1000);
	return 0;
}

static int prepare(struct na_job *j, struct verr *err)
{
	struct na_numa_info nodes[VHPC_MAX_NODES];
	struct kvm_job *kj = calloc(1, sizeof(*kj));
	struct na_guest_env env;
	int nn = na_topo_numa(j->s.topo, nodes, VHPC_MAX_NODES);

	if (!kj)
		return verr_set(err, "out of memory");
	j->drv_job = kj;
	kj->cpu_node = calloc((size_t)j->s.nguests * VHPC_MAX_VCPUS, sizeof(int));
	kj->huge = calloc((size_t)j->s.nguests, sizeof(bool));
	kj->pci = calloc((size_t)j->s.nguests * NA_KVM_MAX_PCI, sizeof(*kj->pci));
	kj->npci = calloc((size_t)j->s.nguests, sizeof(int));
	if (!kj->cpu_node || !kj->huge || !kj->pci || !kj->npci)
		return verr_set(err, "out of memory");
	for (int k = 0; k < j->s.nguests; k++)
		if (na_topo_cpu_nodes(j->s.topo, &j->place[k], kj->cpu_node + (size_t)k * VHPC_MAX_VCPUS, err) < 0)
			return -1;
	if (claim_pci(j, kj, err) < 0)
		return -1;
	na_kvm_plan_hugepages(nodes, nn < VHPC_MAX_NODES ? nn : VHPC_MAX_NODES, j->place, j->s.nguests, j->s.mem, kj->huge);
	/* A VM sees the region as a PCI BAR: a power of two. */
	if (j->vmshm[0] && na_kvm_vmshm_fit(j->vmshm, &j->vmshm_size, err) < 0)
		return -1;
	if (j->s.scratch && na_kvm_scratch_dir(kj->scratch_dir, sizeof(kj->scratch_dir), err) < 0)
		return -1;
	if (j->nhb > NA_KVM_MAX_FS)
		return verr_set(err, "%d host paths: a kvm guest takes at most %d (one virtio-fs device each)",
				j->nhb, NA_KVM_MAX_FS);
	{
		/* Where the guest's init mounts each shared folder. */
		char path[PATH_MAX], *text;
		int rc;

		snprintf(path, sizeof(path), "%s/fs", j->shared);
		if (na_kvm_fs_text(j->hb, j->nhb, &text, err) < 0)
			return -1;
		rc = write_file(path, text, strlen(text), 0644, err);
		free(text);
		if (rc < 0)
			return -1;
	}
	/* What vhpc-guestd starts with (the guest's init adds its index). */
	na_job_guest_env(j, &env, -1);
	return na_kvm_config_disk(&j->jd, j->shared, env.v, j->tuning, kj->config_disk,
				  sizeof(kj->config_disk), err);
}

static const char *placement_note(const struct na_job *j, int k)
{
	const struct kvm_job *kj = j->drv_job;

	return kj && kj->huge[k] ? " in hugepages" : "";
}

static int start(struct na_job *j, int k, struct verr *err)
{
	struct kvm_job *kj = j->drv_job;
	char name[16], scratch[64];
	int sfd = -1, rc;
	struct na_kvm_spec s = {
		.job = j->jd.job, .index = j->g[k].index, .name = name, .img = &j->img, .place = &j->place[k],
		.cpu_node = kj->cpu_node + (size_t)k * VHPC_MAX_VCPUS, .mem = j->s.mem, .hugepages = kj->huge[k],
		.addr = j->net.guest_addr[k], .prefix = j->net.prefix, .mtu = j->net.mtu,
		.guest_port = j->s.guest_port, .config_disk = kj->config_disk,
		.vmshm = j->vmshm[0] ? j->vmshm : NULL, .emulated = j->emulated,
		.uid = j->s.uid, .gid = j->s.gid, .fs = j->hb, .nfs = j->nhb,
		.vhost_net = !j->tuning || j->tuning->vhost_net,
		.pci = kj->pci + (size_t)k * NA_KVM_MAX_PCI, .npci = kj->npci[k],
	};
	struct na_kvm *kvm;

	snprintf(name, sizeof(name), "g%d", j->g[k].index);
	/* Detached commands write inside the VM; the agent reads their
	 * output over the guest channel (gexec_output). */
	if (j->g[k].index == 0 && j->s.spool_size)
		s.spool = KVM_GUEST_SPOOL;
	if (j->s.scratch) {
		if (na_kvm_scratch_disk(kj->scratch_dir, j->s.scratch, &sfd, err) < 0)
			return verr_wrap(err, "guest %s", name);
		/* Opened again by na_kvm_start, for vhpc-hv: then this
		 * descriptor goes, and the disk lives as long as vhpc-hv. */
		snprintf(scratch, sizeof(scratch), "/proc/self/fd/%d", sfd);
		s.scratch_disk = scratch;
	}
	rc = na_kvm_start(&s, &kvm, err);
	if (sfd >= 0)
		close(sfd);
	if (rc < 0)
		return verr_wrap(err, "starting guest %s", name);
	j->g[k].priv = kvm;
	return 0;
}

static int wait_started(struct na_job *j, int k, struct verr *err)
{
	return na_kvm_wait_up(j->g[k].priv, err);
}

static void started(const struct na_job *j)
{
	log_info("job %s: guest consoles in %s/kvm*/hv/serial", j->jd.job, j->jd.path);
}

static int adopt(struct na_job *j, int k, struct verr *err)
{
	char name[16];
	struct na_kvm *kvm;

	snprintf(name, sizeof(name), "g%d", j->g[k].index);
	if (na_kvm_adopt(j->jd.job, j->g[k].index, name, j->s.guest_port, &kvm, err) < 0)
		return -1;
	j->g[k].priv = kvm;
	log_info("guest %s: vhpc-hv pid %d taken over", name, (int)na_kvm_pid(kvm));
	return 0;
}

static bool running(struct na_guest *g, char *why, size_t len)
{
	if (g->priv)
		return na_kvm_running(g->priv, why, len);
	if (why)
		snprintf(why, len, "vhpc-hv was not started");
	return false;
}

/* vhpc-hv's vsock socket exists once it is up. */
static bool reachable(const struct na_guest *g)
{
	return g->priv && na_kvm_is_up(g->priv);
}

static int guest_access(const struct na_guest *g, struct na_guest_access *a, struct verr *err)
{
	if (!g->priv)
		return verr_set(err, "guest g%d was not started", g->index);
	snprintf(a->sock, sizeof(a->sock), "%s", na_kvm_vsock(g->priv, &a->vsock_port));
	a->init_pid = 0;
	return 0;
}

static int connect_agent(struct na_guest *g, struct chan *c, const uint8_t key[CHAN_KEY_LEN], int timeout_ms,
			 struct verr *err)
{
	if (!g->priv)
		return verr_set(err, "guest g%d was not started", g->index);
	return na_kvm_connect(g->priv, c, key, timeout_ms, err);
}

static void log_tail(const struct na_guest *g)
{
	if (!g->priv)
		return;
	na_log_tail(na_kvm_serial(g->priv), "the guest's console");
	na_log_tail(na_kvm_hvlog(g->priv), "vhpc-hv's log");
}

static int stop_all(struct na_job *j, int grace_ms, struct verr *err)
{
	struct na_kvm **ks = calloc((size_t)j->s.nguests + 1, sizeof(*ks));
	int n = 0, rc;

	if (!ks)
		return verr_set(err, "out of memory");
	for (int k = 0; k < j->s.nguests; k++)
		if (j->g[k].priv) {
			ks[n++] = j->g[k].priv;
			j->g[k].priv = NULL;
		}
	rc = n ? na_kvm_stop_all(ks, n, grace_ms, err) : 0;
	free(ks);
	{
		/* With every vhpc-hv gone, the functions are free to go back. */
		int back = 0;
		struct verr e;

		if (kvm_vfio_release(j->jd.job, "teardown", &back, &e) < 0 && rc == 0) {
			*err = e;
			rc = -1;
		}
	}
	return rc;
}

/* After a crash: vhpc-hv must be gone before vfio-pci lets a function go
 * (unbinding waits for its descriptors), so the job's guests' cgroups are
 * emptied first; then every recorded function goes back. */
static int sweep(const char *job, const char *why, int *removed, struct verr *err)
{
	char rec[PATH_MAX + 16], rel[64];
	struct stat st;
	int n = 0;

	na_job_path(job, rec, sizeof(rec));
	strncat(rec, "/vfio", sizeof(rec) - strlen(rec) - 1);
	if (lstat(rec, &st) < 0)
		return 0;
	snprintf(rel, sizeof(rel), "vhpc/%s", job);
	if (na_cgroup_remove(rel, true, &n, err) < 0)
		return -1;
	return kvm_vfio_release(job, why, removed, err);
}

static void release(struct na_job *j)
{
	struct kvm_job *kj = j->drv_job;

	if (!kj)
		return;
	free(kj->cpu_node);
	free(kj->huge);
	free(kj->pci);
	free(kj->npci);
	free(kj);
	j->drv_job = NULL;
}

const struct na_driver na_driver_kvm = {
	.name = "kvm",
	.auto_pick = na_kvm_auto_pick,
	.image_flags = IMAGE_KVM,
	.emulation = true,
	.host_paths = true,
	.check = check,
	.check_job = check_job,
	.ready_seconds = ready_seconds,
	.prepare = prepare,
	.placement_note = placement_note,
	.start = start,
	.wait_started = wait_started,
	.started = started,
	.adopt = adopt,
	.running = running,
	.reachable = reachable,
	.connect = connect_agent,
	.access = guest_access,
	.log_tail = log_tail,
	.stop_all = stop_all,
	.release = release,
	.sweep = sweep,
};
