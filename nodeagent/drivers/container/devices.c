/*
 * The character devices a container guest gets for the job's fabric: its
 * own RDMA device's uverbs node, which the agent checked against what the
 * kernel named (nodeagent/net/fabric.c), and the RDMA CM node, whose
 * connections the kernel keeps to the network namespace that makes them.
 * Nothing else of /dev/infiniband: another job's uverbs node is neither
 * in the guest's /dev nor allowed by its device cgroup.
 */
#include "lib/err.h"
#include "nodeagent/drivers/container/container.h"
#include "nodeagent/net/net.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define RDMA_CM "/dev/infiniband/rdma_cm"

int na_ctr_fabric_devices(const struct na_fabric_guest *g, struct na_chardev out[2], int *n, struct verr *err)
{
	struct stat st;

	*n = 0;
	if (!g->uverbs[0])
		return verr_set(err, "guest g%d has no RDMA device", g->index);
	out[(*n)++] = (struct na_chardev){ .path = g->uverbs, .dev = g->uverbs_dev };
	if (lstat(RDMA_CM, &st) < 0) {
		/* rdma_ucm not loaded: verbs work, connection setup by RDMA CM not. */
		if (errno == ENOENT)
			return 0;
		return verr_errno(err, "%s", RDMA_CM);
	}
	/* A misc device (major 10); anything else there is not the kernel's. */
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != 10)
		return verr_set(err, "%s is not the RDMA CM character device", RDMA_CM);
	out[(*n)++] = (struct na_chardev){ .path = RDMA_CM, .dev = st.st_rdev };
	return 0;
}
