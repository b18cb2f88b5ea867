/*
 * A Slurm task running inside a container guest: it joins the guest's
 * namespaces, as Pyxis does with enroot's, but stays Slurm's own process
 * (in Slurm's cgroups, with Slurm's stdio), so accounting, signals, exit
 * codes and output files work unchanged.
 *
 * What it does not join: the guest's user namespace (slurmstepd sets the
 * task's uid after task_init_privileged, and the job's uid is mapped in
 * the guest only as its root, so the task stays the user's uid, which is
 * what that root is on the host anyway) and the guest's cgroups (they are
 * Slurm's to track the task by; the guest's cpuset is applied as affinity).
 * A pid namespace applies to children only, hence the fork.
 */
#include "slurm/plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct {
	const char *name;
	int type;
} kinds[] = {
	/* net first: the rest are found through the init's /proc entry,
	 * whose meaning changes once the mount namespace is joined (last). */
	{ "net", CLONE_NEWNET }, { "uts", CLONE_NEWUTS }, { "ipc", CLONE_NEWIPC },
	{ "pid", CLONE_NEWPID }, { "mnt", CLONE_NEWNS },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* The guest's RLIMIT_MEMLOCK, soft and hard, as its init has it (the node
 * agent makes it the guest's memory): verbs pins every buffer it
 * registers against it, and a Slurm task is no child of the guest's init
 * but slurmstepd's, with the node daemons' 8 MiB, at which libfabric's rxd
 * never registered its packet pools over a 4096-byte MTU and MPI on the
 * fabric hung for ever (tests/fabric/slurm.t).  Root may raise the hard
 * limit; the task (the user) could not. */
static int take_memlock(const struct vs_guest *g, char *why, size_t len)
{
	struct rlimit rl;

	if (prlimit(g->pid, RLIMIT_MEMLOCK, NULL, &rl) < 0)
		return vs_fail(why, len, "guest g%d: its init's RLIMIT_MEMLOCK: %s", g->index, strerror(errno));
	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return vs_fail(why, len, "guest g%d: RLIMIT_MEMLOCK %llu: %s", g->index, (unsigned long long)rl.rlim_max,
			       strerror(errno));
	return 0;
}

int vs_enter_guest(const struct vs_guest *g, char *why, size_t len)
{
	int fd[NKINDS];
	char path[128];
	struct stat named, init;
	int rc = -1;
	size_t i;

	for (i = 0; i < NKINDS; i++)
		fd[i] = -1;
	if (g->pid <= 0 || !g->netns[0])
		return vs_fail(why, len, "guest g%d has no namespaces to join (a VM)", g->index);
	/* The pid is its init's only while its network namespace is the
	 * guest's: a recycled pid would have another. */
	snprintf(path, sizeof(path), "/run/netns/%s", g->netns);
	if (stat(path, &named) < 0)
		return vs_fail(why, len, "guest g%d: %s: %s", g->index, path, strerror(errno));
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)g->pid);
	if (stat(path, &init) < 0 || init.st_ino != named.st_ino || init.st_dev != named.st_dev)
		return vs_fail(why, len, "guest g%d has stopped (its init, pid %d, is gone)", g->index, (int)g->pid);
	if (take_memlock(g, why, len) < 0)
		return -1;
	for (i = 0; i < NKINDS; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)g->pid, kinds[i].name);
		if ((fd[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			vs_fail(why, len, "guest g%d: %s: %s", g->index, path, strerror(errno));
			goto out;
		}
	}
	for (i = 0; i < NKINDS; i++)
		if (setns(fd[i], kinds[i].type) < 0) {
			vs_fail(why, len, "guest g%d: joining its %s namespace: %s", g->index, kinds[i].name, strerror(errno));
			goto out;
		}
	rc = 0;
out:
	for (i = 0; i < NKINDS; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	return rc;
}

/* "0-3,8" into a CPU set or a node mask; -1 when it names none. */
static int cpus_of(const char *list, cpu_set_t *set, unsigned long *mask)
{
	const char *p = list;
	int any = 0;

	if (set)
		CPU_ZERO(set);
	if (mask)
		*mask = 0;
	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p || lo < 0)
			return -1;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo)
				return -1;
			p = end;
		}
		for (long c = lo; c <= hi; c++) {
			if (set && c < CPU_SETSIZE)
				CPU_SET((int)c, set);
			if (mask && c < (long)(8 * sizeof(*mask)))
				*mask |= 1ul << c;
			any = 1;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return any ? 0 : -1;
}

static volatile pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int vs_become_guest_task(const struct vs_guest *g, char *why, size_t len)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM,
				    SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU, SIGWINCH, SIGPIPE, SIGXCPU };
	struct sigaction sa = { .sa_handler = forward };
	cpu_set_t set;
	unsigned long mems;
	sigset_t all, old;
	int status;
	pid_t pid;

	/* The guest's placement; Slurm's own binding, if any, is within the
	 * job's CPUs as the guest's is, and the guest's wins. */
	if (g->cpus[0] && cpus_of(g->cpus, &set, NULL) == 0)
		sched_setaffinity(0, sizeof(set), &set);
	if (g->mems[0] && cpus_of(g->mems, NULL, &mems) == 0)
		syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, &mems, 8 * sizeof(mems) + 1);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return vs_fail(why, len, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/* The task.  No set-user-ID program of the image may give it
		 * the host's root: it is outside the guest's user namespace. */
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(128 + SIGKILL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return 0;
	}
	/* The parent: what Slurm sees as the task.  It never execs, so it
	 * drops what exec would have closed (slurmstepd's ends of the task's
	 * pipes among them: held here, the task would never see EOF). */
	child = pid;
	close_range(3, ~0u, 0);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	for (int fd = 0; fd < 3; fd++) {
		int nul = open("/dev/null", O_RDWR);

		if (nul >= 0 && nul != fd) {
			dup2(nul, fd);
			close(nul);
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(255);
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		/* Die the same way, without a core of our own. */
		signal(sig, SIG_DFL);
		prctl(PR_SET_DUMPABLE, 0);
		sigprocmask(SIG_SETMASK, &all, NULL);
		sigdelset(&all, sig);
		kill(getpid(), sig);
		sigprocmask(SIG_SETMASK, &all, NULL);
		_exit(128 + sig);
	}
	_exit(WEXITSTATUS(status));
}
