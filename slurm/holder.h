/*
 * vhpc-slurmjob internals (private to slurm/): the process that holds a
 * Slurm job's guests on one node, from the job's extern step until the
 * job ends (slurm/README.md, "How it works").
 */
#ifndef VHPC_SLURM_HOLDER_H
#define VHPC_SLURM_HOLDER_H

#include "lib/chan.h"
#include "lib/err.h"
#include "slurm/slurm.h"

#include <stddef.h>
#include <stdint.h>

/* derive.c: what all nodes of a job agree on from the job id and the
 * site secret alone. */
void vs_job_key(const uint8_t *secret, size_t slen, uint32_t job, uint8_t key[CHAN_KEY_LEN]);
uint32_t vs_job_vni(const uint8_t *secret, size_t slen, uint32_t job);
/* The secret file: root's, mode 0600, at least 16 bytes. */
int vs_secret_load(const char *path, uint8_t *buf, size_t max, size_t *len, struct verr *err);

/* What the admin gives vhpc-slurmjob about the site (plugstack.conf). */
struct vs_site {
	const char *secret;        /* the site secret's file */
	const char *peers;         /* NAME ADDRESS: underlay addresses; NULL = resolve names */
	const char *cpus;          /* NAME CPULIST: a node's CPUs of its machine (several
	                            * slurmd on one machine); NULL = all of them */
};

/* peers.c: the value of node's line of a file of "NAME VALUE" lines. */
int vs_node_value(const char *path, const char *node, char *val, size_t len, struct verr *err);
/* A node's underlay address (where its VXLAN ends), from the peers file
 * when one is given, else the name resolved as IPv4. */
int vs_underlay_addr(const char *peers_file, const char *node, uint32_t *addr, struct verr *err);

/* relay.c: `vhpc-slurmjob task ...`, a task run in a VM through its agent. */
int vs_task_relay(int argc, char **argv);

/* The node agent's job id for Slurm job `job` on the node at place `node`
 * of its node list: "<job>s<node in base 32>", which no other scheduler's
 * ids look like (vhpc-ctld's hold an 'x', `vhpc run`'s are hex), so test
 * clusters sharing a machine never collide. */
int vs_local_id(uint32_t job, int node, char *buf, size_t len);

#endif
