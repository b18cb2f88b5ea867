/* vhpc-hv settings: from the command line and/or a YAML file, then checked
 * and turned into a plan (guest nodes, vCPU placement, topology). */
#ifndef HV_CONFIG_H
#define HV_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "hv.h"
#include "lib/config.h"
#include "lib/err.h"

struct opt_node {              /* YAML: host_node may be absent */
	long long v;
	bool set;
};

struct hv_numa_cfg {
	uint64_t mem;
	char *cpus;
	struct opt_node host_node;
};

/* ------------------------------------------------------ device options
 *
 * Each device file declares its option with HV_DEVICE_OPTION: the same
 * cf_schema binds the YAML key (a mapping, a list of mappings, or a string
 * in the command-line form) and the command line `--NAME k=v[,k=v...]`
 * (a bare `k` sets a boolean; a bare word is the positional key's value).
 * check() validates one instance and fills what it derives. */
#define HV_MAX_DEVOPTS 16

struct hv_config;

struct hv_devopt {
	const char *name;              /* --NAME and the YAML key NAME */
	const char *usage;             /* "tap=NAME[,mac=MAC]..." */
	const struct cf_schema *schema;
	int max;                       /* instances allowed */
	const char *positional;        /* key a bare word sets, or NULL */
	bool arg_optional;             /* `--NAME` alone is allowed */
	int (*check)(void *inst, const char *where, struct verr *err);
};

struct hv_devset {
	const struct hv_devopt *opt;
	void **item;                   /* schema->size bytes each */
	char **where;                  /* "--net tap=.." or "file:line:col" */
	size_t n;
	bool from_cli;
};

#define HV_DEVICE_OPTION(var)                                                  \
	static const struct hv_devopt *const hv_devopt_ptr_##var               \
		__attribute__((used, section("hv_devopts"), aligned(8))) = &var

/* The registered options, in link order. */
int hv_devopts(const struct hv_devopt *const **list);
/* Instances of opt in c (0 when none given). */
size_t hv_dev_count(const struct hv_config *c, const struct hv_devopt *opt);
void *hv_dev_get(const struct hv_config *c, const struct hv_devopt *opt, size_t i);
const char *hv_dev_where(const struct hv_config *c, const struct hv_devopt *opt, size_t i);

/* Used by config.c: one command-line occurrence, a YAML node, freeing. */
int hv_devset_add_cli(struct hv_devset *s, const char *arg, struct verr *err);
int hv_devset_yaml(const cf_doc *d, const cf_node *n, void *dst, struct verr *err);
void hv_devset_free(struct hv_devset *s);
int hv_devsets_check(struct hv_config *c, struct verr *err);

/* --seccomp-probe[=CALL]: the forbidden call to make once the allowlist
 * is in force. */
enum { HV_PROBE_NONE, HV_PROBE_EXECVE, HV_PROBE_TIOCSTI, HV_PROBE_CONNECT };

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
	bool seccomp;               /* the allowlist once set up (sandbox.c) */
	int seccomp_probe;          /* then a forbidden call (HV_PROBE_*): the filter's own test */
	char *restore;              /* a snapshot to start from instead of booting */
	bool paused;                /* start with the vCPUs parked until "resume" */
	struct hv_devset dev[HV_MAX_DEVOPTS];   /* one per registered option */
	int ndevopts;
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

/* The YAML schema: the fixed keys plus one per device option. */
const struct cf_schema *hv_config_schema(void);

void hv_config_defaults(struct hv_config *c);
/* Parses argv; --config FILE is read first, other options override it.
 * Returns 0, or -1 with err set (usage problem), or 1 for --help. */
int hv_config_parse(struct hv_config *c, int argc, char **argv, struct verr *err);
void hv_config_free(struct hv_config *c);
int hv_plan_make(const struct hv_config *c, struct hv_plan *p, struct verr *err);
void hv_usage(FILE *f);

#endif
