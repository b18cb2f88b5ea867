/*
 * One job's part on this node, the same for `vhpc run` (a whole job on one
 * machine) and vhpcd (its share of a cluster job): the order in which its
 * resources are made, waited for and removed.  Driver-specific steps are
 * the driver's (drivers.h).
 */
#include "lib/bytes.h"
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/gexec.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "lib/vmshm/vmshm_copyprobe.h"
#include "images/images.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"
#include "nodeagent/job.h"
#include "nodeagent/place/place.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int cancelled(const struct na_job *j, struct verr *err)
{
	return j->s.cancelled ? j->s.cancelled(j->s.cancel_arg, err) : 0;
}

static int guest_index(const struct na_job *j, int k)
{
	return j->s.index ? j->s.index[k] : k;
}

/* Resolves and checks s's driver and the job's own settings, before
 * anything is made: a job this host cannot run fails in a moment. */
static int resolve(struct na_job *j, const struct na_job_spec *s, struct verr *err)
{
	const char *why = "", *rt = getenv("VHPC_READY_TIMEOUT");
	long long v = NA_READY_TIMEOUT_S;

	if (!(j->drv = na_driver_resolve_for(s->driver, s->rdma, &why, err)))
		return -1;
	snprintf(j->drv_why, sizeof(j->drv_why), "%s", why);
	/* The fabric lives in a guest's network namespace (make_fabric). */
	j->no_fabric = s->rdma && !j->drv->guest_netns;
	if (j->no_fabric && s->rdma_asked)
		return verr_set(err, "--rdma: driver %s cannot give its guests the RDMA fabric (only container guests can, "
				"through their network namespace; kvm guests reach it through a function passed through "
				"with --device)", j->drv->name);
	/* Only `vhpc run` lets a job start on an emulated KVM. */
	if (s->allow_emulated && !j->drv->emulation)
		return verr_set(err, "--allow-emulated-kvm applies to --driver kvm only (%s)", j->drv_why);
	if (na_driver_check_with(j->drv, s->allow_emulated, &j->emulated, err) < 0)
		return -1;
	if (rt && *rt && parse_ll(rt, 1, 3600, &v) < 0)
		return verr_set(err, "VHPC_READY_TIMEOUT='%s': give whole seconds from 1 to 3600", rt);
	j->ready_s = (int)v;
	return 0;
}

static int job_open(struct na_job *j, const char *job, struct verr *err)
{
	if (na_jobdir_create(&j->jd, job, err) < 0)
		return -1;
	j->have_jd = true;
	return 0;
}

static int copy_spec(struct na_job *j, const struct na_job_spec *s, struct verr *err)
{
	if (s->nguests < 1 || s->nguests > VHPC_MAX_GUESTS || s->ntotal < s->nguests || !s->ranks)
		return verr_set(err, "%d guests here of %d: expected 1..%d here", s->nguests, s->ntotal, VHPC_MAX_GUESTS);
	for (int k = 0; s->index && k < s->nguests; k++)
		if (s->index[k] < 0 || s->index[k] >= s->ntotal)
			return verr_set(err, "guest index %d outside the job's %d guests", s->index[k], s->ntotal);
	j->s = *s;
	if (j->no_fabric) {
		/* Not asked for: the job runs over TCP, as it would on a
		 * node without the fabric. */
		j->s.rdma = false;
		log_info("driver %s gives its guests no RDMA fabric: the job runs over TCP (--rdma with container guests has it)",
			 j->drv->name);
	}
	j->vmshm_slots = 0;
	for (int i = 0; i < s->ntotal; i++)
		j->vmshm_slots += s->ranks[i];
	j->place = calloc((size_t)s->nguests, sizeof(*j->place));
	j->g = calloc((size_t)s->nguests, sizeof(*j->g));
	if (!j->place || !j->g)
		return verr_set(err, "out of memory");
	for (int k = 0; k < s->nguests; k++) {
		j->g[k].drv = j->drv;
		j->g[k].index = guest_index(j, k);
	}
	return 0;
}

/* The job key, /etc/hosts and the Open MPI hostfile of the whole job, read
 * by every guest at /vhpc; the key is the same on every node (guest 0's
 * vhpc-rsh reaches every guest's agent with it). */
/* A guest of another user than root sets itself up inside a user namespace
 * whose root is that user, so the paths its runtime opens from there (the
 * bundle's rootfs) must be reachable by that user: the jobs dir can be
 * passed through by anyone (not listed), a job's dir by its user's group
 * only. */
static int open_to_user(struct na_job *j, struct verr *err)
{
	char jobs[512];

	if (j->s.uid == 0)
		return 0;
	if (chmod(vhpc_run_dir(), 0711) < 0 || chmod(na_jobs_dir(jobs, sizeof(jobs)), 0711) < 0)
		return verr_errno(err, "chmod 0711 %s and %s", vhpc_run_dir(), jobs);
	if (chown(j->jd.path, 0, j->s.gid) < 0 || chmod(j->jd.path, 0710) < 0)
		return verr_errno(err, "opening %s to the job's group %u", j->jd.path, (unsigned)j->s.gid);
	return 0;
}

static int write_shared(struct na_job *j, struct verr *err)
{
	char path[700], hex[2 * CHAN_KEY_LEN + 2], *hosts = NULL, *hostfile = NULL;
	uint32_t *addrs = calloc((size_t)j->s.ntotal, sizeof(uint32_t));
	int rc = -1;

	if (!addrs)
		return verr_set(err, "out of memory");
	snprintf(j->shared, sizeof(j->shared), "%s/shared", j->jd.path);
	/* Mount points of the guests' own binds below /vhpc (read-only there). */
	snprintf(path, sizeof(path), "%s/run", j->shared);
	if (mkdir_p(path, 0755, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/spool", j->shared);
	if (mkdir_p(path, 0755, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/out", j->shared);
	if (mkdir_p(path, 0755, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/job.key", j->shared);
	hex_encode(j->s.key, CHAN_KEY_LEN, hex);
	strcat(hex, "\n");
	if (write_file_atomic(path, hex, strlen(hex), 0600, err) < 0 || na_job_give_user(j, path, err) < 0)
		goto out;
	for (int i = 0; i < j->s.ntotal; i++)
		addrs[i] = j->s.subnet.addr + 2 + (uint32_t)i;
	hosts = job_hosts_text(addrs, j->s.ntotal);
	hostfile = job_hostfile_text(j->s.ranks, j->s.ntotal);
	if (!hosts || !hostfile) {
		verr_set(err, "out of memory");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/hosts", j->shared);
	if (write_file(path, hosts, strlen(hosts), 0644, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/hostfile", j->shared);
	rc = write_file(path, hostfile, strlen(hostfile), 0644, err);
out:
	memset(hex, 0, sizeof(hex));
	free(addrs);
	free(hosts);
	free(hostfile);
	return rc;
}

/* The job's fabric (s.rdma): each guest's interface and RDMA device, in
 * the guest's network namespace, which only drivers with one have. */
static int make_fabric(struct na_job *j, struct verr *err)
{
	struct na_fabric_req fr = {
		.job = j->jd.job, .link = j->s.fabric_link, .vlan = j->s.fabric_vlan, .pkey = j->s.fabric_pkey,
		.subnet = j->s.fabric_subnet, .nguests = j->s.nguests, .index = j->s.index,
		.guest_netns = (const char (*)[64])j->net.guest_netns,
	};
	int rc;

	if (!j->s.rdma)
		return 0;
	j->have_fab = true;
	rc = na_fabric_create(&fr, &j->fab, err);
	if (rc == 0)
		for (int k = 0; k < j->s.nguests; k++)
			log_info("  g%d: fabric %s on VLAN %d of %s, RDMA device %s (%s)", j->fab.g[k].index,
				 ipv4_format(j->fab.g[k].addr, (char[20]){ 0 }, 20), j->s.fabric_vlan, j->s.fabric_link,
				 j->fab.g[k].rdma_dev, j->fab.g[k].uverbs);
	return rc;
}

static int make_net(struct na_job *j, struct verr *err)
{
	struct na_net_req nr = {
		.job = j->jd.job, .subnet = j->s.subnet, .nguests = j->s.nguests, .tuning = j->tuning,
		.index = j->s.index, .vni = j->s.vni, .underlay = j->s.underlay,
		.peers = j->s.peers, .npeers = j->s.npeers, .no_guest_netns = !j->drv->guest_netns,
		.ntotal = j->s.ntotal, .guest_node = j->s.guest_node, .wg = j->s.wg,
		/* Up at job_resume, once every guest of the job is back. */
		.ports_down = j->s.restore,
	};

	if (j->drv->prepare_net && j->drv->prepare_net(j, &nr, err) < 0)
		return -1;
	if (na_net_create(&nr, &j->net, err) < 0)
		return -1;
	j->have_net = true;
	return make_fabric(j, err);
}

static void log_placement(const struct na_job *j)
{
	for (int k = 0; k < j->s.nguests; k++) {
		char cpus[256];
		int r = j->s.ranks[j->g[k].index];

		log_info("  g%d: cpus %s, memory on node %d%s, %d rank%s", j->g[k].index,
			 cpulist_format(j->place[k].cpus, j->place[k].ncpus, cpus, sizeof(cpus)),
			 j->place[k].nmems ? j->place[k].mems[0] : 0,
			 j->drv->placement_note ? j->drv->placement_note(j, k) : "", r, r == 1 ? "" : "s");
	}
}

/* Before anything is made for the guests: a missing or unreadable path
 * fails the start with its name. */
static int check_binds(struct na_job *j, struct verr *err)
{
	const struct bind_list *l = j->s.binds;

	j->s.binds = NULL;
	if (!l || l->n == 0)
		return 0;
	if (!j->drv->host_paths)
		return verr_set(err, "driver %s cannot share host paths with its guests yet (%s and %d more)",
				j->drv->name, l->v[0].src, l->n - 1);
	if (!(j->hb = calloc((size_t)l->n, sizeof(*j->hb))))
		return verr_set(err, "out of memory");
	if (na_binds_check(l, j->s.uid, j->s.gid, j->hb, err) < 0)
		return -1;
	j->nhb = l->n;
	return 0;
}

/* Whether this image may start guests here: the node's own cluster file
 * says (images: require_signed, trusted_keys), whoever asks for the job,
 * and the signatures are checked here, against the id of the image the
 * guests start from (images/sign.c). */
static int check_signed(const struct na_job *j, const struct na_job_spec *s, struct verr *err)
{
	const struct cluster_images *p = s->image_policy;
	struct cluster_cfg cl;
	uint64_t t0 = now_ns();
	int r;

	if (!p) {
		if (cluster_load(NULL, &cl, err) < 0)
			return verr_wrap(err, "image %s: this node's cluster file, which says whether it must be signed",
					 j->img.name);
		p = &cl.images;
	}
	r = image_sig_require(&j->img, p, err);
	/* The cost at every start (images/README.md measures it). */
	if (r == 0 && p->require_signed)
		log_info("job %s: image %s (%.12s) is signed by a key this node trusts (checked in %.0f us)", j->jd.job,
			 j->img.name, j->img.id, (now_ns() - t0) / 1e3);
	if (p != s->image_policy)
		cluster_free(&cl);
	return r;
}

/* The job's region as this host's guests left it: their rings and
 * their ranks' progress must match the memory they come back with. */
static int restore_vmshm(struct na_job *j, struct verr *err)
{
	char name[32];
	struct stat a, b;
	uint64_t n;
	int from, to, rc;

	snprintf(name, sizeof(name), "vmshm.g%d", j->g[0].index);
	from = openat(j->s.ckpt_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (from < 0)
		return verr_errno(err, "the checkpoint's %s", name);
	to = open(j->vmshm, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (to < 0) {
		close(from);
		return verr_errno(err, "%s", j->vmshm);
	}
	if (fstat(from, &a) < 0 || fstat(to, &b) < 0 || !S_ISREG(a.st_mode) || !S_ISREG(b.st_mode) ||
	    a.st_size != b.st_size)
		rc = verr_set(err, "the checkpoint's %s has %lld bytes, the job's region here %lld: not the same "
			      "region", name, (long long)a.st_size, (long long)b.st_size);
	else
		rc = na_copy_sparse(from, to, &n, err);
	close(from);
	close(to);
	return rc < 0 ? verr_wrap(err, "restoring the vmshm region") : 0;
}

/* Guest 0's host spool as the save left it (job_ckpt_save.c): the
 * restored keeper and mpirun have its files open, and CRIU opens them
 * again by path, wanting the sizes they had.  Into the job's new spool,
 * a tmpfs of the user's that nothing runs in yet. */
static int restore_spool(struct na_job *j, struct verr *err)
{
	int from, to;
	DIR *d;
	int rc = 0;

	/* None saved (a checkpoint of a driver without a host spool): what
	 * the guests miss, their restore says. */
	if (faccessat(j->s.ckpt_fd, "spool", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		return 0;
	if ((from = na_ckpt_subdir(j->s.ckpt_fd, "spool", false, err)) < 0)
		return verr_wrap(err, "the checkpoint's spool of guest 0");
	to = open(j->spool, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (to < 0 || !(d = fdopendir(from))) {
		rc = verr_errno(err, "%s", to < 0 ? j->spool : "the checkpoint's spool");
		close(from);
		if (to >= 0)
			close(to);
		return rc;
	}
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		uint64_t n;
		int in, out;

		if (e->d_name[0] == '.')
			continue;
		in = openat(from, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (in < 0) {
			rc = verr_errno(err, "the checkpoint's spool/%s", e->d_name);
			break;
		}
		out = openat(to, e->d_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			rc = verr_errno(err, "%s/%s", j->spool, e->d_name);
		else if ((rc = na_copy_sparse(in, out, &n, err)) == 0 && fchown(out, j->s.uid, j->s.gid) < 0)
			rc = verr_errno(err, "%s/%s", j->spool, e->d_name);
		if (out >= 0)
			close(out);
		close(in);
	}
	closedir(d);
	close(to);
	return rc < 0 ? verr_wrap(err, "restoring guest 0's spool") : 0;
}

/* Instead of starting them: each guest from its folder of the checkpoint,
 * left paused.  Their agents cannot answer until job_resume. */
static int restore_guests(struct na_job *j, struct verr *err)
{
	if (!j->drv->restore)
		return verr_set(err, "the %s driver cannot restore its guests from a checkpoint", j->drv->name);
	if (j->vmshm[0] && restore_vmshm(j, err) < 0)
		return -1;
	if (j->spool_mounted && j->spool[0] && j->g[0].index == 0 && restore_spool(j, err) < 0)
		return -1;
	for (int k = 0; k < j->s.nguests; k++) {
		char name[32];
		int gfd, rc;

		if (cancelled(j, err))
			return -1;
		snprintf(name, sizeof(name), "g%d", j->g[k].index);
		if ((gfd = na_ckpt_subdir(j->s.ckpt_fd, name, false, err)) < 0)
			return verr_wrap(err, "the checkpoint's guest g%d", j->g[k].index);
		rc = j->drv->restore(j, k, gfd, err);
		close(gfd);
		if (rc < 0) {
			j->ckpt_damaged = rc == NA_RESTORE_DAMAGED;
			return verr_wrap(err, "restoring guest g%d", j->g[k].index);
		}
	}
	log_info("job %s: %d guest%s restored from the checkpoint, paused", j->jd.job, j->s.nguests,
		 j->s.nguests == 1 ? "" : "s");
	return 0;
}

static int prepare(struct na_job *j, const struct na_job_spec *s, struct verr *err)
{
	struct na_place_req req = { 0 };
	char vmshm_how[96] = "";

	if (j->drv->check_job && j->drv->check_job(j, err) < 0)
		return -1;
	if (open_to_user(j, err) < 0 || check_binds(j, err) < 0)
		return -1;
	if (cancelled(j, err))
		return -1;
	if (s->img)
		j->img = *s->img;
	else if (image_ensure(s->image, j->drv->image_flags, &j->img, err) < 0)
		return -1;
	if (check_signed(j, s, err) < 0)
		return -1;
	/* A compact rootfs is mounted once on this machine for every job that
	 * runs it; a kvm guest boots the file itself. */
	if (!(j->drv->image_flags & IMAGE_KVM) && image_mount(&j->img, err) < 0)
		return -1;
	if (s->verify_image && image_verify(&j->img, err) < 0)
		return -1;
	log_info("job %s: image %s (%.12s)%s", j->jd.job, j->img.name, j->img.id, s->verify_image ? ", verified" : "");
	if ((j->drv->image_flags & IMAGE_KVM) && !j->img.kvm)
		return verr_set(err, "image %s (%.12s) has no kvm parts (kernel, initramfs, root disk): give its YAML a kvm: section",
				j->img.name, j->img.id);
	req.nguests = s->nguests;
	req.vcpus = s->vcpus;
	req.mem = s->mem;
	req.oversubscribe = s->oversubscribe;
	/* Reads what other jobs hold, places and records under one lock. */
	if (cancelled(j, err) || na_place_job(s->topo, &req, &j->jd, j->place, err) < 0)
		return -1;
	if (cancelled(j, err) || make_net(j, err) < 0)
		return -1;
	if (s->vmshm && s->nguests > 1 &&
	    (na_vmshm_create(&j->jd, j->vmshm_slots, j->place, s->nguests, j->vmshm, sizeof(j->vmshm),
			     &j->vmshm_size, vmshm_how, sizeof(vmshm_how), err) < 0 ||
	     na_job_give_user(j, j->vmshm, err) < 0))
		return -1;
	if (write_shared(j, err) < 0)
		return -1;
	if (s->spool_size && j->drv->host_spool) {
		snprintf(j->spool, sizeof(j->spool), "%s/spool", j->jd.path);
		if (na_mount_small_tmpfs(j->jd.job, j->spool, s->spool_size, err) < 0)
			return -1;
		j->spool_mounted = true;
		if (na_job_give_user(j, j->spool, err) < 0)
			return -1;
	}
	double ratio = 0;

	if (j->vmshm[0] && na_movsb_env(&j->movsb_env, &ratio, err) < 0)
		return -1;
	if (j->drv->prepare && j->drv->prepare(j, err) < 0)
		return -1;
	log_placement(j);
	if (j->vmshm[0]) {
		char sz[32];

		log_info("job %s: vmshm region %s (%s, %s) for %d ranks", j->jd.job, j->vmshm,
			 fmt_size(j->vmshm_size, sz, sizeof(sz)), vmshm_how, j->vmshm_slots);
		if (ratio > 0)
			log_info("job %s: memcpy of 64 KiB here: 16 bytes past its source %.1fx the time "
				 "of 2 KiB past, so guests %s", j->jd.job, ratio,
				 j->movsb_env ? "get " VMSHM_AVOID_MOVSB_ENV : "keep glibc's default");
		else if (j->movsb_env)
			log_info("job %s: guests get %s (VHPC_AVOID_MOVSB=1)", j->jd.job, j->movsb_env);
	}
	if (s->restore)
		return restore_guests(j, err);
	for (int k = 0; k < s->nguests; k++)
		if (cancelled(j, err) || j->drv->start(j, k, err) < 0)
			return -1;
	for (int k = 0; j->drv->wait_started && k < s->nguests; k++)
		if (cancelled(j, err) || j->drv->wait_started(j, k, err) < 0)
			return -1;
	if (j->drv->started)
		j->drv->started(j);
	return 0;
}

/* A guest is ready when its agent answers hello with ready: true. */
static int hello_ready(struct na_job *j, int k, int timeout_ms)
{
	struct chan c;
	struct verr e;
	char *info = NULL;
	int hr;

	if (!j->drv->reachable(&j->g[k]) || j->drv->connect(&j->g[k], &c, j->s.key, timeout_ms, &e) < 0)
		return 0;
	hr = gexec_hello(&c, &info, 5000, &e);
	chan_close(&c);
	if (hr < 0) {
		log_debug("guest g%d: hello: %s", j->g[k].index, e.msg);
		return 0;
	}
	struct json_object *o = json_tokener_parse(info), *rd;
	bool ready = o && json_object_object_get_ex(o, "ready", &rd) && json_object_get_boolean(rd);

	log_debug("guest g%d: %s", j->g[k].index, info);
	json_object_put(o);
	free(info);
	return ready;
}

static int wait_ready(struct na_job *j, struct verr *err)
{
	/* Under emulation a kvm guest never gets there: it is left to run
	 * until it stops or the job's time is up, so its console can be
	 * watched. */
	double limit = j->emulated ? (double)j->s.job_timeout_s : j->drv->ready_seconds(j, j->ready_s);
	double deadline = now_s() + limit;

	for (int k = 0; k < j->s.nguests; k++)
		for (;;) {
			char why[256];

			if (cancelled(j, err))
				return -1;
			if (!j->drv->running(&j->g[k], why, sizeof(why))) {
				j->drv->log_tail(&j->g[k]);
				return verr_set(err, "guest g%d stopped before it was ready: %s", j->g[k].index, why);
			}
			if (hello_ready(j, k, 1000))
				break;
			if (now_s() > deadline) {
				j->drv->log_tail(&j->g[k]);
				return verr_set(err, "guest g%d did not report ready within %.0f s", j->g[k].index, limit);
			}
			usleep(20000);
		}
	return 0;
}

int na_job_start(struct na_job **jp, const char *local, const struct na_job_spec *s, struct verr *err)
{
	struct na_job *j = *jp = calloc(1, sizeof(**jp));
	char path[700], net[32];
	long long ranks = 0;

	if (!j)
		return verr_set(err, "out of memory");
	if (resolve(j, s, err) < 0 || copy_spec(j, s, err) < 0)
		return -1;
	/* A bad profile should not wait for an image build. */
	if (!s->tuning)
		return verr_set(err, "job %s: no tuning profile named", local);
	if (tuning_load(s->tuning, &j->tun, err) < 0)
		return -1;
	j->have_tun = true;
	j->tuning = &j->tun;
	if (job_open(j, local, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/job.json", j->jd.path);
	if (s->record && write_file_atomic(path, s->record, strlen(s->record), 0600, err) < 0)
		return -1;
	if (s->subnet.prefix == 0 && s->subnet_pool &&
	    (cancelled(j, err) || na_subnet_alloc(s->subnet_pool, &j->jd, &j->s.subnet, err) < 0))
		return -1;
	for (int i = 0; i < s->ntotal; i++)
		ranks += s->ranks[i];
	log_info("job %s: %d guest%s x %d vCPU%s, %lld ranks, %s driver (%s), network %s/%d, image %s",
		 local, s->nguests, s->nguests == 1 ? "" : "s", s->vcpus, s->vcpus == 1 ? "" : "s", ranks,
		 j->drv->name, j->drv_why, ipv4_format(j->s.subnet.addr, net, sizeof(net)), j->s.subnet.prefix,
		 s->img ? s->img->name : s->image);
	if (prepare(j, &j->s, err) < 0)
		return -1;
	return s->restore ? 0 : wait_ready(j, err);
}

bool na_job_guest_gone(struct na_job *j, char *why, size_t len)
{
	for (int k = 0; j->g && k < j->s.nguests; k++) {
		char how[400];

		if (!j->g[k].priv || !j->drv->running(&j->g[k], how, sizeof(how))) {
			snprintf(why, len, "guest g%d stopped while the job ran: %s", j->g[k].index,
				 j->g[k].priv ? how : "it was not taken over");
			/* Its console and logs go with the job's folder: what led
			 * to it (a panic's trace) stays in the node's log. */
			if (j->g[k].priv && !j->g[k].tail_logged) {
				j->g[k].tail_logged = true;
				log_warn("job %s: guest g%d has stopped; its last words follow", j->jd.job,
					 j->g[k].index);
				j->drv->log_tail(&j->g[k]);
			}
			return true;
		}
	}
	return false;
}

int na_job_guest_access(struct na_job *j, int k, struct na_guest_access *a, struct verr *err)
{
	if (k < 0 || k >= j->s.nguests || !j->g || !j->g[k].priv)
		return verr_set(err, "guest %d of this node was not started", k);
	return j->drv->access(&j->g[k], a, err);
}

int na_job_connect(struct na_job *j, int k, struct chan *c, int timeout_ms, struct verr *err)
{
	if (k < 0 || k >= j->s.nguests || !j->g || !j->g[k].priv)
		return verr_set(err, "guest %d of this node was not started", k);
	return j->drv->connect(&j->g[k], c, j->s.key, timeout_ms, err);
}

void na_job_stop(struct na_job *j)
{
	struct verr e;
	bool any = false;

	if (!j)
		return;
	for (int k = 0; j->g && k < j->s.nguests; k++) {
		struct chan c;

		if (!j->g[k].priv)
			continue;
		any = true;
		/* Asking first lets the agent end its sessions the orderly way
		 * (a kvm guest then powers off). */
		if (!j->emulated && j->drv->running(&j->g[k], NULL, 0) && j->drv->reachable(&j->g[k]) &&
		    j->drv->connect(&j->g[k], &c, j->s.key, 1000, &e) == 0) {
			gexec_shutdown(&c, &e);
			chan_close(&c);
		}
	}
	if (any && j->drv->stop_all(j, 3000, &e) < 0)
		log_warn("job %s: stopping guests: %s", j->jd.job, e.msg);
	if (j->drv && j->drv->release)
		j->drv->release(j);
	if (j->spool_mounted && umount2(j->spool, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("cannot unmount %s: %s", j->spool, strerror(errno));
	j->spool_mounted = false;
	if (j->vmshm[0] && na_vmshm_remove(j->vmshm, &e) < 0)
		log_warn("%s", e.msg);
	j->vmshm[0] = 0;
	if (j->have_fab && na_fabric_destroy(&j->fab, &e) < 0)
		log_warn("job %s: fabric: %s", j->jd.job, e.msg);
	j->have_fab = false;
	if (j->have_net && na_net_destroy(&j->net, &e) < 0)
		log_warn("job %s: network: %s", j->jd.job, e.msg);
	j->have_net = false;
	if (j->have_jd && na_jobdir_remove(&j->jd, &e) < 0)
		log_warn("job %s: job dir: %s", j->jd.job, e.msg);
	j->have_jd = false;
	free(j->place);
	free(j->g);
	na_binds_close(j->hb, j->nhb);
	free(j->hb);
	j->place = NULL;
	j->g = NULL;
	j->hb = NULL;
	j->nhb = 0;
	if (j->have_tun)
		tuning_free(&j->tun);
	free(j);
}

int na_job_adopt(struct na_job **jp, const char *job, const struct na_job_spec *s, struct verr *err)
{
	struct na_job *j = *jp = calloc(1, sizeof(**jp));

	if (!j)
		return verr_set(err, "out of memory");
	if (resolve(j, s, err) < 0)
		return -1;
	if (na_jobdir_adopt(&j->jd, job, err) < 0)
		return -1;
	j->have_jd = true;
	if (copy_spec(j, s, err) < 0)
		return -1;
	snprintf(j->shared, sizeof(j->shared), "%s/shared", j->jd.path);
	/* What it made, by the naming rules: the teardown needs the names. */
	snprintf(j->net.job, sizeof(j->net.job), "%s", job);
	snprintf(j->net.job_netns, sizeof(j->net.job_netns), "vhpc-%s", job);
	j->net.nguests = s->nguests;
	for (int k = 0; k < s->nguests; k++) {
		j->net.index[k] = j->g[k].index;
		if (j->drv->guest_netns)
			snprintf(j->net.guest_netns[k], sizeof(j->net.guest_netns[k]), "vhpc-%s-%d", job, j->g[k].index);
		j->net.guest_addr[k] = s->subnet.addr + 2 + (uint32_t)j->g[k].index;
	}
	j->have_net = true;
	if (j->s.rdma) {
		/* By the naming rules too (net.h, fabric). */
		snprintf(j->fab.job, sizeof(j->fab.job), "%s", job);
		snprintf(j->fab.vlan_dev, sizeof(j->fab.vlan_dev), "vf%s", job);
		j->fab.nguests = s->nguests;
		for (int k = 0; k < s->nguests; k++) {
			j->fab.g[k].index = j->g[k].index;
			memcpy(j->fab.g[k].netns, j->net.guest_netns[k], sizeof(j->fab.g[k].netns));
			snprintf(j->fab.g[k].rdma_dev, sizeof(j->fab.g[k].rdma_dev), "vhpc-%s-%d", job, j->g[k].index);
		}
		j->have_fab = true;
	}
	if (s->spool_size && j->drv->host_spool) {
		snprintf(j->spool, sizeof(j->spool), "%s/spool", j->jd.path);
		j->spool_mounted = true;
	}
	if (s->vmshm && s->nguests > 1)
		na_vmshm_path(&j->jd, j->vmshm, sizeof(j->vmshm));
	/* Every guest that can be taken over is, so the teardown stops it. */
	int rc = 0;

	for (int k = 0; k < s->nguests; k++) {
		struct verr e;

		if (j->drv->adopt(j, k, &e) < 0 && rc == 0) {
			verr_set(err, "guest g%d: %s", j->g[k].index, e.msg);
			rc = -1;
		}
	}
	return rc;
}

