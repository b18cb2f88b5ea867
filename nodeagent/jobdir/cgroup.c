/*
 * Removing a job's cgroups by name in every hierarchy: the hosts here are
 * cgroup v1 hybrid (one mount per controller, plus name=systemd and the
 * cgroup2 "unified" mount), and runc creates its path in each of them.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "nodeagent/jobdir/jobdir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mnts {
	char **v;
	int n;
};

static int add_cgroup_mount(const char *mnt, const char *fstype, void *arg)
{
	struct mnts *m = arg;
	char **nv;

	if (strcmp(fstype, "cgroup") && strcmp(fstype, "cgroup2"))
		return 0;
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->v[i], mnt))
			return 0;
	nv = realloc(m->v, sizeof(char *) * (m->n + 1));
	if (!nv)
		return -1;
	m->v = nv;
	if (!(m->v[m->n] = strdup(mnt)))
		return -1;
	m->n++;
	return 0;
}

int na_cgroup_mounts(char ***mnts, int *n, struct verr *err)
{
	struct mnts m = { 0 };

	if (na_each_mount(add_cgroup_mount, &m, err) < 0)
		return -1;
	*mnts = m.v;
	*n = m.n;
	return 0;
}

void na_cgroup_mounts_free(char **mnts, int n)
{
	for (int i = 0; i < n; i++)
		free(mnts[i]);
	free(mnts);
}

/* A v1 cpuset cgroup takes no task until it has cpus and mems: those of
 * its parent, down from the hierarchy's root. */
static int cpuset_inherit(const char *root, const char *rel, struct verr *err)
{
	char dir[PATH_MAX], *p;
	size_t base;

	snprintf(dir, sizeof(dir), "%s/%s", root, rel);
	base = strlen(root);
	for (p = dir + base + 1;; p++) {
		bool last = !*p;

		if (*p == '/' || last) {
			static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };

			*p = 0;
			for (int f = 0; f < 2; f++) {
				char mine[PATH_MAX + 16], parent[PATH_MAX + 16], *v = NULL, *pv = NULL;
				size_t n;
				struct verr e;

				snprintf(mine, sizeof(mine), "%s/%s", dir, files[f]);
				snprintf(parent, sizeof(parent), "%.*s/%s", (int)(strrchr(dir, '/') - dir), dir, files[f]);
				if (read_file(mine, &v, &n, 4096, &e) == 0 && v[strspn(v, " \n")] == 0 &&
				    read_file(parent, &pv, &n, 4096, &e) == 0 && write_str(mine, pv, err) < 0) {
					free(v);
					free(pv);
					return -1;
				}
				free(v);
				free(pv);
			}
			if (last)
				return 0;
			*p = '/';
		}
	}
}

int na_cgroup_enter(const char *rel, struct verr *err)
{
	return na_cgroup_attach(rel, getpid(), err);
}

int na_cgroup_attach(const char *rel, pid_t who, struct verr *err)
{
	char **m, pid[24];
	int n, rc = 0;

	if (na_cgroup_mounts(&m, &n, err) < 0)
		return -1;
	snprintf(pid, sizeof(pid), "%d", (int)who);
	for (int i = 0; i < n && rc == 0; i++) {
		char dir[PATH_MAX], procs[PATH_MAX + 16];

		snprintf(dir, sizeof(dir), "%s/%s", m[i], rel);
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		if (mkdir_p(dir, 0755, err) < 0 || cpuset_inherit(m[i], rel, err) < 0 || write_str(procs, pid, err) < 0)
			rc = verr_wrap(err, "entering cgroup %s", dir);
	}
	na_cgroup_mounts_free(m, n);
	return rc;
}

void na_cgroup_leave(const char *rel)
{
	char **m, pid[24];
	int n;
	struct verr e;

	if (na_cgroup_mounts(&m, &n, &e) < 0)
		return;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	for (int i = 0; i < n; i++) {
		char dir[PATH_MAX], procs[PATH_MAX + 16];

		snprintf(procs, sizeof(procs), "%s/cgroup.procs", m[i]);
		snprintf(dir, sizeof(dir), "%s/%s", m[i], rel);
		if (write_str(procs, pid, &e) == 0)
			rmdir(dir);
	}
	na_cgroup_mounts_free(m, n);
}

/* A frozen (v1 freezer) task cannot die from SIGKILL until thawed. */
static void thaw(const char *dir)
{
	char path[PATH_MAX];
	struct verr e;

	snprintf(path, sizeof(path), "%s/freezer.state", dir);
	if (access(path, W_OK) == 0)
		write_str(path, "THAWED", &e);
	snprintf(path, sizeof(path), "%s/cgroup.freeze", dir);
	if (access(path, W_OK) == 0)
		write_str(path, "0", &e);
}

/* The tasks in dir: how many (-1 when it cannot be read), the first max of
 * them in pids, each killed when asked. */
static int read_procs(const char *dir, pid_t *pids, int max, bool kill_them)
{
	char path[PATH_MAX], *buf, *p, *end;
	size_t len;
	struct verr e;
	int n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (read_file(path, &buf, &len, 1 << 20, &e) < 0)
		return -1;
	for (p = buf; *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid <= 0)
			continue;
		if (n < max)
			pids[n] = (pid_t)pid;
		n++;
		if (kill_them)
			kill((pid_t)pid, SIGKILL);
	}
	free(buf);
	return n;
}

/* Number of tasks still inside (killing them when asked). */
static int procs(const char *dir, bool kill_them)
{
	int n = read_procs(dir, NULL, 0, kill_them);

	return n < 0 ? 0 : n;
}

/* The hierarchies' mount points, for a cgroup path rel inside each. */
static int mounts_for(const char *rel, char ***m, int *n, struct verr *err)
{
	if (!rel[0] || rel[0] == '/' || strstr(rel, ".."))
		return verr_set(err, "cgroup path '%s' must be relative and inside its hierarchy", rel);
	return na_cgroup_mounts(m, n, err);
}

int na_cgroup_pids(const char *rel, pid_t *pids, int max, struct verr *err)
{
	char **m;
	int n, count = 0;

	if (mounts_for(rel, &m, &n, err) < 0)
		return -1;
	/* Every hierarchy holds the same tasks (na_cgroup_attach): the first
	 * that has rel answers. */
	for (int i = 0; i < n; i++) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/%s", m[i], rel);
		if ((count = read_procs(dir, pids, max, false)) >= 0)
			break;
		count = 0;
	}
	na_cgroup_mounts_free(m, n);
	return count;
}

static int remove_tree(const char *dir, bool kill_them, int depth, int *removed,
		       struct verr *err)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > 16)
		return verr_set(err, "%s: cgroup tree too deep", dir);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : verr_errno(err, "%s", dir);
	while ((de = readdir(d))) {
		char sub[PATH_MAX];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		if (remove_tree(sub, kill_them, depth + 1, removed, err) < 0)
			rc = -1;
	}
	closedir(d);
	if (rc < 0)
		return -1;
	if (kill_them && procs(dir, false)) {
		thaw(dir);
		procs(dir, true);
	}
	/* Killed tasks leave the cgroup once the kernel has reaped them. */
	for (int i = 0; i < 200; i++) {
		if (rmdir(dir) == 0) {
			(*removed)++;
			log_debug("removed cgroup %s", dir);
			return 0;
		}
		if (errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			break;
		if (!kill_them)
			return verr_set(err, "cgroup %s still has %d task(s)", dir, procs(dir, false));
		procs(dir, true);
		usleep(10000);
	}
	return verr_errno(err, "rmdir cgroup %s (tasks left: %d)", dir, procs(dir, false));
}

int na_cgroup_remove(const char *rel, bool kill_them, int *removed, struct verr *err)
{
	char **mnts;
	int n, rc = 0;

	if (mounts_for(rel, &mnts, &n, err) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		char dir[PATH_MAX];
		struct verr e;

		snprintf(dir, sizeof(dir), "%s/%s", mnts[i], rel);
		if (remove_tree(dir, kill_them, 0, removed, &e) < 0 && rc == 0) {
			*err = e;
			rc = -1;
		}
	}
	na_cgroup_mounts_free(mnts, n);
	return rc;
}

/* A job's parent cgroup goes with its last guest: rmdir fails while other
 * guests of the job are still in it, and that is the point. */
void na_cgroup_rmdir_job(const char *job)
{
	char **mnts;
	int n;
	struct verr e;

	if (na_cgroup_mounts(&mnts, &n, &e) < 0)
		return;
	for (int i = 0; i < n; i++) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/vhpc/%s", mnts[i], job);
		rmdir(dir);
	}
	na_cgroup_mounts_free(mnts, n);
}
