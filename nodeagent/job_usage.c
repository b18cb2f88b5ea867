/*
 * What a job's guests here used, for the controller's accounting (vhpc
 * history): read from each guest's cgroups (vhpc/<job>/<guest index>, the
 * same names for every driver) while they still exist.
 */
#include "nodeagent/job.h"

#include <stdio.h>

void na_job_usage(const struct na_job *j, struct na_guest_usage *out)
{
	for (int k = 0; j && k < j->s.nguests; k++) {
		char rel[64];

		out[k].index = j->s.index ? j->s.index[k] : k;
		snprintf(rel, sizeof(rel), "vhpc/%s/%d", j->jd.job, out[k].index);
		na_cgroup_usage(rel, &out[k].cpu_usec, &out[k].mem_peak);
	}
}
