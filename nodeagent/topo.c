/* Topology from hwloc (this machine, a synthetic description or an XML
 * export), flattened into the model placement needs. */
#include "na.h"
#include "topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_node_os(const void *a, const void *b)
{
	hwloc_obj_t x = *(hwloc_obj_t const *)a, y = *(hwloc_obj_t const *)b;

	return (x->os_index > y->os_index) - (x->os_index < y->os_index);
}

static int pkg_of(hwloc_topology_t h, hwloc_obj_t o)
{
	hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, o);

	return p ? (int)p->logical_index : -1;
}

static uint64_t huge2m_free(int node)
{
	char path[128], *buf;
	size_t len;
	long long v = 0;
	struct verr e;

	snprintf(path, sizeof(path),
		 "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/free_hugepages", node);
	if (read_file(path, &buf, &len, 64, &e) < 0)
		return 0;
	buf[strcspn(buf, "\n")] = 0;
	if (parse_ll(buf, 0, 1LL << 40, &v) < 0)
		v = 0;
	free(buf);
	return (uint64_t)v;
}

/* Cores are the unit of placement.  A NUMA node owns the cores inside its
 * cpuset that no earlier node claimed (nodes sharing a cpuset, such as
 * DRAM + HBM pairs, leave the later one memory-only for placement). */
static int flatten(struct na_topo *t, struct verr *err)
{
	hwloc_topology_t h = t->h;
	int nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
	int npu = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
	hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) > 0 ?
		HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
	hwloc_obj_t *numa;
	hwloc_bitmap_t claimed;

	if (nnuma <= 0 || npu <= 0)
		return verr_set(err, "topology has no NUMA node or no PU");
	numa = calloc(nnuma, sizeof(*numa));
	t->nodes = calloc(nnuma, sizeof(*t->nodes));
	t->cores = calloc(npu, sizeof(*t->cores));
	t->pus = calloc(npu, sizeof(*t->pus));
	claimed = hwloc_bitmap_alloc();
	if (!numa || !t->nodes || !t->cores || !t->pus || !claimed) {
		free(numa);
		hwloc_bitmap_free(claimed);
		return verr_set(err, "out of memory");
	}
	for (int i = 0; i < nnuma; i++)
		numa[i] = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, i);
	qsort(numa, nnuma, sizeof(*numa), cmp_node_os);

	for (int i = 0; i < nnuma; i++) {
		struct na_node *nd = &t->nodes[t->nnodes++];
		hwloc_obj_t core = NULL;

		nd->os_index = (int)numa[i]->os_index;
		nd->mem = numa[i]->attr ? numa[i]->attr->numanode.local_memory : 0;
		nd->pkg = pkg_of(h, numa[i]);
		nd->first_core = t->ncores;
		if (t->this_machine)
			nd->huge2m_free = huge2m_free(nd->os_index);
		if (!numa[i]->cpuset || hwloc_bitmap_iszero(numa[i]->cpuset))
			continue;
		while ((core = hwloc_get_next_obj_inside_cpuset_by_type(h, numa[i]->cpuset,
									core_type, core))) {
			struct na_core *c;
			hwloc_obj_t pu = NULL;

			if (hwloc_bitmap_intersects(core->cpuset, claimed))
				continue;
			if (t->ncores >= npu)
				break;
			c = &t->cores[t->ncores];
			c->node = t->nnodes - 1;
			c->pkg = pkg_of(h, core);
			c->first_pu = t->npus;
			while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(h, core->cpuset,
									    HWLOC_OBJ_PU, pu))) {
				if (t->npus >= npu)
					break;
				t->pus[t->npus++] = (int)pu->os_index;
				c->npu++;
			}
			if (!c->npu)
				continue;
			hwloc_bitmap_or(claimed, claimed, core->cpuset);
			if (nd->pkg < 0)
				nd->pkg = c->pkg;
			t->ncores++;
			nd->ncores++;
		}
	}
	free(numa);
	hwloc_bitmap_free(claimed);
	if (!t->ncores)
		return verr_set(err, "topology has no core inside any NUMA node");
	return 0;
}

int na_topo_load(struct na_topo **out, const char *spec, struct verr *err)
{
	struct na_topo *t = calloc(1, sizeof(*t));
	size_t n = spec ? strlen(spec) : 0;

	*out = NULL;
	if (!t)
		return verr_set(err, "out of memory");
	if (hwloc_topology_init(&t->h) < 0) {
		free(t);
		return verr_errno(err, "hwloc_topology_init");
	}
	if (!n) {
		t->this_machine = true;
	} else if (!strncmp(spec, "synthetic:", 10)) {
		if (hwloc_topology_set_synthetic(t->h, spec + 10) < 0) {
			verr_set(err, "topology '%s': hwloc rejects the synthetic description (for example 'synthetic:pack:2 numa:2 core:8 pu:2')", spec);
			goto fail;
		}
	} else if (n > 4 && !strcmp(spec + n - 4, ".xml")) {
		if (hwloc_topology_set_xml(t->h, spec) < 0) {
			verr_errno(err, "topology '%s': cannot use the hwloc XML file", spec);
			goto fail;
		}
	} else {
		verr_set(err, "topology '%s': expected 'synthetic:DESCRIPTION', a path ending .xml, or nothing for this machine", spec);
		goto fail;
	}
	if (hwloc_topology_load(t->h) < 0) {
		verr_errno(err, "topology '%s': hwloc cannot load it", n ? spec : "this machine");
		goto fail;
	}
	if (flatten(t, err) < 0) {
		verr_wrap(err, "topology '%s'", n ? spec : "this machine");
		goto fail;
	}
	*out = t;
	return 0;
fail:
	na_topo_free(t);
	return -1;
}

void na_topo_free(struct na_topo *t)
{
	if (!t)
		return;
	if (t->h)
		hwloc_topology_destroy(t->h);
	free(t->nodes);
	free(t->cores);
	free(t->pus);
	free(t);
}

int na_topo_numa(const struct na_topo *t, struct na_numa_info *out, int max)
{
	for (int i = 0; i < t->nnodes && i < max; i++) {
		out[i].os_index = t->nodes[i].os_index;
		out[i].ncores = t->nodes[i].ncores;
		out[i].mem_bytes = t->nodes[i].mem;
		out[i].hugepages_2m_free = t->nodes[i].huge2m_free;
	}
	return t->nnodes;
}
