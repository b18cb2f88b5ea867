/* One benchmark command: output into files, a time limit, signals for
 * vhpc bench passed on so `vhpc run` can remove its guests before we go. */
#include "lib/clock.h"
#include "lib/err.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/harness/bh.h"

#define KILL_GRACE_S 15

int bh_spawn(char *const *argv, const char *out_path, const char *err_path, int timeout_s,
	     struct bh_proc *p, struct verr *err)
{
	sigset_t waitfor, old;
	int ofd, efd, nfd, st;
	pid_t pid;
	uint64_t deadline, kill_at = 0;

	memset(p, 0, sizeof(*p));
	ofd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (ofd < 0 || efd < 0 || nfd < 0) {
		verr_errno(err, "cannot create %s or %s", out_path, err_path);
		goto fail_fds;
	}
	/* Taken synchronously below, so none is lost between fork and wait. */
	sigemptyset(&waitfor);
	sigaddset(&waitfor, SIGCHLD);
	sigaddset(&waitfor, SIGINT);
	sigaddset(&waitfor, SIGTERM);
	sigaddset(&waitfor, SIGHUP);
	sigprocmask(SIG_BLOCK, &waitfor, &old);
	p->t0 = now_ns();
	pid = fork();
	if (pid < 0) {
		verr_errno(err, "fork");
		sigprocmask(SIG_SETMASK, &old, NULL);
		goto fail_fds;
	}
	if (pid == 0) {
		/* Its own process group: the terminal's Ctrl-C reaches vhpc bench,
		 * which forwards it once, instead of every process at once. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(nfd, 0);
		dup2(ofd, 1);
		dup2(efd, 2);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		dprintf(2, "vhpc bench: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	close(ofd);
	close(efd);
	close(nfd);
	deadline = p->t0 + (uint64_t)timeout_s * 1000000000ull;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		uint64_t now, until;
		struct timespec ts;
		siginfo_t si;
		int sig;

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			verr_errno(err, "waitpid");
			sigprocmask(SIG_SETMASK, &old, NULL);
			return -1;
		}
		now = now_ns();
		if (!p->timed_out && now >= deadline) {
			p->timed_out = true;
			kill(pid, SIGTERM);
			kill_at = now + KILL_GRACE_S * 1000000000ull;
		} else if (kill_at && now >= kill_at) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			kill_at = 0;
		}
		until = kill_at ? kill_at : p->timed_out ? now + 1000000000ull : deadline;
		if (until <= now)
			until = now + 1000000;
		ts.tv_sec = (time_t)((until - now) / 1000000000ull);
		ts.tv_nsec = (long)((until - now) % 1000000000ull);
		sig = sigtimedwait(&waitfor, &si, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			if (!p->interrupted)
				p->interrupted = sig;
			kill(pid, sig);
			if (!kill_at)
				kill_at = now_ns() + KILL_GRACE_S * 1000000000ull;
		}
	}
	p->t1 = now_ns();
	/* Signals that came after the last wait stay ours, not fatal. */
	for (;;) {
		struct timespec zero = { 0, 0 };
		siginfo_t si;
		int sig = sigtimedwait(&waitfor, &si, &zero);

		if (sig <= 0)
			break;
		if (sig != SIGCHLD && !p->interrupted)
			p->interrupted = sig;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;

fail_fds:
	if (ofd >= 0)
		close(ofd);
	if (efd >= 0)
		close(efd);
	if (nfd >= 0)
		close(nfd);
	return -1;
}
