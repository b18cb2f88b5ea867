/*
 * A container guest's output (guestd's stdout and stderr), in a folder
 * of its own bound into the guest and opened there by guestd (--stdio):
 * so the open file is on one of the guest's mounts, which CRIU needs to
 * save it (nodeagent/README.md, "the guest's stdout").
 *
 * The folder is the job user's, and so is everything in it: the guest can
 * put a symbolic link, a FIFO, a device node or a second name of another
 * file where the output was.  The agent reads it only through the
 * folder's descriptor, never following a link, never blocking on open,
 * and only a regular file the job's user owns with no other name: a
 * link to a root-only file must not leak its content into a log, and a
 * FIFO must not hold the agent.  The folder is a tmpfs of its own, so no
 * name in it can be a hard link to a file anywhere else.
 */
#include "lib/err.h"
#include "lib/log.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/drivers/container/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int na_ctr_out_open(const char *dir, const char *name, uid_t uid, struct verr *err)
{
	int dfd, fd;
	struct stat st;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return verr_errno(err, "the guest's output folder %s", dir);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	close(dfd);
	if (fd < 0 && errno == ELOOP)
		return verr_set(err, "%s/%s is a symbolic link, put there in the guest; not followed", dir, name);
	if (fd < 0)
		return verr_errno(err, "%s/%s", dir, name);
	if (fstat(fd, &st) < 0) {
		verr_errno(err, "%s/%s", dir, name);
		goto bad;
	}
	if (!S_ISREG(st.st_mode)) {
		verr_set(err, "%s/%s is not a regular file (mode %o), put there in the guest; not read", dir, name,
			 (unsigned)st.st_mode);
		goto bad;
	}
	if (st.st_uid != uid || st.st_nlink != 1) {
		verr_set(err, "%s/%s is owned by uid %u with %lu names, not the job's user's (uid %u) own file, "
			 "put there in the guest; not read", dir, name, (unsigned)st.st_uid,
			 (unsigned long)st.st_nlink, (unsigned)uid);
		goto bad;
	}
	return fd;
bad:
	close(fd);
	return -1;
}

int na_ctr_out_tail(const char *dir, const char *name, uid_t uid, size_t max, char **out, size_t *len,
		    struct verr *err)
{
	int fd = na_ctr_out_open(dir, name, uid, err);
	struct stat st;
	off_t from;
	size_t n = 0;
	char *buf;

	*out = NULL;
	*len = 0;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		verr_errno(err, "%s/%s", dir, name);
		close(fd);
		return -1;
	}
	from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return verr_set(err, "out of memory");
	}
	/* The guest may truncate or extend it meanwhile: what pread returns
	 * is what there is, never more than max. */
	while (n < max) {
		ssize_t r = pread(fd, buf + n, max - n, from + (off_t)n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			verr_errno(err, "%s/%s", dir, name);
			free(buf);
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

#define OUT_PREFIX "vhpc-out."
/* What a guest may leave in its 16 MiB folder and have saved. */
#define OUT_FILES_MAX 256

/* Every name in dir, by its descriptor; fn(dfd, name) for each. */
static int each_name(int dfd, const char *what, int (*fn)(int dfd, const char *name, void *arg), void *arg,
		     struct verr *err)
{
	int fd = dup(dfd), rc = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return verr_errno(err, "%s", what);
	}
	/* The copy shares dfd's offset, which an earlier reading moved. */
	rewinddir(d);
	for (struct dirent *e; rc == 0 && (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = fn(dfd, e->d_name, arg);
	closedir(d);
	return rc;
}

struct out_copy {
	const char *dir;
	uid_t uid;
	gid_t gid;
	int to;
	int n;
	struct verr *err;
};

static int save_one(int dfd, const char *name, void *arg)
{
	struct out_copy *c = arg;
	char to[NAME_MAX + 1];
	struct verr e;
	uint64_t bytes;
	int from, fd, rc;

	(void)dfd;
	if (strlen(OUT_PREFIX) + strlen(name) > NAME_MAX)
		return verr_set(c->err, "%s/%s: its name is too long to be saved", c->dir, name);
	if (++c->n > OUT_FILES_MAX)
		return verr_set(c->err, "the guest's output folder %s holds more than %d files", c->dir, OUT_FILES_MAX);
	/* The same rules as for reading it into a log (na_ctr_out_open). */
	if ((from = na_ctr_out_open(c->dir, name, c->uid, &e)) < 0) {
		log_warn("checkpoint: not saved: %s", e.msg);
		return 0;
	}
	snprintf(to, sizeof(to), OUT_PREFIX "%s", name);
	fd = openat(c->to, to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		close(from);
		return verr_errno(c->err, "%s", to);
	}
	rc = na_copy_sparse(from, fd, &bytes, c->err);
	if (rc == 0 && fsync(fd) < 0)
		rc = verr_errno(c->err, "%s", to);
	close(fd);
	close(from);
	return rc < 0 ? verr_wrap(c->err, "saving %s/%s", c->dir, name) : 0;
}

int na_ctr_out_save(const char *dir, uid_t uid, int dirfd, struct verr *err)
{
	struct out_copy c = { .dir = dir, .uid = uid, .to = dirfd, .err = err };
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;

	if (dfd < 0)
		return verr_errno(err, "the guest's output folder %s", dir);
	rc = each_name(dfd, dir, save_one, &c, err);
	close(dfd);
	return rc;
}

static int restore_one(int dfd, const char *name, void *arg)
{
	struct out_copy *c = arg;
	uint64_t bytes;
	int from, fd, rc;

	if (strncmp(name, OUT_PREFIX, strlen(OUT_PREFIX)) || !name[strlen(OUT_PREFIX)])
		return 0;
	from = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (from < 0)
		return verr_errno(c->err, "%s", name);
	/* The folder is new and empty, and no guest runs yet. */
	fd = openat(c->to, name + strlen(OUT_PREFIX), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		close(from);
		return verr_errno(c->err, "%s/%s", c->dir, name + strlen(OUT_PREFIX));
	}
	rc = na_copy_sparse(from, fd, &bytes, c->err);
	if (rc == 0 && fchown(fd, c->uid, c->gid) < 0)
		rc = verr_errno(c->err, "%s/%s", c->dir, name + strlen(OUT_PREFIX));
	close(fd);
	close(from);
	return rc;
}

int na_ctr_out_restore(int dirfd, const char *dir, uid_t uid, gid_t gid, struct verr *err)
{
	struct out_copy c = { .dir = dir, .uid = uid, .gid = gid, .err = err };
	int rc;

	c.to = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.to < 0)
		return verr_errno(err, "the guest's output folder %s", dir);
	rc = each_name(dirfd, "the checkpoint", restore_one, &c, err);
	close(c.to);
	return rc < 0 ? verr_wrap(err, "putting back the guest's output") : 0;
}
