/*
 * The fabric and PCI functions where no controller hands them out: `vhpc
 * run` on one machine and the Slurm holder.  A job claims a VLAN or pkey
 * of the cluster file's pool, the fabric subnet that goes with it, and
 * the functions of the classes it asks for from this node's list, each by
 * an flock on a file of the run dir (<run dir>/fabric/): held while the
 * claiming process lives, gone with it whatever way it ends, so two jobs
 * on this machine never hold the same VLAN or function.
 */
#ifndef VHPC_LIB_FABRIC_LOCAL_H
#define VHPC_LIB_FABRIC_LOCAL_H

#include <stdbool.h>
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fabric.h"
#include "lib/inet.h"
#include "lib/jobspec.h"

#define FABRIC_LOCAL_MAX NODE_PCI_MAX

struct fabric_claim {
	bool rdma;
	const char *link;              /* the cluster file's (lives as long as it) */
	int vlan, pkey;
	struct ipv4net subnet;
	int npci;
	char pci[FABRIC_LOCAL_MAX][PCI_ADDR_LEN + 1];
	const char *pci_v[FABRIC_LOCAL_MAX];  /* na_job_spec's pci */
	int pci_guest[FABRIC_LOCAL_MAX];      /* this node's guest index */
	int fds[FABRIC_LOCAL_MAX + 1];        /* the locks; -1 none */
	int nfds;
	const struct cluster_fabric_node *node;  /* this node's entry (na_job_spec's fabric_node) */
};

/* For nguests guests of js on node `node`: the fabric when js asks or
 * may have it (auto: where this node has the link), and each guest's
 * functions.  first >= 0 (Slurm: its job id): the tag first modulo the
 * pool, which every node of the job derives alike, and no other; -1: the
 * lowest free one.  -1 and why: --rdma without a fabric here, an
 * exhausted pool, too few free functions. */
int fabric_local_claim(const struct cluster_cfg *cl, const char *node, const struct job_spec *js, int nguests,
		       long long first, struct fabric_claim *c, struct verr *err);
void fabric_local_release(struct fabric_claim *c);

#endif
