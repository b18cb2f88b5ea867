/*
 * The fabric and PCI functions as resources (scheduler/README.md,
 * "Resources"): a job's guests get nodes with the fabric when it asks
 * (--rdma), functions of the classes it asks for (--device CLASS[:N]),
 * each held by one guest at a time; a job on the fabric holds a VLAN
 * (RoCE) or partition key (InfiniBand) and a fabric subnet of the cluster
 * file's pools until its last node has torn it down.  What a job holds is
 * stored with it (its net object), so a restarted controller knows.
 */
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/inet.h"
#include "lib/log.h"
#include "ctld.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctld_fabric_resolve(struct cjob *j)
{
	char why[256];

	j->rdma_want = j->spec.rdma;
	j->ndev = 0;
	for (size_t i = 0; i < j->spec.devices.n && j->ndev < JOB_DEVICES_MAX; i++) {
		struct sched_devreq *d = &j->dev[j->ndev];

		/* The spec passed job_spec_check at submit. */
		if (job_device_parse(j->spec.devices.v[i], d->cls, &d->n, why, sizeof(why)) == 0)
			j->ndev++;
	}
}

struct sched_req ctld_job_req(const struct cjob *j, int nguests)
{
	struct sched_req r = { nguests, j->vcpus, j->mem, j->rdma_want == JOB_RDMA_ON, j->ndev, { { { 0 }, 0 } } };

	memcpy(r.dev, j->dev, sizeof(r.dev));
	return r;
}

static bool node_has_fabric(struct ctld *ctl, const struct cnode *n)
{
	return ctl->cl.fabric.mode != FABRIC_NONE && n->fabric_link[0];
}

void ctld_fabric_caps(struct ctld *ctl, const struct cnode *n, struct sched_node *sn)
{
	sn->fabric = node_has_fabric(ctl, n);
	sn->ndev = 0;
	for (int i = 0; i < n->npci; i++) {
		int k;

		for (k = 0; k < sn->ndev && strcmp(sn->dev[k].cls, n->pci[i].cls); k++)
			;
		if (k == sn->ndev) {
			if (sn->ndev == SCHED_MAX_CLASSES)
				continue;
			snprintf(sn->dev[k].cls, sizeof(sn->dev[k].cls), "%s", n->pci[i].cls);
			sn->dev[k].total = sn->dev[k].used = 0;
			sn->ndev++;
		}
		sn->dev[k].total++;
	}
}

bool ctld_fabric_why(struct ctld *ctl, const struct sched_node *sn, const struct sched_req *r, char *why, size_t len)
{
	bool fabric = false;

	for (int i = 0; i < ctl->nnodes; i++)
		fabric |= sn[i].up && sn[i].fabric;
	if (r->rdma && !fabric) {
		snprintf(why, len, "waiting: the job needs the RDMA fabric (--rdma) and no up node has it%s",
			 ctl->cl.fabric.mode == FABRIC_NONE ? " (the cluster file's fabric.mode is none)" : "");
		return true;
	}
	for (int d = 0; d < r->ndev; d++) {
		int most = 0;

		for (int i = 0; i < ctl->nnodes; i++)
			for (int k = 0; sn[i].up && k < sn[i].ndev; k++)
				if (!strcmp(sn[i].dev[k].cls, r->dev[d].cls) && sn[i].dev[k].total > most &&
				    (!r->rdma || sn[i].fabric))
					most = sn[i].dev[k].total;
		if (most < r->dev[d].n) {
			snprintf(why, len, "waiting: %d %s function%s per guest asked for; the most an up node%s offers is %d",
				 r->dev[d].n, r->dev[d].cls, r->dev[d].n == 1 ? "" : "s", r->rdma ? " with the fabric" : "",
				 most);
			return true;
		}
	}
	/* Enough on some node, but not for every guest. */
	for (int d = 0; d < r->ndev; d++) {
		int room = 0;

		for (int i = 0; i < ctl->nnodes; i++)
			for (int k = 0; sn[i].up && (!r->rdma || sn[i].fabric) && k < sn[i].ndev; k++)
				if (!strcmp(sn[i].dev[k].cls, r->dev[d].cls))
					room += sn[i].dev[k].total / r->dev[d].n;
		if (room < r->nguests) {
			snprintf(why, len, "waiting: %d guests with %d %s function%s each; the up nodes%s have %s for %d",
				 r->nguests, r->dev[d].n, r->dev[d].cls, r->dev[d].n == 1 ? "" : "s",
				 r->rdma ? " with the fabric" : "", r->dev[d].n == 1 ? "one" : "them", room);
			return true;
		}
	}
	return false;
}

/* Jobs that hold what they picked: active, or still being torn down. */
static bool holds(const struct cjob *j)
{
	return ctld_job_active(j) || j->ncleanup;
}

static bool tag_held(struct ctld *ctl, const struct cjob *self, int tag)
{
	for (int i = 0; i < ctl->njobs; i++) {
		const struct cjob *o = ctl->jobs[i];

		if (o != self && holds(o) && o->rdma && o->tag == tag)
			return true;
	}
	return false;
}

static bool subnet_held(struct ctld *ctl, const struct cjob *self, struct ipv4net net)
{
	for (int i = 0; i < ctl->njobs; i++) {
		const struct cjob *o = ctl->jobs[i];
		int p = o->fsubnet.prefix < net.prefix ? o->fsubnet.prefix : net.prefix;
		uint32_t mask = p ? ~0u << (32 - p) : 0;

		if (o != self && holds(o) && o->rdma && (o->fsubnet.addr & mask) == (net.addr & mask))
			return true;
	}
	return false;
}

/* Held by another job, or by one of this job's guests already. */
static bool pci_held(struct ctld *ctl, int node, const char *addr)
{
	for (int i = 0; i < ctl->njobs; i++) {
		const struct cjob *o = ctl->jobs[i];

		if (!holds(o))
			continue;
		for (int k = 0; k < o->npci; k++)
			if (o->pci[k].guest < o->nalloc && o->alloc[o->pci[k].guest].node == node &&
			    !strcmp(o->pci[k].addr, addr))
				return true;
	}
	return false;
}

static int pick_tag(struct ctld *ctl, struct cjob *j, char *why, size_t len)
{
	const struct cluster_fabric *f = &ctl->cl.fabric;
	bool ib = f->mode == FABRIC_IB;
	long long lo = ib ? f->pkey_lo : f->vlan_lo, hi = ib ? f->pkey_hi : f->vlan_hi;

	for (long long t = lo; t <= hi; t++)
		if (!tag_held(ctl, j, (int)t)) {
			j->tag = (int)t;
			return 0;
		}
	snprintf(why, len, ib ? "waiting: the fabric's partition key pool (0x%04llx-0x%04llx) is exhausted: every key is held by a job"
			      : "waiting: the fabric's VLAN pool (%lld-%lld) is exhausted: every VLAN is held by a job",
		 lo, hi);
	return -1;
}

/* The lowest free block of the pool, large enough for the job's guests
 * (from .2 on, and the broadcast address). */
static int pick_subnet(struct ctld *ctl, struct cjob *j, char *why, size_t len)
{
	const struct cluster_fabric *f = &ctl->cl.fabric;
	int prefix = (int)f->prefix;
	char a[20];

	while (prefix > f->pool.prefix && (1ull << (32 - prefix)) < (uint64_t)j->nguests + 3)
		prefix--;
	if ((1ull << (32 - prefix)) < (uint64_t)j->nguests + 3) {
		snprintf(why, len, "waiting: %d guests do not fit the fabric pool %s/%d", j->nguests,
			 ipv4_format(f->pool.addr, a, sizeof(a)), f->pool.prefix);
		return -1;
	}
	for (uint64_t k = 0; k < (1ull << (prefix - f->pool.prefix)); k++) {
		struct ipv4net net = { f->pool.addr + (uint32_t)(k << (32 - prefix)), prefix };

		if (!subnet_held(ctl, j, net)) {
			j->fsubnet = net;
			return 0;
		}
	}
	snprintf(why, len, "waiting: the fabric pool %s/%d is exhausted: every /%d is held by a job",
		 ipv4_format(f->pool.addr, a, sizeof(a)), f->pool.prefix, prefix);
	return -1;
}

/* Each guest's functions: the node's of the class that no job holds,
 * those on the guest's NUMA node first. */
static int pick_pci(struct ctld *ctl, struct cjob *j, char *why, size_t len)
{
	int want = 0, got = 0;

	for (int d = 0; d < j->ndev; d++)
		want += j->dev[d].n * j->nalloc;
	free(j->pci);
	j->pci = NULL;
	j->npci = 0;
	if (!want)
		return 0;
	if (!(j->pci = calloc((size_t)want, sizeof(*j->pci)))) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	for (int g = 0; g < j->nalloc; g++) {
		const struct cnode *n = &ctl->nodes[j->alloc[g].node];
		int numa = n->numa[j->alloc[g].take[0].numa].os_index;

		for (int d = 0; d < j->ndev; d++) {
			int left = j->dev[d].n;

			for (int pass = 0; pass < 2 && left; pass++)
				for (int i = 0; i < n->npci && left; i++) {
					const struct cmsg_pci *p = &n->pci[i];

					if (strcmp(p->cls, j->dev[d].cls) || (pass == 0 && p->numa != numa) ||
					    (pass == 1 && p->numa == numa))
						continue;
					j->npci = got;
					if (pci_held(ctl, j->alloc[g].node, p->addr))
						continue;
					j->pci[got].guest = g;
					snprintf(j->pci[got].addr, sizeof(j->pci[got].addr), "%s", p->addr);
					got++;
					j->npci = got;
					left--;
				}
			if (left) {
				snprintf(why, len, "waiting: node %s has no %d free %s function%s for guest %d", n->name,
					 j->dev[d].n, j->dev[d].cls, j->dev[d].n == 1 ? "" : "s", g);
				free(j->pci);
				j->pci = NULL;
				j->npci = 0;
				return -1;
			}
		}
	}
	j->npci = got;
	return 0;
}

int ctld_fabric_room(struct ctld *ctl, const struct cjob *j, char *why, size_t len)
{
	const struct cluster_fabric *f = &ctl->cl.fabric;
	bool ib = f->mode == FABRIC_IB;
	long long lo = ib ? f->pkey_lo : f->vlan_lo, hi = ib ? f->pkey_hi : f->vlan_hi, held = 0;

	if (j->rdma_want != JOB_RDMA_ON || f->mode == FABRIC_NONE)
		return 0;
	/* Tags are unique among the jobs that hold one. */
	for (int i = 0; i < ctl->njobs; i++)
		held += ctl->jobs[i] != j && holds(ctl->jobs[i]) && ctl->jobs[i]->rdma;
	if (held <= hi - lo)
		return 0;
	snprintf(why, len, ib ? "waiting: the fabric's partition key pool (0x%04llx-0x%04llx) is exhausted: every key is held by a job"
			      : "waiting: the fabric's VLAN pool (%lld-%lld) is exhausted: every VLAN is held by a job",
		 lo, hi);
	return -1;
}

int ctld_fabric_pick(struct ctld *ctl, struct cjob *j, char *why, size_t len)
{
	bool all = ctl->cl.fabric.mode != FABRIC_NONE;

	for (int g = 0; g < j->nalloc && all; g++)
		all = node_has_fabric(ctl, &ctl->nodes[j->alloc[g].node]);
	j->rdma = j->rdma_want == JOB_RDMA_ON || (j->rdma_want == JOB_RDMA_AUTO && all);
	j->tag = 0;
	j->fsubnet = (struct ipv4net){ 0, 0 };
	if (j->rdma && (pick_tag(ctl, j, why, len) < 0 || pick_subnet(ctl, j, why, len) < 0)) {
		j->rdma = false;
		j->tag = 0;
		if (j->rdma_want == JOB_RDMA_ON)
			return -1;
		/* --rdma was not asked for: the job runs over TCP now rather
		 * than wait for the fabric. */
		log_info("job %lld runs over TCP: %s", (long long)j->id, why);
	}
	return pick_pci(ctl, j, why, len);
}

void ctld_fabric_to_json(const struct ctld *ctl, const struct cjob *j, struct json_object *net)
{
	char a[20], sub[32];

	if (j->rdma) {
		snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->fsubnet.addr, a, sizeof(a)), j->fsubnet.prefix);
		json_object_object_add(net, "rdma", json_object_new_boolean(true));
		json_object_object_add(net, ctl->cl.fabric.mode == FABRIC_IB ? "pkey" : "vlan", json_object_new_int(j->tag));
		json_object_object_add(net, "fabric_subnet", json_object_new_string(sub));
	}
	if (j->npci) {
		struct json_object *pa = json_object_new_array();

		for (int i = 0; i < j->npci; i++) {
			struct json_object *e = json_object_new_array();

			json_object_array_add(e, json_object_new_int(j->pci[i].guest));
			json_object_array_add(e, json_object_new_string(j->pci[i].addr));
			json_object_array_add(pa, e);
		}
		json_object_object_add(net, "pci", pa);
	}
}

/* Our own rows: read defensively; what does not parse is not held. */
void ctld_fabric_from_json(struct cjob *j, struct json_object *net)
{
	struct json_object *v, *pa;

	if (json_object_object_get_ex(net, "rdma", &v) && json_object_get_boolean(v) &&
	    json_object_object_get_ex(net, "fabric_subnet", &v) &&
	    ipv4net_parse(json_object_get_string(v), false, &j->fsubnet) == 0 &&
	    (json_object_object_get_ex(net, "vlan", &v) || json_object_object_get_ex(net, "pkey", &v))) {
		j->rdma = true;
		j->tag = json_object_get_int(v);
	}
	if (!json_object_object_get_ex(net, "pci", &pa) || !json_object_is_type(pa, json_type_array))
		return;
	free(j->pci);
	j->npci = 0;
	j->pci = calloc(json_object_array_length(pa) + 1, sizeof(*j->pci));
	for (size_t i = 0; j->pci && i < json_object_array_length(pa); i++) {
		struct json_object *e = json_object_array_get_idx(pa, i);
		const char *addr;
		int g;

		if (!json_object_is_type(e, json_type_array) || json_object_array_length(e) != 2)
			continue;
		g = json_object_get_int(json_object_array_get_idx(e, 0));
		addr = json_object_get_string(json_object_array_get_idx(e, 1));
		if (g < 0 || g >= j->nalloc || !pci_addr_ok(addr))
			continue;
		j->pci[j->npci].guest = g;
		snprintf(j->pci[j->npci].addr, sizeof(j->pci[j->npci].addr), "%s", addr);
		j->npci++;
	}
}

void ctld_fabric_prepare(struct ctld *ctl, const struct cjob *j, int node, struct json_object *msg)
{
	struct json_object *pa = json_object_new_array();
	char a[20], sub[32];

	if (j->rdma) {
		struct json_object *f = json_object_new_object();

		snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->fsubnet.addr, a, sizeof(a)), j->fsubnet.prefix);
		json_object_object_add(f, "mode", json_object_new_string(fabric_mode_names[ctl->cl.fabric.mode]));
		json_object_object_add(f, ctl->cl.fabric.mode == FABRIC_IB ? "pkey" : "vlan", json_object_new_int(j->tag));
		json_object_object_add(f, "subnet", json_object_new_string(sub));
		/* Asked for (--rdma): a node whose driver cannot give it refuses
		 * the job rather than run it over TCP (nodeagent.h, rdma). */
		if (j->rdma_want == JOB_RDMA_ON)
			json_object_object_add(f, "asked", json_object_new_boolean(true));
		json_object_object_add(msg, "fabric", f);
	}
	for (int i = 0; i < j->npci; i++) {
		struct json_object *e;

		if (j->alloc[j->pci[i].guest].node != node)
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "guest", json_object_new_int(j->pci[i].guest));
		json_object_object_add(e, "addr", json_object_new_string(j->pci[i].addr));
		json_object_array_add(pa, e);
	}
	if (json_object_array_length(pa))
		json_object_object_add(msg, "pci", pa);
	else
		json_object_put(pa);
}

static const char *pci_class(const struct cnode *n, const char *addr)
{
	for (int i = 0; i < n->npci; i++)
		if (!strcmp(n->pci[i].addr, addr))
			return n->pci[i].cls;
	return "?";
}

void ctld_fabric_job_json(struct ctld *ctl, const struct cjob *j, struct json_object *o)
{
	char a[20], sub[32];

	if (j->rdma_want != JOB_RDMA_AUTO)
		json_object_object_add(o, "rdma_asked", json_object_new_string(job_rdma_names[j->rdma_want]));
	if (j->rdma) {
		snprintf(sub, sizeof(sub), "%s/%d", ipv4_format(j->fsubnet.addr, a, sizeof(a)), j->fsubnet.prefix);
		json_object_object_add(o, "rdma", json_object_new_boolean(true));
		json_object_object_add(o, ctl->cl.fabric.mode == FABRIC_IB ? "pkey" : "vlan", json_object_new_int(j->tag));
		json_object_object_add(o, "fabric_subnet", json_object_new_string(sub));
	} else if (j->nalloc) {
		json_object_object_add(o, "rdma", json_object_new_boolean(false));
	}
	if (j->npci) {
		struct json_object *pa = json_object_new_array();

		for (int i = 0; i < j->npci; i++) {
			struct json_object *e = json_object_new_object();
			const struct cnode *n = &ctl->nodes[j->alloc[j->pci[i].guest].node];

			json_object_object_add(e, "guest", json_object_new_int(j->pci[i].guest));
			json_object_object_add(e, "node", json_object_new_string(n->name));
			json_object_object_add(e, "addr", json_object_new_string(j->pci[i].addr));
			json_object_object_add(e, "class", json_object_new_string(pci_class(n, j->pci[i].addr)));
			json_object_array_add(pa, e);
		}
		json_object_object_add(o, "devices", pa);
	}
}

void ctld_fabric_node_json(struct ctld *ctl, const struct cnode *n, struct json_object *o)
{
	struct json_object *pa = json_object_new_array(), *fj = json_object_new_array();
	int ni = ctld_node_index(ctl, n);

	if (node_has_fabric(ctl, n)) {
		json_object_object_add(o, "fabric", json_object_new_string(fabric_mode_names[ctl->cl.fabric.mode]));
		json_object_object_add(o, "fabric_link", json_object_new_string(n->fabric_link));
	}
	for (int i = 0; i < n->npci; i++) {
		struct json_object *e = json_object_new_object();

		json_object_object_add(e, "addr", json_object_new_string(n->pci[i].addr));
		json_object_object_add(e, "class", json_object_new_string(n->pci[i].cls));
		json_object_object_add(e, "numa", json_object_new_int(n->pci[i].numa));
		for (int k = 0; k < ctl->njobs; k++) {
			const struct cjob *j = ctl->jobs[k];

			for (int p = 0; holds(j) && p < j->npci; p++)
				if (j->alloc[j->pci[p].guest].node == ni && !strcmp(j->pci[p].addr, n->pci[i].addr)) {
					json_object_object_add(e, "job", json_object_new_int64(j->id));
					json_object_object_add(e, "guest", json_object_new_int(j->pci[p].guest));
				}
		}
		json_object_array_add(pa, e);
	}
	json_object_object_add(o, "pci", pa);
	/* The jobs on the fabric here, each in its own VLAN or partition. */
	for (int k = 0; k < ctl->njobs; k++) {
		const struct cjob *j = ctl->jobs[k];
		struct json_object *e;

		if (!holds(j) || !j->rdma || !ctld_job_uses(j, ni))
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "job", json_object_new_int64(j->id));
		json_object_object_add(e, ctl->cl.fabric.mode == FABRIC_IB ? "pkey" : "vlan", json_object_new_int(j->tag));
		json_object_array_add(fj, e);
	}
	json_object_object_add(o, "fabric_jobs", fj);
}

void ctld_fabric_node_take(struct cnode *n, const struct cmsg *m)
{
	snprintf(n->fabric_link, sizeof(n->fabric_link), "%s", m->fabric_link);
	n->npci = m->npci;
	memcpy(n->pci, m->pci, sizeof(n->pci));
}
