/*
 * Checkpoints of container guests (issue 36): pausing through runc (the
 * cgroup freezer, which every process of the guest obeys, whatever it
 * does with signals), and whether CRIU, which `runc checkpoint` drives,
 * can take the guests at all on this host.
 *
 * Why the check asks CRIU itself: CRIU reads the kernel's features once
 * per run (its "kerndat"), and an older CRIU on a newer kernel fails there
 * for every process, before it looks at any guest: Debian 12's CRIU 3.17
 * on a kernel 6.13 or later cannot parse the vDSO's split [vvar] and
 * [vvar_vclock] mappings.  `criu check` runs exactly that, so its first
 * error is the reason to give, on any host, before anything is paused.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/proc.h"
#include "nodeagent/drivers/container/container.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define RUNC_PAUSE_MS 20000
#define CRIU_CHECK_MS 20000

static const char *criu_path(void)
{
	static const char *const places[] = { "/usr/sbin/criu", "/usr/bin/criu", "/sbin/criu" };
	const char *env = getenv("VHPC_CRIU");

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++)
		if (access(places[i], X_OK) == 0)
			return places[i];
	return NULL;
}

/* The first "Error (...): " line of CRIU's output, without its source
 * position: what it could not do, in its words. */
static void first_error(const char *text, char *out, size_t len)
{
	const char *p = strstr(text, "Error (");

	if (!p) {
		snprintf(out, len, "%.*s", (int)strcspn(text, "\n"), text);
		return;
	}
	p = strstr(p, "): ") ? strstr(p, "): ") + 3 : p;
	snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
}

/* CRIU's verdict on this host, once per process: the kernel does not
 * change under a running agent, and `criu check` takes a while. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static char probe_why[512];

static void probe(void)
{
	const char *criu = criu_path();
	const char *argv[] = { criu, "check", NULL };
	char *out = NULL, *ver = NULL, why[400];
	const char *vargv[] = { criu, "--version", NULL };
	struct utsname u;
	struct verr e;
	int rc;

	if (uname(&u) < 0)
		snprintf(u.release, sizeof(u.release), "?");
	if (!criu) {
		snprintf(probe_why, sizeof(probe_why), "CRIU is not installed (the Debian package criu), which "
			 "runc checkpoint and restore need");
		return;
	}
	/* CRIU writes its errors to stderr, which run_capture quotes in e. */
	rc = run_capture(argv, &out, NULL, 1 << 16, CRIU_CHECK_MS, &e);
	free(out);
	if (rc == 0)
		return;
	first_error(rc < 0 ? e.msg : strstr(e.msg, "Error (") ? strstr(e.msg, "Error (") : e.msg, why, sizeof(why));
	if (run_capture(vargv, &ver, NULL, 4096, CRIU_CHECK_MS, &e) == 0 && ver)
		ver[strcspn(ver, "\n")] = 0;
	snprintf(probe_why, sizeof(probe_why), "CRIU (%s, %s) cannot checkpoint any process on this kernel (%s): %s",
		 criu, ver && *ver ? ver : "version unknown", u.release, why);
	free(ver);
}

int na_ctr_ckpt_probe(struct verr *err)
{
	pthread_once(&probe_once, probe);
	return probe_why[0] ? verr_set(err, "%s", probe_why) : 0;
}

/* runc's state of the container, "paused", "running", ...: the truth
 * when a pause or resume fails because it was already done. */
static int runc_status(const char *id, char *out, size_t len, struct verr *err)
{
	const char *runc = na_runc_path();
	char root[PATH_MAX], *text = NULL, *p;
	const char *argv[] = { runc, "--root", na_runc_root(root, sizeof(root)), "state", id, NULL };

	if (!runc)
		return verr_set(err, "runc not found");
	if (run_capture(argv, &text, NULL, 1 << 16, RUNC_PAUSE_MS, err) != 0) {
		free(text);
		return -1;
	}
	p = text ? strstr(text, "\"status\": \"") : NULL;
	if (!p) {
		free(text);
		return verr_set(err, "runc state %s: no status in its answer", id);
	}
	p += strlen("\"status\": \"");
	snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
	free(text);
	return 0;
}

/* runc pause / resume; idempotent: already in that state is success. */
static int freeze(struct na_ctr *c, bool pause, struct verr *err)
{
	const char *id = na_ctr_id(c);
	const char *args[] = { pause ? "pause" : "resume", id, NULL };
	char st[32];
	struct verr e;

	if (na_runc(args, -1, NULL, RUNC_PAUSE_MS, err) == 0)
		return 0;
	if (runc_status(id, st, sizeof(st), &e) == 0 && !strcmp(st, pause ? "paused" : "running"))
		return 0;
	return -1;
}

int na_ctr_pause(struct na_ctr *c, struct verr *err)
{
	return freeze(c, true, err);
}

int na_ctr_resume(struct na_ctr *c, struct verr *err)
{
	return freeze(c, false, err);
}

bool na_ctr_paused(struct na_ctr *c)
{
	char st[32];
	struct verr e;

	return runc_status(na_ctr_id(c), st, sizeof(st), &e) == 0 && !strcmp(st, "paused");
}

/* The inode of namespace kind `ns` of pid, or of the user namespace that
 * owns it (owner): 0 with *ino set, or -1. */
static int ns_ino(pid_t pid, const char *ns, bool owner, ino_t *ino, struct verr *err)
{
	char path[64];
	struct stat st;
	int fd, ufd = -1;

	/* A namespace file is a magic link (O_NOFOLLOW would refuse it with
	 * ELOOP); what it names is the kernel's, not anything a user made. */
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "%s", path);
	if (owner) {
		ufd = ioctl(fd, NS_GET_USERNS);
		if (ufd < 0) {
			verr_errno(err, "%s: its owning user namespace", path);
			close(fd);
			return -1;
		}
	}
	if (fstat(ufd >= 0 ? ufd : fd, &st) < 0) {
		verr_errno(err, "%s", path);
		st.st_ino = 0;
	}
	if (ufd >= 0)
		close(ufd);
	close(fd);
	*ino = st.st_ino;
	return st.st_ino ? 0 : -1;
}

int na_ctr_ckpt_netns(struct na_ctr *c, struct verr *err)
{
	pid_t pid = na_ctr_pid(c);
	ino_t user = 0, owner = 0;

	if (pid <= 0)
		return verr_set(err, "guest %s is not running", na_ctr_id(c));
	if (ns_ino(pid, "user", false, &user, err) < 0 || ns_ino(pid, "net", true, &owner, err) < 0)
		return verr_wrap(err, "guest %s", na_ctr_id(c));
	/* The pid was read before the namespaces: still the guest's init
	 * (not a recycled number) if it has not exited since. */
	if (na_ctr_pid(c) != pid)
		return verr_set(err, "guest %s stopped while its namespaces were read", na_ctr_id(c));
	if (user == owner)
		return 0;
	return verr_set(err, "guest %s's network namespace is one the node agent made before the guest (as it "
			"does for a guest with a fabric device, which it puts there first), not one of the guest's "
			"own user namespace; CRIU dumps a process in a user namespace only when each of its "
			"namespaces belongs to that one (its check_user_ns: \"One or more namespaces doesn't "
			"belong to the target user namespace\"), so runc checkpoint would fail on it", na_ctr_id(c));
}

/* Whether mount id mnt is one of pid's mounts (its mountinfo's first
 * field): 1, 0, or -1. */
static int has_mount(pid_t pid, long mnt, struct verr *err)
{
	char path[64], *buf, *p;
	size_t len;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	if (read_file(path, &buf, &len, 1 << 22, err) < 0)
		return -1;
	for (p = buf; p && *p && !found; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		found = strtol(p, NULL, 10) == mnt;
	free(buf);
	return found;
}

int na_ctr_ckpt_stdio(struct na_ctr *c, struct verr *err)
{
	pid_t pid = na_ctr_pid(c);

	if (pid <= 0)
		return verr_set(err, "guest %s is not running", na_ctr_id(c));
	for (int fd = 0; fd <= 2; fd++) {
		char path[64], target[256] = "", *info, *m;
		struct stat st;
		size_t len;
		long mnt;
		ssize_t n;
		int in;

		/* The kernel's view of the guest's own descriptors: a magic
		 * link, stat'ed and read, never opened. */
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if ((n = readlink(path, target, sizeof(target) - 1)) > 0)
			target[n] = 0;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
		if (read_file(path, &info, &len, 4096, err) < 0)
			return verr_wrap(err, "guest %s", na_ctr_id(c));
		m = strstr(info, "mnt_id:");
		mnt = m ? strtol(m + 7, NULL, 10) : -1;
		free(info);
		if ((in = has_mount(pid, mnt, err)) < 0)
			return verr_wrap(err, "guest %s", na_ctr_id(c));
		if (!in)
			return verr_set(err, "guest %s's %s (fd %d) is a file of the host (%s) outside the guest's "
					"mounts, which CRIU cannot save (\"Can't lookup mount=%ld for fd=%d\"); "
					"its guestd did not open its own output in the guest (--stdio), as guests "
					"started by this vhpcd do", na_ctr_id(c),
					fd == 2 ? "stderr" : fd == 1 ? "stdout" : "stdin", fd, target, mnt, fd);
	}
	return 0;
}
