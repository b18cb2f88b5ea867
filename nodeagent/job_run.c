/* A command run in one guest of a job and waited for: the job's launcher
 * (mpirun in guest 0 for `vhpc run`).  The agent watches the job's other
 * guests while it waits, since it is the one that knows how they run. */
#include "lib/chan.h"
#include "lib/err.h"
#include "lib/gexec.h"
#include "nodeagent/job.h"
#include "nodeagent/nodeagent.h"

/* A guest that stopped ends the wait: its ranks are gone, and mpirun may
 * not notice for a long time (a VM that vanishes sends no TCP reset). */
static bool guest_gone(void *arg, char *why, size_t len)
{
	return na_job_guest_gone(arg, why, len);
}

int na_job_run(struct na_job *j, int k, const struct gexec_req *r, int *status, struct verr *err)
{
	struct gexec_req req = *r;
	struct chan c;
	int rc;

	if (na_job_connect(j, k, &c, 5000, err) < 0)
		return verr_wrap(err, "guest g%d", k < 0 || k >= j->s.nguests || !j->g ? k : j->g[k].index);
	req.gone = guest_gone;
	req.gone_arg = j;
	rc = gexec_run(&c, &req, status, err);
	chan_close(&c);
	return rc;
}
