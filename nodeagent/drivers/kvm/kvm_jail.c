/*
 * The confinement of vhpc-hv, set up in the forked child just before it
 * execs (the jailer of Firecracker is the model):
 *   - a mount namespace whose root is an empty read-only tmpfs holding only
 *     what vhpc-hv reads once it runs: /usr (its libraries, read-only),
 *     the merged-/usr links, ld.so.cache, the vhpc-hv binary, a private
 *     /dev with kvm and null, a /proc that shows no other user's processes,
 *     the NUMA and hugepage facts of /sys (read-only), and its own guest
 *     folder, the one writable place;
 *   - no supplementary groups, the job's uid and gid (a root job's guests
 *     run as nobody), no capabilities, no_new_privs.
 * Everything privileged (the tap, cgroups, the files, the guest folder) was
 * done by the agent, and the files arrive as open descriptors, so nothing
 * of the host's file tree but the above is reachable, even by a guest that
 * takes over vhpc-hv.  The system-call allowlist is vhpc-hv's own
 * (--seccomp), loaded once it has set the guest up.
 */
#include "kvm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

struct jail_ctx {
	const char *root;
	char *why;
	size_t len;
};

static int fail(struct jail_ctx *c, const char *what, const char *path)
{
	snprintf(c->why, c->len, "%s %s: %s", what, path, strerror(errno));
	return -1;
}

/* mkdir -p of root+path (path absolute); the last component as a
 * directory, or as an empty file when file is set (a bind target). */
static int make_at(struct jail_ctx *c, const char *path, bool file)
{
	char p[PATH_MAX];
	size_t rl = strlen(c->root);

	if (snprintf(p, sizeof(p), "%s%s", c->root, path) >= (int)sizeof(p)) {
		errno = ENAMETOOLONG;
		return fail(c, "jail path", path);
	}
	for (char *s = p + rl + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return fail(c, "jail mkdir", p);
		*s = '/';
	}
	if (file) {
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);

		if (fd < 0)
			return fail(c, "jail file", p);
		close(fd);
	} else if (mkdir(p, 0755) < 0 && errno != EEXIST) {
		return fail(c, "jail mkdir", p);
	}
	return 0;
}

/* Binds host path src at the same path in the jail; read-only unless rw.
 * A source that is not there (no hugepages on this kernel) is skipped
 * when optional. */
static int bind_in(struct jail_ctx *c, const char *src, bool rw, bool optional)
{
	char dst[PATH_MAX];
	struct stat st;
	unsigned long ro = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY);

	if (stat(src, &st) < 0) {
		if (optional && errno == ENOENT)
			return 0;
		return fail(c, "jail source", src);
	}
	if (make_at(c, src, !S_ISDIR(st.st_mode)) < 0)
		return -1;
	snprintf(dst, sizeof(dst), "%s%s", c->root, src);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(c, "jail bind", src);
	/* The flags of a bind are its own only after a remount. */
	if (mount(NULL, dst, NULL, ro, NULL) < 0)
		return fail(c, "jail remount", src);
	return 0;
}

/* /lib -> usr/lib and the like, as on the host (Debian's merged /usr); a
 * real directory there is bound read-only instead. */
static int top_link(struct jail_ctx *c, const char *name)
{
	char target[PATH_MAX], dst[PATH_MAX];
	ssize_t n = readlink(name, target, sizeof(target) - 1);

	if (n < 0)
		return errno == ENOENT ? 0 : errno == EINVAL ? bind_in(c, name, false, false) : fail(c, "jail", name);
	target[n] = 0;
	snprintf(dst, sizeof(dst), "%s%s", c->root, name);
	if (symlink(target, dst) < 0)
		return fail(c, "jail symlink", dst);
	return 0;
}

static int dev_node(struct jail_ctx *c, const char *name, unsigned maj, unsigned min, mode_t mode, uid_t uid,
		    gid_t gid)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/dev/%s", c->root, name);
	if (mknod(p, S_IFCHR | mode, makedev(maj, min)) < 0 || chown(p, uid, gid) < 0 || chmod(p, mode) < 0)
		return fail(c, "jail device", p);
	return 0;
}

static int pivot(struct jail_ctx *c)
{
	/* pivot_root(".", "."): the old root lands under the new one and is
	 * detached at once; no directory for it is needed. */
	if (chdir(c->root) < 0)
		return fail(c, "jail chdir", c->root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail(c, "jail pivot_root", c->root);
	if (umount2(".", MNT_DETACH) < 0)
		return fail(c, "jail", "detaching the host's root");
	if (chdir("/") < 0)
		return fail(c, "jail chdir", "/");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
		return fail(c, "jail", "making / read-only");
	return 0;
}

int kvm_jail_enter(const struct kvm_jail *j, char *why, size_t len)
{
	static const char *const sys_ro[] = {
		"/sys/devices/system/node",     /* NUMA nodes, their distances and hugepages */
		"/sys/kernel/mm/hugepages",     /* the global pool */
		"/sys/module",                  /* which KVM module: hardware or not */
	};
	struct jail_ctx c = { .root = j->root, .why = why, .len = len };
	char opts[64];

	if (unshare(CLONE_NEWNS) < 0)
		return fail(&c, "jail", "unshare(CLONE_NEWNS)");
	/* Nothing mounted here reaches the host, nor the host's later mounts us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(&c, "jail", "making mounts private");
	if (mount("vhpc-hv", j->root, "tmpfs", MS_NOSUID, "size=64k,mode=0755") < 0)
		return fail(&c, "jail tmpfs", j->root);
	if (bind_in(&c, "/usr", false, false) < 0 || top_link(&c, "/lib") < 0 || top_link(&c, "/lib64") < 0 ||
	    bind_in(&c, "/etc/ld.so.cache", false, true) < 0 ||
	    bind_in(&c, j->hv, false, false) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(sys_ro) / sizeof(sys_ro[0]); i++)
		if (bind_in(&c, sys_ro[i], false, true) < 0)
			return -1;
	if (bind_in(&c, j->rw_dir, true, false) < 0)
		return -1;
	if (make_at(&c, "/dev", false) < 0 || dev_node(&c, "kvm", 10, 232, 0600, j->uid, j->gid) < 0 ||
	    dev_node(&c, "null", 1, 3, 0666, 0, 0) < 0 || make_at(&c, "/proc", false) < 0)
		return -1;
	{
		char proc[PATH_MAX];

		/* A proc of its own: hidepid=invisible shows vhpc-hv its own
		 * processes only (the control socket reads its threads' stat). */
		snprintf(proc, sizeof(proc), "%s/proc", j->root);
		snprintf(opts, sizeof(opts), "hidepid=invisible");
		if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
			return fail(&c, "jail mount", proc);
	}
	if (pivot(&c) < 0)
		return -1;
	if (j->memlock) {
		struct rlimit rl = { .rlim_cur = j->memlock, .rlim_max = j->memlock };

		/* Raising it needs root: before the ids drop. */
		if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
			return fail(&c, "jail", "RLIMIT_MEMLOCK for VFIO");
	}
	if (setgroups(0, NULL) < 0 || setresgid(j->gid, j->gid, j->gid) < 0 || setresuid(j->uid, j->uid, j->uid) < 0)
		return fail(&c, "jail", "dropping to the guest's uid");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(&c, "jail", "no_new_privs");
	return 0;
}
