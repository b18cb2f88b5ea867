/*
 * The topology model placement works on, flattened from hwloc once at load
 * time: NUMA nodes in os-index order, each owning a run of cores in hwloc
 * logical order, each core owning its PUs (hardware threads).
 */
#ifndef VHPC_NA_TOPO_H
#define VHPC_NA_TOPO_H

#include "nodeagent/place/place.h"

#include <hwloc.h>

struct na_core {
	int node;        /* index into na_topo.nodes */
	int pkg;         /* package logical index, -1 when unknown */
	int first_pu;    /* index into na_topo.pus: the PU vCPUs are pinned to */
	int npu;         /* PUs of this core (SMT siblings follow first_pu) */
};

struct na_node {
	int os_index;
	int pkg;
	uint64_t mem;    /* 0 = hwloc cannot tell: no memory check */
	uint64_t huge2m_free;
	int first_core, ncores;
};

struct na_topo {
	hwloc_topology_t h;
	bool this_machine;
	int nnodes, ncores, npus;
	struct na_node *nodes;
	struct na_core *cores;
	int *pus;        /* PU os indexes, grouped by core */
};

#endif
