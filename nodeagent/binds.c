/*
 * A job's host paths on this node, checked and opened as the job's user
 * before any guest starts: each must exist here and be readable by that
 * user, so a bind never shows a guest what its user could not open on the
 * host (the agent is root; the check is not).
 *
 * What a guest gets is the file the user's own lookup opened (O_PATH),
 * not a path looked up again later: between the check and the mount the
 * user may swap a folder on the path for a symlink to a place only root
 * can reach, and root's lookup would follow it (tests/security/
 * bind-symlink-swap.t did, 8 jobs of 24).  The container driver mounts
 * each descriptor at a path of root's (na_binds_mount) for runc to bind,
 * the kvm driver's virtiofsd binds it from its working folder.  The
 * source's mount flags are kept too: a guest's user namespace cannot
 * mount it with fewer.
 */
#include "lib/binds.h"
#include "lib/err.h"
#include "nodeagent/job.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

struct answer {
	int stage;               /* 0 ok; else what failed, with errno */
	int err;
	bool dir;
	unsigned long flags;     /* statvfs f_flag */
	char real[PATH_MAX];
};
enum { ST_OK, ST_RESOLVE, ST_TYPE, ST_ACCESS, ST_STATVFS };

/* In the child, as the user: the open file and what it is.  Following
 * symlinks is the user's own lookup, so it reaches only what they may. */
static int open_one(const struct bind *b, struct answer *a)
{
	char self[64];
	struct stat st;
	struct statvfs vfs;
	ssize_t n;
	int fd;

	memset(a, 0, sizeof(*a));
	fd = open(b->src, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		a->stage = ST_RESOLVE;
		a->err = errno;
		return -1;
	}
	if (fstat(fd, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
		a->stage = ST_TYPE;
		a->err = errno;
		goto fail;
	}
	a->dir = S_ISDIR(st.st_mode);
	if (faccessat(fd, "", R_OK | (a->dir ? X_OK : 0), AT_EMPTY_PATH) < 0) {
		a->stage = ST_ACCESS;
		a->err = errno;
		goto fail;
	}
	if (fstatvfs(fd, &vfs) < 0) {
		a->stage = ST_STATVFS;
		a->err = errno;
		goto fail;
	}
	a->flags = vfs.f_flag;
	/* The path it was found at, for messages and logs only. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, a->real, sizeof(a->real) - 1);
	if (n > 0)
		a->real[n] = 0;
	else
		snprintf(a->real, sizeof(a->real), "%s", b->src);
	return fd;
fail:
	close(fd);
	return -1;
}

/* One answer, with its descriptor when there is one. */
static int send_answer(int sock, const struct answer *a, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { (void *)a, sizeof(*a) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(*a) ? 0 : -1;
}

/* 0 with *fd (-1 when none came), 1 at EOF, -1 on error. */
static int recv_answer(int sock, struct answer *a, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { a, sizeof(*a) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n;

	*fd = -1;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	if (n == 0)
		return 1;
	if (n != (ssize_t)sizeof(*a) || (m.msg_flags & MSG_CTRUNC)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

/* The user's groups, looked up before fork: the child only makes system
 * calls (the agent may have threads). */
static int user_groups(uid_t uid, gid_t gid, gid_t *groups, int *n)
{
	struct passwd pw, *p = NULL;
	char buf[4096];
	int max = *n;

	groups[0] = gid;
	*n = 1;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &p) != 0 || !p)
		return 0;
	if (getgrouplist(p->pw_name, gid, groups, &max) < 0)
		return 0;
	*n = max;
	return 0;
}

static int answer_error(const struct bind *b, const struct answer *a, uid_t uid, struct verr *err)
{
	switch (a->stage) {
	case ST_RESOLVE:
		return verr_set(err, "bind source %s: %s%s", b->src, strerror(a->err),
				a->err == EACCES ? " for the job's user" : a->err == ENOENT ? " on this node" : "");
	case ST_TYPE:
		return verr_set(err, "bind source %s: %s", b->src,
				a->err ? strerror(a->err) : "neither a directory nor a regular file");
	case ST_ACCESS:
		return verr_set(err, "bind source %s: the job's user (uid %u) cannot %s it: %s", b->src,
				(unsigned)uid, "read", strerror(a->err));
	default:
		return verr_set(err, "bind source %s: statvfs: %s", b->src, strerror(a->err));
	}
}

void na_binds_close(struct na_hbind *hb, int n)
{
	for (int i = 0; hb && i < n; i++)
		if (hb[i].fd >= 0) {
			close(hb[i].fd);
			hb[i].fd = -1;
		}
}

int na_binds_check(const struct bind_list *l, uid_t uid, gid_t gid, struct na_hbind *out, struct verr *err)
{
	gid_t groups[256];
	int ngroups = 256, sv[2], status;
	pid_t pid;
	struct answer a;
	int rc = 0;

	if (!l || l->n == 0)
		return 0;
	for (int i = 0; i < l->n; i++)
		out[i].fd = -1;
	user_groups(uid, gid, groups, &ngroups);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return verr_errno(err, "socketpair");
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return verr_errno(err, "fork");
	}
	if (pid == 0) {
		close(sv[0]);
		if (setgroups((size_t)ngroups, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(3);
		for (int i = 0; i < l->n; i++) {
			int fd = open_one(&l->v[i], &a);

			if (send_answer(sv[1], &a, fd) < 0)
				_exit(4);
			if (fd >= 0)
				close(fd);
		}
		_exit(0);
	}
	close(sv[1]);
	for (int i = 0; i < l->n && rc == 0; i++) {
		const struct bind *b = &l->v[i];
		int fd, r = recv_answer(sv[0], &a, &fd);

		if (r != 0) {
			rc = r > 0 ? 1 : verr_set(err, "checking the job's paths as uid %u: a garbled answer", (unsigned)uid);
			break;
		}
		out[i].fd = fd;
		a.real[sizeof(a.real) - 1] = 0;
		if (a.stage != ST_OK)
			rc = answer_error(b, &a, uid, err);
		else if (fd < 0)
			rc = verr_set(err, "bind source %s: the checker sent no descriptor", b->src);
		if (rc < 0)
			break;
		snprintf(out[i].src, sizeof(out[i].src), "%s", a.real);
		snprintf(out[i].dst, sizeof(out[i].dst), "%s", b->dst);
		out[i].ro = b->ro || (a.flags & ST_RDONLY);
		out[i].dir = a.dir;
		out[i].flags = a.flags;
	}
	close(sv[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc >= 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		rc = verr_set(err, "checking the job's paths as uid %u: the checker %s %d%s", (unsigned)uid,
			      WIFEXITED(status) ? "exited with" : "was killed by signal",
			      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
			      WIFEXITED(status) && WEXITSTATUS(status) == 3 ? " (it could not take the user's uid and groups)" : "");
	else if (rc > 0)
		rc = verr_set(err, "checking the job's paths as uid %u: the checker stopped before the last one",
			      (unsigned)uid);
	if (rc != 0) {
		na_binds_close(out, l->n);
		return -1;
	}
	return 0;
}

int na_binds_mount(const struct na_hbind *b, const char *at, struct verr *err)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->ro ? MOUNT_ATTR_RDONLY : 0) };
	int tree, fd;

	if (b->fd < 0)
		return verr_set(err, "bind source %s: not opened by the check", b->src);
	/* The mountpoint is new and root's: nothing the user placed. */
	if (b->dir) {
		if (mkdir(at, 0700) < 0)
			return verr_errno(err, "mountpoint %s for %s", at, b->src);
	} else {
		if ((fd = open(at, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
			return verr_errno(err, "mountpoint %s for %s", at, b->src);
		close(fd);
	}
	tree = open_tree(b->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0)
		return verr_errno(err, "bind source %s: open_tree", b->src);
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0 ||
	    move_mount(tree, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		verr_errno(err, "bind source %s: mounting it at %s", b->src, at);
		close(tree);
		return -1;
	}
	close(tree);
	return 0;
}
