/*
 * The kvm driver's pieces that the lifecycle and the tests call.
 */
#ifndef VHPC_NA_KVM_H
#define VHPC_NA_KVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/chan.h"
#include "lib/consts.h"
#include "lib/err.h"

struct na_jobdir;
struct na_numa_info;
struct na_placement;
struct na_topo;
struct tuning;

/* For na_driver_kvm's auto_pick: hardware virtualization here; why says
 * what this host has (kvm_host.c). */
bool na_kvm_auto_pick(char *why, size_t len);
/* Its check: /dev/kvm with hardware virtualization, or on a software-only
 * KVM when allow_emulated is set (guests then start but do not finish
 * booting: tests of the driver, experts); *emulated says whether that is
 * the case.  $VHPC_KVM_ALLOW_EMULATION=1 sets allow_emulated too; another
 * value than 0 or 1 there is an error. */
int na_kvm_host_check(bool allow_emulated, bool *emulated, struct verr *err);

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
 *     an open fd, so vhpc-hv itself runs in the host's network namespace;
 *   - confinement (kvm_jail.c): vhpc-hv runs as the job's user (a root
 *     job's as nobody) with no capabilities and no_new_privs, in a mount
 *     namespace that holds /usr, its binary, /dev/kvm and its own folder
 *     only, and under its seccomp allowlist (--seccomp); the agent opens
 *     the kernel, initramfs, disks and vmshm region and passes them open
 *     (struct na_kvm_fds), and no other descriptor of the agent reaches it;
 *   - vsock (cid 3+i) bridged to <job dir>/kvm<i>/vsock; vhpc-guestd listens
 *     on vsock port guest_port and the agent reaches it with
 *     gexec_connect_vsock;
 *   - the job's vmshm region as an ivshmem BAR (the region's size must be a
 *     power of two: na_kvm_vmshm_fit);
 *   - a kernel command line with its identity: vhpc.name, vhpc.job,
 *     vhpc.index, vhpc.addr, vhpc.mtu, vhpc.listen (vsock and TCP);
 *   - its serial console in <job dir>/kvm<i>/hv/serial, beside its vsock
 *     and control sockets (hv/ is vhpc-hv's, the rest of kvm<i>/ root's:
 *     vhpc-hv's own log hv.log and its pid): kvm<i> is a tmpfs of
 *     NA_KVM_LOG_MAX bytes, so a guest that floods its console fills only
 *     its own log (vhpc-hv then drops further output).
 */
#define NA_KVM_LOG_MAX (16u << 20)
#define NA_KVM_MIN_MEM (128ull << 20)
/* vhpc-hv's limit of virtio-fs devices (hv/dev_vhost_user_fs.c). */
#define NA_KVM_MAX_FS 8
#define NA_KVM_MAX_PCI 4               /* hv's --vfio instances */

struct na_kvm_spec {
	const char *job;
	int index;                     /* guest index: tap t<i>, cgroup, <job dir>/kvm<i>/ */
	const char *name;              /* hostname and vhpc.name */
	const struct image_info *img;  /* kernel (vmlinux preferred), initrd, disk */
	const struct na_placement *place;
	const int *cpu_node;           /* host NUMA node of place->cpus[k]; NULL = all
	                                * on place->mems[0] (na_topo_cpu_nodes fills it) */
	uint64_t mem;                  /* whole MiB, at least NA_KVM_MIN_MEM */
	bool hugepages;                /* back RAM with 2 MiB pages (na_kvm_plan_hugepages) */
	uint32_t addr;                 /* on the job network, host byte order */
	int prefix, mtu;
	int guest_port;                /* guestd: TCP on the job network, and vsock */
	const char *config_disk;       /* na_kvm_config_disk */
	const char *scratch_disk;      /* "/proc/self/fd/N" of na_kvm_scratch_disk's fd,
	                                * or NULL: the guest's /scratch */
	const char *spool;             /* guestd's spool of detached commands, a path in
	                                * the guest (vhpc.spool=), or NULL */
	const char *vmshm;             /* region file (power-of-two size) or NULL */
	bool emulated;                 /* software KVM: earlyprintk, and CPUID features
	                                * the instruction emulator lacks are hidden */
	const char *hv_path;           /* NULL: vhpc-hv next to this program */
	uid_t uid;                     /* the job's user: vhpc-hv runs as them */
	gid_t gid;                     /* (uid 0: as nobody) */
	/* Host folders shared as virtio-fs tags vhpc0..vhpc<nfs-1> (kvm_fs.c:
	 * one virtiofsd each, as the job's user); the config disk's "fs" file
	 * says where the guest mounts them. */
	const struct na_hbind *fs;
	int nfs;
	bool vhost_net;                /* its NIC on /dev/vhost-net where the node has it
	                                * (the tuning profile's vhost_net) */
	/* PCI functions passed through (VFIO), bound to vfio-pci already. */
	const char *const *pci;
	int npci;
	/* A snapshot vhpc-hv starts from instead of booting (--restore), its
	 * vCPUs stopped until "resume" (--paused): a path as scratch_disk's,
	 * or NULL.  The rest of the spec must describe the machine saved. */
	const char *restore;
};

/* Open descriptors vhpc-hv gets instead of the spec's files (/dev/fd/N on
 * its command line): it runs as the job's user and could not open them
 * itself.  -1: the path. */
struct na_kvm_fds {
	int tap;                       /* required */
	int kernel, initrd, root, config, scratch, vmshm, restore;
	int fs[NA_KVM_MAX_FS];         /* connected vhost-user sockets, one per spec fs */
	int vhost;                     /* /dev/vhost-net for the tap's queue, or -1 */
	struct kvm_vfio_fds { int container, group, device; } pci[NA_KVM_MAX_PCI]; /* one per spec pci */
};
#define NA_KVM_FDS_NONE(t) ((struct na_kvm_fds){ .tap = (t), .kernel = -1, .initrd = -1, .root = -1, \
						   .config = -1, .scratch = -1, .vmshm = -1, .restore = -1, .vhost = -1, \
						   .fs = { -1, -1, -1, -1, -1, -1, -1, -1 }, \
						   .pci = { { -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 } } })

struct na_kvm;

/* Which guests get hugepages: use[i] when the 2 MiB pool of guest i's
 * node(s) still holds its memory after the guests before it. */
void na_kvm_plan_hugepages(const struct na_numa_info *nodes, int nnodes,
			   const struct na_placement *p, int nguests, uint64_t mem, bool *use);
/* The guest kernel's command line (pure; unit-tested). */
int na_kvm_cmdline(const struct na_kvm_spec *s, char *buf, size_t len, struct verr *err);
/* vhpc-hv's argv for a guest whose tap and files are open as fds and whose
 * sockets and consoles live in dir (pure; unit-tested).  *argv is
 * NULL-terminated; free it with argv_free (lib/argv.h). */
int na_kvm_argv(const struct na_kvm_spec *s, const char *dir, const struct na_kvm_fds *fds, char ***argv,
		struct verr *err);
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
/* Where kvm guests' scratch disks go: the cluster file's scratch_dir, or
 * <state dir>/scratch; a node-local disk, never the run dir (memory). */
int na_kvm_scratch_dir(char *buf, size_t len, struct verr *err);
/* A scratch disk in dir (a folder of root's that only root may write;
 * made if missing): an empty ext4 file system of size bytes in a file
 * with no name (O_TMPFILE), its room reserved (fallocate) so that a
 * guest neither takes another's nor meets a full host disk halfway.  *fd
 * is its only reference: the disk is gone once the agent and vhpc-hv
 * close it, after the job or after any crash, with nothing to sweep.
 * A folder without that room refuses it, naming the folder. */
int na_kvm_scratch_disk(const char *dir, uint64_t size, int *fd, struct verr *err);
/* The "fs" file of the config disk: "vhpc<i> DST ro|rw" per shared folder,
 * what the guest's init mounts (malloc'd; pure). */
int na_kvm_fs_text(const struct na_hbind *fs, int n, char **out, struct verr *err);
/* The text of "env" and "sysctl.conf" (malloc'd; pure). */
int na_kvm_env_text(const char *const *env, char **out, struct verr *err);
int na_kvm_sysctl_text(const struct tuning *t, char **out, struct verr *err);

/* Needs the job dir held and the job network made with no_guest_netns.
 * Makes the tap and starts vhpc-hv, without waiting for it: from here *out
 * is the guest's, to end with na_kvm_stop_all whatever happens next.  A
 * job starts all its guests and then waits for each (na_kvm_wait_up), so
 * that their RAM is prefaulted at the same time, not one after another. */
int na_kvm_start(const struct na_kvm_spec *s, struct na_kvm **out, struct verr *err);
/* Returns once the vhpc-hv of na_kvm_start has its control and vsock
 * sockets and each vCPU thread's affinity is the placed CPU (asked over
 * the control socket).  A vhpc-hv that exits first is an error that quotes
 * its log; one that takes too long is killed (na_kvm_stop_all still ends
 * the rest). */
int na_kvm_wait_up(struct na_kvm *k, struct verr *err);
/* Whether na_kvm_wait_up succeeded (an adopted guest is up). */
bool na_kvm_is_up(const struct na_kvm *k);
/* Whether vhpc-hv has exited refusing its --restore snapshot as damaged
 * (HV_EXIT_SNAPSHOT: cut short, a checksum wrong; hv/hv.h). */
bool na_kvm_snapshot_damaged(const struct na_kvm *k);
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
/* vhpc-hv's vsock bridge (a unix socket) and the agent's port behind it. */
const char *na_kvm_vsock(const struct na_kvm *k, unsigned *port);
/* An authenticated channel to the guest's vhpc-guestd over vsock. */
int na_kvm_connect(struct na_kvm *k, struct chan *c, const uint8_t key[CHAN_KEY_LEN],
		   int timeout_ms, struct verr *err);
/* SIGTERM to every vhpc-hv at once, SIGKILL after grace_ms, then the
 * guests' cgroups and sockets go; frees each and sets it to NULL. */
int na_kvm_stop_all(struct na_kvm **ks, int n, int grace_ms, struct verr *err);

#endif
