/* The job's shared-memory region for the vmshm BTL: one file per job and
 * host that every co-located guest maps (bind mount for containers, the
 * ivshmem BAR for kvm guests).
 *
 * It lives alone in a tmpfs mounted for it at <job dir>/vmshm:
 *  - huge=always: 2 MiB pages under the rings.  Measured side by side on
 *    this project's 2-core machine (mpi-plugins/btl_vmshm/README.md,
 *    "Where the time goes"), 1 KiB Sendrecv took 1.11-1.62x vader's time
 *    on /dev/shm's 4 KiB pages and 0.86-0.97x on 2 MiB pages.  /dev/shm
 *    and memfds follow the host's shmem_enabled (Debian: never); a mount's
 *    own huge= option does not.
 *  - mpol=bind to the NUMA nodes of the job's guests on this host, so the
 *    rings are never on a node none of the ranks runs on;
 *  - size= caps what guests can make the host allocate through the file
 *    at the power of two a kvm BAR rounds the region up to;
 *  - under the job dir, so the crash sweep unmounts it with the rest. */
#include "lib/err.h"
#include "lib/log.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/job.h"
#include "lib/vmshm/vmshm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rings of 1 MiB: the size the BTL's bandwidth was measured with. */
#define VMSHM_RING (1u << 20)
#define HUGE_PAGE (2ull << 20)

void na_vmshm_path(const struct na_jobdir *jd, char *path, size_t len)
{
	snprintf(path, len, "%s/vmshm/region", jd->path);
}

static uint64_t pow2_at_least(uint64_t v)
{
	uint64_t p = HUGE_PAGE;

	while (p < v)
		p <<= 1;
	return p;
}

/* "0", "0,1": the nodes any of the job's guests here has memory on. */
static void job_nodes(const struct na_placement *place, int n, char *buf, size_t len)
{
	bool seen[VHPC_MAX_NODES] = { false };
	size_t o = 0;

	buf[0] = 0;
	for (int g = 0; g < n; g++)
		for (int i = 0; i < place[g].nmems; i++) {
			int m = place[g].mems[i];

			if (m < 0 || m >= VHPC_MAX_NODES || seen[m])
				continue;
			seen[m] = true;
		}
	for (int m = 0; m < VHPC_MAX_NODES && o + 8 < len; m++)
		if (seen[m])
			o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", m);
}

/* The mount, with what the kernel takes of huge pages and the policy:
 * a kernel without shmem THP refuses huge=, one without NUMA mpol=. */
static int mount_region_fs(const char *dir, const char *job, uint64_t cap, const char *nodes,
			   char *how, size_t howlen, struct verr *err)
{
	char src[64], opts[160];
	static const struct { bool huge, bind; } tries[] = {
		{ true, true }, { true, false }, { false, true }, { false, false },
	};

	snprintf(src, sizeof(src), "vhpc-%s", job);
	for (size_t t = 0; t < sizeof(tries) / sizeof(tries[0]); t++) {
		if (tries[t].bind && !nodes[0])
			continue;
		int o = snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)cap);
		if (tries[t].huge)
			o += snprintf(opts + o, sizeof(opts) - (size_t)o, ",huge=always");
		if (tries[t].bind)
			snprintf(opts + o, sizeof(opts) - (size_t)o, ",mpol=bind:%s", nodes);
		if (mount(src, dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) == 0) {
			bool no_huge = !tries[t].huge, no_bind = nodes[0] && !tries[t].bind;

			snprintf(how, howlen, "%s pages%s%s%s", tries[t].huge ? "2 MiB" : "4 KiB",
				 tries[t].bind ? ", memory on node" : "", !tries[t].bind ? "" : strchr(nodes, ',') ? "s " : " ",
				 tries[t].bind ? nodes : "");
			if (no_huge || no_bind)
				log_warn("job %s: vmshm region without %s%s%s: the kernel refused the tmpfs option", job,
					 no_huge ? "huge pages (huge=)" : "", no_huge && no_bind ? " and " : "",
					 no_bind ? "a NUMA policy (mpol=)" : "");
			return 0;
		}
		if (errno != EINVAL)
			break;
	}
	return verr_errno(err, "vmshm region: cannot mount a tmpfs on %s", dir);
}

int na_vmshm_create(const struct na_jobdir *jd, int nranks, const struct na_placement *place,
		    int nguests, char *path, size_t len, uint64_t *size, char *how, size_t howlen,
		    struct verr *err)
{
	char dir[PATH_MAX], nodes[64];
	uint64_t sz;
	int fd;

	if (nranks < 2 || (unsigned)nranks > VMSHM_MAX_SLOTS)
		return verr_set(err, "vmshm region: %d ranks on one host (2..%d supported)", nranks, VMSHM_MAX_SLOTS);
	sz = vmshm_region_size_for((uint32_t)nranks, VMSHM_RING);
	if (snprintf(dir, sizeof(dir), "%s/vmshm", jd->path) >= (int)sizeof(dir))
		return verr_set(err, "vmshm region: job dir %s is too long", jd->path);
	na_vmshm_path(jd, path, len);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return verr_errno(err, "vmshm region: cannot create %s", dir);
	job_nodes(place, nguests, nodes, sizeof(nodes));
	if (mount_region_fs(dir, jd->job, pow2_at_least(sz), nodes, how, howlen, err) < 0)
		return -1;
	/* Fresh and all zero: the first rank to attach formats it. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		verr_errno(err, "vmshm region %s", path);
		(void)umount2(dir, MNT_DETACH);
		return -1;
	}
	if (ftruncate(fd, (off_t)sz) < 0) {
		verr_errno(err, "vmshm region %s: cannot size it to %llu bytes", path, (unsigned long long)sz);
		close(fd);
		(void)umount2(dir, MNT_DETACH);
		return -1;
	}
	close(fd);
	*size = sz;
	return 0;
}

int na_vmshm_remove(const char *path, struct verr *err)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash || (size_t)(slash - path) >= sizeof(dir))
		return verr_set(err, "vmshm region %s: not a path in a job dir", path);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = 0;
	if (umount2(dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return verr_errno(err, "cannot unmount %s", dir);
	return 0;
}
