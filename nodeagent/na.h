/*
 * Private to nodeagent/: helpers shared by its files.  Others include
 * vhpcd.h only.
 */
#ifndef VHPC_NA_PRIVATE_H
#define VHPC_NA_PRIVATE_H

#include "lib/err.h"
#include "lib/tuning.h"
#include "vhpcd.h"

#include <stddef.h>

/* Job ids are [a-z0-9]{1,12}: they become parts of netns, cgroup, runc and
 * file names, and '-' separates the guest index in those names. */
bool na_job_ok(const char *job);
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

/* --------------------------------------------------------------- netns */

#define NA_NETNS_DIR "/run/netns"

/* Creates /run/netns/<name> holding a fresh network namespace; fails if the
 * name exists. */
int na_netns_add(const char *name, struct verr *err);
/* Unmounts and unlinks /run/netns/<name>; 0 if it was not there. */
int na_netns_del(const char *name, struct verr *err);
/* Runs fn in a thread that has joined /run/netns/<name>, so the caller's
 * own namespace never changes.  fn's error lands in err. */
int na_netns_run(const char *name, int (*fn)(void *arg, struct verr *err),
		 void *arg, struct verr *err);

/* Deletes the job's VXLAN device (vxlan0 in its job netns) if there is
 * one.  Deleting a namespace frees its devices only later (the kernel's
 * cleanup work), and a VXLAN still there keeps its VNI and port taken in
 * the node's namespace: a job started again at once could not have them. */
int na_vxlan_del(const char *job_netns, struct verr *err);

/* Offloads of one interface in the calling thread's netns (ethtool ioctl). */
int na_eth_offloads(const char *ifname, const struct tuning *t, struct verr *err);

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
/* Removes <every hierarchy>/<rel> and all below it, leaves first; kills
 * (SIGKILL) processes still inside when kill is set.  Counts removed dirs. */
int na_cgroup_remove(const char *rel, bool kill, int *removed, struct verr *err);

/* --------------------------------------------------------------- runc */

/* Path of the runc binary ($VHPC_RUNC, else the usual places, else PATH);
 * NULL when there is none. */
const char *na_runc_path(void);
/* Runs `runc --root <run>/runc [--log log] args...` with stdin /dev/null
 * and stdout+stderr to out_fd (or captured into err on failure when
 * out_fd < 0).  Kills it after timeout_ms. */
int na_runc(const char *const *args, int out_fd, const char *log,
	    int timeout_ms, struct verr *err);

/* ---------------------------------------------------------------- OCI */

struct json_object;
/* The OCI runtime config for a container (unit-tested on its own). */
int na_oci_config(const struct na_ctr_spec *s, const char *rootfs_path,
		  struct json_object **out, struct verr *err);

/* ------------------------------------------------------------ sweeping */

/* Removes every resource named after job (containers, cgroups, netns,
 * mounts under jobdir, shm files); the dir itself stays.  Each item is
 * logged with why (a prefix such as "cleanup" or "teardown"). */
int na_sweep_job(const char *job, const char *jobdir, const char *why,
		 int *removed, struct verr *err);
/* Unmounts every mount at or below dir, deepest first. */
int na_umount_below(const char *dir, int *removed, struct verr *err);

#endif
