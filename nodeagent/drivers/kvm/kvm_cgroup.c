/*
 * A kvm guest's cgroups: vhpc/<job>/<index>, the names the crash sweep
 * removes (killing what is inside), in the cpuset hierarchy (so every
 * thread of vhpc-hv, not only the pinned vCPUs, stays on the placed CPUs
 * and nodes) and in the cgroup2 one (where a pure cgroup v2 host keeps
 * everything).  Other v1 hierarchies are left as they are: the process
 * keeps the memory and pids limits of whoever started it.
 */
#include "nodeagent/nodeagent.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "kvm_int.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/place/place.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_v2(const char *mnt)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
	return access(path, F_OK) == 0;
}

static bool is_cpuset_v1(const char *mnt)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/cpuset.cpus", mnt);
	return access(path, F_OK) == 0 && !is_v2(mnt);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* cpulist_format wants sorted ids; a placement lists CPUs in vCPU order. */
static const char *sorted_list(const int *ids, int n, char *buf, size_t len)
{
	int v[VHPC_MAX_VCPUS];

	if (n > VHPC_MAX_VCPUS)
		n = VHPC_MAX_VCPUS;
	memcpy(v, ids, sizeof(int) * (size_t)n);
	qsort(v, (size_t)n, sizeof(int), cmp_int);
	return cpulist_format(v, (size_t)n, buf, len);
}

/* In cpuset v1 a new cgroup starts with no CPUs and nodes, and no task may
 * join it until it has some: each new level copies its parent's. */
static int inherit(const char *dir, const char *file, struct verr *err)
{
	char path[PATH_MAX], parent[PATH_MAX], *buf = NULL, *cur = NULL;
	size_t len;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (read_file(path, &cur, &len, 4096, err) < 0)
		return -1;
	if (cur[strspn(cur, " \n")]) {
		free(cur);
		return 0;
	}
	free(cur);
	snprintf(parent, sizeof(parent), "%s/../%s", dir, file);
	if (read_file(parent, &buf, &len, 4096, err) < 0)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	rc = write_str(path, buf, err);
	free(buf);
	return rc;
}

static int make_level(const char *dir, bool cpuset, struct verr *err)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "cgroup %s", dir);
	if (cpuset && (inherit(dir, "cpuset.cpus", err) < 0 || inherit(dir, "cpuset.mems", err) < 0))
		return verr_wrap(err, "cgroup %s", dir);
	return 0;
}

int kvm_cgroups_prepare(const char *job, int index, const struct na_placement *p,
			int *fds, int max, int *n, struct verr *err)
{
	char **mnts;
	int nm, rc = 0;

	*n = 0;
	if (na_cgroup_mounts(&mnts, &nm, err) < 0)
		return -1;
	for (int i = 0; i < nm && rc == 0; i++) {
		char top[PATH_MAX], jobd[PATH_MAX], leaf[PATH_MAX], procs[PATH_MAX + 16], cpus[1024];
		bool cs = is_cpuset_v1(mnts[i]);

		if (!cs && !is_v2(mnts[i]))
			continue;
		if (*n == max) {
			rc = verr_set(err, "too many cgroup hierarchies");
			break;
		}
		snprintf(top, sizeof(top), "%s/vhpc", mnts[i]);
		snprintf(jobd, sizeof(jobd), "%s/%s", top, job);
		snprintf(leaf, sizeof(leaf), "%s/%d", jobd, index);
		if (make_level(top, cs, err) < 0 || make_level(jobd, cs, err) < 0 ||
		    make_level(leaf, cs, err) < 0) {
			rc = -1;
			break;
		}
		if (cs) {
			snprintf(procs, sizeof(procs), "%s/cpuset.cpus", leaf);
			if (write_str(procs, sorted_list(p->cpus, p->ncpus, cpus, sizeof(cpus)), err) < 0) {
				rc = verr_wrap(err, "cgroup %s: the placed CPUs", leaf);
				break;
			}
			if (p->nmems > 0) {
				snprintf(procs, sizeof(procs), "%s/cpuset.mems", leaf);
				if (write_str(procs, sorted_list(p->mems, p->nmems, cpus, sizeof(cpus)), err) < 0) {
					rc = verr_wrap(err, "cgroup %s: the placed NUMA nodes", leaf);
					break;
				}
			}
		}
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
		fds[*n] = open(procs, O_WRONLY | O_CLOEXEC);
		if (fds[*n] < 0) {
			rc = verr_errno(err, "%s", procs);
			break;
		}
		(*n)++;
	}
	na_cgroup_mounts_free(mnts, nm);
	if (rc == 0 && *n == 0)
		rc = verr_set(err, "no cpuset (cgroup v1) or cgroup2 hierarchy is mounted");
	if (rc < 0) {
		for (int i = 0; i < *n; i++)
			close(fds[i]);
		*n = 0;
	}
	return rc;
}

