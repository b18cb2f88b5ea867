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
#include "nodeagent/nodeagent.h"

struct na_jobdir;

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

struct na_jobdir;
/* na_busy_cpus + na_place + na_jobdir_record_cpus under one run-dir lock,
 * so two jobs placed at the same moment never get the same cores.  The
 * request's own busy_cpus are added to those of the other jobs. */
int na_place_job(const struct na_topo *t, const struct na_place_req *r,
		 struct na_jobdir *jd, struct na_placement *out, struct verr *err);

#endif
