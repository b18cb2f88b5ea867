/*
 * The rootfs of a job's container guests when the job has host paths: the
 * image stays read-only and shared, and a per-job overlay puts the bind
 * mountpoints (/home/alice, /scratch/x, ...) over it, so runc can mount
 * them where the image has no such folder.
 *
 * The overlay has two lower layers and no upper: a small tree the agent
 * makes of only those mountpoints, over the image.  Read-only by
 * construction, nothing a guest writes lands in it, and it is one mount
 * under the job dir that the teardown (and a crash sweep, na_umount_below)
 * removes.  The mountpoints are made here, as root, because inside the
 * guest's user namespace runc could not create them below the image's
 * root-owned folders.
 */
#include "lib/binds.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/job.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Folders the container config mounts a tmpfs on: runc makes mountpoints
 * below them itself. */
static const char *const guest_tmpfs[] = { "/tmp", "/var/tmp", NULL };

/* One folder of the skeleton, with the image's mode and owner where the
 * image has it: the merged folder shows the skeleton's. */
static int skel_dir(const char *skel, const char *image, const char *p, struct verr *err)
{
	char path[PATH_MAX + 300], ip[PATH_MAX + 300];
	struct stat st = { .st_mode = S_IFDIR | 0755 };

	snprintf(path, sizeof(path), "%s%s", skel, p);
	snprintf(ip, sizeof(ip), "%s%s", image, p);
	if (lstat(ip, &st) == 0 && !S_ISDIR(st.st_mode))
		return verr_set(err, "bind destination %s: the image has a %s there, not a folder", p,
				S_ISLNK(st.st_mode) ? "symlink" : "file");
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "mkdir %s", path);
	if (chmod(path, st.st_mode & 07777) < 0 || lchown(path, st.st_uid, st.st_gid) < 0)
		return verr_errno(err, "giving %s the image's mode", path);
	return 0;
}

static int skel_path(const char *skel, const char *image, const struct na_hbind *b, struct verr *err)
{
	char part[BIND_PATH_MAX], path[PATH_MAX + 300], ip[PATH_MAX + 300];
	struct stat st;

	/* Every parent, then the mountpoint itself. */
	for (const char *c = strchr(b->dst + 1, '/'); c; c = strchr(c + 1, '/')) {
		snprintf(part, sizeof(part), "%.*s", (int)(c - b->dst), b->dst);
		if (skel_dir(skel, image, part, err) < 0)
			return -1;
	}
	snprintf(ip, sizeof(ip), "%s%s", image, b->dst);
	if (lstat(ip, &st) == 0) {
		if (S_ISDIR(st.st_mode) != b->dir || S_ISLNK(st.st_mode))
			return verr_set(err, "bind destination %s: the image has a %s there, and %s is a %s", b->dst,
					S_ISLNK(st.st_mode) ? "symlink" : S_ISDIR(st.st_mode) ? "folder" : "file",
					b->src, b->dir ? "folder" : "file");
	}
	if (b->dir)
		return skel_dir(skel, image, b->dst, err);
	snprintf(path, sizeof(path), "%s%s", skel, b->dst);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return verr_errno(err, "creating %s", path);
	close(fd);
	return 0;
}

/* overlayfs splits its options at ',' and its layers at ':'. */
static bool overlay_safe(const char *p)
{
	return !strpbrk(p, ",:\\");
}

int na_ctr_rootfs_make(const char *jobdir, const char *image, const struct na_hbind *hb, int n,
		       char *out, size_t len, struct verr *err)
{
	char skel[PATH_MAX], opts[3 * PATH_MAX];
	bool any = false;

	snprintf(out, len, "%s", image);
	for (int i = 0; i < n && !any; i++) {
		bool in_tmpfs = false;

		for (int k = 0; guest_tmpfs[k]; k++)
			in_tmpfs |= bind_path_under(hb[i].dst, guest_tmpfs[k]);
		any = !in_tmpfs;
	}
	if (!any)
		return 0;
	if (!overlay_safe(jobdir) || !overlay_safe(image))
		return verr_set(err, "cannot layer mountpoints over %s from %s: the paths hold ',' ':' or '\\'",
				image, jobdir);
	snprintf(skel, sizeof(skel), "%s/skel", jobdir);
	if (mkdir(skel, 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "mkdir %s", skel);
	for (int i = 0; i < n; i++) {
		bool skip = false;

		for (int k = 0; guest_tmpfs[k]; k++)
			skip |= bind_path_under(hb[i].dst, guest_tmpfs[k]);
		/* Inside another bind, the mountpoint is that bind's to have
		 * (oci.c checks it). */
		for (int k = 0; k < i; k++)
			skip |= bind_path_under(hb[i].dst, hb[k].dst);
		if (!skip && skel_path(skel, image, &hb[i], err) < 0)
			return -1;
	}
	snprintf(out, len, "%s/rootfs", jobdir);
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "mkdir %s", out);
	snprintf(opts, sizeof(opts), "lowerdir=%s:%s", skel, image);
	if (mount("vhpc-rootfs", out, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0)
		return verr_errno(err, "mounting the job's rootfs (overlay of %s and %s) on %s", skel, image, out);
	return 1;
}

void na_ctr_rootfs_remove(const char *jobdir)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/rootfs", jobdir);
	if (umount2(p, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("cannot unmount %s: %s", p, strerror(errno));
}
