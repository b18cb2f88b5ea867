/*
 * vhpc under Slurm: the public surface of slurm/ for the rest of vhpc
 * (`vhpc mpirun` in scheduler/).  The SPANK plugin (spank_vhpc.so) and
 * vhpc-slurmjob, the process that holds a job's guests on a node, are the
 * folder's own (slurm/README.md).
 *
 * Everything here is plain C without libvhpc, because the plugin is a
 * shared object loaded into Slurm's processes and links none of vhpc's
 * archives: what it shares with vhpc-slurmjob is compiled into it.
 */
#ifndef VHPC_SLURM_H
#define VHPC_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The error messages of slurm/'s code go into a caller's buffer (why,
 * len): the plugin has no libvhpc and its struct verr.  Returns -1. */
int vs_fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes why with "path: ". */
int vs_fail_in(const char *path, char *why, size_t len);

/* ------------------------------------------------------------ options */

/* What a job asked for with --vhpc-* (or SLURM_VHPC_* in its
 * environment).  Empty or zero fields take the cluster file's defaults. */
struct vs_opts {
	bool set;                  /* the job runs in guests */
	char image[65];            /* "" = default */
	char driver[16];           /* auto, container, kvm; "" = default */
	int vcpus;                 /* per guest; 0 = 1 */
	uint64_t mem;              /* bytes per guest; 0 = default */
	bool no_vmshm;
	bool no_single_copy;       /* vmshm without the container driver's pod */
	int rdma;                  /* enum job_rdma (lib/fabric.h): 0 auto, 1 on, 2 off */
	char devices[200];         /* "gpu:2,nic" (--vhpc-device, each checked); "" = none */
};

/* The options are the job option table's rows marked JO_SLURM
 * (lib/jobopts.c), each as --vhpc-NAME; VS_NOPTS of them, in srun --help's
 * order.  vs_opt_row(i) is the i-th (NULL past the last); vs_opt_index
 * the place of the row with that id (JO_NOVMSHM, ...), -1 if none. */
#define VS_NOPTS 9
struct job_opt;
const struct job_opt *vs_opt_row(int i);
int vs_opt_index(int id);
/* One option by its name without "--vhpc-" (image, driver, vcpus, mem,
 * no-vmshm, no-single-copy, ...); val NULL for the flag.  -1 with why
 * ("--vhpc-mem '3X': ...") for a bad value. */
int vs_opt_set(struct vs_opts *o, const char *name, const char *val, char *why, size_t len);
/* Options not given take SLURM_VHPC_IMAGE, _DRIVER, _VCPUS, _MEM,
 * _NO_VMSHM, _NO_SINGLE_COPY, ... from env (NAME=VALUE, NULL-terminated);
 * given[] says which were given (indexed as vs_opt_row). */
int vs_opts_env(struct vs_opts *o, const bool given[VS_NOPTS], char *const *env, char *why, size_t len);
/* "image=default driver=auto vcpus=0 mem=0 vmshm=1 rdma=auto devices=gpu:2,nic
 * single_copy=1" and back (devices= empty for none; single_copy= absent, as
 * an older prolog wrote the line: 1). */
int vs_opts_format(const struct vs_opts *o, char *buf, size_t len);
int vs_opts_parse(const char *s, struct vs_opts *o, char *why, size_t len);

/* ----------------------------------------------- the files on a node */

/*
 * The plugin and vhpc-slurmjob talk through files in <run dir>/slurm/
 * (root's, mode 0711), never through a socket:
 *   <job>.opts   written by the job prolog: the options and the job as
 *                the prolog saw it (vhpc-slurmjob checks every value);
 *   <job>.state  written by vhpc-slurmjob: preparing, ready with the
 *                guests, or failed with the reason; root's, mode 0600
 *                (the plugin, the epilog);
 *   <job>.user   the same, the job's user's, mode 0600: their own
 *                `vhpc mpirun` finds guest 0 there, and no one else reads
 *                it.  Root never reads this one, since its owner can
 *                change it.
 * Both are "KEY VALUE" lines after a first line naming the format.
 */
#define VS_OPTS_MAGIC  "vhpc-slurm-opts 1"
#define VS_STATE_MAGIC "vhpc-slurm-state 1"
#define VS_MAX_GUESTS  256         /* per node, as VHPC_MAX_GUESTS */
#define VS_MAX_NODES   4096        /* of one job */
#define VS_MAX_ENV     32

struct vs_kv {
	const char *key, *val;
};
struct vs_kvfile {
	char *buf;
	struct vs_kv *v;
	int n;
};
/* Parses text (at most 1 MiB, NUL-free) whose first line is magic; keys
 * are [a-z_]{1,31}, a single space, then the value to the end of the
 * line (printable, no tab).  Keys may repeat. */
int vs_kv_parse(const char *text, size_t len, const char *magic, struct vs_kvfile *out, char *why, size_t wlen);
/* A small file (at most 1 MiB, not a link) into a NUL-terminated malloc'd
 * buffer. */
int vs_file_read(const char *path, char **text, size_t *n, char *why, size_t wlen);
/* Replaces path with text, mode 0600, all at once (a file beside it,
 * created O_EXCL|O_NOFOLLOW, then renamed over it): root's, or owner's
 * when owner is not NULL ({uid, gid}).  Called as root in root's folder
 * <run dir>/slurm, which others may pass through but not list or write. */
int vs_file_write(const char *path, const char *text, const unsigned owner[2], char *why, size_t wlen);
int vs_kv_load(const char *path, const char *magic, struct vs_kvfile *out, char *why, size_t wlen);
const char *vs_kv_get(const struct vs_kvfile *f, const char *key);
void vs_kv_free(struct vs_kvfile *f);

enum vs_status { VS_PREPARING = 0, VS_READY, VS_FAILED };

struct vs_guest {
	int index;                 /* job-wide: hostname g<index> */
	pid_t pid;                 /* container: its init, whose namespaces tasks join; kvm: 0 */
	char netns[64];            /* its network namespace (/run/netns), "" for kvm */
	char cpus[256], mems[64];  /* its placement, cpulists */
	char sock[512];            /* how the host reaches its agent: a unix socket */
	unsigned vsock_port;       /* > 0: sock is a VMM's vsock bridge, ask for this port */
	char addr[20];             /* on the job network */
};

struct vs_state {
	enum vs_status status;
	char error[1024];
	pid_t holder;
	char job[16];              /* the node agent's job id on this node */
	char jobdir[256];
	char driver[16];
	char key[300];             /* the job key file (the user's) */
	int nenv;
	char env[VS_MAX_ENV][256]; /* NAME=VALUE every task in a guest gets */
	int nguests;
	struct vs_guest g[VS_MAX_GUESTS];
};
/* Reads a state file; every field checked. */
int vs_state_load(const char *path, struct vs_state *s, char *why, size_t len);
int vs_state_parse(const char *text, size_t n, struct vs_state *s, char *why, size_t len);
/* The text of a state file. */
char *vs_state_text(const struct vs_state *s);

/* ------------------------------------------------- the job's layout */

/* Slurm's hostlist ("n[1-3,7],gpu01") into names, in order; *names and
 * its strings are one malloc'd block (free(*names)). */
int vs_hostlist_expand(const char *s, char ***names, int *n, char *why, size_t len);
/* SLURM_JOB_CPUS_PER_NODE ("2(x3),1") into n counts. */
int vs_cpus_per_node(const char *s, int *out, int max, int *n, char *why, size_t len);

/*
 * Guests of a job: node i of its node list (Slurm's order) holds cpus[i] /
 * vcpus of them (at most VS_MAX_GUESTS), numbered on from node i - 1's.
 * Every node has every count (SLURM_JOB_CPUS_PER_NODE, from the job's
 * credential), so each names and addresses its own guests, and writes the
 * job's hosts and hostfile, without asking the others.  Node `node` gets
 * *count guests from *first; the job *total.  -1 (why set) when a node
 * gets none.
 */
int vs_layout(const int *cpus, int nnodes, int vcpus, int node, int *first, int *count, int *total, char *why,
	      size_t len);
/* The same layout as where each guest is: out[g] (total of them, as
 * vs_layout gave) is node_addr[i] of the node that holds guest g, so each
 * node's job network names every remote guest's node in static forwarding
 * entries instead of flooding to all of them and learning.  -1 when the
 * counts do not add up to total. */
int vs_guest_nodes(const int *cpus, int nnodes, int vcpus, const uint32_t *node_addr, uint32_t *out, int total);

#endif
