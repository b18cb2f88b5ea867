/*
 * What the jobs torn down here used, for the controller's accounting (vhpc
 * history, scheduler/PROTOCOL.md): read from the guests' cgroups just
 * before the teardown removes them, and kept for the `stopped` reply to
 * job_stop.  Kept rather than returned by the teardown, because a job may
 * be torn down by someone else than the job_stop that asks (the
 * heartbeat's stop list, a failed start, a job_stop whose first reply was
 * lost and that comes again).  The last USAGE_KEEP jobs are kept; a vhpcd
 * restart forgets them, and the controller then records the numbers as
 * unknown, never as 0.
 */
#include "daemon.h"
#include "nodeagent/nodeagent.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_KEEP 256

static struct kept {
	int64_t job;                  /* 0: a free slot */
	struct na_guest_usage *u;
	int n;
} kept[USAGE_KEEP];
static int next_slot;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct kept *find(int64_t job)
{
	for (int i = 0; i < USAGE_KEEP; i++)
		if (kept[i].job == job)
			return &kept[i];
	return NULL;
}

void vd_usage_take(struct vjob *j)
{
	struct na_guest_usage *u;
	struct kept *k;
	int n = j->nj ? na_job_nguests(j->nj) : 0;

	if (n <= 0 || !(u = calloc((size_t)n, sizeof(*u))))
		return;
	na_job_usage(j->nj, u);
	pthread_mutex_lock(&mu);
	/* A job started again here after a failed start replaces its record. */
	if (!(k = find(j->id))) {
		k = &kept[next_slot];
		next_slot = (next_slot + 1) % USAGE_KEEP;
	}
	free(k->u);
	k->job = j->id;
	k->u = u;
	k->n = n;
	pthread_mutex_unlock(&mu);
}

void vd_usage_forget(int64_t job)
{
	struct kept *k;

	pthread_mutex_lock(&mu);
	if ((k = find(job))) {
		free(k->u);
		memset(k, 0, sizeof(*k));
	}
	pthread_mutex_unlock(&mu);
}

void vd_usage_reply(struct json_object *reply, int64_t job)
{
	struct json_object *a;
	struct kept *k;

	pthread_mutex_lock(&mu);
	if ((k = find(job))) {
		a = json_object_new_array();
		for (int i = 0; i < k->n; i++) {
			struct json_object *e = json_object_new_object();

			json_object_object_add(e, "guest", json_object_new_int(k->u[i].index));
			/* What this host's cgroups do not tell stays out: unknown. */
			if (k->u[i].cpu_usec >= 0)
				json_object_object_add(e, "cpu_usec", json_object_new_int64(k->u[i].cpu_usec));
			if (k->u[i].mem_peak >= 0)
				json_object_object_add(e, "mem_peak", json_object_new_int64(k->u[i].mem_peak));
			json_object_array_add(a, e);
		}
		json_object_object_add(reply, "usage", a);
	}
	pthread_mutex_unlock(&mu);
}
