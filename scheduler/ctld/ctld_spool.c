/*
 * Job output on disk: <spool>/<id>.out, one file per job, appended to by
 * job_output and read by `vhpc output`.  The spool is a folder of its own
 * (the cluster file's ctld.spool; by default beside the state folder), so
 * that a filesystem of its own can be mounted there and a full spool never
 * touches the database.
 *
 * A job's output is capped (ctld.output_limit), and the spool keeps some
 * of its filesystem free (ctld_room_spool_keep: more when it shares the
 * database's).  What does not fit is dropped, and the file ends with one
 * line saying where and why ("[vhpc: output cut here: ...]"): the output
 * is "cut".  Nothing a job writes can stop the controller.  The line is the
 * state: a restarted controller reads it back (ctld_spool_scan).
 */
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "ctld.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CUT_MARK "[vhpc: output cut here: "

static void spool_name(int64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%lld.out", (long long)id);
}

/* Output of controllers before the spool had a folder of its own: moved
 * over where it can be renamed (the same filesystem), else left and said. */
static void adopt_old_spool(struct ctld *ctl)
{
	char old[700];
	int fd, moved = 0, left = 0;
	DIR *d;

	snprintf(old, sizeof(old), "%s/spool", ctl->state_dir);
	if (!strcmp(old, ctl->spool_dir) || (fd = open(old, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		long long id;
		char name[64];

		if (sscanf(e->d_name, "%lld.out", &id) != 1 || id <= 0)
			continue;
		spool_name(id, name, sizeof(name));
		if (strcmp(name, e->d_name))
			continue;
		if (renameat(fd, name, ctl->spool_fd, name) == 0)
			moved++;
		else
			left++;
	}
	closedir(d);
	if (moved)
		log_info("moved %d job output file%s from %s to the spool %s", moved, moved == 1 ? "" : "s", old,
			 ctl->spool_dir);
	if (left)
		log_warn("%d job output file%s stay in %s (not movable to %s): `vhpc output` of those jobs finds nothing",
			 left, left == 1 ? "" : "s", old, ctl->spool_dir);
	else
		unlinkat(AT_FDCWD, old, AT_REMOVEDIR);
}

int ctld_spool_open(struct ctld *ctl, struct verr *err)
{
	struct stat st;

	if (mkdir_p(ctl->spool_dir, 0700, err) < 0)
		return -1;
	ctl->spool_fd = open(ctl->spool_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ctl->spool_fd < 0)
		return verr_errno(err, "spool %s", ctl->spool_dir);
	if (fstat(ctl->spool_fd, &st) < 0 || st.st_uid != 0 || fchmod(ctl->spool_fd, 0700) < 0)
		return verr_set(err, "spool %s: not a folder of root's (owner uid %u)", ctl->spool_dir, (unsigned)st.st_uid);
	/* Two controllers appending to one spool would mix their jobs' output. */
	if (flock(ctl->spool_fd, LOCK_EX | LOCK_NB) < 0)
		return verr_set(err, "spool %s is in use by another vhpc-ctld (%s)", ctl->spool_dir,
				errno == EWOULDBLOCK ? "locked" : strerror(errno));
	adopt_old_spool(ctl);
	return 0;
}

dev_t ctld_spool_dev(struct ctld *ctl)
{
	struct stat st;

	return fstat(ctl->spool_fd, &st) == 0 ? st.st_dev : 0;
}

/* Bytes the spool may still take: its filesystem's free space less what
 * it keeps free (0 when it is full, inodes counted too). */
static uint64_t spool_avail(struct ctld *ctl, uint64_t *freeb)
{
	struct statvfs v;
	uint64_t f, keep = ctld_room_spool_keep(ctl);

	if (fstatvfs(ctl->spool_fd, &v) < 0)
		return 0;
	f = (uint64_t)v.f_bavail * v.f_frsize;
	if (freeb)
		*freeb = f;
	if (v.f_files && v.f_favail < 16)
		return 0;
	return f > keep ? f - keep : 0;
}

int ctld_spool_room(struct ctld *ctl, char *why, size_t len)
{
	uint64_t f = 0;
	char a[32], b[32];

	if (spool_avail(ctl, &f) > 0)
		return 0;
	snprintf(why, len, "the output spool %s is full (%s free, %s kept free): new jobs are refused until an "
		 "admin makes room there", ctl->spool_dir, fmt_size(f, a, sizeof(a)),
		 fmt_size(ctld_room_spool_keep(ctl), b, sizeof(b)));
	return -1;
}

void ctld_spool_forget(struct ctld *ctl, int64_t id)
{
	char name[64];

	spool_name(id, name, sizeof(name));
	if (unlinkat(ctl->spool_fd, name, 0) == 0)
		log_warn("job %lld: removed an output file of an earlier database from the spool %s", (long long)id,
			 ctl->spool_dir);
}

/* pwrite of all of buf at off; the bytes written, short on an error. */
static size_t write_at(int fd, const void *buf, size_t len, int64_t off, int *e)
{
	size_t done = 0;

	while (done < len) {
		ssize_t w = pwrite(fd, (const char *)buf + done, len - done, off + (int64_t)done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			*e = w < 0 ? errno : ENOSPC;
			break;
		}
		done += (size_t)w;
	}
	return done;
}

/* The line that ends cut output, after the bytes at [0, size). */
static size_t cut_line(int fd, int64_t size, const char *why, char *buf, size_t len)
{
	char last = '\n';

	if (size > 0 && pread(fd, &last, 1, size - 1) != 1)
		last = '\n';
	return (size_t)snprintf(buf, len, "%s%s%s]\n", last == '\n' ? "" : "\n", CUT_MARK, why);
}

int64_t ctld_spool_append(struct ctld *ctl, int64_t id, int64_t size, const uint8_t *data, size_t len, bool *cut)
{
	uint64_t limit = ctl->cl.ctld_output_limit, avail = spool_avail(ctl, NULL);
	char name[64], why[700], line[800], a[32];
	size_t want = len, done;
	int fd, e = 0;

	*cut = false;
	why[0] = 0;
	if ((uint64_t)size + len > limit) {
		want = (uint64_t)size >= limit ? 0 : (size_t)(limit - (uint64_t)size);
		snprintf(why, sizeof(why), "the job wrote more than its limit of %s (the cluster file's "
			 "ctld.output_limit); the rest was dropped", fmt_size(limit, a, sizeof(a)));
	}
	if (want > avail) {
		want = (size_t)avail;
		snprintf(why, sizeof(why), "the spool's filesystem (%s) is full; the rest of the job's output was dropped",
			 ctl->spool_dir);
	}
	spool_name(id, name, sizeof(name));
	fd = openat(ctl->spool_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_err("job %lld: spool %s/%s: %s; its output is dropped", (long long)id, ctl->spool_dir, name,
			strerror(errno));
		*cut = true;
		return size;
	}
	done = write_at(fd, data, want, size, &e);
	if (e)
		snprintf(why, sizeof(why), "the spool (%s) cannot be written: %s; the rest of the job's output was dropped",
			 ctl->spool_dir, strerror(e));
	if (why[0]) {
		/* Into what the spool keeps free; on a disk full to the last
		 * block the log says it instead. */
		size_t n = cut_line(fd, size + (int64_t)done, why, line, sizeof(line));
		int e2 = 0;

		*cut = true;
		if (write_at(fd, line, n, size + (int64_t)done, &e2) == n)
			done += n;
		else if (ftruncate(fd, size + (int64_t)done) < 0)
			e2 = errno;
		log_warn("job %lld: output cut at %lld bytes: %s%s%s", (long long)id, (long long)(size + (int64_t)done),
			 why, e2 ? "; the line saying so could not be written either: " : "", e2 ? strerror(e2) : "");
	}
	if (done && fdatasync(fd) < 0 && !*cut) {
		/* Not known to be on disk: the node sends it again. */
		log_err("job %lld: spool %s/%s: %s", (long long)id, ctl->spool_dir, name, strerror(errno));
		done = 0;
	}
	close(fd);
	return size + (int64_t)done;
}

void ctld_spool_scan(struct ctld *ctl, int64_t id, int64_t *size, bool *cut)
{
	char name[64], tail[1024];
	struct stat st;
	ssize_t n;
	int fd;

	*size = 0;
	*cut = false;
	spool_name(id, name, sizeof(name));
	fd = openat(ctl->spool_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		off_t from = st.st_size > (off_t)sizeof(tail) - 1 ? st.st_size - ((off_t)sizeof(tail) - 1) : 0;

		*size = st.st_size;
		n = pread(fd, tail, sizeof(tail) - 1, from);
		if (n > 1 && tail[n - 1] == '\n') {
			char *line;

			tail[n - 1] = 0;
			line = strrchr(tail, '\n');
			line = line ? line + 1 : tail;
			*cut = !strncmp(line, CUT_MARK, strlen(CUT_MARK));
		}
	}
	close(fd);
}

ssize_t ctld_spool_read(struct ctld *ctl, int64_t id, void *buf, size_t len, int64_t off)
{
	char name[64];
	ssize_t n;
	int fd;

	spool_name(id, name, sizeof(name));
	fd = openat(ctl->spool_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = pread(fd, buf, len, off);
	close(fd);
	return n < 0 ? 0 : n;
}
