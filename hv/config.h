/* vhpc-hv settings: from the command line and/or a YAML file, then checked
 * and turned into a plan (guest nodes, vCPU placement, topology). */
#ifndef HV_CONFIG_H
#define HV_CONFIG_H

#include <stdio.h>

#include "hv.h"
#include "vhpc.h"

struct opt_node {              /* YAML: host_node may be absent */
	long long v;
	bool set;
};

struct hv_numa_cfg {
	uint64_t mem;
	char *cpus;
	struct opt_node host_node;
};

struct hv_config {
	char *kernel, *initrd, *cmdline;
	long long vcpus;
	uint64_t mem;
	struct cf_list numa;        /* of struct hv_numa_cfg */
	struct opt_node host_node;
	char *cpu_affinity;
	char *topology;
	char *hugepages;            /* NULL, "2M", "1G" */
	long long prefault_threads; /* 0 = number of CPUs allowed */
	bool prefault;
	char *serial;
	char *control;
	bool require_hw;
	bool debug_exit;
	char *cpuid_hide;
};

/* The checked plan derived from the config. */
struct hv_gnode {
	uint64_t size;
	uint64_t ram_off;          /* offset in the RAM file */
	int host_node;             /* -1: no binding */
	int ncpus;
	int cpus[HV_MAX_VCPUS];    /* vCPU indexes */
};

struct hv_plan {
	int nvcpus;
	int nnodes;
	struct hv_gnode node[HV_MAX_NODES];
	int vcpu_node[HV_MAX_VCPUS];
	int vcpu_host_cpu[HV_MAX_VCPUS];  /* -1: not pinned */
	uint32_t apic_id[HV_MAX_VCPUS];
	int sockets, cores, threads;      /* cores per socket, threads per core */
	int core_bits, thread_bits;       /* APIC ID field widths */
	uint64_t page_size;               /* 4K or the hugepage size */
	uint64_t mem;
	int hide_ecx1, hide_edx1;         /* CPUID.1 bits to clear */
	int hide_ebx7;                    /* CPUID.7.0 EBX bits to clear */
};

extern const struct cf_schema hv_config_schema;

void hv_config_defaults(struct hv_config *c);
/* Parses argv; --config FILE is read first, other options override it.
 * Returns 0, or -1 with err set (usage problem), or 1 for --help. */
int hv_config_parse(struct hv_config *c, int argc, char **argv, struct verr *err);
void hv_config_free(struct hv_config *c);
int hv_plan_make(const struct hv_config *c, struct hv_plan *p, struct verr *err);
void hv_usage(FILE *f);

#endif
