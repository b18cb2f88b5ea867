/*
 * The node agent's public surface: what `vhpc run` (embedded) and vhpcd
 * call to place, network, start and remove the guests of a job on this node.
 * Other components include this one only; place/, jobdir/, net/ and
 * drivers/ are the agent's own (nodeagent/README.md has the layout).
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
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------- this machine */

/* Its topology (hwloc), loaded once by a caller and passed in job specs.
 * spec: NULL = this machine; "synthetic:pack:2 numa:2 core:8 pu:2" = an
 * hwloc synthetic description; a path ending .xml = an hwloc XML export. */
struct na_topo;
int na_topo_load(struct na_topo **out, const char *spec, struct verr *err);
void na_topo_free(struct na_topo *t);
/* Keeps only the PUs (os indexes) in cpus, dropping NUMA nodes left without
 * any: a node agent that owns part of a machine (one per socket, or the
 * "nodes" of a test cluster on one host). */
int na_topo_restrict(struct na_topo *t, const int *cpus, int n, struct verr *err);
/* The PUs (os indexes) of cores given by hwloc logical index, the way
 * Slurm numbers a node's cores (S_JOB_ALLOC_CORES): *pus is malloc'd.  An
 * error names a core the topology lacks. */
int na_topo_core_pus(const struct na_topo *t, const int *cores, int n, int **pus, int *npus, struct verr *err);
struct na_numa_info {
	int os_index;          /* host NUMA node number */
	int ncores;
	uint64_t mem_bytes;    /* memory of the node (0 when hwloc cannot tell) */
	uint64_t hugepages_2m_free;
};
/* Fills up to max entries; returns the number of NUMA nodes. */
int na_topo_numa(const struct na_topo *t, struct na_numa_info *out, int max);
/* Host CPUs pinned by the jobs of this run dir (from their runtime dirs):
 * live ones, and dead ones until na_cleanup_stale has removed their guests
 * (which may still run).  *cpus is malloc'd. */
int na_busy_cpus(int **cpus, int *n, struct verr *err);

/* Job ids are [a-z0-9]{1,12}: they become parts of netns, cgroup, runc and
 * file names, and '-' separates the guest index in those names. */
bool na_job_ok(const char *job);
/* Whether the job's dir exists and its lock is held (by anyone). */
bool na_jobdir_alive(const char *job);
/* Removes every resource (netns, links, containers, cgroups, mounts, shm
 * files, runtime dirs) of jobs whose runtime dir is not locked.  Counts what
 * it removed in *removed and logs each item.  Jobs with a held lock, and
 * resources of jobs that have no dir in this run dir, are never touched. */
int na_cleanup_stale(int *removed, struct verr *err);
/* Moves the calling process into <every hierarchy>/<rel> (made if
 * missing): out of whatever cgroups it was started in, such as a
 * scheduler's, which would otherwise stop it with them. */
int na_cgroup_enter(const char *rel, struct verr *err);
/* Back to each hierarchy's root, and <rel> removed unless another process
 * is still in it. */
void na_cgroup_leave(const char *rel);

/* ------------------------------------------------------------- drivers */

struct na_driver;

/* The driver named want (lib/drivers.h), or for NULL or "auto" the first
 * in the table that suits this host (kvm with hardware virtualization,
 * else container); NULL with err when no driver has that name.  *why says
 * which and why, in words for users (thread-local, valid until the next
 * call).  A driver asked for by name is returned as asked: na_driver_check
 * says whether it can run here. */
const struct na_driver *na_driver_resolve(const char *want, const char **why, struct verr *err);
/* The same for a job: with fabric, "auto" picks only among the drivers
 * that give their guests the RDMA fabric (a network namespace each). */
const struct na_driver *na_driver_resolve_for(const char *want, bool fabric, const char **why, struct verr *err);
/* 0 when driver d can run on this host, else -1 with the reason (kvm
 * without hardware virtualization; container without runc). */
int na_driver_check(const struct na_driver *d, struct verr *err);
const char *na_driver_name(const struct na_driver *d);

/* ---------------------------------------- one job's part on this node */

/*
 * The one place that orders a job's life on this node, for every caller:
 * `vhpc run`'s embedded agent (a whole job), vhpcd (its share of a cluster
 * job) and the Slurm holder (its node's share of an allocation).  A caller
 * describes the job once (struct na_job_spec), calls na_job_start, talks to
 * the guests through the accessors below, and calls na_job_stop; or takes
 * over what a dead agent left running with na_job_adopt.  The agent
 * resolves and checks the driver, loads the tuning profile, owns the
 * deadlines, makes everything in order (job dir, placement, network, vmshm
 * region, the files every guest reads, the driver's own steps and the
 * guests) and waits until every guest's agent is ready.  The guest driver
 * is behind an ops table (nodeagent/drivers/drivers.h): nothing here or in
 * the callers asks which driver it is.
 */

/* A job as the node agent starts it: the same description whoever asks. */
struct na_job_spec {
	const char *label;             /* VHPC_JOB inside the guests */
	const char *driver;            /* its name, as asked (na_driver_resolve):
	                                * NULL or "auto" for what suits the host */
	bool allow_emulated;           /* kvm may start on a software-only KVM, where
	                                * guests do not finish booting (`vhpc run
	                                * --allow-emulated-kvm`, driver tests) */
	int nguests;                   /* guests on this node */
	const int *index;              /* their job-wide indexes; NULL = 0..nguests-1 */
	int ntotal;                    /* guests of the whole job */
	const int *ranks;              /* ranks of every guest of the job [ntotal]: their
	                                * sum is what the vmshm region has slots for */
	struct ipv4net subnet;         /* guest i of the job is subnet + 2 + i, named g<i> */
	/* subnet.prefix 0: a free one from this cluster's pool, recorded in
	 * the job dir (na_subnet_alloc), for jobs of one machine. */
	const struct cluster_cfg *subnet_pool;
	int guest_port;
	const char *image;
	/* The image itself, when the caller has it already (vhpcd: pulled
	 * into its cache by id, mounted); NULL: image_ensure(image) here. */
	const struct image_info *img;
	bool verify_image;             /* hash it against its id before any guest starts */
	/* Which images may start guests (images: of this node's own cluster
	 * file: require_signed, trusted_keys); NULL: read from the cluster
	 * file here.  Never from the job or the controller. */
	const struct cluster_images *image_policy;
	const char *tuning;            /* the tuning profile's name (tuning_load) */
	const struct na_topo *topo;
	int vcpus;                     /* per guest */
	uint64_t mem;                  /* per guest */
	bool oversubscribe;
	bool vmshm;                    /* a vmshm region for the guests here (2 or more) */
	bool single_copy;              /* with vmshm, the container driver's pod (its
	                                * single copy); false: no pod, so runc can
	                                * checkpoint the guests */
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
	/* A job across nodes (vhpcd, Slurm): the VXLAN joining its bridges. */
	uint32_t vni, underlay;
	const uint32_t *peers;
	int npeers;
	const uint32_t *guest_node;    /* [ntotal] each guest's node's underlay
	                                * address, or NULL (nodeagent/net/net.h) */
	const struct cluster_wg *wg;   /* underlay encryption, or NULL */
	long long job_timeout_s;       /* the job's limit: an emulated guest waits that long */
	/* The cluster's fabric (RDMA; issue 34, nodeagent/README.md): each
	 * guest gets an interface of its own on the node's fabric link, in the
	 * job's VLAN (RoCE) or partition (InfiniBand), and an RDMA device on
	 * it that no other job can see.  Guest i of the job has address
	 * fabric_subnet + 2 + i there.  rdma false: TCP only.  Only a driver
	 * whose guests have a network namespace of their own gives them the
	 * fabric (container): with driver "auto" such a driver is picked; a
	 * driver asked by name that cannot runs the job over TCP, unless
	 * rdma_asked (the user said --rdma), which refuses the job. */
	bool rdma;
	bool rdma_asked;
	const char *fabric_link;       /* the node's netdev on the fabric */
	int fabric_vlan;               /* 1..4094: the job's VLAN on it; 0 = none */
	uint16_t fabric_pkey;          /* InfiniBand partition key; 0 = none */
	struct ipv4net fabric_subnet;
	/* PCI functions for passthrough (kvm: VFIO): pci[i] ("0000:00:05.0")
	 * goes to this node's guest pci_guest[i] (0..nguests-1).  Each must be
	 * on fabric_node's list, the admin's (the cluster file's entry for
	 * this node, fabric.nodes[].pci; NULL: none may be), which the driver
	 * checks again, never trusting a function because it exists. */
	const char *const *pci;
	const int *pci_guest;
	int npci;
	const struct cluster_fabric_node *fabric_node;
	/* Written to <job dir>/job.json (0600) before anything else is made,
	 * for whoever takes the job over after a crash (vhpcd); NULL: none. */
	const char *record;
	/* restore: the guests come from a checkpoint, ckpt_fd its folder
	 * (<dir>/<name>, na_ckpt_open; its part file already verified):
	 * the vmshm region from vmshm.g<first>, each guest through the
	 * driver's restore from g<i>/, left paused, not waited for ready
	 * (its agent answers once job_resume lets it run). */
	bool restore;
	int ckpt_fd;
	/* Polled while starting: a job stopped or interrupted meanwhile. */
	int (*cancelled)(void *arg, struct verr *err);
	void *cancel_arg;
};

/* The job-level fields of s (driver, image, tuning, vcpus, mem,
 * oversubscribe, vmshm, single_copy, scratch, job_timeout_s, guest_port) from the job
 * as its user described it, each left out taking the cluster's default:
 * the same meaning for `vhpc run` and Slurm.  The rest is the caller's:
 * which guests are here, their network, user, key and host. */
struct job_spec;
void na_job_spec_from(struct na_job_spec *s, const struct job_spec *js, const struct cluster_cfg *cl);

/* The agent's own record of a job (nodeagent/job.h): callers hold a
 * pointer and read it through the accessors below. */
struct na_job;

/* The seconds a guest may take to become ready on hardware, before the
 * driver scales them to this machine: 60, or $VHPC_READY_TIMEOUT. */
#define NA_READY_TIMEOUT_S 60

/* Starts this node's guests of job `local` (the job dir's name, 1..12 of
 * [a-z0-9]) as s describes them, and returns once every guest's agent says
 * it is ready: the driver resolved and checked first, then the job dir
 * (from there on a crash leaves something na_cleanup_stale or an adopter
 * finds), s->record, the subnet, the tuning profile, the image, placement,
 * network, vmshm region, the guests.  What s points to must outlive the
 * job.  *jp is set whether it succeeds or not (NULL only when out of
 * memory), and na_job_stop(*jp) undoes what was made. */
int na_job_start(struct na_job **jp, const char *local, const struct na_job_spec *s, struct verr *err);
/* Asks each guest agent to shut down, stops the guests (one grace period
 * in all), then removes the network, region, mounts and job dir: errors
 * are logged, so one stuck piece leaves nothing else behind.  Frees j
 * (NULL: nothing to do). */
void na_job_stop(struct na_job *j);
/* Takes over the guests a dead agent left running in job dir `local`, as s
 * describes the job (nothing is made or changed); na_job_stop as after
 * na_job_start. */
int na_job_adopt(struct na_job **jp, const char *local, const struct na_job_spec *s, struct verr *err);

/* After na_job_start failed: whether it was restoring a guest whose saved
 * state the driver found damaged (a snapshot cut short or changed, though
 * the part's sha256 file matched), which no other attempt can restore. */
bool na_job_ckpt_damaged(const struct na_job *j);

/* Reading a started job (job_access.c): k indexes this node's guests. */
const char *na_job_driver_name(const struct na_job *j);
/* Whether a checkpoint must wait until no vhpc exec or vhpc shell session
 * is open into the job's guests (drivers.h, ckpt_no_sessions). */
bool na_job_ckpt_no_sessions(const struct na_job *j);
int na_job_nguests(const struct na_job *j);
/* Guest k's address on the job network (0 for no such guest). */
uint32_t na_job_guest_addr(const struct na_job *j, int k);
/* Where guest k is, for whoever joins it from the host (Slurm's tasks). */
struct na_guest_info {
	int index;                     /* job-wide */
	uint32_t addr;                 /* on the job network */
	char netns[64];                /* its network namespace (/run/netns), "" for a VM */
	char cpus[256], mems[64];      /* its placement, as cpu lists */
};
int na_job_guest_info(const struct na_job *j, int k, struct na_guest_info *gi, struct verr *err);
/* The job dir, and the job key's file in it (what guests read at /vhpc). */
const char *na_job_dir(const struct na_job *j);
void na_job_key_path(const struct na_job *j, char *buf, size_t len);
/* Whether this node's guests share a vmshm region. */
bool na_job_has_vmshm(const struct na_job *j);
/* Whether its guests have the RDMA fabric (na_job_spec.rdma, and a driver
 * that gives it). */
bool na_job_has_fabric(const struct na_job *j);
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
/* Runs r's command in guest k and waits, as gexec_run does (its return
 * values), except that the wait also ends, with the reason, when any guest
 * of the job here stops meanwhile (r->gone is the agent's own). */
struct gexec_req;
int na_job_run(struct na_job *j, int k, const struct gexec_req *r, int *status, struct verr *err);
/* Guest 0's spool (detached commands' output) as a host path, or NULL
 * when its driver keeps it inside the guest; either way the output is read
 * over the guest channel (gexec_output). */
const char *na_job_spool(const struct na_job *j);
/* Whether the job's ranks in different guests here may copy large messages
 * once, straight from each other's memory (VHPC_VMSHM_SINGLE_COPY=1 for
 * the vmshm BTL): the container driver's guests of a pod, which a job
 * without single_copy does not get. */
bool na_job_single_copy(const struct na_job *j);
/* The environment vhpc-guestd starts with, which orted and the ranks
 * inherit: PATH, HOME, the job key's path, the job, the guest's index
 * (index < 0: left out), and the vmshm BTL's settings when host_id is given
 * (VHPC_HOST_ID, VHPC_VMSHM_PATH, VHPC_VMSHM_SLOTS).  e->v is
 * NULL-terminated and lives as long as e. */
struct na_guest_env {
	char job[80], index[32], host[192], slots[48];
	const char *v[12];
};
/* That environment for guest `index` of j (-1: left out), with what a
 * job's ranks need for vmshm where it has a region here. */
const char *const *na_job_guest_env(const struct na_job *j, struct na_guest_env *e, int index);

/* What guest k of this node has used so far, from its cgroups: CPU time
 * (microseconds, every thread of the guest: a kvm guest's vhpc-hv, vCPUs
 * and device model, and its virtiofsd) and the peak of its memory (bytes),
 * each -1 where this host's cgroups do not say (job_usage.c).  Read it
 * just before na_job_stop, which removes the cgroups. */
struct na_guest_usage {
	int index;                     /* job-wide */
	int64_t cpu_usec, mem_peak;
};
/* out[k] for each of na_job_nguests(j) guests. */
void na_job_usage(const struct na_job *j, struct na_guest_usage *out);

/* Checkpoints of a started job's guests here (job_ckpt.c; issue 36,
 * scheduler/PROTOCOL.md's job_checkpoint, job_pause, job_resume). */
/* Whether every guest of j here can be checkpointed, and when not, why
 * (the driver's reason, naming the part it cannot take); changes
 * nothing. */
int na_job_ckpt_check(const struct na_job *j, struct verr *err);
/* Stops every guest of j here from running, and lets them run again.
 * Both idempotent; pause undoes what it did when one guest fails. */
int na_job_pause(struct na_job *j, struct verr *err);
int na_job_resume(struct na_job *j, struct verr *err);
/* Whether any guest of j here is paused (after a takeover: a vhpcd killed
 * during a checkpoint left them so); false where the driver cannot say. */
bool na_job_paused(struct na_job *j);

/* The checkpoint folder (ckpt_dir.c; nodeagent/README.md, "Checkpoints").
 * Every call takes a descriptor and a name, never a path a user could
 * change; each folder opened must be root's with mode 0700. */
/* checkpoints.dir (absolute), made 0700 when create and missing. */
int na_ckpt_root_open(const char *dir, bool create, struct verr *err);
/* <root>/<name> for a checkpoint's name (lib/ckptname.h). */
int na_ckpt_open(int root, const char *name, bool create, struct verr *err);
/* A folder of the checkpoint's (g<i>, spool), no link followed. */
int na_ckpt_subdir(int dirfd, const char *name, bool create, struct verr *err);
/* name under dirfd and all below it (a node's partial files). */
int na_ckpt_remove(int dirfd, const char *name, struct verr *err);
/* part.g<first>.sha256: the part file of the node whose lowest guest is
 * first. */
void na_ckpt_part_name(int first, char *buf, size_t len);
/* Writes the part file for the n files rel[] (names under cfd of one or
 * two components), last and atomically: sizes and sha256 sums in
 * sha256sum's format. */
int na_ckpt_part_seal(int cfd, int first, const char *const *rel, int n, struct verr *err);
/* Whether every file the part file names has its size and sha256; the
 * error names the first that does not (or the part file).  -1: the part
 * is damaged (a file changed, truncated, missing or not a regular file, a
 * bad part file), which no later attempt can mend; -2: it could not be
 * checked, the machine being short of memory or descriptors. */
int na_ckpt_part_verify(int cfd, int first, struct verr *err);
/* Whether errno e says the machine was short of something (memory,
 * descriptors), not that a checkpoint's file is wrong. */
bool na_ckpt_short_errno(int e);

/* Saving this node's part of a checkpoint (job_ckpt_save.c): j's guests
 * here, paused, into <root>/<name>/ (g<i>/ through the driver, vmshm.g<f>,
 * guest 0's host spool, part.g<f>.sha256 last).  On failure everything
 * of this node's part is removed, the guests stay paused, and err names
 * the path and the reason. */
struct na_ckpt_saved {
	uint64_t bytes;                /* on disk, all files of the part */
	int nguests;
	struct {
		int index;             /* job-wide */
		uint64_t bytes;
	} g[VHPC_MAX_GUESTS];
};
int na_job_ckpt_save(struct na_job *j, const char *dir, const char *name, struct na_ckpt_saved *out,
		     struct verr *err);

/* This machine's boot id: the same for every guest here, different on any
 * other host (the vmshm BTL's idea of "same host"). */
const char *na_boot_id(void);

#endif
