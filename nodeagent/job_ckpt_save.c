/*
 * This node's part of a job's checkpoint (issue 36; scheduler/PROTOCOL.md,
 * job_checkpoint): the guests here, paused, through their driver's save,
 * the vmshm region once, guest 0's host spool, and the part file that
 * seals them, written last.  The layout is the contract's (nodeagent/
 * README.md, "Checkpoints").  Whatever fails, this node's files go and
 * the guests stay paused: the controller resumes them.
 */
#include "lib/err.h"
#include "lib/log.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PART_FILES_MAX 4096

struct part {
	int cfd;
	char *rel[PART_FILES_MAX];
	int n;
};

static int add(struct part *p, const char *dir, const char *name, struct verr *err)
{
	if (p->n == PART_FILES_MAX)
		return verr_set(err, "more than %d files in one node's part", PART_FILES_MAX);
	if (asprintf(&p->rel[p->n], "%s%s%s", dir ? dir : "", dir ? "/" : "", name) < 0)
		return verr_set(err, "out of memory");
	p->n++;
	return 0;
}

/* Every regular file the driver left in dirfd, listed as dir/name; their
 * space on disk (sparse files count what they hold). */
static int list_dir(struct part *p, int dirfd, const char *dir, uint64_t *bytes, struct verr *err)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	int rc = 0;

	*bytes = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return verr_errno(err, "%s", dir);
	}
	rewinddir(d);
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = verr_errno(err, "%s/%s", dir, e->d_name);
		else if (!S_ISREG(st.st_mode))
			rc = verr_set(err, "%s/%s: not a regular file", dir, e->d_name);
		else {
			*bytes += (uint64_t)st.st_blocks * 512;
			rc = add(p, dir, e->d_name, err);
		}
	}
	closedir(d);
	return rc;
}

/* One file of the host (the vmshm region, a spool file) as name under
 * dirfd, sparse; its space on disk. */
static int copy_file(int from, int dirfd, const char *name, uint64_t *bytes, struct verr *err)
{
	int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	uint64_t n;
	struct stat st;
	int rc;

	if (fd < 0)
		return verr_errno(err, "%s", name);
	rc = na_copy_sparse(from, fd, &n, err);
	if (rc == 0 && fsync(fd) < 0)
		rc = verr_errno(err, "%s", name);
	else if (rc < 0)
		verr_wrap(err, "%s", name);
	if (rc == 0 && fstat(fd, &st) == 0)
		*bytes = (uint64_t)st.st_blocks * 512;
	close(fd);
	return rc;
}

static int save_vmshm(struct na_job *j, struct part *p, const char *name, uint64_t *bytes, struct verr *err)
{
	/* The region is the job's user's file: a FIFO or a link put in its
	 * place must neither hang the save nor be followed. */
	int from = open(j->vmshm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	int rc;

	if (from < 0)
		return verr_errno(err, "the job's vmshm region %s", j->vmshm);
	if (fstat(from, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(from);
		return verr_set(err, "the job's vmshm region %s: not a regular file", j->vmshm);
	}
	rc = copy_file(from, p->cfd, name, bytes, err);
	close(from);
	return rc < 0 ? -1 : add(p, NULL, name, err);
}

/* Guest 0's host spool (the container driver's): its regular files, so
 * the restored mpirun's open output file is there again.  The guest's
 * user writes this dir, so nothing in it is followed. */
static int save_spool(struct na_job *j, struct part *p, uint64_t *bytes, struct verr *err)
{
	int sfd = open(j->spool, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), dfd = -1, rc = 0;
	DIR *d;

	*bytes = 0;
	if (sfd < 0)
		return verr_errno(err, "guest 0's spool %s", j->spool);
	if ((dfd = na_ckpt_subdir(p->cfd, "spool", true, err)) < 0) {
		close(sfd);
		return -1;
	}
	if (!(d = fdopendir(sfd))) {
		rc = verr_errno(err, "%s", j->spool);
		close(sfd);
		close(dfd);
		return rc;
	}
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		uint64_t n = 0;
		int from;

		if (e->d_name[0] == '.')
			continue;
		from = openat(sfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (from < 0) {
			/* A link or a fifo the user put there is not the job's output. */
			if (errno != ELOOP && errno != ENXIO)
				rc = verr_errno(err, "%s/%s", j->spool, e->d_name);
			continue;
		}
		struct stat st;

		if (fstat(from, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = copy_file(from, dfd, e->d_name, &n, err);
			if (rc < 0)
				verr_wrap(err, "spool");
			else
				rc = add(p, "spool", e->d_name, err);
			*bytes += n;
		}
		close(from);
	}
	closedir(d);
	close(dfd);
	return rc;
}

/* What this node wrote (or an earlier attempt of it left) in cfd. */
static void remove_part(struct na_job *j, int cfd, const char *where)
{
	char name[64];
	struct verr e;

	for (int k = 0; k < j->s.nguests; k++) {
		snprintf(name, sizeof(name), "g%d", j->g[k].index);
		if (na_ckpt_remove(cfd, name, &e) < 0)
			log_warn("%s: %s", where, e.msg);
	}
	snprintf(name, sizeof(name), "vmshm.g%d", j->g[0].index);
	unlinkat(cfd, name, 0);
	na_ckpt_part_name(j->g[0].index, name, sizeof(name));
	unlinkat(cfd, name, 0);
	if (j->g[0].index == 0 && na_ckpt_remove(cfd, "spool", &e) < 0)
		log_warn("%s: %s", where, e.msg);
}

int na_job_ckpt_save(struct na_job *j, const char *dir, const char *name, struct na_ckpt_saved *out,
		     struct verr *err)
{
	struct part p = { .cfd = -1 };
	char where[PATH_MAX], fname[64];
	int root, rc = -1, first;
	uint64_t n;

	memset(out, 0, sizeof(*out));
	if (na_job_ckpt_check(j, err) < 0)
		return -1;
	if (!j->drv->paused)
		return verr_set(err, "the %s driver cannot say whether its guests are paused", j->drv->name);
	for (int k = 0; k < j->s.nguests; k++)
		if (!j->drv->paused(j, k))
			return verr_set(err, "guest g%d is not paused (job_pause comes first)", j->g[k].index);
	first = j->g[0].index;
	snprintf(where, sizeof(where), "%s/%.64s", dir, name);
	if ((root = na_ckpt_root_open(dir, true, err)) < 0)
		return -1;
	p.cfd = na_ckpt_open(root, name, true, err);
	close(root);
	if (p.cfd < 0)
		return verr_wrap(err, "checkpoint folder %s", dir);
	/* A repeated job_checkpoint saves again: the guests are still paused,
	 * so what an earlier attempt left is replaced by the same. */
	remove_part(j, p.cfd, where);
	for (int k = 0; k < j->s.nguests; k++) {
		int gfd;

		snprintf(fname, sizeof(fname), "g%d", j->g[k].index);
		if ((gfd = na_ckpt_subdir(p.cfd, fname, true, err)) < 0) {
			verr_wrap(err, "%s", where);
			goto out;
		}
		rc = j->drv->save(j, k, gfd, err);
		if (rc == 0)
			rc = list_dir(&p, gfd, fname, &out->g[k].bytes, err);
		close(gfd);
		if (rc < 0) {
			verr_wrap(err, "%s/%s", where, fname);
			goto out;
		}
		rc = -1;
		out->g[k].index = j->g[k].index;
		out->bytes += out->g[k].bytes;
		out->nguests++;
	}
	if (j->vmshm[0]) {
		snprintf(fname, sizeof(fname), "vmshm.g%d", first);
		if (save_vmshm(j, &p, fname, &n, err) < 0) {
			verr_wrap(err, "%s", where);
			goto out;
		}
		out->bytes += n;
	}
	if (first == 0 && j->spool_mounted && j->spool[0]) {
		if (save_spool(j, &p, &n, err) < 0) {
			verr_wrap(err, "%s", where);
			goto out;
		}
		out->bytes += n;
	}
	if (na_ckpt_part_seal(p.cfd, first, (const char *const *)p.rel, p.n, err) < 0) {
		verr_wrap(err, "%s", where);
		goto out;
	}
	rc = 0;
out:
	if (rc < 0) {
		remove_part(j, p.cfd, where);
		/* The name's folder goes with the last part in it. */
		root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (root >= 0) {
			unlinkat(root, name, AT_REMOVEDIR);
			close(root);
		}
	}
	for (int i = 0; i < p.n; i++)
		free(p.rel[i]);
	close(p.cfd);
	return rc;
}
