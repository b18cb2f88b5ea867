/* The job's shared-memory region for the vmshm BTL: one file per job and
 * host that every co-located guest maps (bind mount for containers, the
 * ivshmem BAR for kvm guests).  Named vhpc-<job>-vmshm so the crash sweep
 * finds it with the job's other shm files. */
#include "lib/err.h"
#include "nodeagent/jobdir/jobdir.h"
#include "nodeagent/nodeagent.h"
#include "lib/vmshm/vmshm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Rings of 1 MiB: the size the BTL's bandwidth was measured with. */
#define VMSHM_RING (1u << 20)

int na_vmshm_create(const struct na_jobdir *jd, int nranks, char *path, size_t len,
		    uint64_t *size, struct verr *err)
{
	uint64_t sz;
	int fd;

	if (nranks < 2 || (unsigned)nranks > VMSHM_MAX_SLOTS)
		return verr_set(err, "vmshm region: %d ranks on one host (2..%d supported)", nranks, VMSHM_MAX_SLOTS);
	sz = vmshm_region_size_for((uint32_t)nranks, VMSHM_RING);
	snprintf(path, len, "/dev/shm/vhpc-%s-vmshm", jd->job);
	/* Fresh and all zero: the first rank to attach formats it. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_errno(err, "vmshm region %s", path);
	if (ftruncate(fd, (off_t)sz) < 0) {
		verr_errno(err, "vmshm region %s: cannot size it to %llu bytes", path, (unsigned long long)sz);
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	*size = sz;
	return 0;
}

int na_vmshm_remove(const char *job, struct verr *err)
{
	char path[128];

	snprintf(path, sizeof(path), "/dev/shm/vhpc-%s-vmshm", job);
	if (unlink(path) < 0 && errno != ENOENT)
		return verr_errno(err, "cannot remove %s", path);
	return 0;
}
