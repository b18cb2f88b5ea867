/*
 * The OCI runtime config (config.json) of a container guest.
 *
 * What keeps a guest from changing its host: a user namespace of its own
 * whose root is the job's user outside (nothing else mapped), no
 * capabilities at all, no new privileges, the seccomp allowlist
 * (seccomp.c), read-only rootfs, /sys and /proc/sys read-only, runc's
 * default masked paths, a device cgroup that allows only the default
 * devices, and its own PID, mount, UTS, IPC and cgroup namespaces; its
 * network namespace is its own too (runc makes it inside the guest's user
 * namespace, the agent moves its eth0 in), except in a pod: guests of a
 * job that share a host with vmshm and single copy (the job's default)
 * share the user and PID namespace of the job's pod there (pod.c), the
 * same user's for all of them, and join network namespaces the agent made
 * in it.
 *
 * Root inside rather than the user's own uid inside: runc needs the
 * container's root mapped to set the guest up, and mapping it to the user
 * keeps the mapping to one uid, so no other host uid (not even a shared
 * "nobody") ever holds a guest's processes or files.  With no capabilities
 * in its namespace that root can do nothing the user could not.
 */
#include "nodeagent/job.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/parse.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/net/net.h"

#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/resource.h>
#include <sys/stat.h>

static const char *const masked[] = {
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
	"/proc/scsi", NULL
};

static const char *const readonly[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL
};

/* Mount points every image must have: the rootfs is read-only, so nothing
 * can be created there. */
static const char *const needed_dirs[] = { "/proc", "/sys", "/dev", "/tmp", "/run", "/var/tmp", NULL };

/* Under these the guest has tmpfs, so bind targets may be created there. */
static const char *const tmpfs_dirs[] = { "/tmp", "/run", "/var/tmp", "/dev", NULL };

static struct json_object *strarray(const char *const *v)
{
	struct json_object *a = json_object_new_array();

	for (; v && *v; v++)
		json_object_array_add(a, json_object_new_string(*v));
	return a;
}

static void add_mount(struct json_object *mounts, const char *dst, const char *type,
		      const char *src, const char *const *opts)
{
	struct json_object *m = json_object_new_object();

	json_object_object_add(m, "destination", json_object_new_string(dst));
	json_object_object_add(m, "type", json_object_new_string(type));
	json_object_object_add(m, "source", json_object_new_string(src));
	json_object_object_add(m, "options", strarray(opts));
	json_object_array_add(mounts, m);
}

/* Absolute, no ".." component, nothing odd: these become mount targets. */
static bool path_clean(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) >= 1024 || strchr(p, '\n') || strstr(p, "//"))
		return false;
	for (const char *q = p; (q = strstr(q, "/..")); q++)
		if (q[3] == '/' || q[3] == 0)
			return false;
	return true;
}

static bool under(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(p, dir, n) && p[n] == '/';
}

static bool hostname_ok(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	if (n < 1 || n > 63 || h[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		      (h[i] >= '0' && h[i] <= '9') || h[i] == '-'))
			return false;
	return true;
}

static int check_spec(const struct na_ctr_spec *s, struct verr *err)
{
	struct stat st;
	char p[PATH_MAX];

	if (na_job_check(s->job, err) < 0)
		return -1;
	if (s->index < 0 || s->index >= VHPC_MAX_GUESTS)
		return verr_set(err, "guest index %d; 0..%d allowed", s->index, VHPC_MAX_GUESTS - 1);
	if (!s->own_netns && (!s->sysfs || s->sysfs[0] != '/'))
		return verr_set(err, "no sysfs of the guest's network namespace to bind at /sys");
	if (!hostname_ok(s->hostname))
		return verr_set(err, "hostname '%.80s': expected 1-63 letters, digits and '-'", s->hostname ? s->hostname : "(null)");
	if (!path_clean(s->rootfs) || stat(s->rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
		return verr_set(err, "rootfs '%.200s' is not an existing directory (absolute path)", s->rootfs ? s->rootfs : "(null)");
	for (int i = 0; needed_dirs[i]; i++) {
		snprintf(p, sizeof(p), "%s%s", s->rootfs, needed_dirs[i]);
		if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			return verr_set(err, "rootfs %s has no %s directory; an image needs /proc /sys /dev /tmp /run /var/tmp as mount points",
					s->rootfs, needed_dirs[i]);
	}
	if (!s->argv || !s->argv[0] || !s->argv[0][0])
		return verr_set(err, "no init command for the guest");
	for (int i = 0; s->env && s->env[i]; i++)
		if (!strchr(s->env[i], '=') || s->env[i][0] == '=' || strchr(s->env[i], '\n'))
			return verr_set(err, "environment entry '%.80s' is not NAME=VALUE", s->env[i]);
	if (s->own_netns && s->pod > 0)
		return verr_set(err, "guest %d: a pod's guests join the pod's network namespaces; they cannot have their own", s->index);
	if (!s->own_netns && (!s->netns || !ident_ok(s->netns, 64)))
		return verr_set(err, "network namespace '%.80s' is not a plain name", s->netns ? s->netns : "(null)");
	if (!s->place || s->place->ncpus < 1 || s->place->ncpus > VHPC_MAX_VCPUS ||
	    s->place->nmems < 1 || s->place->nmems > VHPC_MAX_NODES)
		return verr_set(err, "guest %d has no placement (cpus and NUMA nodes)", s->index);
	if (!path_clean(s->log_path))
		return verr_set(err, "log path '%.200s' must be absolute", s->log_path ? s->log_path : "(null)");
	if (s->nbinds < 0 || (s->nbinds && !s->binds))
		return verr_set(err, "bad bind mount list");
	for (int i = 0; i < s->nbinds; i++) {
		const struct na_bind *b = &s->binds[i];
		bool in_tmpfs = false;

		if (!path_clean(b->src) || stat(b->src, &st) < 0)
			return verr_set(err, "bind mount %d: source '%.200s' does not exist (absolute path)", i, b->src ? b->src : "(null)");
		if (!path_clean(b->dst) || !strcmp(b->dst, "/"))
			return verr_set(err, "bind mount %d: destination '%.200s' must be an absolute path below /", i, b->dst ? b->dst : "(null)");
		int outer = -1;

		/* A target inside an earlier bind is looked up in that bind's
		 * source (runc mounts in order); a read-only one cannot get it. */
		for (int k = 0; k < i; k++)
			if (under(b->dst, s->binds[k].dst) &&
			    (outer < 0 || strlen(s->binds[k].dst) > strlen(s->binds[outer].dst)))
				outer = k;
		if (outer >= 0) {
			snprintf(p, sizeof(p), "%s%s", s->binds[outer].src, b->dst + strlen(s->binds[outer].dst));
			if (s->binds[outer].ro && stat(p, &st) < 0)
				return verr_set(err, "bind mount %d: %s does not exist in %s, the read-only source of bind mount %d",
						i, p, s->binds[outer].src, outer);
			continue;
		}
		for (int k = 0; tmpfs_dirs[k]; k++)
			in_tmpfs |= under(b->dst, tmpfs_dirs[k]);
		snprintf(p, sizeof(p), "%s%s", s->rootfs, b->dst);
		if (!in_tmpfs && stat(p, &st) < 0)
			return verr_set(err, "bind mount %d: %s does not exist in the read-only rootfs; put it under /run, /tmp or /var/tmp",
					i, b->dst);
	}
	snprintf(p, sizeof(p), "%s/scratch", s->rootfs);
	if (s->scratch_size && (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)))
		return verr_set(err, "a scratch space was asked for, but the image at %s has no /scratch: "
				"rebuild it (vhpc image build)", s->rootfs);
	return 0;
}

/* Root of the guest's user namespace is id outside; nothing else is mapped. */
static struct json_object *id_mapping(unsigned id)
{
	struct json_object *a = json_object_new_array(), *m = json_object_new_object();

	json_object_object_add(m, "containerID", json_object_new_int(0));
	json_object_object_add(m, "hostID", json_object_new_int64(id));
	json_object_object_add(m, "size", json_object_new_int(1));
	json_object_array_add(a, m);
	return a;
}

static struct json_object *oci_process(const struct na_ctr_spec *s)
{
	struct json_object *proc, *user, *env, *capo, *rl, *rls;
	bool have_path = false;
	struct rlimit nofile;

	proc = json_object_new_object();
	json_object_object_add(proc, "terminal", json_object_new_boolean(0));
	user = json_object_new_object();
	json_object_object_add(user, "uid", json_object_new_int(0));
	json_object_object_add(user, "gid", json_object_new_int(0));
	json_object_object_add(proc, "user", user);
	json_object_object_add(proc, "args", strarray(s->argv));
	env = strarray(s->env);
	for (int i = 0; s->env && s->env[i]; i++)
		have_path |= !strncmp(s->env[i], "PATH=", 5);
	if (!have_path)
		json_object_array_add(env, json_object_new_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
	json_object_object_add(proc, "env", env);
	json_object_object_add(proc, "cwd", json_object_new_string("/"));
	capo = json_object_new_object();
	for (int i = 0; i < 5; i++) {
		static const char *const sets[] = { "bounding", "effective", "permitted", "inheritable", "ambient" };

		json_object_object_add(capo, sets[i], json_object_new_array());
	}
	json_object_object_add(proc, "capabilities", capo);
	/* MPI opens many sockets and shared-memory files per peer; raising the
	 * hard limit would need CAP_SYS_RESOURCE, which the agent may lack. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) < 0 || nofile.rlim_max > 65536)
		nofile.rlim_max = 65536;
	rl = json_object_new_object();
	json_object_object_add(rl, "type", json_object_new_string("RLIMIT_NOFILE"));
	json_object_object_add(rl, "hard", json_object_new_int64((int64_t)nofile.rlim_max));
	json_object_object_add(rl, "soft", json_object_new_int64((int64_t)nofile.rlim_max));
	rls = json_object_new_array();
	json_object_array_add(rls, rl);
	/* Verbs pins every buffer it registers, against RLIMIT_MEMLOCK: at the
	 * 8 MiB a node's daemons inherit, libfabric's rxd could not register its
	 * second 4 MiB packet pool on a 4096-byte-MTU fabric, and ob1 retried
	 * forever (a hung job, not an error).  HPC sites run jobs with memlock
	 * unlimited; the guest's memory limit is the bound here, since pinned
	 * pages are the guest's own and charged to its cgroup.  runc sets it
	 * inside the guest's user namespace, where a hard limit only goes down:
	 * na_ctr_memlock_room raised the agent's own first, and whatever it
	 * could not raise caps the guest's. */
	if (s->mem_limit) {
		struct rlimit ml;
		uint64_t lock = s->mem_limit;

		if (getrlimit(RLIMIT_MEMLOCK, &ml) == 0 && ml.rlim_max != RLIM_INFINITY && ml.rlim_max < lock)
			lock = ml.rlim_max;
		rl = json_object_new_object();
		json_object_object_add(rl, "type", json_object_new_string("RLIMIT_MEMLOCK"));
		json_object_object_add(rl, "hard", json_object_new_int64((int64_t)lock));
		json_object_object_add(rl, "soft", json_object_new_int64((int64_t)lock));
		json_object_array_add(rls, rl);
	}
	json_object_object_add(proc, "rlimits", rls);
	json_object_object_add(proc, "noNewPrivileges", json_object_new_boolean(1));
	return proc;
}

static struct json_object *oci_mounts(const struct na_ctr_spec *s)
{
	struct json_object *mounts;
	char tmpsz[64];

	snprintf(tmpsz, sizeof(tmpsz), "size=%llu", (unsigned long long)(s->tmpfs_size ? s->tmpfs_size : 64ull << 20));
	mounts = json_object_new_array();
	add_mount(mounts, "/proc", "proc", "proc", (const char *[]){ "nosuid", "noexec", "nodev", NULL });
	add_mount(mounts, "/dev", "tmpfs", "tmpfs", (const char *[]){ "nosuid", "strictatime", "mode=755", "size=65536k", NULL });
	add_mount(mounts, "/dev/pts", "devpts", "devpts", (const char *[]){ "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", NULL });
	add_mount(mounts, "/dev/shm", "tmpfs", "shm", (const char *[]){ "nosuid", "noexec", "nodev", "mode=1777", tmpsz, NULL });
	add_mount(mounts, "/dev/mqueue", "mqueue", "mqueue", (const char *[]){ "nosuid", "noexec", "nodev", NULL });
	/* A netns of the guest's own user namespace: runc mounts its sysfs
	 * there.  Else the agent's sysfs of the guest's netns (the guest, in
	 * its user namespace, cannot mount one for a netns the host's user
	 * namespace owns): nothing is mounted below it. */
	if (s->own_netns)
		add_mount(mounts, "/sys", "sysfs", "sysfs", (const char *[]){ "nosuid", "noexec", "nodev", "ro", NULL });
	else
		add_mount(mounts, "/sys", "bind", s->sysfs, (const char *[]){ "bind", "nosuid", "noexec", "nodev", "ro", NULL });
	add_mount(mounts, "/sys/fs/cgroup", "cgroup", "cgroup", (const char *[]){ "nosuid", "noexec", "nodev", "relatime", "ro", NULL });
	add_mount(mounts, "/tmp", "tmpfs", "tmpfs", (const char *[]){ "nosuid", "nodev", "mode=1777", tmpsz, NULL });
	add_mount(mounts, "/var/tmp", "tmpfs", "tmpfs", (const char *[]){ "nosuid", "nodev", "mode=1777", tmpsz, NULL });
	add_mount(mounts, "/run", "tmpfs", "tmpfs", (const char *[]){ "nosuid", "nodev", "mode=755", tmpsz, NULL });
	if (s->scratch_size) {
		char scr[40];

		/* Memory-backed: a container guest's memory is the host's anyway,
		 * and the size keeps one guest from filling the node's RAM. */
		snprintf(scr, sizeof(scr), "size=%llu", (unsigned long long)s->scratch_size);
		add_mount(mounts, "/scratch", "tmpfs", "tmpfs", (const char *[]){ "nosuid", "nodev", "mode=1777", scr, NULL });
	}
	/* The agent's binds noexec as well: the agent's tmpfs behind some of
	 * them is, and inside the guest's user namespace a bind cannot drop a
	 * flag its source has (nothing in them is a program). */
	for (int i = 0; i < s->nbinds; i++) {
		const struct na_bind *b = &s->binds[i];
		const char *o[8] = { "rbind", "nosuid", "nodev", b->ro ? "ro" : "rw" };
		int k = 4;

		/* A user's path keeps its mount's locked flags (a user namespace
		 * may not clear them) and is otherwise executable: the job's own
		 * programs live there. */
		if (!b->host || (b->flags & ST_NOEXEC))
			o[k++] = "noexec";
		if (b->host && (b->flags & ST_NOATIME))
			o[k++] = "noatime";
		else if (b->host && (b->flags & ST_RELATIME))
			o[k++] = "relatime";
		if (b->host && (b->flags & ST_NODIRATIME))
			o[k++] = "nodiratime";
		o[k] = NULL;
		add_mount(mounts, b->dst, "bind", b->src, o);
	}
	return mounts;
}

static struct json_object *oci_namespaces(const struct na_ctr_spec *s)
{
	struct json_object *ns;
	char nspath[PATH_MAX];

	ns = json_object_new_array();
	/* A cgroup namespace makes the guest's own cgroup its root, so tools
	 * inside (hwloc in Open MPI) can read the cpuset they are limited to:
	 * without it /proc/self/cpuset names a path the guest cannot see. */
	for (int i = 0; i < 6; i++) {
		/* user first: runc then makes the others inside it, so they
		 * belong to the guest's root and to nothing on the host. */
		static const char *const types[] = { "user", "pid", "mount", "uts", "ipc", "cgroup" };
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "type", json_object_new_string(types[i]));
		/* A pod's: runc joins them (the user namespace first, which is
		 * why the guest's netns belongs to the pod's user namespace). */
		if (s->pod > 0 && i < 2) {
			snprintf(nspath, sizeof(nspath), "/proc/%d/ns/%s", (int)s->pod, types[i]);
			json_object_object_add(o, "path", json_object_new_string(nspath));
		}
		json_object_array_add(ns, o);
	}
	{
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "type", json_object_new_string("network"));
		/* No path: runc makes it after the user namespace, inside it. */
		if (!s->own_netns) {
			snprintf(nspath, sizeof(nspath), "%s/%s", NA_NETNS_DIR, s->netns);
			json_object_object_add(o, "path", json_object_new_string(nspath));
		}
		json_object_array_add(ns, o);
	}
	return ns;
}

/* Sorted and without repeats (a shared placement may repeat a cpu). */
static const char *id_list(const int *in, int n, char *buf, size_t len)
{
	int ids[VHPC_MAX_VCPUS];
	size_t k = 0;

	memcpy(ids, in, sizeof(int) * (size_t)n);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	for (int i = 0; i < n; i++)
		if (!k || ids[k - 1] != ids[i])
			ids[k++] = ids[i];
	return cpulist_format(ids, k, buf, len);
}

/* The nodes themselves; runc binds the host's where it cannot mknod (a
 * user namespace), so the path is the host's too. */
static struct json_object *oci_devices(const struct na_ctr_spec *s)
{
	struct json_object *devs = json_object_new_array();

	for (int i = 0; i < s->ndevices; i++) {
		struct json_object *d = json_object_new_object();

		json_object_object_add(d, "path", json_object_new_string(s->devices[i].path));
		json_object_object_add(d, "type", json_object_new_string("c"));
		json_object_object_add(d, "major", json_object_new_int64(major(s->devices[i].dev)));
		json_object_object_add(d, "minor", json_object_new_int64(minor(s->devices[i].dev)));
		json_object_object_add(d, "fileMode", json_object_new_int(0666));
		json_object_object_add(d, "uid", json_object_new_int(0));
		json_object_object_add(d, "gid", json_object_new_int(0));
		json_object_array_add(devs, d);
	}
	return devs;
}

static struct json_object *oci_resources(const struct na_ctr_spec *s)
{
	struct json_object *res, *dev, *devs, *cpu;
	char list[2048];

	res = json_object_new_object();
	dev = json_object_new_object();
	json_object_object_add(dev, "allow", json_object_new_boolean(0));
	json_object_object_add(dev, "access", json_object_new_string("rwm"));
	/* deny all; runc adds its default devices (null, zero, tty, ...) */
	devs = json_object_new_array();
	json_object_array_add(devs, dev);
	for (int i = 0; i < s->ndevices; i++) {
		dev = json_object_new_object();
		json_object_object_add(dev, "allow", json_object_new_boolean(1));
		json_object_object_add(dev, "type", json_object_new_string("c"));
		json_object_object_add(dev, "major", json_object_new_int64(major(s->devices[i].dev)));
		json_object_object_add(dev, "minor", json_object_new_int64(minor(s->devices[i].dev)));
		json_object_object_add(dev, "access", json_object_new_string("rw"));
		json_object_array_add(devs, dev);
	}
	json_object_object_add(res, "devices", devs);
	if (s->mem_limit) {
		struct json_object *mem = json_object_new_object();

		json_object_object_add(mem, "limit", json_object_new_int64((int64_t)s->mem_limit));
		json_object_object_add(res, "memory", mem);
	}
	cpu = json_object_new_object();
	json_object_object_add(cpu, "cpus", json_object_new_string(id_list(s->place->cpus, s->place->ncpus, list, sizeof(list))));
	json_object_object_add(cpu, "mems", json_object_new_string(id_list(s->place->mems, s->place->nmems, list, sizeof(list))));
	json_object_object_add(res, "cpu", cpu);
	return res;
}

int na_oci_config(const struct na_ctr_spec *s, const char *rootfs_path,
		  struct json_object **out, struct verr *err)
{
	struct json_object *c, *root, *lin;
	char cg[128];

	*out = NULL;
	if (check_spec(s, err) < 0)
		return verr_wrap(err, "guest %s-%d", s->job ? s->job : "?", s->index);

	c = json_object_new_object();
	json_object_object_add(c, "ociVersion", json_object_new_string("1.0.2"));
	json_object_object_add(c, "process", oci_process(s));
	root = json_object_new_object();
	json_object_object_add(root, "path", json_object_new_string(rootfs_path));
	json_object_object_add(root, "readonly", json_object_new_boolean(1));
	json_object_object_add(c, "root", root);
	json_object_object_add(c, "hostname", json_object_new_string(s->hostname));
	json_object_object_add(c, "mounts", oci_mounts(s));

	lin = json_object_new_object();
	json_object_object_add(lin, "namespaces", oci_namespaces(s));
	json_object_object_add(lin, "uidMappings", id_mapping(s->uid));
	json_object_object_add(lin, "gidMappings", id_mapping(s->gid));
	json_object_object_add(lin, "seccomp", na_seccomp_profile());
	/* Absolute, so it lands at <hierarchy>/vhpc/<job>/<index> wherever the
	 * agent itself sits (cleanup finds it there by name). */
	snprintf(cg, sizeof(cg), "/vhpc/%s/%d", s->job, s->index);
	json_object_object_add(lin, "cgroupsPath", json_object_new_string(cg));

	json_object_object_add(lin, "resources", oci_resources(s));
	if (s->ndevices)
		json_object_object_add(lin, "devices", oci_devices(s));
	json_object_object_add(lin, "maskedPaths", strarray(masked));
	json_object_object_add(lin, "readonlyPaths", strarray(readonly));
	json_object_object_add(c, "linux", lin);
	*out = c;
	return 0;
}
