/*
 * The container driver's part of the crash sweep (na_sweep_job): runc
 * containers <job>-<guest index> under this run dir's runc root, deleted
 * with runc, or their state removed where runc cannot (half written when
 * their creator died); their processes die with the job's cgroups next.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/jobdir/jobdir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

int na_ctr_sweep(const char *job, const char *why, int *removed, struct verr *err)
{
	char root[PATH_MAX], prefix[32];
	DIR *d = opendir(na_runc_root(root, sizeof(root)));
	struct dirent *de;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "%s", root);
	snprintf(prefix, sizeof(prefix), "%s-", job);
	while ((de = readdir(d))) {
		const char *args[] = { "delete", "-f", de->d_name, NULL };
		struct verr e;

		if (!na_indexed_name(de->d_name, prefix))
			continue;
		if (na_runc(args, -1, NULL, 20000, &e) == 0) {
			log_info("%s: job %s: removed container %s", why, job, de->d_name);
			(*removed)++;
			continue;
		}
		snprintf(root + strlen(root), sizeof(root) - strlen(root), "/%s", de->d_name);
		if (rm_rf(root, &e) == 0) {
			log_info("%s: job %s: removed broken runc state of %s", why, job, de->d_name);
			(*removed)++;
		} else if (rc == 0) {
			rc = verr_set(err, "container %s: %s", de->d_name, e.msg);
		}
		na_runc_root(root, sizeof(root));
	}
	closedir(d);
	return rc;
}
