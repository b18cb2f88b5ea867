/*
 * Placement: the host topology (hwloc) and which CPUs and NUMA nodes each
 * guest of a job gets.  The policy is pure over a topology, so tests load
 * synthetic machines (hwloc XML or a "2x8" spec).
 */
#ifndef VHPC_NA_PLACE_H
#define VHPC_NA_PLACE_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/consts.h"
#include "lib/err.h"

struct na_jobdir;

struct na_topo;

/* spec: NULL = this machine; "synthetic:pack:2 numa:2 core:8 pu:2" = an
 * hwloc synthetic description; a path ending .xml = an hwloc XML export. */
int na_topo_load(struct na_topo **out, const char *spec, struct verr *err);
void na_topo_free(struct na_topo *t);
/* Keeps only the PUs (os indexes) in cpus, dropping NUMA nodes left without
 * any: a node agent that owns part of a machine (one per socket, or the
 * "nodes" of a test cluster on one host). */
int na_topo_restrict(struct na_topo *t, const int *cpus, int n, struct verr *err);

/* The PUs (os indexes) of cores given by hwloc logical index, the way
 * Slurm numbers a node's cores (S_JOB_ALLOC_CORES): *pus is malloc'd.  An
 * error names a core the topology lacks. */
int na_topo_core_pus(const struct na_topo *t, const int *cores, int n, int **pus, int *npus, struct verr *err);

struct na_numa_info {
	int os_index;          /* host NUMA node number */
	int ncores;
	uint64_t mem_bytes;    /* memory of the node (0 when hwloc cannot tell) */
	uint64_t hugepages_2m_free;
};
/* Fills up to max entries; returns the number of NUMA nodes. */
int na_topo_numa(const struct na_topo *t, struct na_numa_info *out, int max);

/* The host NUMA node (os index) of each CPU of placement p, into out[]
 * (p->ncpus entries); an error names a CPU the topology lacks. */
struct na_placement;
int na_topo_cpu_nodes(const struct na_topo *t, const struct na_placement *p, int *out,
		      struct verr *err);

/* ------------------------------------------------------------ placement */

struct na_place_req {
	int nguests;
	int vcpus;             /* per guest */
	uint64_t mem;          /* per guest */
	bool oversubscribe;    /* allow guests to share host cores */
	/* Host CPUs (PU os indexes) already pinned by other live jobs. */
	const int *busy_cpus;
	int nbusy;
};

struct na_placement {
	int ncpus;
	int cpus[VHPC_MAX_VCPUS];  /* host PU os index for vCPU i: 1:1 pinning */
	int nmems;
	int mems[VHPC_MAX_NODES];  /* host NUMA nodes holding the guest's memory */
	bool split;              /* did not fit on one NUMA node */
	bool shared;             /* shares cores with another guest (oversubscribe) */
};

/* One placement per guest in out[0..nguests-1].  A guest's cores and memory
 * sit on one NUMA node when they fit there (best fit), else spread over the
 * fewest nodes, one package first (split; mems[0] is the node of its first
 * core).  One vCPU per physical core, pinned to the core's first PU; the
 * SMT siblings stay idle and go to no other guest.  A busy PU makes its
 * whole core busy.  Without oversubscribe no two guests share a core; with
 * it, placement is still exclusive when that fits, else vCPUs spread over
 * the least loaded cores, shared is set and a warning logged.  Fails with a
 * message that says what was asked, what did not fit and what is free. */
int na_place(const struct na_topo *t, const struct na_place_req *r,
	     struct na_placement *out, struct verr *err);

/* Host CPUs pinned by the jobs of this run dir (from their runtime dirs):
 * live ones, and dead ones until na_cleanup_stale has removed their guests
 * (which may still run).  *cpus is malloc'd. */
int na_busy_cpus(int **cpus, int *n, struct verr *err);

struct na_jobdir;
/* na_busy_cpus + na_place + na_jobdir_record_cpus under one run-dir lock,
 * so two jobs placed at the same moment never get the same cores.  The
 * request's own busy_cpus are added to those of the other jobs. */
int na_place_job(const struct na_topo *t, const struct na_place_req *r,
		 struct na_jobdir *jd, struct na_placement *out, struct verr *err);

#endif
