/* The embedded scheduler: one job, this machine, the node agent in-process. */
#ifndef VHPC_SCHED_EMBEDDED_H
#define VHPC_SCHED_EMBEDDED_H

#include "lib/err.h"
#include "lib/jobspec.h"

struct embedded_opts {
	const char *topology;   /* hwloc spec for placement tests; NULL = this machine */
	bool allow_emulated_kvm; /* --driver kvm on a software-only KVM: start anyway */
	const char *user;       /* --user: root runs the job as this user; NULL = the caller */
};

/* Runs the job to completion and removes everything it made.  Returns the
 * job's exit status (EXIT_TIMEOUT when it ran out of time), or -1 with err
 * when vhpc could not run it. */
int embedded_run(const struct job_spec *j, const struct embedded_opts *o, struct verr *err);

#endif
