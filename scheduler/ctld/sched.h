/*
 * Gang scheduling with backfill, as pure functions over a snapshot of the
 * cluster, so every decision can be tested without daemons.
 *
 * A job's guests start together or not at all.  Guests are packed onto as
 * few nodes as possible, each guest on one NUMA node when it fits there
 * (cores and memory), else across the NUMA nodes of one node.  A guest that
 * asks for PCI functions of a class goes only where that many are free, and
 * one that needs the fabric only to a node that has it.  The queue is
 * FIFO; a later job may start before the head only when it fits now and
 * cannot delay the head's reserved start (EASY backfill).  A restart from
 * a checkpoint is one more job of that queue, whose guests may only go
 * where its checkpoint's parts can be restored (struct sched_parts).
 */
#ifndef VHPC_SCHED_SCHED_H
#define VHPC_SCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/fabric.h"

#define SCHED_MAX_NUMA   16
#define SCHED_MAX_GUESTS 4096
#define SCHED_MAX_CLASSES 16             /* device classes a node offers */

/* A node's PCI functions of one class, for passthrough: each is held by
 * one guest at a time, like a core. */
struct sched_dev {
	char cls[FABRIC_CLASS_MAX + 1];
	int total, used;
};

struct sched_node {
	bool up;
	int nnuma;
	int cores[SCHED_MAX_NUMA];       /* per NUMA node */
	uint64_t mem[SCHED_MAX_NUMA];
	int used_cores[SCHED_MAX_NUMA];
	uint64_t used_mem[SCHED_MAX_NUMA];
	bool fabric;                     /* it has the cluster's RDMA fabric */
	int ndev;
	struct sched_dev dev[SCHED_MAX_CLASSES];
};

struct sched_devreq {
	char cls[FABRIC_CLASS_MAX + 1];
	int n;                           /* per guest */
};

struct sched_req {
	int nguests;
	int vcpus;                       /* per guest */
	uint64_t mem;                    /* per guest */
	bool rdma;                       /* only nodes with the fabric */
	int ndev;
	struct sched_devreq dev[JOB_DEVICES_MAX];
};

struct sched_take {
	int numa;
	int cores;
	uint64_t mem;
};

struct sched_guest {
	int node;
	int ntakes;                      /* 1 = on one NUMA node */
	struct sched_take take[SCHED_MAX_NUMA];
};

struct sched_alloc {
	int nguests;
	struct sched_guest *g;           /* nguests entries, caller-owned */
};

/* A restart's guests are not free to go anywhere: each part of its
 * checkpoint (the guests one node saved, which share that node's vmshm
 * region) goes whole to a node of its own: the one that saved it, or, when
 * the cluster's checkpoints are shared (anywhere), any other. */
struct sched_part {
	int home;                        /* the node that saved it; -1: no longer one of the nodes */
	int nguests;
	int *guests;                     /* indices into the job's guests */
};

struct sched_parts {
	bool anywhere;
	int nparts;
	struct sched_part *part;
};

/* Finds an allocation for req on the free part of nodes; 0 or -1. */
int sched_fit(const struct sched_node *nodes, int nnodes, const struct sched_req *req,
	      struct sched_alloc *out);
/* The same for a restart: each part on a node it may go to, those guests
 * together, out->g[] in the job's guest order; 0 or -1. */
int sched_fit_parts(const struct sched_node *nodes, int nnodes, const struct sched_req *req,
		    const struct sched_parts *parts, struct sched_alloc *out);
/* Adds (sign +1) or releases (-1) an allocation's usage. */
void sched_apply(struct sched_node *nodes, const struct sched_req *req,
		 const struct sched_alloc *a, int sign);
/* Adds (+1) or releases (-1) one guest's functions of req on a node. */
void sched_take_extras(struct sched_node *n, const struct sched_req *req, int sign);
/* Whether req could ever fit on the cluster's up nodes when empty. */
bool sched_feasible(const struct sched_node *nodes, int nnodes, const struct sched_req *req);
/* The same for a restart's parts (parts NULL: sched_feasible). */
bool sched_feasible_parts(const struct sched_node *nodes, int nnodes, const struct sched_req *req,
			  const struct sched_parts *parts);
/* Number of distinct nodes an allocation uses. */
int sched_nodes_used(const struct sched_alloc *a);

struct sched_running {
	struct sched_req req;
	struct sched_alloc alloc;
	int64_t end;                     /* start + time limit */
};

struct sched_pending {
	struct sched_req req;
	int64_t limit;                   /* seconds */
	const struct sched_parts *parts; /* a restart's; NULL: anywhere */
	/* out: */
	bool start;
	struct sched_alloc alloc;        /* g must point at req.nguests entries */
};

/*
 * One scheduling pass at time now.  nodes hold current usage (running jobs
 * applied).  queue is in FIFO order; each job that may start now gets
 * start = true and an allocation, and its usage is applied to nodes.
 * Returns how many started, and the head's reserved start in *head_start
 * (-1 when the queue is empty or the head started or can never run).
 */
int sched_pass(struct sched_node *nodes, int nnodes,
	       const struct sched_running *running, int nrunning,
	       struct sched_pending *queue, int nqueue, int64_t now,
	       int64_t *head_start);

#endif
