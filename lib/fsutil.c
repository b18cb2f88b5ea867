/*
 * Whole-file and directory helpers.
 */
#include "lib/fsutil.h"
#include "lib/err.h"
#include "lib/fdio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int read_file(const char *path, char **buf, size_t *len, size_t max,
	      struct verr *err)
{
	size_t cap = max < 4096 ? max : 4096, n = 0;
	char *b;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "cannot open %s", path);
	b = malloc(cap + 1);
	if (!b) {
		close(fd);
		return verr_set(err, "out of memory reading %s", path);
	}
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap >= max) {
				char extra;
				ssize_t x;

				while ((x = read(fd, &extra, 1)) < 0 && errno == EINTR)
					;
				if (x == 0)
					break;
				free(b);
				close(fd);
				return verr_set(err, "%s is larger than %zu bytes", path, max);
			}
			cap = cap * 2 > max ? max : cap * 2;
			nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				close(fd);
				return verr_set(err, "out of memory reading %s", path);
			}
			b = nb;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			verr_errno(err, "cannot read %s", path);
			free(b);
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += r;
	}
	close(fd);
	b[n] = 0;
	*buf = b;
	if (len)
		*len = n;
	return 0;
}

int write_file(const char *path, const void *buf, size_t len, mode_t mode,
	       struct verr *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0)
		return verr_errno(err, "cannot create %s", path);
	if (write_full(fd, buf, len) < 0) {
		verr_errno(err, "cannot write %s", path);
		close(fd);
		return -1;
	}
	if (close(fd) < 0)
		return verr_errno(err, "cannot write %s", path);
	return 0;
}

/* fsync of the folder holding path: its entries (a rename) are on disk. */
static int sync_parent(const char *path, struct verr *err)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, rc;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "cannot open %s", dir);
	rc = fsync(fd);
	close(fd);
	return rc < 0 ? verr_errno(err, "cannot sync %s", dir) : 0;
}

int write_file_atomic(const char *path, const void *buf, size_t len,
		      mode_t mode, struct verr *err)
{
	char tmp[PATH_MAX];
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return verr_set(err, "path too long: %s", path);
	/* A file left by a killed writer of our pid (or a planted link) goes:
	 * the new one is ours, made here. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return verr_errno(err, "cannot create %s", tmp);
	/* The data is on disk before the name points at it, and the name
	 * before we return: a crash leaves the old file or the new one, whole. */
	if (write_full(fd, buf, len) < 0 || fsync(fd) < 0) {
		verr_errno(err, "cannot write %s", tmp);
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0) {
		verr_errno(err, "cannot write %s", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		verr_errno(err, "cannot rename %s to %s", tmp, path);
		unlink(tmp);
		return -1;
	}
	return sync_parent(path, err);
}

int mkdir_p(const char *path, mode_t mode, struct verr *err)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return verr_set(err, "bad directory path '%s'", path);
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p == '/' || *p == 0) {
			char c = *p;

			*p = 0;
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return verr_errno(err, "cannot create directory %s", buf);
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

static int rm_rf_at(int dirfd, const char *name, dev_t dev, int depth,
		    struct verr *err)
{
	struct stat st;
	DIR *d;
	int fd;

	if (depth > 64)
		return verr_set(err, "directory tree too deep at %s", name);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : verr_errno(err, "cannot stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return verr_errno(err, "cannot remove %s", name);
		return 0;
	}
	if (st.st_dev != dev)
		return verr_set(err, "%s is a mount point; not removing across it", name);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "cannot open %s", name);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return verr_errno(err, "cannot read %s", name);
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (rm_rf_at(fd, e->d_name, dev, depth + 1, err) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return verr_errno(err, "cannot remove directory %s", name);
	return 0;
}

int rm_rf(const char *path, struct verr *err)
{
	struct stat st;

	if (!path || !*path || !strcmp(path, "/"))
		return verr_set(err, "refusing to remove '%s'", path ? path : "");
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : verr_errno(err, "cannot stat %s", path);
	if (rm_rf_at(AT_FDCWD, path, st.st_dev, 0, err) < 0)
		return verr_wrap(err, "removing %s", path);
	return 0;
}

int rm_rf_at_fd(int dirfd, const char *name, struct verr *err)
{
	struct stat st;

	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return verr_set(err, "refusing to remove '%s': not a name in its folder", name ? name : "");
	if (fstat(dirfd, &st) < 0)
		return verr_errno(err, "cannot stat the folder of %s", name);
	if (rm_rf_at(dirfd, name, st.st_dev, 0, err) < 0)
		return verr_wrap(err, "removing %s", name);
	return 0;
}

int write_str(const char *path, const char *s, struct verr *err)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(s);
	ssize_t r;

	if (fd < 0)
		return verr_errno(err, "cannot open %s", path);
	r = write(fd, s, len);
	if (r < 0 || (size_t)r != len) {
		verr_errno(err, "cannot write '%s' to %s", s, path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

bool fs_entry_exists(const char *dir, const char *name)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool ok;

	if (dfd < 0)
		return false;
	ok = faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	close(dfd);
	return ok;
}
