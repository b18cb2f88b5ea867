/*
 * What callers may read of a job the agent started (nodeagent.h): they
 * get answers, never the agent's own structs, which may change.
 */
#include "lib/inet.h"
#include "lib/parse.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/job.h"

#include <stdio.h>
#include <string.h>

const char *na_job_driver_name(const struct na_job *j)
{
	return j->drv ? j->drv->name : "none";
}

bool na_job_ckpt_no_sessions(const struct na_job *j)
{
	return j && j->drv && j->drv->ckpt_no_sessions;
}

bool na_job_ckpt_damaged(const struct na_job *j)
{
	return j && j->ckpt_damaged;
}

int na_job_nguests(const struct na_job *j)
{
	return j && j->g ? j->s.nguests : 0;
}

uint32_t na_job_guest_addr(const struct na_job *j, int k)
{
	return k >= 0 && k < na_job_nguests(j) ? j->s.subnet.addr + 2 + (uint32_t)j->g[k].index : 0;
}

int na_job_guest_info(const struct na_job *j, int k, struct na_guest_info *gi, struct verr *err)
{
	memset(gi, 0, sizeof(*gi));
	if (k < 0 || k >= na_job_nguests(j) || !j->place)
		return verr_set(err, "guest %d: this node has %d of the job's guests", k, na_job_nguests(j));
	gi->index = j->g[k].index;
	gi->addr = na_job_guest_addr(j, k);
	snprintf(gi->netns, sizeof(gi->netns), "%s", j->net.guest_netns[k]);
	cpulist_format(j->place[k].cpus, (size_t)j->place[k].ncpus, gi->cpus, sizeof(gi->cpus));
	cpulist_format(j->place[k].mems, (size_t)j->place[k].nmems, gi->mems, sizeof(gi->mems));
	return 0;
}

const char *na_job_dir(const struct na_job *j)
{
	return j && j->have_jd ? j->jd.path : "";
}

void na_job_key_path(const struct na_job *j, char *buf, size_t len)
{
	snprintf(buf, len, "%s/job.key", j->shared);
}

bool na_job_has_vmshm(const struct na_job *j)
{
	return j->vmshm[0] != 0;
}

bool na_job_has_fabric(const struct na_job *j)
{
	return j->have_fab;
}

bool na_job_single_copy(const struct na_job *j)
{
	return j->vmshm[0] && j->drv && j->drv->single_copy && j->drv->single_copy(j);
}

const char *na_job_spool(const struct na_job *j)
{
	return j->spool[0] ? j->spool : NULL;
}
