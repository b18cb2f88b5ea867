/*
 * One job's part on this node, as the controller asked for it: which
 * guests run here, their job-wide indexes, the job's subnet, VNI and key.
 * The node agent's job lifecycle (na_job_*) does the work, as it does for
 * `vhpc run`; this file turns a job_prepare into its spec.
 *
 * The job dir holds job.json (the controller's job_prepare, written before
 * any resource exists), so a vhpcd that is killed and restarted can take
 * the job over again (vd_adopt_all) without disturbing its guests.
 */
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/tuning.h"
#include "daemon.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/nodeagent.h"

#include <pwd.h>
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_launcher(const struct vjob *j)
{
	return j->p.nhere > 0 && j->p.here[0] == 0;
}

static int user_of(uid_t uid, uid_t *u, gid_t *g, struct verr *err)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return verr_set(err, "the job's user (uid %u) has no account on node %s", (unsigned)uid, vd.name);
	*u = pw.pw_uid;
	*g = pw.pw_gid;
	return 0;
}

static int stop_requested(void *arg, struct verr *err)
{
	struct vjob *j = arg;
	bool s;

	pthread_mutex_lock(&vd.mu);
	s = j->stop_requested;
	pthread_mutex_unlock(&vd.mu);
	return s ? verr_set(err, "stopped by the controller while it was being prepared") : 0;
}

/* The lifecycle's view of the job_prepare.  Guests of two nodes on one
 * machine (test clusters) must not believe they share a vmshm region, so
 * the host id names the node too. */
static int job_spec(struct vjob *j, struct na_job_spec *s, struct verr *err)
{
	memset(s, 0, sizeof(*s));
	if (hex_decode(j->p.key_hex, s->key, sizeof(s->key)) < 0)
		return verr_set(err, "bad job key");
	snprintf(j->label, sizeof(j->label), "%lld", (long long)j->id);
	snprintf(j->host_id, sizeof(j->host_id), "%s:%s", na_boot_id(), vd.name);
	s->label = j->label;
	s->driver = j->p.driver;
	s->nguests = j->p.nhere;
	s->index = j->p.here;
	s->ntotal = j->p.ntotal;
	s->ranks = j->p.ranks;
	s->subnet = j->p.subnet;
	s->guest_port = j->p.guest_port;
	s->image = j->p.image;
	s->image_policy = &vd.cl.images;
	s->tuning = j->p.tuning;
	s->topo = vd.topo;
	s->vcpus = j->p.vcpus;
	s->mem = j->p.mem;
	s->oversubscribe = j->p.oversubscribe;
	s->vmshm = j->p.vmshm && j->p.nhere > 1;
	s->single_copy = j->p.single_copy;
	s->host_id = j->host_id;
	s->scratch = j->p.scratch;
	s->binds = &j->p.binds;
	/* The controller vouches for the uid (the submitter's munge
	 * credential); its group is this node's account's, as in Slurm. */
	if (user_of(j->p.uid, &s->uid, &s->gid, err) < 0)
		return -1;
	/* Guest 0 runs mpirun detached; its output lands in the spool. */
	s->spool_size = is_launcher(j) ? vd.spool_size : 0;
	s->vni = j->p.vni;
	s->underlay = vd.underlay;
	s->peers = j->p.peers;
	s->npeers = j->p.npeers;
	s->guest_node = j->p.guest_nodes;
	s->wg = j->p.wg.key ? &j->p.wg : NULL;
	s->job_timeout_s = j->p.timeout;
	if (vd_fabric_spec(j, vd.name, s, err) < 0)
		return -1;
	/* What a restarted vhpcd reads to take the job over (adopt_one). */
	s->record = j->prep_json;
	s->cancelled = stop_requested;
	s->cancel_arg = j;
	return 0;
}

/* This node's part of the checkpoint the job comes back from, verified
 * before anything of the job is made: a changed or missing file is
 * refused naming it, and marked damaged (j->ckpt_damaged: the controller
 * fails the restart at once, as no attempt can succeed).  The folder of
 * every checkpoint (checkpoints.dir) missing, or a machine short of
 * memory or descriptors, is this node's problem, not the checkpoint's. */
static int open_part(struct vjob *j, struct na_job_spec *s, struct verr *err)
{
	const char *dir = cluster_ckpt_dir(&vd.cl);
	int root = na_ckpt_root_open(dir, false, err), fd, rc;

	if (root < 0)
		return verr_wrap(err, "checkpoint %s", j->p.restore);
	errno = 0;
	fd = na_ckpt_open(root, j->p.restore, false, err);
	close(root);
	if (fd < 0) {
		/* its folder missing, a link, not a folder, not root's 0700 */
		j->ckpt_damaged = !na_ckpt_short_errno(errno);
		return verr_wrap(err, "checkpoint %s in %s on node %s", j->p.restore, dir, vd.name);
	}
	if ((rc = na_ckpt_part_verify(fd, j->p.here[0], err)) < 0) {
		close(fd);
		j->ckpt_damaged = rc == -1;
		return verr_wrap(err, "checkpoint %s/%s on node %s", dir, j->p.restore, vd.name);
	}
	s->restore = true;
	s->ckpt_fd = fd;
	return 0;
}

int vjob_prepare(struct vjob *j, struct verr *err)
{
	struct na_job_spec s;
	uint64_t t0 = now_ns();
	int rc;

	if (job_spec(j, &s, err) < 0)
		return -1;
	/* The image the job was submitted with, whatever its name means now. */
	if (vd_image_get(j, &j->img, err) < 0)
		return -1;
	s.img = &j->img;
	if (j->p.restore[0] && open_part(j, &s, err) < 0)
		return -1;
	rc = na_job_start(&j->nj, j->local, &s, err);
	if (s.restore)
		close(s.ckpt_fd);
	if (rc < 0) {
		/* A snapshot the driver refused as damaged, its sha256 file
		 * matching: changed along with it, or saved wrong. */
		if (j->nj && na_job_ckpt_damaged(j->nj))
			j->ckpt_damaged = true;
		return -1;
	}
	log_info("job %lld (%s): %d guest%s here (of %d), VNI %u, %s driver, %s in %.0f ms", (long long)j->id,
		 j->local, j->p.nhere, j->p.nhere == 1 ? "" : "s", j->p.ntotal, j->p.vni, na_job_driver_name(j->nj),
		 j->p.restore[0] ? "restored (paused)" : "ready", (now_ns() - t0) / 1e6);
	return 0;
}

bool vjob_guests_alive(struct vjob *j, char *why, size_t len)
{
	return !j->nj || !na_job_guest_gone(j->nj, why, len);
}

void vjob_teardown(struct vjob *j)
{
	/* vhpcd is the child subreaper of its guests' inits: the drivers reap
	 * each (never waitpid(-1) here: other threads wait for their own
	 * children). */
	vd_usage_take(j);
	na_job_stop(j->nj);
	j->nj = NULL;
}

void vjob_free(struct vjob *j)
{
	if (!j)
		return;
	vprep_free(&j->p);
	free(j->prep_json);
	free(j);
}

/* ---------------------------------------------------------------- adopt */

/* Takes over one job dir a dead vhpcd held; the job's guests keep running. */
static int adopt_one(const char *local, struct verr *err)
{
	struct vjob *j = calloc(1, sizeof(*j));
	struct json_object *msg = NULL;
	struct na_job_spec s;
	struct vmsg m;
	char path[700], *text = NULL, why[256];
	size_t len;
	struct verr e;

	if (!j)
		return verr_set(err, "out of memory");
	snprintf(path, sizeof(path), "%s/jobs/%s/job.json", vhpc_run_dir(), local);
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
	if (job_spec(j, &s, err) < 0)
		goto fail;
	j->state = VJ_READY;
	if (na_job_adopt(&j->nj, local, &s, &e) < 0) {
		if (!*na_job_dir(j->nj)) {
			*err = e;
			goto fail;
		}
		log_warn("job %lld: %s", (long long)j->id, e.msg);
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "after a vhpcd restart: %s", e.msg);
	}
	if (j->state == VJ_READY && !vjob_guests_alive(j, why, sizeof(why))) {
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "%s", why);
	}
	/* Paused by the vhpcd before (a checkpoint under way): guest 0's
	 * agent is frozen, so mpirun's monitor waits for job_resume. */
	if (j->state == VJ_READY && (j->paused = na_job_paused(j->nj)) && is_launcher(j)) {
		j->state = VJ_RUNNING;
		log_info("job %lld: its guests here are paused; mpirun's monitor starts at job_resume", (long long)j->id);
	}
	if (j->state == VJ_READY && is_launcher(j) && vjob_reattach(j, err) < 0) {
		j->state = VJ_FAILED;
		snprintf(j->error, sizeof(j->error), "after a vhpcd restart: %s", err->msg);
	}
	log_info("job %lld (%s): taken over after a restart: %d guest%s, %s%s", (long long)j->id, local,
		 j->p.nhere, j->p.nhere == 1 ? "" : "s",
		 j->state == VJ_FAILED ? "failed: " : j->state == VJ_RUNNING ? "running" : "ready",
		 j->state == VJ_FAILED ? j->error : "");
	json_object_put(msg);
	pthread_mutex_lock(&vd.mu);
	vd_job_add(j);
	pthread_mutex_unlock(&vd.mu);
	return 0;
fail:
	/* Only reached before the job dir was taken: nothing to stop, the
	 * agent's record to free. */
	na_job_stop(j->nj);
	json_object_put(msg);
	free(text);
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
