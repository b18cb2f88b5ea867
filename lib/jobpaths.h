/* Where a job runs and what host paths its guests get: the same answer
 * for `vhpc run` on one machine, for vhpc-ctld and for Slurm jobs. */
#ifndef VHPC_LIB_JOBPATHS_H
#define VHPC_LIB_JOBPATHS_H

#include <sys/types.h>
#include "lib/binds.h"
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/jobspec.h"

struct job_paths {
	struct bind_list binds;
	char wdir[BIND_PATH_MAX];   /* the ranks' working directory in the guests */
	char home[BIND_PATH_MAX];   /* their $HOME */
};

/* For job j of uid: the cluster's site binds, the job's own, the user's home
 * (when the cluster shares homes and it exists here) and the submission
 * directory.  A note for the user (what was left out, and why) goes to
 * the log.  Errors name the bind and the rule it breaks. */
int job_paths_plan(const struct cluster_cfg *cl, const struct job_spec *j, uid_t uid,
		   struct job_paths *out, struct verr *err);

#endif
