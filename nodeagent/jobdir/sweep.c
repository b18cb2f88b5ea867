/*
 * Finding and removing what a job left, by the names vhpcd.h fixes: after
 * a crash (na_cleanup_stale, for jobs whose owner died) and as the last
 * step of every teardown (na_jobdir_remove, as a safety net).
 *
 * Order matters: processes first (what the drivers sweep, such as runc
 * containers, then anything left in the job's cgroups), because a live process keeps a network namespace and
 * a cgroup alive; then namespaces (the job's firewall after its VXLAN),
 * cgroups, mounts, shm files.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool na_indexed_name(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(name, prefix, n) || !name[n])
		return false;
	for (const char *p = name + n; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	/* A Slurm job may have more than 9999 guests (slurm/layout.c). */
	return strlen(name + n) <= 6;
}

static int sweep_netns(const char *job, const char *why, int *removed, struct verr *err)
{
	char own[32], prefix[32];
	DIR *d = opendir(NA_NETNS_DIR);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "%s", NA_NETNS_DIR);
	snprintf(own, sizeof(own), "vhpc-%s", job);
	snprintf(prefix, sizeof(prefix), "vhpc-%s-", job);
	while ((de = readdir(d))) {
		struct verr e;

		if (strcmp(de->d_name, own) && !na_indexed_name(de->d_name, prefix))
			continue;
		if (!strcmp(de->d_name, own) && na_vxlan_del(own, &e) < 0)
			log_warn("%s: job %s: %s", why, job, e.msg);
		if (na_netns_del(de->d_name, &e) == 0) {
			log_info("%s: job %s: removed network namespace %s", why, job, de->d_name);
			(*removed)++;
		} else if (rc == 0) {
			rc = verr_set(err, "%s", e.msg);
		}
	}
	closedir(d);
	return rc;
}

static int sweep_shm(const char *job, const char *why, int *removed, struct verr *err)
{
	char prefix[32];
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "/dev/shm");
	snprintf(prefix, sizeof(prefix), "vhpc-%s-", job);
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct verr e;

		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		if (rm_rf(path, &e) == 0) {
			log_info("%s: job %s: removed %s", why, job, path);
			(*removed)++;
		} else if (rc == 0) {
			rc = verr_set(err, "%s", e.msg);
		}
	}
	closedir(d);
	return rc;
}

int na_sweep_job(const char *job, const char *jobdir, const char *why,
		 int *removed, struct verr *err)
{
	char rel[64];
	struct verr e;
	int rc = 0, n;

	if (na_job_check(job, err) < 0)
		return -1;
#define STEP(call) do { if ((call) < 0 && rc == 0) { *err = e; rc = -1; } } while (0)
	STEP(na_drivers_sweep(job, why, removed, &e));
	snprintf(rel, sizeof(rel), "vhpc/%s", job);
	n = 0;
	STEP(na_cgroup_remove(rel, true, &n, &e));
	if (n)
		log_info("%s: job %s: removed %d cgroup dir%s (%s in every hierarchy)", why, job, n,
			 n > 1 ? "s" : "", rel);
	*removed += n;
	/* While the guests' namespaces, which hold its RDMA devices, exist. */
	STEP(na_fabric_sweep(job, why, removed, &e));
	STEP(sweep_netns(job, why, removed, &e));
	/* After the VXLAN (in sweep_netns): its firewall outlives it. */
	if ((n = na_fw_remove(job, &e)) > 0) {
		log_info("%s: job %s: removed its firewall (nftables table ip vhpc-%s)", why, job, job);
		(*removed)++;
	}
	STEP(n);
	n = 0;
	STEP(na_umount_below(jobdir, &n, &e));
	if (n)
		log_info("%s: job %s: unmounted %d mount%s under %s", why, job, n, n > 1 ? "s" : "", jobdir);
	*removed += n;
	STEP(sweep_shm(job, why, removed, &e));
#undef STEP
	return rc;
}

/* A dir that never got published (its creator died between mkdir and
 * rename) holds no resources; it is left alone for a minute so a creator
 * that is merely slow is not disturbed. */
static void sweep_unpublished(const char *jobs, const char *name, int *removed)
{
	char path[PATH_MAX];
	struct stat st;
	struct verr e;

	snprintf(path, sizeof(path), "%s/%s", jobs, name);
	if (stat(path, &st) < 0 || time(NULL) - st.st_mtime < 60)
		return;
	if (rm_rf(path, &e) == 0) {
		log_info("cleanup: removed unfinished job dir %s", path);
		(*removed)++;
	}
}

int na_cleanup_stale(int *removed, struct verr *err)
{
	char jobs[PATH_MAX];
	DIR *d;
	struct dirent *de;
	int rc = 0;

	*removed = 0;
	d = opendir(na_jobs_dir(jobs, sizeof(jobs)));
	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "%s", jobs);
	while ((de = readdir(d))) {
		struct na_jobdir jd;
		struct verr e;
		int n = 0;

		if (!strncmp(de->d_name, ".new-", 5)) {
			sweep_unpublished(jobs, de->d_name, removed);
			continue;
		}
		if (!na_job_ok(de->d_name))
			continue;
		/* Taking the lock both proves the owner is gone and keeps a
		 * concurrent cleanup away from the same job. */
		if (na_jobdir_adopt(&jd, de->d_name, &e) < 0) {
			if (na_jobdir_alive(de->d_name))
				continue;
			/* no lock file at all: published without one can't happen,
			 * but a broken dir must not block cleanup forever */
			snprintf(jd.path, sizeof(jd.path), "%s/%s", jobs, de->d_name);
			snprintf(jd.job, sizeof(jd.job), "%s", de->d_name);
			jd.lock_fd = -1;
		}
		log_info("cleanup: job %s: its owner is gone; removing what it left", jd.job);
		if (na_sweep_job(jd.job, jd.path, "cleanup", &n, &e) < 0) {
			log_warn("cleanup: job %s: %s", jd.job, e.msg);
			if (rc == 0) {
				*err = e;
				rc = -1;
			}
		} else if (rm_rf(jd.path, &e) < 0) {
			log_warn("cleanup: job %s: %s", jd.job, e.msg);
			if (rc == 0) {
				*err = e;
				rc = -1;
			}
		} else {
			n++;
		}
		*removed += n;
		if (jd.lock_fd >= 0)
			close(jd.lock_fd);
	}
	closedir(d);
	return rc;
}
