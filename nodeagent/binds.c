/*
 * A job's host paths on this node, checked as the job's user before any
 * guest starts: each must exist here and be readable by that user, so a
 * bind never shows a guest what its user could not open on the host (the
 * agent is root; the check is not).  Each source is resolved to the path
 * with no symlinks the user's own lookup reached, and its mount's flags
 * are kept: a guest's user namespace cannot mount it with fewer.
 */
#include "lib/binds.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "nodeagent/nodeagent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void check_one(const struct bind *b, struct answer *a)
{
	struct stat st;
	struct statvfs vfs;

	memset(a, 0, sizeof(*a));
	if (!realpath(b->src, a->real)) {
		a->stage = ST_RESOLVE;
		a->err = errno;
		return;
	}
	if (stat(a->real, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
		a->stage = ST_TYPE;
		a->err = errno;
		return;
	}
	a->dir = S_ISDIR(st.st_mode);
	if (access(a->real, R_OK | (a->dir ? X_OK : 0)) < 0) {
		a->stage = ST_ACCESS;
		a->err = errno;
		return;
	}
	if (statvfs(a->real, &vfs) < 0) {
		a->stage = ST_STATVFS;
		a->err = errno;
		return;
	}
	a->flags = vfs.f_flag;
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

int na_binds_check(const struct bind_list *l, uid_t uid, gid_t gid, struct na_hbind *out, struct verr *err)
{
	gid_t groups[256];
	int ngroups = 256, fds[2], status;
	pid_t pid;
	struct answer a;
	int rc = 0;

	if (!l || l->n == 0)
		return 0;
	user_groups(uid, gid, groups, &ngroups);
	if (pipe2(fds, O_CLOEXEC) < 0)
		return verr_errno(err, "pipe");
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return verr_errno(err, "fork");
	}
	if (pid == 0) {
		close(fds[0]);
		if (setgroups((size_t)ngroups, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(3);
		for (int i = 0; i < l->n; i++) {
			check_one(&l->v[i], &a);
			if (write_full(fds[1], &a, sizeof(a)) < 0)
				_exit(4);
		}
		_exit(0);
	}
	close(fds[1]);
	for (int i = 0; i < l->n && rc == 0; i++) {
		const struct bind *b = &l->v[i];

		if (read_full(fds[0], &a, sizeof(a)) != 0) {
			rc = 1;
			break;
		}
		a.real[sizeof(a.real) - 1] = 0;
		switch (a.stage) {
		case ST_OK:
			break;
		case ST_RESOLVE:
			rc = verr_set(err, "bind source %s: %s%s", b->src, strerror(a.err),
				      a.err == EACCES ? " for the job's user" : a.err == ENOENT ? " on this node" : "");
			break;
		case ST_TYPE:
			rc = verr_set(err, "bind source %s: %s", b->src,
				      a.err ? strerror(a.err) : "neither a directory nor a regular file");
			break;
		case ST_ACCESS:
			rc = verr_set(err, "bind source %s: the job's user (uid %u) cannot %s it: %s", b->src,
				      (unsigned)uid, "read", strerror(a.err));
			break;
		default:
			rc = verr_set(err, "bind source %s: statvfs: %s", b->src, strerror(a.err));
			break;
		}
		if (rc < 0)
			break;
		snprintf(out[i].src, sizeof(out[i].src), "%s", a.real);
		snprintf(out[i].dst, sizeof(out[i].dst), "%s", b->dst);
		out[i].ro = b->ro || (a.flags & ST_RDONLY);
		out[i].dir = a.dir;
		out[i].flags = a.flags;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc >= 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		return verr_set(err, "checking the job's paths as uid %u: the checker %s %d%s", (unsigned)uid,
				WIFEXITED(status) ? "exited with" : "was killed by signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
				WIFEXITED(status) && WEXITSTATUS(status) == 3 ? " (it could not take the user's uid and groups)" : "");
	return rc < 0 ? -1 : 0;
}
