/*
 * Compact images: the rootfs as one read-only file system in one file,
 * squashfs (mksquashfs, zstd) or erofs (mkfs.erofs, lz4hc), made by
 * Debian's squashfs-tools and erofs-utils rather than by hand.  A node
 * mounts it once (a loop device over the file it opened, loop.c) and every
 * guest of every job shares that mount; a kvm guest gets the same file as
 * its root disk.
 * Both are made reproducible (fixed times, root owners, no xattrs, a uuid
 * from the content), so the same tree gives the same bytes and id.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/proc.h"
#include "image_int.h"
#include "images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

unsigned image_format_flag(const char *name)
{
	if (!strcmp(name, "squashfs"))
		return IMAGE_SQUASHFS;
	if (!strcmp(name, "erofs"))
		return IMAGE_EROFS;
	return 0;
}

const char *image_format_name(unsigned flags)
{
	return flags & IMAGE_SQUASHFS ? "squashfs" : flags & IMAGE_EROFS ? "erofs" : "tree";
}

int image_compact_make(unsigned flags, const char *rootfs, const char *out, const char *rootfs_id,
		       struct verr *err)
{
	char uuid[40], uopt[48];
	const char *sq[] = {
		"mksquashfs", rootfs, out, "-noappend", "-quiet", "-no-progress", "-comp", "zstd",
		"-all-root", "-no-xattrs", "-mkfs-time", "0", "-all-time", "0", "-reproducible", NULL
	};
	const char *ero[] = {
		"mkfs.erofs", "--quiet", "-zlz4hc", "-T0", "--all-root", "-x-1", uopt, out, rootfs, NULL
	};
	const char *const *argv = flags & IMAGE_SQUASHFS ? sq : ero;
	const char *tool = argv[0];

	snprintf(uuid, sizeof(uuid), "%.8s-%.4s-%.4s-%.4s-%.12s", rootfs_id, rootfs_id + 8, rootfs_id + 12,
		 rootfs_id + 16, rootfs_id + 20);
	snprintf(uopt, sizeof(uopt), "-U%s", uuid);
	if (run_capture(argv, NULL, NULL, 1 << 20, 1800000, err) != 0)
		return verr_wrap(err, "%s (Debian's %s)", tool,
				 flags & IMAGE_SQUASHFS ? "squashfs-tools" : "erofs-utils");
	return 0;
}

/* Mounted already: the mount point is on another device than its folder. */
static bool mounted(int dfd)
{
	struct stat a, b;

	return fstatat(dfd, ".mnt", &a, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(a.st_mode) && fstat(dfd, &b) == 0 &&
	       a.st_dev != b.st_dev;
}

/* The image's folder, and its own lock (a .lock file in it): jobs starting
 * at once, in one process or several, mount it once. */
static int lock_image(const struct image_info *img, int *dfd, struct verr *err)
{
	int lock;

	if ((*dfd = open(img->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return verr_errno(err, "cannot open %s", img->dir);
	if ((lock = image_openat(*dfd, ".lock", O_RDWR | O_CREAT, 0644, err)) < 0 || image_lock_fd(lock, err) < 0) {
		close(*dfd);
		return verr_wrap(err, "image %.12s", img->id);
	}
	return lock;
}

/* The file system on .mnt, both reached through descriptors: the blob must
 * be the image's regular file, and .mnt its own folder, not what a link in
 * their place would point at. */
static int mount_at(const struct image_info *img, int dfd, struct verr *err)
{
	char blob[32], dev[32], target[32];
	int bfd, mfd = -1, lfd = -1, rc = -1;
	struct stat st;

	snprintf(blob, sizeof(blob), "rootfs.%s", img->format);
	if ((bfd = image_openat(dfd, blob, O_RDONLY, 0, err)) < 0)
		goto out;
	if (fstat(bfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		verr_set(err, "%s is not a regular file; refused", blob);
		goto out;
	}
	if (mkdirat(dfd, ".mnt", 0755) < 0 && errno != EEXIST) {
		verr_errno(err, "cannot create %s", img->rootfs);
		goto out;
	}
	if ((mfd = image_openat(dfd, ".mnt", O_RDONLY | O_DIRECTORY, 0, err)) < 0 ||
	    (lfd = image_loop_attach(bfd, img->blob, dev, sizeof(dev), err)) < 0)
		goto out;
	snprintf(target, sizeof(target), "/proc/self/fd/%d", mfd);
	if (mount(dev, target, img->format, MS_RDONLY | MS_NODEV | MS_NOSUID, NULL) < 0) {
		verr_errno(err, "mounting %s (%s) on %s", img->blob, dev, img->rootfs);
		goto out;
	}
	rc = 0;
out:
	/* The mount holds the loop device now; closing ours leaves it. */
	if (lfd >= 0)
		close(lfd);
	if (mfd >= 0)
		close(mfd);
	if (bfd >= 0)
		close(bfd);
	return rc;
}

int image_mount(const struct image_info *img, struct verr *err)
{
	int lock, dfd, rc = 0;

	if (!img->blob[0])
		return 0;
	if ((lock = lock_image(img, &dfd, err)) < 0)
		return -1;
	if (!mounted(dfd) && mount_at(img, dfd, err) < 0)
		rc = verr_wrap(err, "image %.12s: mounting its %s file system", img->id, img->format);
	close(lock);
	close(dfd);
	return rc;
}

int image_unmount(const struct image_info *img, struct verr *err)
{
	int lock, dfd, rc = 0;

	if (!img->blob[0])
		return 0;
	if ((lock = lock_image(img, &dfd, err)) < 0)
		return -1;
	if (mounted(dfd) && umount2(img->rootfs, UMOUNT_NOFOLLOW) < 0)
		rc = verr_errno(err, "cannot unmount image %.12s at %s", img->id, img->rootfs);
	close(lock);
	close(dfd);
	return rc;
}
