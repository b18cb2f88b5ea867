/*
 * Named network namespaces, compatible with iproute2 (`ip netns`): a
 * namespace is kept alive by a bind mount of its nsfs file on
 * /run/netns/<name>.  All namespace switching happens in short-lived
 * threads, so the caller's threads never leave their own namespace; a
 * namespace owned by another user namespace is made by a short-lived
 * child process (only a single-threaded process may join a user
 * namespace).
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "nodeagent/net/net.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Like iproute2: /run/netns is a shared mount, so a namespace mounted or
 * unmounted here later also appears or disappears in mount namespaces
 * copied from ours before (ip netns exec, containers being set up), and an
 * unlinked namespace is not kept alive by a stale copy of its mount. */
static int netns_dir_ready(struct verr *err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static bool done;
	int rc = 0;

	pthread_mutex_lock(&mu);
	if (done)
		goto out;
	if (mkdir_p(NA_NETNS_DIR, 0755, err) < 0) {
		rc = -1;
		goto out;
	}
	if (mount("", NA_NETNS_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
		if (errno != EINVAL ||
		    mount(NA_NETNS_DIR, NA_NETNS_DIR, "none", MS_BIND | MS_REC, NULL) < 0 ||
		    mount("", NA_NETNS_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
			rc = verr_errno(err, "make %s a shared mount", NA_NETNS_DIR);
			goto out;
		}
	}
	done = true;
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

static bool name_ok(const char *name)
{
	return ident_ok(name, 64) && !strchr(name, '/');
}

struct add_call {
	const char *path;
	struct verr err;
	int rc;
};

static void *add_thread(void *p)
{
	struct add_call *c = p;

	if (unshare(CLONE_NEWNET) < 0)
		c->rc = verr_errno(&c->err, "unshare(CLONE_NEWNET)");
	else if (mount("/proc/thread-self/ns/net", c->path, "none", MS_BIND, NULL) < 0)
		c->rc = verr_errno(&c->err, "bind-mount the new namespace on %s", c->path);
	return NULL;
}

/* A child that joins owner's user namespace makes the network namespace
 * there (so that namespace owns it), and holds it while the parent, with
 * the host's rights, binds it on path. */
static int add_owned(const char *path, pid_t owner, struct verr *err)
{
	char userns[64], nsfile[64], ok = 0;
	int ufd, up[2], down[2], status, rc = 0;
	pid_t pid;

	snprintf(userns, sizeof(userns), "/proc/%d/ns/user", (int)owner);
	ufd = open(userns, O_RDONLY | O_CLOEXEC);
	if (ufd < 0)
		return verr_errno(err, "%s", userns);
	if (pipe2(up, O_CLOEXEC) < 0) {
		close(ufd);
		return verr_errno(err, "pipe");
	}
	if (pipe2(down, O_CLOEXEC) < 0) {
		close(ufd);
		close(up[0]);
		close(up[1]);
		return verr_errno(err, "pipe");
	}
	pid = fork();
	if (pid == 0) {
		char b;

		close(up[0]);
		close(down[1]);
		b = setns(ufd, CLONE_NEWUSER) == 0 && unshare(CLONE_NEWNET) == 0;
		if (write(up[1], &b, 1) == 1 && b)
			(void)!read(down[0], &b, 1);
		_exit(b ? 0 : 1);
	}
	close(ufd);
	close(up[1]);
	close(down[0]);
	if (pid < 0) {
		rc = verr_errno(err, "fork");
	} else if (read(up[0], &ok, 1) != 1 || !ok) {
		rc = verr_set(err, "cannot make a network namespace in the user namespace of pid %d", (int)owner);
	} else {
		snprintf(nsfile, sizeof(nsfile), "/proc/%d/ns/net", (int)pid);
		if (mount(nsfile, path, "none", MS_BIND, NULL) < 0)
			rc = verr_errno(err, "bind-mount the new namespace on %s", path);
	}
	close(down[1]);
	close(up[0]);
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return rc;
}

/* The empty file under /run/netns a namespace is bound on: a name that
 * already exists is refused, never reused. */
static int mountpoint(const char *name, char path[PATH_MAX], struct verr *err)
{
	int fd;

	if (!name_ok(name))
		return verr_set(err, "network namespace name '%.80s' is not a plain name", name);
	if (netns_dir_ready(err) < 0)
		return -1;
	snprintf(path, PATH_MAX, "%s/%s", NA_NETNS_DIR, name);
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == EEXIST)
			return verr_set(err, "network namespace %s already exists", name);
		return verr_errno(err, "create %s", path);
	}
	close(fd);
	return 0;
}

int na_netns_add(const char *name, struct verr *err)
{
	return na_netns_add_owned(name, 0, err);
}

int na_netns_add_owned(const char *name, pid_t owner, struct verr *err)
{
	char path[PATH_MAX];
	struct add_call c = { .path = path };
	pthread_t th;
	int e;

	if (mountpoint(name, path, err) < 0)
		return -1;
	if (owner > 0) {
		if (add_owned(path, owner, err) < 0) {
			unlink(path);
			return verr_wrap(err, "network namespace %s", name);
		}
		return 0;
	}
	if ((e = pthread_create(&th, NULL, add_thread, &c)) != 0) {
		errno = e;
		verr_errno(err, "network namespace %s: thread", name);
		unlink(path);
		return -1;
	}
	pthread_join(th, NULL);
	if (c.rc < 0) {
		*err = c.err;
		unlink(path);
		return verr_wrap(err, "network namespace %s", name);
	}
	return 0;
}

int na_netns_add_fd(const char *name, int nsfd, struct verr *err)
{
	char path[PATH_MAX], src[64];

	if (mountpoint(name, path, err) < 0)
		return -1;
	/* The descriptor, not /proc/PID/ns/net: a pid may be reused, the
	 * namespace a descriptor holds cannot change. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d", nsfd);
	if (mount(src, path, "none", MS_BIND, NULL) < 0) {
		verr_errno(err, "bind-mount network namespace %s", name);
		unlink(path);
		return -1;
	}
	return 0;
}

int na_netns_del(const char *name, struct verr *err)
{
	char path[PATH_MAX];

	if (!name_ok(name))
		return verr_set(err, "network namespace name '%.80s' is not a plain name", name);
	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, name);
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return verr_errno(err, "unmount %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return verr_errno(err, "unlink %s", path);
	return 0;
}

struct run_call {
	const char *path;
	int (*fn)(void *, struct verr *);
	void *arg;
	struct verr err;
	int rc;
};

static void *run_thread(void *p)
{
	struct run_call *c = p;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		c->rc = verr_errno(&c->err, "%s", c->path);
		return NULL;
	}
	if (setns(fd, CLONE_NEWNET) < 0) {
		c->rc = verr_errno(&c->err, "enter %s", c->path);
		close(fd);
		return NULL;
	}
	close(fd);
	c->rc = c->fn(c->arg, &c->err);
	return NULL;
}

int na_netns_run_path(const char *path, int (*fn)(void *arg, struct verr *err),
		      void *arg, struct verr *err)
{
	struct run_call c = { .path = path, .fn = fn, .arg = arg };
	pthread_t th;
	int e;

	if ((e = pthread_create(&th, NULL, run_thread, &c)) != 0) {
		errno = e;
		return verr_errno(err, "network namespace %s: thread", path);
	}
	pthread_join(th, NULL);
	if (c.rc < 0) {
		*err = c.err;
		return verr_wrap(err, "in network namespace %s", path);
	}
	return 0;
}

int na_netns_run(const char *name, int (*fn)(void *arg, struct verr *err),
		 void *arg, struct verr *err)
{
	char path[PATH_MAX];

	if (!name_ok(name))
		return verr_set(err, "network namespace name '%.80s' is not a plain name", name);
	snprintf(path, sizeof(path), "%s/%s", NA_NETNS_DIR, name);
	return na_netns_run_path(path, fn, arg, err);
}
