/*
 * The guest-driver interface: what the job lifecycle (job.c) calls for the
 * guests of a job, one table per driver, in the spirit of kvmtool's
 * virtio_ops and Slurm's plugin ops.  A new driver is a file filling a
 * struct na_driver, in its own folder, plus its entry in table.c; nothing outside the
 * drivers asks which driver a guest has.  Private to nodeagent/.
 */
#ifndef VHPC_NA_DRIVERS_H
#define VHPC_NA_DRIVERS_H

#include "lib/chan.h"
#include "lib/err.h"
#include "lib/jobspec.h"
#include "nodeagent/job.h"

struct na_net_req;

/* The restore op's return for a checkpoint part that can never be restored. */
#define NA_RESTORE_DAMAGED (-2)

struct na_driver {
	const char *name;            /* as job specs spell it: its folder's name */
	unsigned image_flags;        /* what image_ensure must provide (IMAGE_KVM) */
	bool guest_netns;            /* each guest joins a netns with a veth on the
	                              * bridge; else the driver attaches it itself */
	bool host_spool;             /* guest 0's spool is a host dir bound into it */
	bool emulation;              /* may start where it cannot finish booting (tests) */
	bool host_paths;             /* gives guests the job's binds (na_job.hb) */
	bool ckpt_no_sessions;       /* a guest with a `vhpc exec` or `vhpc shell`
	                              * session open into it cannot be saved (its
	                              * connection ends outside the guest) */
	/* Whether this host can run it; allow_emulated lets kvm start on a
	 * software-only KVM, and *emulated says that is the case. */
	int (*check)(bool allow_emulated, bool *emulated, struct verr *err);
	/* Optional: whether "auto" should pick it on this host (drivers are
	 * tried in table order); why says what the host has, either way. */
	bool (*auto_pick)(char *why, size_t len);
	/* The job as asked, for this driver (sizes it cannot give). */
	int (*check_job)(const struct na_job *j, struct verr *err);
	/* Seconds a guest may take to become ready here, from the seconds on
	 * hardware. */
	double (*ready_seconds)(const struct na_job *j, double on_hardware);
	/* Optional, once placement exists, before the job's network is made:
	 * what the driver needs of it (the container driver's pod, which the
	 * guests' network namespaces must belong to). */
	int (*prepare_net)(struct na_job *j, struct na_net_req *nr, struct verr *err);
	/* Once placement, network, region and shared files exist, before any
	 * guest starts: the driver's per-job files and plans. */
	int (*prepare)(struct na_job *j, struct verr *err);
	/* Optional: whether ranks in different guests of the job here may
	 * read each other's memory (one user and PID namespace for all). */
	bool (*single_copy)(const struct na_job *j);
	/* Words after a guest's placement in the log ("in hugepages"). */
	const char *(*placement_note)(const struct na_job *j, int k);
	int (*start)(struct na_job *j, int k, struct verr *err);
	/* Optional: start only launched guest k, and this waits until it is
	 * up.  Every guest is launched before any is waited for, so that what
	 * takes time in their start-up (a VM's prefault) overlaps. */
	int (*wait_started)(struct na_job *j, int k, struct verr *err);
	/* Logged once every guest has started (where their consoles are). */
	void (*started)(const struct na_job *j);
	/* Takes over guest k left running by a dead agent. */
	int (*adopt)(struct na_job *j, int k, struct verr *err);
	/* Whether the guest runs; when not, *why says how it ended. */
	bool (*running)(struct na_guest *g, char *why, size_t len);
	/* Whether its agent may be reached yet (a container's guestd makes its
	 * socket when it starts) and the channel to it. */
	bool (*reachable)(const struct na_guest *g);
	int (*connect)(struct na_guest *g, struct chan *c, const uint8_t key[CHAN_KEY_LEN],
		       int timeout_ms, struct verr *err);
	/* How a host process reaches the guest (na_job_guest_access). */
	int (*access)(const struct na_guest *g, struct na_guest_access *a, struct verr *err);
	/* Logs the last lines that say why a guest failed. */
	void (*log_tail)(const struct na_guest *g);
	/* Stops every started guest of the job (one grace period in all) and
	 * frees their state; then whatever the driver made for the job goes. */
	int (*stop_all)(struct na_job *j, int grace_ms, struct verr *err);
	void (*release)(struct na_job *j);
	/* Optional, in the crash sweep (na_sweep_job), before the job's
	 * cgroups, namespaces and mounts go: removes by the naming rules
	 * what a dead agent left of the driver's for job (the container
	 * driver's runc state), each counted in *removed and logged with why. */
	int (*sweep)(const char *job, const char *why, int *removed, struct verr *err);

	/* Checkpoints (issue 36; the job level is job_ckpt.c).  All optional:
	 * a driver without pause, resume, save and restore cannot checkpoint
	 * its guests, and na_job_ckpt_check says so. */
	/* Whether this job's guests here can be saved and restored, and if
	 * not why, before anything changes. */
	int (*ckpt_check)(const struct na_job *j, struct verr *err);
	/* Stops guest k from running (its processes or vCPUs), and lets it
	 * run again; each idempotent. */
	int (*pause)(struct na_job *j, int k, struct verr *err);
	int (*resume)(struct na_job *j, int k, struct verr *err);
	/* Optional: whether guest k is paused (a vhpcd that takes over a job
	 * must know before it talks to a frozen guest's agent). */
	bool (*paused)(struct na_job *j, int k);
	/* Guest k, paused, into dirfd (its own empty dir, root's 0700); it
	 * stays paused.  On failure the caller removes what is in dirfd. */
	int (*save)(struct na_job *j, int k, int dirfd, struct verr *err);
	/* Instead of start: guest k from what save wrote in dirfd, left
	 * paused.  NA_RESTORE_DAMAGED (an error too) when what dirfd holds
	 * is damaged, so that no attempt, here or elsewhere, can restore it:
	 * the controller then fails the restart at once. */
	int (*restore)(struct na_job *j, int k, int dirfd, struct verr *err);
};


/* na_driver_check, where allow_emulated lets a driver with .emulation
 * start where it cannot finish booting, and *emulated says so. */
int na_driver_check_with(const struct na_driver *d, bool allow_emulated, bool *emulated, struct verr *err);
/* Every driver's sweep op for job, in table order; the first error is
 * returned, after every driver has swept. */
int na_drivers_sweep(const char *job, const char *why, int *removed, struct verr *err);

/* drivers/support.c: */
/* Makes path (a file or dir of the job's) belong to the job's user. */
int na_job_give_user(const struct na_job *j, const char *path, struct verr *err);
/* The last bytes of a log file, logged as an error under a title. */
void na_log_tail(const char *path, const char *what);
/* <job dir>/<name><index>: a guest's own dir. */
void na_job_guest_path(const struct na_job *j, const char *name, int index, char *buf, size_t len);
/* A small tmpfs of its own on dir (made if missing), so what a guest may
 * write there cannot fill the host's disk. */
int na_mount_small_tmpfs(const char *job, const char *dir, uint64_t size, struct verr *err);
/* The data extents of in into out at the same offsets (holes stay holes),
 * out then in's size; *bytes counts what was copied (checkpoints: guest
 * disks, the vmshm region). */
int na_copy_sparse(int in, int out, uint64_t *bytes, struct verr *err);

#endif
