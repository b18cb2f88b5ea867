/*
 * A Slurm job's part on this node, turned into the node agent's job spec
 * (spec.c; private to vhpc-slurmjob).
 */
#ifndef VHPC_SLURM_SPEC_H
#define VHPC_SLURM_SPEC_H

#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fabric_local.h"
#include "lib/jobpaths.h"
#include "lib/tuning.h"
#include "nodeagent/nodeagent.h"
#include "slurm/slurm.h"

#include <limits.h>
#include <stdint.h>

struct vs_job {
	uint32_t id;               /* Slurm's job id */
	struct vs_opts o;
	uid_t uid;
	gid_t gid;
	bool have_ids;             /* uid and gid were read (even if the rest failed) */
	char node[64];             /* this node's Slurm name */
	char **names;              /* the job's nodes, Slurm's order */
	int nnodes, node_index;
	int cpus[VS_MAX_NODES];    /* the job's CPUs on each */
	int ncpus;
	char workdir[PATH_MAX];    /* where the job was submitted */
	char local[16];            /* the node agent's job id here */
	int vcpus, nguests, ntotal;
	int *index, *ranks;
	uint32_t *peers;
	int npeers;
	uint32_t *addr;            /* [nnodes] each node's underlay address */
	uint32_t *guest_node;      /* [ntotal] each guest's node's (vs_guest_nodes) */
	struct na_topo *topo;      /* this machine, cut to the job's CPUs */
	struct cluster_cfg cl;
	bool have_cl;
	struct job_paths paths;
	char label[16], host_id[160];
	struct fabric_claim fab;   /* its VLAN or pkey and functions here */
	struct na_job_spec s;
};

/* Everything but the cancel callback; cores is S_JOB_ALLOC_CORES. */
struct vs_site;
int vs_job_load(struct vs_job *j, uint32_t id, const char *opts_path, const char *cores, const struct vs_site *site,
		struct verr *err);
void vs_job_free(struct vs_job *j);

#endif
