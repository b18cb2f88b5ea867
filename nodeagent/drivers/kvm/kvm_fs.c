/*
 * A kvm guest's shared folders: one virtiofsd (QEMU's, Debian's
 * qemu-system-common) per folder, as the job's user.
 *
 * virtiofsd does what the guest asks with the credentials the guest's
 * requests carry, and inside the VM the job runs as root.  So each daemon
 * runs in a user namespace of its own whose root is the job's uid and gid
 * on the host and nothing else is mapped: what the guest writes belongs to
 * the user, a request as any other guest uid fails, and the daemon holds
 * no capability on the host (it cannot mknod, nor reach a file the user
 * could not).  The folder is the one the agent's check opened as the user
 * (nodeagent/binds.c), not its path looked up again: the daemon starts in
 * it (fchdir) and binds it from there to /run/vhpc-share in its own mount
 * namespace, read-only when the bind is, so a guest's root cannot remount
 * its way to writing.
 *
 * The agent makes the listening socket and connects to it before the
 * daemon exists; vhpc-hv gets the connected end as /dev/fd/N, and no
 * socket is left in a path either confined process could reach.  The
 * daemon joins the guest's cgroups, so it is pinned with the guest and
 * killed with it (na_kvm_stop_all, the crash sweep).
 */
#include "lib/err.h"
#include "lib/log.h"
#include "kvm_int.h"
#include "nodeagent/job.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

const char *kvm_virtiofsd_path(void)
{
	const char *p = getenv("VHPC_VIRTIOFSD");

	return p && *p ? p : "/usr/lib/qemu/virtiofsd";
}

/* Where the daemon sees the folder, in its own mount namespace. */
#define FS_SHARE "/run/vhpc-share"

static int write_at(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* The flags a bind of src in a user namespace must keep (they are locked). */
static unsigned long locked_flags(unsigned long st)
{
	unsigned long f = 0;

	if (st & ST_NOSUID)
		f |= MS_NOSUID;
	if (st & ST_NODEV)
		f |= MS_NODEV;
	if (st & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (st & ST_NOATIME)
		f |= MS_NOATIME;
	if (st & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (st & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

struct fs_child {
	const struct na_hbind *b;
	uid_t uid;
	gid_t gid;
	char uid_map[64], gid_map[64];
	int listen_fd, logfd;
	const int *cg;
	int ncg;
	char *const *argv;
};

/* In the forked child: only system calls from here on (the agent may have
 * threads).  Failures are written to the daemon's log. */
static void child(const struct fs_child *c)
{
	const char *step = "setsid";
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigset_t none;

	setsid();
	/* First: the descriptor may be one of those the dup2s below reuse. */
	step = "entering the checked folder";
	if (fchdir(c->b->fd) < 0)
		goto fail;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(c->logfd, 1) < 0 || dup2(c->logfd, 2) < 0 || dup2(c->listen_fd, 3) < 0 ||
	    fcntl(3, F_SETFD, 0) < 0)
		_exit(126);
	for (int i = 0; i < c->ncg; i++)
		if (write(c->cg[i], "0", 1) != 1) {
			step = "joining the guest's cgroup";
			goto fail;
		}
	if (syscall(SYS_close_range, 4, ~0u, 0) < 0) {
		step = "close_range";
		goto fail;
	}
	step = "becoming the job's user";
	if (setgroups(0, NULL) < 0 || setresgid(c->gid, c->gid, c->gid) < 0 || setresuid(c->uid, c->uid, c->uid) < 0)
		goto fail;
	/* Changing uid made the process undumpable, and its /proc/self
	 * files root's: it could not write its own maps. */
	step = "PR_SET_DUMPABLE";
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		goto fail;
	step = "a user and mount namespace";
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		goto fail;
	step = "mapping the user to root in it";
	if (write_at("/proc/self/setgroups", "deny") < 0 || write_at("/proc/self/uid_map", c->uid_map) < 0 ||
	    write_at("/proc/self/gid_map", c->gid_map) < 0)
		goto fail;
	step = "making the mounts private";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		goto fail;
	/* virtiofsd's pid file goes to /run/virtiofsd: a /run of its own. */
	step = "a tmpfs on /run";
	if (mount("vhpc-virtiofsd", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=755") < 0)
		goto fail;
	/* The working folder moved into the new namespace with it. */
	step = "binding the folder";
	if (mkdir(FS_SHARE, 0700) < 0 || mount(".", FS_SHARE, NULL, MS_BIND | MS_REC, NULL) < 0 || chdir("/") < 0)
		goto fail;
	if (c->b->ro) {
		step = "making the folder read-only";
		if (mount(NULL, FS_SHARE, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | locked_flags(c->b->flags), NULL) < 0)
			goto fail;
	}
	step = "no_new_privs";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		goto fail;
	execv(c->argv[0], c->argv);
	step = "exec";
fail:
	dprintf(2, "vhpc: cannot start virtiofsd for %s: %s: %s\n", c->b->src, step, strerror(errno));
	_exit(126);
}

int kvm_fs_start(const char *dir, int k, const struct na_hbind *b, uid_t uid, gid_t gid, const int *cg, int ncg,
		 int *conn, pid_t *pidp, struct verr *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char logp[PATH_MAX], src[PATH_MAX + 16], fdarg[] = "--fd=3";
	char *argv[] = { (char *)kvm_virtiofsd_path(), fdarg, "-o", src, "-o", "sandbox=chroot", "-o", "cache=auto",
			 "--rlimit-nofile=0", "-o", "log_level=warn", NULL };
	struct fs_child c = { .b = b, .uid = uid, .gid = gid, .cg = cg, .ncg = ncg, .argv = argv };
	int lfd = -1, cfd = -1, rc = -1;
	pid_t pid;

	*conn = -1;
	*pidp = 0;
	if (!b->dir)
		return verr_set(err, "bind %s: kvm guests share folders, and it is a file", b->src);
	if (access(argv[0], X_OK) < 0)
		return verr_errno(err, "%s (virtiofsd, Debian's qemu-system-common; $VHPC_VIRTIOFSD)", argv[0]);
	snprintf(src, sizeof(src), "source=%s", FS_SHARE);
	snprintf(c.uid_map, sizeof(c.uid_map), "0 %u 1\n", (unsigned)uid);
	snprintf(c.gid_map, sizeof(c.gid_map), "0 %u 1\n", (unsigned)gid);
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/fs%d.sock", dir, k) >= sizeof(sa.sun_path))
		return verr_set(err, "%s/fs%d.sock: longer than a socket path may be", dir, k);
	snprintf(logp, sizeof(logp), "%s/fs%d.log", dir, k);
	c.logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c.logfd < 0)
		return verr_errno(err, "%s", logp);
	unlink(sa.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || cfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
	    connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		verr_errno(err, "the vhost-user socket %s", sa.sun_path);
		goto out;
	}
	c.listen_fd = lfd;
	pid = fork();
	if (pid < 0) {
		verr_errno(err, "fork");
		goto out;
	}
	if (pid == 0)
		child(&c);
	log_debug("virtiofsd pid %d shares %s (%s) as uid %u", (int)pid, b->src, b->ro ? "ro" : "rw", (unsigned)uid);
	*conn = cfd;
	*pidp = pid;
	cfd = -1;
	rc = 0;
out:
	/* The daemon holds the listening end; nothing else may connect. */
	unlink(sa.sun_path);
	if (lfd >= 0)
		close(lfd);
	if (cfd >= 0)
		close(cfd);
	close(c.logfd);
	return rc;
}
