/*
 * Checkpoints at the job level (issue 36): what vhpcd's job_checkpoint,
 * job_pause and job_resume do with this node's guests of a job, whatever
 * their driver.  The drivers do the work (drivers.h's checkpoint ops);
 * this file decides whether a job can be taken at all and keeps the
 * guests of one node in step: all paused or none.
 */
#include "lib/err.h"
#include "lib/log.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/job.h"

#include <stdio.h>

/* Only started guests: a job being prepared or torn down has none to
 * pause, and saying so beats a driver's NULL dereference. */
static int started(const struct na_job *j, struct verr *err)
{
	if (!j || !j->drv || !j->g)
		return verr_set(err, "the job has no guests running here");
	for (int k = 0; k < j->s.nguests; k++)
		if (!j->g[k].priv)
			return verr_set(err, "guest %d is not running here", j->g[k].index);
	return 0;
}

int na_job_ckpt_check(const struct na_job *j, struct verr *err)
{
	const struct na_driver *d;

	if (started(j, err) < 0)
		return -1;
	d = j->drv;
	/* Every op is needed: a checkpoint that could pause but not save, or
	 * save but not restore, would stop a job for nothing. */
	if (!d->pause || !d->resume)
		return verr_set(err, "the %s driver cannot pause its guests, so their job cannot be checkpointed", d->name);
	/* The driver's reason first: what this host or job lacks is worth
	 * more to the user than what vhpc lacks. */
	if (d->ckpt_check && d->ckpt_check(j, err) < 0)
		return verr_wrap(err, "the %s driver cannot checkpoint this job", d->name);
	if (!d->ckpt_check || !d->save || !d->restore)
		return verr_set(err, "the %s driver cannot save and restore its guests (not written yet), "
				"so their job cannot be checkpointed", d->name);
	return 0;
}

int na_job_pause(struct na_job *j, struct verr *err)
{
	int k;

	if (started(j, err) < 0)
		return -1;
	if (!j->drv->pause || !j->drv->resume)
		return verr_set(err, "the %s driver cannot pause its guests", j->drv->name);
	for (k = 0; k < j->s.nguests; k++)
		if (j->drv->pause(j, k, err) < 0)
			break;
	if (k == j->s.nguests)
		return 0;
	verr_wrap(err, "guest %d", j->g[k].index);
	/* All or none: the controller resumes a job whose pause failed, but a
	 * lost resume must not leave half of this node frozen. */
	while (k-- > 0) {
		struct verr e;

		if (j->drv->resume(j, k, &e) < 0)
			log_warn("job %s: guest %d stays paused after a failed pause: %s", j->s.label, j->g[k].index, e.msg);
	}
	return -1;
}

int na_job_resume(struct na_job *j, struct verr *err)
{
	int rc = 0;

	if (started(j, err) < 0)
		return -1;
	if (!j->drv->resume)
		return verr_set(err, "the %s driver cannot pause or resume its guests", j->drv->name);
	/* A restored job's ports come up first (na_net_req.ports_down): by
	 * now every node has its guests back, sockets included.  Then every
	 * guest, even after a failure: none must stay frozen. */
	if (j->have_net && na_net_ports_up(&j->net, err) < 0)
		rc++;
	for (int k = 0; k < j->s.nguests; k++) {
		struct verr e;

		if (j->drv->resume(j, k, &e) < 0 && rc++ == 0)
			verr_set(err, "guest %d: %s", j->g[k].index, e.msg);
	}
	return rc ? -1 : 0;
}

bool na_job_paused(struct na_job *j)
{
	struct verr e;

	if (started(j, &e) < 0 || !j->drv->paused)
		return false;
	for (int k = 0; k < j->s.nguests; k++)
		if (j->drv->paused(j, k))
			return true;
	return false;
}
