/*
 * The container driver (nodeagent/README.md): each guest a runc
 * container with vhpc-guestd as its init, in its own network namespace on
 * the job bridge.  Laid out as both schedulers want it: the job's shared
 * dir read-only at /vhpc, the guest's own control dir (a small tmpfs, so a
 * guest cannot fill the host's /run) at /vhpc/run where guestd makes its
 * socket, /etc/hosts from the shared dir, guest 0's spool at /vhpc/spool
 * when the job has one, the vmshm region when there is one.
 */
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/net/net.h"
#include "nodeagent/job.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_DIR_SIZE (1u << 20)
/* guestd's output: its log lines and what commands it starts without a
 * redirection print; a full folder makes their writes fail, not the host's
 * /run fill up. */
#define OUT_DIR_SIZE (16u << 20)
#define OUT_GUEST_DIR "/vhpc/out"
#define OUT_NAME "guestd.log"

struct ctr_guest {
	struct na_ctr *ctr;
	char dir[512];           /* <job dir>/ctl<index>, a tmpfs */
	char sock[560];          /* guestd's control socket in it */
	char log[512];           /* <job dir>/g<index>.log: runc's output (the guest's before guestd runs) */
	char out[512];           /* <job dir>/out<index>, a tmpfs at /vhpc/out: guestd's output (out.c) */
	char sys[512];           /* <job dir>/sys<index>: a sysfs of the guest's netns */
	bool mounted, sys_mounted, out_mounted;
	uid_t uid;               /* the job's user, who alone may own guestd's output */
};

/* The job's rootfs: the image, or an overlay with the binds' mountpoints;
 * the pod its guests here share when wants_pod. */
struct ctr_job {
	char rootfs[PATH_MAX];
	bool overlay;
	struct na_pod pod;
	bool have_pod;
	bool pod_looked;           /* after a takeover: na_pod_adopt was tried */
};

static struct ctr_job *job_state(struct na_job *j, struct verr *err)
{
	struct ctr_job *cj = j->drv_job;

	if (!cj && (cj = calloc(1, sizeof(*cj))))
		j->drv_job = cj;
	if (!cj)
		verr_set(err, "out of memory");
	return cj;
}

/* Guests that share a vmshm region share a pod, so their ranks can copy
 * large messages once (pod.c), unless the job asked for none
 * (single_copy false): CRIU cannot restore a pod, and without it each
 * guest keeps its own namespaces while still mapping the region (a file
 * bound into each, launch).  The one rule for making, adopting and
 * refusing to checkpoint a pod. */
static bool wants_pod(const struct na_job *j)
{
	return j->s.vmshm && j->s.single_copy && j->s.nguests >= 2;
}

/* A pod's guests get their network namespaces made in its user namespace. */
static int prepare_net(struct na_job *j, struct na_net_req *nr, struct verr *err)
{
	struct ctr_job *cj;

	if (!wants_pod(j))
		return 0;
	if (!(cj = job_state(j, err)))
		return -1;
	if (na_pod_create(j->jd.job, j->s.uid, j->s.gid, &cj->pod, err) < 0)
		return -1;
	cj->have_pod = true;
	nr->guest_netns_owner = cj->pod.pid;
	return 0;
}

static bool single_copy(const struct na_job *j)
{
	const struct ctr_job *cj = j->drv_job;

	return cj && cj->have_pod;
}

/* Where the job's host path i is mounted for runc: runc binds by path,
 * as root, so it gets one of root's, made from the descriptor the user's
 * own lookup opened (nodeagent/binds.c), not the user's path. */
static void bind_at(const struct na_job *j, int i, char *buf, size_t len)
{
	if (i < 0)
		snprintf(buf, len, "%s/binds", j->jd.path);
	else
		snprintf(buf, len, "%s/binds/%d", j->jd.path, i);
}

static int mount_binds(struct na_job *j, struct verr *err)
{
	char at[PATH_MAX];

	if (j->nhb == 0)
		return 0;
	bind_at(j, -1, at, sizeof(at));
	if (mkdir(at, 0700) < 0)
		return verr_errno(err, "mkdir %s", at);
	for (int i = 0; i < j->nhb; i++) {
		bind_at(j, i, at, sizeof(at));
		if (na_binds_mount(&j->hb[i], at, err) < 0)
			return -1;
	}
	return 0;
}

static int prepare(struct na_job *j, struct verr *err)
{
	struct ctr_job *cj = job_state(j, err);
	int rc;

	if (!cj || mount_binds(j, err) < 0)
		return -1;
	rc = na_ctr_rootfs_make(j->jd.path, j->img.rootfs, j->hb, j->nhb, cj->rootfs, sizeof(cj->rootfs), err);
	if (rc < 0)
		return -1;
	cj->overlay = rc > 0;
	return 0;
}

/* Chrooted: no mount of our mount table is at "/" (the table lists only
 * what lies under our root).  Without /proc: not known, so not said. */
static int at_root(const char *mnt, const char *fstype, void *arg)
{
	(void)fstype;
	if (strcmp(mnt, "/"))
		return 0;
	*(bool *)arg = true;
	return -1;
}

static bool chrooted(void)
{
	struct verr e;
	bool root = false;

	return na_each_mount(at_root, &root, &e) == 0 && !root;
}

/* Containers run wherever runc does: the fallback of "auto". */
static bool auto_pick(char *why, size_t len)
{
	(void)len;
	why[0] = '\0';
	return true;
}

static int check(bool allow_emulated, bool *emulated, struct verr *err)
{
	(void)allow_emulated;
	*emulated = false;
	if (!na_runc_path())
		return verr_set(err, "driver container: runc not found ($VHPC_RUNC, /usr/sbin/runc, PATH): install the Debian package runc");
	/* The kernel refuses a new user namespace to a chrooted process, and
	 * guests and their pod each need one.  Said here, at the start: from
	 * runc it comes as "can't get final child's PID from pipe: EOF", and
	 * an admin trying a debootstrap root with chroot would look at sysctls. */
	if (chrooted())
		return verr_set(err, "driver container: this process is in a chroot, where the kernel refuses the "
				     "user namespaces guests need; run vhpc in the machine's own root, or in a "
				     "container or after pivot_root in a mount namespace of its own");
	return 0;
}

static double ready_seconds(const struct na_job *j, double on_hardware)
{
	(void)j;
	return on_hardware;
}

static struct ctr_guest *guest_state(struct na_job *j, int k, struct verr *err)
{
	struct ctr_guest *cg = j->g[k].priv;

	if (cg)
		return cg;
	if (!(cg = calloc(1, sizeof(*cg)))) {
		verr_set(err, "out of memory");
		return NULL;
	}
	na_job_guest_path(j, "ctl", j->g[k].index, cg->dir, sizeof(cg->dir));
	snprintf(cg->sock, sizeof(cg->sock), "%s/ctl.sock", cg->dir);
	snprintf(cg->log, sizeof(cg->log), "%s/g%d.log", j->jd.path, j->g[k].index);
	na_job_guest_path(j, "out", j->g[k].index, cg->out, sizeof(cg->out));
	cg->uid = j->s.uid;
	na_job_guest_path(j, "sys", j->g[k].index, cg->sys, sizeof(cg->sys));
	j->g[k].priv = cg;
	return cg;
}

static int guest_sysfs(struct na_job *j, int k, struct ctr_guest *cg, struct verr *err)
{
	if (na_ctr_sysfs(j->net.guest_netns[k], cg->sys, err) < 0)
		return -1;
	cg->sys_mounted = true;
	return 0;
}

/* A guest's network namespace is its own (made by runc in its user
 * namespace, as CRIU needs) unless it lives in a pod, whose namespaces
 * the agent makes in the pod's, or has a fabric device: fabric.c puts its
 * macvlan and RDMA device in the agent's netns before the guest starts. */
static bool own_netns(const struct na_job *j)
{
	return !single_copy(j) && !j->have_fab;
}

struct netns_arg {
	struct na_job *j;
	int k;
};

static int give_netns(void *arg, int nsfd, struct verr *err)
{
	struct netns_arg *a = arg;

	return na_net_guest_move(&a->j->net, a->k, a->j->tuning, nsfd, err);
}

/* <job dir>/criu<index>: root's, for CRIU's logs (never in the
 * checkpoint, never the guest's). */
static int criu_work(struct na_job *j, int k, char *buf, size_t len, struct verr *err)
{
	na_job_guest_path(j, "criu", j->g[k].index, buf, len);
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "%s", buf);
	return 0;
}

/* A guest's start, or with restore_fd >= 0 its restore from what save
 * wrote there: the same container, the same binds, the same network. */
static int launch(struct na_job *j, int k, int restore_fd, struct verr *err)
{
	char work[PATH_MAX];
	int gi = j->g[k].index;
	char name[16], listen[48], ip[20], hosts[600];
	const char *argv[16] = {
		VHPC_GUEST_BIN "/vhpc-guestd", "--init", "--name", name, "--listen", listen,
		"--control", "/vhpc/run/ctl.sock", "--key", "/vhpc/job.key",
		"--stdio", OUT_GUEST_DIR "/" OUT_NAME, NULL
	};
	struct na_guest_env env;
	struct na_bind binds[6 + BIND_MAX];
	char hpath[BIND_MAX][sizeof(j->jd.path) + 16];
	struct na_ctr_spec s = { 0 };
	struct na_chardev devs[2];
	const struct ctr_job *cj = j->drv_job;
	struct ctr_guest *cg = guest_state(j, k, err);
	bool vmshm = j->vmshm[0] != 0, own = own_netns(j);
	struct netns_arg na = { .j = j, .k = k };

	if (!cg)
		return -1;
	if (na_mount_small_tmpfs(j->jd.job, cg->dir, CTL_DIR_SIZE, err) < 0)
		return -1;
	cg->mounted = true;
	if (na_job_give_user(j, cg->dir, err) < 0)
		return -1;
	/* The output's own tmpfs: a name in it cannot be a hard link to any
	 * file outside, and the guest fills only it. */
	if (na_mount_small_tmpfs(j->jd.job, cg->out, OUT_DIR_SIZE, err) < 0)
		return -1;
	cg->out_mounted = true;
	if (na_job_give_user(j, cg->out, err) < 0 || (!own && guest_sysfs(j, k, cg, err) < 0))
		return -1;
	/* guestd's output file is open in the restored guest: CRIU opens it
	 * again by its path and wants the size it had. */
	if (restore_fd >= 0 && (na_ctr_out_restore(restore_fd, cg->out, cg->uid, j->s.gid, err) < 0 ||
				criu_work(j, k, work, sizeof(work), err) < 0))
		return -1;
	snprintf(name, sizeof(name), "g%d", gi);
	snprintf(listen, sizeof(listen), "%s:%d", ipv4_format(j->net.guest_addr[k], ip, sizeof(ip)), j->s.guest_port);
	snprintf(hosts, sizeof(hosts), "%s/hosts", j->shared);
	binds[0] = (struct na_bind){ .src = j->shared, .dst = "/vhpc", .ro = true };
	binds[1] = (struct na_bind){ .src = cg->dir, .dst = "/vhpc/run", .ro = false };
	binds[2] = (struct na_bind){ .src = hosts, .dst = "/etc/hosts", .ro = true };
	binds[3] = (struct na_bind){ .src = cg->out, .dst = OUT_GUEST_DIR, .ro = false };
	s.nbinds = 4;
	if (gi == 0 && na_job_spool(j)) {
		/* Detached commands (the job's mpirun) write their output here. */
		binds[s.nbinds++] = (struct na_bind){ .src = na_job_spool(j), .dst = "/vhpc/spool", .ro = false };
		argv[12] = "--spool";
		argv[13] = "/vhpc/spool";
		argv[14] = NULL;
	}
	/* Pod or not (wants_pod): the region is a file that every guest here
	 * maps, whatever namespaces it has. */
	if (vmshm)
		binds[s.nbinds++] = (struct na_bind){ .src = j->vmshm, .dst = VHPC_VMSHM_GUEST_PATH, .ro = false };
	for (int i = 0; i < j->nhb && i < BIND_MAX; i++) {
		bind_at(j, i, hpath[i], sizeof(hpath[i]));
		binds[s.nbinds++] = (struct na_bind){ .src = hpath[i], .dst = j->hb[i].dst, .ro = j->hb[i].ro,
						      .host = true, .flags = j->hb[i].flags };
	}
	s.job = j->jd.job;
	s.index = gi;
	s.hostname = name;
	s.rootfs = cj ? cj->rootfs : j->img.rootfs;
	s.argv = argv;
	s.env = na_job_guest_env(j, &env, gi);
	if (cj && cj->have_pod)
		s.pod = cj->pod.pid;
	s.binds = binds;
	s.netns = j->net.guest_netns[k];
	if (own) {
		s.own_netns = give_netns;
		s.own_netns_arg = &na;
	}
	if (restore_fd >= 0) {
		s.restore = true;
		s.restore_fd = restore_fd;
		s.criu_work = work;
	}
	s.place = &j->place[k];
	s.mem_limit = j->s.mem;
	s.tmpfs_size = j->s.mem / 4;
	s.scratch_size = j->s.scratch;
	s.log_path = cg->log;
	s.uid = j->s.uid;
	s.gid = j->s.gid;
	s.sysfs = cg->sys;
	if (j->have_fab && na_ctr_fabric_devices(&j->fab.g[k], devs, &s.ndevices, err) < 0)
		return -1;
	s.devices = devs;
	if (na_ctr_start(&s, &cg->ctr, err) < 0)
		return restore_fd >= 0 ? -1 : verr_wrap(err, "starting guest %s", name);
	return 0;
}

static int start(struct na_job *j, int k, struct verr *err)
{
	return launch(j, k, -1, err);
}

static int same_ns(pid_t a, pid_t b, const char *ns)
{
	char pa[64], pb[64];
	struct stat sa, sb;

	snprintf(pa, sizeof(pa), "/proc/%d/ns/%s", (int)a, ns);
	snprintf(pb, sizeof(pb), "/proc/%d/ns/%s", (int)b, ns);
	if (stat(pa, &sa) < 0 || stat(pb, &sb) < 0)
		return -1;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The pod of a dead agent's job, found once (at its first guest), so that
 * the job's teardown ends it; each guest must live in it. */
static int adopt_pod(struct na_job *j, pid_t init, struct verr *err)
{
	struct ctr_job *cj;
	int rc;

	if (!wants_pod(j))
		return 0;
	if (!(cj = job_state(j, err)))
		return -1;
	if (!cj->pod_looked) {
		cj->pod_looked = true;
		if ((rc = na_pod_adopt(j->jd.job, &cj->pod, err)) < 0)
			return -1;
		cj->have_pod = rc > 0;
		if (cj->have_pod)
			log_info("job %s: its guests' pod is pid %d", j->jd.job, (int)cj->pod.pid);
	}
	if (!cj->have_pod)
		return 0;
	if (same_ns(init, cj->pod.pid, "user") != 1 || same_ns(init, cj->pod.pid, "pid") != 1)
		return verr_set(err, "its init (pid %d) is not in the job's pod (pid %d)", (int)init, (int)cj->pod.pid);
	return 0;
}

static int adopt(struct na_job *j, int k, struct verr *err)
{
	struct ctr_guest *cg = guest_state(j, k, err);

	if (!cg)
		return -1;
	cg->mounted = true;
	cg->sys_mounted = true;
	cg->out_mounted = true;
	if (na_ctr_adopt(j->jd.job, j->g[k].index, &cg->ctr, err) < 0)
		return -1;
	return adopt_pod(j, na_ctr_pid(cg->ctr), err);
}

static bool running(struct na_guest *g, char *why, size_t len)
{
	struct ctr_guest *cg = g->priv;

	if (cg && cg->ctr && na_ctr_running(cg->ctr))
		return true;
	if (why)
		snprintf(why, len, "its init has exited");
	return false;
}

static bool reachable(const struct na_guest *g)
{
	const struct ctr_guest *cg = g->priv;

	return cg && access(cg->sock, F_OK) == 0;
}

static int guest_access(const struct na_guest *g, struct na_guest_access *a, struct verr *err)
{
	const struct ctr_guest *cg = g->priv;

	if (!cg || !cg->ctr || (a->init_pid = na_ctr_pid(cg->ctr)) <= 0)
		return verr_set(err, "guest g%d is not running", g->index);
	snprintf(a->sock, sizeof(a->sock), "%s", cg->sock);
	a->vsock_port = 0;
	return 0;
}

static int connect_agent(struct na_guest *g, struct chan *c, const uint8_t key[CHAN_KEY_LEN], int timeout_ms,
			 struct verr *err)
{
	struct ctr_guest *cg = g->priv;

	if (!cg || !cg->ctr)
		return verr_set(err, "guest g%d was not started", g->index);
	return gexec_connect_unix(c, cg->sock, key, timeout_ms, err);
}

static void log_tail(const struct na_guest *g)
{
	const struct ctr_guest *cg = g->priv;
	char *buf;
	size_t len;
	struct verr e;

	if (!cg)
		return;
	na_log_tail(cg->log, "runc's output for the guest");
	if (!cg->out_mounted)
		return;
	/* The guest's to write: read as out.c allows, or not at all. */
	if (na_ctr_out_tail(cg->out, OUT_NAME, cg->uid, 2000, &buf, &len, &e) < 0)
		log_warn("the guest's agent log: %s", e.msg);
	else if (len)
		log_err("last lines of the guest's agent log:\n%s", buf);
	free(buf);
}

static int stop_all(struct na_job *j, int grace_ms, struct verr *err)
{
	struct na_ctr **cs = calloc((size_t)j->s.nguests + 1, sizeof(*cs));
	int n = 0, rc;

	if (!cs)
		return verr_set(err, "out of memory");
	for (int k = 0; k < j->s.nguests; k++) {
		struct ctr_guest *cg = j->g[k].priv;

		if (cg && cg->ctr) {
			cs[n++] = cg->ctr;
			cg->ctr = NULL;
		}
	}
	/* The caller is the child subreaper of the guests' inits:
	 * na_ctr_stop_all reaps each. */
	rc = n ? na_ctr_stop_all(cs, n, grace_ms, err) : 0;
	free(cs);
	return rc;
}

static void release(struct na_job *j)
{
	struct ctr_job *cj = j->drv_job;

	/* Also after a takeover, which never ran prepare: by its name. */
	if (j->have_jd) {
		char at[PATH_MAX];
		int n = 0;
		struct verr e;

		na_ctr_rootfs_remove(j->jd.path);
		bind_at(j, -1, at, sizeof(at));
		if (na_umount_below(at, &n, &e) < 0)
			log_warn("job %s: %s", j->jd.job, e.msg);
	}
	if (cj && cj->have_pod)
		na_pod_destroy(&cj->pod);
	free(j->drv_job);
	j->drv_job = NULL;
	for (int k = 0; j->g && k < j->s.nguests; k++) {
		struct ctr_guest *cg = j->g[k].priv;

		if (!cg)
			continue;
		if (cg->mounted && umount2(cg->dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			log_warn("cannot unmount %s: %s", cg->dir, strerror(errno));
		if (cg->sys_mounted && umount2(cg->sys, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			log_warn("cannot unmount %s: %s", cg->sys, strerror(errno));
		if (cg->out_mounted && umount2(cg->out, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			log_warn("cannot unmount %s: %s", cg->out, strerror(errno));
		free(cg);
		j->g[k].priv = NULL;
	}
}

/* Checkpoints (ckpt.c). */
static struct na_ctr *guest_ctr(const struct na_job *j, int k, struct verr *err)
{
	struct ctr_guest *cg = j->g[k].priv;

	if (!cg || !cg->ctr)
		verr_set(err, "guest %d has no container here", j->g[k].index);
	return cg ? cg->ctr : NULL;
}

/* The pod is refused first.  runc does save a pod's guests one by one
 * (their PID namespace given to CRIU as external), but CRIU cannot bring
 * them back into a new pod: its restore clones a guest whose image has a
 * user namespace into a new one of its own, never into an existing one,
 * and from there the guest may not join the pod's network and PID
 * namespaces (tried in the lab, 2026-12-07: "Can't setns 15/net:
 * Operation not permitted"; the same in CRIU 4.2's source).  Then CRIU on
 * this host, then each guest's namespaces and its output. */
static int ckpt_check(const struct na_job *j, struct verr *err)
{
	/* The rule, not have_pod: a job taken over may not have looked for
	 * its pod yet. */
	if (wants_pod(j))
		return verr_set(err, "its %d guests here share a pod (one user and PID namespace, for vmshm's "
				"single copy), which CRIU cannot restore: it brings a guest back in a new user "
				"namespace of its own, never in an existing one such as a new pod's; run the job with "
				"--no-single-copy (it keeps vmshm, without the pod) or --no-vmshm and it has no pod",
				j->s.nguests);
	/* The host's reason before the guests': it holds for every job. */
	if (na_ctr_ckpt_probe(err) < 0)
		return -1;
	for (int k = 0; k < j->s.nguests; k++) {
		struct na_ctr *c = guest_ctr(j, k, err);

		if (!c || na_ctr_ckpt_netns(c, err) < 0 || na_ctr_ckpt_stdio(c, err) < 0)
			return -1;
	}
	return 0;
}

static int pause_guest(struct na_job *j, int k, struct verr *err)
{
	struct na_ctr *c = guest_ctr(j, k, err);

	return c ? na_ctr_pause(c, err) : -1;
}

static int resume_guest(struct na_job *j, int k, struct verr *err)
{
	struct na_ctr *c = guest_ctr(j, k, err);

	return c ? na_ctr_resume(c, err) : -1;
}

static bool guest_paused(struct na_job *j, int k)
{
	struct verr e;
	struct na_ctr *c = guest_ctr(j, k, &e);

	return c && na_ctr_paused(c);
}

/* CRIU's images of the guest's processes, its tmpfs mounts (/tmp,
 * /scratch, ...) and its network namespace with its TCP connections, and
 * guestd's output folder, a bind of the host's that CRIU does not save. */
static int save(struct na_job *j, int k, int dirfd, struct verr *err)
{
	struct ctr_guest *cg = j->g[k].priv;
	struct na_ctr *c = guest_ctr(j, k, err);
	char work[PATH_MAX];

	if (!c || criu_work(j, k, work, sizeof(work), err) < 0)
		return -1;
	if (na_ctr_checkpoint(c, dirfd, work, err) < 0)
		return -1;
	return na_ctr_out_save(cg->out, cg->uid, dirfd, err);
}

static int restore(struct na_job *j, int k, int dirfd, struct verr *err)
{
	/* What this host lacks is said before anything is made for the
	 * guest; another node may have it. */
	if (na_ctr_ckpt_probe(err) < 0)
		return verr_wrap(err, "guest g%d", j->g[k].index);
	return launch(j, k, dirfd, err);
}

const struct na_driver na_driver_container = {
	.name = "container",
	.auto_pick = auto_pick,
	.guest_netns = true,
	.host_spool = true,
	.host_paths = true,
	/* CRIU cannot take a socket whose peer is outside the dump. */
	.ckpt_no_sessions = true,
	.check = check,
	.prepare_net = prepare_net,
	.single_copy = single_copy,
	.prepare = prepare,
	.ready_seconds = ready_seconds,
	.start = start,
	.adopt = adopt,
	.running = running,
	.reachable = reachable,
	.connect = connect_agent,
	.access = guest_access,
	.log_tail = log_tail,
	.stop_all = stop_all,
	.release = release,
	.sweep = na_ctr_sweep,
	.ckpt_check = ckpt_check,
	.pause = pause_guest,
	.resume = resume_guest,
	.paused = guest_paused,
	.save = save,
	.restore = restore,
};
