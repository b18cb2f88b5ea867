/*
 * The node's fabric and PCI functions (scheduler/README.md, "Resources"):
 * what it reports when it registers, from the cluster file's fabric
 * section checked against what exists here, and the controller's share of
 * them for a job (job_prepare's fabric and pci) checked against the same
 * list before anything uses them.
 */
#include "lib/cluster.h"
#include "lib/fabric.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "daemon.h"

#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A short sysfs attribute of an object under dir (a sysfs folder whose
 * name came from the cluster file or libibverbs and was checked as a
 * plain name): read relative to dir's descriptor, the attribute itself
 * never through a link.  0 and the first line in buf, or -1. */
int vd_sysfs_read(const char *dir, const char *rel, char *buf, size_t len)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	ssize_t n;

	if (dfd < 0)
		return -1;
	fd = openat(dfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* numa_node: -1 where the platform has no NUMA information. */
static int numa_of(const char *dir, const char *rel)
{
	char buf[16];
	long v;

	if (vd_sysfs_read(dir, rel, buf, sizeof(buf)) < 0)
		return -1;
	v = strtol(buf, NULL, 10);
	return v >= 0 && v <= 4095 ? (int)v : -1;
}

/* RoCE and InfiniBand need a device on the link (soft-RoCE makes its own
 * per guest): one whose port carries it, as rdma.c read it from sysfs. */
static bool rdma_on(const char *link)
{
	for (size_t i = 0; vd.rdma && i < json_object_array_length(vd.rdma); i++) {
		struct json_object *nd;

		if (json_object_object_get_ex(json_object_array_get_idx(vd.rdma, i), "netdev", &nd) &&
		    !strcmp(json_object_get_string(nd), link))
			return true;
	}
	return false;
}

void vd_fabric_report(struct json_object *req, const char *name, bool simulated)
{
	const struct cluster_fabric_node *fn = cluster_fabric_node(&vd.cl, name);
	const char *link = cluster_fabric_link(&vd.cl, name);
	struct json_object *pa = json_object_new_array();

	if (link && !simulated && !netdev_exists(link))
		log_warn("fabric link %s (the cluster file's) does not exist on this node: no fabric here", link);
	else if (link && !simulated && vd.cl.fabric.mode != FABRIC_SOFT_ROCE && !rdma_on(link))
		log_warn("fabric link %s has no RDMA device (libibverbs lists none on it): no %s fabric here", link,
			 fabric_mode_names[vd.cl.fabric.mode]);
	else if (link)
		json_object_object_add(req, "fabric_link", json_object_new_string(link));
	for (size_t i = 0; fn && i < fn->pci.n; i++) {
		const struct cluster_pci *p = &((const struct cluster_pci *)fn->pci.v)[i];
		struct json_object *e;
		char rel[64];

		if (!simulated && !fs_entry_exists("/sys/bus/pci/devices", p->addr)) {
			log_warn("PCI function %s (fabric.nodes %s, class %s) does not exist on this node: not offered",
				 p->addr, name, p->cls);
			continue;
		}
		e = json_object_new_object();
		json_object_object_add(e, "addr", json_object_new_string(p->addr));
		json_object_object_add(e, "class", json_object_new_string(p->cls));
		snprintf(rel, sizeof(rel), "%s/numa_node", p->addr);
		json_object_object_add(e, "numa", json_object_new_int(simulated ? -1 : numa_of("/sys/bus/pci/devices", rel)));
		json_object_array_add(pa, e);
	}
	/* Absent rather than empty: a node without functions registers as
	 * it did before they existed. */
	if (json_object_array_length(pa))
		json_object_object_add(req, "pci", pa);
	else
		json_object_put(pa);
}

static bool listed(const struct cluster_fabric_node *fn, const char *addr)
{
	for (size_t i = 0; fn && i < fn->pci.n; i++)
		if (!strcmp(((const struct cluster_pci *)fn->pci.v)[i].addr, addr))
			return true;
	return false;
}

int vd_fabric_spec(struct vjob *j, const char *node, struct na_job_spec *s, struct verr *err)
{
	const struct cluster_fabric_node *fn = cluster_fabric_node(&vd.cl, node);
	char a[20];

	if (j->p.rdma) {
		const char *link = cluster_fabric_link(&vd.cl, node);

		if (vd.cl.fabric.mode != j->p.fabric_mode)
			return verr_set(err, "the job's fabric is %s, but this node's cluster file says fabric.mode %s",
					fabric_mode_names[j->p.fabric_mode], fabric_mode_names[vd.cl.fabric.mode]);
		if (!link)
			return verr_set(err, "the job needs the fabric, and this node's cluster file names no fabric link");
		s->rdma = true;
		s->rdma_asked = j->p.rdma_asked;
		s->fabric_link = link;
		s->fabric_vlan = j->p.vlan;
		s->fabric_pkey = (uint16_t)j->p.pkey;
		s->fabric_subnet = j->p.fsubnet;
	}
	for (int i = 0; i < j->p.npci; i++) {
		int k;

		/* The controller picks from what the node reported, which is
		 * the admin's list: anything else is refused, never trusted
		 * because the function exists. */
		if (!listed(fn, j->p.pci[i]))
			return verr_set(err, "PCI function %s is not one this node's cluster file offers (fabric.nodes: %s)",
					j->p.pci[i], node);
		for (k = 0; k < j->p.nhere && j->p.here[k] != j->p.pci_guest[i]; k++)
			;
		if (k == j->p.nhere)
			return verr_set(err, "PCI function %s: guest %d is not on this node", j->p.pci[i], j->p.pci_guest[i]);
		j->pci[i] = j->p.pci[i];
		j->pci_local[i] = k;
	}
	s->pci = j->pci;
	s->pci_guest = j->pci_local;
	s->npci = j->p.npci;
	s->fabric_node = fn;
	if (s->rdma)
		log_info("job %lld on %s: fabric %s on %s, %s %d, subnet %s/%d%s", (long long)j->p.job, node,
			 fabric_mode_names[j->p.fabric_mode], s->fabric_link, s->fabric_pkey ? "pkey" : "vlan",
			 s->fabric_pkey ? s->fabric_pkey : s->fabric_vlan, ipv4_format(s->fabric_subnet.addr, a, sizeof(a)),
			 s->fabric_subnet.prefix, s->rdma_asked ? " (--rdma: the job needs it)" : "");
	for (int i = 0; i < s->npci; i++)
		log_info("job %lld on %s: PCI function %s for guest %d", (long long)j->p.job, node, s->pci[i],
			 j->p.pci_guest[i]);
	return 0;
}
