/*
 * A kvm guest's cgroups: vhpc/<job>/<index>, the names the crash sweep
 * removes (killing what is inside), in the cpuset hierarchy (so every
 * thread of vhpc-hv, not only the pinned vCPUs, stays on the placed CPUs
 * and nodes), in the memory one, and in the cgroup2 one (where a pure
 * cgroup v2 host keeps everything).  Other v1 hierarchies are left as they
 * are: the process keeps the pids limits of whoever started it.
 *
 * The memory limit (v1 memory.limit_in_bytes and memsw, or v2 memory.max
 * with no swap) bounds vhpc-hv and the guest's virtiofsd together: the
 * guest's RAM and the vmshm region it maps are charged there, and a
 * guest that drives its devices into allocating is stopped by the
 * cgroup's OOM killer rather than by the node's.  kvm_mem_limit says how
 * much; kvm_mem_peak reports what was used, for the log at the end.
 */
#include "nodeagent/job.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
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

static bool has_file(const char *dir, const char *file)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

static bool is_cpuset_v1(const char *mnt)
{
	return has_file(mnt, "cpuset.cpus") && !is_v2(mnt);
}

static bool is_memory_v1(const char *mnt)
{
	return has_file(mnt, "memory.limit_in_bytes") && !is_v2(mnt);
}

uint64_t kvm_mem_limit(uint64_t ram, uint64_t vmshm)
{
	return ram + vmshm + KVM_MEM_OVERHEAD + ram / 32;
}

static int write_limit(const char *leaf, const char *file, uint64_t v, struct verr *err)
{
	char path[PATH_MAX + 32], num[32];

	snprintf(path, sizeof(path), "%s/%s", leaf, file);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	if (write_str(path, num, err) < 0)
		return verr_wrap(err, "the guest's memory limit");
	return 0;
}

/* v1: memory and memory+swap alike, so the guest cannot spill to swap
 * past it (memsw exists where swap is accounted). */
static int limit_v1(const char *leaf, uint64_t limit, struct verr *err)
{
	if (write_limit(leaf, "memory.limit_in_bytes", limit, err) < 0)
		return -1;
	return has_file(leaf, "memory.memsw.limit_in_bytes") ? write_limit(leaf, "memory.memsw.limit_in_bytes", limit, err) : 0;
}

/* v2: the controller must be on in every level above the leaf (systemd
 * turns it on at the root; a host without it gets it there too); where
 * the root does not offer it there is nothing to set.  1 when set. */
static int limit_v2(const char *mnt, const char *top, const char *jobd, const char *leaf, uint64_t limit,
		    struct verr *err)
{
	const char *levels[] = { mnt, top, jobd };
	char path[PATH_MAX + 32];
	struct verr e;

	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/cgroup.subtree_control", levels[i]);
		if (write_str(path, "+memory", &e) < 0)
			return 0;
	}
	if (!has_file(leaf, "memory.max"))
		return 0;
	if (write_limit(leaf, "memory.max", limit, err) < 0 ||
	    (has_file(leaf, "memory.swap.max") && write_limit(leaf, "memory.swap.max", 0, err) < 0))
		return -1;
	return 1;
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

int kvm_cgroups_prepare(const char *job, int index, const struct na_placement *p, uint64_t mem_limit,
			int *fds, int max, int *n, struct verr *err)
{
	char **mnts;
	int nm, rc = 0;
	bool limited = false;

	*n = 0;
	if (na_cgroup_mounts(&mnts, &nm, err) < 0)
		return -1;
	for (int i = 0; i < nm && rc == 0; i++) {
		char top[PATH_MAX], jobd[PATH_MAX], leaf[PATH_MAX], procs[PATH_MAX + 16], cpus[1024];
		bool cs = is_cpuset_v1(mnts[i]), mem = is_memory_v1(mnts[i]);

		if (!cs && !mem && !is_v2(mnts[i]))
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
		if (mem) {
			if ((rc = limit_v1(leaf, mem_limit, err)) < 0)
				break;
			limited = true;
		} else if (is_v2(mnts[i])) {
			int r = limit_v2(mnts[i], top, jobd, leaf, mem_limit, err);

			if ((rc = r < 0 ? -1 : 0) < 0)
				break;
			limited |= r > 0;
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
	if (rc == 0 && !limited)
		log_warn("job %s guest %d: no memory controller (cgroup v1 memory, or cgroup2 with memory enabled "
			 "at its root): vhpc-hv's memory is not limited", job, index);
	if (rc < 0) {
		for (int i = 0; i < *n; i++)
			close(fds[i]);
		*n = 0;
	}
	return rc;
}


uint64_t kvm_mem_peak(const char *job, int index)
{
	char **mnts;
	int nm;
	uint64_t peak = 0;
	struct verr e;

	if (na_cgroup_mounts(&mnts, &nm, &e) < 0)
		return 0;
	for (int i = 0; i < nm && !peak; i++) {
		char path[PATH_MAX], *t = NULL;
		size_t len;
		long long v;

		snprintf(path, sizeof(path), "%s/vhpc/%s/%d/%s", mnts[i], job, index,
			 is_memory_v1(mnts[i]) ? "memory.max_usage_in_bytes" : "memory.peak");
		if ((is_memory_v1(mnts[i]) || is_v2(mnts[i])) && read_file(path, &t, &len, 64, &e) == 0 &&
		    parse_ll(strtok(t, "\n") ? t : "", 1, INT64_MAX, &v) == 0)
			peak = (uint64_t)v;
		free(t);
	}
	na_cgroup_mounts_free(mnts, nm);
	return peak;
}
