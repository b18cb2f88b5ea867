/*
 * Private to the kvm driver (nodeagent/drivers/kvm/).  The public part is
 * kvm.h.
 */
#ifndef VHPC_NA_KVM_INT_H
#define VHPC_NA_KVM_INT_H

#include "lib/consts.h"
#include "lib/err.h"
#include "nodeagent/drivers/kvm/kvm.h"
#include "nodeagent/job.h"

#include <sys/types.h>
#include <limits.h>

#define KVM_MAX_GNODES 8   /* HV_MAX_NODES */

/* A guest NUMA node: the vCPUs (indexes into the placement) on one host
 * node, and the RAM bound there. */
struct kvm_gnode {
	int host_node;         /* -1: unbound */
	int nvcpus;
	int vcpus[VHPC_MAX_VCPUS];
	uint64_t mem;
};
/* The guest nodes of a placement: one per host node its CPUs sit on, in the
 * order of the vCPUs, memory in proportion to the vCPUs (2 MiB units, the
 * last node takes the rest).  cpu_node NULL: one node on p->mems[0].
 * Returns the number of nodes. */
int kvm_mem_split(const struct na_placement *p, const int *cpu_node, uint64_t mem,
		  struct kvm_gnode *g, int max, struct verr *err);

/* The kernel a guest boots: the PVH vmlinux when the image has one, else
 * the bzImage. */
const char *kvm_kernel_path(const struct image_info *img);

/* Opens the tap t<index> on br0 in the job netns (mtu, up); the fd is the
 * tap's only owner, so it goes away with the last holder. */
int kvm_tap_open(const char *job, int index, int mtu, int *fd, struct verr *err);
/* /dev/vhost-net for vhpc-hv, which cannot open it once confined: the fd,
 * or -1 with the reason in why (the guest then gets vhpc-hv's userspace
 * back end). */
int kvm_vhost_open(char *why, size_t len);

/* cgroups vhpc/<job>/<index> in the cpuset and memory (v1) and cgroup2
 * hierarchies, cpuset from the placement, memory limited to mem_limit;
 * *fds gets the open cgroup.procs files (at most max) for the child to
 * write "0" into before it execs. */
int kvm_cgroups_prepare(const char *job, int index, const struct na_placement *p, uint64_t mem_limit,
			int *fds, int max, int *n, struct verr *err);
/* What vhpc-hv and its virtiofsd may use beyond the guest's RAM and the
 * vmshm region it maps: its own code, threads and device buffers (vsock
 * keeps up to 256 KiB per stream), each virtiofsd, and KVM's page tables
 * and reverse maps (about 0.4% of RAM, under the ram/32 part).  A bound
 * against a runaway, not an estimate: the log's peak at each guest's end
 * (kvm_mem_peak) is the measure. */
#define KVM_MEM_OVERHEAD (256ull << 20)
uint64_t kvm_mem_limit(uint64_t ram, uint64_t vmshm);
/* The most guest index's cgroup has used (0: not known). */
uint64_t kvm_mem_peak(const char *job, int index);

/* A confined vhpc-hv (kvm_jail.c): its uid and gid, the binary, its one
 * writable folder, and an empty folder for the jail's root to be mounted on. */
struct kvm_jail {
	uid_t uid;
	gid_t gid;
	const char *hv;
	const char *rw_dir;
	const char *root;
	uint64_t memlock;      /* RLIMIT_MEMLOCK (VFIO pins guest RAM); 0: unchanged */
};
/* In the forked child, before exec: mount namespace, pivot_root into the
 * jail, uid and gid dropped, no_new_privs.  -1 with words in why. */
int kvm_jail_enter(const struct kvm_jail *j, char *why, size_t len);

/* Starts the virtiofsd of shared folder k of a guest whose root-owned
 * folder is dir (kvm_fs.c), in the guest's cgroups (cg: open cgroup.procs
 * files); *conn is the connected vhost-user socket for vhpc-hv, *pid the
 * daemon's. */
int kvm_fs_start(const char *dir, int k, const struct na_hbind *b, uid_t uid, gid_t gid, const int *cg, int ncg,
		 int *conn, pid_t *pid, struct verr *err);
const char *kvm_virtiofsd_path(void);

/* PCI passthrough (kvm_vfio.c).  Whether a is exactly DDDD:BB:DD.F. */
bool kvm_vfio_addr_ok(const char *a);
/* a may be given to a guest: on the admin's list, an existing function
 * with an IOMMU group whose every member is in mine (what the same guest
 * gets), not on vfio-pci already.  *numa_node: its node, -1 unknown. */
int kvm_vfio_check(const char *addr, const struct cluster_fabric_node *fn, const char *const *mine, int nmine,
		   int *numa_node, struct verr *err);
/* Records a's driver in <job dir>/vfio/<a>, then moves it to vfio-pci. */
int kvm_vfio_bind(const char *job, const char *addr, struct verr *err);
/* Gives every function the job's records name back to its driver (the
 * teardown, and the sweep after a crash); counts them in *restored. */
int kvm_vfio_release(const char *job, const char *why, int *restored, struct verr *err);
int kvm_vfio_group(const char *addr, int *group, struct verr *err);
/* Guest k, whose function is on NUMA node `node`, trades places (and its
 * CPUs' nodes, VHPC_MAX_VCPUS a guest) with a guest without functions
 * (npci[o] == 0) placed on that node, guests being alike.  Returns that
 * guest, or -1 (already there, node unknown, or no such guest). */
int kvm_vfio_place_near(struct na_placement *place, int *cpu_node, const int *npci, int nguests, int k, int node);
/* A type1v2 container with a's group in it, and a's device fd. */
int kvm_vfio_open(const char *addr, struct kvm_vfio_fds *f, struct verr *err);
void kvm_vfio_close(struct kvm_vfio_fds *f);

struct na_kvm {
	char job[16];
	int index;
	char name[64];
	pid_t pid;
	int pidfd;
	bool exited;
	int wstatus;
	unsigned port;
	double started;
	bool mounted;          /* dir is our tmpfs */
	bool adopted;          /* not our child: its end is seen on the pidfd */
	char dir[PATH_MAX];    /* <job dir>/kvm<i>: root's; pid, hv.log */
	char hvdir[PATH_MAX];  /* <dir>/hv: vhpc-hv's own (sockets, consoles) */
	char vsock[108];
	char ctl[108];
	char serial[PATH_MAX];
	char hvlog[PATH_MAX];
	off_t serial_seen;     /* console bytes already searched for a panic */
	char panic[200];       /* the guest kernel's panic line, once seen */
	pid_t fs_pid[NA_KVM_MAX_FS]; /* its virtiofsd, our children (0: none) */
	uint64_t mem_limit;    /* of its memory cgroup (0: taken over, not known) */
	bool has_pci;          /* PCI functions passed through: their lines of hv.log are logged at its end */
	/* Between na_kvm_start and na_kvm_wait_up: */
	bool up;               /* its sockets are there and its vCPUs pinned */
	int up_timeout_ms;
	struct na_placement place;
	char what[96];         /* "PVH vmlinux, 1 vCPU, 384 MiB" for the log */
};

/* vhpc-hv's control socket: one request, one JSON reply line (malloc'd). */
int kvm_control(const char *sock, const char *req, char **reply, int timeout_ms, struct verr *err);
/* The same, with pass_fd (>= 0) sent along the request (SCM_RIGHTS). */
int kvm_control_fd(const char *sock, const char *req, int pass_fd, char **reply, int timeout_ms, struct verr *err);
/* Every vCPU thread's affinity, as vhpc-hv's status reports it, is the
 * CPU placement gave that vCPU. */
int kvm_check_pinning(const char *ctl, const struct na_placement *p, struct verr *err);

/* Checkpoints (kvm_ckpt.c).  Stops guest k's vCPUs (pause) or lets them
 * run; an error unless vhpc-hv then says it is in that state. */
int kvm_pause(struct na_kvm *k, bool pause, struct verr *err);
/* Whether vhpc-hv says it is paused now (false when it cannot be asked):
 * what vhpcd checks before it saves a guest. */
bool kvm_paused(const struct na_kvm *k);
/* Whether its vhpc-hv could save every device it has (asked before any
 * guest is paused); vhpc-hv's reason, naming the device, otherwise. */
int kvm_snapshot_check(const struct na_kvm *k, struct verr *err);
/* What a guest's part of a checkpoint names beside its snapshot. */
struct kvm_save_in {
	const char *image_id;
	const char *config_disk;       /* root's path in the job dir */
	int scratch_fd;                /* its scratch disk, or -1 */
	uint64_t mem;                  /* guest RAM: how long vhpc-hv may write */
};
/* Guest k, paused, into dirfd (empty, root's): snapshot, config.ext4,
 * scratch.img, image; *bytes their size.  On error the caller removes
 * what is in dirfd; the guest stays paused either way. */
int kvm_save(struct na_kvm *k, const struct kvm_save_in *in, int dirfd, uint64_t *bytes, struct verr *err);
/* A saved guest's files, open read-only (-1: none). */
struct kvm_restore_fds {
	int snapshot, config, scratch;
};
/* Checks that the folder's guest ran image_id and opens its files
 * (scratch.img only when the job has a scratch disk). */
int kvm_restore_open(int dirfd, const char *image_id, bool scratch, struct kvm_restore_fds *r, struct verr *err);
void kvm_restore_close(struct kvm_restore_fds *r);

#endif
