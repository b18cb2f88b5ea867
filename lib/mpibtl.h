/*
 * Which of Open MPI's byte transfer layers (BTLs, under the ob1 PML) a
 * job's ranks take, the one rule for `vhpc run`'s mpirun line
 * (scheduler/launch.c) and for the environment of tasks under Slurm
 * (slurm/holder.c).  ob1 takes, per pair of ranks, the reachable BTL of
 * highest exclusivity: vader within a guest, vmshm between guests of one
 * host (above vader's), ofi over the fabric (just below vader's), tcp
 * (far below) only where none of those reaches.
 */
#ifndef VHPC_LIB_MPIBTL_H
#define VHPC_LIB_MPIBTL_H

#include <stdbool.h>
#include <stddef.h>

/* The libfabric provider the ofi BTL takes on the fabric: verbs UD with
 * rxd's reliability.  Open MPI 4.1's ofi BTL refuses ofi_rxm (no
 * FI_DELIVERY_COMPLETE), and its RC path is the only other one
 * (tests/fabric/README.md). */
#define MPIBTL_FABRIC_PROVIDER "verbs;ofi_rxd"

/* "self,vader,vmshm,ofi,tcp" with the ones a job has.  vader: false where
 * ranks of two guests could take each other for local and vader between
 * them would crash (Slurm's PMIx calls every rank of a node local). */
void mpibtl_list(char *buf, size_t len, bool vader, bool vmshm, bool fabric);

/* The ofi BTL's settings for a job on the fabric: MCA names and values,
 * ending with { NULL, NULL }. */
extern const char *const mpibtl_fabric_mca[][2];

#endif
