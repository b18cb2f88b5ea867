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
	int *scratch_fd;           /* guest k's scratch disk, for a checkpoint (-1: none, or taken over) */
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
	kj->scratch_fd = calloc((size_t)j->s.nguests, sizeof(int));
	if (!kj->cpu_node || !kj->huge || !kj->pci || !kj->npci || !kj->scratch_fd)
		return verr_set(err, "out of memory");
	for (int k = 0; k < j->s.nguests; k++)
		kj->scratch_fd[k] = -1;
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

/* A fresh guest k, or with r one restored from a checkpoint's files. */
static int start_guest(struct na_job *j, int k, const struct kvm_restore_fds *r, struct verr *err)
{
	struct kvm_job *kj = j->drv_job;
	char name[16], scratch[64], snap[64], config[64];
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
	if (r) {
		/* The config disk the guest had mounted, read-only from the
		 * checkpoint; the snapshot likewise. */
		snprintf(snap, sizeof(snap), "/proc/self/fd/%d", r->snapshot);
		snprintf(config, sizeof(config), "/proc/self/fd/%d", r->config);
		s.restore = snap;
		s.config_disk = config;
	}
	if (j->s.scratch) {
		uint64_t n;

		if (na_kvm_scratch_disk(kj->scratch_dir, j->s.scratch, &sfd, err) < 0)
			return verr_wrap(err, "guest %s", name);
		/* A restored guest's disk is the saved one, copied: the
		 * checkpoint stays as it was, for another restart. */
		if (r && (ftruncate(sfd, 0) < 0 ? verr_errno(err, "emptying it") : na_copy_sparse(r->scratch, sfd, &n, err)) < 0) {
			close(sfd);
			return verr_wrap(err, "guest %s: restoring its scratch disk", name);
		}
		/* Opened again by na_kvm_start, for vhpc-hv: then this
		 * descriptor goes, and the disk lives as long as vhpc-hv. */
		snprintf(scratch, sizeof(scratch), "/proc/self/fd/%d", sfd);
		s.scratch_disk = scratch;
	}
	rc = na_kvm_start(&s, &kvm, err);
	if (rc < 0) {
		if (sfd >= 0)
			close(sfd);
		return verr_wrap(err, "%s guest %s", r ? "restoring" : "starting", name);
	}
	/* Kept for a checkpoint: the disk has no name to open it by again. */
	kj->scratch_fd[k] = sfd;
	j->g[k].priv = kvm;
	return 0;
}

static int start(struct na_job *j, int k, struct verr *err)
{
	return start_guest(j, k, NULL, err);
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
		struct kvm_job *kj = j->drv_job;

		for (int k = 0; kj && kj->scratch_fd && k < j->s.nguests; k++)
			if (kj->scratch_fd[k] >= 0) {
				close(kj->scratch_fd[k]);
				kj->scratch_fd[k] = -1;
			}
	}
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

/* What vhpc-hv cannot carry over, said before anything changes: the
 * rest (a device vhpc-hv cannot save yet) it says itself at save. */
static int ckpt_check(const struct na_job *j, struct verr *err)
{
	const struct kvm_job *kj = j->drv_job;

	if (j->nhb)
		return verr_set(err, "the guests share %d host folder%s (virtio-fs): the state of a guest's mounts "
				"(FUSE node ids, open files) lives in virtiofsd, which cannot save it, so a restored "
				"guest would find them broken", j->nhb, j->nhb > 1 ? "s" : "");
	if (j->s.npci)
		return verr_set(err, "PCI function %s is passed through: its state is in the hardware", j->s.pci[0]);
	/* A job taken over after a vhpcd restart was never prepared here. */
	if (!kj)
		return verr_set(err, "its guests were taken over after the agent restarted: where their config "
				"and scratch disks are is known only to the agent that started them");
	for (int k = 0; k < j->s.nguests; k++)
		if (j->s.scratch && kj->scratch_fd[k] < 0)
			return verr_set(err, "guest g%d was taken over after the agent restarted: its scratch disk "
					"(a file without a name) is held by its vhpc-hv alone and cannot be saved",
					j->g[k].index);
	/* Whether vhpc-hv can save each device is vhpc-hv's to say (the
	 * devices it saves grow), and it must be said before anything pauses. */
	for (int k = 0; k < j->s.nguests; k++)
		if (j->g[k].priv && kvm_snapshot_check(j->g[k].priv, err) < 0)
			return verr_wrap(err, "it cannot be saved");
	return 0;
}

static int pause_guest(struct na_job *j, int k, struct verr *err)
{
	return kvm_pause(j->g[k].priv, true, err);
}

static int resume_guest(struct na_job *j, int k, struct verr *err)
{
	return kvm_pause(j->g[k].priv, false, err);
}

static bool guest_paused(struct na_job *j, int k)
{
	return j->g[k].priv && kvm_paused(j->g[k].priv);
}

static int save(struct na_job *j, int k, int dirfd, struct verr *err)
{
	const struct kvm_job *kj = j->drv_job;
	struct kvm_save_in in = {
		.image_id = j->img.id, .config_disk = kj->config_disk, .scratch_fd = kj->scratch_fd[k],
		.mem = j->s.mem,
	};
	uint64_t bytes;
	double t0 = now_s();

	if (ckpt_check(j, err) < 0)
		return -1;
	if (kvm_save(j->g[k].priv, &in, dirfd, &bytes, err) < 0)
		return verr_wrap(err, "guest g%d", j->g[k].index);
	log_info("guest g%d: saved, %.1f MiB in %.0f ms", j->g[k].index, bytes / 1048576.0, (now_s() - t0) * 1000);
	return 0;
}

/* Started as a fresh guest is (jailed, seccomp'ed, its own new tap), but
 * from the snapshot, and left paused; up once this returns. */
static int restore(struct na_job *j, int k, int dirfd, struct verr *err)
{
	struct kvm_restore_fds r;
	int rc;

	if (kvm_restore_open(dirfd, j->img.id, j->s.scratch > 0, &r, err) < 0)
		return verr_wrap(err, "guest g%d", j->g[k].index);
	rc = start_guest(j, k, &r, err);
	kvm_restore_close(&r);
	if (rc == 0 && (rc = na_kvm_wait_up(j->g[k].priv, err)) < 0 && na_kvm_snapshot_damaged(j->g[k].priv))
		return NA_RESTORE_DAMAGED;
	return rc;
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
	for (int k = 0; kj->scratch_fd && k < j->s.nguests; k++)
		if (kj->scratch_fd[k] >= 0)
			close(kj->scratch_fd[k]);
	free(kj->scratch_fd);
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
	.ckpt_check = ckpt_check,
	.pause = pause_guest,
	.resume = resume_guest,
	.paused = guest_paused,
	.save = save,
	.restore = restore,
};
