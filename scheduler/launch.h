/* Turning a placed job into what runs inside guest 0: mpirun's command
 * line (the hostfile and hosts file it reads are lib/jobfiles.c's, written
 * by the node agent).  Pure functions, unit-tested. */
#ifndef VHPC_SCHED_LAUNCH_H
#define VHPC_SCHED_LAUNCH_H

#include "lib/consts.h"
#include "lib/jobspec.h"
#include "lib/consts.h"

/* mpirun's environment in guest 0 and the launch agent it uses there.
 * The image's folders come first in PATH and LD_LIBRARY_PATH, also when
 * a job gives its own (they are appended): the image's Open MPI is the
 * one its mpirun, orted and the vmshm BTL were built for. */
#define LAUNCH_IMAGE_PATH VHPC_GUEST_BIN ":/usr/bin:/usr/sbin:/bin:/sbin"
#define LAUNCH_IMAGE_LIBS "/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu"
extern const char *const launch_env[];
#define LAUNCH_RSH VHPC_GUEST_BIN "/vhpc-rsh"

struct launch_guest {
	char name[64];       /* hostname inside the job */
	uint32_t addr;       /* job network address, host byte order */
	int vcpus;
	int ranks;           /* ranks this guest runs */
};

struct launch_plan {
	const struct job_spec *spec;
	int nguests;
	struct launch_guest *guests;
	const char *rsh_path;     /* vhpc-rsh inside the guest */
	const char *hostfile;     /* path inside the guest */
	const char *net_if;       /* the job network's interface in guests */
	bool vmshm;               /* co-located guests use the vmshm BTL */
	const char *vmshm_component_dir; /* where mca_btl_vmshm.so is in the image */
	bool fabric;              /* guests have an RDMA device: ranks on other
	                           * hosts talk verbs (the ofi BTL) */
	const char *workdir;      /* the ranks' working directory; NULL = /tmp */
	const char *home;         /* their $HOME; NULL = /tmp */
	const char *image;        /* the image's name, for messages; NULL =
	                           * "the job's image" */
};

/* Ranks per guest: as even as possible, the first guests take the rest. */
void launch_split_ranks(int ranks, int nguests, int *out);
/* NULL-terminated argv for mpirun; free with argv_free (lib/argv.h). */
char **launch_mpirun_argv(const struct launch_plan *p);
/* What guest 0 runs: mpirun, once /bin/sh there has found the job's
 * program where the ranks will look for it (their PATH, or the working
 * folder for a name with a slash).  Else it says
 *   vhpc: PROG: not found in image IMG (PATH=...)
 * on stderr and exits 127, instead of mpirun's "N total processes failed
 * to start".  Every guest has the same image and folders, so guest 0's
 * answer is every guest's.  Free with argv_free. */
char **launch_guest_argv(const struct launch_plan *p);
/* What a command run beside the ranks (vhpc exec) adds to its guest's
 * environment so that it sees theirs: mpirun's launch_env, HOME, and the
 * job's variables as mpirun passes them (-x), PATH and LD_LIBRARY_PATH
 * after the image's folders.  home NULL = /tmp.  Free with argv_free. */
char **launch_exec_env(const struct job_spec *j, const char *home);
/* The ranks' PATH: the image's folders, then the job's PATH if it has one. */
void launch_rank_path(const struct job_spec *j, char *buf, size_t len);

#endif
