/*
 * The node agent's public surface: what `vhpc run` (embedded) and vhpcd
 * call to place, network, start and remove the guests of a job on this node.
 * Everything else under nodeagent/ is private to it.
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
 *   kvm guests        vhpc-hv processes in the cgroups above (cpuset and
 *                     cgroup2); tap t<guest index> on the bridge of the job
 *                     netns; <job dir>/config.ext4 (config disk),
 *                     <job dir>/scratch<i>.ext4 (--scratch); per guest
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
 * Build into a program with $(NODEAGENT_SRCS) and $(NODEAGENT_LIBS)
 * (nodeagent/module.mk).
 */
#ifndef VHPC_NODEAGENT_H
#define VHPC_NODEAGENT_H

#include "lib/chan.h"
#include "lib/cluster.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/jobspec.h"
#include "lib/tuning.h"
#include <sys/types.h>

/* ------------------------------------------------------------- topology */

struct na_topo;

/* spec: NULL = this machine; "synthetic:pack:2 numa:2 core:8 pu:2" = an
 * hwloc synthetic description; a path ending .xml = an hwloc XML export. */
int na_topo_load(struct na_topo **out, const char *spec, struct verr *err);
void na_topo_free(struct na_topo *t);
/* Keeps only the PUs (os indexes) in cpus, dropping NUMA nodes left without
 * any: a node agent that owns part of a machine (one per socket, or the
 * "nodes" of a test cluster on one host). */
int na_topo_restrict(struct na_topo *t, const int *cpus, int n, struct verr *err);

struct na_numa_info {
	int os_index;          /* host NUMA node number */
	int ncores;
	uint64_t mem_bytes;    /* memory of the node (0 when hwloc cannot tell) */
	uint64_t hugepages_2m_free;
};
/* Fills up to max entries; returns the number of NUMA nodes. */
int na_topo_numa(const struct na_topo *t, struct na_numa_info *out, int max);

/* ------------------------------------------------------------ placement */

struct na_place_req {
	int nguests;
	int vcpus;             /* per guest */
	uint64_t mem;          /* per guest */
	bool oversubscribe;    /* allow guests to share host cores */
	/* Host CPUs (PU os indexes) already pinned by other live jobs. */
	const int *busy_cpus;
	int nbusy;
};

struct na_placement {
	int ncpus;
	int cpus[VHPC_MAX_VCPUS];  /* host PU os index for vCPU i: 1:1 pinning */
	int nmems;
	int mems[VHPC_MAX_NODES];  /* host NUMA nodes holding the guest's memory */
	bool split;              /* did not fit on one NUMA node */
	bool shared;             /* shares cores with another guest (oversubscribe) */
};

/* One placement per guest in out[0..nguests-1].  A guest's cores and memory
 * sit on one NUMA node when they fit there (best fit), else spread over the
 * fewest nodes, one package first (split; mems[0] is the node of its first
 * core).  One vCPU per physical core, pinned to the core's first PU; the
 * SMT siblings stay idle and go to no other guest.  A busy PU makes its
 * whole core busy.  Without oversubscribe no two guests share a core; with
 * it, placement is still exclusive when that fits, else vCPUs spread over
 * the least loaded cores, shared is set and a warning logged.  Fails with a
 * message that says what was asked, what did not fit and what is free. */
int na_place(const struct na_topo *t, const struct na_place_req *r,
	     struct na_placement *out, struct verr *err);

/* Host CPUs pinned by the jobs of this run dir (from their runtime dirs):
 * live ones, and dead ones until na_cleanup_stale has removed their guests
 * (which may still run).  *cpus is malloc'd. */
int na_busy_cpus(int **cpus, int *n, struct verr *err);

struct na_jobdir;
/* na_busy_cpus + na_place + na_jobdir_record_cpus under one run-dir lock,
 * so two jobs placed at the same moment never get the same cores.  The
 * request's own busy_cpus are added to those of the other jobs. */
int na_place_job(const struct na_topo *t, const struct na_place_req *r,
		 struct na_jobdir *jd, struct na_placement *out, struct verr *err);

/* ------------------------------------------------------- job runtime dir */

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
/* Whether the job's dir exists and its lock is held (by anyone). */
bool na_jobdir_alive(const char *job);
/* Records the placement so na_busy_cpus sees it. */
int na_jobdir_record_cpus(struct na_jobdir *jd, const struct na_placement *p,
			  int n, struct verr *err);
/* Removes the dir and releases the lock, after every resource is gone:
 * whatever is still there by the naming rules (containers, netns, cgroups,
 * mounts, shm files) is removed first, with a warning. */
int na_jobdir_remove(struct na_jobdir *jd, struct verr *err);

/* Removes every resource (netns, links, containers, cgroups, mounts, shm
 * files, runtime dirs) of jobs whose runtime dir is not locked.  Counts what
 * it removed in *removed and logs each item.  Jobs with a held lock, and
 * resources of jobs that have no dir in this run dir, are never touched. */
int na_cleanup_stale(int *removed, struct verr *err);

/* ------------------------------------------------------------ job network */

#define NA_VXLAN_PORT     4789
/* Outer Ethernet (14) + IPv4 (20) + UDP (8) + VXLAN (8) headers. */
#define NA_VXLAN_OVERHEAD 50

struct na_net_req {
	const char *job;
	struct ipv4net subnet;   /* the job's subnet */
	int nguests;             /* guests on this node */
	const struct tuning *tuning; /* MTU, offloads, sysctls (applied per guest netns) */
	/* A job across nodes (vhpcd); zero/NULL on one machine: */
	const int *index;        /* job-wide index of each guest here (NULL: 0..nguests-1):
	                            its address is subnet + 2 + index, its netns
	                            vhpc-<job>-<index>, its veth on the bridge v<index> */
	uint32_t vni;            /* VXLAN id joining the job's bridges on all its
	                            nodes (1..VHPC_VNI_MAX; 0 = no VXLAN) */
	uint32_t underlay;       /* this node's address the VXLAN runs over */
	const uint32_t *peers;   /* the job's other nodes' underlay addresses */
	int npeers;
	bool no_guest_netns;     /* kvm: the guests are VMs, each with a tap on the
	                          * bridge (na_kvm_start), so no guest netns/veth */
};

struct na_net {
	char job[16];
	char job_netns[64];            /* netns holding the bridge */
	int nguests;
	char guest_netns[VHPC_MAX_GUESTS][64];  /* name under /run/netns */
	uint32_t guest_addr[VHPC_MAX_GUESTS];   /* host byte order */
	int index[VHPC_MAX_GUESTS];             /* job-wide guest index */
	int prefix;
	int mtu;
	uint32_t vni;                  /* 0 = none */
};

/* Needs the job dir held (na_jobdir_create).
 * Creates the job netns with a bridge, one netns per guest with eth0 (a veth
 * whose peer is on the bridge), addresses subnet+2+i, MTU and offloads from
 * the tuning profile, lo up, and the tuning sysctls inside each guest netns.
 * With a vni: a VXLAN device made from the caller's network namespace (the
 * node's underlay: UDP port NA_VXLAN_PORT from the underlay address) but
 * placed in the job netns as vxlan0 on the bridge, with a flooding entry in
 * its forwarding database for each peer (MAC addresses are then learnt);
 * every MTU of the job network is the profile's less NA_VXLAN_OVERHEAD, so
 * encapsulated frames fit the underlay's MTU. */
int na_net_create(const struct na_net_req *r, struct na_net *out, struct verr *err);
int na_net_destroy(struct na_net *n, struct verr *err);
/* Allocates a free subnet of the pool for a job on this machine (embedded
 * mode); released by na_jobdir_remove / cleanup. */
int na_subnet_alloc(const struct cluster_cfg *c, struct na_jobdir *jd,
		    struct ipv4net *out, struct verr *err);

/* ------------------------------------------------------------ containers */

struct na_bind {
	const char *src, *dst;
	bool ro;
};

struct na_ctr_spec {
	const char *job;
	int index;                 /* guest index: container id <job>-<index> */
	const char *hostname;
	const char *rootfs;        /* image rootfs, mounted read-only */
	const char *const *argv;   /* the guest's init (vhpc-guestd) */
	const char *const *env;    /* NAME=VALUE, NULL-terminated */
	const struct na_bind *binds;
	int nbinds;
	const char *netns;         /* name under /run/netns to join */
	const struct na_placement *place;
	uint64_t mem_limit;        /* 0 = none */
	uint64_t tmpfs_size;       /* writable /tmp, /run, /var/tmp, /dev/shm; 0 = 64 MiB each */
	uint64_t scratch_size;     /* a tmpfs of this size on /scratch (the image has it); 0 = none */
	const char *log_path;      /* the init's stdout+stderr go here */
};

struct na_ctr;

/* Needs the job dir held (na_jobdir_create).  The image rootfs must have
 * /proc /sys /dev /tmp /run /var/tmp; bind targets outside /tmp, /run,
 * /var/tmp and /dev must exist in it.  Returns once the init runs, with
 * cpuset.cpus verified in the kernel. */
int na_ctr_start(const struct na_ctr_spec *s, struct na_ctr **out, struct verr *err);
/* Takes over a running guest of a job whose dir this process holds after
 * na_jobdir_adopt (a restarted vhpcd); fails if its init is gone. */
int na_ctr_adopt(const char *job, int index, struct na_ctr **out, struct verr *err);
/* Host pid of the container's init, or -1 when it has exited. */
pid_t na_ctr_pid(const struct na_ctr *c);
bool na_ctr_running(struct na_ctr *c);
/* SIGTERM, wait up to grace_ms, then SIGKILL; removes the container and
 * its cgroups; frees c. */
int na_ctr_stop(struct na_ctr *c, int grace_ms, struct verr *err);
/* The same for all guests of a job at once (one grace period in all);
 * sets each cs[i] to NULL. */
int na_ctr_stop_all(struct na_ctr **cs, int n, int grace_ms, struct verr *err);

/* ---------------------------------------------------------- vmshm region */

/* Creates /dev/shm/vhpc-<job>-vmshm, zeroed, mode 0600, sized for nranks
 * ranks on this host (the vmshm BTL's layout); path and size out. */
int na_vmshm_create(const struct na_jobdir *jd, int nranks, char *path, size_t len,
		    uint64_t *size, struct verr *err);
int na_vmshm_remove(const char *job, struct verr *err);

/* --------------------------------------------------------------- images */

/*
 * Node images, content-addressed: the id is the sha256 of a manifest that
 * lists every file of the rootfs (type, mode, size, sha256 or link target,
 * path), so two builds of the same content get the same id and a node can
 * verify what it runs.  Stored under <state dir>/images/<id>/ with a name
 * reference in <state dir>/images/refs/<name>.json.
 */
struct image_info {
	char id[65];
	char name[65];
	char dir[512];          /* <state>/images/<id> */
	char rootfs[512];       /* <dir>/rootfs */
	uint64_t bytes;
	long files;
	long long built;        /* unix time */
	bool kvm;               /* has the kvm parts below */
	char kernel[512];       /* <dir>/kvm/vmlinuz (bzImage) */
	char vmlinux[512];      /* <dir>/kvm/vmlinux (ELF, PVH) */
	char initrd[512];       /* <dir>/kvm/initramfs.img */
	char disk[512];         /* <dir>/kvm/rootfs.ext4 */
	char kernel_release[128];
};

#define IMAGE_FORCE 1u   /* rebuild even when the sources are unchanged */
#define IMAGE_KVM   2u   /* with the kvm parts (kernel, initramfs, ext4 root) */

/* Builds the image a YAML file describes (configs/images/NAME.yaml); reuses
 * the stored one when its sources have not changed (and it has the kvm parts
 * if IMAGE_KVM asks for them). */
int image_build(const char *yaml_path, unsigned flags, struct image_info *out,
		struct verr *err);
/* Whether an image file describes kvm parts (kvm: section). */
int image_spec_wants_kvm(const char *yaml_path, bool *yes, struct verr *err);
/* The image a name refers to, building it from <config dir>/images/NAME.yaml
 * when it is missing or its sources changed. */
int image_ensure(const char *name, unsigned flags, struct image_info *out, struct verr *err);
/* The stored image a name or id refers to, without building. */
int image_lookup(const char *name_or_id, struct image_info *out, struct verr *err);
/* Every stored image, newest first; *out is malloc'd. */
int image_list(struct image_info **out, size_t *n, struct verr *err);
/* Downloads a Debian kernel package (following a metapackage such as
 * linux-image-cloud-amd64 to the real one) once into $VHPC_KERNEL_CACHE or
 * <state>/kernels, unpacked; *tree gets its root (boot/, lib/modules/). */
int image_fetch_kernel(const char *pkg, char *tree, size_t len, struct verr *err);
/* Recomputes the manifest of a stored image and compares it with its id. */
int image_verify(const struct image_info *img, struct verr *err);

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

/* ----------------------------------------------------------- kvm guests */

/*
 * The kvm driver: one vhpc-hv process per guest (hv/hv.h), started by the
 * agent and watched as its child.  What a guest gets:
 *   - its vCPUs pinned 1:1 to the placed host CPUs (--cpu-affinity), RAM
 *     bound to the placed NUMA node(s) (--host-node, or --numa per host node
 *     for a split guest), hugepages when the pool has them; the process in
 *     the cgroups vhpc/<job>/<i> (cpuset = the placed CPUs and nodes);
 *   - the image's kernel (the PVH vmlinux when there is one: no decompressor
 *     to run) and initramfs, its ext4 root read-only (virtio-blk, serial
 *     "vhpc-root") and the job's config disk read-only ("vhpc-config": key,
 *     hosts, hostfile, env, sysctl.conf; never the kernel command line, which
 *     every host user can read);
 *   - a tap t<i> on the job bridge, made in the job netns and handed over as
 *     an open fd, so vhpc-hv itself runs in the host's namespace;
 *   - vsock (cid 3+i) bridged to <job dir>/kvm<i>/vsock; vhpc-guestd listens
 *     on vsock port guest_port and the agent reaches it with
 *     gexec_connect_vsock;
 *   - the job's vmshm region as an ivshmem BAR (the region's size must be a
 *     power of two: na_kvm_vmshm_fit);
 *   - a kernel command line with its identity: vhpc.name, vhpc.job,
 *     vhpc.index, vhpc.addr, vhpc.mtu, vhpc.listen (vsock and TCP);
 *   - its serial console in <job dir>/kvm<i>/serial (vhpc-hv's own log in
 *     hv.log there): that dir is a tmpfs of NA_KVM_LOG_MAX bytes, so a guest
 *     that floods its console fills only its own log (vhpc-hv then drops
 *     further output).
 */
#define NA_KVM_LOG_MAX (16u << 20)
#define NA_KVM_MIN_MEM (128ull << 20)

struct na_kvm_spec {
	const char *job;
	int index;                     /* guest index: tap t<i>, cgroup, <job dir>/kvm<i>/ */
	const char *name;              /* hostname and vhpc.name */
	const struct image_info *img;  /* kernel (vmlinux preferred), initrd, disk */
	const struct na_placement *place;
	const int *cpu_node;           /* host NUMA node of place->cpus[k]; NULL = all
	                                * on place->mems[0] (na_kvm_cpu_nodes fills it) */
	uint64_t mem;                  /* whole MiB, at least NA_KVM_MIN_MEM */
	bool hugepages;                /* back RAM with 2 MiB pages (na_kvm_plan_hugepages) */
	uint32_t addr;                 /* on the job network, host byte order */
	int prefix, mtu;
	int guest_port;                /* guestd: TCP on the job network, and vsock */
	const char *config_disk;       /* na_kvm_config_disk */
	const char *scratch_disk;      /* na_kvm_scratch_disk, or NULL: the guest's /scratch */
	const char *spool;             /* guestd's spool of detached commands, a path in
	                                * the guest (vhpc.spool=), or NULL */
	const char *vmshm;             /* region file (power-of-two size) or NULL */
	bool emulated;                 /* software KVM: earlyprintk, and CPUID features
	                                * the instruction emulator lacks are hidden */
	const char *hv_path;           /* NULL: vhpc-hv next to this program */
};

struct na_kvm;

/* The host NUMA node of each CPU of a placement (out[k] for p->cpus[k]). */
int na_kvm_cpu_nodes(const struct na_topo *t, const struct na_placement *p, int *out,
		     struct verr *err);
/* Which guests get hugepages: use[i] when the 2 MiB pool of guest i's
 * node(s) still holds its memory after the guests before it. */
void na_kvm_plan_hugepages(const struct na_numa_info *nodes, int nnodes,
			   const struct na_placement *p, int nguests, uint64_t mem, bool *use);
/* The guest kernel's command line (pure; unit-tested). */
int na_kvm_cmdline(const struct na_kvm_spec *s, char *buf, size_t len, struct verr *err);
/* vhpc-hv's argv for a guest whose tap is open as tap_fd and whose files
 * (sockets, logs) live in dir (pure; unit-tested).  *argv is NULL-terminated; free it with
 * na_kvm_argv_free. */
int na_kvm_argv(const struct na_kvm_spec *s, const char *dir, int tap_fd, char ***argv,
		struct verr *err);
void na_kvm_argv_free(char **argv);
/* Words for a vhpc-hv wait status ("exited with status 4: triple fault or
 * KVM internal error"). */
const char *na_kvm_exit_words(int wstatus, char *buf, size_t len);

/* Grows the job's vmshm region file to the next power of two (a PCI BAR's
 * size); the new bytes are zero like the rest. */
int na_kvm_vmshm_fit(const char *path, uint64_t *size, struct verr *err);
/* The job's config disk, <job dir>/config.ext4 (mode 0600, made by
 * mke2fs -d, read-only in every guest at /vhpc): the files of src_dir as
 * they are (job.key, hosts, hostfile), plus "env" (the NAME=VALUE lines
 * vhpc-guestd starts with) and "sysctl.conf" (the tuning profile's net.*
 * sysctls), which it writes into src_dir first. */
int na_kvm_config_disk(const struct na_jobdir *jd, const char *src_dir,
		       const char *const *env, const struct tuning *tuning,
		       char *path, size_t len, struct verr *err);
/* Guest index's scratch disk, <job dir>/scratch<index>.ext4 (mode 0600):
 * an empty ext4 file system of size bytes in a sparse file, so it costs
 * only what the guest writes.  It goes with the job dir. */
int na_kvm_scratch_disk(const struct na_jobdir *jd, int index, uint64_t size, char *path, size_t len,
			struct verr *err);
/* The text of "env" and "sysctl.conf" (malloc'd; pure). */
int na_kvm_env_text(const char *const *env, char **out, struct verr *err);
int na_kvm_sysctl_text(const struct tuning *t, char **out, struct verr *err);

/* Needs the job dir held and the job network made with no_guest_netns.
 * Makes the tap, starts vhpc-hv, and returns once its control and vsock
 * sockets are there and each vCPU thread's affinity is the placed CPU
 * (asked over the control socket); a vhpc-hv that exits first is an error
 * that quotes its log. */
int na_kvm_start(const struct na_kvm_spec *s, struct na_kvm **out, struct verr *err);
/* Takes over the running vhpc-hv of guest index of a job whose dir this
 * process holds after na_jobdir_adopt (a restarted vhpcd): found by the
 * pid file its starter left, checked against its command line, watched
 * through a pidfd.  Fails when it is gone. */
int na_kvm_adopt(const char *job, int index, const char *name, int guest_port, struct na_kvm **out,
		 struct verr *err);
/* How many times longer than on hardware starting and booting a VM takes
 * on this machine (>= 1, measured once; VHPC_KVM_TIME_SCALE overrides):
 * every kvm deadline is multiplied by it. */
double na_kvm_time_scale(void);
pid_t na_kvm_pid(const struct na_kvm *k);
/* Whether vhpc-hv still runs; once it has exited, *why (if given) says how. */
bool na_kvm_running(struct na_kvm *k, char *why, size_t len);
const char *na_kvm_serial(const struct na_kvm *k);   /* console log path */
const char *na_kvm_hvlog(const struct na_kvm *k);    /* vhpc-hv's own log */
/* An authenticated channel to the guest's vhpc-guestd over vsock. */
int na_kvm_connect(struct na_kvm *k, struct chan *c, const uint8_t key[CHAN_KEY_LEN],
		   int timeout_ms, struct verr *err);
/* SIGTERM to every vhpc-hv at once, SIGKILL after grace_ms, then the
 * guests' cgroups and sockets go; frees each and sets it to NULL. */
int na_kvm_stop_all(struct na_kvm **ks, int n, int grace_ms, struct verr *err);

/* ---------------------------------------- one job's part on this node */

/*
 * The lifecycle both schedulers use for the guests of a job on this node
 * (`vhpc run`'s embedded agent for a whole job, vhpcd for its share of a
 * cluster job): open the job dir, prepare (image, placement, network,
 * vmshm region, the files every guest reads, then the driver's own steps
 * and the guests), wait until every guest agent is ready, run, tear down;
 * or adopt what a dead agent left running.  The guest driver is behind an
 * ops table (nodeagent/drivers.h): nothing here or in the callers asks
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
	const struct tuning *tuning;
	const struct na_topo *topo;
	int vcpus;                     /* per guest */
	uint64_t mem;                  /* per guest */
	bool oversubscribe;
	bool vmshm;                    /* a vmshm region for the guests here (2 or more) */
	int vmshm_slots;               /* ranks of the whole job */
	const char *host_id;           /* the vmshm BTL's "same host" */
	uint64_t scratch;              /* each guest's /scratch; 0 = none */
	uint8_t key[CHAN_KEY_LEN];     /* the job's guest channel key */
	uint64_t spool_size;           /* > 0: guest 0 is here and runs detached
	                                * commands (vhpcd's launcher) into a spool
	                                * of this size (a host tmpfs the container
	                                * driver binds; a kvm guest's own /run) */
	/* A job across nodes (vhpcd): the VXLAN joining its bridges. */
	uint32_t vni, underlay;
	const uint32_t *peers;
	int npeers;
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
	char vmshm[128];               /* the job's region on the host, or "" */
	uint64_t vmshm_size;
	char shared[512];              /* <job dir>/shared: key, hosts, hostfile */
	char spool[512];               /* <job dir>/spool when s.spool_size */
	bool spool_mounted;
	struct na_guest *g;            /* [s.nguests]; g[k].priv NULL until started */
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

/* This machine's boot id: the same for every guest here, different on any
 * other host (the vmshm BTL's idea of "same host"). */
const char *na_boot_id(void);

#endif
