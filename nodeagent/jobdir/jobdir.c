/*
 * Job runtime dirs: <run dir>/jobs/<job>/, each with a lock file whose OFD
 * write lock the owner holds as long as it owns resources.  The kernel drops
 * the lock when the owner dies, however it dies, which is what makes a
 * SIGKILL at any moment recoverable: a dir without a held lock is garbage.
 *
 * OFD locks (not flock, not POSIX record locks) because they can be tested
 * without taking them (F_OFD_GETLK), conflict between threads of one
 * process that opened the file separately, and are not dropped when some
 * unrelated fd of the same file is closed.
 */
#include "lib/bytes.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/place/place.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

bool na_job_ok(const char *job)
{
	size_t n = job ? strlen(job) : 0;

	if (n < 1 || n > 12)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((job[i] >= 'a' && job[i] <= 'z') || (job[i] >= '0' && job[i] <= '9')))
			return false;
	return true;
}

int na_job_check(const char *job, struct verr *err)
{
	if (!na_job_ok(job))
		return verr_set(err, "job id '%.40s': expected 1 to 12 characters a-z, 0-9", job ? job : "(null)");
	return 0;
}

const char *na_jobs_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs", vhpc_run_dir());
	return buf;
}

const char *na_job_path(const char *job, char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs/%s", vhpc_run_dir(), job);
	return buf;
}

const char *na_runc_root(char *buf, size_t len)
{
	snprintf(buf, len, "%s/runc", vhpc_run_dir());
	return buf;
}

int na_run_lock(struct verr *err)
{
	char path[PATH_MAX];
	int fd;

	if (mkdir_p(na_jobs_dir(path, sizeof(path)), 0700, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/jobs/.lock", vhpc_run_dir());
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_errno(err, "%s", path);
	/* flock: blocking, per open file, so threads with their own open
	 * serialize as well as processes. */
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			verr_errno(err, "lock %s", path);
			close(fd);
			return -1;
		}
	}
	return fd;
}

void na_run_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

static int ofd_lock(int fd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET };

	return fcntl(fd, F_OFD_SETLK, &fl);
}

int na_jobdir_create(struct na_jobdir *jd, const char *job, struct verr *err)
{
	char jobs[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX], lock[PATH_MAX + 8], hex[17];
	uint8_t rnd[8];
	int fd;

	memset(jd, 0, sizeof(*jd));
	jd->lock_fd = -1;
	if (na_job_check(job, err) < 0)
		return -1;
	if (mkdir_p(na_jobs_dir(jobs, sizeof(jobs)), 0700, err) < 0)
		return verr_wrap(err, "job %s", job);
	na_job_path(job, final, sizeof(final));
	if (access(final, F_OK) == 0)
		return verr_set(err, "job %s: %s already exists (a live job, or one whose owner died: `vhpc cleanup` removes those)",
				job, final);
	/* Built under a temporary name and renamed once locked, so no one ever
	 * sees a job dir without its lock held. */
	random_bytes(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), hex);
	snprintf(tmp, sizeof(tmp), "%s/.new-%s-%s", jobs, job, hex);
	if (mkdir(tmp, 0700) < 0)
		return verr_errno(err, "job %s: mkdir %s", job, tmp);
	snprintf(lock, sizeof(lock), "%s/lock", tmp);
	fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ofd_lock(fd, F_WRLCK) < 0) {
		verr_errno(err, "job %s: lock %s", job, lock);
		goto fail;
	}
	dprintf(fd, "%d\n", (int)getpid());
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST)
			verr_set(err, "job %s: %s already exists", job, final);
		else
			verr_errno(err, "job %s: rename %s -> %s", job, tmp, final);
		goto fail;
	}
	snprintf(jd->job, sizeof(jd->job), "%s", job);
	snprintf(jd->path, sizeof(jd->path), "%s", final);
	jd->lock_fd = fd;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(lock);
	rmdir(tmp);
	return -1;
}

int na_jobdir_adopt(struct na_jobdir *jd, const char *job, struct verr *err)
{
	char lock[PATH_MAX];
	int fd;

	memset(jd, 0, sizeof(*jd));
	jd->lock_fd = -1;
	if (na_job_check(job, err) < 0)
		return -1;
	na_job_path(job, jd->path, sizeof(jd->path));
	snprintf(lock, sizeof(lock), "%s/lock", jd->path);
	fd = open(lock, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "job %s: %s", job, lock);
	if (ofd_lock(fd, F_WRLCK) < 0) {
		int e = errno;

		close(fd);
		if (e == EAGAIN || e == EACCES)
			return verr_set(err, "job %s is owned by a live process (%s is locked)", job, lock);
		errno = e;
		return verr_errno(err, "job %s: lock %s", job, lock);
	}
	if (ftruncate(fd, 0) == 0)
		dprintf(fd, "%d\n", (int)getpid());
	snprintf(jd->job, sizeof(jd->job), "%s", job);
	jd->lock_fd = fd;
	return 0;
}

int na_jobdir_record_cpus(struct na_jobdir *jd, const struct na_placement *p,
			  int n, struct verr *err)
{
	int *ids = malloc(sizeof(int) * (size_t)VHPC_MAX_VCPUS * (n > 0 ? n : 1));
	size_t k = 0;
	char path[PATH_MAX], *list;
	size_t cap = 16 * (size_t)VHPC_MAX_VCPUS * (n > 0 ? n : 1);
	int rc;

	list = malloc(cap);
	if (!ids || !list) {
		free(ids);
		free(list);
		return verr_set(err, "out of memory");
	}
	for (int g = 0; g < n; g++)
		for (int i = 0; i < p[g].ncpus; i++) {
			bool dup = false;

			for (size_t j = 0; j < k; j++)
				dup |= ids[j] == p[g].cpus[i];
			if (!dup)
				ids[k++] = p[g].cpus[i];
		}
	for (size_t i = 1; i < k; i++)    /* cpulist_format wants them sorted */
		for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int tmp = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = tmp;
		}
	cpulist_format(ids, k, list, cap - 1);
	strcat(list, "\n");
	snprintf(path, sizeof(path), "%s/cpus", jd->path);
	rc = write_file_atomic(path, list, strlen(list), 0600, err);
	free(ids);
	free(list);
	return rc;
}

/* A lock held by anyone, this process included (OFD locks conflict between
 * separate opens).  A dir without a lock file was never published. */
static bool jobdir_locked(const char *dir)
{
	char lock[PATH_MAX];
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd;
	bool held;

	snprintf(lock, sizeof(lock), "%s/lock", dir);
	fd = open(lock, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	close(fd);
	return held;
}

bool na_jobdir_alive(const char *job)
{
	char dir[PATH_MAX];

	return na_job_ok(job) && jobdir_locked(na_job_path(job, dir, sizeof(dir)));
}

/* A stale job's guests may still run until na_cleanup_stale removes them,
 * so their cpus count as busy too. */
static int busy_scan(int **cpus, int *n, const char *except, struct verr *err)
{
	char jobs[PATH_MAX];
	DIR *d;
	struct dirent *de;
	int cap = 64, k = 0;
	int *v = malloc(sizeof(int) * cap);

	*cpus = NULL;
	*n = 0;
	if (!v)
		return verr_set(err, "out of memory");
	d = opendir(na_jobs_dir(jobs, sizeof(jobs)));
	if (!d) {
		if (errno == ENOENT) {
			*cpus = v;
			return 0;
		}
		free(v);
		return verr_errno(err, "%s", jobs);
	}
	while ((de = readdir(d))) {
		char path[PATH_MAX], *buf;
		size_t len, got;
		int ids[1024];
		struct verr e;

		if (!na_job_ok(de->d_name) || (except && !strcmp(de->d_name, except)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/cpus", jobs, de->d_name);
		if (read_file(path, &buf, &len, 1 << 16, &e) < 0)
			continue;
		if (cpulist_parse(buf, ids, 1024, &got) < 0) {
			log_warn("%s: not a cpu list; ignored", path);
			got = 0;
		}
		free(buf);
		for (size_t i = 0; i < got; i++) {
			if (k == cap) {
				int *nv = realloc(v, sizeof(int) * (cap *= 2));

				if (!nv) {
					closedir(d);
					free(v);
					return verr_set(err, "out of memory");
				}
				v = nv;
			}
			v[k++] = ids[i];
		}
	}
	closedir(d);
	*cpus = v;
	*n = k;
	return 0;
}

int na_busy_cpus(int **cpus, int *n, struct verr *err)
{
	return busy_scan(cpus, n, NULL, err);
}

int na_place_job(const struct na_topo *t, const struct na_place_req *r,
		 struct na_jobdir *jd, struct na_placement *out, struct verr *err)
{
	struct na_place_req req = *r;
	int *busy = NULL, nbusy = 0, *all = NULL, fd, rc = -1;

	fd = na_run_lock(err);
	if (fd < 0)
		return -1;
	if (busy_scan(&busy, &nbusy, jd->job, err) < 0)
		goto out;
	all = malloc(sizeof(int) * (size_t)(nbusy + r->nbusy + 1));
	if (!all) {
		verr_set(err, "out of memory");
		goto out;
	}
	memcpy(all, busy, sizeof(int) * nbusy);
	if (r->nbusy)
		memcpy(all + nbusy, r->busy_cpus, sizeof(int) * r->nbusy);
	req.busy_cpus = all;
	req.nbusy = nbusy + r->nbusy;
	if (na_place(t, &req, out, err) < 0)
		goto out;
	rc = na_jobdir_record_cpus(jd, out, r->nguests, err);
out:
	na_run_unlock(fd);
	free(busy);
	free(all);
	return rc;
}

int na_jobdir_remove(struct na_jobdir *jd, struct verr *err)
{
	int removed = 0, rc;

	if (jd->lock_fd < 0)
		return verr_set(err, "job %s: its dir is not held by this process", jd->job);
	rc = na_sweep_job(jd->job, jd->path, "teardown", &removed, err);
	if (removed)
		log_warn("job %s: teardown removed %d resource%s still there by name",
			 jd->job, removed, removed > 1 ? "s" : "");
	if (rc == 0 && rm_rf(jd->path, err) < 0)
		rc = verr_wrap(err, "job %s", jd->job);
	/* The lock goes last: until the dir is gone no one else may sweep it. */
	close(jd->lock_fd);
	jd->lock_fd = -1;
	return rc;
}
