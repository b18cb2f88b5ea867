/*
 * What guests of every driver share: the environment vhpc-guestd starts
 * with, and the host's identity for the vmshm BTL.
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/vmshm/vmshm_copyprobe.h"
#include "nodeagent/job.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *na_boot_id(void)
{
	static char id[64];

	if (!id[0]) {
		char *buf = NULL;
		size_t len;
		struct verr e;

		if (read_file("/proc/sys/kernel/random/boot_id", &buf, &len, 64, &e) == 0) {
			buf[strcspn(buf, "\n")] = 0;
			snprintf(id, sizeof(id), "%s", buf);
		} else {
			gethostname(id, sizeof(id) - 1);
		}
		free(buf);
	}
	return id;
}

const char *const *na_guest_env(struct na_guest_env *e, const char *job, int index,
				const char *host_id, int vmshm_slots)
{
	int n = 0;

	e->v[n++] = "PATH=" VHPC_GUEST_BIN ":/usr/bin:/usr/sbin:/bin:/sbin";
	e->v[n++] = "HOME=/tmp";
	e->v[n++] = "TMPDIR=/tmp";
	e->v[n++] = "VHPC_JOB_KEY=/vhpc/job.key";
	snprintf(e->job, sizeof(e->job), "VHPC_JOB=%s", job);
	e->v[n++] = e->job;
	if (index >= 0) {
		snprintf(e->index, sizeof(e->index), "VHPC_GUEST_INDEX=%d", index);
		e->v[n++] = e->index;
	}
	if (host_id) {
		snprintf(e->host, sizeof(e->host), "VHPC_HOST_ID=%s", host_id);
		snprintf(e->slots, sizeof(e->slots), "VHPC_VMSHM_SLOTS=%d", vmshm_slots);
		e->v[n++] = e->host;
		e->v[n++] = "VHPC_VMSHM_PATH=" VHPC_VMSHM_GUEST_PATH;
		e->v[n++] = e->slots;
	}
	e->v[n] = NULL;
	return e->v;
}

void na_guest_env_add(struct na_guest_env *e, const char *name_value)
{
	int n = 0;

	while (e->v[n])
		n++;
	if (n + 1 < (int)(sizeof(e->v) / sizeof(e->v[0]))) {
		e->v[n] = name_value;
		e->v[n + 1] = NULL;
	}
}

const char *const *na_job_guest_env(const struct na_job *j, struct na_guest_env *e, int index)
{
	na_guest_env(e, j->s.label, index, j->vmshm[0] ? j->s.host_id : NULL, j->vmshm_slots);
	na_guest_env_vmshm(e, j);
	return e->v;
}

void na_guest_env_vmshm(struct na_guest_env *e, const struct na_job *j)
{
	if (!j->vmshm[0])
		return;
	if (na_job_single_copy(j))
		na_guest_env_add(e, "VHPC_VMSHM_SINGLE_COPY=1");
	if (j->movsb_env)
		na_guest_env_add(e, j->movsb_env);
}

static bool movsb_slow;
static double movsb_ratio;

static void movsb_measure(void)
{
	movsb_slow = vmshm_short_copies_slow(&movsb_ratio);
}

int na_movsb_env(const char **env, double *ratio, struct verr *err)
{
	/* vhpcd prepares jobs in several threads: measure once for all. */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const char *force = getenv("VHPC_AVOID_MOVSB");

	*env = NULL;
	*ratio = 0;
	if (force && *force) {
		if (strcmp(force, "0") && strcmp(force, "1"))
			return verr_set(err, "VHPC_AVOID_MOVSB: expected 0 or 1 (unset: measure), got '%.40s'",
					force);
		*env = *force == '1' ? VMSHM_AVOID_MOVSB_ENV : NULL;
		return 0;
	}
	pthread_once(&once, movsb_measure);
	*ratio = movsb_ratio;
	*env = movsb_slow ? VMSHM_AVOID_MOVSB_ENV : NULL;
	return 0;
}
