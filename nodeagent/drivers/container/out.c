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
#include "nodeagent/drivers/container/container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
