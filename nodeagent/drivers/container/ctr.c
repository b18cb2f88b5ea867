/*
 * The container driver: one runc container per guest, its bundle in
 * <job dir>/g<index>/ (config.json, and rootfs: a read-only bind of the
 * image's rootfs, so not even runc's set-up can write into a shared image).
 */
#include "nodeagent/job.h"
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/net/net.h"
#include "nodeagent/place/place.h"
#include "nodeagent/jobdir/jobdir.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNC_START_MS 60000
#define RUNC_DELETE_MS 20000
/* CRIU writes a guest's memory and reads it back: seconds per GiB. */
#define RUNC_CRIU_MS 300000

struct na_ctr {
	char job[16];
	int index;
	char id[32];
	char bundle[PATH_MAX];
	pid_t pid;
	int pidfd;
};

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int fd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

/* 0 exited, 1 still running after timeout_ms. */
static int wait_exit(int pidfd, int timeout_ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		uint64_t now = now_ns();
		int r;

		r = poll(&p, 1, now >= end ? 0 : (int)((end - now) / 1000000) + 1);
		if (r > 0)
			return 0;
		if (r == 0 || (r < 0 && errno != EINTR) || now >= end)
			return r > 0 ? 0 : 1;
	}
}

static int runc_delete(const char *id, struct verr *err)
{
	const char *args[] = { "delete", "-f", id, NULL };

	return na_runc(args, -1, NULL, RUNC_DELETE_MS, err);
}

static int read_pid(const char *path, pid_t *pid, struct verr *err)
{
	char *buf;
	size_t len;
	long long v;

	if (read_file(path, &buf, &len, 64, err) < 0)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	if (parse_ll(buf, 1, 1 << 30, &v) < 0) {
		verr_set(err, "%s: not a pid: '%.20s'", path, buf);
		free(buf);
		return -1;
	}
	free(buf);
	*pid = (pid_t)v;
	return 0;
}

/* The kernel's view of the guest's cpuset must be what placement gave it:
 * runc ignoring a setting (as crun does on these hosts) must not pass. */
static int verify_cpuset(const struct na_ctr_spec *s, struct verr *err)
{
	char **mnts, want[2048], *got;
	int n, ids[VHPC_MAX_VCPUS], k = 0, checked = 0, rc = 0;
	size_t len;

	for (int i = 0; i < s->place->ncpus; i++) {
		bool dup = false;

		for (int j = 0; j < k; j++)
			dup |= ids[j] == s->place->cpus[i];
		if (!dup)
			ids[k++] = s->place->cpus[i];
	}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	cpulist_format(ids, k, want, sizeof(want));
	if (na_cgroup_mounts(&mnts, &n, err) < 0)
		return -1;
	for (int i = 0; i < n && rc == 0; i++) {
		char path[PATH_MAX];
		struct verr e;

		snprintf(path, sizeof(path), "%s/vhpc/%s/%d/cpuset.cpus", mnts[i], s->job, s->index);
		if (read_file(path, &got, &len, 4096, &e) < 0)
			continue;
		got[strcspn(got, "\n")] = 0;
		checked++;
		if (strcmp(got, want))
			rc = verr_set(err, "%s is '%s', placement gave '%s'", path, got, want);
		free(got);
	}
	na_cgroup_mounts_free(mnts, n);
	if (rc == 0 && !checked)
		rc = verr_set(err, "no cpuset.cpus for vhpc/%s/%d in any cgroup hierarchy: the runtime did not apply the placement",
			      s->job, s->index);
	return rc;
}

static void unmount_rootfs(const char *bundle)
{
	char mp[PATH_MAX];

	snprintf(mp, sizeof(mp), "%s/rootfs", bundle);
	if (umount2(mp, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("unmount %s: %s", mp, strerror(errno));
}

static int mount_sysfs(void *arg, struct verr *err)
{
	const char *dir = arg;

	if (mount("sysfs", dir, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return verr_errno(err, "mount sysfs on %s", dir);
	return 0;
}

int na_ctr_sysfs(const char *netns, const char *dir, struct verr *err)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return verr_errno(err, "mkdir %s", dir);
	return na_netns_run(netns, mount_sysfs, (void *)dir, err);
}

/* CRIU's first error in work/log, added to err: runc itself says only
 * that CRIU failed and where its log is. */
static void criu_error(const char *work, const char *log, struct verr *err)
{
	char path[PATH_MAX], *text = NULL, *p;
	size_t len;
	struct verr e;

	snprintf(path, sizeof(path), "%s/%s", work, log);
	if (read_file(path, &text, &len, 1 << 24, &e) < 0)
		return;
	if ((p = strstr(text, "Error ("))) {
		/* What CRIU did before it failed, for the node's log. */
		const char *from = p, *why = strstr(p, "): ");
		char old[sizeof(err->msg)];

		for (int lines = 0; from > text && lines < 30; from--)
			lines += from[-1] == '\n';
		log_warn("CRIU's log %s, up to its first error:\n%.*s", path, (int)(p - from + strcspn(p, "\n")), from);
		why = why ? why + 3 : p;
		memcpy(old, err->msg, sizeof(old));
		verr_set(err, "CRIU: %.*s (%s: %s)", (int)strcspn(why, "\n"), why, path, old);
	}
	free(text);
}

int na_ctr_checkpoint(struct na_ctr *c, int dirfd, const char *work, struct verr *err)
{
	char img[64];
	const char *args[] = { "checkpoint", "--leave-running", "--tcp-established", "--image-path", img,
			       "--work-path", work, na_ctr_id(c), NULL };

	snprintf(img, sizeof(img), "/proc/%d/fd/%d", (int)getpid(), dirfd);
	if (na_runc(args, -1, NULL, RUNC_CRIU_MS, err) < 0) {
		criu_error(work, "dump.log", err);
		return verr_wrap(err, "guest %s: runc checkpoint", na_ctr_id(c));
	}
	return 0;
}

/* Between create and start: the guest's init waits in runc's hands,
 * nothing of the guest's own runs yet, so its netns is still empty. */
static int give_netns(const struct na_ctr_spec *s, const struct na_ctr *c, struct verr *err)
{
	char path[64];
	struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
	int fd, rc;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)c->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "guest %s: %s", c->id, path);
	/* Opened while the pidfd's process lived: its namespace, not that of
	 * a process that took over a recycled pid. */
	if (poll(&p, 1, 0) != 0) {
		close(fd);
		return verr_set(err, "guest %s: its init (pid %d) exited before it started", c->id, (int)c->pid);
	}
	rc = s->own_netns(s->own_netns_arg, fd, err);
	close(fd);
	return rc < 0 ? verr_wrap(err, "guest %s: its network", c->id) : 0;
}

int na_ctr_start(const struct na_ctr_spec *s, struct na_ctr **out, struct verr *err)
{
	char jobdir[PATH_MAX], mp[PATH_MAX + 16], cfg[PATH_MAX + 16], pidf[PATH_MAX + 16], rlog[PATH_MAX + 16];
	struct na_ctr *c;
	struct json_object *conf = NULL;
	struct na_ctr_nethook *hook = NULL;
	const char *text;
	int logfd = -1, rc;
	bool mounted = false, started = false;

	*out = NULL;
	if (na_job_check(s->job, err) < 0)
		return -1;
	if (s->index < 0 || s->index >= VHPC_MAX_GUESTS)
		return verr_set(err, "guest index %d; 0..%d allowed", s->index, VHPC_MAX_GUESTS - 1);
	if (s->restore && !s->criu_work)
		return verr_set(err, "guest %s-%d: a restore needs a folder for CRIU", s->job, s->index);
	na_job_path(s->job, jobdir, sizeof(jobdir));
	if (!na_jobdir_alive(s->job))
		return verr_set(err, "guest %s-%d: job dir %s is not held by a live owner (na_jobdir_create first)",
				s->job, s->index, jobdir);
	c = calloc(1, sizeof(*c));
	if (!c)
		return verr_set(err, "out of memory");
	c->pidfd = -1;
	snprintf(c->job, sizeof(c->job), "%s", s->job);
	c->index = s->index;
	snprintf(c->id, sizeof(c->id), "%s-%d", s->job, s->index);
	snprintf(c->bundle, sizeof(c->bundle), "%s/g%d", jobdir, s->index);
	snprintf(mp, sizeof(mp), "%s/rootfs", c->bundle);
	snprintf(cfg, sizeof(cfg), "%s/config.json", c->bundle);
	snprintf(pidf, sizeof(pidf), "%s/pid", c->bundle);
	snprintf(rlog, sizeof(rlog), "%s/runc.log", c->bundle);

	na_ctr_memlock_room(s->mem_limit);
	if (na_oci_config(s, mp, &conf, err) < 0)
		goto fail_free;
	/* A restored guest gets its network from runc's hook (nethook.c). */
	if (s->restore && s->own_netns && na_ctr_nethook_begin(s, s->criu_work, conf, &hook, err) < 0)
		goto fail_free;
	/* Passable, not readable: the guest's runtime reaches its rootfs
	 * through here from inside the guest's user namespace (the job dir
	 * above already keeps other users out). */
	if (mkdir(c->bundle, 0711) < 0) {
		verr_errno(err, "guest %s: %s", c->id, c->bundle);
		goto fail_free;
	}
	if (mkdir(mp, 0755) < 0) {
		verr_errno(err, "guest %s: %s", c->id, mp);
		goto fail;
	}
	if (mount(s->rootfs, mp, NULL, MS_BIND | MS_REC, NULL) < 0) {
		verr_errno(err, "guest %s: bind %s on %s", c->id, s->rootfs, mp);
		goto fail;
	}
	mounted = true;
	if (mount(NULL, mp, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
		verr_errno(err, "guest %s: make %s read-only", c->id, mp);
		goto fail;
	}
	text = json_object_to_json_string_ext(conf, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (write_file_atomic(cfg, text, strlen(text), 0600, err) < 0)
		goto fail;
	logfd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		verr_errno(err, "guest %s: log %s", c->id, s->log_path);
		goto fail;
	}
	if (s->restore) {
		char img[64];
		const char *args[] = { "restore", "--detach", "--tcp-established", "--bundle", c->bundle, "--pid-file",
				       pidf, "--image-path", img, "--work-path", s->criu_work, c->id, NULL };
		const char *pause[] = { "pause", c->id, NULL };

		/* The folder by its descriptor, through our own /proc entry:
		 * runc opens it as a path. */
		snprintf(img, sizeof(img), "/proc/%d/fd/%d", (int)getpid(), s->restore_fd);
		started = true;
		if (na_runc(args, logfd, rlog, RUNC_CRIU_MS, err) < 0) {
			criu_error(s->criu_work, "restore.log", err);
			goto fail;
		}
		rc = na_ctr_nethook_end(hook, err);
		hook = NULL;
		if (rc < 0) {
			verr_wrap(err, "guest %s: its network", c->id);
			goto fail;
		}
		/* It runs from CRIU's last step; its peers on other nodes may
		 * not be back yet, so what it sends them meanwhile finds no one
		 * and is lost, as on a wire, and TCP sends it again. */
		if (na_runc(pause, logfd, rlog, RUNC_START_MS, err) < 0)
			goto fail;
	} else {
		const char *args[] = { "create", "--bundle", c->bundle, "--pid-file", pidf, c->id, NULL };

		/* runc creates its state before anything else, so from here on a
		 * crash leaves something cleanup finds by the container's name. */
		started = true;
		if (na_runc(args, logfd, rlog, RUNC_START_MS, err) < 0)
			goto fail;
	}
	if (read_pid(pidf, &c->pid, err) < 0)
		goto fail;
	c->pidfd = pidfd_open_(c->pid);
	if (c->pidfd < 0) {
		verr_errno(err, "guest %s: its init (pid %d) is already gone; see %s", c->id, (int)c->pid, s->log_path);
		goto fail;
	}
	if (s->own_netns && !s->restore && give_netns(s, c, err) < 0)
		goto fail;
	if (!s->restore) {
		const char *args[] = { "start", c->id, NULL };

		if (na_runc(args, logfd, rlog, RUNC_START_MS, err) < 0)
			goto fail;
	}
	if (verify_cpuset(s, err) < 0)
		goto fail;
	close(logfd);
	json_object_put(conf);
	*out = c;
	return 0;
fail:
	{
		char root[PATH_MAX], state[PATH_MAX + 40], rel[64];
		struct verr e;
		int removed = 0;

		/* runc may have failed before it wrote any state */
		snprintf(state, sizeof(state), "%s/%s", na_runc_root(root, sizeof(root)), c->id);
		if (started && access(state, F_OK) == 0 && runc_delete(c->id, &e) < 0)
			log_warn("guest %s: %s", c->id, e.msg);
		snprintf(rel, sizeof(rel), "vhpc/%s/%d", c->job, c->index);
		if (started && na_cgroup_remove(rel, true, &removed, &e) < 0)
			log_warn("guest %s: %s", c->id, e.msg);
		if (started)
			na_cgroup_rmdir_job(c->job);
		if (mounted)
			unmount_rootfs(c->bundle);
		if (rm_rf(c->bundle, &e) < 0)
			log_warn("guest %s: %s", c->id, e.msg);
	}
fail_free:
	na_ctr_nethook_end(hook, NULL);
	if (logfd >= 0)
		close(logfd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	json_object_put(conf);
	free(c);
	return verr_wrap(err, "%s guest %s-%d", s->restore ? "restore" : "start", s->job, s->index);
}

int na_ctr_adopt(const char *job, int index, struct na_ctr **out, struct verr *err)
{
	char jobdir[PATH_MAX], pidf[PATH_MAX + 16], cg[PATH_MAX], want[64], *buf;
	struct na_ctr *c;
	size_t len;

	*out = NULL;
	if (na_job_check(job, err) < 0)
		return -1;
	if (index < 0 || index >= VHPC_MAX_GUESTS)
		return verr_set(err, "guest index %d; 0..%d allowed", index, VHPC_MAX_GUESTS - 1);
	if (!na_jobdir_alive(job))
		return verr_set(err, "guest %s-%d: hold the job dir first (na_jobdir_adopt)", job, index);
	c = calloc(1, sizeof(*c));
	if (!c)
		return verr_set(err, "out of memory");
	c->pidfd = -1;
	snprintf(c->job, sizeof(c->job), "%s", job);
	c->index = index;
	snprintf(c->id, sizeof(c->id), "%s-%d", job, index);
	snprintf(c->bundle, sizeof(c->bundle), "%s/g%d", na_job_path(job, jobdir, sizeof(jobdir)), index);
	snprintf(pidf, sizeof(pidf), "%s/pid", c->bundle);
	if (read_pid(pidf, &c->pid, err) < 0)
		goto fail;
	c->pidfd = pidfd_open_(c->pid);
	/* The pid must still be this guest's init, not a recycled number:
	 * its cgroup says whose it is. */
	snprintf(cg, sizeof(cg), "/proc/%d/cgroup", (int)c->pid);
	snprintf(want, sizeof(want), "/vhpc/%s/%d\n", job, index);
	if (c->pidfd < 0 || read_file(cg, &buf, &len, 1 << 16, err) < 0) {
		verr_set(err, "guest %s: its init (pid %d) is gone", c->id, (int)c->pid);
		goto fail;
	}
	if (!strstr(buf, want)) {
		free(buf);
		verr_set(err, "guest %s: pid %d is no longer its init", c->id, (int)c->pid);
		goto fail;
	}
	free(buf);
	*out = c;
	return 0;
fail:
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c);
	return -1;
}

const char *na_ctr_id(const struct na_ctr *c)
{
	return c->id;
}

pid_t na_ctr_pid(const struct na_ctr *c)
{
	struct pollfd p = { .fd = c->pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 0 ? c->pid : -1;
}

bool na_ctr_running(struct na_ctr *c)
{
	return na_ctr_pid(c) > 0;
}

/* After the processes are gone: runc state, cgroups, rootfs, bundle. */
static int ctr_remove(struct na_ctr *c, struct verr *err)
{
	char rel[64];
	struct verr e;
	int rc = 0, removed = 0;

	/* Reap it if this process is its subreaper; anyone else reaps it. */
	waitpid(c->pid, NULL, WNOHANG);
	if (runc_delete(c->id, &e) < 0)
		rc = verr_set(err, "guest %s: %s", c->id, e.msg);
	snprintf(rel, sizeof(rel), "vhpc/%s/%d", c->job, c->index);
	if (na_cgroup_remove(rel, true, &removed, &e) < 0 && rc == 0)
		rc = verr_set(err, "guest %s: %s", c->id, e.msg);
	na_cgroup_rmdir_job(c->job);
	unmount_rootfs(c->bundle);
	if (rm_rf(c->bundle, &e) < 0 && rc == 0)
		rc = verr_set(err, "guest %s: %s", c->id, e.msg);
	close(c->pidfd);
	free(c);
	return rc;
}

int na_ctr_stop_all(struct na_ctr **cs, int n, int grace_ms, struct verr *err)
{
	uint64_t end = now_ns() + (uint64_t)(grace_ms > 0 ? grace_ms : 0) * 1000000ull;
	int rc = 0;

	/* Everyone gets SIGTERM at once, so a job stops in one grace period,
	 * not one per guest. */
	for (int i = 0; i < n; i++)
		if (cs[i] && grace_ms > 0 && na_ctr_running(cs[i]))
			pidfd_signal(cs[i]->pidfd, SIGTERM);
	for (int i = 0; i < n; i++) {
		uint64_t now = now_ns();

		if (!cs[i] || !na_ctr_running(cs[i]))
			continue;
		if (grace_ms > 0 && wait_exit(cs[i]->pidfd, now < end ? (int)((end - now) / 1000000) : 0) == 0)
			continue;
		if (grace_ms > 0)
			log_info("guest %s: still running %d ms after SIGTERM; killing it", cs[i]->id, grace_ms);
		pidfd_signal(cs[i]->pidfd, SIGKILL);
	}
	for (int i = 0; i < n; i++) {
		struct verr e;

		if (!cs[i])
			continue;
		if (na_ctr_running(cs[i]) && wait_exit(cs[i]->pidfd, 10000) != 0 && rc == 0)
			rc = verr_set(err, "guest %s: init (pid %d) survives SIGKILL", cs[i]->id, (int)cs[i]->pid);
		if (ctr_remove(cs[i], &e) < 0 && rc == 0) {
			*err = e;
			rc = -1;
		}
		cs[i] = NULL;
	}
	return rc;
}

int na_ctr_stop(struct na_ctr *c, int grace_ms, struct verr *err)
{
	return c ? na_ctr_stop_all(&c, 1, grace_ms, err) : 0;
}
