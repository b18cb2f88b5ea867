/* What the drivers share of a job's files: paths under its dir, a small
 * tmpfs, ownership by the job's user, the tail of a failed guest's log.
 * Below the lifecycle (job.c), which calls some of them too. */
#include "lib/err.h"
#include "lib/log.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* What of a log goes into the node's: a line of lib/log.c holds 2 KiB. */
#define TAIL_MAX 1900

/* The file may be the guest's to write (a kvm guest's console is vhpc-hv's,
 * which runs as the job's user): a link planted there is not followed, a
 * FIFO does not hold the agent, and what the guest wrote cannot put
 * terminal escapes into the node's log. */
void na_log_tail(const char *path, const char *what)
{
	char buf[TAIL_MAX + 1];
	struct stat st;
	ssize_t n;
	int fd;

	if (!path || !*path)
		return;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			log_warn("%s (%s) is a symbolic link: not followed", what, path);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_warn("%s (%s) is not a regular file: not read", what, path);
		close(fd);
		return;
	}
	n = pread(fd, buf, TAIL_MAX, st.st_size > TAIL_MAX ? st.st_size - TAIL_MAX : 0);
	close(fd);
	if (n <= 0)
		return;
	for (ssize_t i = 0; i < n; i++)
		if (((unsigned char)buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t') || buf[i] == 0x7f)
			buf[i] = '?';
	buf[n] = 0;
	log_err("last lines of %s:\n%s", what, buf);
}

void na_job_guest_path(const struct na_job *j, const char *name, int index, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s%d", j->jd.path, name, index);
}

int na_mount_small_tmpfs(const char *job, const char *dir, uint64_t size, struct verr *err)
{
	char src[64], opts[64];

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "cannot create %s", dir);
	snprintf(src, sizeof(src), "vhpc-%s", job);
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)size);
	if (mount(src, dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return verr_errno(err, "cannot mount a tmpfs on %s", dir);
	return 0;
}

int na_job_give_user(const struct na_job *j, const char *path, struct verr *err)
{
	if (lchown(path, j->s.uid, j->s.gid) < 0)
		return verr_errno(err, "giving %s to the job's user (uid %u, gid %u)", path,
				  (unsigned)j->s.uid, (unsigned)j->s.gid);
	return 0;
}

#define COPY_BUF (1u << 20)

int na_copy_sparse(int in, int out, uint64_t *bytes, struct verr *err)
{
	struct stat st;
	char *buf;
	off_t pos = 0;

	*bytes = 0;
	if (fstat(in, &st) < 0)
		return verr_errno(err, "fstat");
	buf = malloc(COPY_BUF);
	if (!buf)
		return verr_set(err, "out of memory");
	while (pos < st.st_size) {
		off_t data = lseek(in, pos, SEEK_DATA), end;

		if (data < 0 && errno == ENXIO)
			break;                  /* a hole to the end */
		if (data < 0)
			goto io;
		end = lseek(in, data, SEEK_HOLE);
		if (end < 0)
			goto io;
		for (pos = data; pos < end;) {
			size_t want = (size_t)(end - pos) < COPY_BUF ? (size_t)(end - pos) : COPY_BUF;
			ssize_t n = pread(in, buf, want, pos);

			if (n <= 0) {
				if (n == 0)
					errno = EIO;    /* shrank under us */
				goto io;
			}
			if (pwrite(out, buf, (size_t)n, pos) != n) {
				if (errno == 0)
					errno = ENOSPC;
				free(buf);
				return verr_errno(err, "writing at %lld", (long long)pos);
			}
			pos += n;
			*bytes += (uint64_t)n;
		}
	}
	free(buf);
	if (ftruncate(out, st.st_size) < 0)
		return verr_errno(err, "setting its size");
	return 0;
io:
	free(buf);
	return verr_errno(err, "reading at %lld", (long long)pos);
}
