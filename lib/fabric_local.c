/* A job's fabric and functions on one machine (lib/fabric_local.h). */
#include "lib/fabric_local.h"
#include "lib/fsutil.h"
#include "lib/paths.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The lock named `name` in <run dir>/fabric, taken without waiting; its
 * descriptor, or -1 when another job holds it. */
static int lock(const char *name, struct verr *err)
{
	char dir[600], path[700];
	int fd;

	snprintf(dir, sizeof(dir), "%s/fabric", vhpc_run_dir());
	if (mkdir_p(dir, 0700, err) < 0)
		return -2;
	snprintf(path, sizeof(path), "%s/%s.lock", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return verr_set(err, "%s: cannot open it", path) - 1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int claim_tag(const struct cluster_cfg *cl, long long first, struct fabric_claim *c, struct verr *err)
{
	const struct cluster_fabric *f = &cl->fabric;
	bool ib = f->mode == FABRIC_IB;
	long long lo = ib ? f->pkey_lo : f->vlan_lo, hi = ib ? f->pkey_hi : f->vlan_hi, n = hi - lo + 1;
	/* One subnet per tag: the pool's blocks bound how many tags are used. */
	long long blocks = 1ll << (f->prefix - f->pool.prefix);

	if (n > blocks)
		n = blocks;
	/* Slurm: every node of the job derives the same tag and subnet from
	 * its id, so there is no other to take (a collision is refused). */
	for (long long k = 0; k < (first >= 0 ? 1 : n); k++) {
		long long idx = ((first >= 0 ? first : 0) + k) % n;
		char name[32];
		int fd;

		snprintf(name, sizeof(name), "%s-%lld", ib ? "pkey" : "vlan", lo + idx);
		if ((fd = lock(name, err)) == -2 || fd < -1)
			return -1;
		if (fd < 0)
			continue;
		c->fds[c->nfds++] = fd;
		if (ib)
			c->pkey = (int)(lo + idx);
		else
			c->vlan = (int)(lo + idx);
		c->subnet = (struct ipv4net){ f->pool.addr + (uint32_t)(idx << (32 - f->prefix)), (int)f->prefix };
		return 0;
	}
	if (first >= 0)
		return verr_set(err, "the fabric's %s %lld (job id %lld modulo the pool's %lld) is held by another job on this node: "
				"the pool must be larger than the span of job ids that run at once", ib ? "partition key" : "VLAN",
				lo + first % n, first, n);
	return verr_set(err, ib ? "the fabric's partition key pool (0x%04llx-0x%04llx) is exhausted on this machine: every key is held by a job"
			        : "the fabric's VLAN pool (%lld-%lld) is exhausted on this machine: every VLAN is held by a job",
			lo, hi);
}


int fabric_local_claim(const struct cluster_cfg *cl, const char *node, const struct job_spec *js, int nguests,
		       long long first, struct fabric_claim *c, struct verr *err)
{
	const struct cluster_fabric_node *fn = cluster_fabric_node(cl, node);
	const char *link = cluster_fabric_link(cl, node);
	bool have = link && netdev_exists(link);
	char why[256];

	memset(c, 0, sizeof(*c));
	c->node = fn;
	if (js->rdma == JOB_RDMA_ON && !have)
		return verr_set(err, "--rdma: node %s has no fabric (%s)", node,
				!link ? "the cluster file's fabric.mode is none or names no link" : "its fabric link does not exist here");
	if (have && js->rdma != JOB_RDMA_OFF) {
		c->rdma = true;
		c->link = link;
		if (claim_tag(cl, first, c, err) < 0)
			goto fail;
		if ((uint64_t)nguests + 3 > 1ull << (32 - c->subnet.prefix)) {
			verr_set(err, "%d guests do not fit the fabric subnet /%d (fabric.prefix)", nguests, c->subnet.prefix);
			goto fail;
		}
	}
	for (size_t d = 0; d < js->devices.n; d++) {
		char cls[FABRIC_CLASS_MAX + 1];
		int want;

		if (job_device_parse(js->devices.v[d], cls, &want, why, sizeof(why)) < 0) {
			verr_set(err, "%s", why);
			goto fail;
		}
		for (int g = 0; g < nguests; g++) {
			int left = want;

			for (size_t i = 0; fn && i < fn->pci.n && left; i++) {
				const struct cluster_pci *p = &((const struct cluster_pci *)fn->pci.v)[i];
				char name[40];
				int fd;

				if (strcmp(p->cls, cls) || c->npci == FABRIC_LOCAL_MAX ||
				    !fs_entry_exists("/sys/bus/pci/devices", p->addr))
					continue;
				snprintf(name, sizeof(name), "pci-%s", p->addr);
				if ((fd = lock(name, err)) < -1)
					goto fail;
				if (fd < 0)
					continue;
				c->fds[c->nfds++] = fd;
				snprintf(c->pci[c->npci], sizeof(c->pci[c->npci]), "%s", p->addr);
				c->pci_v[c->npci] = c->pci[c->npci];
				c->pci_guest[c->npci++] = g;
				left--;
			}
			if (left) {
				verr_set(err, "%d %s function%s per guest: node %s has too few that exist and are free (fabric.nodes in the cluster file)",
					 want, cls, want == 1 ? "" : "s", node);
				goto fail;
			}
		}
	}
	return 0;
fail:
	fabric_local_release(c);
	return -1;
}

void fabric_local_release(struct fabric_claim *c)
{
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
}
