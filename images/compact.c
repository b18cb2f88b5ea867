/*
 * Compact images: the rootfs as one read-only file system in one file,
 * squashfs (mksquashfs, zstd) or erofs (mkfs.erofs, lz4hc), made by
 * Debian's squashfs-tools and erofs-utils rather than by hand.  A node
 * mounts it once (a loop device, by mount(8)) and every guest of every
 * job shares that mount; a kvm guest gets the same file as its root disk.
 * Both are made reproducible (fixed times, root owners, no xattrs, a uuid
 * from the content), so the same tree gives the same bytes and id.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/proc.h"
#include "image_int.h"
#include "images/images.h"

#include <errno.h>
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
static bool mounted(const char *mnt, const char *dir)
{
	struct stat a, b;

	return stat(mnt, &a) == 0 && stat(dir, &b) == 0 && a.st_dev != b.st_dev;
}

/* The image's own lock (a .lock file in its folder): jobs starting at once,
 * in one process or several, mount it once. */
static int lock_image(const struct image_info *img, struct verr *err)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/.lock", img->dir);
	return image_lock_file(path, err);
}

int image_mount(const struct image_info *img, struct verr *err)
{
	char opts[64];
	const char *argv[] = { "mount", "-t", img->format, "-o", opts, img->blob, img->rootfs, NULL };
	int lock, rc = 0;

	if (!img->blob[0])
		return 0;
	if ((lock = lock_image(img, err)) < 0)
		return -1;
	if (mounted(img->rootfs, img->dir))
		goto out;
	if (mkdir(img->rootfs, 0755) < 0 && errno != EEXIST) {
		rc = verr_errno(err, "cannot create %s", img->rootfs);
		goto out;
	}
	/* mount(8) sets the loop device up and frees it at unmount. */
	snprintf(opts, sizeof(opts), "ro,nodev,nosuid,loop");
	if (run_capture(argv, NULL, NULL, 1 << 16, 60000, err) != 0)
		rc = verr_wrap(err, "image %.12s: mounting its %s file system", img->id, img->format);
out:
	close(lock);
	return rc;
}

int image_unmount(const struct image_info *img, struct verr *err)
{
	int lock, rc = 0;

	if (!img->blob[0])
		return 0;
	if ((lock = lock_image(img, err)) < 0)
		return -1;
	if (mounted(img->rootfs, img->dir) && umount2(img->rootfs, 0) < 0)
		rc = verr_errno(err, "cannot unmount image %.12s at %s", img->id, img->rootfs);
	close(lock);
	return rc;
}
