/*
 * The node agent's own record of a job (struct na_job) and what the
 * lifecycle (job.c) and the drivers share about it.  Private to
 * nodeagent/: callers see struct na_job through nodeagent.h's accessors.
 */
#ifndef VHPC_NA_JOB_H
#define VHPC_NA_JOB_H

#include "nodeagent/nodeagent.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"
#include "nodeagent/place/place.h"

/* The vmshm region (vmshm.c). */
/* Creates <job dir>/vmshm/region in a tmpfs of its own (huge pages, memory
 * on the NUMA nodes of place[0..nguests-1]), zeroed, mode 0600, sized for
 * nranks ranks on this host (the vmshm BTL's layout); path, size and how
 * it is backed ("2 MiB pages, memory on node 0") out. */
int na_vmshm_create(const struct na_jobdir *jd, int nranks, const struct na_placement *place,
		    int nguests, char *path, size_t len, uint64_t *size, char *how, size_t howlen,
		    struct verr *err);
/* Where na_vmshm_create puts it, for a vhpcd that adopts the job. */
void na_vmshm_path(const struct na_jobdir *jd, char *path, size_t len);
/* Unmounts the region's tmpfs, which frees it (path as created). */
int na_vmshm_remove(const char *path, struct verr *err);

/* A job's host path, as this node's check found it (binds.c). */
struct na_hbind {
	int fd;                        /* O_PATH, opened by the user's own lookup:
	                                * what guests get, never src looked up again */
	char src[PATH_MAX];            /* where that lookup reached (messages, logs) */
	char dst[BIND_PATH_MAX];
	bool ro, dir;
	unsigned long flags;           /* the source mount's statvfs f_flag */
};
/* Each of l's sources exists here and the user (uid, gid and the groups
 * of that uid's passwd entry) may read it; out[i] for l->v[i], each with
 * its source open (na_binds_close; on failure none is left open). */
int na_binds_check(const struct bind_list *l, uid_t uid, gid_t gid, struct na_hbind *out, struct verr *err);
void na_binds_close(struct na_hbind *hb, int n);
/* Mounts b's open source at `at`, a new folder or file of root's made
 * here (nosuid, nodev, and read-only when b is): a path for a runtime
 * that binds by path, which no user can swap. */
int na_binds_mount(const struct na_hbind *b, const char *at, struct verr *err);

/* A started guest, whatever its driver; priv is the driver's. */
struct na_guest {
	const struct na_driver *drv;
	int index;                     /* job-wide */
	void *priv;
	bool tail_logged;              /* its logs' tails, once it stopped */
};

struct na_job {
	struct na_job_spec s;
	const struct na_driver *drv;   /* s.driver resolved and checked */
	char drv_why[256];             /* why that one, in words for users */
	bool emulated;                 /* kvm on a software-only KVM */
	bool no_fabric;                /* s.rdma, but drv has no guest netns to put it in */
	int vmshm_slots;               /* the sum of s.ranks */
	int ready_s;                   /* per guest, on hardware; the driver scales it */
	struct tuning tun;
	bool have_tun;
	const struct tuning *tuning;   /* &tun, or NULL */
	struct na_jobdir jd;
	bool have_jd;
	struct image_info img;
	struct na_placement *place;    /* [s.nguests] */
	struct na_net net;
	bool have_net;
	struct na_fabric fab;          /* s.rdma: the guests' part of the fabric */
	bool have_fab;
	char vmshm[PATH_MAX];          /* the job's region on the host, or "" */
	uint64_t vmshm_size;
	const char *movsb_env;         /* guests' GLIBC_TUNABLES, or NULL (na_movsb_env) */
	char shared[512];              /* <job dir>/shared: key, hosts, hostfile */
	char spool[512];               /* <job dir>/spool when s.spool_size */
	bool spool_mounted;
	struct na_guest *g;            /* [s.nguests]; g[k].priv NULL until started */
	struct na_hbind *hb;           /* [nhb]: s.binds as checked here */
	int nhb;
	void *drv_job;                 /* the driver's state for the job */
	bool ckpt_damaged;             /* a restore op said NA_RESTORE_DAMAGED */
};

/* The environment guestd starts with (struct na_guest_env, nodeagent.h):
 * PATH, HOME, the job key's path, the job, the guest's index (index < 0:
 * left out), and the vmshm BTL's settings when host_id is given
 * (VHPC_HOST_ID, VHPC_VMSHM_PATH, VHPC_VMSHM_SLOTS). */
const char *const *na_guest_env(struct na_guest_env *e, const char *job, int index,
				const char *host_id, int vmshm_slots);
/* Adds NAME=VALUE (a string that outlives e) to what na_guest_env gave. */
void na_guest_env_add(struct na_guest_env *e, const char *name_value);
/* Adds what a job's ranks need for vmshm beyond na_guest_env's settings,
 * the same for every driver: VHPC_VMSHM_SINGLE_COPY=1 where
 * na_job_single_copy, and the glibc setting of na_movsb_env.  Nothing for
 * a job without a vmshm region. */
void na_guest_env_vmshm(struct na_guest_env *e, const struct na_job *j);
/* What guests whose ranks copy through vmshm rings get to keep glibc's
 * memcpy off `rep movsb` (lib/vmshm/vmshm_copyprobe.h): *env is the
 * GLIBC_TUNABLES entry or NULL.  This agent measures once whether the CPU
 * needs it (*ratio: slow/fast time at short distance, 0 if not measured);
 * VHPC_AVOID_MOVSB=1 or 0 decides instead.  -1 on another value. */
int na_movsb_env(const char **env, double *ratio, struct verr *err);

#endif
