/*
 * The kvm driver's pure parts: what a guest's kernel command line and its
 * vhpc-hv command line say, given the placement and the image.  Kept free
 * of side effects so the unit tests can pin down every option.
 */
#include "nodeagent/job.h"
#include "lib/consts.h"
#include "lib/argv.h"
#include "lib/err.h"
#include "lib/inet.h"
#include "lib/parse.h"
#include "lib/paths.h"
#include "lib/tuning.h"
#include "kvm_int.h"
#include "images/images.h"
#include "nodeagent/drivers/kvm/kvm.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/place/place.h"
#include "hv/hv.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Guest RAM per guest node is split in these units: a 2 MiB hugepage, and
 * a whole number of 4 KiB pages either way. */
#define SPLIT_UNIT (2ull << 20)

int kvm_mem_split(const struct na_placement *p, const int *cpu_node, uint64_t mem,
		  struct kvm_gnode *g, int max, struct verr *err)
{
	int n = 0;
	uint64_t given = 0;

	if (p->ncpus < 1)
		return verr_set(err, "placement without CPUs");
	if (!cpu_node) {
		g[0].host_node = p->nmems ? p->mems[0] : -1;
		g[0].nvcpus = p->ncpus;
		for (int v = 0; v < p->ncpus; v++)
			g[0].vcpus[v] = v;
		g[0].mem = mem;
		return 1;
	}
	for (int v = 0; v < p->ncpus; v++) {
		int k;

		for (k = 0; k < n && g[k].host_node != cpu_node[v]; k++)
			;
		if (k == n) {
			if (n == max)
				return verr_set(err, "the placement spans more than %d NUMA nodes", max);
			g[n].host_node = cpu_node[v];
			g[n].nvcpus = 0;
			n++;
		}
		g[k].vcpus[g[k].nvcpus++] = v;
	}
	/* Memory follows the vCPUs: each node gets its share, the last one
	 * what rounding left. */
	for (int k = 0; k < n; k++) {
		if (k == n - 1) {
			g[k].mem = mem - given;
		} else {
			g[k].mem = mem / (uint64_t)p->ncpus * (uint64_t)g[k].nvcpus / SPLIT_UNIT * SPLIT_UNIT;
			given += g[k].mem;
		}
		if (g[k].mem < SPLIT_UNIT)
			return verr_set(err, "%llu MiB cannot be split over the %d NUMA nodes of the placement",
					(unsigned long long)(mem >> 20), n);
	}
	return n;
}

void na_kvm_plan_hugepages(const struct na_numa_info *nodes, int nnodes,
			   const struct na_placement *p, int nguests, uint64_t mem, bool *use)
{
	uint64_t left[VHPC_MAX_NODES];

	for (int i = 0; i < nnodes && i < VHPC_MAX_NODES; i++)
		left[i] = nodes[i].hugepages_2m_free;
	for (int g = 0; g < nguests; g++) {
		struct kvm_gnode gn[KVM_MAX_GNODES];
		struct verr e;
		int n;
		bool fits = mem % SPLIT_UNIT == 0;

		use[g] = false;
		n = kvm_mem_split(&p[g], NULL, mem, gn, KVM_MAX_GNODES, &e);
		for (int k = 0; fits && k < n; k++) {
			int idx = -1;

			for (int i = 0; i < nnodes && i < VHPC_MAX_NODES; i++)
				if (nodes[i].os_index == gn[k].host_node)
					idx = i;
			fits = idx >= 0 && left[idx] >= gn[k].mem / SPLIT_UNIT;
		}
		if (n < 1 || !fits)
			continue;
		for (int k = 0; k < n; k++)
			for (int i = 0; i < nnodes && i < VHPC_MAX_NODES; i++)
				if (nodes[i].os_index == gn[k].host_node)
					left[i] -= gn[k].mem / SPLIT_UNIT;
		use[g] = true;
	}
}

static int check_spec(const struct na_kvm_spec *s, struct verr *err)
{
	if (na_job_check(s->job, err) < 0)
		return -1;
	if (s->index < 0 || s->index >= VHPC_MAX_GUESTS)
		return verr_set(err, "guest index %d: 0..%d", s->index, VHPC_MAX_GUESTS - 1);
	if (!s->name || !ident_ok(s->name, 63))
		return verr_set(err, "guest %d: name '%s' is not a host name", s->index, s->name ? s->name : "");
	if (!s->place || s->place->ncpus < 1 || s->place->ncpus > HV_MAX_VCPUS)
		return verr_set(err, "guest %s: a placement with 1..%d CPUs is needed", s->name, HV_MAX_VCPUS);
	if (s->mem < NA_KVM_MIN_MEM)
		return verr_set(err, "guest %s: %llu MiB of memory; a kvm guest needs at least %llu MiB (kernel, initramfs, tmpfs)",
				s->name, (unsigned long long)(s->mem >> 20), (unsigned long long)(NA_KVM_MIN_MEM >> 20));
	if (s->mem % (1u << 20))
		return verr_set(err, "guest %s: memory must be whole MiB", s->name);
	if (s->hugepages && s->mem % SPLIT_UNIT)
		return verr_set(err, "guest %s: hugepage-backed memory must be whole 2 MiB pages", s->name);
	if (s->prefix < 1 || s->prefix > 32)
		return verr_set(err, "guest %s: prefix /%d", s->name, s->prefix);
	if (s->mtu < 68 || s->mtu > 65535)
		return verr_set(err, "guest %s: MTU %d is outside 68..65535", s->name, s->mtu);
	if (s->guest_port < 1 || s->guest_port > 65535)
		return verr_set(err, "guest %s: guest agent port %d is outside 1..65535", s->name, s->guest_port);
	return 0;
}

int na_kvm_cmdline(const struct na_kvm_spec *s, char *buf, size_t len, struct verr *err)
{
	char ip[20];
	int n;

	if (check_spec(s, err) < 0)
		return -1;
	ipv4_format(s->addr, ip, sizeof(ip));
	/* console on COM1, which vhpc-hv writes to the serial log; under
	 * emulation the kernel never gets as far as registering it, so its
	 * early console must say what happened.  Otherwise quiet: every byte
	 * to the UART is an exit to vhpc-hv, and the boot log's 20 KB cost
	 * 3 s of a guest's 11 s to /init in the lab; errors still reach the
	 * log, and VHPC_KVM_APPEND=loglevel=7 (later words win) brings the
	 * rest.  panic=-1: a panicking guest resets at once, and vhpc-hv
	 * exits with HV_EXIT_RESET. */
	n = snprintf(buf, len,
		     "console=ttyS0%s panic=-1 vhpc.name=%s vhpc.job=%s vhpc.index=%d "
		     "vhpc.addr=%s/%d vhpc.mtu=%d vhpc.listen=vsock:%d vhpc.listen=%s:%d",
		     s->emulated ? " earlyprintk=serial,ttyS0" : " quiet", s->name, s->job, s->index,
		     ip, s->prefix, s->mtu, s->guest_port, ip, s->guest_port);
	if (n >= 0 && (size_t)n < len && s->scratch_disk)
		n += snprintf(buf + n, len - (size_t)n, " vhpc.scratch=1");
	/* A compact image's root disk is its squashfs or erofs file. */
	if (n >= 0 && (size_t)n < len && s->img && s->img->blob[0])
		n += snprintf(buf + n, len - (size_t)n, " vhpc.rootfs=%s", s->img->format);
	if (n >= 0 && (size_t)n < len && s->spool) {
		if (s->spool[0] != '/' || strpbrk(s->spool, " \t\"\\"))
			return verr_set(err, "guest %s: spool '%.80s' is not an absolute path without blanks", s->name, s->spool);
		n += snprintf(buf + n, len - (size_t)n, " vhpc.spool=%s", s->spool);
	}
	if (n < 0 || (size_t)n >= len)
		return verr_set(err, "guest %s: kernel command line longer than %zu bytes", s->name, len - 1);
	/* Kernel parameters a site (or the nested lab) adds for every guest;
	 * they may not touch vhpc's own words. */
	const char *extra = getenv("VHPC_KVM_APPEND");

	if (extra && *extra) {
		for (const char *p = extra; *p; p++)
			if (*p < 0x20 || *p > 0x7e)
				return verr_set(err, "VHPC_KVM_APPEND: character 0x%02x at offset %td is not printable ASCII",
						(unsigned char)*p, p - extra);
		for (const char *w = extra; (w = strstr(w, "vhpc.")); w++)
			if (w == extra || w[-1] == ' ')
				return verr_set(err, "VHPC_KVM_APPEND: '%.40s' would override vhpc's own kernel parameters", w);
		if ((size_t)n + 1 + strlen(extra) >= len)
			return verr_set(err, "guest %s: kernel command line with VHPC_KVM_APPEND longer than %zu bytes",
					s->name, len - 1);
		snprintf(buf + n, len - (size_t)n, " %s", extra);
	}
	return 0;
}

/* Device options separate their values with commas: a path must not
 * contain one. */
static int path_ok(const char *what, const char *path, struct verr *err)
{
	if (!path || !*path)
		return verr_set(err, "%s: no path", what);
	if (strchr(path, ','))
		return verr_set(err, "%s %s: a path with a comma cannot be passed to vhpc-hv", what, path);
	return 0;
}

const char *kvm_kernel_path(const struct image_info *img)
{
	return img->vmlinux[0] && access(img->vmlinux, R_OK) == 0 ? img->vmlinux : img->kernel;
}

/* "/dev/fd/N" for an open fd, else the path: vhpc-hv takes both. */
static const char *file_arg(int fd, const char *path, char *buf, size_t len)
{
	if (fd < 0)
		return path;
	snprintf(buf, len, "/dev/fd/%d", fd);
	return buf;
}

int na_kvm_argv(const struct na_kvm_spec *s, const char *dir, const struct na_kvm_fds *fds, char ***argv,
		struct verr *err)
{
	char fb[32];
	int tap_fd = fds ? fds->tap : -1;
	struct kvm_gnode gn[KVM_MAX_GNODES];
	struct argv_b a = { 0 };
	char cmdline[1024], hvbuf[512], list[4096];
	const char *kernel;
	int n;

	*argv = NULL;
	if (check_spec(s, err) < 0 || na_kvm_cmdline(s, cmdline, sizeof(cmdline), err) < 0)
		return -1;
	/* Prefaulting settles a job's memory before it runs (and finds a
	 * short hugepage pool at start), but where every fault is emulated
	 * it is the largest part of a guest's start: 384 MiB took 9.5 s of
	 * 12 s under the nested lab.  There (tests/lab/inside) the guest
	 * faults in only what it touches; never with hugepages, whose pool
	 * must be checked before the job runs. */
	const char *pf = getenv("VHPC_KVM_PREFAULT");

	if (pf && strcmp(pf, "0") && strcmp(pf, "1"))
		return verr_set(err, "VHPC_KVM_PREFAULT: expected 0 or 1, got '%.20s'", pf);
	bool prefault = !pf || !strcmp(pf, "1");
	if (!s->img || !s->img->kvm)
		return verr_set(err, "guest %s: image %s has no kvm parts (kernel, initramfs, ext4 root): "
				"give its YAML a kvm: section", s->name, s->img ? s->img->name : "?");
	kernel = kvm_kernel_path(s->img);
	if (path_ok("kernel", kernel, err) < 0 || path_ok("initramfs", s->img->initrd, err) < 0 ||
	    path_ok("root disk", s->img->disk, err) < 0 || path_ok("config disk", s->config_disk, err) < 0 ||
	    (s->scratch_disk && path_ok("scratch disk", s->scratch_disk, err) < 0) ||
	    (s->restore && path_ok("snapshot", s->restore, err) < 0) ||
	    path_ok("guest dir", dir, err) < 0 || (s->vmshm && path_ok("vmshm region", s->vmshm, err) < 0))
		return -1;
	/* vhpc-hv binds <dir>/vsock and, for connections the guest makes,
	 * connects to <dir>/vsock_<port>. */
	if (strlen(dir) + sizeof("/vsock_4294967295") > 108)
		return verr_set(err, "guest dir %s: too long for the guest's vsock socket names (unix sockets take 107 bytes)", dir);
	if (tap_fd < 0)
		return verr_set(err, "guest %s: no tap", s->name);
	n = kvm_mem_split(s->place, s->cpu_node, s->mem, gn, KVM_MAX_GNODES, err);
	if (n < 0)
		return verr_wrap(err, "guest %s", s->name);

	argv_add(&a, "%s", s->hv_path ? s->hv_path : vhpc_prog("vhpc-hv", hvbuf, sizeof(hvbuf)));
	argv_add(&a, "--kernel");
	argv_add(&a, "%s", file_arg(fds->kernel, kernel, fb, sizeof(fb)));
	argv_add(&a, "--initrd");
	argv_add(&a, "%s", file_arg(fds->initrd, s->img->initrd, fb, sizeof(fb)));
	argv_add(&a, "--cmdline");
	argv_add(&a, "%s", cmdline);
	argv_add(&a, "--vcpus");
	argv_add(&a, "%d", s->place->ncpus);
	argv_add(&a, "--mem");
	argv_add(&a, "%lluM", (unsigned long long)(s->mem >> 20));
	list[0] = 0;
	for (int v = 0; v < s->place->ncpus; v++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", v ? "," : "", s->place->cpus[v]);
	argv_add(&a, "--cpu-affinity");
	argv_add(&a, "%s", list);
	if (n == 1 && gn[0].host_node >= 0) {
		argv_add(&a, "--host-node");
		argv_add(&a, "%d", gn[0].host_node);
	} else if (n > 1) {
		for (int k = 0; k < n; k++) {
			argv_add(&a, "--numa");
			argv_add(&a, "mem=%lluM,cpus=%s,host-node=%d", (unsigned long long)(gn[k].mem >> 20),
			    cpulist_format(gn[k].vcpus, (size_t)gn[k].nvcpus, list, sizeof(list)), gn[k].host_node);
		}
	}
	if (s->hugepages)
		argv_add(&a, "--hugepages=2M");
	if (!prefault && !s->hugepages)
		argv_add(&a, "--no-prefault");
	if (s->emulated) {
		/* The instruction emulator lacks CMPXCHG16B and XSAVE; hidden,
		 * the kernel's early boot gets as far as SMP set-up. */
		argv_add(&a, "--cpuid-hide");
		argv_add(&a, "cx16,xsave");
	} else {
		/* A guest must never silently run 1000x slower. */
		argv_add(&a, "--require-hw");
		/* CPU features a host's virtualization cannot give guests
		 * although it reports them: under the nested lab (QEMU TCG
		 * emulating AMD-V) a guest's XSETBV does not reach KVM, the
		 * kernel finds XSAVE inconsistent and AVX code gets #UD.
		 * vhpc-hv checks the names. */
		const char *hide = getenv("VHPC_KVM_CPUID_HIDE");

		if (hide && *hide) {
			argv_add(&a, "--cpuid-hide");
			argv_add(&a, "%s", hide);
		}
	}
	argv_add(&a, "--serial");
	argv_add(&a, "file:%s/serial", dir);
	argv_add(&a, "--control");
	argv_add(&a, "%s/ctl", dir);
	if (s->vmshm) {
		argv_add(&a, "--shm");
		argv_add(&a, "path=%s", file_arg(fds->vmshm, s->vmshm, fb, sizeof(fb)));
	}
	argv_add(&a, "--blk");
	argv_add(&a, "path=%s,ro,serial=vhpc-root", file_arg(fds->root, s->img->disk, fb, sizeof(fb)));
	argv_add(&a, "--blk");
	argv_add(&a, "path=%s,ro,serial=vhpc-config", file_arg(fds->config, s->config_disk, fb, sizeof(fb)));
	if (s->scratch_disk) {
		argv_add(&a, "--blk");
		argv_add(&a, "path=%s,serial=vhpc-scratch", file_arg(fds->scratch, s->scratch_disk, fb, sizeof(fb)));
	}
	if (s->nfs < 0 || s->nfs > NA_KVM_MAX_FS || (s->nfs && !s->fs)) {
		argv_free(a.v);
		return verr_set(err, "%d shared folders: a kvm guest has at most %d", s->nfs, NA_KVM_MAX_FS);
	}
	for (int i = 0; i < s->nfs; i++) {
		argv_add(&a, "--fs");
		argv_add(&a, "tag=vhpc%d,socket=/dev/fd/%d", i, fds->fs[i]);
	}
	if (s->npci < 0 || s->npci > NA_KVM_MAX_PCI || (s->npci && !s->pci)) {
		argv_free(a.v);
		return verr_set(err, "%d PCI functions: a kvm guest takes at most %d", s->npci, NA_KVM_MAX_PCI);
	}
	for (int i = 0; i < s->npci; i++) {
		argv_add(&a, "--vfio");
		argv_add(&a, "container=%d,group=%d,device=%d,name=%s", fds->pci[i].container, fds->pci[i].group,
			 fds->pci[i].device, s->pci[i]);
	}
	/* A MAC from the guest's address: stable, and unique on the bridge.
	 * With a vhost-net descriptor the kernel moves the NIC's frames. */
	char vh[24] = "";

	if (fds->vhost >= 0)
		snprintf(vh, sizeof(vh), ",vhostfd=%d", fds->vhost);
	argv_add(&a, "--net");
	argv_add(&a, "fd=%d,mac=52:54:%02x:%02x:%02x:%02x,mtu=%d%s", tap_fd, s->addr >> 24, (s->addr >> 16) & 0xff,
	    (s->addr >> 8) & 0xff, s->addr & 0xff, s->mtu, vh);
	argv_add(&a, "--vsock");
	argv_add(&a, "cid=%d,uds=%s/vsock", 3 + s->index, dir);
	/* virtio-console (hvc0): the guest's fast console, beside the UART the
	 * kernel logs to from its first instruction; both land in the guest's
	 * own tmpfs. */
	argv_add(&a, "--console");
	argv_add(&a, "file:%s/console", dir);
	if (s->restore) {
		argv_add(&a, "--restore");
		argv_add(&a, "%s", file_arg(fds->restore, s->restore, fb, sizeof(fb)));
		/* The job's other guests may not be back yet: the job level
		 * resumes them all together (scheduler/PROTOCOL.md, job_resume). */
		argv_add(&a, "--paused");
	}
	/* Once set up, only the calls a running guest needs (hv/hv.h). */
	argv_add(&a, "--seccomp");
	if (!(*argv = argv_finish(&a)))
		return verr_set(err, "out of memory");
	return 0;
}

const char *na_kvm_exit_words(int st, char *buf, size_t len)
{
	static const char *const words[] = {
		[HV_EXIT_POWEROFF] = "the guest powered off",
		[HV_EXIT_ERROR] = "set-up failed",
		[HV_EXIT_USAGE] = "bad command line",
		[HV_EXIT_RESET] = "the guest reset (a kernel panic, or a reboot)",
		[HV_EXIT_CRASH] = "triple fault or KVM internal error",
		[HV_EXIT_KILLED] = "killed (control socket or SIGTERM)",
		[HV_EXIT_NO_HW] = "no hardware virtualization",
		[HV_EXIT_SECCOMP] = "a system call outside its seccomp allowlist (hv.log names it)",
		[HV_EXIT_SNAPSHOT] = "the snapshot to restore is damaged",
	};

	if (WIFEXITED(st)) {
		int c = WEXITSTATUS(st);

		if (c < (int)(sizeof(words) / sizeof(words[0])) && words[c])
			snprintf(buf, len, "vhpc-hv exited with status %d: %s", c, words[c]);
		else if (c >= HV_EXIT_DEBUG_BASE && c < HV_EXIT_DEBUG_BASE + 64)
			snprintf(buf, len, "vhpc-hv exited with status %d: test-guest debug exit %d", c,
				 c - HV_EXIT_DEBUG_BASE);
		else
			snprintf(buf, len, "vhpc-hv exited with status %d", c);
	} else if (WIFSIGNALED(st)) {
		snprintf(buf, len, "vhpc-hv was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	} else {
		snprintf(buf, len, "vhpc-hv ended with wait status 0x%x", st);
	}
	return buf;
}

static bool env_name_ok(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

int na_kvm_env_text(const char *const *env, char **out, struct verr *err)
{
	size_t cap = 1, n = 0;
	char *t;

	for (size_t i = 0; env && env[i]; i++)
		cap += strlen(env[i]) + 1;
	t = malloc(cap);
	if (!t)
		return verr_set(err, "out of memory");
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');

		/* One line each, taken as a whole by the guest's init
		 * (export "$line"): a name, '=', and a value without a newline. */
		if (!eq || !env_name_ok(env[i], (size_t)(eq - env[i])) || strchr(eq, '\n')) {
			free(t);
			return verr_set(err, "guest environment entry '%.60s': expected NAME=VALUE on one line", env[i]);
		}
		n += (size_t)sprintf(t + n, "%s\n", env[i]);
	}
	t[n] = 0;
	*out = t;
	return 0;
}

int na_kvm_sysctl_text(const struct tuning *tun, char **out, struct verr *err)
{
	size_t cap = 1, n = 0;
	char *t;

	for (size_t i = 0; tun && i < tun->sysctl.n; i++)
		cap += strlen(tun->sysctl.key[i]) + strlen(tun->sysctl.val[i]) + 4;
	t = malloc(cap);
	if (!t)
		return verr_set(err, "out of memory");
	for (size_t i = 0; tun && i < tun->sysctl.n; i++) {
		const char *k = tun->sysctl.key[i], *v = tun->sysctl.val[i];

		if (strncmp(k, "net.", 4) || strpbrk(k, " =\n") || strchr(v, '\n')) {
			free(t);
			return verr_set(err, "tuning '%s': sysctl '%.60s' cannot go into a guest's sysctl.conf",
					tun->name ? tun->name : "?", k);
		}
		n += (size_t)sprintf(t + n, "%s = %s\n", k, v);
	}
	t[n] = 0;
	*out = t;
	return 0;
}

int na_kvm_fs_text(const struct na_hbind *fs, int n, char **out, struct verr *err)
{
	size_t cap = 1, len = 0;
	char *t;
	char why[300];

	if (n < 0 || n > NA_KVM_MAX_FS)
		return verr_set(err, "%d shared folders: a kvm guest has at most %d", n, NA_KVM_MAX_FS);
	for (int i = 0; i < n; i++)
		cap += strlen(fs[i].dst) + 16;
	if (!(t = malloc(cap)))
		return verr_set(err, "out of memory");
	for (int i = 0; i < n; i++) {
		/* The guest's init reads words: a path with a blank would split. */
		if (bind_path_check("shared folder destination", fs[i].dst, why, sizeof(why)) < 0) {
			free(t);
			return verr_set(err, "%s", why);
		}
		len += (size_t)sprintf(t + len, "vhpc%d %s %s\n", i, fs[i].dst, fs[i].ro ? "ro" : "rw");
	}
	t[len] = 0;
	*out = t;
	return 0;
}
