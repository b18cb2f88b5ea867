/*
 * PCI functions passed through to kvm guests (VFIO).  Root does here what
 * the jailed vhpc-hv cannot: checks each address against the admin's list
 * (the cluster file's fabric.nodes[].pci for this node) and its IOMMU group, moves the function to
 * vfio-pci (driver_override, so nothing else can claim it meanwhile),
 * opens the container, group and device for vhpc-hv, and gives the
 * function back to its own driver after the job.
 *
 * An address is a job's word: it must be exactly DDDD:BB:DD.F in lower-case
 * hex before it is ever used as a name, and it is only ever a name inside
 * /sys/bus/pci/devices (checked to be sysfs) reached through descriptors.
 * What was changed is written to <job dir>/vfio/<address> (the function's
 * own driver) before the change, so the teardown and the crash sweep
 * (na_cleanup_stale) give it back even when the agent or vhpc-hv died.
 */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "kvm_int.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/place/place.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define PCI_DEVS "/sys/bus/pci/devices"
#define PCI_PROBE "/sys/bus/pci/drivers_probe"
#define VFIO_DRIVER "vfio-pci"

bool kvm_vfio_addr_ok(const char *a)
{
	/* DDDD:BB:DD.F, lower-case hex, device 00-1f, function 0-7. */
	static const char shape[] = "xxxx:xx:xx.f";

	if (!a || strlen(a) != sizeof(shape) - 1)
		return false;
	for (size_t i = 0; shape[i]; i++) {
		char c = a[i];

		if (shape[i] == 'x' && !(isdigit((unsigned char)c) || (c >= 'a' && c <= 'f')))
			return false;
		if (shape[i] == 'f' && !(c >= '0' && c <= '7'))
			return false;
		if ((shape[i] == ':' || shape[i] == '.') && c != shape[i])
			return false;
	}
	return strtol(a + 8, NULL, 16) < 32;
}

/* The admin's list: this node's entry in the cluster file, which the
 * caller found (vhpcd by its registered name, `vhpc run` by the host's
 * name, Slurm by its node name) and already picked from; checked again
 * here, where the function is touched. */
static int on_list(const char *addr, const struct cluster_fabric_node *fn, struct verr *err)
{
	for (size_t i = 0; fn && i < fn->pci.n; i++)
		if (!strcmp(((const struct cluster_pci *)fn->pci.v)[i].addr, addr))
			return 0;
	return verr_set(err, "PCI function %s is not on this node's list of functions that may be passed through (the cluster file's fabric.nodes%s%s)",
			addr, fn ? ": " : ", which has no entry for this node", fn ? fn->name : "");
}

/* /sys/bus/pci/devices, checked to be sysfs: names in it are the kernel's. */
static int devs_dir(struct verr *err)
{
	struct statfs sf;
	int d = open(PCI_DEVS, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (d < 0)
		return verr_errno(err, "%s", PCI_DEVS);
	if (fstatfs(d, &sf) < 0 || sf.f_type != SYSFS_MAGIC) {
		close(d);
		return verr_set(err, "%s is not sysfs", PCI_DEVS);
	}
	return d;
}

/* The function's sysfs folder (the kernel's own link to it, its name
 * checked first), or -1. */
static int dev_dir(const char *addr, struct verr *err)
{
	int devs, d;

	if (!kvm_vfio_addr_ok(addr))
		return verr_set(err, "'%.40s' is not a PCI address (DDDD:BB:DD.F, lower-case hex)", addr);
	if ((devs = devs_dir(err)) < 0)
		return -1;
	d = openat(devs, addr, O_PATH | O_DIRECTORY | O_CLOEXEC);
	close(devs);
	if (d < 0)
		return verr_set(err, "PCI function %s does not exist on this node", addr);
	return d;
}

/* The last component of the link `name` in dir (a driver, a group). */
static int link_base(int dir, const char *name, char *out, size_t len)
{
	char buf[PATH_MAX];
	ssize_t n = readlinkat(dir, name, buf, sizeof(buf) - 1);
	const char *b;

	out[0] = 0;
	if (n < 0)
		return -1;
	buf[n] = 0;
	b = strrchr(buf, '/');
	b = b ? b + 1 : buf;
	if (!*b || strlen(b) >= len || strspn(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:") != strlen(b))
		return -1;
	snprintf(out, len, "%s", b);
	return 0;
}

static int write_at(int dir, const char *name, const char *text, struct verr *err)
{
	int fd = openat(dir, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return verr_errno(err, "%s", name);
	n = write(fd, text, strlen(text));
	close(fd);
	if (n != (ssize_t)strlen(text))
		return verr_errno(err, "writing '%s' to %s", text, name);
	return 0;
}

static int probe(const char *addr, struct verr *err)
{
	int fd = open(PCI_PROBE, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return verr_errno(err, "%s", PCI_PROBE);
	n = write(fd, addr, strlen(addr));
	close(fd);
	/* ENODEV/EINVAL: no driver wanted it, which is an answer too. */
	if (n < 0 && errno != ENODEV && errno != EINVAL)
		return verr_errno(err, "%s: probing %s", PCI_PROBE, addr);
	return 0;
}

int kvm_vfio_group(const char *addr, int *group, struct verr *err)
{
	char g[32], *end;
	int d = dev_dir(addr, err);
	long v;

	if (d < 0)
		return -1;
	if (link_base(d, "iommu_group", g, sizeof(g)) < 0) {
		close(d);
		return verr_set(err, "PCI function %s has no IOMMU group: this node has no IOMMU on (intel_iommu=on, "
				"amd_iommu=on)", addr);
	}
	close(d);
	v = strtol(g, &end, 10);
	if (*end || v < 0 || v > 1 << 20)
		return verr_set(err, "PCI function %s: IOMMU group '%s'", addr, g);
	*group = (int)v;
	return 0;
}

int kvm_vfio_check(const char *addr, const struct cluster_fabric_node *fn, const char *const *mine, int nmine,
		   int *numa_node, struct verr *err)
{
	char path[64], drv[64];
	int d, group, numa = -1;
	DIR *gd;
	struct dirent *de;

	if (!kvm_vfio_addr_ok(addr))
		return verr_set(err, "'%.40s' is not a PCI address (DDDD:BB:DD.F, lower-case hex)", addr);
	if (on_list(addr, fn, err) < 0 || kvm_vfio_group(addr, &group, err) < 0 || (d = dev_dir(addr, err)) < 0)
		return -1;
	if (link_base(d, "driver", drv, sizeof(drv)) == 0 && !strcmp(drv, VFIO_DRIVER)) {
		close(d);
		return verr_set(err, "PCI function %s is on vfio-pci already (another job's, or the admin's)", addr);
	}
	{
		int fd = openat(d, "numa_node", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		char b[16] = { 0 };

		if (fd >= 0 && read(fd, b, sizeof(b) - 1) > 0)
			numa = atoi(b);
		if (fd >= 0)
			close(fd);
	}
	close(d);
	*numa_node = numa;
	/* Everything in the group goes to the same guest or the host could
	 * be reached through the others' DMA. */
	snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%d/devices", group);
	if (!(gd = opendir(path)))
		return verr_errno(err, "PCI function %s: %s", addr, path);
	while ((de = readdir(gd))) {
		bool ok = false;

		if (de->d_name[0] == '.')
			continue;
		for (int i = 0; i < nmine; i++)
			ok |= !strcmp(de->d_name, mine[i]);
		if (!ok) {
			verr_set(err, "PCI function %s shares IOMMU group %d with %.16s, which is not given to the same guest",
				 addr, group, de->d_name);
			closedir(gd);
			return -1;
		}
	}
	closedir(gd);
	return 0;
}

static void rec_path(const char *job, const char *addr, char *buf, size_t len)
{
	char dir[PATH_MAX];

	na_job_path(job, dir, sizeof(dir));
	snprintf(buf, len, "%s/vfio%s%s", dir, addr ? "/" : "", addr ? addr : "");
}

int kvm_vfio_bind(const char *job, const char *addr, struct verr *err)
{
	char rec[PATH_MAX + 32], drv[64], line[80];
	int d = dev_dir(addr, err);

	if (d < 0)
		return -1;
	if (link_base(d, "driver", drv, sizeof(drv)) < 0)
		snprintf(drv, sizeof(drv), "-");
	/* The record first: whoever finds it gives the function back. */
	rec_path(job, NULL, rec, sizeof(rec));
	if (mkdir(rec, 0700) < 0 && errno != EEXIST) {
		close(d);
		return verr_errno(err, "%s", rec);
	}
	rec_path(job, addr, rec, sizeof(rec));
	snprintf(line, sizeof(line), "%s\n", drv);
	if (write_file(rec, line, strlen(line), 0600, err) < 0) {
		close(d);
		return -1;
	}
	if (write_at(d, "driver_override", VFIO_DRIVER, err) < 0 ||
	    (strcmp(drv, "-") && write_at(d, "driver/unbind", addr, err) < 0) || probe(addr, err) < 0) {
		close(d);
		return verr_wrap(err, "PCI function %s: binding to vfio-pci", addr);
	}
	if (link_base(d, "driver", drv, sizeof(drv)) < 0 || strcmp(drv, VFIO_DRIVER)) {
		close(d);
		return verr_set(err, "PCI function %s: vfio-pci did not take it (is the vfio-pci module loaded?)", addr);
	}
	close(d);
	return 0;
}

/* Back to the driver it had (the record says which), override cleared. */
static int unbind_one(const char *job, const char *addr, struct verr *err)
{
	char rec[PATH_MAX + 32], drv[64], *want = NULL;
	size_t len;
	int d;

	rec_path(job, addr, rec, sizeof(rec));
	if (read_file(rec, &want, &len, 64, err) < 0)
		return -1;
	want[strcspn(want, "\n")] = 0;
	if ((d = dev_dir(addr, err)) < 0) {
		free(want);
		unlink(rec);   /* the function went away (hot-unplug): nothing to give back */
		return -1;
	}
	if (write_at(d, "driver_override", "\n", err) < 0)
		goto fail;
	if (link_base(d, "driver", drv, sizeof(drv)) == 0 && !strcmp(drv, VFIO_DRIVER) &&
	    write_at(d, "driver/unbind", addr, err) < 0)
		goto fail;
	if (strcmp(want, "-") && probe(addr, err) < 0)
		goto fail;
	if (link_base(d, "driver", drv, sizeof(drv)) < 0)
		snprintf(drv, sizeof(drv), "-");
	if (strcmp(drv, want))
		log_warn("PCI function %s: back from vfio-pci, now on %s (had %s)", addr, drv, want);
	close(d);
	free(want);
	unlink(rec);
	return 0;
fail:
	close(d);
	free(want);
	return verr_wrap(err, "PCI function %s: giving it back", addr);
}

int kvm_vfio_release(const char *job, const char *why, int *restored, struct verr *err)
{
	char dir[PATH_MAX + 32];
	DIR *dd;
	struct dirent *de;
	int rc = 0;

	rec_path(job, NULL, dir, sizeof(dir));
	if (!(dd = opendir(dir)))
		return errno == ENOENT ? 0 : verr_errno(err, "%s", dir);
	while ((de = readdir(dd))) {
		struct verr e;

		if (!kvm_vfio_addr_ok(de->d_name))
			continue;
		if (unbind_one(job, de->d_name, &e) == 0) {
			log_info("%s: job %s: PCI function %s given back to its driver", why, job, de->d_name);
			(*restored)++;
		} else if (rc == 0) {
			*err = e;
			rc = -1;
		}
	}
	closedir(dd);
	rmdir(dir);
	return rc;
}

int kvm_vfio_place_near(struct na_placement *place, int *cpu_node, const int *npci, int nguests, int k, int node)
{
	struct na_placement tmp;
	int tmpn[VHPC_MAX_VCPUS];

	if (node < 0 || place[k].mems[0] == node)
		return -1;
	for (int o = 0; o < nguests; o++) {
		if (o == k || npci[o] || place[o].mems[0] != node)
			continue;
		tmp = place[k], place[k] = place[o], place[o] = tmp;
		memcpy(tmpn, cpu_node + (size_t)k * VHPC_MAX_VCPUS, sizeof(tmpn));
		memcpy(cpu_node + (size_t)k * VHPC_MAX_VCPUS, cpu_node + (size_t)o * VHPC_MAX_VCPUS, sizeof(tmpn));
		memcpy(cpu_node + (size_t)o * VHPC_MAX_VCPUS, tmpn, sizeof(tmpn));
		return o;
	}
	return -1;
}

int kvm_vfio_open(const char *addr, struct kvm_vfio_fds *f, struct verr *err)
{
	struct vfio_group_status gs = { .argsz = sizeof(gs) };
	char path[64];
	int group;

	f->container = f->group = f->device = -1;
	if (kvm_vfio_group(addr, &group, err) < 0)
		return -1;
	f->container = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
	if (f->container < 0)
		return verr_errno(err, "/dev/vfio/vfio");
	if (ioctl(f->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
	    ioctl(f->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) != 1) {
		verr_set(err, "VFIO here has no type1v2 IOMMU");
		goto fail;
	}
	snprintf(path, sizeof(path), "/dev/vfio/%d", group);
	f->group = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (f->group < 0) {
		verr_errno(err, "%s", path);
		goto fail;
	}
	if (ioctl(f->group, VFIO_GROUP_GET_STATUS, &gs) < 0 || !(gs.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		verr_set(err, "IOMMU group %d is not viable: a function in it is still on a host driver", group);
		goto fail;
	}
	if (ioctl(f->group, VFIO_GROUP_SET_CONTAINER, &f->container) < 0 ||
	    ioctl(f->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0) {
		verr_errno(err, "IOMMU group %d: setting up its container", group);
		goto fail;
	}
	f->device = ioctl(f->group, VFIO_GROUP_GET_DEVICE_FD, addr);
	if (f->device < 0) {
		verr_errno(err, "IOMMU group %d: the device fd", group);
		goto fail;
	}
	return 0;
fail:
	kvm_vfio_close(f);
	return verr_wrap(err, "PCI function %s", addr);
}

void kvm_vfio_close(struct kvm_vfio_fds *f)
{
	int *all[] = { &f->device, &f->group, &f->container };

	for (size_t i = 0; i < 3; i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}
