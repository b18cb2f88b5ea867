/*
 * A job's runtime dir and lock, and the sweeping of everything a job
 * leaves on the host (containers, cgroups, netns, mounts, shm files), after
 * a job or when a crashed agent's jobs are found stale.
 */
#ifndef VHPC_NA_JOBDIR_H
#define VHPC_NA_JOBDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/consts.h"
#include "lib/err.h"
#include "nodeagent/nodeagent.h"

struct na_placement;

int na_job_check(const char *job, struct verr *err);

/* <run dir>/jobs, <run dir>/jobs/<job>, <run dir>/runc */
const char *na_jobs_dir(char *buf, size_t len);
const char *na_job_path(const char *job, char *buf, size_t len);
const char *na_runc_root(char *buf, size_t len);

/* A run-dir-wide lock for short read-modify-write sections (placement,
 * subnet allocation) between processes and threads alike.  Returns the fd
 * to pass to na_run_unlock, or -1. */
int na_run_lock(struct verr *err);
void na_run_unlock(int fd);

/*
 * Every job starts by creating its runtime dir and holding its lock for as
 * long as it owns resources, before it creates any of them.  A dir whose lock
 * nobody holds belongs to a dead owner and is swept by na_cleanup_stale.
 */
struct na_jobdir {
	char job[16];
	char path[256];        /* <run dir>/jobs/<job> */
	int lock_fd;
};
int na_jobdir_create(struct na_jobdir *jd, const char *job, struct verr *err);
/* Takes over the dir of a job whose owner died (a restarted vhpcd
 * re-adopting its guests); fails if the lock is held. */
int na_jobdir_adopt(struct na_jobdir *jd, const char *job, struct verr *err);
/* Records the placement so na_busy_cpus sees it. */
int na_jobdir_record_cpus(struct na_jobdir *jd, const struct na_placement *p,
			  int n, struct verr *err);
/* Removes the dir and releases the lock, after every resource is gone:
 * whatever is still there by the naming rules (containers, netns, cgroups,
 * mounts, shm files) is removed first, with a warning. */
int na_jobdir_remove(struct na_jobdir *jd, struct verr *err);


/* -------------------------------------------------------------- mounts */

/* Calls fn(mount point, fstype, arg) for each mount of this process's mount
 * namespace (mount points unescaped); fn < 0 stops the walk. */
int na_each_mount(int (*fn)(const char *mnt, const char *fstype, void *arg),
		  void *arg, struct verr *err);

/* -------------------------------------------------------------- cgroups */

/* Mount points of every cgroup v1 hierarchy and the cgroup2 one. */
int na_cgroup_mounts(char ***mnts, int *n, struct verr *err);
void na_cgroup_mounts_free(char **mnts, int n);
void na_cgroup_rmdir_job(const char *job);
/* The same for process who. */
int na_cgroup_attach(const char *rel, pid_t who, struct verr *err);
/* The processes in <rel> (up to max of them in pids); 0 also when no
 * hierarchy has it. */
int na_cgroup_pids(const char *rel, pid_t *pids, int max, struct verr *err);
/* Removes <every hierarchy>/<rel> and all below it, leaves first; kills
 * (SIGKILL) processes still inside when kill is set.  Counts removed dirs. */
int na_cgroup_remove(const char *rel, bool kill, int *removed, struct verr *err);
/* What <rel> has used so far (cgroup_usage.c): CPU time in microseconds
 * and the peak of its memory in bytes, each -1 where no hierarchy says. */
void na_cgroup_usage(const char *rel, int64_t *cpu_usec, int64_t *mem_peak);
/* The same in the hierarchies mounted at mnts[0..n-1] (tests). */
void na_cgroup_usage_in(char **mnts, int n, const char *rel, int64_t *cpu_usec, int64_t *mem_peak);

/* ------------------------------------------------------------ sweeping */

/* Removes every resource named after job (containers, cgroups, netns,
 * mounts under jobdir, shm files); the dir itself stays.  Each item is
 * logged with why (a prefix such as "cleanup" or "teardown"). */
int na_sweep_job(const char *job, const char *jobdir, const char *why,
		 int *removed, struct verr *err);
/* Whether name is prefix followed by a guest index (1-6 digits): how a
 * job's per-guest resources are named ("<job>-<index>"). */
bool na_indexed_name(const char *name, const char *prefix);
/* Unmounts every mount at or below dir, deepest first. */
int na_umount_below(const char *dir, int *removed, struct verr *err);

#endif
