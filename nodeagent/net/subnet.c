/*
 * Job subnets on one machine (embedded mode): the reservation is the file
 * <job dir>/subnet, so it lives and dies with the job dir (a dead job's
 * subnet stays reserved until na_cleanup_stale sweeps the dir).
 */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_subnet(const char *dir, struct ipv4net *out)
{
	char path[PATH_MAX], *buf;
	size_t len;
	struct verr e;
	int rc;

	snprintf(path, sizeof(path), "%s/subnet", dir);
	if (read_file(path, &buf, &len, 64, &e) < 0)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	rc = ipv4net_parse(buf, false, out);
	free(buf);
	return rc;
}

static bool overlaps(const struct ipv4net *a, const struct ipv4net *b)
{
	int p = a->prefix < b->prefix ? a->prefix : b->prefix;
	uint32_t mask = p ? ~0u << (32 - p) : 0;

	return (a->addr & mask) == (b->addr & mask);
}

int na_subnet_alloc(const struct cluster_cfg *c, struct na_jobdir *jd,
		    struct ipv4net *out, struct verr *err)
{
	char jobs[PATH_MAX], path[PATH_MAX], buf[64], a[20];
	struct ipv4net *used = NULL;
	size_t nused = 0, cap = 0;
	uint64_t count;
	DIR *d;
	struct dirent *de;
	int fd, rc = -1;

	if (c->job_prefix < c->job_pool.prefix || c->job_prefix > 29)
		return verr_set(err, "job subnets: prefix /%lld must lie between the pool's /%d and /29",
				c->job_prefix, c->job_pool.prefix);
	if (jd->lock_fd < 0)
		return verr_set(err, "job %s: subnet allocation needs the job dir held", jd->job);
	if (read_subnet(jd->path, out) == 0)
		return 0;   /* already has one (adopted job) */
	fd = na_run_lock(err);
	if (fd < 0)
		return -1;
	d = opendir(na_jobs_dir(jobs, sizeof(jobs)));
	if (!d) {
		verr_errno(err, "%s", jobs);
		goto out;
	}
	while ((de = readdir(d))) {
		struct ipv4net n;

		if (!na_job_ok(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", jobs, de->d_name);
		if (read_subnet(path, &n) < 0)
			continue;
		if (nused == cap) {
			struct ipv4net *nu = realloc(used, sizeof(*used) * (cap = cap ? 2 * cap : 16));

			if (!nu) {
				closedir(d);
				verr_set(err, "out of memory");
				goto out;
			}
			used = nu;
		}
		used[nused++] = n;
	}
	closedir(d);
	count = 1ull << (c->job_prefix - c->job_pool.prefix);
	if (count > 65536)   /* more than any machine runs at once */
		count = 65536;
	for (uint64_t k = 0; k < count; k++) {
		struct ipv4net cand = {
			.addr = c->job_pool.addr + (uint32_t)(k << (32 - c->job_prefix)),
			.prefix = (int)c->job_prefix,
		};
		bool taken = false;

		for (size_t i = 0; i < nused && !taken; i++)
			taken = overlaps(&cand, &used[i]);
		if (taken)
			continue;
		snprintf(buf, sizeof(buf), "%s/%d\n", ipv4_format(cand.addr, a, sizeof(a)), cand.prefix);
		snprintf(path, sizeof(path), "%s/subnet", jd->path);
		if (write_file_atomic(path, buf, strlen(buf), 0600, err) < 0)
			goto out;
		*out = cand;
		rc = 0;
		goto out;
	}
	verr_set(err, "job %s: no free /%lld left in the job pool %s/%d: all %llu are reserved by jobs in %s",
		 jd->job, c->job_prefix, ipv4_format(c->job_pool.addr, a, sizeof(a)),
		 c->job_pool.prefix, (unsigned long long)count, jobs);
out:
	na_run_unlock(fd);
	free(used);
	return rc;
}
