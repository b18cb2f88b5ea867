/*
 * The node agent's public surface: what `vhpc run` (embedded) and vhpcd
 * call to place, network, start and remove the guests of a job on this node.
 * It includes the public headers of place/, jobdir/ and net/ that the
 * lifecycle's structs are made of; other components include this one only
 * (nodeagent/README.md has the layout).
 *
 * Resource naming is part of this contract, because crash recovery finds
 * leftovers by name (see na_cleanup_stale):
 *   job runtime dir   <run dir>/jobs/<job>/          (lock file "lock")
 *   job netns         vhpc-<job>                     (/run/netns)
 *   guest netns       vhpc-<job>-<guest index>
 *   containers        runc id <job>-<guest index>, runc root <run dir>/runc
 *   cgroups           <hierarchy root>/vhpc/<job>/<guest index>, in every
 *                     cgroup v1 hierarchy and the cgroup2 one
 *   container bundle  <job dir>/g<guest index>/ (rootfs: a read-only bind)
 *   shm files         /dev/shm/vhpc-<job>-*
 *   VXLAN (cluster)   vxlan0 inside the job netns; its UDP socket lives in
 *                     the namespace of the vhpcd that made it
 *   host paths        container guests: <job dir>/binds/<i>, each the
 *                     job's bind i mounted from its checked descriptor
 *   kvm guests        vhpc-hv processes in the cgroups above (cpuset,
 *                     memory and cgroup2); tap t<guest index> on the bridge
 *                     of the job netns; <job dir>/config.ext4 (config disk);
 *                     --scratch disks have no name (the scratch folder's
 *                     unnamed files, gone with vhpc-hv); per guest
 *                     a small tmpfs <job dir>/kvm<i>/ holding vsock (and
 *                     vsock_<port>), ctl (vhpc-hv's control socket), serial
 *                     (console log), hv.log and pid (vhpc-hv's, for an
 *                     agent that takes the guest over)
 * A job id is 1..12 characters [a-z0-9].
 *
 * Several node agents may share one machine (test clusters: one network
 * namespace and one vhpcd per "node"), and netns, cgroup and shm names are
 * machine-wide.  So in a cluster the job id a node agent uses is not the
 * scheduler's job number but a per-node id, <job number in base 36>x<node
 * number in base 36> (vhpc-ctld makes it; `vhpc run` ids are hex and never
 * contain an x): every name above is then unique per node and job, and the
 * crash sweep of one node's run dir (each vhpcd has its own VHPC_RUN_DIR)
 * can never touch another node's guests.  Guest indexes are job-wide, so a
 * guest's netns, container and address name the same guest on every node.
 *
 * Link a program with $(NODEAGENT_LIBS) (nodeagent/module.mk).
 */
#ifndef VHPC_NODEAGENT_H
#define VHPC_NODEAGENT_H

#include "lib/chan.h"
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/binds.h"
#include "lib/jobspec.h"
#include "lib/tuning.h"
#include "images/images.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"
#include "nodeagent/place/place.h"
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---------------------------------------------------------- vmshm region */

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

/* ------------------------------------------------------------- drivers */

/* `auto` resolves to kvm only with hardware virtualization, else container;
 * *why says which and why, in words for users (thread-local, valid until
 * the next call).  A driver asked for by name is returned as asked:
 * na_driver_check says whether it can run here. */
enum vhpc_driver na_driver_resolve(enum vhpc_driver want, const char **why);
/* 0 when driver d can run on this host, else -1 with the reason (kvm
 * without hardware virtualization; container without runc). */
int na_driver_check(enum vhpc_driver d, struct verr *err);

/* The checks of na_driver_check, except that kvm on a software-only KVM
 * (no VT-x/AMD-V) passes when allow_emulated is set: guests then start but
 * do not finish booting (tests of the driver, experts).  *emulated says
 * whether that is the case.  $VHPC_KVM_ALLOW_EMULATION=1 sets allow_emulated
 * too; another value than 0 or 1 there is an error. */
int na_driver_check_kvm(bool allow_emulated, bool *emulated, struct verr *err);

/* ---------------------------------------- one job's part on this node */

/*
 * The lifecycle both schedulers use for the guests of a job on this node
 * (`vhpc run`'s embedded agent for a whole job, vhpcd for its share of a
 * cluster job): open the job dir, prepare (image, placement, network,
 * vmshm region, the files every guest reads, then the driver's own steps
 * and the guests), wait until every guest agent is ready, run, tear down;
 * or adopt what a dead agent left running.  The guest driver is behind an
 * ops table (nodeagent/drivers/drivers.h): nothing here or in the callers asks
 * which driver it is.
 */
struct na_driver;

/* The driver table's entry for a resolved driver (na_driver_resolve). */
const struct na_driver *na_driver_get(enum vhpc_driver d);
const char *na_driver_name(const struct na_driver *d);
/* Whether this host can run it; allow_emulated (only for a driver with
 * na_driver_emulation) lets it start where it cannot finish booting, and
 * *emulated says so. */
int na_driver_check_with(const struct na_driver *d, bool allow_emulated, bool *emulated, struct verr *err);
bool na_driver_emulation(const struct na_driver *d);

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

struct na_job_spec {
	const char *label;             /* VHPC_JOB inside the guests */
	const struct na_driver *drv;   /* checked (na_driver_check_with) */
	bool emulated;                 /* what that check said: kvm on a software-only KVM */
	int nguests;                   /* guests on this node */
	const int *index;              /* their job-wide indexes; NULL = 0..nguests-1 */
	int ntotal;                    /* guests of the whole job */
	const int *ranks;              /* ranks of every guest of the job [ntotal] */
	struct ipv4net subnet;         /* guest i of the job is subnet + 2 + i, named g<i> */
	int guest_port;
	const char *image;
	/* The image itself, when the caller has it already (vhpcd: pulled
	 * into its cache by id, mounted); NULL: image_ensure(image) here. */
	const struct image_info *img;
	bool verify_image;             /* hash it against its id before any guest starts */
	const struct tuning *tuning;
	const struct na_topo *topo;
	int vcpus;                     /* per guest */
	uint64_t mem;                  /* per guest */
	bool oversubscribe;
	bool vmshm;                    /* a vmshm region for the guests here (2 or more) */
	int vmshm_slots;               /* ranks of the whole job */
	const char *host_id;           /* the vmshm BTL's "same host" */
	uint64_t scratch;              /* each guest's /scratch; 0 = none */
	const struct bind_list *binds; /* host paths in every guest; NULL = none */
	uint8_t key[CHAN_KEY_LEN];     /* the job's guest channel key */
	/* The job's user: what runs in the guests is this uid and gid on the
	 * host, and the files the guests use (key, spool, vmshm region) are
	 * theirs. */
	uid_t uid;
	gid_t gid;
	uint64_t spool_size;           /* > 0: guest 0 is here and runs detached
	                                * commands (vhpcd's launcher) into a spool
	                                * of this size (a host tmpfs the container
	                                * driver binds; a kvm guest's own /run) */
	/* A job across nodes (vhpcd): the VXLAN joining its bridges. */
	uint32_t vni, underlay;
	const uint32_t *peers;
	int npeers;
	const uint32_t *guest_node;    /* [ntotal] each guest's node's underlay
	                                * address, or NULL (nodeagent/net/net.h) */
	const struct cluster_wg *wg;   /* underlay encryption, or NULL */
	int ready_timeout_s;           /* per guest, on hardware; the driver scales it */
	long long job_timeout_s;       /* the job's limit: an emulated guest waits that long */
	/* Polled while waiting: a job stopped or interrupted meanwhile. */
	int (*cancelled)(void *arg, struct verr *err);
	void *cancel_arg;
};

/* A started guest, whatever its driver; priv is the driver's. */
struct na_guest {
	const struct na_driver *drv;
	int index;                     /* job-wide */
	void *priv;
};

struct na_job {
	struct na_job_spec s;
	bool emulated;
	struct na_jobdir jd;
	bool have_jd;
	struct image_info img;
	struct na_placement *place;    /* [s.nguests] */
	struct na_net net;
	bool have_net;
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
};

/* The job dir (and its lock) for local job id `job`: first, so that from
 * here on a crash leaves something na_cleanup_stale or an adopter finds. */
int na_job_open(struct na_job *j, const char *job, struct verr *err);
/* Everything up to running guests; s is copied (what it points to must
 * outlive j).  On failure what was made stays for na_job_teardown. */
int na_job_prepare(struct na_job *j, const struct na_job_spec *s, struct verr *err);
/* Until every guest's agent says ready; fails when one stops first (its
 * log's last lines logged) or its time is up. */
int na_job_wait_ready(struct na_job *j, struct verr *err);
/* Whether a guest has stopped; *why says which and how. */
bool na_job_guest_gone(struct na_job *j, char *why, size_t len);
/* How a process on the host reaches guest k (of this node) without the
 * agent's help, e.g. a Slurm task that runs inside it: its agent's unix
 * socket (for a VM, the VMM's vsock bridge, where vsock_port is asked
 * for: gexec_connect_vsock), and for a container the host pid of its init,
 * whose namespaces such a process joins (0 for a VM). */
struct na_guest_access {
	char sock[512];
	unsigned vsock_port;
	pid_t init_pid;
};
int na_job_guest_access(struct na_job *j, int k, struct na_guest_access *a, struct verr *err);
/* An authenticated channel to guest k's agent (k indexes this node's guests). */
int na_job_connect(struct na_job *j, int k, struct chan *c, int timeout_ms, struct verr *err);
/* Asks each guest agent to shut down, stops the guests (one grace period
 * in all), then removes the network, region, mounts and job dir: errors
 * are logged, so one stuck piece leaves nothing else behind.  Frees j's
 * arrays. */
void na_job_teardown(struct na_job *j);
/* Takes over the guests a dead agent left running in job dir `job`, as s
 * describes the job (nothing is made or changed). */
int na_job_adopt(struct na_job *j, const char *job, const struct na_job_spec *s, struct verr *err);
/* Guest 0's spool (detached commands' output) as a host path, or NULL
 * when its driver keeps it inside the guest; either way the output is read
 * over the guest channel (gexec_output). */
const char *na_job_spool(const struct na_job *j);
/* Whether the job's ranks in different guests here may copy large messages
 * once, straight from each other's memory (VHPC_VMSHM_SINGLE_COPY=1 for
 * the vmshm BTL): the container driver's guests of a pod. */
bool na_job_single_copy(const struct na_job *j);
/* Makes path (a file or dir of the job's) belong to the job's user. */
int na_job_give_user(const struct na_job *j, const char *path, struct verr *err);

/* The environment vhpc-guestd starts with, which orted and the ranks
 * inherit: PATH, HOME, the job key's path, the job, the guest's index
 * (index < 0: left out), and the vmshm BTL's settings when host_id is given
 * (VHPC_HOST_ID, VHPC_VMSHM_PATH, VHPC_VMSHM_SLOTS).  e->v is
 * NULL-terminated and lives as long as e. */
struct na_guest_env {
	char job[80], index[32], host[192], slots[48];
	const char *v[12];
};
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

/* This machine's boot id: the same for every guest here, different on any
 * other host (the vmshm BTL's idea of "same host"). */
const char *na_boot_id(void);

#endif
