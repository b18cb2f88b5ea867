/*
 * What root opens, creates and reads in the image store and in a node's
 * cache, it reaches through a descriptor of a folder it trusts, with
 * openat2(2) and RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH: no component below
 * that folder, the last one included, may be a symlink, and no path may
 * leave it.  An image's content is a user's (a manifest may put symlinks
 * anywhere under rootfs/, pointing anywhere), and the manifest's checks
 * (manifest.c) keep them out of the names the node uses itself; this is
 * the second wall, so that neither check alone stands between a user and
 * a root write through a symlink.  Files are created with O_EXCL.
 */
#include "lib/err.h"
#include "lib/fdio.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int image_openat(int dirfd, const char *rel, int flags, mode_t mode, struct verr *err)
{
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC),
		.mode = flags & O_CREAT ? mode : 0,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd, e;

	/* EAGAIN: a rename elsewhere in the tree raced the lookup; again. */
	for (int i = 0; i < 8; i++)
		if ((fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how))) >= 0 || errno != EAGAIN)
			break;
	if (fd >= 0 || !err)
		return fd;
	e = errno;
	if (e == ELOOP || e == EXDEV)
		verr_set(err, "%s: a symlink where root keeps image files (or a path leaving them); refused", rel);
	else
		verr_errno(err, "cannot open %s", rel);
	errno = e;
	return -1;
}

/* Read-only, and a fifo or device in a file's place does not block the
 * open (fstat then refuses it). */
static int open_file(int dirfd, const char *rel, struct verr *err)
{
	int fd = image_openat(dirfd, rel, O_RDONLY | O_NONBLOCK, 0, err);

	if (fd >= 0)
		fcntl(fd, F_SETFL, 0);
	return fd;
}

int image_read_at(int dirfd, const char *rel, size_t max, char **buf, size_t *len, struct verr *err)
{
	int fd = open_file(dirfd, rel, err);
	struct stat st;
	char *b;
	int r = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		verr_errno(err, "cannot read %s", rel);
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return !S_ISREG(st.st_mode) ? verr_set(err, "%s is not a regular file; refused", rel)
			: verr_set(err, "%s: %lld bytes, more than the %zu expected", rel, (long long)st.st_size, max);
	}
	if (!(b = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return verr_set(err, "out of memory");
	}
	if (st.st_size)
		r = read_full(fd, b, (size_t)st.st_size);
	close(fd);
	if (r != 0) {
		free(b);
		return r < 0 ? verr_errno(err, "cannot read %s", rel) : verr_set(err, "%s changed while read", rel);
	}
	b[st.st_size] = 0;
	*buf = b;
	if (len)
		*len = (size_t)st.st_size;
	return 0;
}

/* The whole of buf into a new file, on disk before it is closed. */
static int write_new(int dirfd, const char *name, const void *buf, size_t len, mode_t mode, struct verr *err)
{
	int fd = image_openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, mode, err);

	if (fd < 0)
		return -1;
	if (write_full(fd, buf, len) < 0 || fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		verr_errno(err, "cannot write %s", name);
		close(fd);
		unlinkat(dirfd, name, 0);
		return -1;
	}
	if (close(fd) < 0) {
		unlinkat(dirfd, name, 0);
		return verr_errno(err, "cannot write %s", name);
	}
	return 0;
}

int image_write_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode, bool replace,
		   struct verr *err)
{
	char tmp[NAME_MAX + 1];

	if (strchr(name, '/') || strlen(name) > NAME_MAX - 16)
		return verr_set(err, "'%s' is not a plain file name", name);
	if (!replace)
		return write_new(dirfd, name, buf, len, mode, err);
	/* Readers see the old file or the new one whole, after a crash too. */
	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int)getpid());
	unlinkat(dirfd, tmp, 0);
	if (write_new(dirfd, tmp, buf, len, mode, err) < 0)
		return -1;
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		verr_errno(err, "cannot replace %s", name);
		unlinkat(dirfd, tmp, 0);
		return -1;
	}
	if (fsync(dirfd) < 0)
		return verr_errno(err, "cannot sync the folder of %s", name);
	return 0;
}

int image_open_part(const struct image_info *img, const char *path, struct verr *err)
{
	size_t dl = strlen(img->dir);
	const char *slash = strrchr(img->dir, '/');
	char base[sizeof(img->dir)];
	struct stat st;
	int bfd, fd;

	if (!slash || slash == img->dir || strncmp(path, img->dir, dl) || path[dl] != '/')
		return verr_set(err, "image %.12s: %s is not inside its folder %s", img->id, path, img->dir);
	/* From the folder that holds the image's: <id>/kvm/rootfs.ext4, say,
	 * with no symlink in any of its components. */
	snprintf(base, sizeof(base), "%.*s", (int)(slash - img->dir), img->dir);
	if ((bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return verr_errno(err, "cannot open %s", base);
	fd = open_file(bfd, path + (slash + 1 - img->dir), err);
	close(bfd);
	if (fd < 0)
		return verr_wrap(err, "image %.12s", img->id);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return verr_set(err, "image %.12s: %s is not a regular file; refused", img->id, path);
	}
	return fd;
}
