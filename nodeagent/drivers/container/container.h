/*
 * The container driver: one runc container per guest, in the guest's
 * network namespace, with a read-only image rootfs.
 */
#ifndef VHPC_NA_CONTAINER_H
#define VHPC_NA_CONTAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/consts.h"
#include "lib/err.h"
#include "nodeagent/job.h"

struct tuning;

struct na_bind {
	const char *src, *dst;
	bool ro;
	/* A user's host path: mounted with the flags its source mount has
	 * (statvfs f_flag in flags), executable unless that is noexec; the
	 * agent's own binds are always noexec. */
	bool host;
	unsigned long flags;
};

/* A character device a guest gets beside runc's defaults, at the same
 * path as on the host (where it was checked to be this device). */
struct na_chardev {
	const char *path;
	dev_t dev;
};

/* Guest g's fabric devices (devices.c): its uverbs node and rdma_cm. */
struct na_fabric_guest;
int na_ctr_fabric_devices(const struct na_fabric_guest *g, struct na_chardev out[2], int *n, struct verr *err);

struct na_ctr_spec {
	const char *job;
	int index;                 /* guest index: container id <job>-<index> */
	const char *hostname;
	const char *rootfs;        /* image rootfs, mounted read-only */
	const char *const *argv;   /* the guest's init (vhpc-guestd) */
	const char *const *env;    /* NAME=VALUE, NULL-terminated */
	const struct na_bind *binds;
	int nbinds;
	const char *netns;         /* name under /run/netns to join (without own_netns) */
	/* Set: runc makes the guest a network namespace inside the guest's
	 * user namespace (CRIU dumps a guest only if its user namespace owns
	 * all its others), with runc's own sysfs of it at /sys, and between
	 * `runc create` and `runc start` this gets a descriptor of it to put
	 * the guest's interfaces in (na_net_guest_move).  Unset: the guest
	 * joins netns and gets the agent's sysfs. */
	int (*own_netns)(void *arg, int nsfd, struct verr *err);
	void *own_netns_arg;
	const struct na_placement *place;
	uint64_t mem_limit;        /* 0 = none */
	uint64_t tmpfs_size;       /* writable /tmp, /run, /var/tmp, /dev/shm; 0 = 64 MiB each */
	uint64_t scratch_size;     /* a tmpfs of this size on /scratch (the image has it); 0 = none */
	const char *log_path;      /* the init's stdout+stderr go here */
	/* The job's user.  The guest gets a user namespace of its own in which
	 * root is this uid and gid outside and nothing else is mapped, with no
	 * capabilities (and so none in the host's namespace), no new privileges
	 * and the seccomp allowlist (na_seccomp_profile). */
	uid_t uid;
	gid_t gid;
	const char *sysfs;         /* without own_netns: a sysfs of the guest's netns, bound read-only at /sys */
	/* Its RDMA device's uverbs node and rdma_cm (the job's fabric): made
	 * in its /dev (bound from the host's, in a user namespace) and the only
	 * devices its device cgroup allows beyond runc's defaults. */
	const struct na_chardev *devices;
	int ndevices;
	pid_t pod;                 /* >0: join the user and PID namespace of this
	                            * process (the job's pod, pod.c) instead of
	                            * making them; the netns must be the pod's too */
	/* A restart: `runc restore` of what na_ctr_checkpoint wrote in the
	 * folder restore_fd holds, instead of create and start, with the same
	 * config; the guest is left paused.  own_netns then gets the restored
	 * namespace (na_net_guest_move_restored).  criu_work: a folder of
	 * root's for CRIU's log. */
	bool restore;
	int restore_fd;
	const char *criu_work;
};

struct na_ctr;

/* Mounts at dir (made if missing) a read-only sysfs of the guest netns
 * netns, for na_ctr_spec.sysfs.  Inside its user namespace a guest cannot
 * mount a sysfs for a network namespace the agent made, and the host's
 * would list the host's interfaces in /sys/class/net; a sysfs shows the
 * netns of whoever mounted it, so the agent mounts it from inside that
 * netns.  It lives under the job dir, so the sweep unmounts it. */
int na_ctr_sysfs(const char *netns, const char *dir, struct verr *err);

/* Needs the job dir held (na_jobdir_create).  The image rootfs must have
 * /proc /sys /dev /tmp /run /var/tmp; bind targets outside /tmp, /run,
 * /var/tmp and /dev must exist in it.  Returns once the init runs, with
 * cpuset.cpus verified in the kernel. */
int na_ctr_start(const struct na_ctr_spec *s, struct na_ctr **out, struct verr *err);
/* The prestart hook a restore's config gets (nethook.c): runc runs it
 * once CRIU has made the guest's empty network namespace, before the
 * guest's sockets, and s->own_netns then gets that namespace.  _end
 * after `runc restore`: 0 when own_netns was called and succeeded. */
struct na_ctr_nethook;
struct json_object;
int na_ctr_nethook_begin(const struct na_ctr_spec *s, const char *dir, struct json_object *conf,
			 struct na_ctr_nethook **out, struct verr *err);
int na_ctr_nethook_end(struct na_ctr_nethook *h, struct verr *err);
/* Guest c, paused, into dirfd (an empty folder of root's) through `runc
 * checkpoint` (CRIU), its TCP connections included; it stays paused.
 * CRIU's log goes to work; its first error is in err. */
int na_ctr_checkpoint(struct na_ctr *c, int dirfd, const char *work, struct verr *err);
/* Takes over a running guest of a job whose dir this process holds after
 * na_jobdir_adopt (a restarted vhpcd); fails if its init is gone. */
int na_ctr_adopt(const char *job, int index, struct na_ctr **out, struct verr *err);
/* Its runc container id, <job>-<index>. */
const char *na_ctr_id(const struct na_ctr *c);
/* Host pid of the container's init, or -1 when it has exited. */
pid_t na_ctr_pid(const struct na_ctr *c);
bool na_ctr_running(struct na_ctr *c);
/* SIGTERM, wait up to grace_ms, then SIGKILL; removes the container and
 * its cgroups; frees c. */
int na_ctr_stop(struct na_ctr *c, int grace_ms, struct verr *err);
/* The same for all guests of a job at once (one grace period in all);
 * sets each cs[i] to NULL. */
int na_ctr_stop_all(struct na_ctr **cs, int n, int grace_ms, struct verr *err);

/* ---------------------------------------------------------------- pod */

/* The user and PID namespace a job's co-located guests share (pod.c). */
struct na_pod {
	pid_t pid;                 /* its init, on the host */
	int pidfd;
	char job[16];
};
/* Clones the pod's init (root inside is uid/gid outside) into cgroup
 * vhpc/<job>/pod.  Needs the job dir held. */
int na_pod_create(const char *job, uid_t uid, gid_t gid, struct na_pod *pod, struct verr *err);
/* Finds the pod a dead agent made for job (its init, alone in cgroup
 * vhpc/<job>/pod): 1 and *pod set, 0 when the job has none. */
int na_pod_adopt(const char *job, struct na_pod *pod, struct verr *err);
/* Kills its init, and with it whatever is still in its PID namespace, and
 * removes its cgroup (and the job's, once empty). */
void na_pod_destroy(struct na_pod *pod);

/* --------------------------------------------------------------- runc */

/* Path of the runc binary ($VHPC_RUNC, else the usual places, else PATH);
 * NULL when there is none. */
const char *na_runc_path(void);
/* Runs `runc --root <run>/runc [--log log] args...` with stdin /dev/null
 * and stdout+stderr to out_fd (or captured into err on failure when
 * out_fd < 0).  Kills it after timeout_ms. */
int na_runc(const char *const *args, int out_fd, const char *log,
	    int timeout_ms, struct verr *err);
/* Raises this process's hard RLIMIT_MEMLOCK to at least `bytes` where it
 * may (as root), for runc to inherit: runc 1.1 sets a guest's rlimits from
 * inside its user namespace, where a hard limit can only go down.  The
 * soft limit, the one that binds this process, stays.  Best effort: the
 * OCI config caps the guest's at what the hard limit is. */
void na_ctr_memlock_room(uint64_t bytes);
/* The driver's sweep op (drivers.h): job's containers under the runc root. */
int na_ctr_sweep(const char *job, const char *why, int *removed, struct verr *err);

/* --------------------------------------------------------- checkpoints */

/* ckpt.c: whether CRIU can checkpoint processes on this host at all (its
 * reason when not, asked once per process); runc pause and resume of one
 * guest (the cgroup freezer), each idempotent. */
int na_ctr_ckpt_probe(struct verr *err);
int na_ctr_pause(struct na_ctr *c, struct verr *err);
int na_ctr_resume(struct na_ctr *c, struct verr *err);
bool na_ctr_paused(struct na_ctr *c);
/* Whether CRIU can dump this guest's namespaces: its network namespace
 * must belong to its own user namespace (the reason when not). */
int na_ctr_ckpt_netns(struct na_ctr *c, struct verr *err);
/* Whether CRIU can save the guest init's stdin, stdout and stderr: a
 * regular file must be reachable through one of the guest's own mounts
 * (CRIU saves it by its path there): guestd's own output (--stdio, out.c)
 * is, a file the agent opened on the host is not. */
int na_ctr_ckpt_stdio(struct na_ctr *c, struct verr *err);

/* ------------------------------------------------------------- output */

/* out.c: guestd's output file `name` in the guest's output folder dir,
 * which the guest can write: opened through the folder's descriptor,
 * without following a link or blocking, and only if it is a regular file
 * of the job's user (uid) with one name; the reason, naming it, when not.
 * na_ctr_out_tail reads at most its last max bytes (NUL-terminated). */
int na_ctr_out_open(const char *dir, const char *name, uid_t uid, struct verr *err);
int na_ctr_out_tail(const char *dir, const char *name, uid_t uid, size_t max, char **out, size_t *len,
		    struct verr *err);
/* A checkpoint of the folder: each regular file the job's user owns with
 * one name, as vhpc-out.<name> in dirfd (CRIU's images are never named
 * so); anything else the guest put there is left out, saying so.  And
 * back into a new, empty folder for a restore, owned by uid:gid. */
int na_ctr_out_save(const char *dir, uid_t uid, int dirfd, struct verr *err);
int na_ctr_out_restore(int dirfd, const char *dir, uid_t uid, gid_t gid, struct verr *err);

/* ---------------------------------------------------------------- OCI */

struct json_object;
/* The OCI runtime config for a container (unit-tested on its own). */
int na_oci_config(const struct na_ctr_spec *s, const char *rootfs_path,
		  struct json_object **out, struct verr *err);
/* The rootfs of a job with host paths hb[n] (rootfs.c): out is an overlay
 * at <jobdir>/rootfs with their mountpoints over image, and 1 is returned;
 * 0 and out = image when none is needed. */
struct na_hbind;
int na_ctr_rootfs_make(const char *jobdir, const char *image, const struct na_hbind *hb, int n,
		       char *out, size_t len, struct verr *err);
void na_ctr_rootfs_remove(const char *jobdir);
/* The OCI linux.seccomp object every container guest gets (seccomp.c). */
struct json_object *na_seccomp_profile(void);

#endif
