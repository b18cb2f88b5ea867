/*
 * One job's part on this node, as `vhpc run` does it on one machine
 * (scheduler/embedded.c) but split: the controller decided which guests
 * run here, their job-wide indexes, the job's subnet, VNI and key; this
 * node places them on its cores, builds its piece of the job network (a
 * bridge joined to the job's other nodes by VXLAN), and starts them.
 *
 * The job dir holds job.json (the controller's job_prepare, written before
 * any resource exists), so a vhpcd that is killed and restarted can take
 * the job over again (vd_adopt_all) without disturbing its guests.
 */
#include "vhpcd_int.h"
#include "na.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define READY_TIMEOUT_S 60

void vjob_ctl_sock(const struct vjob *j, int gi, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ctl%d/ctl.sock", j->jd.path, gi);
}

static void guest_dir(const struct vjob *j, int gi, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ctl%d", j->jd.path, gi);
}

static void spool_dir(const struct vjob *j, char *buf, size_t len)
{
	snprintf(buf, len, "%s/spool", j->jd.path);
}

static bool is_launcher(const struct vjob *j)
{
	return j->p.nhere > 0 && j->p.here[0] == 0;
}

/* Names this physical host and node for the vmshm BTL: guests of one node
 * share a region; guests of two nodes on one machine (test clusters) must
 * not believe they do. */
static const char *host_id(char *buf, size_t len)
{
	snprintf(buf, len, "%s:%s", na_boot_id(), vd.name);
	return buf;
}

static int stop_requested(struct vjob *j, struct verr *err)
{
	bool s;

	pthread_mutex_lock(&vd.mu);
	s = j->stop_requested;
	pthread_mutex_unlock(&vd.mu);
	return s ? verr_set(err, "stopped by the controller while it was being prepared") : 0;
}

/* A small tmpfs of its own for each guest's control socket (and for guest
 * 0's spool): what a guest writes there cannot fill the host's disk. */
static int mount_tmpfs(const struct vjob *j, const char *dir, uint64_t size, struct verr *err)
{
	char src[64], opts[64];

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot create %s", dir);
	snprintf(src, sizeof(src), "vhpc-%s", j->local);
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)size);
	if (mount(src, dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return verr_errno(err, "cannot mount a tmpfs on %s", dir);
	return 0;
}

static int write_shared(struct vjob *j, struct verr *err)
{
	char path[700], ip[20], hex[2 * CHAN_KEY_LEN + 2];
	size_t cap = 64 + (size_t)j->p.ntotal * 48, hl = 0, fl = 0;
	char *hosts = malloc(cap), *hostfile = malloc(cap);
	int rc = -1;

	if (!hosts || !hostfile) {
		verr_set(err, "out of memory");
		goto out;
	}
	snprintf(j->shared, sizeof(j->shared), "%s/shared", j->jd.path);
	/* mount points of the guests' own binds below /vhpc (read-only) */
	snprintf(path, sizeof(path), "%s/run", j->shared);
	if (mkdir_p(path, 0755, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/spool", j->shared);
	if (mkdir_p(path, 0755, err) < 0)
		goto out;
	/* The job's key, the same on every node: guest 0's vhpc-rsh reaches
	 * the guestd of every guest with it. */
	snprintf(path, sizeof(path), "%s/job.key", j->shared);
	snprintf(hex, sizeof(hex), "%s\n", j->p.key_hex);
	if (write_file_atomic(path, hex, strlen(hex), 0600, err) < 0)
		goto out;
	hl = (size_t)snprintf(hosts, cap, "127.0.0.1 localhost\n");
	for (int i = 0; i < j->p.ntotal; i++) {
		hl += (size_t)snprintf(hosts + hl, cap - hl, "%s g%d\n",
				       ipv4_format(j->p.subnet.addr + 2 + (uint32_t)i, ip, sizeof(ip)), i);
		fl += (size_t)snprintf(hostfile + fl, cap - fl, "g%d slots=%d max_slots=%d\n", i,
				       j->p.ranks[i], j->p.ranks[i]);
	}
	snprintf(path, sizeof(path), "%s/hosts", j->shared);
	if (write_file(path, hosts, hl, 0644, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/hostfile", j->shared);
	rc = write_file(path, hostfile, fl, 0644, err);
out:
	free(hosts);
	free(hostfile);
	return rc;
}

static int start_guest(struct vjob *j, int k, struct verr *err)
{
	int gi = j->p.here[k];
	char gdir[600], logp[600], spool[600], label[32], hid[128];
	struct na_guest g;
	struct na_job_guest jg = {
		.job = j->local, .job_label = label, .index = gi,
		.addr = j->net.guest_addr[k], .port = j->p.guest_port,
		.shared_dir = j->shared, .ctl_dir = gdir, .vmshm = j->vmshm,
		.host_id = host_id(hid, sizeof(hid)), .vmshm_slots = j->p.nranks_total,
		.rootfs = j->img.rootfs, .netns = j->net.guest_netns[k], .place = &j->place[k],
		.mem = j->p.mem, .log_path = logp,
	};

	snprintf(label, sizeof(label), "%lld", (long long)j->id);
	guest_dir(j, gi, gdir, sizeof(gdir));
	snprintf(logp, sizeof(logp), "%s/g%d.log", j->jd.path, gi);
	if (gi == 0) {
		/* Guest 0 runs mpirun detached; its output lands in the spool. */
		spool_dir(j, spool, sizeof(spool));
		jg.spool_dir = spool;
	}
	if (na_job_guest_start(&jg, &g, err) < 0)
		return -1;
	j->ctr[k] = g.ctr;
	return 0;
}

static void log_tail(const char *path)
{
	char *buf;
	size_t len;
	struct verr e;

	if (read_file(path, &buf, &len, 1 << 20, &e) < 0)
		return;
	if (len)
		log_err("last lines of %s:\n%s", path, len > 2000 ? buf + len - 2000 : buf);
	free(buf);
}

static int wait_ready(struct vjob *j, struct verr *err)
{
	double deadline = now_s() + READY_TIMEOUT_S;

	for (int k = 0; k < j->p.nhere; k++) {
		int gi = j->p.here[k];
		char sock[700], logp[600];

		vjob_ctl_sock(j, gi, sock, sizeof(sock));
		snprintf(logp, sizeof(logp), "%s/g%d.log", j->jd.path, gi);
		for (;;) {
			struct chan c;
			struct verr e;
			char *info = NULL;

			if (stop_requested(j, err) < 0)
				return -1;
			if (!na_ctr_running(j->ctr[k])) {
				log_tail(logp);
				return verr_set(err, "guest g%d stopped before it was ready", gi);
			}
			if (access(sock, F_OK) == 0 && gexec_connect_unix(&c, sock, j->key, 2000, &e) == 0) {
				int hr = gexec_hello(&c, &info, 5000, &e);

				chan_close(&c);
				if (hr == 0) {
					struct json_object *o = json_tokener_parse(info), *rd;
					bool ready = o && json_object_object_get_ex(o, "ready", &rd) &&
						     json_object_get_boolean(rd);

					json_object_put(o);
					free(info);
					if (ready)
						break;
				}
			}
			if (now_s() > deadline) {
				log_tail(logp);
				return verr_set(err, "guest g%d did not report ready within %d s", gi, READY_TIMEOUT_S);
			}
			usleep(20000);
		}
	}
	return 0;
}

static int alloc_arrays(struct vjob *j, struct verr *err)
{
	j->place = calloc(j->p.nhere, sizeof(*j->place));
	j->ctr = calloc(j->p.nhere, sizeof(*j->ctr));
	j->gdir_mounted = calloc(j->p.nhere, sizeof(bool));
	if (!j->place || !j->ctr || !j->gdir_mounted)
		return verr_set(err, "out of memory");
	return 0;
}

static int net_req_create(struct vjob *j, struct verr *err)
{
	struct na_net_req nr = {
		.job = j->local, .subnet = j->p.subnet, .nguests = j->p.nhere, .tuning = &j->tun,
		.index = j->p.here, .vni = j->p.vni, .underlay = vd.underlay,
		.peers = j->p.peers, .npeers = j->p.npeers,
	};

	if (na_net_create(&nr, &j->net, err) < 0)
		return -1;
	j->have_net = true;
	return 0;
}

int vjob_prepare(struct vjob *j, struct verr *err)
{
	enum vhpc_driver driver;
	const char *why;
	char path[700];
	uint64_t t0 = now_ns();

	driver = na_driver_resolve(j->p.driver, &why);
	if (na_driver_check(driver, err) < 0)
		return -1;
	if (driver != DRIVER_CONTAINER)
		return verr_set(err, "driver %s: not available yet", vhpc_driver_names[driver]);
	if (alloc_arrays(j, err) < 0)
		return -1;
	if (hex_decode(j->p.key_hex, j->key, sizeof(j->key)) < 0)
		return verr_set(err, "bad job key");
	/* The dir and its lock first: from here on a crash leaves something a
	 * restart can take over or remove. */
	if (na_jobdir_create(&j->jd, j->local, err) < 0)
		return -1;
	j->have_jd = true;
	snprintf(path, sizeof(path), "%s/job.json", j->jd.path);
	if (write_file_atomic(path, j->prep_json, strlen(j->prep_json), 0600, err) < 0)
		return -1;
	if (tuning_load(j->p.tuning, &j->tun, err) < 0)
		return -1;
	j->have_tun = true;
	if (stop_requested(j, err) < 0 || image_ensure(j->p.image, 0, &j->img, err) < 0)
		return -1;
	{
		struct na_place_req req = { .nguests = j->p.nhere, .vcpus = j->p.vcpus, .mem = j->p.mem,
					    .oversubscribe = j->p.oversubscribe };

		if (na_place_job(vd.topo, &req, &j->jd, j->place, err) < 0)
			return -1;
	}
	if (stop_requested(j, err) < 0 || net_req_create(j, err) < 0)
		return -1;
	if (j->p.vmshm && j->p.nhere > 1) {
		uint64_t size;

		if (na_vmshm_create(&j->jd, j->p.nranks_total, j->vmshm, sizeof(j->vmshm), &size, err) < 0)
			return -1;
	}
	if (write_shared(j, err) < 0)
		return -1;
	if (is_launcher(j)) {
		char sd[600];

		spool_dir(j, sd, sizeof(sd));
		if (mount_tmpfs(j, sd, vd.spool_size, err) < 0)
			return -1;
		j->spool_mounted = true;
	}
	for (int k = 0; k < j->p.nhere; k++) {
		char gd[600];

		if (stop_requested(j, err) < 0)
			return -1;
		guest_dir(j, j->p.here[k], gd, sizeof(gd));
		if (mount_tmpfs(j, gd, 1 << 20, err) < 0)
			return -1;
		j->gdir_mounted[k] = true;
		if (start_guest(j, k, err) < 0)
			return -1;
	}
	if (wait_ready(j, err) < 0)
		return -1;
	{
		char cpus[256], a[20];

		log_info("job %lld (%s): %d guest%s here (of %d), VNI %u, %s/%d, %s driver, ready in %.0f ms",
			 (long long)j->id, j->local, j->p.nhere, j->p.nhere == 1 ? "" : "s", j->p.ntotal, j->p.vni,
			 ipv4_format(j->p.subnet.addr, a, sizeof(a)), j->p.subnet.prefix, vhpc_driver_names[driver],
			 (now_ns() - t0) / 1e6);
		for (int k = 0; k < j->p.nhere; k++)
			log_info("  g%d: cpus %s", j->p.here[k],
				 cpulist_format(j->place[k].cpus, j->place[k].ncpus, cpus, sizeof(cpus)));
	}
	return 0;
}

bool vjob_guests_alive(struct vjob *j, int *dead)
{
	for (int k = 0; j->ctr && k < j->p.nhere; k++)
		if (!j->ctr[k] || !na_ctr_running(j->ctr[k])) {
			*dead = j->p.here[k];
			return false;
		}
	return true;
}

void vjob_teardown(struct vjob *j)
{
	struct verr e;
	int n = 0;

	for (int k = 0; j->ctr && k < j->p.nhere; k++) {
		char sock[700];
		struct chan c;

		if (!j->ctr[k])
			continue;
		n++;
		vjob_ctl_sock(j, j->p.here[k], sock, sizeof(sock));
		/* Asking first lets guestd stop its commands the orderly way. */
		if (na_ctr_running(j->ctr[k]) && access(sock, F_OK) == 0 &&
		    gexec_connect_unix(&c, sock, j->key, 1000, &e) == 0) {
			gexec_shutdown(&c, &e);
			chan_close(&c);
		}
	}
	/* vhpcd is the child subreaper of its guests' inits: na_ctr_stop_all
	 * reaps each (never waitpid(-1) here: other threads wait for their
	 * own children). */
	if (n && na_ctr_stop_all(j->ctr, j->p.nhere, 3000, &e) < 0)
		log_warn("job %lld: stopping guests: %s", (long long)j->id, e.msg);
	for (int k = 0; j->gdir_mounted && k < j->p.nhere; k++) {
		char dir[600];

		if (!j->gdir_mounted[k])
			continue;
		guest_dir(j, j->p.here[k], dir, sizeof(dir));
		if (umount2(dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			log_warn("cannot unmount %s: %s", dir, strerror(errno));
		j->gdir_mounted[k] = false;
	}
	if (j->spool_mounted) {
		char dir[600];

		spool_dir(j, dir, sizeof(dir));
		if (umount2(dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			log_warn("cannot unmount %s: %s", dir, strerror(errno));
		j->spool_mounted = false;
	}
	if (j->vmshm[0] && na_vmshm_remove(j->local, &e) < 0)
		log_warn("%s", e.msg);
	j->vmshm[0] = 0;
	if (j->have_net && na_net_destroy(&j->net, &e) < 0)
		log_warn("job %lld: network: %s", (long long)j->id, e.msg);
	j->have_net = false;
	if (j->have_jd && na_jobdir_remove(&j->jd, &e) < 0)
		log_warn("job %lld: job dir: %s", (long long)j->id, e.msg);
	j->have_jd = false;
}

void vjob_free(struct vjob *j)
{
	if (!j)
		return;
	if (j->have_tun)
		tuning_free(&j->tun);
	vprep_free(&j->p);
	free(j->prep_json);
	free(j->place);
	free(j->ctr);
	free(j->gdir_mounted);
	free(j);
}

/* ---------------------------------------------------------------- adopt */

/* Takes over one job dir a dead vhpcd held; the job's guests keep running. */
static int adopt_one(const char *local, struct verr *err)
{
	struct vjob *j = calloc(1, sizeof(*j));
	struct json_object *msg = NULL;
	struct vmsg m;
	char path[700], *text = NULL;
	size_t len;
	int dead;

	if (!j)
		return verr_set(err, "out of memory");
	if (na_jobdir_adopt(&j->jd, local, err) < 0) {
		free(j);
		return -1;
	}
	j->have_jd = true;
	snprintf(path, sizeof(path), "%s/job.json", j->jd.path);
	if (read_file(path, &text, &len, 4 << 20, err) < 0)
		goto fail;
	if (!(msg = json_tokener_parse(text))) {
		verr_set(err, "%s: not readable as JSON", path);
		goto fail;
	}
	if (vmsg_parse(msg, &m, err) < 0)
		goto fail;
	if (m.type != VM_PREPARE || strcmp(m.prep.local, local)) {
		vmsg_free(&m);
		verr_set(err, "%s: not a job_prepare of job %s", path, local);
		goto fail;
	}
	j->id = m.job;
	snprintf(j->local, sizeof(j->local), "%s", local);
	j->p = m.prep;
	memset(&m.prep, 0, sizeof(m.prep));
	vmsg_free(&m);
	j->prep_json = text;
	text = NULL;
	j->adopted = true;
	if (alloc_arrays(j, err) < 0 || hex_decode(j->p.key_hex, j->key, sizeof(j->key)) < 0)
		goto fail;
	snprintf(j->shared, sizeof(j->shared), "%s/shared", j->jd.path);
	/* What it made, by the naming rules: the teardown needs the names. */
	snprintf(j->net.job, sizeof(j->net.job), "%s", local);
	snprintf(j->net.job_netns, sizeof(j->net.job_netns), "vhpc-%s", local);
	j->net.nguests = j->p.nhere;
	for (int k = 0; k < j->p.nhere; k++) {
		j->net.index[k] = j->p.here[k];
		snprintf(j->net.guest_netns[k], sizeof(j->net.guest_netns[k]), "vhpc-%s-%d", local, j->p.here[k]);
		j->net.guest_addr[k] = j->p.subnet.addr + 2 + (uint32_t)j->p.here[k];
		j->gdir_mounted[k] = true;
	}
	j->have_net = true;
	j->spool_mounted = is_launcher(j);
	if (j->p.vmshm && j->p.nhere > 1)
		snprintf(j->vmshm, sizeof(j->vmshm), "/dev/shm/vhpc-%s-vmshm", local);
	j->state = VJ_READY;
	for (int k = 0; k < j->p.nhere; k++) {
		struct verr e;

		if (na_ctr_adopt(local, j->p.here[k], &j->ctr[k], &e) < 0) {
			log_warn("job %lld: %s", (long long)j->id, e.msg);
			j->state = VJ_FAILED;
			snprintf(j->error, sizeof(j->error), "after a vhpcd restart: %s", e.msg);
		}
	}
	if (j->state == VJ_READY && !vjob_guests_alive(j, &dead)) {
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "guest g%d stopped", dead);
	}
	if (j->state == VJ_READY && is_launcher(j) && vjob_reattach(j, err) < 0) {
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "after a vhpcd restart: %s", err->msg);
	}
	log_info("job %lld (%s): taken over after a restart: %d guest%s, %s%s%s", (long long)j->id, local,
		 j->p.nhere, j->p.nhere == 1 ? "" : "s",
		 j->state == VJ_FAILED ? "failed: " : j->state == VJ_RUNNING ? "running" : "ready",
		 j->state == VJ_FAILED ? j->error : "", "");
	json_object_put(msg);
	pthread_mutex_lock(&vd.mu);
	vd_job_add(j);
	pthread_mutex_unlock(&vd.mu);
	return 0;
fail:
	json_object_put(msg);
	free(text);
	/* Unusable: released so na_cleanup_stale removes it. */
	if (j->have_jd) {
		close(j->jd.lock_fd);
		j->have_jd = false;
	}
	vjob_free(j);
	return -1;
}

int vd_adopt_all(struct verr *err)
{
	char jobs[600];
	DIR *d;
	struct dirent *de;
	int removed = 0;

	snprintf(jobs, sizeof(jobs), "%s/jobs", vhpc_run_dir());
	d = opendir(jobs);
	if (d) {
		while ((de = readdir(d))) {
			struct verr e;
			char p[1200];

			if (!na_job_ok(de->d_name))
				continue;
			snprintf(p, sizeof(p), "%s/%s/job.json", jobs, de->d_name);
			if (access(p, F_OK) < 0 || na_jobdir_alive(de->d_name))
				continue;
			if (adopt_one(de->d_name, &e) < 0)
				log_warn("job dir %s: cannot take it over: %s; removing it", de->d_name, e.msg);
		}
		closedir(d);
	}
	if (na_cleanup_stale(&removed, err) < 0)
		return -1;
	if (removed)
		log_info("removed %d resources that dead jobs left behind", removed);
	return 0;
}
