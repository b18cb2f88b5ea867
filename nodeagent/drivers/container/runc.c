/*
 * Running the OCI runtime.  runc from Debian: crun 1.8 refuses the hybrid
 * cgroup layout of the hosts here (README.md, "Dependencies").
 */
#include "nodeagent/job.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/jobdir/jobdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *na_runc_path(void)
{
	static const char *const places[] = { "/usr/sbin/runc", "/usr/bin/runc", "/sbin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc" };
	static __thread char buf[PATH_MAX];
	const char *env = getenv("VHPC_RUNC"), *path = getenv("PATH");

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++)
		if (access(places[i], X_OK) == 0)
			return places[i];
	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/runc", (int)n, path);
		if (n && access(buf, X_OK) == 0)
			return buf;
		path += n + (path[n] == ':');
	}
	return NULL;
}

/* The last line of runc's text log that says level=error, for messages. */
static void log_tail(const char *log, char *out, size_t len)
{
	char *buf, *p, *best = NULL;
	size_t n;
	struct verr e;

	out[0] = 0;
	if (!log || read_file(log, &buf, &n, 1 << 20, &e) < 0)
		return;
	for (p = buf; (p = strstr(p, "level=error")); p++)
		best = p;
	if (best) {
		char *m = strstr(best, "msg=");

		best = m ? m + 4 : best;
		best[strcspn(best, "\n")] = 0;
		snprintf(out, len, "%s", best);
	}
	free(buf);
}

int na_runc(const char *const *args, int out_fd, const char *log,
	    int timeout_ms, struct verr *err)
{
	const char *runc = na_runc_path();
	char root[PATH_MAX], cmd[256] = "", out[2048] = "", tail[1024];
	const char *argv[64];
	int k = 0, pipefd[2] = { -1, -1 }, pidfd = -1, status = 0, rc = -1;
	size_t outn = 0;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	pid_t pid;
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	if (!runc)
		return verr_set(err, "runc not found ($VHPC_RUNC, /usr/sbin/runc, PATH): install the Debian package runc");
	argv[k++] = runc;
	argv[k++] = "--root";
	argv[k++] = na_runc_root(root, sizeof(root));
	if (log) {
		argv[k++] = "--log";
		argv[k++] = log;
		argv[k++] = "--log-format";
		argv[k++] = "text";
	}
	for (int i = 0; args[i] && k < 63; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	for (int i = 0; args[i]; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", i ? " " : "", args[i]);

	if (out_fd < 0 && pipe2(pipefd, O_CLOEXEC) < 0)
		return verr_errno(err, "runc %s: pipe", cmd);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : pipefd[1], 2);
	/* The caller's blocked and ignored signals must not reach runc and,
	 * through it, the guest's init (a guest that ignores SIGTERM cannot be
	 * stopped gracefully). */
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	errno = posix_spawn(&pid, runc, &fa, &at, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (errno) {
		verr_errno(err, "runc %s: spawn %s", cmd, runc);
		goto out;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		verr_errno(err, "runc %s: pidfd_open", cmd);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		goto out;
	}
	for (bool exited = false; !exited; ) {
		struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN }, { .fd = pipefd[0], .events = POLLIN } };
		uint64_t now = now_ns();

		if (now >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			verr_set(err, "runc %s: no answer after %d ms; killed", cmd, timeout_ms);
			goto out;
		}
		if (poll(p, pipefd[0] >= 0 ? 2 : 1, (int)((deadline - now) / 1000000) + 1) < 0) {
			if (errno == EINTR)
				continue;
			verr_errno(err, "runc %s: poll", cmd);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			goto out;
		}
		exited = p[0].revents & POLLIN;
		/* Once runc is gone, take what it wrote and stop reading even if
		 * something it started still holds the pipe. */
		while (pipefd[0] >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
			ssize_t n = read(pipefd[0], out + outn, sizeof(out) - 1 - outn);

			if (n <= 0) {
				close(pipefd[0]);
				pipefd[0] = -1;
				break;
			}
			outn += (size_t)n;
			out[outn] = 0;
			if (outn > sizeof(out) / 2) {   /* keep the end: errors come last */
				memmove(out, out + outn - sizeof(out) / 4, sizeof(out) / 4 + 1);
				outn = sizeof(out) / 4;
			}
			if (!exited || poll(&p[1], 1, 0) <= 0)
				break;
		}
	}
	if (waitpid(pid, &status, 0) < 0) {
		verr_errno(err, "runc %s: wait", cmd);
		goto out;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rc = 0;
		goto out;
	}
	while (outn && (out[outn - 1] == '\n' || out[outn - 1] == ' '))
		out[--outn] = 0;
	log_tail(log, tail, sizeof(tail));
	verr_set(err, "runc %s: %s %d: %s", cmd,
		 WIFEXITED(status) ? "exit status" : "killed by signal",
		 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
		 tail[0] ? tail : outn ? out : "(no message; see the guest's log)");
out:
	if (pidfd >= 0)
		close(pidfd);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	return rc;
}

void na_ctr_memlock_room(uint64_t bytes)
{
	struct rlimit rl;

	if (!bytes || getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= bytes)
		return;
	rl.rlim_max = bytes;
	/* EPERM without CAP_SYS_RESOURCE: the guest gets what there is. */
	(void)setrlimit(RLIMIT_MEMLOCK, &rl);
}
