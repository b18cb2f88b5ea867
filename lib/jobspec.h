/*
 * A job as users describe it (vhpc run flags or a job YAML), and the
 * files every guest of a job gets from it.
 */
#ifndef VHPC_LIB_JOBSPEC_H
#define VHPC_LIB_JOBSPEC_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/config.h"
#include "lib/drivers.h"

enum vhpc_map_by { MAP_BY_NODE = 0, MAP_BY_SLOT };
extern const char *const vhpc_map_by_names[];

/* A job: from `vhpc run` flags or a job YAML (configs/jobs/). */
struct job_spec {
	char *name;
	long long guests;        /* -N */
	long long ranks;         /* -n */
	long long vcpus;         /* per guest; 0 = ranks per guest, or what fits */
	uint64_t mem;            /* per guest */
	char *image;
	char *image_id;          /* the image's sha256 id: vhpc-ctld resolves image to it at
	                          * submit, so the job runs that content whatever is pushed later */
	char *tuning;
	int driver;              /* index into vhpc_driver_names (lib/drivers.h); -1 = the cluster's default */
	long long timeout;       /* seconds, whole job */
	bool oversubscribe;      /* guests may share host cores */
	int map_by;              /* enum vhpc_map_by: rank order across guests */
	bool vmshm;              /* shared-memory BTL between co-located guests */
	bool single_copy;        /* container guests sharing vmshm also share a pod, so large
	                          * messages cross once; false: no pod, the job can be
	                          * checkpointed (kvm guests have no single copy either way) */
	uint64_t scratch;        /* per guest: an empty writable /scratch of this size; 0 = none */
	struct cf_strlist command;
	struct cf_strmap env;
	char *workdir;           /* where it was submitted (absolute); NULL = none */
	struct cf_strlist binds; /* the job's own SRC[:DST][:ro] (lib/binds.h) */
	int rdma;                /* enum job_rdma (lib/fabric.h): auto, on, off */
	struct cf_strlist devices; /* CLASS[:N]: N PCI functions of CLASS per guest */
};
extern const struct cf_schema job_spec_schema;
#define JOB_SCRATCH_MIN (16ull << 20)
#define JOB_SCRATCH_MAX (1ull << 46)
/* Fills the defaults that the cluster file does not override. */
void job_spec_defaults(struct job_spec *j);
int job_spec_load(const char *path, struct job_spec *j, struct verr *err);
/* Checks relations between fields (ranks >= guests, ...). */
int job_spec_check(const struct job_spec *j, struct verr *err);
void job_spec_free(struct job_spec *j);
/* The /etc/hosts (guest i named g<i> at addrs[i], after localhost) and the
 * Open MPI hostfile (g<i> slots=ranks[i] max_slots=ranks[i]) of a job's n
 * guests; malloc'd, NULL when out of memory. */
char *job_hosts_text(const uint32_t *addrs, int n);
char *job_hostfile_text(const int *ranks, int n);

#endif
