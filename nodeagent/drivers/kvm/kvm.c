/*
 * The kvm driver's lifecycle: one vhpc-hv child per guest.  Start makes the
 * tap and cgroups, execs vhpc-hv with its own session (a Ctrl-C on the
 * terminal reaches the agent, which then stops the guests in order, not
 * vhpc-hv directly), and checks through vhpc-hv's control socket that every
 * vCPU thread is pinned where placement put it.  Stop asks politely
 * (SIGTERM: HV_EXIT_KILLED), kills after a grace period, and removes the
 * guest's cgroups; whatever a dead agent left is found by name by the sweep.
 */
#include "nodeagent/job.h"
#include "lib/argv.h"
#include "lib/chan.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/gexec.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "kvm_int.h"
#include "nodeagent/drivers/kvm/kvm.h"
#include "nodeagent/jobdir/jobdir.h"
#include "hv/hv.h"

#include <errno.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <fcntl.h>
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

#define MAX_CG 8

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Through the pidfd where there is one: the pid may name another process
 * once vhpc-hv has gone and nobody reaped it yet (an adopted one). */
static void send_sig(struct na_kvm *k, int sig)
{
	if (k->pidfd >= 0 && syscall(SYS_pidfd_send_signal, k->pidfd, sig, NULL, 0) == 0)
		return;
	if (!k->adopted)
		kill(k->pid, sig);
}

/* Reaps k when it has exited (or within timeout_ms). */
static bool reap(struct na_kvm *k, int timeout_ms)
{
	int st;
	pid_t r;

	if (k->exited)
		return true;
	if (k->adopted) {
		/* Another agent's child: no status to reap, only its end. */
		struct pollfd p = { .fd = k->pidfd, .events = POLLIN };
		int pr;

		while ((pr = poll(&p, 1, timeout_ms > 0 ? timeout_ms : 0)) < 0 && errno == EINTR)
			;
		if (pr == 1) {
			k->exited = true;
			k->wstatus = -1;
		}
		return k->exited;
	}
	if (timeout_ms > 0 && k->pidfd >= 0) {
		struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

		while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
			;
	}
	r = waitpid(k->pid, &st, WNOHANG);
	if (r == k->pid || (r < 0 && errno == ECHILD)) {
		k->exited = true;
		k->wstatus = r == k->pid ? st : -1;
	}
	return k->exited;
}

#define PANIC_MARK "Kernel panic - not syncing"
/* The kernel's last word before a reset; in the lab the reset then hangs. */
#define RESTART_MARK "reboot: Restarting system"

/* Searches the console output written since the last call for the guest
 * kernel's panic line.  A panicking guest should reset (panic=-1), but
 * under the nested lab it was seen to hang after the panic instead, and a
 * hung guest would hold the job until its time limit. */
static bool saw_panic(struct na_kvm *k)
{
	char buf[65536 + 1], *p;
	ssize_t n;
	int fd;

	if (k->panic[0])
		return true;
	/* O_NONBLOCK: the folder is vhpc-hv's, and a FIFO there must not
	 * hold the agent. */
	fd = open(k->serial, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	/* A mark split across two reads is found from the overlap. */
	n = pread(fd, buf, sizeof(buf) - 1, k->serial_seen);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (ssize_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	p = strstr(buf, PANIC_MARK);
	if (!p)
		p = strstr(buf, RESTART_MARK);
	if (p) {
		char *end = strpbrk(p, "\r\n");

		if (!end && n == (ssize_t)sizeof(buf) - 1)
			end = buf + n;
		if (end) {
			snprintf(k->panic, sizeof(k->panic), "%.*s", (int)(end - p), p);
			return true;
		}
		/* The rest of the line is not written yet: read it next time. */
		k->serial_seen += p - buf;
		return false;
	}
	k->serial_seen += n > (ssize_t)sizeof(PANIC_MARK) ? n - (ssize_t)sizeof(PANIC_MARK) : 0;
	return false;
}

bool na_kvm_running(struct na_kvm *k, char *why, size_t len)
{
	if (!reap(k, 0)) {
		if (!saw_panic(k))
			return true;
		/* Give a guest that resets after its panic a moment, then stop it. */
		if (!reap(k, 2000)) {
			send_sig(k, SIGKILL);
			reap(k, 10000);
		}
	}
	if (why) {
		if (!k->panic[0])
			saw_panic(k);
		if (k->panic[0] && strstr(k->panic, RESTART_MARK) == k->panic)
			snprintf(why, len, "the guest rebooted (its console: %s)", k->panic);
		else if (k->panic[0])
			snprintf(why, len, "the guest's kernel panicked (%s); its console is %s", k->panic, k->serial);
		else if (k->wstatus == -1)
			snprintf(why, len, "vhpc-hv (pid %d) has exited", (int)k->pid);
		else if (WIFEXITED(k->wstatus) && WEXITSTATUS(k->wstatus) == HV_EXIT_RESET)
			snprintf(why, len, "the guest rebooted (vhpc-hv exited with status %d: a guest reset ends it)",
				 HV_EXIT_RESET);
		else
			na_kvm_exit_words(k->wstatus, why, len);
	}
	return false;
}

pid_t na_kvm_pid(const struct na_kvm *k)
{
	return k->exited ? -1 : k->pid;
}

const char *na_kvm_serial(const struct na_kvm *k)
{
	return k->serial;
}

const char *na_kvm_hvlog(const struct na_kvm *k)
{
	return k->hvlog;
}

const char *na_kvm_vsock(const struct na_kvm *k, unsigned *port)
{
	*port = k->port;
	return k->vsock;
}

int na_kvm_connect(struct na_kvm *k, struct chan *c, const uint8_t key[CHAN_KEY_LEN],
		   int timeout_ms, struct verr *err)
{
	return gexec_connect_vsock(c, k->vsock, k->port, key, timeout_ms, err);
}

/* The last bytes of a log, for an error message. */
static void tail_of(const char *path, char *buf, size_t len)
{
	char *text = NULL;
	size_t n;
	struct verr e;

	buf[0] = 0;
	if (read_file(path, &text, &n, NA_KVM_LOG_MAX, &e) < 0)
		return;
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		text[--n] = 0;
	snprintf(buf, len, "%s", n > len - 1 ? text + n - (len - 1) : text);
	free(text);
}

_Static_assert(NA_KVM_MAX_FS == 8, "child() passes fs[0..7]");

static void child(char **argv, const struct na_kvm_fds *fds, const int *cg, int ncg, int logfd,
		  const struct kvm_jail *jail)
{
	const int pass[] = { fds->tap, fds->kernel, fds->initrd, fds->root, fds->config, fds->scratch, fds->vmshm, fds->restore,
			     fds->fs[0], fds->fs[1], fds->fs[2], fds->fs[3], fds->fs[4], fds->fs[5], fds->fs[6], fds->fs[7],
			     fds->vhost };
	sigset_t none;
	char why[PATH_MAX + 128];
	int null = open("/dev/null", O_RDONLY);

	setsid();
	for (int i = 0; i < ncg; i++)
		if (write(cg[i], "0", 1) != 1) {
			dprintf(logfd, "vhpc: cannot join the guest's cgroup: %s\n", strerror(errno));
			_exit(126);
		}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(126);
	/* Whatever else the agent holds (other jobs' sockets, its state
	 * store) must not reach vhpc-hv; only the tap and the guest's files
	 * are passed. */
	if (syscall(SYS_close_range, 3, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
		_exit(126);
	for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
		if (pass[i] >= 0 && fcntl(pass[i], F_SETFD, 0) < 0)
			_exit(126);
	for (int i = 0; i < NA_KVM_MAX_PCI; i++)
		for (const int *p = &fds->pci[i].container; p <= &fds->pci[i].device; p++)
			if (*p >= 0 && fcntl(*p, F_SETFD, 0) < 0)
				_exit(126);
	if (kvm_jail_enter(jail, why, sizeof(why)) < 0) {
		dprintf(2, "vhpc: cannot confine vhpc-hv: %s\n", why);
		_exit(126);
	}
	execv(argv[0], argv);
	dprintf(2, "vhpc: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* vhpc-hv never runs as root: a root job's guests get nobody. */
static void hv_ids(const struct na_kvm_spec *s, uid_t *uid, gid_t *gid)
{
	struct passwd pw, *r = NULL;
	char buf[1024];

	*uid = s->uid;
	*gid = s->gid;
	if (s->uid != 0)
		return;
	*uid = 65534;
	*gid = 65534;
	if (getpwnam_r("nobody", &pw, buf, sizeof(buf), &r) == 0 && r && r->pw_uid != 0) {
		*uid = r->pw_uid;
		*gid = r->pw_gid;
	}
}

/* The guest's files, opened here as root and passed to the confined
 * vhpc-hv; read-only except its scratch disk and the vmshm region. */
static int open_files(const struct na_kvm_spec *s, struct na_kvm_fds *f, struct verr *err)
{
	struct {
		int *fd;
		const char *path, *what;
		int flags;      /* -1: a part of the image */
	} t[] = {
		{ &f->kernel, kvm_kernel_path(s->img), "kernel", -1 },
		{ &f->initrd, s->img->initrd, "initramfs", -1 },
		{ &f->root, s->img->disk, "root disk", -1 },
		{ &f->config, s->config_disk, "config disk", O_RDONLY },
		{ &f->scratch, s->scratch_disk, "scratch disk", O_RDWR },
		{ &f->vmshm, s->vmshm, "vmshm region", O_RDWR },
		{ &f->restore, s->restore, "snapshot", O_RDONLY },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (!t[i].path)
			continue;
		/* The image's parts are a user's content: regular files of its
		 * folder, reached without a symlink (not a host disk a link in
		 * kvm/ would point at). */
		if (t[i].flags < 0) {
			if ((*t[i].fd = image_open_part(s->img, t[i].path, err)) < 0)
				return verr_wrap(err, "%s", t[i].what);
			continue;
		}
		*t[i].fd = open(t[i].path, t[i].flags | O_CLOEXEC | O_NOCTTY);
		if (*t[i].fd < 0)
			return verr_errno(err, "%s %s", t[i].what, t[i].path);
	}
	return 0;
}

static void close_files(struct na_kvm_fds *f)
{
	int *all[] = { &f->kernel, &f->initrd, &f->root, &f->config, &f->scratch, &f->vmshm, &f->restore };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
	for (int i = 0; i < NA_KVM_MAX_FS; i++)
		if (f->fs[i] >= 0) {
			close(f->fs[i]);
			f->fs[i] = -1;
		}
	if (f->vhost >= 0) {
		close(f->vhost);
		f->vhost = -1;
	}
	for (int i = 0; i < NA_KVM_MAX_PCI; i++)
		kvm_vfio_close(&f->pci[i]);
}

/* The guest's PCI functions (on vfio-pci already): a container and group
 * each, and the device, for vhpc-hv. */
static int open_pci(const struct na_kvm_spec *s, struct na_kvm_fds *f, struct verr *err)
{
	double t0 = now_s();

	for (int i = 0; i < s->npci && i < NA_KVM_MAX_PCI; i++)
		if (kvm_vfio_open(s->pci[i], &f->pci[i], err) < 0)
			return -1;
	if (s->npci)
		log_info("guest %s: VFIO container, group and device of %d PCI function%s opened in %.1f ms", s->name,
			 s->npci, s->npci > 1 ? "s" : "", (now_s() - t0) * 1000);
	return 0;
}

/* The guest's virtiofsd, once its cgroup was killed (or vhpc-hv, their
 * only client, is gone and they follow): reaped, so none stays a zombie. */
static void reap_fs(struct na_kvm *k)
{
	for (int i = 0; i < NA_KVM_MAX_FS; i++) {
		if (k->fs_pid[i] <= 0)
			continue;
		kill(k->fs_pid[i], SIGKILL);
		while (waitpid(k->fs_pid[i], NULL, 0) < 0 && errno == EINTR)
			;
		k->fs_pid[i] = 0;
	}
}

/* Until vhpc-hv listens on both sockets, or exits. */
static int wait_up(struct na_kvm *k, int timeout_ms, struct verr *err)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		struct stat a, b;
		char why[160], tail[1200];

		/* lstat: hv/ is the user's, and a symlink there is not vhpc-hv's
		 * socket (kvm_control would refuse it anyway). */
		if (lstat(k->ctl, &a) == 0 && S_ISSOCK(a.st_mode) && lstat(k->vsock, &b) == 0 && S_ISSOCK(b.st_mode))
			return 0;
		if (!na_kvm_running(k, why, sizeof(why))) {
			tail_of(k->hvlog, tail, sizeof(tail));
			return verr_set(err, "%s before the guest started:\n%s", why, tail);
		}
		if (now_ns() > end)
			return verr_set(err, "vhpc-hv did not open its control and vsock sockets within %d ms", timeout_ms);
		usleep(5000);
	}
}

/* The guest's own small tmpfs: its sockets and logs, and a guest that
 * floods its console fills that and nothing else.  Root's, mode 0711:
 * inside, hv/ is vhpc-hv's (the only place it can write; the job's user's,
 * who may reach their VM's agent through its vsock bridge there, as a
 * Slurm task in the VM does) and root/ is where its jail's root is
 * mounted; the job dir (its user's group only) keeps other users out. */
static int make_gdir(struct na_kvm *k, uid_t uid, gid_t gid, struct verr *err)
{
	char opts[64], src[32], jroot[PATH_MAX + 8];

	if (mkdir(k->dir, 0711) < 0)
		return verr_errno(err, "%s", k->dir);
	snprintf(src, sizeof(src), "vhpc-%s", k->job);
	snprintf(opts, sizeof(opts), "size=%u,mode=0711", NA_KVM_LOG_MAX);
	if (mount(src, k->dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
		verr_errno(err, "cannot mount a tmpfs on %s", k->dir);
		rmdir(k->dir);
		return -1;
	}
	k->mounted = true;
	snprintf(jroot, sizeof(jroot), "%s/root", k->dir);
	if (mkdir(k->hvdir, 0700) < 0 || chown(k->hvdir, uid, gid) < 0 || mkdir(jroot, 0700) < 0)
		return verr_errno(err, "%s", k->hvdir);
	return 0;
}

/* Where a guest's files are: the same for a started and an adopted one. */
static void set_paths(struct na_kvm *k, const char *jobdir, int index)
{
	snprintf(k->dir, sizeof(k->dir), "%s/kvm%d", jobdir, index);
	snprintf(k->hvdir, sizeof(k->hvdir), "%.90s/hv", k->dir);
	snprintf(k->vsock, sizeof(k->vsock), "%.90s/vsock", k->hvdir);
	snprintf(k->ctl, sizeof(k->ctl), "%.90s/ctl", k->hvdir);
	snprintf(k->serial, sizeof(k->serial), "%s/serial", k->hvdir);
	snprintf(k->hvlog, sizeof(k->hvlog), "%s/hv.log", k->dir);
}

static void remove_gdir(struct na_kvm *k)
{
	if (k->mounted && umount2(k->dir, MNT_DETACH) < 0)
		log_warn("cannot unmount %s: %s", k->dir, strerror(errno));
	k->mounted = false;
	rmdir(k->dir);
}

/* What vhpc-hv said of its PCI functions (DMA mapping, reset and their
 * times), into the agent's log before the guest's folder goes. */
static void log_hv_vfio(const struct na_kvm *k)
{
	char *text = NULL, *save = NULL;
	size_t n;
	struct verr e;

	if (read_file(k->hvlog, &text, &n, NA_KVM_LOG_MAX, &e) < 0)
		return;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		const char *v = strstr(l, "vfio");

		if (v)
			log_info("guest %s: vhpc-hv: %.200s", k->name, v);
	}
	free(text);
}

static void kill_and_reap(struct na_kvm *k)
{
	if (!k->exited) {
		send_sig(k, SIGKILL);
		reap(k, 10000);
	}
}

int na_kvm_start(const struct na_kvm_spec *s, struct na_kvm **out, struct verr *err)
{
	struct na_kvm *k;
	char dir[PATH_MAX], **argv = NULL, hvbuf[512], jroot[PATH_MAX + 8];
	int cg[MAX_CG], ncg = 0, logfd = -1, rc = -1;
	struct na_kvm_fds fds = NA_KVM_FDS_NONE(-1);
	struct kvm_jail jail = { 0 };
	double t0 = now_s();

	*out = NULL;
	if (na_job_check(s->job, err) < 0)
		return -1;
	if (!na_jobdir_alive(s->job))
		return verr_set(err, "job %s guest %d: the job dir is not held by a live owner (na_jobdir_create first)",
				s->job, s->index);
	na_job_path(s->job, dir, sizeof(dir));
	k = calloc(1, sizeof(*k));
	if (!k)
		return verr_set(err, "out of memory");
	k->pidfd = -1;
	k->pid = -1;
	snprintf(k->job, sizeof(k->job), "%s", s->job);
	k->index = s->index;
	snprintf(k->name, sizeof(k->name), "%s", s->name ? s->name : "?");
	k->port = (unsigned)s->guest_port;
	set_paths(k, dir, s->index);
	hv_ids(s, &jail.uid, &jail.gid);
	jail.hv = s->hv_path ? s->hv_path : vhpc_prog("vhpc-hv", hvbuf, sizeof(hvbuf));
	jail.rw_dir = k->hvdir;
	snprintf(jroot, sizeof(jroot), "%s/root", k->dir);
	jail.root = jroot;

	/* argv first: it checks the spec before anything is made. */
	fds.tap = 1000;
	for (int i = 0; i < NA_KVM_MAX_FS; i++)
		fds.fs[i] = 1001 + i;
	for (int i = 0; i < NA_KVM_MAX_PCI; i++)
		fds.pci[i] = (struct kvm_vfio_fds){ 1010 + 3 * i, 1011 + 3 * i, 1012 + 3 * i };
	rc = na_kvm_argv(s, k->hvdir, &fds, &argv, err);
	argv_free(argv);
	argv = NULL;
	fds = NA_KVM_FDS_NONE(-1);
	if (rc < 0)
		goto fail;
	rc = -1;
	if (make_gdir(k, jail.uid, jail.gid, err) < 0 || kvm_tap_open(s->job, s->index, s->mtu, &fds.tap, err) < 0 ||
	    open_files(s, &fds, err) < 0 || open_pci(s, &fds, err) < 0)
		goto fail;
	k->has_pci = s->npci > 0;
	/* VFIO pins the guest's RAM for DMA, charged to vhpc-hv's locked memory. */
	jail.memlock = s->npci ? s->mem + (64ull << 20) : 0;
	{
		/* Which back end the NIC gets; the guest sees the same device. */
		char why[128] = "the tuning profile says vhost_net: false";

		if (s->vhost_net)
			fds.vhost = kvm_vhost_open(why, sizeof(why));
		if (fds.vhost >= 0)
			log_info("guest %s: virtio-net on the kernel's vhost-net", k->name);
		else
			log_info("guest %s: virtio-net on vhpc-hv's userspace back end (%s)", k->name, why);
	}
	{
		struct stat st;

		/* The region's pages are charged to whichever guest touches
		 * them first: each guest's limit leaves room for all of it. */
		k->mem_limit = kvm_mem_limit(s->mem, fds.vmshm >= 0 && fstat(fds.vmshm, &st) == 0 ? (uint64_t)st.st_size : 0);
	}
	if (kvm_cgroups_prepare(s->job, s->index, s->place, k->mem_limit, cg, MAX_CG, &ncg, err) < 0)
		goto fail;
	/* The shared folders' daemons run as the job's user itself (not
	 * vhpc-hv's nobody of a root job): the files are the user's. */
	for (int i = 0; i < s->nfs; i++)
		if (kvm_fs_start(k->dir, i, &s->fs[i], s->uid, s->gid, cg, ncg, &fds.fs[i], &k->fs_pid[i], err) < 0)
			goto fail;
	if (na_kvm_argv(s, k->hvdir, &fds, &argv, err) < 0)
		goto fail;
	logfd = open(k->hvlog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (logfd < 0) {
		verr_errno(err, "%s", k->hvlog);
		goto fail;
	}
	k->pid = fork();
	if (k->pid < 0) {
		verr_errno(err, "fork");
		goto fail;
	}
	if (k->pid == 0)
		child(argv, &fds, cg, ncg, logfd, &jail);
	k->started = t0;
	k->pidfd = pidfd_open_(k->pid);
	{
		/* For an agent that takes the guest over after a restart. */
		char pidf[PATH_MAX + 8], txt[32];
		struct verr e;

		snprintf(pidf, sizeof(pidf), "%s/pid", k->dir);
		snprintf(txt, sizeof(txt), "%d\n", (int)k->pid);
		if (write_file(pidf, txt, strlen(txt), 0600, &e) < 0)
			log_warn("guest %s: %s (a restarted agent could not take it over)", k->name, e.msg);
	}
	/* The tap is vhpc-hv's alone from here: it goes when vhpc-hv goes. */
	close(fds.tap);
	fds.tap = -1;
	close_files(&fds);
	/* Prefaulting RAM is what takes time before vhpc-hv listens. */
	k->up_timeout_ms = (int)((20000 + (int)(s->mem >> 20) * 2) * na_kvm_time_scale());
	k->place = *s->place;
	snprintf(k->what, sizeof(k->what), "%s%s, %d vCPU%s, %llu MiB%s",
		 kvm_kernel_path(s->img) == s->img->vmlinux ? "PVH vmlinux" : "bzImage",
		 s->emulated ? " under emulation" : "", s->place->ncpus, s->place->ncpus == 1 ? "" : "s",
		 (unsigned long long)(s->mem >> 20), s->hugepages ? " in 2 MiB pages" : "");
	*out = k;
	rc = 0;
	goto done;
fail:
	/* A back-end that died says why in its own log, not vhpc-hv's. */
	for (int i = 0; i < s->nfs && i < NA_KVM_MAX_FS; i++) {
		char lp[PATH_MAX + 16], tail[400];

		snprintf(lp, sizeof(lp), "%s/fs%d.log", k->dir, i);
		tail_of(lp, tail, sizeof(tail));
		if (tail[0])
			log_err("guest %s: virtiofsd for %s: %s", k->name, s->fs[i].src, tail);
	}
	verr_wrap(err, "guest %s", k->name);
	if (k->pidfd >= 0)
		close(k->pidfd);
	remove_gdir(k);
	{
		char rel[64];
		int n = 0;
		struct verr e;

		snprintf(rel, sizeof(rel), "vhpc/%s/%d", s->job, s->index);
		na_cgroup_remove(rel, true, &n, &e);
		na_cgroup_rmdir_job(s->job);
	}
	reap_fs(k);
	free(k);
done:
	if (fds.tap >= 0)
		close(fds.tap);
	close_files(&fds);
	if (logfd >= 0)
		close(logfd);
	for (int i = 0; i < ncg; i++)
		close(cg[i]);
	argv_free(argv);
	return rc;
}

int na_kvm_wait_up(struct na_kvm *k, struct verr *err)
{
	if (wait_up(k, k->up_timeout_ms, err) < 0 || kvm_check_pinning(k->ctl, &k->place, err) < 0) {
		kill_and_reap(k);
		return verr_wrap(err, "guest %s", k->name);
	}
	k->up = true;
	log_info("guest %s: vhpc-hv pid %d up in %.0f ms (%s)", k->name, (int)k->pid, (now_s() - k->started) * 1000,
		 k->what);
	return 0;
}

bool na_kvm_is_up(const struct na_kvm *k)
{
	return k->up;
}

bool na_kvm_snapshot_damaged(const struct na_kvm *k)
{
	return k->exited && k->wstatus != -1 && WIFEXITED(k->wstatus) && WEXITSTATUS(k->wstatus) == HV_EXIT_SNAPSHOT;
}

int na_kvm_stop_all(struct na_kvm **ks, int n, int grace_ms, struct verr *err)
{
	uint64_t end = now_ns() + (uint64_t)(grace_ms > 0 ? grace_ms : 0) * 1000000ull;
	int rc = 0;

	/* Everyone at once, so a job stops in one grace period. */
	for (int i = 0; i < n; i++)
		if (ks[i] && grace_ms > 0 && !reap(ks[i], 0))
			send_sig(ks[i], SIGTERM);
	for (int i = 0; i < n; i++) {
		uint64_t now = now_ns();

		if (!ks[i] || reap(ks[i], grace_ms > 0 && now < end ? (int)((end - now) / 1000000) : 0))
			continue;
		if (grace_ms > 0)
			log_info("guest %s: vhpc-hv still running %d ms after SIGTERM; killing it", ks[i]->name, grace_ms);
		kill_and_reap(ks[i]);
	}
	for (int i = 0; i < n; i++) {
		char rel[64];
		int removed = 0;
		struct verr e;

		if (!ks[i])
			continue;
		if (!ks[i]->exited && rc == 0)
			rc = verr_set(err, "guest %s: vhpc-hv (pid %d) survives SIGKILL", ks[i]->name, (int)ks[i]->pid);
		{
			uint64_t peak = kvm_mem_peak(ks[i]->job, ks[i]->index);

			if (peak && ks[i]->mem_limit)
				log_info("guest %s: vhpc-hv and its virtiofsd used at most %llu MiB of their %llu MiB limit",
					 ks[i]->name, (unsigned long long)(peak >> 20),
					 (unsigned long long)(ks[i]->mem_limit >> 20));
		}
		snprintf(rel, sizeof(rel), "vhpc/%s/%d", ks[i]->job, ks[i]->index);
		if (na_cgroup_remove(rel, true, &removed, &e) < 0 && rc == 0) {
			*err = e;
			rc = -1;
		}
		reap_fs(ks[i]);
		if (ks[i]->has_pci)
			log_hv_vfio(ks[i]);
		remove_gdir(ks[i]);
		na_cgroup_rmdir_job(ks[i]->job);
		if (ks[i]->pidfd >= 0)
			close(ks[i]->pidfd);
		free(ks[i]);
		ks[i] = NULL;
	}
	return rc;
}

/* Whether pid is the vhpc-hv of this guest: its command line names the
 * guest's own control socket (a pid may have been reused since). */
static bool is_our_hv(pid_t pid, const char *ctl)
{
	char path[64], *buf = NULL;
	size_t len;
	struct verr e;
	bool ok = false;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (read_file(path, &buf, &len, 1 << 16, &e) < 0)
		return false;
	for (size_t i = 0; i + 1 < len; i++)
		if (!buf[i])
			buf[i] = ' ';
	ok = strstr(buf, "vhpc-hv") && strstr(buf, ctl);
	free(buf);
	return ok;
}

int na_kvm_adopt(const char *job, int index, const char *name, int guest_port, struct na_kvm **out,
		 struct verr *err)
{
	struct na_kvm *k;
	char dir[PATH_MAX], pidf[PATH_MAX + 8], *txt = NULL;
	size_t len;
	long long pid;

	*out = NULL;
	if (na_job_check(job, err) < 0)
		return -1;
	na_job_path(job, dir, sizeof(dir));
	if (!(k = calloc(1, sizeof(*k))))
		return verr_set(err, "out of memory");
	snprintf(k->job, sizeof(k->job), "%s", job);
	k->index = index;
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->port = (unsigned)guest_port;
	set_paths(k, dir, index);
	k->mounted = true;
	k->adopted = true;
	k->up = true;
	k->pidfd = -1;
	snprintf(pidf, sizeof(pidf), "%s/pid", k->dir);
	if (read_file(pidf, &txt, &len, 32, err) < 0 || parse_ll(strtok(txt, "\n") ? txt : "", 2, INT32_MAX, &pid) < 0) {
		free(txt);
		free(k);
		return verr_set(err, "guest %s: no vhpc-hv pid in %s", name, pidf);
	}
	free(txt);
	k->pid = (pid_t)pid;
	/* The pidfd first, then the check: a pid reused after the check could
	 * not be mistaken for it. */
	k->pidfd = pidfd_open_(k->pid);
	if (k->pidfd < 0 || !is_our_hv(k->pid, k->ctl)) {
		if (k->pidfd >= 0)
			close(k->pidfd);
		free(k);
		return verr_set(err, "guest %s: vhpc-hv (pid %lld) is gone", name, pid);
	}
	*out = k;
	return 0;
}
