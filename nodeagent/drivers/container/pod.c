/*
 * The pod of a job's container guests on one host: one user namespace
 * (root is the job's user outside, nothing else mapped, as each guest had
 * on its own) and one PID namespace, which every guest of the job here
 * joins, and in which each guest's network namespace is made.  Mount, UTS,
 * IPC and cgroup namespaces stay the guest's own.
 *
 * Why: ranks in two guests can then read each other's memory with
 * process_vm_readv (same user namespace, pids that mean the same process),
 * so the vmshm BTL copies a large message once instead of twice through
 * its rings.  What it costs: a guest sees the processes of its job's other
 * guests on this host, all of them the same user's; nothing of any other
 * job or of the host.  And CRIU cannot restore a guest into the pod's
 * namespaces (driver.c, ckpt_check), so a job started with
 * --no-single-copy has none: its guests keep the vmshm region, each in
 * namespaces of its own, and can be checkpointed.
 *
 * The namespaces are held by a small init the agent clones for them (the
 * PID namespace's PID 1: it only reaps), in cgroup vhpc/<job>/pod, so the
 * sweep that ends a job's processes ends it too, after a crash as well.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/jobdir/jobdir.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define POD_STACK (64 * 1024)

static void on_child(int sig)
{
	(void)sig;
}

/* Becomes the job's user on the host (root of the pod's namespace) with no
 * capability left in any set: cloned by the agent, it was still the host's
 * uid 0, with every capability in its new namespace. */
static int drop_to_user(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return -1;
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	if (syscall(SYS_capset, &h, d) < 0)
		return -1;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* PID 1 of the pod.  It goes on only once the agent has mapped its ids and
 * put it into the job's cgroup (a "go" byte): an agent that died before
 * that leaves nothing behind, because the pipe then just closes.  It says
 * "k" once it has become the job's user. */
static int pod_init(void *arg)
{
	const int *fds = arg;
	struct sigaction sa = { .sa_handler = on_child };
	sigset_t chld, none;
	char go = 0;

	close(fds[1]);
	close(fds[2]);
	while (read(fds[0], &go, 1) < 0 && errno == EINTR)
		;
	if (go != 'g' || drop_to_user() < 0 || write(fds[3], "k", 1) != 1)
		_exit(1);
	/* Nothing of the agent's stays open here (its job dir lock among
	 * them: held by us it would look alive after the agent died). */
	close_range(0, ~0u, 0);
	/* Nor its working folder, which would keep a mount busy. */
	if (chdir("/") < 0)
		_exit(1);
	prctl(PR_SET_NAME, "vhpc-pod", 0, 0, 0);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigemptyset(&none);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	/* Orphans of every guest end up here. */
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		sigsuspend(&none);
	}
}

static int write_map(pid_t pid, const char *file, unsigned id, struct verr *err)
{
	char path[64], line[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	snprintf(line, sizeof(line), "0 %u 1\n", id);
	return write_str(path, line, err);
}

/* No process yet; the job's name checked and kept. */
static int pod_begin(const char *job, struct na_pod *pod, struct verr *err)
{
	pod->pid = -1;
	pod->pidfd = -1;
	if (na_job_check(job, err) < 0)
		return -1;
	snprintf(pod->job, sizeof(pod->job), "%s", job);
	return 0;
}

int na_pod_create(const char *job, uid_t uid, gid_t gid, struct na_pod *pod, struct verr *err)
{
	char rel[64], *stack, ack = 0;
	int go[2], back[2], fds[4], rc = 0;
	pid_t pid;

	if (pod_begin(job, pod, err) < 0)
		return -1;
	if (!(stack = malloc(POD_STACK)))
		return verr_set(err, "out of memory");
	if (pipe2(go, O_CLOEXEC) < 0) {
		free(stack);
		return verr_errno(err, "job %s pod: pipe", job);
	}
	if (pipe2(back, O_CLOEXEC) < 0) {
		free(stack);
		close(go[0]);
		close(go[1]);
		return verr_errno(err, "job %s pod: pipe", job);
	}
	fds[0] = go[0];
	fds[1] = go[1];
	fds[2] = back[0];
	fds[3] = back[1];
	/* A network namespace of its own too: it needs none, and in the
	 * host's it would count among the host's processes there. */
	pid = clone(pod_init, stack + POD_STACK, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | SIGCHLD, fds);
	free(stack);
	close(go[0]);
	close(back[1]);
	if (pid < 0) {
		close(go[1]);
		close(back[0]);
		return verr_errno(err, "job %s pod: clone a user and PID namespace", job);
	}
	pod->pid = pid;
	pod->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	snprintf(rel, sizeof(rel), "vhpc/%s/pod", job);
	if (pod->pidfd < 0)
		rc = verr_errno(err, "pidfd_open %d", (int)pid);
	else if (write_map(pid, "uid_map", (unsigned)uid, err) < 0 ||
		 write_map(pid, "gid_map", (unsigned)gid, err) < 0 || na_cgroup_attach(rel, pid, err) < 0)
		rc = -1;
	else if (write(go[1], "g", 1) != 1 || read(back[0], &ack, 1) != 1 || ack != 'k')
		rc = verr_set(err, "its init could not become the job's user without capabilities");
	if (rc < 0) {
		close(go[1]);
		close(back[0]);
		na_pod_destroy(pod);
		return verr_wrap(err, "job %s pod", job);
	}
	close(go[1]);
	close(back[0]);
	return 0;
}

/* Whether pid (held by pidfd, so the number cannot move on) is the pod's
 * init of job: its cgroup and its name say so. */
static int is_pod_init(pid_t pid, const char *job, struct verr *err)
{
	char path[64], want[64], *buf;
	size_t len;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	snprintf(want, sizeof(want), "/vhpc/%s/pod\n", job);
	if (read_file(path, &buf, &len, 1 << 16, err) < 0)
		return verr_wrap(err, "pid %d", (int)pid);
	ok = strstr(buf, want) != NULL;
	free(buf);
	if (!ok)
		return verr_set(err, "pid %d is not in cgroup vhpc/%s/pod", (int)pid, job);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_file(path, &buf, &len, 64, err) < 0)
		return verr_wrap(err, "pid %d", (int)pid);
	ok = !strcmp(buf, "vhpc-pod\n");
	free(buf);
	if (!ok)
		return verr_set(err, "pid %d in cgroup vhpc/%s/pod is not a vhpc-pod", (int)pid, job);
	return 0;
}

int na_pod_adopt(const char *job, struct na_pod *pod, struct verr *err)
{
	char rel[64];
	pid_t pids[2];
	int n;

	if (pod_begin(job, pod, err) < 0)
		return -1;
	snprintf(rel, sizeof(rel), "vhpc/%s/pod", job);
	if ((n = na_cgroup_pids(rel, pids, 2, err)) < 0)
		return verr_wrap(err, "job %s pod", job);
	if (n == 0)
		return 0;
	/* Its init reaps every orphan at once, so it is alone there. */
	if (n > 1)
		return verr_set(err, "job %s pod: cgroup %s holds %d processes, not its init alone", job, rel, n);
	pod->pidfd = (int)syscall(SYS_pidfd_open, pids[0], 0);
	if (pod->pidfd < 0)
		return verr_errno(err, "job %s pod: its init (pid %d) is gone", job, (int)pids[0]);
	if (is_pod_init(pids[0], job, err) < 0) {
		close(pod->pidfd);
		pod->pidfd = -1;
		return verr_wrap(err, "job %s pod", job);
	}
	pod->pid = pids[0];
	return 1;
}

void na_pod_destroy(struct na_pod *pod)
{
	char rel[64];
	struct verr e;
	int removed = 0;

	if (pod->pid <= 0)
		return;
	/* Through the pidfd: the number may have been reaped and reused. */
	if (pod->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pod->pidfd, SIGKILL, NULL, 0);
	/* Not our child after a takeover (ECHILD): the cgroup's removal
	 * below waits for it instead. */
	while (waitpid(pod->pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (pod->pidfd >= 0)
		close(pod->pidfd);
	pod->pid = -1;
	pod->pidfd = -1;
	snprintf(rel, sizeof(rel), "vhpc/%s/pod", pod->job);
	if (na_cgroup_remove(rel, true, &removed, &e) < 0)
		log_warn("job %s pod: %s", pod->job, e.msg);
	na_cgroup_rmdir_job(pod->job);
}
