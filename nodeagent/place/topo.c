/* Topology from hwloc (this machine, a synthetic description or an XML
 * export), flattened into the model placement needs. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "nodeagent/place/place.h"
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

/* The NUMA node a core belongs to: the most local one, i.e. the node with
 * the smallest cpuset that contains the core (a memory-only node attached
 * higher up, such as CXL memory, covers every core but is never the most
 * local); on a tie (DRAM + HBM pairs) the lower os index. */
static int home_node(hwloc_obj_t core, hwloc_obj_t *numa, int nnuma)
{
	int best = -1, best_w = 0;

	for (int i = 0; i < nnuma; i++) {
		int w;

		if (!numa[i]->cpuset || !hwloc_bitmap_isincluded(core->cpuset, numa[i]->cpuset))
			continue;
		w = hwloc_bitmap_weight(numa[i]->cpuset);
		if (best < 0 || w < best_w) {
			best = i;
			best_w = w;
		}
	}
	return best;
}

/* Cores are the unit of placement; nodes in os-index order, each with its
 * cores in logical order (neighbours share caches). */
static int flatten(struct na_topo *t, struct verr *err)
{
	hwloc_topology_t h = t->h;
	int nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
	int npu = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
	hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) > 0 ?
		HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
	int ncore_objs = hwloc_get_nbobjs_by_type(h, core_type);
	hwloc_obj_t *numa;
	int *home;

	if (nnuma <= 0 || npu <= 0 || ncore_objs <= 0)
		return verr_set(err, "topology has no NUMA node or no PU");
	numa = calloc(nnuma, sizeof(*numa));
	home = calloc(ncore_objs, sizeof(*home));
	t->nodes = calloc(nnuma, sizeof(*t->nodes));
	t->cores = calloc(ncore_objs, sizeof(*t->cores));
	t->pus = calloc(npu, sizeof(*t->pus));
	if (!numa || !home || !t->nodes || !t->cores || !t->pus) {
		free(numa);
		free(home);
		return verr_set(err, "out of memory");
	}
	for (int i = 0; i < nnuma; i++)
		numa[i] = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, i);
	qsort(numa, nnuma, sizeof(*numa), cmp_node_os);
	for (int c = 0; c < ncore_objs; c++)
		home[c] = home_node(hwloc_get_obj_by_type(h, core_type, c), numa, nnuma);

	for (int i = 0; i < nnuma; i++) {
		struct na_node *nd = &t->nodes[t->nnodes++];

		nd->os_index = (int)numa[i]->os_index;
		nd->mem = numa[i]->attr ? numa[i]->attr->numanode.local_memory : 0;
		nd->pkg = pkg_of(h, numa[i]);
		nd->first_core = t->ncores;
		if (t->this_machine)
			nd->huge2m_free = huge2m_free(nd->os_index);
		for (int k = 0; k < ncore_objs; k++) {
			hwloc_obj_t core = hwloc_get_obj_by_type(h, core_type, k), pu = NULL;
			struct na_core *c = &t->cores[t->ncores];

			if (home[k] != i)
				continue;
			c->node = t->nnodes - 1;
			c->pkg = pkg_of(h, core);
			c->first_pu = t->npus;
			c->npu = 0;
			while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(h, core->cpuset,
									    HWLOC_OBJ_PU, pu)) &&
			       t->npus < npu) {
				t->pus[t->npus++] = (int)pu->os_index;
				c->npu++;
			}
			if (!c->npu)
				continue;
			if (nd->pkg < 0)
				nd->pkg = c->pkg;
			t->ncores++;
			nd->ncores++;
		}
	}
	free(numa);
	free(home);
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

int na_topo_restrict(struct na_topo *t, const int *cpus, int n, struct verr *err)
{
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	int rc = -1;

	if (!set)
		return verr_set(err, "out of memory");
	for (int i = 0; i < n; i++) {
		bool known = false;

		for (int k = 0; k < t->npus && !known; k++)
			known = t->pus[k] == cpus[i];
		if (!known) {
			verr_set(err, "cpu %d is not in this topology", cpus[i]);
			goto out;
		}
		hwloc_bitmap_set(set, (unsigned)cpus[i]);
	}
	if (hwloc_topology_restrict(t->h, set, HWLOC_RESTRICT_FLAG_REMOVE_CPULESS) < 0) {
		verr_errno(err, "hwloc cannot restrict the topology to those cpus");
		goto out;
	}
	free(t->nodes);
	free(t->cores);
	free(t->pus);
	t->nodes = NULL;
	t->cores = NULL;
	t->pus = NULL;
	t->nnodes = t->ncores = t->npus = 0;
	rc = flatten(t, err);
out:
	hwloc_bitmap_free(set);
	return rc;
}

int na_topo_core_pus(const struct na_topo *t, const int *cores, int n, int **pus, int *npus, struct verr *err)
{
	int ncores = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_CORE), cap = 0;

	*pus = NULL;
	*npus = 0;
	for (int i = 0; i < n; i++) {
		hwloc_obj_t c = cores[i] >= 0 ? hwloc_get_obj_by_type(t->h, HWLOC_OBJ_CORE, (unsigned)cores[i]) : NULL;
		unsigned pu;

		if (!c || !c->cpuset) {
			free(*pus);
			*pus = NULL;
			*npus = 0;
			return verr_set(err, "core %d: this machine has cores 0-%d", cores[i], ncores - 1);
		}
		hwloc_bitmap_foreach_begin(pu, c->cpuset) {
			if (*npus == cap) {
				int *v = realloc(*pus, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(int));

				if (!v) {
					free(*pus);
					*pus = NULL;
					*npus = 0;
					return verr_set(err, "out of memory");
				}
				*pus = v;
			}
			(*pus)[(*npus)++] = (int)pu;
		}
		hwloc_bitmap_foreach_end();
	}
	return 0;
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

int na_topo_cpu_nodes(const struct na_topo *t, const struct na_placement *p, int *out,
		     struct verr *err)
{
	for (int k = 0; k < p->ncpus; k++) {
		out[k] = -1;
		for (int c = 0; c < t->ncores && out[k] < 0; c++)
			for (int u = 0; u < t->cores[c].npu; u++)
				if (t->pus[t->cores[c].first_pu + u] == p->cpus[k])
					out[k] = t->nodes[t->cores[c].node].os_index;
		if (out[k] < 0)
			return verr_set(err, "CPU %d of the placement is not in the topology", p->cpus[k]);
	}
	return 0;
}
